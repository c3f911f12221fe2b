#!/usr/bin/env bash
# Consumers in another process. tailmarkd runs loopback with
# --consumer-lcores none: no consumer lcore, its completion rings are consumed
# by tailmark-consumer, a DPDK secondary process (--proc-type=secondary, the
# daemon's --file-prefix; lib/tailmark/consumer.h).
#   1. consumer A attaches to tailmark_ring_0/1, verifies every byte of the
#      first 500 messages of each flow, releases them, and exits (it "dies");
#   2. the daemon keeps running, reports both flows stalled (telemetry
#      /tailmark/flow,F: stalled=1, released=500; stats line stalled=2) and
#      overwrites nothing: exactly released + ring_size messages were sent per
#      flow, no drop;
#   3. consumer K (slowed down by --delay-us) resumes at 500 and is killed
#      with SIGKILL past message 1000; the daemon survives it and reports the
#      flows stalled again at K's last release X (sent == X + ring_size);
#   4. consumer B attaches, resumes at X and verifies the rest of each flow
#      (--until 3000) -- including those completed while nobody consumed;
#   5. --exit-when-done ends the daemon once the external cursors reach the end:
#      exact counts in its summary.
# Part 2 (root: network namespaces): the same across two daemons, a sender
# and a receiver with --consumer-lcores none, the consumer a secondary of the
# receiver; the sender's credits are the consumer process's releases.
# Secondary processes need hugepages: exit 77 (skipped) with a message when
# they cannot be had.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

CONSUMER=${TAILMARK_CONSUMER:-$(dirname "$TAILMARKD")/../tailmark-consumer/tailmark-consumer}
if [ ! -x "$CONSUMER" ]; then
    tm_log "tailmark-consumer not found (set TAILMARK_CONSUMER)"
    exit 1
fi
free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages 2>/dev/null || echo 0)
if [ "${free:-0}" -lt 300 ] || ! grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
    tm_log "SKIP: a secondary process needs hugepages: $free free 2 MiB pages (want 300) or hugetlbfs not on /dev/hugepages (scripts/test.sh reserves them as root)"
    exit 77
fi
# Hugepages, whatever TAILMARK_EAL_MEM says: --no-huge has no secondaries. A
# secondary maps DPDK memory at the primary's addresses; left to the kernel,
# the primary's 16 GiB reservation lands near the top of the address space,
# where a secondary's own mappings (ASan's allocator and shadow under
# --sanitize) may already sit. A fixed base far below them (and above ASan's
# shadow, which ends at 0x10007fff8000) leaves the range free in both.
TM_MEM=(-m 256 --base-virtaddr=0x500000000000)

TELE=/usr/bin/dpdk-telemetry.py
PY=/usr/bin/python3
FLOWS=2 MSGS=3000 SIZE=6000 RING=32 FIRST=500
name=daemon
tm_start "$name" 120 -- --vdev=net_ring0 -l 0,1 -- --consumer-lcores none --flows $FLOWS --messages $MSGS \
    --msg-size $SIZE --ring-size $RING --exit-when-done --stats-period 0.2
tpid=$TM_PID
prefix=${TM_PREFIXES[-1]}
abort() {
    tm_fail "$1"
    kill -KILL "$tpid" 2>/dev/null
    wait "$tpid" 2>/dev/null
    tm_show "$name"
    tm_finish
}
ready() { grep -q '^tailmark.app: mode loopback' "$TM_WORK/$name.err" 2>/dev/null; }
tm_wait_for 30 ready || abort "$name: not set up within 30 s"

