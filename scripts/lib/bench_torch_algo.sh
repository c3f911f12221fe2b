# scripts/bench.sh --torch-algo: all_reduce latency of tailmark.torch's two
# algorithms, the ring and recursive doubling, at 2, 3 and 4 ranks: the
# measurement behind auto's threshold (rd_max_bytes in
# lib/tailmark-torch/process_group_collectives.cc). Sourced by bench.sh.
# shellcheck shell=bash
#
# Each world size is one tt_mesh (ranks in their own namespaces, each with
# its own tailmarkd --mode service, veths and a bridge, MTU TT_MTU, 1500)
# and one job (tests/torch/allreduce_algo.py): for each round, each size,
# both algorithms (tailmark.torch.set_allreduce), their order alternating
# by round, each a batch of back-to-back all_reduces of float32. The table
# holds each (size, algorithm)'s median over rounds of the time per
# all_reduce, and rd / ring. TT_ALGO_SIZES (bytes), TT_ALGO_WORLDS ("2 3 4"),
# TT_ALGO_ROUNDS (5). Writes $out/torch-algo.json and torch-algo.md.
bench_torch_algo() {
    local out=$1
    TM_TEST=bench_torch_algo
    # shellcheck source=../../tests/integration/lib.sh
    source "$TM_ROOT/tests/integration/lib.sh"
    # shellcheck source=../../tests/torch/lib.sh
    source "$TM_ROOT/tests/torch/lib.sh"
    tm_require_daemon
    tm_require_root
    tt_require
    local sizes=${TT_ALGO_SIZES:-4,64,1024,4096,16384,65536,262144,1048576,4194304}
    local world r
    : >"$out/torch-algo.raw"
    for world in ${TT_ALGO_WORLDS:-2 3 4}; do
        tt_mesh "$world"
        tt_run algo$world 900 "$TT_DIR/allreduce_algo.py" "$sizes" "${TT_ALGO_ROUNDS:-5}"
        if ! tt_all_ok; then
            tt_show algo$world
            tm_fail "torch algo bench: world $world failed"
            return 1
        fi
        grep '^{' "$TM_WORK/algo$world.0.out" >>"$out/torch-algo.raw"
        for ((r = 0; r < TT_N; r++)); do kill -INT "${TT_PID[r]}" 2>/dev/null; done
        for ((r = 0; r < TT_N; r++)); do wait "${TT_PID[r]}" 2>/dev/null; done
        for ns in "${TT_NS[@]}" "$TT_BR"; do ip netns del "$ns" 2>/dev/null; done
    done
    local cpu rev
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
    rev="$(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet HEAD -- lib || echo +)"
    "$TT_PY" - "$out" "$cpu" "$(nproc)" "$rev" "${TT_MTU:-1500}" <<'PY'
import datetime, json, statistics, sys
out, cpu, ncpu, rev, mtu = sys.argv[1:6]
rows = [json.loads(l) for l in open(f"{out}/torch-algo.raw")]
res = {"cpu": cpu, "cpus": int(ncpu), "commit": rev, "mtu": int(mtu),
       "date": datetime.date.today().isoformat(), "rows": []}
def human(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} B"
worlds = sorted({r["world"] for r in rows})
sizes = sorted({r["bytes"] for r in rows})
for w in worlds:
    for s in sizes:
        pick = lambda a: [r["us"] for r in rows if r["world"] == w and r["bytes"] == s and r["algo"] == a]
        ring, rd = statistics.median(pick("ring")), statistics.median(pick("rd"))
        # rounds where rd was faster: the ratio's sign is the claim
        wins = sum(1 for a, b in zip(pick("rd"), pick("ring")) if a < b)
        res["rows"].append({"world": w, "bytes": s, "ring_us": ring, "rd_us": rd, "rd_over_ring": rd / ring,
                            "rd_faster_rounds": wins, "rounds": len(pick("rd"))})
json.dump(res, open(f"{out}/torch-algo.json", "w"), indent=1)
lines = [f"all_reduce latency (float32), the ring against recursive doubling (rd): {res['date']}, commit {rev}, "
         f"{cpu}, {ncpu} vCPUs, ranks in namespaces (one daemon each), MTU {mtu}; medians over "
         f"{res['rows'][0]['rounds']} interleaved rounds, microseconds per all_reduce", "",
         "| size | " + " | ".join(f"{w} ranks: ring | rd | rd/ring" for w in worlds) + " |",
         "|---|" + "---|---|---|" * len(worlds)]
for s in sizes:
    cells = []
    for w in worlds:
        r = next(x for x in res["rows"] if x["world"] == w and x["bytes"] == s)
        cells.append(f"{r['ring_us']:.0f} | {r['rd_us']:.0f} | {r['rd_over_ring']:.2f} ({r['rd_faster_rounds']}/{r['rounds']})")
    lines.append(f"| {human(s)} | " + " | ".join(cells) + " |")
lines += ["", "rd/ring below 1: recursive doubling faster; (k/R): rounds of R in which it was."]
open(f"{out}/torch-algo.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}
