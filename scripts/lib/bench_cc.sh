# scripts/bench.sh --cc: congestion control's figures, in one run. Sourced by
# bench.sh.
# shellcheck shell=bash
#
# tests/integration/congestion.sh twice, with congestion control (the
# default) and with --cc off, on the same machine back to back: a tbf
# bottleneck (64 KiB burst, 2 ms latency) in a middle namespace at 100 Mbit/s
# and 1 Gbit/s with 1 MiB and 64 KiB messages, two senders into one receiver
# at 200 Mbit/s, 64 B messages behind a bulk flow, and the lossy wire (the
# fault shim both ways). The --cc off run fails its test's bars: that is the
# point of the table. Writes $out/cc.md, cc.json and cc-goodput.png (the two
# senders' goodput over time, with congestion control).
bench_cc() {
    local out=$1 label rc
    for label in on off; do
        rm -rf "$out/cc_$label"
        tm_say "congestion: the test's cases with --cc $label"
        CG_RESULTS="$out/cc_$label" CG_EXTRA="--cc $label" TAILMARKD=$daemon \
            bash "$TM_ROOT/tests/integration/congestion.sh" >"$out/cc_$label.log" 2>&1
        rc=$?
        tm_say "  --cc $label: the test says $([ $rc -eq 0 ] && echo 'all bars met' || echo 'some bars missed') (log: $out/cc_$label.log)"
    done
    /usr/bin/python3 - "$out" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" <<'PY'
import csv, json, os, sys
out, cpu = sys.argv[1], sys.argv[2]
MTU_STRIDE = 1448  # MTU 1500 - IPv4 20 - UDP 8 - the version 2 header 24
def pkts(size):  # wire.h's plan_group at MTU 1500
    full, tail = divmod(size, MTU_STRIDE)
    if tail == 0 and full:
        full, tail = full - 1, MTU_STRIDE
    return full + (1 if tail + 32 <= MTU_STRIDE else 2)
def load(label, name):
    p = os.path.join(out, f"cc_{label}", name)
    return json.load(open(p)) if os.path.exists(p) else None
cases = [("1a_100m_1m", "100 Mbit/s", 1048576, 100e6), ("1b_100m_64k", "100 Mbit/s", 65536, 100e6),
         ("2a_1g_1m", "1 Gbit/s", 1048576, 1e9), ("2b_1g_64k", "1 Gbit/s", 65536, 1e9)]
res = {"cpu": cpu, "rows": []}
lines = ["| bottleneck | message | cc | packets sent / needed | retransmitted | dropped at the bottleneck | goodput |",
         "|---|---|---|---:|---:|---:|---:|"]
for tag, bn, size, rate in cases:
    for label in ("on", "off"):
        s, r = load(label, f"{tag}_send.json"), load(label, f"{tag}_recv.json")
        if s is None or r is None:
            continue
        need = s["messages_requested"] * pkts(size)
        data = s["packets_tx"] - s["control_tx"]
        gp = r["bytes_payload"] * 8 / r["elapsed_s"] if r["elapsed_s"] > 0 else 0
        tbf = open(os.path.join(out, f"cc_{label}", f"{tag}_tbf.txt")).read().split()
        dropped = int(tbf[-1]) if tbf else -1
        done = r["messages_completed"] == s["messages_requested"]
        row = {"case": tag, "cc": label, "ratio": data / need, "retx": s["reliability"]["retx_pkts"],
               "needed": need, "dropped": dropped, "goodput_mbps": gp / 1e6, "pct": 100 * gp / rate, "complete": done}
        res["rows"].append(row)
        lines.append(f"| {bn} | {size // 1024} KiB | {label} | {data / need:.2f}x | {row['retx']} for {need} needed | "
                     f"{dropped} | {gp / 1e6:.1f} Mbit/s ({row['pct']:.0f}%){'' if done else ', incomplete'} |")
for label in ("on", "off"):
    f = load(label, "3_fair.json")
    if f and f.get("ok"):
        res[f"fair_{label}"] = f
        lines.append(f"\nTwo senders, 200 Mbit/s, --cc {label}: goodput {f['goodput_mbps'][0]:.1f} and "
                     f"{f['goodput_mbps'][1]:.1f} Mbit/s over {f['interval']:.1f} s together (shares "
                     f"{f['share'][0]:.2f}/{f['share'][1]:.2f}, {f['total_pct']:.0f}% of the bottleneck), Jain {f['jain']:.3f}.")
    lat = load(label, "4_lat.json")
    if lat:
        res[f"lat_{label}"] = lat
        lines.append(f"\n64 B messages behind a bulk flow (100 Mbit/s), --cc {label}: submit-to-delivered p50 "
                     f"{lat['p50_ns'] / 1e3:.0f} us, p99 {lat['p99_ns'] / 1e3:.0f} us, max {lat['max_ns'] / 1e3:.0f} us "
                     f"({lat['samples']} messages; bulk {lat['bulk_mbps']:.1f} Mbit/s).")
    s = load(label, "5_send.json")
    if s:
        need = 40 * pkts(1048576)
        data = s["packets_tx"] - s["control_tx"]
        res[f"lossy_{label}"] = {"ratio": data / need, "retx": s["reliability"]["retx_pkts"]}
        lines.append(f"\nLossy wire both ways (2% loss, 1% dup, 10% reorder, 0.5% corrupt), 40 x 1 MiB, --cc {label}: "
                     f"{data / need:.3f}x the packets needed ({s['reliability']['retx_pkts']} retransmitted).")
md = [f"Congestion control, {cpu}: tests/integration/congestion.sh with --cc on and off, back to back.", ""] + lines
open(os.path.join(out, "cc.md"), "w").write("\n".join(md) + "\n")
json.dump(res, open(os.path.join(out, "cc.json"), "w"), indent=1)
print("\n".join(md))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, label in zip(axes, ("on", "off")):
    p = os.path.join(out, f"cc_{label}", "fair_goodput.csv")
    if not os.path.exists(p):
        continue
    series = {}
    for row in csv.DictReader(open(p)):
        series.setdefault(row["sender"], []).append((float(row["t_s"]), float(row["goodput_mbps"])))
    for name, pts in sorted(series.items()):
        ax.plot([t for t, _ in pts], [g for _, g in pts], marker=".", label=f"sender {name[-1]}")
    ax.axhline(100, color="grey", linestyle=":", label="fair share (100 Mbit/s)")
    ax.set_title(f"two senders, one 200 Mbit/s tbf bottleneck, --cc {label}")
    ax.set_xlabel("time since the first launch (s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
axes[0].set_ylabel("acknowledged goodput per 0.25 s (Mbit/s)")
fig.tight_layout()
fig.savefig(os.path.join(out, "cc-goodput.png"), dpi=110)
PY
}
