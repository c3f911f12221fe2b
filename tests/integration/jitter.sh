#!/usr/bin/env bash
# tailmark-jitter, which scripts/bench.sh runs beside its figures: the gap
# count on one CPU and, with PEER_CPU, a cache line's round trip between two
# CPUs. The counts are exact: every one of the 5 x 100000 round trips is
# echoed by the peer, and the figures are ordered (min <= median <= max).
# A PEER_CPU equal to CPU, or one the process may not run on, is refused
# with a message naming the argument.
source "$(dirname "$0")/lib.sh"
J=${TAILMARK_JITTER:-$TM_SRC/build/app/tailmark-jitter/tailmark-jitter}
[ -x "$J" ] || { tm_log "no tailmark-jitter (x86 only)"; exit 77; }

# tm_jitter NAME WANT_RC ARGS...: one run, its stdout in $TM_WORK/NAME.json.
tm_jitter() {
    local name=$1 want=$2
    shift 2
    timeout 30 "$J" "$@" >"$TM_WORK/$name.json" 2>"$TM_WORK/$name.err"
    TM_RC=$?
    tm_expect_rc "$name" "$want"
}

if tm_jitter peer 0 1 0.1 0; then
    tm_check peer \
        "d['cpu'] == 1 and d['peer_cpu'] == 0" \
        "d['line_round_trip']['trips'] == 500000" \
        "0 < d['line_round_trip']['min_ns'] <= d['line_round_trip']['ns'] <= d['line_round_trip']['max_ns']" \
        "d['tsc_hz'] > 0 and 0 <= d['taken_share'] < 1" &&
        tm_log "ok: peer: a line's round trip between CPUs 1 and 0: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['line_round_trip']['ns'])" "$TM_WORK/peer.json") ns"
fi
# Without PEER_CPU: the gaps alone, no round trip.
tm_jitter alone 0 1 0.1 && tm_check alone "'line_round_trip' not in d and 'peer_cpu' not in d" &&
    tm_log "ok: alone: no round trip without PEER_CPU"
# NAME PEER_CPU EXIT: the same CPU is a usage error (2); a CPU this process
# may not run on, a failure to pin (1).
for bad in "same 1 2" "absent 4096 1"; do
    read -r name peer want <<<"$bad"
    tm_jitter "bad_$name" "$want" 1 0.1 "$peer" || continue
    if ! grep -q "PEER_CPU" "$TM_WORK/bad_$name.err"; then
        tm_fail "bad_$name: no message naming PEER_CPU"
        cat "$TM_WORK/bad_$name.err"
    elif [ -s "$TM_WORK/bad_$name.json" ]; then
        tm_fail "bad_$name: printed a result"
    else
        tm_log "ok: bad_$name: refused (exit $TM_RC): $(cat "$TM_WORK/bad_$name.err")"
    fi
done
tm_finish
