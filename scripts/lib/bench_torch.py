"""scripts/bench.sh --torch's summary (scripts/lib/bench_torch.sh runs it):
torch.raw (one JSON line per backend, layout, MTU, round, op and size,
from tests/torch/coll_bw.py) into torch.json, torch.md and torch.png.
argv: out dir, CPU model, vCPUs, commit, elapsed seconds, the command."""
import datetime
import json
import statistics
import sys

out, cpu, ncpu, rev, elapsed, cmd, load = sys.argv[1:8]
raw = [json.loads(line) for line in open(f"{out}/torch.raw") if line.startswith("{")]
skipped = {r["layout"]: r for r in raw if "skipped" in r}
peaks = [r for r in raw if "maxrss_mib" in r]
rows = [r for r in raw if "op" in r]
failed = [r for r in raw if "failed" in r]


def human(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} B"


def dur(s):
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def where(layout, mtu):
    n, p = layout.split("x")
    hosts = f"{n} hosts x {p} ranks" if int(n) > 1 else f"1 host x {p} ranks (memory)"
    return hosts + (f", MTU {mtu}" if mtu else "")


def layout_key(r):
    n, p = map(int, r["layout"].split("x"))
    return (n * p, -n, -r["mtu"])


res = {"date": datetime.date.today().isoformat(), "commit": rev, "cpu": cpu, "cpus": int(ncpu),
       "elapsed_s": int(elapsed), "command": cmd, "loadavg": load, "failed": failed, "skipped": list(skipped.values()), "rows": []}
combos = sorted({(r["layout"], r["mtu"], r["world"], r["op"]) for r in rows},
                key=lambda c: (layout_key({"layout": c[0], "mtu": c[1]}), c[3]))
for layout, mtu, world, op in combos:
    for size in sorted({r["bytes"] for r in rows if (r["layout"], r["mtu"], r["op"]) == (layout, mtu, op)}):
        def by_round(b, key):
            return {r["round"]: r[key] for r in rows if (r["layout"], r["mtu"], r["op"], r["bytes"], r["backend"])
                    == (layout, mtu, op, size, b)}

        def pick(b, key):
            return list(by_round(b, key).values())
        e = {"layout": layout, "mtu": mtu, "world": world, "op": op, "bytes": size,
             "rounds": len(pick("tailmark", "seconds"))}
        for b in ("tailmark", "gloo"):
            bw, sec = pick(b, "busbw_gbps"), pick(b, "seconds")
            if not bw:
                continue
            e[b] = {"busbw_gbps": statistics.median(bw), "busbw_min": min(bw), "busbw_max": max(bw),
                    "seconds": statistics.median(sec), "runs": pick(b, "runs")}
        if "tailmark" in e and "gloo" in e:
            e["ratio"] = e["gloo"]["seconds"] / e["tailmark"]["seconds"]
            t, g = by_round("tailmark", "seconds"), by_round("gloo", "seconds")
            e["tailmark_faster_rounds"] = sum(t[k] < g[k] for k in t if k in g)
            e["paired_rounds"] = sum(k in g for k in t)
        res["rows"].append(e)
res["maxrss_mib"] = {f"{b} world {w}": max(r["maxrss_mib"] for r in peaks if r["backend"] == b and r["world"] == w)
                     for b, w in sorted({(r["backend"], r["world"]) for r in peaks})}

# The goals of issue 39 item 5, on the medians.
goals = []
full = [e for e in res["rows"] if "ratio" in e]
net = [e for e in full if not e["layout"].startswith("1x")]
for world in sorted({e["world"] for e in net}):
    sel = [e for e in net if e["world"] == world and e["bytes"] >= 1 << 20]
    bad = sum(1 for e in res["rows"] if e["world"] == world and not e["layout"].startswith("1x")
              and e["bytes"] >= 1 << 20 and "ratio" not in e)
    if sel:
        worst = min(sel, key=lambda e: e["ratio"])
        ok = sum(e["ratio"] >= 1.2 for e in sel)
        goals.append(f"- >= 1.2x gloo from 1 MiB up, world {world} over the wire: "
                     f"**{'met' if ok == len(sel) and not bad else 'not met'}**: {ok} of {len(sel) + bad} cells "
                     f"at 1.2x or more{f', {bad} failed' if bad else ''} (the lowest {worst['ratio']:.2f}x: {worst['op']} {human(worst['bytes'])}, "
                     f"{where(worst['layout'], worst['mtu'])})")
small = [e for e in full if e["op"] == "all_reduce" and e["bytes"] == 8192]
for e in small:
    goals.append(f"- 8 KiB all_reduce no slower than gloo, {where(e['layout'], e['mtu'])}: "
                 f"**{'met' if e['ratio'] >= 1 else 'not met'}** ({dur(e['tailmark']['seconds'])} against "
                 f"{dur(e['gloo']['seconds'])}, {e['ratio']:.2f}x)")
host = [e for e in full if e["layout"].startswith("1x") and e["world"] == 8]
for op in sorted({e["op"] for e in host}):
    sel = [e for e in host if e["op"] == op]
    ok = sum(e["ratio"] >= 2 for e in sel)
    big = [e for e in sel if e["bytes"] >= 1 << 20]
    lo, hi = min(e["ratio"] for e in sel), max(e["ratio"] for e in sel)
    goals.append(f"- >= 2x gloo at 8 ranks on one host, {op}: **{'met' if ok == len(sel) else 'not met'}**: "
                 f"{ok} of {len(sel)} sizes at 2x or more, {sum(e['ratio'] >= 2 for e in big)} of {len(big)} "
                 f"from 1 MiB up ({lo:.2f}x .. {hi:.2f}x)")
