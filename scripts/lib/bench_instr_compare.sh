# scripts/bench.sh --compare REV --instructions: the --compare rows' cost in
# instructions per message under callgrind, this tree against REV. Noise-free
# where the timed --compare is not (this VM swings up to 2x): a change of 2%
# shows here and nowhere else. Sourced by bench.sh.
# shellcheck shell=bash
#
# Both trees built for x86-64-v3 (valgrind 3.19 runs no AVX-512) in
# build-cg/ and build-ab/cg/. Each row runs twice per tree, N and 2N
# messages, on one lcore (every role); (Ir(2N) - Ir(N)) / N is the cost of
# one message with start-up cancelled out. Writes $out/compare-instructions.md
# and .json; per function: callgrind_annotate the .cg files in $out/cg_raw.
bench_instr_compare() {
    local out=$1 rev=$2 raw=$1/cg_raw ab=$TM_ROOT/build-ab
    TM_PACKAGES+=(valgrind)
    tm_ensure_packages || return 1
    TM_BENCH_BUILD_ONLY=1 bash "$TM_ROOT/scripts/bench.sh" --compare "$rev" >/dev/null || return 1 # build-ab/src
    TM_TESTS=false TM_TARGETS=app/tailmarkd/tailmarkd tm_build "$TM_ROOT/build-cg" -Dmarch=x86-64-v3 -Dtests=false || return 1
    [ -f "$ab/cg/build.ninja" ] || meson setup "$ab/cg" "$ab/src" -Dmarch=x86-64-v3 -Dtests=false >"$ab/cg.setup.log" 2>&1 || return 1
    ninja -C "$ab/cg" app/tailmarkd/tailmarkd >"$ab/cg.ninja.log" 2>&1 || { tail -20 "$ab/cg.ninja.log"; return 1; }
    rm -rf "$raw"
    mkdir -p "$raw"
    local rows=(
        "loop64x1|50000|--flows 1 --msg-size 64 --ring-size 64"
        "loop4kx1|20000|--flows 1 --msg-size 4096 --ring-size 64"
        "loop64kx1|2000|--flows 1 --msg-size 65536 --ring-size 16"
        "loop4kx64|300|--flows 64 --msg-size 4096 --ring-size 64"
    )
    one() { # BIN TAG N ARGS..: the run's total instructions
        local bin=$1 tag=$2 n=$3
        shift 3
        # shellcheck disable=SC2086
        timeout -k 5 900 valgrind --tool=callgrind --callgrind-out-file="$raw/$tag.cg" "$bin" -l 0 --no-pci \
            --no-huge -m 1024 --file-prefix "tm_bench_cgc_$$" --log-level=lib.eal:warning \
            --log-level='tailmark.*:warning' --vdev=net_ring0 -- --udp-checksum off --stats-period 0 \
            --summary-json "$raw/$tag.json" --exit-when-done --messages "$n" "$@" >"$raw/$tag.out" 2>&1 || return 1
        callgrind_annotate "$raw/$tag.cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
    }
    local r name n args side bin i1 i2
    for r in "${rows[@]}"; do
        IFS='|' read -r name n args <<<"$r"
        for side in A B; do
            bin=$TM_ROOT/build-cg/app/tailmarkd/tailmarkd
            [ $side = B ] && bin=$ab/cg/app/tailmarkd/tailmarkd
            # shellcheck disable=SC2086
            i1=$(one "$bin" "${name}_${side}_1" "$n" $args) && i2=$(one "$bin" "${name}_${side}_2" $((2 * n)) $args) ||
                { tm_say "callgrind: $name ($side) failed ($raw)"; return 1; }
            # --messages counts per flow: per message is over N x flows.
            local flows
            flows=$(sed -E 's/.*--flows ([0-9]+).*/\1/' <<<"$args")
            echo "$name $side $((n * flows)) $i1 $i2" >>"$raw/totals"
            tm_say "  $name $side: $(((i2 - i1) / (n * flows))) instructions per message"
        done
    done
    "$PY" - "$raw/totals" "$out" "$(git -C "$TM_ROOT" rev-parse --short HEAD)$(git -C "$TM_ROOT" diff --quiet || echo +)" \
        "$(git -C "$TM_ROOT" rev-parse --short "$rev")" <<'PY'
import json, os, sys
totals, out, a_rev, b_rev = sys.argv[1:5]
per = {}
for line in open(totals):
    name, side, n, i1, i2 = line.split()
    per.setdefault(name, {})[side] = (int(i2) - int(i1)) / int(n)
md = [f"Instructions per message under callgrind, A = {a_rev} (this tree), B = {b_rev}: (Ir(2N) - Ir(N)) / N, "
      "one lcore holding every role, x86-64-v3 builds.", "",
      "| row | A | B | A/B |", "|---|---:|---:|---:|"]
for name, v in per.items():
    md.append(f"| {name} | {v['A']:.0f} | {v['B']:.0f} | {v['A'] / v['B']:.3f} |")
open(os.path.join(out, "compare-instructions.md"), "w").write("\n".join(md) + "\n")
json.dump({"A": a_rev, "B": b_rev, "per_message": per}, open(os.path.join(out, "compare-instructions.json"), "w"), indent=1)
print("\n".join(md))
PY
}
