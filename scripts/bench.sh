#!/usr/bin/env bash
# Benchmarks, never timed tests: every claim is a ratio against a reference
# measured in the same run, on the same cores (issue 7).
#
#   scripts/bench.sh            full grid: 64 B .. 16 MiB, 1/4/64 flows, both completion modes
#   scripts/bench.sh --quick    a smaller grid, under 2 minutes
#   scripts/bench.sh --instructions
#                               also instructions per packet of the tx and rx
#                               paths under valgrind's callgrind (noise-free)
#   scripts/bench.sh --torch    only tailmark.torch against gloo: all_reduce
#                               and all_to_all, bus bandwidth and time,
#                               8 KiB .. 256 MiB, world 4 (2 hosts x 2 ranks)
#                               and 8 (2 x 4, and 1 host x 8) in namespaces,
#                               MTU 9000 and 1500 (build/bench/torch.md,
#                               torch.json, torch.png; TT_BENCH_* in
#                               scripts/lib/bench_torch.sh)
#   scripts/bench.sh --torch-algo
#                               only tailmark.torch's all_reduce algorithms:
#                               the ring against recursive doubling, latency
#                               4 B .. 4 MiB at 2, 3 and 4 ranks, interleaved
#                               (build/bench/torch-algo.md, torch-algo.json)
#   scripts/bench.sh --cc       only congestion control: the tbf bottleneck
#                               cases of tests/integration/congestion.sh with
#                               --cc on and off (build/bench/cc.md, cc.json,
#                               cc-goodput.png)
#   scripts/bench.sh --kernel   only net_af_xdp beside net_af_packet: two
#                               processes over a veth pair, 4 KiB .. 1 MiB,
#                               the drivers interleaved (build/bench/kernel.md,
#                               kernel.json; root)
#   scripts/bench.sh --cat      only tailmark-cat between two service daemons
#                               on a veth pair, --flows 1 against --flows 4,
#                               interleaved rounds (build/bench/cat.md,
#                               cat.json; root)
#   scripts/bench.sh --paths    only spraying (--paths): tests/integration/
#                               multipath.sh's cases at --paths 16 and 1, and
#                               each link's rate over time in the black-hole
#                               case (build/bench/paths.md, paths.json,
#                               paths-blackhole.png; root)
#   scripts/bench.sh --rails    only rails (--rails): tests/integration/
#                               rails.sh's one rail against two, and each
#                               rail cut mid-transfer, RAILS_ROUNDS (3) times
#                               (build/bench/rails.md, rails.json; root)
#   scripts/bench.sh --stages   only the rx lcore's cycle account per stage at
#                               64 B and 64 KiB: perf (cpu-clock) on a
#                               -Dstage_profile build (build/bench/stages.md,
#                               stages.json)
#   scripts/bench.sh --report REV
#                               the README's figures in one run: --compare REV,
#                               then --stages, then --quick, each section in
#                               build/bench/report.md under one heading naming
#                               the CPU, the date and both revisions
#   scripts/bench.sh --compare REV
#                               only an A/B of this tree against git revision
#                               REV (built in build-ab/): the core rows, both
#                               builds interleaved run by run, three rounds
#                               (TM_BENCH_ROUNDS), medians, their ratio, and
#                               the median of each round's own ratio
#                               (build/bench/compare.md). On a machine lent
#                               for it, with no compiler: scripts/lib/bench_device.sh
#   scripts/bench.sh --compare REV --instructions
#                               the same A/B in instructions per message
#                               under callgrind: noise-free, a few rows
#                               (build/bench/compare-instructions.md)
#
# Writes build/bench/results.json, build/bench/results.md and, when Debian's
# python3-matplotlib is there, build/bench/goodput.png.
#
# References: dpdk-testpmd on net_null (copy=0) in txonly, rxonly and macswap,
# one forwarding core: the per-core packet I/O ceilings. Then tailmarkd:
#   - tx: loopback on net_null with no-rx=1 and --flow-control off, 64 B
#     messages: tailmark's tx path alone, as packets/s, against txonly;
#   - end to end: loopback over net_ring (scripts/run.sh's set-up), every
#     size x flows x completion mode: msgs/s, Mpps, payload Gbps, latency;
#   - recovery: 0% and 1% loss (fault shim), both completion modes.
# One lcore holds every tailmarkd role (run to completion), as testpmd's one
# forwarding core does.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

quick=0
instructions=0
compare=
report=
torch=0
torch_algo=0
cc=0
stages=0
kernel=0
catb=0
pathsb=0
railsb=0
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --instructions) instructions=1 ;;
    --compare) compare=${2:-}; shift ;;
    --report) report=${2:-}; shift ;;
    --torch) torch=1 ;;
    --torch-algo) torch_algo=1 ;;
    --cc) cc=1 ;;
    --stages) stages=1 ;;
    --kernel) kernel=1 ;;
    --cat) catb=1 ;;
    --paths) pathsb=1 ;;
    --rails) railsb=1 ;;
    *) echo "usage: scripts/bench.sh [--quick] [--instructions] [--compare REV] [--report REV] [--torch] [--torch-algo] [--cc] [--stages] [--kernel] [--cat] [--paths] [--rails]" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$report" ]; then # one process per section; each writes its own files under build/bench
    self=$(readlink -f "$0")
    bash "$self" --compare "$report" && bash "$self" --stages && bash "$self" --quick || exit 1
    b=$TM_BUILD/bench
    {
        echo "## scripts/bench.sh --report $report, $(date -u +%Y-%m-%d)"
        echo
        echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) vCPUs;" \
            "this tree $(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet || echo +)" \
            "against $(git -C "$TM_ROOT" rev-parse --short "$report")."
        for f in compare stages results; do
            echo
            echo "### $f"
            echo
            cat "$b/$f.md"
        done
    } >"$b/report.md"
    tm_say "report: $b/report.md"
    exit 0
fi
out=$TM_BUILD/bench
mkdir -p "$out"

# TM_BENCH_PREBUILT=1: the binaries under $TM_BUILD are already built and no
# package is installed (a machine with no compiler or registry, as
# scripts/lib/bench_device.sh uses it); with --compare, TM_BENCH_B_BUILD
# names REV's build directory and TM_BENCH_A_REV / TM_BENCH_B_REV the names
# the table prints, since such a machine may have no git history.
prebuilt=${TM_BENCH_PREBUILT:-0}
PY=${TM_PY:-/usr/bin/python3} # Debian's, beside the pyenv one (docs/testing.md)
if [ "$prebuilt" != 1 ]; then
    TM_PACKAGES+=(python3-matplotlib) # the plot; only the benchmark needs it
    tm_ensure_packages || exit 1
