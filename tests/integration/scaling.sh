#!/usr/bin/env bash
# scripts/scaling.sh (issue 17's rx scaling curve, for a machine with 16
# CPUs) kept runnable here: two rx lcores on their own net_ring queues,
# oversubscribed onto these CPUs for a second, and testpmd io beside it. The
# script's own checks must hold (both rx lcores placed packets, the lanes
# sum to the port, nothing dropped) and its table and JSON must be written.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
export TAILMARKD
export TAILMARK_EAL_MEM="${TAILMARK_EAL_MEM---no-huge -m 1024}" # as every test's daemons: set, so nothing is reserved here
if "$TM_SRC/scripts/scaling.sh" --lcores 2 --secs 1 --oversubscribe --out "$TM_WORK" \
    >"$TM_WORK/scaling.out" 2>&1; then
    if python3 - "$TM_WORK/scaling.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
r = d["rows"]
sys.exit(0 if len(r) == 1 and r[0]["rx_lcores"] == 2 and len(r[0]["lane_mpps"]) == 2 and not r[0]["problems"]
         and r[0]["testpmd_io_mpps"] > 0 and d["oversubscribed"] else 1)
PY
        tm_log "ok: scripts/scaling.sh --lcores 2: $(grep '^| 2 ' "$TM_WORK/scaling.md")"
    else
        tm_fail "scaling.json: $(cat "$TM_WORK/scaling.json")"
    fi
else
    tm_fail "scripts/scaling.sh exited $?: $(tail -20 "$TM_WORK/scaling.out")"
fi
tm_finish
