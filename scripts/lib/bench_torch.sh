# scripts/bench.sh --torch: all_reduce bus bandwidth of tailmark.torch and of
# gloo between the same two ranks, in one run. Sourced by bench.sh.
# shellcheck shell=bash
#
# Two ranks in their own network namespaces, joined by veth pairs and a
# bridge (tests/torch/lib.sh's tt_mesh). tailmark: each rank's
# tailmarkd --mode service on net_af_packet over its veth; gloo: kernel TCP
# over the same veths. Sizes 64 KiB .. 256 MiB of float32; the backends are
# interleaved round by round (this VM's speed drifts), and the table holds
# the medians. The link at each MTU of TT_BENCH_MTUS ("9000 1500"), one mesh
# after the other, both backends on it. Writes $out/torch.json, torch.md and
# torch-allreduce.png.
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
    local sizes=${TT_BENCH_SIZES:-65536,262144,1048576,4194304,16777216,67108864,268435456}
    local rounds=${TT_BENCH_ROUNDS:-3} round b mtu r
    : >"$out/torch.raw"
    for mtu in ${TT_BENCH_MTUS:-9000 1500}; do
        TT_MTU=$mtu
        tt_mesh 2
        for ((round = 1; round <= rounds; round++)); do
            for b in tailmark gloo; do
                tt_run bw$mtu$round$b 900 "$TT_DIR/allreduce_bw.py" $b "$sizes" 2
                if ! tt_all_ok; then
                    tt_show bw$mtu$round$b
                    tm_fail "torch bench: $b failed in round $round at MTU $mtu"
                    return 1
                fi
                sed "s/^{/{\"mtu\": $mtu, \"round\": $round, /" "$TM_WORK/bw$mtu$round$b.0.out" >>"$out/torch.raw"
            done
        done
        for ((r = 0; r < TT_N; r++)); do kill -INT "${TT_PID[r]}" 2>/dev/null; done
        for ((r = 0; r < TT_N; r++)); do wait "${TT_PID[r]}" 2>/dev/null; done
    done
    local cpu
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
    "$TT_PY" - "$out" "$cpu" "$(nproc)" <<'PY'
import json, statistics, sys
out, cpu, ncpu = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(f"{out}/torch.raw") if l.startswith("{")]
mtus = sorted({r["mtu"] for r in rows}, reverse=True)
res = {"cpu": cpu, "cpus": int(ncpu), "world": 2, "rows": []}
for m in mtus:
    for s in sorted({r["bytes"] for r in rows if r["mtu"] == m}):
        pick = lambda b: [r["busbw_gbps"] for r in rows if r["mtu"] == m and r["bytes"] == s and r["backend"] == b]
        med = {b: statistics.median(pick(b)) for b in ("tailmark", "gloo")}
        res["rows"].append({"mtu": m, "bytes": s, "tailmark_busbw_gbps": med["tailmark"],
                            "gloo_busbw_gbps": med["gloo"], "ratio": med["tailmark"] / med["gloo"] if med["gloo"] else None,
                            "rounds": len(pick("tailmark"))})
json.dump(res, open(f"{out}/torch.json", "w"), indent=1)
def human(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
lines = [f"all_reduce (float32, 2 ranks, {cpu}, {ncpu} vCPUs): bus bandwidth, medians of "
         f"{res['rows'][0]['rounds']} interleaved rounds; the link (veths and bridge) at each MTU, both backends on it", ""]
for m in mtus:
    lines += [f"Link MTU {m}:", "", "| size | tailmark Gbit/s | gloo Gbit/s | tailmark / gloo |", "|---|---|---|---|"]
    for r in res["rows"]:
        if r["mtu"] == m:
            lines.append(f"| {human(r['bytes'])} | {r['tailmark_busbw_gbps']:.2f} | {r['gloo_busbw_gbps']:.2f} | "
                         f"{r['ratio']:.2f}x |")
    lines.append("")
open(f"{out}/torch.md", "w").write("\n".join(lines))
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for m, style in zip(mtus, ("-", ":", "-.")):
        sel = [r for r in res["rows"] if r["mtu"] == m]
        xs = [r["bytes"] for r in sel]
        ax.plot(xs, [r["tailmark_busbw_gbps"] for r in sel], "o" + style, color="C0",
                label=f"tailmark (net_af_packet), MTU {m}")
        ax.plot(xs, [r["gloo_busbw_gbps"] for r in sel], "s" + style, color="C1", label=f"gloo (kernel TCP), MTU {m}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [human(x) for x in xs])
    ax.set_xlabel("all_reduce size (float32)")
    ax.set_ylabel("bus bandwidth, Gbit/s")
    ax.set_title(f"2 ranks over veth + bridge, {ncpu} vCPUs")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/torch-allreduce.png", dpi=110)
    print(f"plot: {out}/torch-allreduce.png")
except ImportError:
    print("no matplotlib for /usr/bin/python3: no plot")
PY
}