fi
# 16 MiB x 64 flows holds 3.3 GB: 2 regions per flow and each flow's message buffer.
[ "$TM_HUGEPAGES" -ge 3072 ] || TM_HUGEPAGES=3072
tm_setup_hugepages
[ "$prebuilt" = 1 ] || tm_build "$TM_BUILD" || exit 1
daemon=$(tm_daemon) || { tm_say "tailmarkd was not built"; exit 1; }
if [ $torch -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_torch.sh"
    bench_torch "$out"
    exit $?
fi
if [ $torch_algo -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_torch_algo.sh"
    bench_torch_algo "$out"
    exit $?
fi
if [ $cc -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_cc.sh"
    bench_cc "$out"
    exit $?
fi
if [ $kernel -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_kernel.sh"
    bench_kernel "$out"
    exit $?
fi
if [ $catb -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_cat.sh"
    bench_cat "$out"
    exit $?
fi
if [ $pathsb -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_paths.sh"
    bench_paths "$out"
    exit $?
fi
if [ $railsb -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_rails.sh"
    bench_rails "$out"
    exit $?
fi
if [ -n "$compare" ] && [ $instructions -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_instr_compare.sh"
    bench_instr_compare "$out" "$compare"
    exit $?
fi
if [ $stages -eq 1 ]; then
    source "$TM_ROOT/scripts/lib/bench_stages.sh"
    bench_stages "$out"
    exit $?
fi
read -r -a MEM <<<"${TAILMARK_EAL_MEM---no-huge -m 1024}"
[ ${#MEM[@]} -eq 0 ] || MEM=(--no-huge -m 2048)
# EAL arguments for every DPDK process: -d PMDS where DPDK is carried, not installed.
[ -n "${TM_BENCH_EAL_EXTRA:-}" ] && read -r -a extra <<<"$TM_BENCH_EAL_EXTRA" && MEM+=("${extra[@]}")
TESTPMD=$(command -v dpdk-testpmd)
secs=${TM_BENCH_SECS:-$([ $quick -eq 1 ] && echo 3 || echo 8)} # the timed rows' length
raw=$out/raw
rm -rf "$raw"
mkdir -p "$raw"

# testpmd MODE: one forwarding core on net_null, $secs seconds; the median of
# its per-second pps lines.
testpmd() {
    local mode=$1 key=Tx-pps
    [ "$mode" = rxonly ] && key=Rx-pps
    timeout -s INT $((secs + 3)) "$TESTPMD" -l 0-1 --no-pci "${MEM[@]}" --file-prefix "tm_bench_tp_$$" \
        --vdev=net_null0,copy=0 --log-level=lib.eal:warning -- --port-topology=loop \
        --forward-mode="$mode" --auto-start --stats-period 1 --nb-cores=1 --total-num-mbufs=16384 \
        >"$raw/testpmd_$mode.out" 2>&1
    grep -o "$key: *[0-9]*" "$raw/testpmd_$mode.out" | awk '{print $2}' | awk '$1 > 0' |
        sort -n | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : 0)}'
}

# tailmarkd NAME EAL... -- OPTIONS...: one run, its summary JSON in $raw/NAME.json.
tailmarkd() {
    local name=$1
    shift
    local eal=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do eal+=("$1"); shift; done
    shift
    timeout -k 5 120 "$daemon" -l 0-1 --no-pci "${MEM[@]}" --file-prefix "tm_bench_$$" \
        --log-level=lib.eal:warning --log-level='tailmark.*:warning' "${eal[@]}" -- \
        --stats-period 0 --summary-json "$raw/$name.json" --udp-checksum off "$@" >"$raw/$name.out" 2>&1
}

# line_rt NAME: a cache line's round trip between lcore 0's and lcore 1's
# CPUs (tailmark-jitter's PEER_CPU), in $raw/NAME.json. Rows that hand
# packets or completions from one lcore to the other pay it for every line,
# and where the host runs the two vCPUs changes it: on the AMD EPYC of round
# 12 the same build's rx64 ran 23 M msgs/s in one spell and 10 M in the next.
jitter=$TM_BUILD/app/tailmark-jitter/tailmark-jitter
line_rt() {
    [ -x "$jitter" ] && "$jitter" 1 0.1 0 >"$raw/$1.json" 2>"$raw/$1.err"
}

# svc DAEMON PERF NAME SIZE COUNT RING: one service daemon, one tailmark-perf
# --loop run against it (the application path; the grid and --compare).
svc() {
    local bin=$1 pbin=$2 name=$3 size=$4 count=$5 ring=$6 sock=$raw/svc.sock i
    rm -f "$sock"
    timeout -k 5 120 "$bin" -l 0-1 --no-pci "${MEM[@]}" --file-prefix "tm_bench_svc_$$" \
        --log-level=lib.eal:warning --log-level='tailmark.*:warning' --vdev=net_ring0 -- --mode service \
        --control-socket "$sock" --insecure --udp-checksum off --stats-period 0 --summary-json "$raw/$name.daemon.json" \
        >"$raw/$name.daemon.out" 2>&1 &
    local dp=$!
    for i in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
    timeout -k 5 120 taskset -c 0 "$pbin" --socket "$sock" --loop 198.18.0.1:7100 --size "$size" \
        --count "$count" --ring "$ring" >"$raw/$name.json" 2>"$raw/$name.err"
    kill -INT $dp 2>/dev/null
    wait $dp
}

# --compare REV: the same rows for this tree (A) and REV (B), each round
# running A and B back to back in alternating order, so a slow spell of the
# VM falls on both; medians of three rounds and their ratio.
if [ -n "$compare" ]; then
    ab=$TM_ROOT/build-ab
    if [ -n "${TM_BENCH_B_BUILD:-}" ]; then # REV built elsewhere (TM_BENCH_PREBUILT)
        old=$TM_BENCH_B_BUILD/app/tailmarkd/tailmarkd
        [ -x "$old" ] || { tm_say "--compare: no $old"; exit 1; }
    else
        rev=$(git -C "$TM_ROOT" rev-parse --verify "$compare^{commit}") || { tm_say "--compare: no revision $compare"; exit 2; }
        if [ "$(git -C "$ab/src" rev-parse HEAD 2>/dev/null)" != "$rev" ]; then
            git -C "$TM_ROOT" worktree remove --force "$ab/src" 2>/dev/null
            rm -rf "$ab"
            mkdir -p "$ab"
            git -C "$TM_ROOT" worktree add --detach "$ab/src" "$rev" >/dev/null || exit 1
        fi
        if [ ! -f "$ab/build/build.ninja" ]; then
            meson setup "$ab/build" "$ab/src" -Dtests=false >"$ab/setup.log" 2>&1 || { cat "$ab/setup.log"; exit 1; }
        fi
        ninja -C "$ab/build" >"$ab/ninja.log" 2>&1 || { tail -30 "$ab/ninja.log"; exit 1; }
        old=$ab/build/app/tailmarkd/tailmarkd
        [ -x "$old" ] || { tm_say "--compare: $rev did not build"; exit 1; }
    fi
    [ "${TM_BENCH_BUILD_ONLY:-0}" = 1 ] && exit 0 # scripts/lib/bench_device.sh pack
    new=$daemon
    rows=(
        "tx64 --vdev=net_null0,copy=0,no-rx=1 -- --flows 1 --msg-size 64 --messages 0 --duration $secs --flow-control off --ring-size 64"
        "txfixed64 --vdev=net_null0,copy=0,no-rx=1 -- --flows 1 --msg-size 64 --messages 0 --duration $secs --flow-control off --ring-size 64 --payload fixed"
        "txreplay64 --vdev=net_null0,copy=0,no-rx=1 -- --flows 1 --msg-size 64 --messages 0 --duration $secs --flow-control off --ring-size 64 --replay on"
        "loop64x1 --vdev=net_ring0 -- --flows 1 --msg-size 64 --messages 1000000 --ring-size 64 --exit-when-done --duration 60"
        "loop64x4 --vdev=net_ring0 -- --flows 4 --msg-size 64 --messages 250000 --ring-size 64 --exit-when-done --duration 60"
        "loop64x64 --vdev=net_ring0 -- --flows 64 --msg-size 64 --messages 15625 --ring-size 64 --exit-when-done --duration 60"
        "loop4kx1 --vdev=net_ring0 -- --flows 1 --msg-size 4096 --messages 250000 --ring-size 64 --exit-when-done --duration 60"
        "loop4kx64 --vdev=net_ring0 -- --flows 64 --msg-size 4096 --messages 4000 --ring-size 64 --exit-when-done --duration 60"
        "loop64kx1 --vdev=net_ring0 -- --flows 1 --msg-size 65536 --messages 20000 --ring-size 16 --exit-when-done --duration 60"
        "loop64kx64 --vdev=net_ring0 -- --flows 64 --msg-size 65536 --messages 300 --ring-size 16 --exit-when-done --duration 60"
        "loop1mx4 --vdev=net_ring0 -- --flows 4 --msg-size 1048576 --messages 300 --ring-size 4 --exit-when-done --duration 60"
        "rx64 --vdev=net_ring0 -- --flows 1 --msg-size 64 --messages 5000000 --ring-size 64 --replay on --tx-lcores 0 --rx-lcores 1 --consumer-lcores 0 --exit-when-done --duration 60"
        "rx64k --vdev=net_ring0 -- --flows 1 --msg-size 65536 --messages 60000 --ring-size 16 --replay on --tx-lcores 0 --rx-lcores 1 --consumer-lcores 0 --exit-when-done --duration 60"
        "rx64local --vdev=net_ring0 -- --flows 1 --msg-size 64 --messages 5000000 --ring-size 64 --replay on --tx-lcores 1 --rx-lcores 1 --consumer-lcores 0 --exit-when-done --duration 60"
        "lat4kx1 --vdev=net_ring0 -- --flows 1 --msg-size 4096 --messages 160000 --ring-size 64 --rate 80000 --exit-when-done --duration 60"
        "lat4kx4 --vdev=net_ring0 -- --flows 4 --msg-size 4096 --messages 40000 --ring-size 64 --rate 80000 --exit-when-done --duration 60"
        # The application path: tailmark-perf --loop through --mode service
        # (each revision's own daemon and tailmark-perf), SIZE COUNT RING.
        "app64 64 1000000 64"
        "app4k 4096 250000 64"
    )
    if [ $quick -eq 1 ]; then # these rows, by name
        quick_rows=" tx64 txfixed64 txreplay64 loop64x1 loop4kx1 loop64kx1 rx64 rx64k rx64local lat4kx1 lat4kx4 app64 "
        all=("${rows[@]}")
        rows=()
        for row in "${all[@]}"; do
            [[ $quick_rows == *" ${row%% *} "* ]] && rows+=("$row")
        done
    fi
    run_ab() { # BIN NAME ARGS...
        local bin=$1 name=$2
        shift 2
        if [[ $name == ab_app* ]]; then # SIZE COUNT RING: the revision's own tailmark-perf
            svc "$bin" "$(dirname "$(dirname "$bin")")/tailmark-perf/tailmark-perf" "$name" "$1" "$2" "$3"
            return
        fi
        local eal=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do eal+=("$1"); shift; done
        shift
        timeout -k 5 120 "$bin" -l 0-1 --no-pci "${MEM[@]}" --file-prefix "tm_bench_$$" \
            --log-level=lib.eal:warning --log-level='tailmark.*:warning' "${eal[@]}" -- \
            --stats-period 0 --summary-json "$raw/$name.json" --udp-checksum off "$@" >"$raw/$name.out" 2>&1
    }
    rounds=${TM_BENCH_ROUNDS:-3} # odd, so each row has a median run
    for rep in $(seq "$rounds"); do
        line_rt "rt_ab_round_$rep"
        for row in "${rows[@]}"; do
            read -r -a r <<<"$row"
            name=${r[0]}
            # The rows that cross between the lcores: the round trip right
            # before each pair, as a spell can change within a round.
            [[ $name == rx* || $name == app* ]] && line_rt "rt_ab_${name}_$rep"
            if [ $((rep % 2)) -eq 1 ]; then
                run_ab "$new" "ab_${name}_A_$rep" "${r[@]:1}"
                run_ab "$old" "ab_${name}_B_$rep" "${r[@]:1}"
            else
                run_ab "$old" "ab_${name}_B_$rep" "${r[@]:1}"
                run_ab "$new" "ab_${name}_A_$rep" "${r[@]:1}"
            fi
        done
        tm_say "A/B round $rep of $rounds done"
    done
    line_rt rt_ab_after
    a_rev=${TM_BENCH_A_REV:-$(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet || echo +)}
    b_rev=${TM_BENCH_B_REV:-$(git -C "$TM_ROOT" rev-parse --short "$rev")}
    "$PY" - "$raw" "$out" "$a_rev" "$b_rev" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs" \
        "$rounds" "${rows[@]%% *}" <<'PYEOF'
import json, os, sys
raw, out, a_rev, b_rev, cpu = sys.argv[1:6]
R = range(1, int(sys.argv[6]) + 1)
names = sys.argv[7:]
def metric(d, name):
    if name.startswith("lat"): # paced at 80000 msgs/s in all (issue 17's figure): the tail, lower is better
        return (d.get("latency_ns") or {}).get("p99", 0) / 1e3, "p99 us (lower is better)"
    if name.startswith("tx"):
        return d["packets_tx"] / d["elapsed_s"] / 1e6 if d.get("elapsed_s") else 0, "Mpps"
    return (d.get("msgs_per_s") or 0) / 1e6, "M msgs/s"
def round_trip(name): # tailmark-jitter's line_round_trip, or None
    try:
        return json.load(open(os.path.join(raw, name + ".json")))["line_round_trip"]["ns"]
    except (OSError, ValueError, KeyError):
        return None
rows, res = [], []
for n in names:
    vals, by_round = {}, {}
    for side in "AB":
        v = []
        for rep in R:
            p = os.path.join(raw, f"ab_{n}_{side}_{rep}.json")
            try: # a run that failed left nothing, or half a file: the row shows the rest
                d = json.load(open(p))
            except (OSError, ValueError):
                d = None
            if d is not None:
                m, unit = metric(d, n)
                cyc = d.get("cycles", {})
                dp = os.path.join(raw, f"ab_{n}_{side}_{rep}.daemon.json") # app rows: the service's cycles
                if os.path.exists(dp):
                    cyc = json.load(open(dp)).get("cycles", {})
                v.append((m, cyc.get("tx_per_packet"), cyc.get("rx_per_packet")))
                by_round[(side, rep)] = m
        v.sort()
        vals[side] = v
    # A and B of one round ran back to back: where the host moved the vCPUs
    # between rounds (the line round trip below), their ratio still compares
    # like with like, where the medians of the two sides may not.
    paired = sorted(by_round[("A", k)] / by_round[("B", k)] for k in R
                    if by_round.get(("B", k)) and ("A", k) in by_round)
    if not vals["A"] or not vals["B"]:
        continue
    a, b = vals["A"][len(vals["A"]) // 2], vals["B"][len(vals["B"]) // 2]
    unit = metric({"packets_tx": 0, "elapsed_s": 1, "msgs_per_s": 0, "latency_ns": {"p99": 0}}, n)[1]
    ratio = a[0] / b[0] if b[0] else 0
    pr = paired[len(paired) // 2] if paired else 0
    row_rt = [round_trip(f"rt_ab_{n}_{k}") for k in R]
    res.append({"row": n, "unit": unit, "A": a[0], "B": b[0], "ratio": ratio, "paired_ratio": pr,
                "paired_ratios": paired, "line_round_trip_ns_by_round": row_rt,
                "A_by_round": [by_round.get(("A", k)) for k in R],
                "B_by_round": [by_round.get(("B", k)) for k in R],
                "A_runs": [x[0] for x in vals["A"]], "B_runs": [x[0] for x in vals["B"]],
                "A_tx_cycles": a[1], "B_tx_cycles": b[1], "A_rx_cycles": a[2], "B_rx_cycles": b[2]})
    rt_col = "/".join(f"{x:.0f}" for x in row_rt) if None not in row_rt else ""
    rows.append(f"| {n} | {a[0]:.3f} | {b[0]:.3f} | {ratio:.2f}x | {pr:.2f}x | {min(x[0] for x in vals['A']):.3f}-{max(x[0] for x in vals['A']):.3f} | "
                f"{min(x[0] for x in vals['B']):.3f}-{max(x[0] for x in vals['B']):.3f} | {unit} | {rt_col} |")
rt = [round_trip(f"rt_ab_round_{k}") for k in R] + [round_trip("rt_ab_after")]
md = [f"A/B: A = {a_rev} (this tree), B = {b_rev}; {cpu}; each row the median of {len(R)} rounds, A and B back to back "
      "in alternating order. A/B: the ratio of the medians; paired: the median of each round's own A/B.", "",
      f"| row | A | B | A/B | paired | A range | B range | unit | line round trip, ns (rounds {'/'.join(map(str, R))}) |",
      "|---|---:|---:|---:|---:|---|---|---|---|"] + rows
if None not in rt:
    md += ["", "A cache line's round trip between lcore 0's and lcore 1's CPUs (tailmark-jitter) before each round "
           f"and after: {', '.join(f'{x:.0f}' for x in rt)} ns. The rows that cross between them (rx*, app*) "
           "move with it; where it changed between rounds, read the paired ratio."]
open(os.path.join(out, "compare.md"), "w").write("\n".join(md) + "\n")
json.dump({"A": a_rev, "B": b_rev, "cpu": cpu, "rows": res, "line_round_trip_ns": {"rounds": rt[:-1], "after": rt[-1]}},
          open(os.path.join(out, "compare.json"), "w"), indent=1)
print("\n".join(md))
PYEOF
    exit 0
fi

tm_say "references: dpdk-testpmd on net_null, ${secs}s each"
tp_tx=$(testpmd txonly)
tp_rx=$(testpmd rxonly)
tp_ms=$(testpmd macswap)
tm_say "testpmd txonly $tp_tx pps, rxonly $tp_rx pps, macswap $tp_ms pps"

tm_say "tailmark tx path on net_null (no-rx), 64 B messages"
tailmarkd tx_null --vdev=net_null0,copy=0,no-rx=1 -- --flows 1 --msg-size 64 --messages 0 \
    --duration "$secs" --flow-control off --ring-size 64

# The tx path alone: each message's bytes ready (--payload fixed, as an
# application's data would be), so the generator writing them is not counted;
# plan, CRC32C, mbufs, headers, copy, trailer and the retransmission record are.
tailmarkd tx_null_fixed --vdev=net_null0,copy=0,no-rx=1 -- --flows 1 --msg-size 64 --messages 0 \
    --duration "$secs" --flow-control off --ring-size 64 --payload fixed

# The same with ready-made packets (--replay: only msg_id, flag and slot
# re-stamped; their pool's driver marks a freed packet reusable instead of
# taking it back): the floor of sending without building, closer to what
# txonly does.
tailmarkd tx_null_replay --vdev=net_null0,copy=0,no-rx=1 -- --flows 1 --msg-size 64 --messages 0 \
    --duration "$secs" --flow-control off --ring-size 64 --replay on

sizes=(64 1024 4096 65536 1048576 16777216)
flows=(1 4 64)
# Every configuration three times, the rounds interleaved: this VM has slow
# spells of minutes (up to 2x), so back-to-back repeats would share one; the
# tables report each configuration's median run.
reps=3
if [ $quick -eq 1 ]; then
    sizes=(64 4096 65536 1048576)
    flows=(1 4)
    reps=1
fi
for rep in $(seq $reps); do
for size in "${sizes[@]}"; do
    for nf in "${flows[@]}"; do
        # Slots x regions must fit: big messages get fewer slots. 16 MiB x 64
        # flows needs 3.3 GB, more than the --no-huge fallback's 2 GB.
        ring=64
        [ "$size" -ge 65536 ] && ring=16
        [ "$size" -ge 1048576 ] && ring=4
        if [ "$size" -ge 16777216 ]; then
            ring=2
            free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages 2>/dev/null || echo 0)
            if [ "$nf" -gt 4 ] && { [ ${#MEM[@]} -ne 0 ] || [ "$free" -lt 1700 ]; }; then
                tm_say "skipped: ${size} B x ${nf} flows needs 3.3 GB ($free free 2 MiB hugepages${MEM[*]:+, ${MEM[*]}})"
                continue
            fi
        fi
        # About 1-2 s of traffic per run at the rates seen here.
        total=$(( 2000000000 / size ))
        [ $quick -eq 1 ] && total=$(( total / 2 ))
        [ $total -gt 2000000 ] && total=2000000
        [ $total -lt 64 ] && total=64
        per=$(( (total + nf - 1) / nf ))
        for mode in message packet; do
            tailmarkd "loop_${size}_${nf}_${mode}_${rep}" --vdev=net_ring0 -- --flows "$nf" --msg-size "$size" \
                --messages "$per" --ring-size "$ring" --completion "$mode" --exit-when-done --duration 60
        done
    done
done
done

# The CRC32C kernels on hot buffers (bytes per TSC cycle): the ceiling under
# the rx path's fused copy and checksum.
crcbench="$TM_BUILD/tests/bench/crc32c_bench"
[ -x "$crcbench" ] && "$crcbench" >"$raw/crc32c_bench.jsonl" 2>&1

# --data-auth's cost: cycles per data packet of the sender's build and the
# receiver's tag check, version 2 with and without it, 64 B and 64 KiB.
authbench="$TM_BUILD/tests/bench/data_auth_bench"
[ -x "$authbench" ] && "$authbench" --no-huge -m 256 --file-prefix tm_bench_auth -l 0 --no-pci --log-level=error \
    >"$raw/data_auth_bench.jsonl" 2>/dev/null

# The consumer's own cost per message: --verify off (the consumer takes the
# completion and releases; nobody regenerates and compares the bytes), 1 flow,
# both completion modes.
for size in 64 4096 65536 1048576; do
    ring=64
    [ "$size" -ge 65536 ] && ring=16
    [ "$size" -ge 1048576 ] && ring=4
    total=$(( 2000000000 / size ))
    [ $total -gt 2000000 ] && total=2000000
    [ $quick -eq 1 ] && total=$(( total / 2 ))
    for mode in message packet; do
        tailmarkd "cons_${size}_${mode}" --vdev=net_ring0 -- --flows 1 --msg-size "$size" --messages "$total" \
            --ring-size "$ring" --completion "$mode" --verify off --exit-when-done --duration 60
    done
done

# The rx path per lcore, as the bottleneck: --replay resends ready-made
# packets (only msg_id, flag and slot re-stamped), so generating messages does
# not hide the receive cost. lcore 1 runs rx alone (placement, CRC32C,
# completion); lcore 0 runs the replay tx and the consumer (which still
# compares every byte).
# Three rounds, interleaved, the median reported with the range: this path
# crosses between the two vCPUs for every packet, and what that costs moves
# with where the host runs them (up to 2x between spells).
for rep in 1 2 3; do
line_rt "rt_rx_$rep" # a spell can change between rounds (the A/B above)
for size in 64 4096 65536; do
    ring=64
    [ "$size" -ge 65536 ] && ring=16
    total=$(( 4000000000 / size ))
    [ $total -gt 20000000 ] && total=20000000
    [ $quick -eq 1 ] && total=$(( total / 4 ))
    tailmarkd "rxreplay_${size}_${rep}" --vdev=net_ring0 -- --flows 1 --msg-size "$size" --messages "$total" \
        --ring-size "$ring" --replay on --tx-lcores 0 --rx-lcores 1 --consumer-lcores 0 --exit-when-done --duration 60
    # The same with the payload placed by streaming stores (--stream-min):
    # no line taken back from the consumer's cache first.
    if [ "$size" -ge 4096 ]; then
        tailmarkd "rxstream_${size}_${rep}" --vdev=net_ring0 -- --flows 1 --msg-size "$size" --messages "$total" \
            --ring-size "$ring" --replay on --tx-lcores 0 --rx-lcores 1 --consumer-lcores 0 --stream-min "$size" \
            --exit-when-done --duration 60
    fi
done
done
# The handoff's share: the same 64 B replay with the consumer on the rx lcore
# (--verify off), so the completion slot, the region line and the cursor never
# cross to another core's cache.
total=20000000
[ $quick -eq 1 ] && total=$(( total / 4 ))
tailmarkd "rxlocal_64" --vdev=net_ring0 -- --flows 1 --msg-size 64 --messages "$total" --ring-size 64 --replay on \
    --tx-lcores 0 --rx-lcores 1 --consumer-lcores 1 --verify off --exit-when-done --duration 60
line_rt rt_rx_after

# Latency at 10% load: 4 KiB messages, 1 and 4 flows, paced (--rate, flows
# staggered) at a tenth of the message rate the same configuration reached
# unpaced above.
# Three runs each (one with --quick), then one more with --trace-slow-ns:
# the timeline of every message slower than 2 us (what the lcore did in the
# iterations before it), sorted by cause. First, the platform alone:
# tailmark-jitter busy-polls lcore 1's CPU and counts the gaps (the VM
# taking the CPU), the share of the tail no code of ours can remove.
[ -x "$jitter" ] && "$jitter" 1 $(( quick ? 1 : 3 )) >"$raw/jitter.json" 2>"$raw/jitter.err"
for nf in 1 4; do
    max=$(python3 -c "import json;print(json.load(open('$raw/loop_4096_${nf}_message_1.json'))['msgs_per_s'])" 2>/dev/null || echo 0)
    rate=$(python3 -c "print(int(float('$max') / 10))")
    [ "$rate" -gt 0 ] || continue
    n=$(( rate * (quick ? 2 : 5) / nf ))
    for rep in $(seq $(( quick ? 1 : 3 ))); do
        tailmarkd "lat10_4096_${nf}_${rep}" --vdev=net_ring0 -- --flows "$nf" --msg-size 4096 --messages "$n" \
            --ring-size 64 --rate "$rate" --exit-when-done --duration 60
    done
    tailmarkd "lat10trace_4096_${nf}" --vdev=net_ring0 -- --flows "$nf" --msg-size 4096 --messages "$n" \
        --ring-size 64 --rate "$rate" --exit-when-done --duration 60 --trace-slow-ns 2000
done

# The application path (issue 14): tailmark-perf --loop, one process on
# core 0 that sends messages from its arena to itself through
# `tailmarkd --mode service` (lcore 1: tx and rx; tx zero-copy from the
# arena) and releases what arrives; next to the generator's loopback on the
# same lcore with --verify off (neither compares bytes; the generator copies
# its messages into the packets, the application's are referenced).
perf=$TM_BUILD/app/tailmark-perf/tailmark-perf
app_reps=3
[ $quick -eq 1 ] && app_reps=1
if [ -x "$perf" ]; then
    for rep in $(seq $app_reps); do
        for size in 64 4096 65536 1048576; do
            ring=64
            [ "$size" -ge 65536 ] && ring=16
            [ "$size" -ge 1048576 ] && ring=4
            count=$(( 1000000000 / size ))
            [ $count -gt 1000000 ] && count=1000000
            [ $quick -eq 1 ] && count=$(( count / 2 ))
            tailmarkd "appgen_${size}_${rep}" --vdev=net_ring0 -- --flows 1 --msg-size "$size" --messages "$count" \
                --ring-size "$ring" --verify off --exit-when-done --duration 60
            svc "$daemon" "$perf" "app_${size}_${rep}" "$size" "$count" "$ring"
        done
    done
fi

# Instructions per packet (callgrind counts only inside the toggled functions).
if [ $instructions -eq 1 ]; then
    TM_PACKAGES+=(valgrind)
    tm_ensure_packages || exit 1
    cgdaemon=$daemon
    if grep -qw avx512f /proc/cpuinfo && [ "$(meson introspect --buildoptions "$TM_BUILD" 2>/dev/null |
        python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "march"][0])')" = native ]; then
        # valgrind 3.19 cannot execute AVX-512, which -march=native emits
        # anywhere on this CPU: the counts come from an x86-64-v3 (AVX2)
        # build of the same tree (the CRC32C kernel is then fold128, as
        # valgrind's CPUID has no AVX-512 either).
        tm_say "callgrind: building build-cg (-march=x86-64-v3; valgrind cannot run AVX-512)"
        tm_build "$TM_ROOT/build-cg" -Dmarch=x86-64-v3 -Dtests=false || exit 1
        cgdaemon=$(tm_daemon "$TM_ROOT/build-cg") || exit 1
    fi
    cg() { # NAME TOGGLES... -- OPTIONS...
        local name=$1 t=()
        shift
        # A toggle flips collection on entry and again on exit, also when a
        # matching function calls another matching one (which then goes
        # uncounted): the patterns must not nest. Session 3's first count
        # (171 tx instructions/packet) missed a build_single nested in build.
        while [ "$1" != -- ]; do t+=("--toggle-collect=$1"); shift; done
        shift
        timeout -k 5 600 valgrind --tool=callgrind --collect-atstart=no "${t[@]}" \
            --callgrind-out-file="$raw/$name.callgrind" "$cgdaemon" -l 0 --no-pci --no-huge -m 1024 \
            --file-prefix "tm_bench_cg_$$" --log-level=lib.eal:warning --log-level='tailmark.*:warning' \
            --vdev=net_ring0 -- --udp-checksum off --stats-period 0 --summary-json "$raw/$name.json" --exit-when-done "$@" \
            >"$raw/$name.out" 2>&1
        callgrind_annotate "$raw/$name.callgrind" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); t = $1}
            /crc32c_detail::update/ {gsub(",", "", $1); c += $1} END {print t, c + 0}' \
            >"$raw/$name.ir"
    }
    for size in 64 4096; do
        # rx: the placer's burst (parse, place, CRC, completion) and the PMD's rx.
        cg "cg_rx_${size}" '*RxPlacer::rx_burst*' 'eth_ring_rx*' -- --flows 1 --msg-size "$size" --messages 20000 \
            --replay on
        # tx: cut, headers, trailer, CRC32C of the message, and the PMD's tx
        # (not the generator writing the message: that is the application's).
        cg "cg_tx_${size}" '*TxMarker::build*' '*TxMarker::prepare*' 'eth_ring_tx*' -- --flows 1 --msg-size "$size" \
            --messages 20000
    done
    # Zero copy on the application path: the same tx functions' instructions
    # per packet, the daemon under callgrind and tailmark-perf sending from its
    # arena, 64 B and 64 KiB messages (a 64 KiB message is 45 packets of
    # 1456 B). Copying would add the payload's bytes to every packet; what
    # grows is only the CRC32C the trailer carries.
    for size in 64 65536; do
        name=cg_txzc_${size}
        rm -f "$svc_sock"
        timeout -k 5 600 valgrind --tool=callgrind --collect-atstart=no '--toggle-collect=*TxMarker::build*' \
            '--toggle-collect=*TxMarker::prepare*' '--toggle-collect=eth_ring_tx*' \
            --callgrind-out-file="$raw/$name.callgrind" "$cgdaemon" -l 0 --no-pci --no-huge -m 1024 \
            --file-prefix "tm_bench_cg_$$" --log-level=lib.eal:warning --log-level='tailmark.*:warning' \
            --vdev=net_ring0 -- --mode service --control-socket "$svc_sock" --insecure --udp-checksum off --stats-period 0 \
            --summary-json "$raw/$name.json" >"$raw/$name.out" 2>&1 &
        dp=$!
        for i in $(seq 600); do [ -S "$svc_sock" ] && break; sleep 0.1; done
        timeout -k 5 300 "$perf" --socket "$svc_sock" --loop 198.18.0.1:7100 --size "$size" \
            --count $(( size > 4096 ? 500 : 20000 )) --ring 16 >"$raw/$name.perf.json" 2>&1
        kill -INT $dp 2>/dev/null
        wait $dp
        callgrind_annotate "$raw/$name.callgrind" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); t = $1}
            /crc32c_detail::update/ {gsub(",", "", $1); c += $1} END {print t, c + 0}' \
            >"$raw/$name.ir"
    done
fi

# The cost of recovery (issue 5): 1% of packets dropped by the fault shim on
# the rx queue against the same run with the shim attached but idle, both
# completion modes, 4 KiB and 64 KiB messages, 4 flows.
for size in 4096 65536; do
    ring=64
    [ "$size" -ge 65536 ] && ring=16
    total=$(( 1000000000 / size ))
    [ $quick -eq 1 ] && total=$(( total / 2 ))
    per=$(( total / 4 ))
    for loss in 0 0.01; do
        for mode in message packet; do
            tailmarkd "loss_${size}_${loss}_${mode}" --vdev=net_ring0 -- --flows 4 --msg-size "$size" \
                --messages "$per" --ring-size "$ring" --completion "$mode" --exit-when-done --duration 60 \
                --fault "drop=$loss,seed=1"
        done
    done
done

/usr/bin/python3 - "$raw" "$out" "$tp_tx" "$tp_rx" "$tp_ms" "$quick" "$(uname -m) $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" <<'PYEOF'
import json, os, sys, glob
raw, out, tp_tx, tp_rx, tp_ms, quick, machine = sys.argv[1:8]
tp = {"txonly": int(tp_tx or 0), "rxonly": int(tp_rx or 0), "macswap": int(tp_ms or 0)}
res = {"machine": machine, "quick": quick == "1", "testpmd_pps": tp, "runs": []}

def load(name):
    p = os.path.join(raw, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None

def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else 0

tx = load("tx_null")
if tx:
    pps = tx["packets_tx"] / tx["elapsed_s"] if tx["elapsed_s"] else 0
    res["tx_null"] = {"pps": pps, "ratio_vs_txonly": pps / tp["txonly"] if tp["txonly"] else None,
                      "cycles_per_packet": tx.get("cycles", {}).get("tx_per_packet")}
for key in ("tx_null_fixed", "tx_null_replay"):
    txr = load(key)
    if txr:
        pps = txr["packets_tx"] / txr["elapsed_s"] if txr["elapsed_s"] else 0
        res[key] = {"pps": pps, "ratio_vs_txonly": pps / tp["txonly"] if tp["txonly"] else None,
                    "cycles_per_packet": txr.get("cycles", {}).get("tx_per_packet")}
grid = {}
for p in sorted(glob.glob(os.path.join(raw, "loop_*.json"))):
    _, size, nf, mode, rep = os.path.basename(p)[:-5].split("_")
    grid.setdefault((int(size), int(nf), mode), []).append(json.load(open(p)))
for (size, nf, mode), runs in sorted(grid.items()):
    runs.sort(key=lambda d: d.get("msgs_per_s") or 0)
    d = runs[len(runs) // 2] # the median run by msgs/s
    res["runs"].append({
        "msg_size": size, "flows": nf, "completion": mode, "ok": all(r.get("ok") for r in runs),
        "reps": len(runs), "msgs_per_s_range": [runs[0].get("msgs_per_s"), runs[-1].get("msgs_per_s")],
        "messages": d.get("messages_completed"), "msgs_per_s": d.get("msgs_per_s"),
        "mpps": d.get("mpps"), "gbps": d.get("gbps"), "latency_ns": d.get("latency_ns"),
        "verify_errors": d.get("verify_errors"), "completion_writes": d.get("completion_writes"),
        "cycles": d.get("cycles"), "memory_bytes": d.get("memory_bytes"),
    })
res["consumer"] = []
for p in sorted(glob.glob(os.path.join(raw, "cons_*.json"))):
    _, size, mode = os.path.basename(p)[:-5].split("_")
    d = json.load(open(p))
    res["consumer"].append({"msg_size": int(size), "completion": mode, "ok": d.get("ok"),
                            "msgs_per_s": d.get("msgs_per_s"),
                            "consumer_cycles_per_message": d.get("cycles", {}).get("consumer_per_message")})
res["rx_replay"] = []
reps = {}
for kind, placement in (("rxreplay", "cached"), ("rxstream", "streamed")):
    for p in sorted(glob.glob(os.path.join(raw, f"{kind}_*.json"))):
        size = int(os.path.basename(p)[:-5].split("_")[1])
        reps.setdefault((size, placement), []).append(json.load(open(p)))
for size, placement in sorted(reps):
    runs = sorted(reps[(size, placement)], key=lambda d: d.get("msgs_per_s") or 0)
    d = runs[len(runs) // 2] # the median run by msgs/s
    cyc = [r.get("cycles", {}).get("rx_per_packet") or 0 for r in runs]
    res["rx_replay"].append({"msg_size": size, "placement": placement, "ok": all(r.get("ok") for r in runs),
                             "runs": len(runs), "packets_streamed": d.get("packets_streamed"),
                             "msgs_per_s": d.get("msgs_per_s"), "mpps": d.get("mpps"), "gbps": d.get("gbps"),
                             "rx_cycles_per_packet": d.get("cycles", {}).get("rx_per_packet"),
                             "rx_cycles_range": [min(cyc), max(cyc)],
                             "msgs_per_s_range": [runs[0].get("msgs_per_s"), runs[-1].get("msgs_per_s")],
                             "latency_ns": d.get("latency_ns")})
res["crc32c"] = []
cb = os.path.join(raw, "crc32c_bench.jsonl")
if os.path.exists(cb):
    for line in open(cb):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if "tsc_hz" in o:
            res["tsc_hz"] = o["tsc_hz"]
            res["crc32c_kernel"] = o.get("kernel")
        else:
            res["crc32c"].append(o)
res["data_auth"] = []
ab = os.path.join(raw, "data_auth_bench.jsonl")
if os.path.exists(ab):
    for line in open(ab):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if "msg_size" in o:
            res["data_auth"].append(o)
        elif "kernel" in o:
            res["polyval_kernel"] = o["kernel"]
rl = load("rxlocal_64")
if rl:
    res["rx_local_64"] = {"ok": rl.get("ok"), "msgs_per_s": rl.get("msgs_per_s"),
                          "rx_cycles_per_packet": rl.get("cycles", {}).get("rx_per_packet"),
                          "consumer_cycles_per_message": rl.get("cycles", {}).get("consumer_per_message")}
res["rx_line_round_trip_ns"] = [(load(n) or {}).get("line_round_trip", {}).get("ns")
                                for n in ("rt_rx_1", "rt_rx_2", "rt_rx_3", "rt_rx_after")]
res["latency_10pct"] = []
res["jitter"] = load("jitter")
for nf in (1, 4):
    runs = [r for r in (load(f"lat10_4096_{nf}_{rep}") for rep in (1, 2, 3)) if r]
    if not runs:
        continue
    def q(key):
        v = sorted((r.get("latency_ns") or {}).get(key, 0) for r in runs)
        return {"median": v[len(v) // 2], "min": v[0], "max": v[-1]}
    e = {"msg_size": 4096, "flows": nf, "runs": len(runs), "msgs_per_s": median([r.get("msgs_per_s") or 0 for r in runs]),
         "p50": q("p50"), "p99": q("p99"), "p999": q("p999"), "ok": all(r.get("ok") for r in runs)}
    tr = load(f"lat10trace_4096_{nf}")
    sm = (tr or {}).get("slow_messages")
    if sm:
        causes = {}
        for m in sm["messages"]:
            causes[m["cause"]] = causes.get(m["cause"], 0) + 1
        done = tr.get("messages_completed") or 1
        # The example: the slowest message whose cause is the most common one.
        top = max(causes, key=causes.get) if causes else None
        ex = max((m for m in sm["messages"] if m["cause"] == top), key=lambda m: m["latency_ns"], default=None)
        e["trace"] = {"bound_ns": sm["bound_ns"], "seen": sm["seen"], "kept": sm["kept"], "completed": done,
                      "p99": (tr.get("latency_ns") or {}).get("p99"), "causes": causes, "example": ex}
    res["latency_10pct"].append(e)
res["instructions"] = {}
for p in sorted(glob.glob(os.path.join(raw, "cg_*.ir"))):
    name = os.path.basename(p)[:-3]
    d = load(name) or {}
    try:
        f = open(p).read().split()
        ir, crc = int(f[0]), int(f[1]) if len(f) > 1 else 0
    except (IndexError, ValueError):
        continue
    pk = d.get("packets_rx" if "_rx_" in name else "packets_tx") or 0
    # crc: the CRC32C of the message (crc32c_update; not crc32c_copy, which
    # is the copy itself): what remains is the per-packet work.
    res["instructions"][name[3:]] = {"instructions": ir, "packets": pk, "per_packet": ir / pk if pk else None,
                                     "crc_instructions": crc,
                                     "per_packet_without_crc": (ir - crc) / pk if pk else None}
res["loss"] = []
for p in sorted(glob.glob(os.path.join(raw, "loss_*.json"))):
    _, size, loss, mode = os.path.basename(p)[:-5].split("_")
    d = json.load(open(p))
    res["loss"].append({"msg_size": int(size), "loss": float(loss), "completion": mode, "ok": d.get("ok"),
                        "msgs_per_s": d.get("msgs_per_s"), "gbps": d.get("gbps"),
                        "retx_pkts": d.get("reliability", {}).get("retx_pkts"),
                        "dropped": d.get("fault", {}).get("dropped"), "latency_ns": d.get("latency_ns")})
res["app"] = []
med = lambda v: sorted(v)[len(v) // 2]
for size in (64, 4096, 65536, 1048576):
    gen, app = [], []
    for p in sorted(glob.glob(os.path.join(raw, f"appgen_{size}_*.json"))):
        d = json.load(open(p))
        if d.get("ok"):
            gen.append(d.get("msgs_per_s") or 0)
    for p in sorted(glob.glob(os.path.join(raw, f"app_{size}_*.json"))):
        if p.endswith(".daemon.json"):
            continue
        try:
            d = json.loads(open(p).read().strip().splitlines()[-1])
        except (IndexError, ValueError):
            continue
        if d.get("failed") == 0 and d.get("received") == d.get("messages"):
            app.append(d["msgs_per_s"])
    if gen and app:
        g, a = med(gen), med(app)
        res["app"].append({"msg_size": size, "generator_msgs_per_s": g, "app_msgs_per_s": a, "ratio": a / g if g else 0,
                           "app_gbps": a * size * 8 / 1e9, "generator_gbps": g * size * 8 / 1e9,
                           "generator_runs": gen, "app_runs": app})
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=2)

def by(size, nf, mode):
    for r in res["runs"]:
        if (r["msg_size"], r["flows"], r["completion"]) == (size, nf, mode):
            return r
lines = [f"Machine: {machine}. One lcore runs every tailmarkd role; testpmd runs one forwarding core.", "",
         f"References (dpdk-testpmd, net_null, copy=0): txonly {tp['txonly']/1e6:.2f} Mpps, "
         f"rxonly {tp['rxonly']/1e6:.2f} Mpps, macswap {tp['macswap']/1e6:.2f} Mpps.", ""]
if tx:
    lines.append(f"tailmark tx path on net_null (64 B messages): {res['tx_null']['pps']/1e6:.2f} Mpps = "
                 f"{res['tx_null']['ratio_vs_txonly'] or 0:.2f}x testpmd txonly, "
                 f"{res['tx_null']['cycles_per_packet'] or 0:.0f} cycles/packet.")
    if "tx_null_fixed" in res:
        r = res["tx_null_fixed"]
        lines.append(f"Without the generator (--payload fixed: the message's bytes ready): {r['pps']/1e6:.2f} Mpps = "
                     f"{r['ratio_vs_txonly'] or 0:.2f}x txonly, {r['cycles_per_packet'] or 0:.0f} cycles/packet.")
    if "tx_null_replay" in res:
        r = res["tx_null_replay"]
        lines.append(f"The same with ready-made packets (--replay): {r['pps']/1e6:.2f} Mpps = "
                     f"{r['ratio_vs_txonly'] or 0:.2f}x txonly, {r['cycles_per_packet'] or 0:.0f} cycles/packet.")
    lines.append("")
nreps = max((r["reps"] for r in res["runs"]), default=1)
lines += [f"Loopback over net_ring (scripts/run.sh's set-up), every role on lcore 1; each row the median of "
          f"{nreps} run{'s' if nreps > 1 else ''}{', interleaved' if nreps > 1 else ''}.", ""]
lines += ["| size | flows | msgs/s (message) | msgs/s (packet) | message/packet | Gbps (message) | Mpps (message) | p50 / p99 / p99.9 ns (message) |",
          "|---:|---:|---:|---:|---:|---:|---:|---|"]
sizes = sorted({r["msg_size"] for r in res["runs"]})
flows = sorted({r["flows"] for r in res["runs"]})
for s in sizes:
    for f in flows:
        m, k = by(s, f, "message"), by(s, f, "packet")
        if not m or not k:
            continue
        ratio = (m["msgs_per_s"] or 0) / k["msgs_per_s"] if k["msgs_per_s"] else 0
        lat = m["latency_ns"] or {}
        ok = "" if (m["ok"] and k["ok"]) else " (run failed)"
        lines.append(f"| {s} | {f} | {m['msgs_per_s']:.0f} | {k['msgs_per_s']:.0f} | {ratio:.2f}x{ok} | "
                     f"{m['gbps']:.2f} | {m['mpps']:.3f} | {lat.get('p50')} / {lat.get('p99')} / {lat.get('p999')} |")
lines += ["", "Cycles (TSC) per unit, message mode, each role's busy iterations; memory: DPDK heap in use.", "",
          "| size | flows | tx cycles/packet | rx cycles/packet | consumer cycles/message | memory MiB |",
          "|---:|---:|---:|---:|---:|---:|"]
for s in sizes:
    for f in flows:
        m = by(s, f, "message")
        if m and m.get("cycles"):
            c = m["cycles"]
            lines.append(f"| {s} | {f} | {c['tx_per_packet']:.0f} | {c['rx_per_packet']:.0f} | "
                         f"{c['consumer_per_message']:.0f} | {(m.get('memory_bytes') or 0) / 2**20:.0f} |")
if res["consumer"]:
    lines += ["", "The consumer's own cycles per message (--verify off: take the completion, release), 1 flow.", "",
              "| size | message mode | packet mode |", "|---:|---:|---:|"]
    cc = {(r["msg_size"], r["completion"]): r for r in res["consumer"]}
    for size in sorted({r["msg_size"] for r in res["consumer"]}):
        m, k = cc.get((size, "message")), cc.get((size, "packet"))
        if m and k:
            lines.append(f"| {size} | {m['consumer_cycles_per_message'] or 0:.0f} | "
                         f"{k['consumer_cycles_per_message'] or 0:.0f} |")
if res["rx_replay"]:
    lines += ["", "rx path per lcore (--replay: lcore 1 runs rx alone, fed ready-made packets; 1 flow; "
              "the median of 3 runs, and the range). Placement: cached stores, or streaming stores around the "
              "caches (--stream-min SIZE).", "",
              "| size | placement | msgs/s | Mpps | verified payload GB/s | rx cycles/packet | msgs/s range | rx cycles range |",
              "|---:|---|---:|---:|---:|---:|---|---|"]
    for r in res["rx_replay"]:
        ok = "" if r["ok"] else " (run failed)"
        lo, hi = r["msgs_per_s_range"]
        clo, chi = r["rx_cycles_range"]
        lines.append(f"| {r['msg_size']} | {r['placement']} | {r['msgs_per_s']:.0f}{ok} | {r['mpps']:.2f} | {r['gbps'] / 8:.2f} | "
                     f"{r['rx_cycles_per_packet'] or 0:.0f} | {lo or 0:.0f} - {hi or 0:.0f} | {clo:.0f} - {chi:.0f} |")
if "rx_local_64" in res:
    r = res["rx_local_64"]
    lines += ["", f"64 B with the consumer on the rx lcore (--verify off, no cross-core handoff): "
                  f"{r['msgs_per_s'] or 0:.0f} msgs/s for both roles, rx {r['rx_cycles_per_packet'] or 0:.0f} "
                  f"cycles/packet, consumer {r['consumer_cycles_per_message'] or 0:.0f} cycles/message."]
rt = res.get("rx_line_round_trip_ns") or []
if len(rt) == 4 and None not in rt:
    lines += ["", "A cache line's round trip between lcore 0's and lcore 1's CPUs (tailmark-jitter) before rounds 1, 2 "
                  f"and 3 of these rx runs and after: {', '.join(f'{x:.0f}' for x in rt)} ns. Each packet and "
                  "completion above crosses it."]
if res["crc32c"]:
    hz = res.get("tsc_hz") or 0
    # Each kernel the CPU has, forced (crc32c_update_with / crc32c_copy_with),
    # beside the dispatched pair; bench output without them renders as before.
    kernels = [k for k in ("chains", "fold128", "fold512") if all(f"update_{k}" in c for c in res["crc32c"])]
    picked = res.get("crc32c_kernel")
    lines += ["", f"CRC32C on hot buffers, bytes per TSC cycle (TSC {hz/1e9:.2f} GHz; GB/s = B/cycle x GHz): "
              "tailmark's crc32c_update, crc32c_copy (fused with the copy, as the rx path places)"
              + (f" through the dispatch (it picked {picked})" if picked else "")
              + (", each kernel forced (" + ", ".join(kernels) + ")" if kernels else "")
              + ", memcpy alone, and DPDK's rte_hash_crc.", "",
              "| bytes | crc32c_update | crc32c_copy | "
              + "".join(f"{k} update | {k} copy | " for k in kernels) + "memcpy | rte_hash_crc |",
              "|---:|---:|---:|" + "---:|---:|" * len(kernels) + "---:|---:|"]
    for c in res["crc32c"]:
        per = "".join(f"{c[f'update_{k}']:.2f} | {c[f'copy_{k}']:.2f} | " for k in kernels)
        lines.append(f"| {c['len']} | {c['update']:.2f} ({c['update']*hz/1e9:.1f} GB/s) | "
                     f"{c['copy']:.2f} ({c['copy']*hz/1e9:.1f} GB/s) | {per}{c['memcpy']:.2f} | {c['rte_hash_crc']:.2f} |")
if res["data_auth"]:
    lines += ["", "--data-auth's cost, TSC cycles per data packet (version 2's tag over the header alone, then over "
              f"the payload's POLYVAL too, {res.get('polyval_kernel')} kernel): the sender's TxMarker::build (header, "
              "copy, tag) and the receiver's tag check before placing. The default is off: at 64 KiB the payload's "
              "hash costs about as much again as building or placing the packet.", "",
              "| message | packets | tx off | tx on | rx check off | rx check on | added per packet (tx + rx) |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for a in res["data_auth"]:
        lines.append(f"| {a['msg_size']} B | {a['pkts']} | {a['tx_off']:.0f} | {a['tx_on']:.0f} | {a['rx_off']:.0f} | "
                     f"{a['rx_on']:.0f} | {a['tx_on'] - a['tx_off'] + a['rx_on'] - a['rx_off']:.0f} |")
if res["latency_10pct"]:
    j = res.get("jitter")
    lines += ["", "Latency at 10% load: 4 KiB, paced (--rate) at a tenth of the unpaced loopback rate above; from the "
              "rx burst of a message's last packet to the consumer seeing its flag; every role on lcore 1. Median "
              "of the runs, and the range.", "",
              "| flows | msgs/s | runs | p50 ns | p99 ns | p99.9 ns | p99 range |", "|---:|---:|---:|---:|---:|---:|---|"]
    for l in res["latency_10pct"]:
        lines.append(f"| {l['flows']} | {l['msgs_per_s']:.0f} | {l['runs']} | {l['p50']['median']:.0f} | "
                     f"{l['p99']['median']:.0f} | {l['p999']['median']:.0f} | {l['p99']['min']:.0f} - {l['p99']['max']:.0f} |")
    if j:
        g = j["gaps_per_s"]
        lines += ["", f"The platform alone (tailmark-jitter: a busy loop on lcore 1's CPU for {j['seconds']:.0f} s, "
                  f"before the runs): the CPU was taken away {g['over_2us']:.0f} times/s for over 2 us, "
                  f"{g['over_5us']:.0f}/s over 5 us, {g['over_20us']:.0f}/s over 20 us, {g['over_100us']:.1f}/s over "
                  f"100 us; {100 * j['taken_share']:.2f}% of the time, the longest {j['largest_us']:.0f} us."]
    for l in res["latency_10pct"]:
        t = l.get("trace")
        if not t:
            continue
        share = 100.0 * t["seen"] / t["completed"]
        lines += ["", f"{l['flows']} flow(s), --trace-slow-ns {t['bound_ns']} (one more run, p99 {t['p99']} ns): "
                  f"{t['seen']} messages ({share:.2f}%) over the bound; of the {t['kept']} kept, by cause: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(t["causes"].items(), key=lambda kv: -kv[1])) + "."]
        ex = t.get("example")
        if ex:
            lines += ["", f"The slowest '{ex['cause']}' message (flow {ex['flow']}, msg {ex['msg_id']}, "
                      f"{ex['latency_ns']:.0f} ns): the lcore's last iterations, times from its rx burst.", "",
                      "| iteration start ns | tx step ns | rx step ns | consumer ns | tx msgs / pkts | rx pkts | acks | consumed |",
                      "|---:|---:|---:|---:|---|---:|---:|---:|"]
            for it in ex["iters"]:
                lines.append(f"| {it['start_ns']:.0f} | {it['tx_ns']:.0f} | {it['rx_ns']:.0f} | {it['cons_ns']:.0f} | "
                             f"{it['tx_msgs']} / {it['tx_pkts']} | {it['rx_pkts']} | {it['acks']} | {it['cons_msgs']} |")
if res["instructions"]:
    lines += ["", "Instructions per packet (callgrind, toggled on the path's functions only):", "",
              "| path, size | instructions/packet | without crc32c_update (the message's CRC32C) |", "|---|---:|---:|"]
    for k, v in sorted(res["instructions"].items()):
        lines.append(f"| {k} | {v['per_packet'] or 0:.0f} | {v.get('per_packet_without_crc') or 0:.0f} |")
if res["app"]:
    lines += ["", "The application path: tailmark-perf --loop (one process on core 0, sending from its arena to itself "
              "through tailmarkd --mode service on lcore 1, zero-copy tx) against the generator's loopback (every role on "
              "lcore 1, copy tx), both over net_ring, 1 flow, --verify off; medians of interleaved runs.", "",
              "| size | generator msgs/s | application msgs/s | application/generator | Gbps (generator) | Gbps (application) |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in res["app"]:
        lines.append(f"| {r['msg_size']} | {r['generator_msgs_per_s']:.0f} | {r['app_msgs_per_s']:.0f} | {r['ratio']:.2f}x | "
                     f"{r['generator_gbps']:.2f} | {r['app_gbps']:.2f} |")
if res["loss"]:
    lines += ["", "Recovery cost: loopback over net_ring, 4 flows, the fault shim dropping 1% of packets (0%: shim idle).", "",
              "| size | completion | loss | msgs/s | Gbps | vs 0% | packets dropped | retransmitted | p99 ns |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    base = {(r["msg_size"], r["completion"]): r for r in res["loss"] if r["loss"] == 0}
    for r in sorted(res["loss"], key=lambda r: (r["msg_size"], r["completion"], r["loss"])):
        b = base.get((r["msg_size"], r["completion"]))
        rel = (r["msgs_per_s"] or 0) / b["msgs_per_s"] if b and b["msgs_per_s"] else 0
        ok = "" if r["ok"] else " (run failed)"
        lines.append(f"| {r['msg_size']} | {r['completion']} | {r['loss']*100:.0f}% | {r['msgs_per_s']:.0f}{ok} | "
                     f"{r['gbps']:.2f} | {rel:.2f}x | {r['dropped']} | {r['retx_pkts']} | "
                     f"{(r['latency_ns'] or {}).get('p99')} |")
open(os.path.join(out, "results.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for mode, style in (("message", "-o"), ("packet", "--s")):
        f0 = min(flows)
        pts = [(r["msg_size"], r["gbps"], r["msgs_per_s"]) for r in res["runs"]
               if r["completion"] == mode and r["flows"] == f0]
        pts.sort()
        ax[0].plot([p[0] for p in pts], [p[1] for p in pts], style, label=f"{mode} completion")
        ax[1].plot([p[0] for p in pts], [p[2] for p in pts], style, label=f"{mode} completion")
    for a, t in ((ax[0], "payload Gbps"), (ax[1], "messages/s")):
        a.set_xscale("log", base=2); a.set_xlabel("message size (bytes)"); a.set_title(t); a.legend()
    ax[1].set_yscale("log")
    fig.suptitle(f"tailmarkd loopback over net_ring, {min(flows)} flow(s)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "goodput.png"), dpi=90)
    print(f"plot: {os.path.join(out, 'goodput.png')}")
except ImportError:
    print("no plot: install python3-matplotlib")
PYEOF
rm -f /dev/hugepages/tm_bench_* 2>/dev/null
rm -rf /var/run/dpdk/tm_bench_* 2>/dev/null
tm_say "results: $out/results.json, $out/results.md"
