# scripts/bench.sh --rails: the rails' figures (issue 38, items 3 and 4).
# Sourced by bench.sh.
# shellcheck shell=bash
#
# tests/integration/rails.sh (two namespaces joined by two veth pairs, each
# a rail with a 500 Mbit/s tbf) RAILS_ROUNDS times (3): case a, one rail
# against two of the same run, then cases b and d, rail 1 and rail 0 cut
# mid-transfer. Writes $out/rails.md (per round: one rail, two rails, the
# ratio against the issue's 1.8x, and each cut's goodput over its run) and
# rails.json.
bench_rails() {
    local out=$1 r rounds=${RAILS_ROUNDS:-3}
    [ "$(id -u)" -eq 0 ] || { tm_say "--rails needs root (network namespaces)"; return 1; }
    rm -rf "$out/rails_raw"
    mkdir -p "$out/rails_raw"
    for ((r = 1; r <= rounds; r++)); do
        tm_say "rails: round $r of $rounds: cases a, b, d (about 30 s)"
        TM_ONLY="a b d" TAILMARKD=$daemon bash "$TM_ROOT/tests/integration/rails.sh" >"$out/rails_raw/r$r.log" 2>&1 ||
            tm_say "  a check failed (log: $out/rails_raw/r$r.log)"
    done
    "$PY" - "$out" "$rounds" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs" \
        "${TM_BENCH_A_REV:-$(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet || echo +)}" <<'PY'
import datetime, json, os, re, sys
out, rounds, cpu, rev = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = []
for r in range(1, rounds + 1):
    text = open(os.path.join(out, "rails_raw", f"r{r}.log"), errors="replace").read()
    def num(pattern):
        m = re.search(pattern, text)
        return float(m.group(1)) if m else None
    rows.append({"round": r,
                 "one_rail_mbps": num(r"a: one rail: .*goodput ([\d.]+)"),
                 "two_rails_mbps": num(r"a: two rails: .*goodput ([\d.]+)"),
                 "rail1_cut_mbps": num(r"b: rail 1 cut .*goodput ([\d.]+)"),
                 "rail0_cut_mbps": num(r"d: rail 0 cut .*goodput ([\d.]+)"),
                 "checks_passed": "all checks passed" in text})
f = lambda x: f"{x:.1f}" if x is not None else "-"
md = [f"Rails: two veth pairs of 500 Mbit/s (tbf) between two tailmarkd (tests/integration/rails.sh); {cpu}; "
      f"{datetime.date.today().isoformat()}, {rev}. Goodput, Mbit/s, over the whole run (b and d: a quarter on "
      "two rails, the rest on the one left); a and b at the receiver, d at the sender.", "",
      "| round | one rail | two rails | two / one | >= 1.8x | rail 1 cut (b) | rail 0 cut (d) | checks |",
      "|---:|---:|---:|---:|---|---:|---:|---|"]
for x in rows:
    a, b = x["one_rail_mbps"], x["two_rails_mbps"]
    ratio = b / a if a and b else None
    x["ratio"] = ratio
    md.append(f"| {x['round']} | {f(a)} | {f(b)} | {f'{ratio:.2f}' if ratio else '-'} | "
              f"{'yes' if ratio and ratio >= 1.8 else 'no'} | {f(x['rail1_cut_mbps'])} | {f(x['rail0_cut_mbps'])} | "
              f"{'passed' if x['checks_passed'] else 'FAILED'} |")
open(os.path.join(out, "rails.md"), "w").write("\n".join(md) + "\n")
json.dump({"cpu": cpu, "rev": rev, "rounds": rows}, open(os.path.join(out, "rails.json"), "w"), indent=1)
print("\n".join(md))
PY
}
