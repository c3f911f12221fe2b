#!/bin/bash
# scripts/lib/torch_loop.sh NODES PER BYTES ITERS BACKEND:OP...: one mesh
# of tests/torch/lib.sh (NODES namespaces, each with its tailmarkd --mode
# service on net_af_packet over a veth to one bridge, PER ranks in each),
# then tests/torch/loop.py once per BACKEND:OP (tailmark or gloo; ar for
# all_reduce, a2a for all_to_all_single), in that order, on it. Prints each
# one's line from rank 0, then each daemon's port counts, reliability
# counters and congestion timeouts. An A/B by hand of the daemons' options:
# TT_DAEMON_EXTRA (e.g. "--cc off"), TT_MTU (1500), TAILMARKD.
#   scripts/lib/torch_loop.sh 2 2 4194304 60 tailmark:a2a gloo:a2a
# shellcheck shell=bash
TM_TEST=torch_loop
# shellcheck source=../../tests/integration/lib.sh
source "$(dirname "$0")/../../tests/integration/lib.sh"
# shellcheck source=../../tests/torch/lib.sh
source "$TM_SRC/tests/torch/lib.sh"
if [ $# -lt 5 ]; then
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
tm_require_daemon
tm_require_root
tt_require
tt_mesh "$1" "$2"
size=$3 iters=$4
shift 4
for job in "$@"; do
    LOOP_BACKEND=${job%%:*} LOOP_OP=${job#*:} tt_run loop 600 "$TT_DIR/loop.py" "$size" "$iters"
    tt_all_ok || { tm_fail "$job: a rank failed"; tt_show loop; }
    grep -h '^{' "$TM_WORK/loop.0.out"
done
# Each daemon's CPU time since it started (user + system, s), read before
# it stops: how much of the host's CPUs it took from the ranks.
for ((r = 0; r < TT_NODES; r++)); do
    cpu[r]=$(for p in $(pgrep -P "${TT_PID[r]}"); do cat "/proc/$p/stat"; done |
        awk -v hz="$(getconf CLK_TCK)" '{s += $14 + $15} END {printf "%.2f", s / hz}')
done
for ((r = 0; r < TT_NODES; r++)); do kill -INT "${TT_PID[r]}"; done
for ((r = 0; r < TT_NODES; r++)); do wait "${TT_PID[r]}"; done
for ((r = 0; r < TT_NODES; r++)); do
    python3 - "$TM_WORK/d$r.json" "$r" "${cpu[r]}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rel = {k: v for k, v in d["reliability"].items() if v}
print(f"daemon {sys.argv[2]}: cpu {sys.argv[3]} s; port tx {d['port']['tx']} rx {d['port']['rx']} missed {d['port']['missed']}; reliability {rel}; "
      f"congestion {d.get('congestion', {})}")
PY
done
tm_finish
