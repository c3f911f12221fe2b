# scripts/bench.sh --paths: spraying's figures (issue 38, item 5). Sourced by
# bench.sh.
# shellcheck shell=bash
#
# tests/integration/multipath.sh (sender -> router -> 4 parallel links with
# a 200 Mbit/s tbf each -> router -> receiver, L4-hashed multipath routes)
# twice: its cases a, b and c at --paths 16, then b and c at --paths 1
# (case a runs --paths 1 itself). With MP_TRACE the test samples the first
# router's link counters every ~50 ms and marks the cut of case b (case b
# only, MP_TRACE_ONLY: the sampler costs the others' goodput). Writes
# $out/paths.md (the cases, --paths 1 beside --paths 16, against the issue's
# bounds), paths.json, and paths-blackhole.png: each link's Mbit/s over
# time in the black-hole case, the cut marked (a line per link: the 16 UDP
# ports of a session fall 3/3/4/6 on the 4 links, and the router counts
# links, not ports).
bench_paths() {
    local out=$1 rc
    [ "$(id -u)" -eq 0 ] || { tm_say "--paths needs root (network namespaces)"; return 1; }
    rm -rf "$out/paths_raw"
    mkdir -p "$out/paths_raw"
    tm_say "paths: multipath cases a, b, c at --paths 16 (about 45 s)"
    MP_TRACE="$out/paths_raw/p16" MP_TRACE_ONLY=b TAILMARKD=$daemon bash "$TM_ROOT/tests/integration/multipath.sh" \
        >"$out/paths_raw/p16.log" 2>&1
    rc=$?
    tm_say "  the test says $([ $rc -eq 0 ] && echo 'all checks passed' || echo 'a check failed') (log: $out/paths_raw/p16.log)"
    tm_say "paths: cases b and c at --paths 1"
    MP_PATHS=1 TM_ONLY="b c" MP_TRACE="$out/paths_raw/p1" MP_TRACE_ONLY=b TAILMARKD=$daemon \
        bash "$TM_ROOT/tests/integration/multipath.sh" >"$out/paths_raw/p1.log" 2>&1
    "$PY" - "$out" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs" \
        "${TM_BENCH_A_REV:-$(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet || echo +)}" <<'PY'
import datetime, json, os, re, sys
out, cpu, rev = sys.argv[1:4]
raw = os.path.join(out, "paths_raw")
def goodputs(log):
    g = {}
    for line in open(os.path.join(raw, log), errors="replace"):
        if m := re.search(r"\] a: --paths (\d+): .*goodput ([\d.]+)", line):
            g["a1" if m.group(1) == "1" else "a"] = float(m.group(2))
        elif m := re.search(r"\] ([bc]): .*goodput ([\d.]+)", line):
            g[m.group(1)] = float(m.group(2))
    return g
p16, p1 = goodputs("p16.log"), goodputs("p1.log")
p1["a"] = p16.get("a1")
cases = [("a", "4 clean links", 800, 0.85), ("b", "link 0 black-holed mid-transfer", 600, 0.70),
         ("c", "link 0 losing 2%", 800, 0.80)]
rows, md = [], [f"Spraying through 4 links of 200 Mbit/s (tests/integration/multipath.sh); {cpu}; "
                f"{datetime.date.today().isoformat()}, {rev}. Goodput at the receiver, Mbit/s.", "",
                "| case | capacity | `--paths 1` | `--paths 16` | 16 / 1 | the issue's bound | met |",
                "|---|---:|---:|---:|---:|---:|---|"]
for c, what, cap, bound in cases:
    a, b = p1.get(c), p16.get(c)
    ok = b is not None and b >= bound * cap
    rows.append({"case": c, "what": what, "capacity_mbps": cap, "paths1_mbps": a, "paths16_mbps": b,
                 "bound_mbps": bound * cap, "met": ok})
    f = lambda x: f"{x:.1f}" if x is not None else "-"
    md.append(f"| {c}: {what} | {cap} | {f(a)} | {f(b)} | {f(b / a) if a and b else '-'} | "
              f"{bound * cap:.0f} ({bound:.0%}) | {'yes' if ok else 'no'} |")

def trace(name):  # [(t_s, {link: tx bytes})], marks [(t_s, what)]
    p = os.path.join(raw, name + ".trace")
    if not os.path.exists(p):
        return [], []
    samples, t = [], None
    for line in open(p):
        if line.startswith("T "):
            t = int(line.split()[1])
        elif line.startswith("[") and t is not None:
            try:
                links = {l["ifname"]: l["stats64"]["tx"]["bytes"] for l in json.loads(line)
                         if re.fullmatch(r"l\d+a", l["ifname"])}
            except ValueError:
                continue
            samples.append((t, links))
    marks = []
    if os.path.exists(p + ".marks"):
        for line in open(p + ".marks"):
            _, ns, what = line.split(" ", 2)
            marks.append((int(ns), what.strip()))
    t0 = samples[0][0] if samples else 0
    return [((t - t0) / 1e9, l) for t, l in samples], [((ns - t0) / 1e9, w) for ns, w in marks]
def rates(samples):  # per link: [(t_mid, Mbit/s)]
    r = {}
    for (t1, a), (t2, b) in zip(samples, samples[1:]):
        if t2 <= t1:
            continue
        for k in b:
            r.setdefault(k, []).append(((t1 + t2) / 2, (b[k] - a.get(k, 0)) * 8 / (t2 - t1) / 1e6))
    return r
series = {}
for name in ("b", "a16", "c"):
    s, m = trace(os.path.join("p16", name))
    series[name] = {"rates": rates(s), "marks": m}
json.dump({"cpu": cpu, "rev": rev, "rows": rows, "series": series},
          open(os.path.join(out, "paths.json"), "w"), indent=1)
b = series["b"]
if b["rates"]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4))
        for link in sorted(b["rates"]):
            pts = b["rates"][link]
            k = 5  # samples in the moving mean (~0.25 s): one sample's Mbit/s swings with the pacer's bursts
            ys = [sum(p[1] for p in pts[max(0, i - k + 1):i + 1]) / len(pts[max(0, i - k + 1):i + 1])
                  for i in range(len(pts))]
            ax.plot([p[0] for p in pts], ys, label=f"link {link[1:-1]}")
        for t, what in b["marks"]:
            ax.axvline(t, color="k", linestyle="--")
            ax.text(t, ax.get_ylim()[1] * 0.95, " " + what, va="top")
        ax.axhline(200, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("s since the transfer started")
        ax.set_ylabel("Mbit/s the router sent by the link\n(mean of 5 samples, ~0.25 s)")
        ax.set_title(f"--paths 16, one link black-holed mid-transfer ({rev})")
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "paths-blackhole.png"), dpi=100)
        md += ["", "![each link's rate over time, link 0 cut](paths-blackhole.png)"]
    except ImportError:
        md += ["", "(no plot: Debian's python3-matplotlib is not installed)"]
open(os.path.join(out, "paths.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
}
