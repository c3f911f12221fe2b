#!/usr/bin/env bash
# tailmark.torch's all_reduce over two rails, exact (issue 38, item 3): 2
# nodes x 1 rank (tt_mesh 2, TT_RAILS=2: each node's daemon on eth0 and on
# eth1, each rail a bridge of its own). rails.py: all_reduce SUM at
# TT_COUNTS (1, 4099, 1 M + 7 and 4 M elements: up to 32 MiB, some 23 k
# data frames from each rank) in TT_DTYPES (int32, int64, float32, float64)
# (auto; the ring and recursive doubling too from 1 M up), each rank
# holding every rank's seeded input: integers equal, floats equal bit for
# bit to a + b (at 2 ranks one addition per element, the same in either
# order). Then:
#  1. both ranks exit 0, every all_reduce exact;
#  2. both rails carried the data, by the kernel's counters: per node, the
#     frames out of each rail's veth (tx_packets, from before the sessions
#     to after the daemon's exit) are at least MIN_SHARE % (25) of the two
#     rails' together (measured 37-63 %). ACKs and the handshake are in
#     them too (some 4 %): which rail they take is left open;
#  3. the kernel and the daemon agree: eth0 and eth1 sent every frame the
#     daemon did, and nothing else (the nodes' kernels send nothing: no
#     address on a rail, IPv6 off, no gloo here);
#  4. at SIGINT each daemon exits 0 with nothing failed (service, flows,
#     messages), no session in memory (one rank per node), its 2 sessions to
#     the other node's primary address, closed. (A path's deaths are
#     printed, not checked: on two vCPUs a path dies now and then, 0-1 a
#     run, and one that died in the last all_reduce would stay dead: its
#     probes ride on data.)
# TT_RAILS=1 runs the same on one rail (2. fails: rail 1 carries nothing);
# TT_WRONG=DTYPE corrupts one expected element of that dtype (1. fails).
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require
TT_RAILS=${TT_RAILS:-2}
COUNTS=${TT_COUNTS:-1,4099,1048583,4194304}
DTYPES=${TT_DTYPES:-int32,int64,float32,float64}
MIN_SHARE=25

# tx NODE DEV: DEV's tx_packets in node NODE's namespace (0 where there is
# no DEV: TT_RAILS=1).
tx() { ip netns exec "${TT_NS[$1]}" cat "/sys/class/net/$2/statistics/tx_packets" 2>/dev/null || echo 0; }

start=$SECONDS
tt_mesh 2
# From here: the daemons are up with no session yet.
for k in 0 1; do for i in 0 1; do TX0[k * 2 + i]=$(tx $k eth$i); done; done
tt_run rails 120 "$TT_DIR/rails.py" "$COUNTS" "$DTYPES" ${TT_WRONG:+"$TT_WRONG"}
if tt_all_ok && grep -q '^ok: [0-9]* all_reduces exact$' "$TM_WORK/rails.0.out"; then
    tm_log "ok: 2 ranks, $TT_RAILS rail(s), $DTYPES at $COUNTS: $(tail -1 "$TM_WORK/rails.0.out")" \
        "($((SECONDS - start)) s)"
else
    tm_fail "2 ranks, $TT_RAILS rail(s): a rank failed"
    tt_show rails
fi
kill -INT "${TT_PID[@]}" 2>/dev/null
for k in 0 1; do
    wait "${TT_PID[k]}"
    TM_RC=$?
    # The counters once the daemon is gone: all it sent is counted.
    e0=$(($(tx $k eth0) - TX0[k * 2])) e1=$(($(tx $k eth1) - TX0[k * 2 + 1]))
    tm_expect_rc d$k 0 || continue
    tm_check d$k "d['service']['failed'] == 0" "d['flows_failed'] == 0" "d['messages_failed'] == 0" \
        "d['packets_local'] == 0" "len(d['sessions']) == 2" \
        "all(s['peer'] == '${TT_IP[1 - k]}:47474' and s['end'] in ('closed', 'peer_closed') for s in d['sessions'])"
    if out=$("$TT_PY" - "$TM_WORK/d$k.json" "$e0" "$e1" "$MIN_SHARE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
eth, least = [int(sys.argv[2]), int(sys.argv[3])], float(sys.argv[4])
paths = [sum(p["sent"] for p in d["paths"] if p["rail"] == r) for r in (0, 1)]
share = [100.0 * e / max(1, sum(eth)) for e in eth]
deaths = sum(p["deaths"] for p in d["paths"])
print(f"eth0 sent {eth[0]} frames ({share[0]:.1f} %), eth1 {eth[1]} ({share[1]:.1f} %); the daemon: "
      f"{d['packets_tx']} frames, its paths' data {paths[0]} on rail 0 and {paths[1]} on rail 1, "
      f"{d['reliability']['retx_pkts']} retransmitted, {deaths} path deaths")
bad = [f"rail {r} carried {share[r]:.1f} % of the frames (want >= {least:g} %)" for r in (0, 1) if share[r] < least]
if sum(eth) != d["packets_tx"]:
    bad.append(f"the rails sent {sum(eth)} frames, the daemon {d['packets_tx']}")
for b in bad:
    print("    " + b)
sys.exit(1 if bad else 0)
PY
    ); then
        tm_log "ok: node $k: $out"
    else
        tm_fail "node $k: $out"
    fi
done
tm_log "$((SECONDS - start)) s"
tm_finish
