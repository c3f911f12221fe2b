#!/usr/bin/env bash
# Is the engine thread's reduction what limits a large all_reduce? Two ranks
# (tt_mesh, as the torch suite), each a run of all_reduce of SIZE bytes of
# float32 (tests/torch/allreduce_bw.py, the ring), rank 0's process sampled
# by perf (cpu-clock, every thread) for the run. Prints, for the engine
# thread (the thread whose samples hold reduce_typed): its samples in the
# reduction, in the copy into send slots (memcpy from pump_out), and in all,
# each as a share of the thread's samples and of the run's wall time.
#   flock /tmp/tailmark-tests.lock scripts/lib/torch_reduce_profile.sh [SIZE [WORLD]]
# Root; the build in build/ (TM_BUILD). Sizes: 67108864 (64 MiB) by default.
set -uo pipefail
TM_TEST=torch_reduce_profile
source "$(dirname "$0")/../../tests/integration/lib.sh"
source "$(dirname "$0")/../../tests/torch/lib.sh"
tm_require_daemon
tm_require_root
tt_require
size=${1:-67108864}
world=${2:-2}
tt_mesh "$world"
data=$TM_WORK/perf.data
(
    # rank 0's python, once it is up
    for _ in $(seq 300); do
        pid=$(pgrep -f "allreduce_bw.py tailmark $size" | head -1)
        [ -n "$pid" ] && pid=$(pgrep -P "$pid" -f python3 || echo "$pid") && break
        sleep 0.1
    done
    sleep 3 # past the rendezvous and the warm-up
    perf record -q -e cpu-clock -F 2000 -s -p "$(echo "$pid" | head -1)" -o "$data" -- sleep 10 >/dev/null 2>&1
) &
prof=$!
tt_run prof 300 "$TT_DIR/allreduce_bw.py" tailmark "$size" 16
wait $prof
tm_log "$(grep -h '^{' "$TM_WORK/prof.0.out")"
perf report -i "$data" --stdio --sort tid,sym 2>/dev/null | "$TT_PY" -c '
import re, sys
rows = []
for l in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(\d+):\S*\s+\[\.\]\s+(.*)", l)
    if m:
        rows.append((float(m.group(1)), int(m.group(2)), m.group(3).strip()))
eng = {t for p, t, s in rows if "reduce_typed" in s}
if not eng:
    sys.exit("no samples in reduce_typed")
t = eng.pop()
mine = [(p, s) for p, tt, s in rows if tt == t]
tot = sum(p for p, s in mine)
red = sum(p for p, s in mine if "reduce_typed" in s)
cpy = sum(p for p, s in mine if "memcpy" in s or "memmove" in s)
print(f"engine thread {t}: {tot:.1f}% of the process samples; reduction {red:.1f}% "
      f"({red / tot * 100:.0f}% of the thread), memcpy {cpy:.1f}% ({cpy / tot * 100:.0f}%)")
for p, s in sorted(mine, reverse=True)[:8]:
    print(f"  {p:5.1f}%  {s[:90]}")
'
perf report -i "$data" --stdio --sort tid 2>/dev/null | grep -E '^\s+[0-9]' | head -8
perf report -i "$data" --stdio --header-only 2>/dev/null | grep -E "sample|duration" | head -4
for ((r = 0; r < world; r++)); do kill -INT "${TT_PID[r]}" 2>/dev/null; done
for ((r = 0; r < world; r++)); do wait "${TT_PID[r]}" 2>/dev/null; done
tm_finish