# consumer NAME MESSAGES: a secondary process on lcore 0 (the daemon's main
# lcore only sleeps in its control loop here).
consumer() {
    timeout -k 5 60 "$CONSUMER" --proc-type=secondary --file-prefix "$prefix" --no-pci -l 0 \
        --log-level=lib.eal:warning -- --flows $FLOWS --messages "$2" --msg-size $SIZE \
        --summary-json "$TM_WORK/$1.json" "${@:3}" >"$TM_WORK/$1.out" 2>"$TM_WORK/$1.err"
}
# exited_ok NAME RC: a consumer's exit code, its output shown when not 0.
exited_ok() {
    [ "$2" -eq 0 ] && return 0
    tm_fail "consumer $1: exit code $2"
    sed 's/^/    /' "$TM_WORK/$1.out" "$TM_WORK/$1.err"
    return 1
}
# cjson NAME EXPR...: assertions on a consumer's JSON.
cjson() {
    local n=$1
    shift
    "$PY" - "$TM_WORK/$n.json" "$@" <<'PY_EOF'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [e for e in sys.argv[2:] if not eval(e, {"d": d})]
for e in bad:
    print(f"    does not hold: {e}    [{d}]")
sys.exit(1 if bad else 0)
PY_EOF
}

consumer A $FIRST
exited_ok A $?
cjson A "d['consumed'] == $FLOWS * $FIRST" "d['verified'] == $FLOWS * $FIRST" "d['verify_errors'] == 0" \
    "d['first'] == [0] * $FLOWS" "d['next'] == [$FIRST] * $FLOWS" "d['ok'] is True" || tm_fail "consumer A counts"

# The daemon, consumer gone: both flows stalled, the window full, nothing dropped.
query() {
    local cmds="/tailmark/stats" f
    for ((f = 0; f < FLOWS; f++)); do cmds+=$'\n'"/tailmark/flow,$f"; done
    printf '%s\n' "$cmds" | "$PY" "$TELE" -f "$prefix" >"$TM_WORK/tele.out" 2>"$TM_WORK/tele.err"
}
# stalled_state MIN_RELEASED [EXACT]: every flow stalled at a released cursor
# >= MIN (== with EXACT), exactly ring_size messages beyond it sent, no drop.
# Prints the cursors.
stalled_state() {
    query || return 1
    "$PY" - "$TM_WORK/tele.out" $FLOWS $RING "$1" "${2:-}" >"$TM_WORK/released.txt" <<'PY_EOF'
import json, sys
flows, ring, low = map(int, sys.argv[2:5])
exact = sys.argv[5] == "exact"
r = [list(json.loads(l).values())[0] for l in open(sys.argv[1]) if l.startswith("{")]
st, fl = r[0], r[1:]
ok = (len(fl) == flows and st["flows_stalled"] == flows and st["drops_total"] == 0
      and st["messages_completed"] == sum(f["released"] for f in fl) and st["in_flight"] == flows * ring
      and all(f["stalled"] == 1 and (f["released"] == low if exact else f["released"] >= low)
              and f["consumed"] == f["released"] and f["sent"] == f["released"] + ring
              and f["next_complete"] == 1 and f["consumer"] == "external" for f in fl))
print(" ".join(str(f["released"]) for f in fl))
sys.exit(0 if ok else 1)
PY_EOF
}
released_at_least() {
    query || return 1
    "$PY" - "$TM_WORK/tele.out" "$1" <<'PY_EOF'
import json, sys
r = [list(json.loads(l).values())[0] for l in open(sys.argv[1]) if l.startswith("{")]
sys.exit(0 if all(f["released"] >= int(sys.argv[2]) for f in r[1:]) else 1)
PY_EOF
}
if tm_wait_for 20 stalled_state $FIRST exact; then
    tm_log "ok: consumer gone: both flows stalled at $FIRST, exactly $RING more sent per flow, nothing dropped"
else
    tm_fail "daemon: flows not reported stalled at $FIRST with a full window (last telemetry below)"
    sed 's/^/    /' "$TM_WORK/tele.out" "$TM_WORK/tele.err"
fi
kill -0 "$tpid" 2>/dev/null || abort "$name: the daemon exited while the consumer was gone"
# The stats line while stalled: 2 x 32 in flight, 1000 of 6000 done.
stall_line() {
    grep -qE "^stats .* drops=0 tx_dropped=0 in_flight=$((FLOWS * RING)) retransmits=0 stalled=$FLOWS done_pct=16.7 sessions=2$" \
        "$TM_WORK/$name.out"
}
tm_wait_for 5 stall_line || tm_fail "$name: no stats line with in_flight=$((FLOWS * RING)) stalled=$FLOWS done_pct=16.7"
grep -q 'flow 0 stalled: message 500 is complete' "$TM_WORK/$name.err" || tm_fail "$name: no 'flow 0 stalled' log"

