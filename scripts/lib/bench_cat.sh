# scripts/bench.sh --cat: tailmark-cat between two service daemons on a veth
# pair, --flows 1 against --flows 4 (issue 41, item 5: more flows must never
# be slower). Sourced by bench.sh.
# shellcheck shell=bash
#
# Two network namespaces joined by a veth pair, one `tailmarkd --mode
# service` in each (net_af_packet, one lcore each, default settings but
# --secret), and in each round 256 MiB of random bytes from a file through
# `tailmark-cat --connect` into `tailmark-cat --listen` (written to
# /dev/null, the byte count checked), once per flow count, the order
# alternating round by round. The figure is the payload over the sender's
# wall time (its attach to its last delivery). Writes $out/cat.md, cat.json.
bench_cat() {
    local out=$1 na=tm_bc_a_$$ nb=tm_bc_b_$$ rounds=${TM_BENCH_ROUNDS:-5} r f port=7300 size=268435456
    [ "$(id -u)" -eq 0 ] || { tm_say "--cat needs root (network namespaces)"; return 1; }
    [ $quick -eq 1 ] && rounds=2
    local cat_bin=$TM_BUILD/app/tailmark-cat/tailmark-cat raw=$out/cat_raw
    rm -rf "$raw"
    mkdir -p "$raw"
    local pa='' pb=''
    # shellcheck disable=SC2064
    trap "kill -INT \$pa \$pb 2>/dev/null; wait \$pa \$pb 2>/dev/null; ip netns del $na 2>/dev/null; ip netns del $nb 2>/dev/null" RETURN
    tm_veth_netns $na $nb || return 1
    local mem=()
    read -r -a mem <<<"${TAILMARK_EAL_MEM---no-huge -m 1024} ${TM_BENCH_EAL_EXTRA:-}"
    local secret=00112233445566778899aabbccddeeff
    ip netns exec $na "$daemon" "${mem[@]}" --no-pci --file-prefix "tm_bc_a_$$" --log-level=lib.eal:warning \
        --vdev=net_af_packet0,iface=vethA,framecnt=4096 -l 0 -- --mode service --src-ip 198.18.0.1 \
        --control-socket "$raw/a.sock" --secret $secret --stats-period 0 --summary-json "$raw/a.json" \
        >"$raw/a.log" 2>&1 &
    pa=$!
    ip netns exec $nb "$daemon" "${mem[@]}" --no-pci --file-prefix "tm_bc_b_$$" --log-level=lib.eal:warning \
        --vdev=net_af_packet0,iface=vethB,framecnt=4096 -l 1 -- --mode service --src-ip 198.18.0.2 \
        --control-socket "$raw/b.sock" --secret $secret --stats-period 0 --summary-json "$raw/b.json" \
        >"$raw/b.log" 2>&1 &
    pb=$!
    for _ in $(seq 100); do [ -S "$raw/a.sock" ] && [ -S "$raw/b.sock" ] && break; sleep 0.2; done
    [ -S "$raw/a.sock" ] && [ -S "$raw/b.sock" ] || { tm_say "the service daemons never came up ($raw)"; return 1; }
    head -c $size /dev/urandom >"$raw/in"
    for r in $(seq 1 $rounds); do
        local order="1 4"
        [ $((r % 2)) -eq 0 ] && order="4 1"
        for f in $order; do
            port=$((port + 1))
            ip netns exec $nb env TAILMARK_SOCKET="$raw/b.sock" timeout 300 "$cat_bin" --listen $port --quiet \
                --flows $f 2>"$raw/l_${f}_$r.err" | wc -c >"$raw/l_${f}_$r.bytes" &
            local lp=$!
            for _ in $(seq 50); do grep -q "listens on port $port\$" "$raw/b.log" && break; sleep 0.1; done
            local t0 t1 rc
            t0=$(date +%s%N)
            ip netns exec $na env TAILMARK_SOCKET="$raw/a.sock" timeout 300 "$cat_bin" --connect 198.18.0.2:$port \
                --quiet --flows $f <"$raw/in" 2>"$raw/s_${f}_$r.err"
            rc=$?
            t1=$(date +%s%N)
            wait $lp
            local got
            got=$(cat "$raw/l_${f}_$r.bytes")
            if [ $rc -ne 0 ] || [ "$got" != $size ]; then
                tm_say "  --flows $f, round $r: failed (exit $rc, $got of $size bytes; $raw)"
                echo "0" >"$raw/gbps_${f}_$r"
            else
                python3 -c "print(f'{$size * 8 / (($t1 - $t0) / 1e9) / 1e9:.3f}')" >"$raw/gbps_${f}_$r"
                tm_say "  --flows $f, round $r: $(cat "$raw/gbps_${f}_$r") Gbit/s"
            fi
        done
    done
    rm -f "$raw/in"
    "$PY" - "$out" "$raw" "$rounds" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
        "${TM_BENCH_A_REV:-$(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet || echo +)}" <<'PY'
import json, os, statistics, sys, datetime
out, raw, rounds, cpu, rev = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
g = {f: [float(open(os.path.join(raw, f"gbps_{f}_{r}")).read()) for r in range(1, rounds + 1)] for f in (1, 4)}
pairs = [a / b if b else 0 for a, b in zip(g[4], g[1])]
res = {"cpu": cpu, "rev": rev, "date": datetime.date.today().isoformat(), "rounds": rounds,
       "flows1_gbps": g[1], "flows4_gbps": g[4], "median_flows1": statistics.median(g[1]),
       "median_flows4": statistics.median(g[4]), "paired_ratio_median": statistics.median(pairs)}
json.dump(res, open(os.path.join(out, "cat.json"), "w"), indent=1)
lines = [f"tailmark-cat, 256 MiB, between two service daemons on a veth pair (net_af_packet, one lcore each); "
         f"{cpu}, {os.cpu_count()} vCPUs; {res['date']}, {rev}; {rounds} interleaved rounds.", "",
         "| | round " + " | round ".join(str(r) for r in range(1, rounds + 1)) + " | median |",
         "|---|" + "---:|" * (rounds + 1)]
for f in (1, 4):
    lines.append(f"| `--flows {f}` (Gbit/s) | " + " | ".join(f"{x:.2f}" for x in g[f]) +
                 f" | {statistics.median(g[f]):.2f} |")
lines.append("| 4 / 1 | " + " | ".join(f"{x:.2f}" for x in pairs) + f" | {statistics.median(pairs):.2f} |")
open(os.path.join(out, "cat.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}