res["goals"] = goals
json.dump(res, open(f"{out}/torch.json", "w"), indent=1)

lines = [f"tailmark.torch against gloo: {res['date']}, commit {rev}, {cpu}, {ncpu} vCPUs; "
         f"`{cmd}` ({int(elapsed) // 60} min {int(elapsed) % 60} s; load average {load}).", "",
         "Bus bandwidth (nccl-tests: all_reduce bytes x 2(n-1)/n, all_to_all bytes x (n-1)/n, over the "
         "slowest rank's median time) and that time; the median over rounds (the backends interleaved, "
         "their order swapped each round) and the min..max of the rounds' figures; tailmark / gloo is the "
         "ratio of the median times, (k/R) the rounds of R in which tailmark was faster.", ""]
for layout, mtu, world, op in combos:
    lines += [f"### {op}, world {world}: {where(layout, mtu)}", "",
              "| size | tailmark Gbit/s | gloo Gbit/s | tailmark time | gloo time | tailmark / gloo |",
              "|---:|---:|---:|---:|---:|---:|"]
    for e in res["rows"]:
        if (e["layout"], e["mtu"], e["op"]) != (layout, mtu, op):
            continue
        if "ratio" not in e:
            have = [b for b in ("tailmark", "gloo") if b in e]
            lines.append(f"| {human(e['bytes'])} | " + " | ".join(
                f"{e[b]['busbw_gbps']:.2f}" if b in e else "failed" for b in ("tailmark", "gloo")) + " | " +
                " | ".join(dur(e[b]["seconds"]) if b in e else "-" for b in ("tailmark", "gloo")) +
                f" | only {', '.join(have)} |")
            continue
        t, g = e["tailmark"], e["gloo"]
        lines.append(f"| {human(e['bytes'])} | {t['busbw_gbps']:.2f} ({t['busbw_min']:.2f}..{t['busbw_max']:.2f}) | "
                     f"{g['busbw_gbps']:.2f} ({g['busbw_min']:.2f}..{g['busbw_max']:.2f}) | {dur(t['seconds'])} | "
                     f"{dur(g['seconds'])} | {e['ratio']:.2f}x ({e['tailmark_faster_rounds']}/{e['paired_rounds']}) |")
    lines.append("")
for s in skipped.values():
    lines.append(f"Left out at {s['layout']}: {', '.join(human(b) for b in s['skipped'])} (each rank's buffers "
                 f"and arena would pass 70% of the {s['mem_available_mib']} MiB available).")
for f in failed:
    lines.append(f"Failed: {f['backend']} at {where(f['layout'], f['mtu'])}, round {f['round']}: {f['failed']}")
if failed:
    lines.append("")
if res["maxrss_mib"]:
    lines += ["Peak RSS of the largest rank: " + ", ".join(f"{k} {v} MiB" for k, v in res["maxrss_mib"].items())
              + ".", ""]
lines += ["Goals (issue 39, item 5), on the medians:", ""] + goals + [""]
open(f"{out}/torch.md", "w").write("\n".join(lines))
print("\n".join(lines))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print(f"no matplotlib for {sys.executable}: no plot")
    sys.exit(0)
layouts = sorted({(e["layout"], e["world"]) for e in res["rows"]}, key=lambda c: layout_key({"layout": c[0], "mtu": 0}))
ops = sorted({e["op"] for e in res["rows"]})
fig, axes = plt.subplots(len(ops), len(layouts), figsize=(4.2 * len(layouts), 3.4 * len(ops)), squeeze=False)
styles = {9000: "-", 1500: ":", 0: "-"}
for i, op in enumerate(ops):
    for j, (layout, world) in enumerate(layouts):
        ax = axes[i][j]
        for mtu in sorted({e["mtu"] for e in res["rows"] if e["layout"] == layout}, reverse=True):
            sel = [e for e in res["rows"] if (e["layout"], e["mtu"], e["op"]) == (layout, mtu, op)]
            for b, color, mark, what in (("tailmark", "C0", "o", "tailmark"), ("gloo", "C1", "s", "gloo")):
                pts = [e for e in sel if b in e]
                if not pts:
                    continue
                xs = [e["bytes"] for e in pts]
                ys = [e[b]["busbw_gbps"] for e in pts]
                err = [[y - e[b]["busbw_min"] for y, e in zip(ys, pts)], [e[b]["busbw_max"] - y for y, e in zip(ys, pts)]]
                ax.errorbar(xs, ys, yerr=err, fmt=mark + styles.get(mtu, "--"), color=color, ms=3, capsize=2,
                            label=f"{what}" + (f", MTU {mtu}" if mtu else ""))
        ax.set_xscale("log", base=2)
        xs = sorted({e["bytes"] for e in res["rows"] if e["layout"] == layout})
        ax.set_xticks(xs[::2], [human(x) for x in xs[::2]], fontsize=7)
        ax.set_title(f"{op}, world {world}: {where(layout, 0)}", fontsize=9)
        ax.grid(True, alpha=0.3)
        if j == 0:
            ax.set_ylabel("bus bandwidth, Gbit/s")
        ax.legend(fontsize=7)
fig.suptitle(f"tailmark.torch against gloo, {res['date']}, {rev}, {ncpu} vCPUs (medians, bars: min..max of rounds)",
             fontsize=10)
fig.tight_layout()
fig.savefig(f"{out}/torch.png", dpi=100)
print(f"plot: {out}/torch.png")
