#!/usr/bin/env bash
# Telemetry. A loopback run with --exit-when-done --linger finishes its
# messages and then keeps serving, its counters final, until SIGTERM. While it
# lingers, DPDK's own /usr/bin/dpdk-telemetry.py (run with Debian's
# /usr/bin/python3, -f <file-prefix>, commands on stdin) reads
# /tailmark/stats, /tailmark/flow,F, /tailmark/drops and /tailmark/lcores.
# After SIGTERM the summary JSON is written; every telemetry number must equal
# the summary's exactly, the per-flow cursors equal --messages, the lcore
# roles match the plan, and a bad flow parameter answers null.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

TELE=/usr/bin/dpdk-telemetry.py
PY=/usr/bin/python3
if [ ! -x "$PY" ] || [ ! -e "$TELE" ]; then
    tm_fail "$TELE or $PY missing (Debian package dpdk-dev)"
    tm_finish
fi

FLOWS=3 MSGS=1500 SIZE=8192 RING=32
name=linger
tm_start "$name" 60 -- --vdev=net_ring0 -l 0,1 -- --flows $FLOWS --messages $MSGS --msg-size $SIZE \
    --ring-size $RING --exit-when-done --linger --stats-period 0
tpid=$TM_PID
prefix=${TM_PREFIXES[-1]}
lingering() { grep -q 'done; --linger' "$TM_WORK/$name.err" 2>/dev/null; }
tm_await "$name" "$tpid" 30 lingering "never reached 'done; --linger'"

cmds=$(printf '/tailmark/stats\n/tailmark/drops\n/tailmark/lcores\n/tailmark/flow,99\n/tailmark/flow,x\n')
for ((f = 0; f < FLOWS; f++)); do cmds+=$'\n'"/tailmark/flow,$f"; done
if ! printf '%s\n' "$cmds" | "$PY" "$TELE" -f "$prefix" >"$TM_WORK/tele.out" 2>"$TM_WORK/tele.err"; then
    tm_fail "dpdk-telemetry.py failed"
    sed 's/^/    /' "$TM_WORK/tele.err"
fi

dpid=$(pgrep -P "$tpid")
kill -TERM "$dpid"
wait "$tpid"
TM_RC=$?
tm_expect_rc "$name" 0
tm_transfer_checks "$name" $FLOWS $MSGS $SIZE 1500 message
tm_check "$name" "d['exit_reason'] == 'done'"

# Each output line of dpdk-telemetry.py is one JSON reply: {"<cmd>": value}.
check_py=$(cat <<'PY_EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
s = json.load(open(sys.argv[2]))
flows, msgs, ring = map(int, sys.argv[3:6])
replies = [json.loads(l) for l in lines]
bad = []
def want(cond, what):
    if not cond:
        bad.append(what)
want(len(replies) == 5 + flows, f"{len(replies)} replies, want {5 + flows}")
by = {}
flow_replies = []
for r in replies:
    ((k, v),) = r.items()
    if k == "/tailmark/flow":
        flow_replies.append(v)
    else:
        by[k] = v
st = by.get("/tailmark/stats") or {}
for k in ["messages_requested", "messages_sent", "messages_completed", "messages_verified",
          "verify_errors", "completion_writes", "packets_tx", "packets_rx", "bytes_payload",
          "drops_total", "tx_dropped", "msg_size", "flows"]:
    want(st.get(k) == s[k], f"stats {k}={st.get(k)!r}, summary {s[k]!r}")
want(st.get("mode") == "loopback" and st.get("done") == 1 and st.get("in_flight") == 0
     and st.get("flows_stalled") == 0, f"stats mode/done/in_flight/flows_stalled: {st}")
dr = by.get("/tailmark/drops") or {}
want(set(dr) == set(s["drops"]) | {"total"}, "drops: reasons differ from the summary's")
for k, v in s["drops"].items():
    want(dr.get(k) == v, f"drops {k}={dr.get(k)!r}, summary {v}")
want(dr.get("total") == s["drops_total"], "drops total")
lc = by.get("/tailmark/lcores") or {}
want(lc.get("tsc_hz", 0) > 0, "lcores tsc_hz")
want(lc.get("lcore_0", {}).get("roles") == "control", f"lcore_0: {lc.get('lcore_0')}")
l1 = lc.get("lcore_1", {})
want(l1.get("roles") == "tx+rx+consumer" and l1.get("busy_cycles", 0) > 0 and l1.get("idle_cycles", 0) > 0,
     f"lcore_1: {l1}")
# The rx lcore's steering view: the summary's, number for number.
want(lc.get("rx_steering") == s["rx_steering"]["mode"] == "queue", f"rx_steering {lc.get('rx_steering')!r}")
(lane,) = s["rx_steering"]["lcores"]
want(lane["lcore"] == 1 and l1.get("rx_queue") == lane["queue"] and l1.get("rx_packets") == lane["packets_rx"]
     and l1.get("placed") == lane["placed"] == s["packets_placed"] and l1.get("handed_out") == 0
     and l1.get("handed_in") == 0, f"lcore_1 rx: {l1}, summary {lane}")
# flow,99 and flow,x are invalid: null; then flows 0..F-1 in order
want(flow_replies[:2] == [None, None], f"invalid flow params: {flow_replies[:2]}")
want(len(flow_replies) == 2 + flows, "flow replies")
for f, v in enumerate(flow_replies[2:]):
    v = v or {}
    want(v.get("flow") == f and v.get("sent") == msgs and v.get("consumed") == msgs
         and v.get("released") == msgs and v.get("ring_size") == ring
         and v.get("memzone") == f"tailmark_ring_{f}" and v.get("stalled") == 0
         and v.get("next_complete") == 0, f"flow {f}: {v}")
for b in bad:
    print("    " + b)
sys.exit(1 if bad else 0)
PY_EOF
)
if ! out=$("$PY" -c "$check_py" "$TM_WORK/tele.out" "$TM_WORK/$name.json" $FLOWS $MSGS $RING); then
    tm_fail "telemetry vs summary"
    printf '%s\n' "$out"
    sed 's/^/    /' "$TM_WORK/tele.out"
else
    tm_log "ok: /tailmark/stats, drops, lcores and flow,0..$((FLOWS - 1)) match the summary exactly"
fi
tm_finish