# Consumer K, slow, killed with SIGKILL once every flow is past message 1000.
KILL_AT=1000
timeout -k 5 60 "$CONSUMER" --proc-type=secondary --file-prefix "$prefix" --no-pci -l 0 \
    --log-level=lib.eal:warning -- --flows $FLOWS --msg-size $SIZE --delay-us 1000 \
    >"$TM_WORK/K.out" 2>"$TM_WORK/K.err" &
kpid=$!
tm_wait_for 30 released_at_least $KILL_AT || tm_fail "consumer K: not past message $KILL_AT within 30 s"
kill -KILL "$(pgrep -P "$kpid")" 2>/dev/null
wait "$kpid" 2>/dev/null
kill -0 "$tpid" 2>/dev/null || abort "$name: the daemon exited after the consumer was killed"
if tm_wait_for 20 stalled_state $KILL_AT; then
    read -r -a X <"$TM_WORK/released.txt"
    tm_log "ok: consumer killed: the daemon runs on, flows stalled at ${X[*]}, exactly $RING more sent, nothing dropped"
else
    tm_fail "daemon: flows not reported stalled after the consumer was killed (last telemetry below)"
    sed 's/^/    /' "$TM_WORK/tele.out" "$TM_WORK/tele.err"
    abort "no stall after SIGKILL"
fi

REST=$((FLOWS * MSGS - X[0] - X[1]))
consumer B 0 --until $MSGS
exited_ok B $?
cjson B "d['consumed'] == $REST" "d['verified'] == $REST" "d['verify_errors'] == 0" \
    "d['first'] == [${X[0]}, ${X[1]}]" "d['next'] == [$MSGS] * $FLOWS" "d['ok'] is True" || tm_fail "consumer B counts"

wait "$tpid"
TM_RC=$?
tm_expect_rc "$name" 0
pkts=$(tm_pkts $SIZE 1500)
req=$((FLOWS * MSGS))
tm_check "$name" \
    "d['exit_reason'] == 'done'" \
    "d['messages_requested'] == $req" \
    "d['messages_sent'] == $req" \
    "d['messages_completed'] == $req" \
    "d['completion_writes'] == $req" \
    "d['packets_placed'] == $req * $pkts" \
    "d['packets_tx'] == $req * $pkts + d['control_tx']" \
    "d['packets_rx'] == $req * $pkts + d['control_rx']" \
    "d['bytes_payload'] == $req * $SIZE" \
    "d['drops_total'] == d['reliability']['retx_rx']" \
    "d['tx_dropped'] == 0" \
    "d['ok'] is True" && tm_log "ok: $req messages consumed and verified in another process, exact counts"
grep -q 'flow 0 resumed' "$TM_WORK/$name.err" || tm_fail "$name: no 'flow 0 resumed' log"

# Regression: a --msg-size list with an external consumer. The daemon counts
# the payload the consumer process released from the sizes of those very
# messages (message i of a flow has the i-th size, in turn); it used to
# multiply the count by the largest size.
name=sizes
tm_start "$name" 60 -- --vdev=net_ring0 -l 0,1 -- --consumer-lcores none --flows 1 --messages 100 \
    --msg-size 1000,3000,200 --ring-size 16 --exit-when-done --stats-period 0
spid=$TM_PID
sprefix=${TM_PREFIXES[-1]}
sready() { grep -q '^tailmark.app: mode loopback' "$TM_WORK/$name.err" 2>/dev/null; }
tm_await "$name" "$spid" 30 sready "not set up within 30 s"
timeout -k 5 60 "$CONSUMER" --proc-type=secondary --file-prefix "$sprefix" --no-pci -l 0 \
    --log-level=lib.eal:warning -- --flows 1 --messages 100 --summary-json "$TM_WORK/S.json" \
    >"$TM_WORK/S.out" 2>"$TM_WORK/S.err"
