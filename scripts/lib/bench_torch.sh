# scripts/bench.sh --torch: tailmark.torch against gloo, all_reduce and
# all_to_all, bus bandwidth and time per operation, on the same ranks and
# the same veths in one run (issue 39, item 5). Sourced by bench.sh.
# shellcheck shell=bash
#
# Layouts (TT_BENCH_WORLDS, default "2x2 2x4 1x8"): NxP is N network
# namespaces ("hosts"), each with its own tailmarkd --mode service on
# net_af_packet over a veth to one bridge, and P ranks on each that share
# its daemon (tests/torch/lib.sh's tt_mesh N P): 2x2 is world 4, 2x4 world
# 8 on two hosts, 1x8 world 8 on one host (tailmark through the daemon's
# memory, gloo over the kernel's loopback). gloo: kernel TCP over the same
# veths. Each multi-host layout at every MTU of TT_BENCH_MTUS ("9000 1500":
# the veths' and the bridge's); a one-host layout once (no wire: the MTU
# does not apply).
#
# Each job (tests/torch/coll_bw.py) runs every op of TT_BENCH_OPS
# ("all_reduce,all_to_all") at every size of TT_BENCH_SIZES (bytes per
# rank, float32; 8 KiB .. 256 MiB), TT_BENCH_BUDGET seconds each (1; at
# least 3 runs), and reports the slowest rank's median time. The backends
# take turns job by job, TT_BENCH_ROUNDS times (3), their order swapped
# every round (this VM's speed drifts); the table holds the median over
# rounds and the min..max. Sizes whose buffers would not fit the memory
# available at the start (world x 3 x size, plus the ranks' send arenas, over
# 70% of MemAvailable) are left out of that layout, and the table says so.
# A job that fails (a rank's exception) is recorded as such, with what it
# measured before, and the run goes on. TT_BENCH_PEER_TIMEOUT_MS: the
# daemons' --peer-timeout-ms (5000, the daemon's default).
# Writes $out/torch.json, torch.md and torch.png (scripts/lib/bench_torch.py).
bench_torch() {
    local out=$1
    TM_TEST=bench_torch
    # shellcheck source=../../tests/integration/lib.sh
    source "$TM_ROOT/tests/integration/lib.sh"
    # shellcheck source=../../tests/torch/lib.sh
    source "$TM_ROOT/tests/torch/lib.sh"
    tm_require_daemon
    tm_require_root
    tt_require
    local sizes=${TT_BENCH_SIZES:-8192,65536,262144,1048576,4194304,16777216,67108864,268435456}
    local worlds=${TT_BENCH_WORLDS:-2x2 2x4 1x8} ops=${TT_BENCH_OPS:-all_reduce,all_to_all}
    local mtus=${TT_BENCH_MTUS:-9000 1500} rounds=${TT_BENCH_ROUNDS:-3} budget=${TT_BENCH_BUDGET:-1}
    local spec nodes per world mtu mtu_list round b order k s fit name t0=$SECONDS t1
    TT_DAEMON_S=${TT_DAEMON_S:-7200} # a mesh serves every round
    # The daemons' --peer-timeout-ms (and so their retry budget): the
    # daemon's default, 5000, unless TT_BENCH_PEER_TIMEOUT_MS.
    TT_PEER_TIMEOUT_MS=${TT_BENCH_PEER_TIMEOUT_MS:-5000}
    local load0
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    : >"$out/torch.raw"
    for spec in $worlds; do
        [[ $spec == *x* ]] || spec=${spec}x1
        nodes=${spec%x*} per=${spec#*x} world=$((nodes * per))
        mtu_list=$mtus
        [ "$nodes" -eq 1 ] && mtu_list=${mtus%% *}
        # Memory: each rank holds up to 3 buffers of the size (all_to_all's
        # in and out, gloo's or tailmark's scratch) and a send arena of
        # 2 x 16 x (world - 1) 1 MiB slots (lib/tailmark-torch/mesh.cc).
        local avail_kib fits=() left=()
        avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
        for s in ${sizes//,/ }; do
            if (((world * (3 * s + 32 * (world - 1) * 1048576)) / 1024 <= avail_kib * 7 / 10)); then
                fits+=("$s")
            else
                left+=("$s")
            fi
        done
        if [ ${#left[@]} -gt 0 ]; then
            tm_log "torch bench: world $world ($spec): sizes ${left[*]} left out: they need more than 70% of MemAvailable ($((avail_kib >> 10)) MiB)"
            echo "{\"layout\": \"$spec\", \"skipped\": [$(IFS=,; echo "${left[*]}")], \"mem_available_mib\": $((avail_kib >> 10))}" >>"$out/torch.raw"
        fi
        [ ${#fits[@]} -gt 0 ] || continue
        fit=$(IFS=,; echo "${fits[*]}")
        for mtu in $mtu_list; do
            TT_MTU=$mtu
            tt_mesh "$nodes" "$per"
            for ((round = 1; round <= rounds; round++)); do
                order="tailmark gloo"
                ((round % 2 == 0)) && order="gloo tailmark"
                for b in $order; do
                    name=bw${nodes}x$per.$mtu.$round.$b
                    t1=$SECONDS
                    tt_run "$name" 1800 "$TT_DIR/coll_bw.py" $b "$ops" "$fit" "$budget"
                    local mem=$mtu
                    [ "$nodes" -eq 1 ] && mem=0
                    local tag="\"layout\": \"$spec\", \"nodes\": $nodes, \"per\": $per, \"mtu\": $mem, \"round\": $round, "
                    # What rank 0 measured before any failure counts.
                    sed "s/^{/{$tag/" "$TM_WORK/$name.0.out" | grep '^{' >>"$out/torch.raw"
                    if ! tt_all_ok; then
                        # A failed job is a result: recorded, and the run goes on.
                        tt_show "$name"
                        local err
                        err=$(grep -h -m1 '^RuntimeError' "$TM_WORK/$name".*.out | head -1)
                        tm_log "torch bench: $b FAILED at $spec, MTU $mtu, round $round: ${err:-no RuntimeError line}"
                        "$TT_PY" -c 'import json, sys; print("{" + sys.argv[1] + json.dumps({"backend": sys.argv[2], "failed": sys.argv[3]})[1:])' \
                            "$tag" "$b" "${err:-exit codes ${TT_RC[*]}}" >>"$out/torch.raw"
                        for ((k = 0; k < TT_NODES; k++)); do
                            kill -0 "${TT_PID[k]}" 2>/dev/null || { tm_fail "torch bench: node $k's daemon died at $spec, MTU $mtu"; return 1; }
                        done
                    fi
                    tm_log "torch bench: $spec MTU $mtu round $round $b: $((SECONDS - t1)) s"
                done
            done
            for ((k = 0; k < TT_NODES; k++)); do kill -INT "${TT_PID[k]}" 2>/dev/null; done
            for ((k = 0; k < TT_NODES; k++)); do wait "${TT_PID[k]}" 2>/dev/null; done
            for k in "${TT_NS[@]:0:TT_NODES}" "$TT_BR"; do ip netns del "$k" 2>/dev/null; done
        done
    done
    local cpu rev
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
    rev="$(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet HEAD -- lib tests/torch scripts || echo +)"
    local cmd="scripts/bench.sh --torch"
    for k in WORLDS SIZES OPS MTUS ROUNDS BUDGET PEER_TIMEOUT_MS; do
        local v="TT_BENCH_$k"
        [ -n "${!v:-}" ] && cmd="$v=\"${!v}\" $cmd"
    done
    "$TT_PY" "$TM_ROOT/scripts/lib/bench_torch.py" "$out" "$cpu" "$(nproc)" "$rev" "$((SECONDS - t0))" "$cmd" \
        "$load0 .. $(cut -d' ' -f1-3 /proc/loadavg)"
}
