# scripts/bench.sh --torch: all_reduce bus bandwidth of tailmark.torch and of
# gloo between the same two ranks, in one run. Sourced by bench.sh.
# shellcheck shell=bash
#
# Two ranks in their own network namespaces, joined by veth pairs and a
# bridge (tests/torch/lib.sh's tt_mesh). tailmark: each rank's
# tailmarkd --mode service on net_af_packet over its veth; gloo: kernel TCP
# over the same veths. Sizes 64 KiB .. 256 MiB of float32; the backends are
# interleaved round by round (this VM's speed drifts), and the table holds
# the medians. Writes $out/torch.json, torch.md and torch-allreduce.png.
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
    local rounds=${TT_BENCH_ROUNDS:-3} round b
    tt_mesh 2
    : >"$out/torch.raw"
    for ((round = 1; round <= rounds; round++)); do
        for b in tailmark gloo; do
            tt_run bw$round$b 900 "$TT_DIR/allreduce_bw.py" $b "$sizes" 2
            if ! tt_all_ok; then
                tt_show bw$round$b
                tm_fail "torch bench: $b failed in round $round"
                return 1
            fi
            sed "s/^{/{\"round\": $round, /" "$TM_WORK/bw$round$b.0.out" >>"$out/torch.raw"
        done
    done
    local cpu
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
    "$TT_PY" - "$out" "$cpu" "$(nproc)" <<'PY'
import json, statistics, sys
out, cpu, ncpu = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(f"{out}/torch.raw") if l.startswith("{")]
sizes = sorted({r["bytes"] for r in rows})
res = {"cpu": cpu, "cpus": int(ncpu), "world": 2, "rows": []}
for s in sizes:
    med = {b: statistics.median([r["busbw_gbps"] for r in rows if r["bytes"] == s and r["backend"] == b])
           for b in ("tailmark", "gloo")}
    res["rows"].append({"bytes": s, "tailmark_busbw_gbps": med["tailmark"], "gloo_busbw_gbps": med["gloo"],
                        "ratio": med["tailmark"] / med["gloo"] if med["gloo"] else None,
                        "rounds": sum(1 for r in rows if r["bytes"] == s and r["backend"] == "tailmark")})
json.dump(res, open(f"{out}/torch.json", "w"), indent=1)
def human(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
lines = [f"all_reduce (float32, 2 ranks, {cpu}, {ncpu} vCPUs): bus bandwidth, medians of "
         f"{res['rows'][0]['rounds']} interleaved rounds", "",
         "| size | tailmark Gbit/s | gloo Gbit/s | tailmark / gloo |", "|---|---|---|---|"]
for r in res["rows"]:
    lines.append(f"| {human(r['bytes'])} | {r['tailmark_busbw_gbps']:.2f} | {r['gloo_busbw_gbps']:.2f} | "
                 f"{r['ratio']:.2f}x |")
open(f"{out}/torch.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [r["bytes"] for r in res["rows"]]
    ax.plot(xs, [r["tailmark_busbw_gbps"] for r in res["rows"]], "o-", label="tailmark (net_af_packet)")
    ax.plot(xs, [r["gloo_busbw_gbps"] for r in res["rows"]], "s--", label="gloo (kernel TCP)")
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
    local r
    for ((r = 0; r < TT_N; r++)); do kill -INT "${TT_PID[r]}" 2>/dev/null; done
    for ((r = 0; r < TT_N; r++)); do wait "${TT_PID[r]}" 2>/dev/null; done
}