exited_ok S $?
wait "$spid"
TM_RC=$?
# 34 x 1000 + 33 x 3000 + 33 x 200 bytes over messages 0..99.
tm_expect_rc "$name" 0 && tm_check "$name" "d['messages_completed'] == 100" \
    "d['bytes_payload'] == 34 * 1000 + 33 * 3000 + 33 * 200" &&
    tm_log "ok: an external consumer's bytes counted from each message's own size"

# Two daemons: a sender and a receiver (--mode recv --consumer-lcores none)
# over net_af_packet on a veth pair between two network namespaces, the
# example consumer a secondary of the receiver (it waits for the rings, which
# the session brings). The credits the sender waits for are the consumer
# process's releases, carried back in ACKs.
if [ "$(id -u)" -ne 0 ]; then
    tm_skip_rest "part 2 (send/recv over veth) needs root (network namespaces); part 1 passed"
fi
NA=tm_sca_$$
NB=tm_scb_$$
tm_veth_pair "$NA" "$NB" || { tm_fail "namespace/veth set-up"; tm_finish; }
F2=2 M2=2000 S2=4096
common=(--flows "$F2" --messages "$M2" --msg-size "$S2" --ring-size 64 --exit-when-done --duration 60 --stats-period 0
        --secret $TM_SECRET)
tm_start recv 80 ns "$NB" -- --vdev=net_af_packet0,iface=vethB,framecnt=4096 -l 1 -- --mode recv \
    --consumer-lcores none --src-ip 198.18.0.2 "${common[@]}"
rpid=$TM_PID
rprefix=${TM_PREFIXES[-1]}
rready() { grep -q '^tailmark.app: mode recv' "$TM_WORK/recv.err" 2>/dev/null; }
tm_await recv "$rpid" 30 rready "not set up within 30 s"
ip netns exec "$NB" timeout -k 5 70 "$CONSUMER" --proc-type=secondary --file-prefix "$rprefix" --no-pci -l 0 \
    --log-level=lib.eal:warning -- --flows $F2 --messages $M2 --msg-size $S2 --summary-json "$TM_WORK/C.json" \
    >"$TM_WORK/C.out" 2>"$TM_WORK/C.err" &
cpid=$!
tm_run send 80 ns "$NA" -- --vdev=net_af_packet0,iface=vethA,framecnt=4096 -l 0 -- --mode send \
    --src-ip 198.18.0.1 --dst-ip 198.18.0.2 "${common[@]}"
SEND_RC=$TM_RC
wait "$cpid"
CRC=$?
wait "$rpid"
RECV_RC=$?
req=$((F2 * M2))
[ $CRC -eq 0 ] || { tm_fail "consumer C: exit $CRC"; sed 's/^/    /' "$TM_WORK/C.out" "$TM_WORK/C.err"; }
cjson C "d['consumed'] == $req" "d['verified'] == $req" "d['verify_errors'] == 0" \
    "d['first'] == [0] * $F2" "d['next'] == [$M2] * $F2" || tm_fail "consumer C counts"
TM_RC=$RECV_RC
tm_expect_rc recv 0 && tm_check recv "d['mode'] == 'recv'" "d['exit_reason'] == 'done'" \
    "d['messages_completed'] == $req" "d['completion_writes'] == $req" "d['bytes_payload'] == $req * $S2" \
    "d['drops_total'] == d['reliability']['retx_rx']" "d['acks_tx'] > 0" "d['ok'] is True"
r1=$?
TM_RC=$SEND_RC
tm_expect_rc send 0 && tm_check send "d['messages_sent'] == $req" "d['messages_acked'] == $req" \
    "d['tx_dropped'] == 0" "d['ok'] is True"
r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $CRC -eq 0 ] &&
    tm_log "ok: send -> recv over veth, $req messages consumed and verified by a secondary of the receiver"
tm_finish
