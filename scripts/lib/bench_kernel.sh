# scripts/bench.sh --kernel: tailmarkd beside the kernel's stack, net_af_xdp
# against net_af_packet, in one run. Sourced by bench.sh.
# shellcheck shell=bash
#
# Two processes (--mode send / --mode recv), each in its own network
# namespace, joined by a veth pair, as tests/integration/afxdp.sh and
# afpacket_two_process.sh run them: one lcore each, 4 KiB, 64 KiB and 1 MiB
# messages. For each size the two drivers alternate, three rounds (one with
# --quick); the table has each driver's median goodput and message rate from
# the receiver's summary, and their ratio (af_xdp / af_packet) taken round by
# round. veth has no AF_XDP zero copy: this is copy mode on both sides, the
# kernel's path and not a NIC's. The senders' congestion target is 20 ms (as
# in afpacket_two_process.sh's hand-off case): two busy pollers per vCPU wait
# milliseconds for a CPU, which the default 500 us target reads as a queue.
# Writes $out/kernel.md and kernel.json.
bench_kernel() {
    local out=$1 na=tm_bk_a_$$ nb=tm_bk_b_$$ rounds=3 size flows msgs drv r rc
    [ "$(id -u)" -eq 0 ] || { tm_say "--kernel needs root (network namespaces)"; return 1; }
    [ $quick -eq 1 ] && rounds=1
    local raw=$out/kernel_raw
    rm -rf "$raw"
    mkdir -p "$raw"
    trap 'ip netns del '$na' 2>/dev/null; ip netns del '$nb' 2>/dev/null' RETURN
    tm_veth_netns $na $nb || return 1
    local mem=()
    read -r -a mem <<<"${TAILMARK_EAL_MEM---no-huge -m 1024}"
    local secret=00112233445566778899aabbccddeeff
    # size flows messages-per-flow: about 100-250 MB a run
    local grid=("4096 4 10000" "65536 4 1000" "1048576 2 64")
    [ $quick -eq 1 ] && grid=("4096 4 4000" "1048576 2 32")
    for spec in "${grid[@]}"; do
        read -r size flows msgs <<<"$spec"
        for r in $(seq 1 $rounds); do
            for drv in af_packet af_xdp; do
                local va vb tag=${drv}_${size}_$r
                if [ $drv = af_packet ]; then
                    va="--vdev=net_af_packet0,iface=vethA,framecnt=4096"
                    vb="--vdev=net_af_packet0,iface=vethB,framecnt=4096"
                else
                    va="--vdev=net_af_xdp0,iface=vethA,start_queue=0,queue_count=1"
                    vb="--vdev=net_af_xdp0,iface=vethB,start_queue=0,queue_count=1"
                fi
                local common=(--flows "$flows" --messages "$msgs" --msg-size "$size" --secret $secret
                              --exit-when-done --duration 60 --stats-period 0 --cc-target-us 20000)
                ip netns exec $nb timeout -k 5 75 "$daemon" "${mem[@]}" --no-pci --file-prefix "tm_bk_r_$$" \
                    --log-level=lib.eal:warning $vb -l 1 -- --mode recv --src-ip 198.18.0.2 \
                    --summary-json "$raw/${tag}_recv.json" "${common[@]}" >"$raw/${tag}_recv.log" 2>&1 &
                local rpid=$!
                ip netns exec $na timeout -k 5 75 "$daemon" "${mem[@]}" --no-pci --file-prefix "tm_bk_s_$$" \
                    --log-level=lib.eal:warning $va -l 0 -- --mode send --src-ip 198.18.0.1 --dst-ip 198.18.0.2 \
                    --summary-json "$raw/${tag}_send.json" "${common[@]}" >"$raw/${tag}_send.log" 2>&1
                rc=$?
                wait $rpid
                [ $rc -eq 0 ] && [ $? -eq 0 ] || tm_say "  $tag: a run failed (logs in $raw)"
                tm_say "  $drv, $size B x $flows flows, round $r: $(python3 -c "
import json; d = json.load(open('$raw/${tag}_recv.json')); print(f\"{d['gbps']:.2f} Gbit/s\")" 2>/dev/null || echo failed)"
            done
        done
    done
    /usr/bin/python3 - "$out" "$raw" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" "$rounds" \
        "${grid[@]}" <<'PY'
import json, os, statistics, sys
out, raw, cpu, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
grid = [tuple(int(x) for x in g.split()) for g in sys.argv[5:]]
def load(drv, size, r):
    p = os.path.join(raw, f"{drv}_{size}_{r}_recv.json")
    try:
        d = json.load(open(p))
    except Exception:
        return None
    return d if d.get("ok") else None
res = {"cpu": cpu, "rounds": rounds, "rows": []}
lines = [f"Two processes over a veth pair (copy mode on both drivers), one lcore each, --cc-target-us 20000; {cpu}, "
         f"{os.cpu_count()} vCPUs; medians of {rounds} interleaved round(s).", "",
         "| message | flows | af_packet Gbit/s | af_xdp Gbit/s | af_packet msg/s | af_xdp msg/s | af_xdp / af_packet (median of rounds) |",
         "|---:|---:|---:|---:|---:|---:|---:|"]
for size, flows, msgs in grid:
    row = {"msg_size": size, "flows": flows}
    ratios = []
    for r in range(1, rounds + 1):
        a, x = load("af_packet", size, r), load("af_xdp", size, r)
        if a and x and a["gbps"] > 0:
            ratios.append(x["gbps"] / a["gbps"])
    for drv in ("af_packet", "af_xdp"):
        runs = [d for d in (load(drv, size, r) for r in range(1, rounds + 1)) if d]
        row[drv] = {"gbps": statistics.median(d["gbps"] for d in runs) if runs else None,
                    "msgs_per_s": statistics.median(d["messages_completed"] / d["elapsed_s"] for d in runs if d["elapsed_s"] > 0)
                    if runs else None, "runs": len(runs)}
    row["ratio"] = statistics.median(ratios) if ratios else None
    res["rows"].append(row)
    f = lambda v, p: "failed" if v is None else f"{v:.{p}f}"
    lines.append(f"| {size} | {flows} | {f(row['af_packet']['gbps'], 2)} | {f(row['af_xdp']['gbps'], 2)} | "
                 f"{f(row['af_packet']['msgs_per_s'], 0)} | {f(row['af_xdp']['msgs_per_s'], 0)} | {f(row['ratio'], 2)} |")
json.dump(res, open(os.path.join(out, "kernel.json"), "w"), indent=1)
open(os.path.join(out, "kernel.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}
