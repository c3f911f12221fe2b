#!/usr/bin/env bash
# The fault shim (drivers/fault_shim.*, --fault) on net_ring loopback: tailmark
# survives every fault and never completes a message falsely (recovery by
# retransmission between two processes is tests/integration/reliability.sh):
#   dup=1      every duplicate recognised (duplicate or already_completed),
#              each message completed exactly once, all verified;
#   reorder    packets held back behind later ones: every message completes,
#              verified, nothing dropped;
#   drop=1     nothing arrives: no completion, every packet the shim saw is
#              counted dropped; the retransmission timer probes
#              --retry-limit times, then both flows are reported failed
#              with all their messages, exit 1 (never a hang);
#   corrupt=1  one bit flipped past Ethernet in every packet: whatever
#              completes is verified byte for byte (verify_errors 0), and
#              every completion is a verified one.
# A fixed seed replays the same decisions: two corrupt runs agree exactly
# (without NACKs and timer, whose timing would change what is sent). The
# shim leaves the session's own packets (the handshake with itself, CLOSE)
# alone: `passed` counts them, and they are the only ones that arrive in the
# drop=1 case.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

F=2 M=200 S=4096
PKTS=$(tm_pkts $S 1500)
run() {
    local name=$1 fault=$2 dur=$3
    shift 3
    tm_run "$name" 40 -- --vdev=net_ring0 -l 0,1 -- --flows $F --messages $M --msg-size $S --ring-size 16 \
        --exit-when-done --duration "$dur" --stats-period 0 --fault "$fault" "$@"
}

run dup "dup=1,seed=5" 30
tm_expect_rc dup 0 && tm_transfer_checks dup $F $M $S 1500 message &&
    tm_check dup \
        "d['fault']['duplicated'] > 0" \
        "d['fault']['seen'] + d['fault']['passed'] == d['packets_tx']" \
        "d['fault']['passed'] == d['control_tx'] == d['control_rx'] == 4" \
        "d['packets_rx'] == d['packets_tx'] + d['fault']['duplicated']" \
        "d['drops']['duplicate'] + d['drops']['already_completed'] == d['fault']['duplicated']" \
        "d['drops_total'] == d['fault']['duplicated']" &&
    tm_log "ok: dup=1: $F x $M messages completed once each, every duplicate recognised"

run reorder "reorder=0.5,seed=7" 30
tm_expect_rc reorder 0 && tm_transfer_checks reorder $F $M $S 1500 message &&
    tm_check reorder \
        "d['fault']['reordered'] > 0" \
        "d['packets_rx'] == d['packets_tx'] == $F * $M * $PKTS + d['reliability']['retx_pkts'] + d['control_tx']" \
        "d['drops_total'] == d['reliability']['retx_rx']" \
        "d['packets_streamed'] == 0" &&
    tm_log "ok: reorder=0.5: every message completed and verified, in any arrival order"

# The same, and duplicates, with the payload placed by streaming stores
# (--stream-min): packets out of offset order take the copy without the CRC,
# and the CRC is read back from the region at completion.
run reorder_stream "reorder=0.5,dup=0.2,seed=9" 30 --stream-min 4K
tm_expect_rc reorder_stream 0 && tm_transfer_checks reorder_stream $F $M $S 1500 message &&
    tm_check reorder_stream \
        "d['fault']['reordered'] > 0" \
        "d['fault']['duplicated'] > 0" \
        "d['packets_streamed'] == d['packets_placed'] == $F * $M * $PKTS" \
        "d['drops_total'] == d['fault']['duplicated'] + d['reliability']['retx_rx']" &&
    tm_log "ok: reorder=0.5,dup=0.2 with --stream-min 4K: every packet streamed, every message completed once and verified"

run drop "drop=1" 30 --rto-us 1000 --retry-limit 3
tm_expect_rc drop 1 && tm_check drop \
    "d['messages_completed'] == 0" \
    "d['completion_writes'] == 0" \
    "d['packets_rx'] == d['fault']['passed'] == d['control_rx']" \
    "d['fault']['dropped'] == d['fault']['seen'] == d['packets_tx'] - d['control_tx']" \
    "d['packets_tx'] == d['messages_sent'] * $PKTS + d['reliability']['retx_pkts'] + d['control_tx']" \
    "d['reliability']['retx_pkts'] == d['reliability']['probes'] > 0" \
    "d['reliability']['rto_expired'] == $F * 4" \
    "d['flows_failed'] == $F" \
    "d['messages_failed'] == $F * $M" \
    "all(f['state'] == 'retry_limit' for f in d['per_flow'])" \
    "d['exit_reason'] == 'done'" &&
    tm_log "ok: drop=1: nothing completed, every packet counted dropped; after 3 retries both flows failed, $F x $M messages reported, exit 1"

for n in corrupt_a corrupt_b; do
    run $n "corrupt=1,seed=11" 3 --nack-delay-us 0 --rto-us 10000000 --rto-max-us 10000000
done
for n in corrupt_a corrupt_b; do
    tm_check $n \
        "d['verify_errors'] == 0" \
        "d['completion_writes'] == d['messages_verified'] == d['messages_completed']" \
        "d['fault']['corrupted'] == d['fault']['seen'] == d['packets_rx'] - d['fault']['passed']" \
        "d['drops_total'] > 0"
done
if ! out=$(python3 - "$TM_WORK/corrupt_a.json" "$TM_WORK/corrupt_b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ["messages_completed", "completion_writes", "packets_tx", "packets_rx", "drops"]
diff = [k for k in keys if a[k] != b[k]]
print(", ".join(f"{k}: {a[k]} vs {b[k]}" for k in diff) if diff else "same")
sys.exit(1 if diff else 0)
PY
); then
    tm_fail "corrupt=1,seed=11 twice: the runs differ: $out"
else
    tm_log "ok: corrupt=1: no false completion; the same seed replayed the same outcome"
fi
tm_finish
