#!/usr/bin/env bash
# The libFuzzer targets, in the suite (test 'fuzz_libfuzzer'): scripts/fuzz.sh
# configures SRC_ROOT/build-fuzz (its default, shared by the build/ and
# build-asan/ runs and by scripts/fuzz.sh) with clang (-Dfuzzer=true), builds
# each of FUZZ_TARGETS (default: rx ctl; tests/fuzz/fuzz_rx and fuzz_ctl,
# -fsanitize=fuzzer,address,undefined) and fuzzes it for FUZZ_SECONDS
# (default 15; the two together 30 s) from a copy of its seed corpus. Asserts, for each: it builds,
# libFuzzer read every file of the corpus, ran for the whole time and found
# nothing (exit 0, "fuzz: PASS").
#   libfuzzer_test.sh SRC_ROOT
# Exits 77 (skip) with the reason when clang or its libFuzzer runtime is not
# installed (scripts/test.sh installs both: clang, libclang-rt-14-dev).
set -uo pipefail
src=$1
secs=${FUZZ_SECONDS:-15}
targets=${FUZZ_TARGETS:-rx ctl}
say() { printf '[fuzz_libfuzzer] %s\n' "$*"; }

if ! command -v clang++ >/dev/null; then
    say "SKIP: clang++ not installed (Debian: clang libclang-rt-14-dev llvm-14; scripts/test.sh installs them)"
    exit 77
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
    say "SKIP: clang++ cannot link -fsanitize=fuzzer (Debian: libclang-rt-14-dev; scripts/test.sh installs it)"
    exit 77
fi

export FUZZ_BUILD=${FUZZ_BUILD:-$src/build-fuzz} FUZZ_NO_PACKAGES=1
fail=0
for t in $targets; do
    case $t in
    rx) corpus=$src/tests/fuzz/corpus ;;
    ctl) corpus=$src/tests/fuzz/corpus_ctl ;;
    *) say "FAIL: no fuzz target '$t' (rx, ctl)"; fail=1; continue ;;
    esac
    seeds=$(find "$corpus" -maxdepth 1 -type f | wc -l)
    start=$SECONDS
    out=$(bash "$src/scripts/fuzz.sh" "$secs" "$t" 2>&1)
    rc=$?
    printf '%s\n' "$out" | tail -n 30
    log=$FUZZ_BUILD/fuzz-run/$t/fuzz.log
    bad=0
    # (libFuzzer exits 77 on a find, its -error_exitcode: this script's own
    # status is 0 or 1, never meson's 77 = skip.)
    [ $rc -eq 0 ] || { say "FAIL: fuzz_$t: scripts/fuzz.sh exited $rc"; bad=1; }
    grep -q '^fuzz: PASS' <<<"$out" || { say "FAIL: fuzz_$t: no 'fuzz: PASS' line"; bad=1; }
    # libFuzzer says how many files it read: every seed, none unreadable.
    read_n=$(sed -nE 's/^INFO: +seed corpus: files: ([0-9]+).*/\1/p' "$log" 2>/dev/null | head -n 1)
    if [ "${read_n:-}" != "$seeds" ]; then
        say "FAIL: fuzz_$t: libFuzzer read ${read_n:-no} seed files, the corpus has $seeds"
        bad=1
    fi
    # It ran for the time asked (max_total_time), not one pass and out.
    done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" 2>/dev/null | tail -n 1)
    took=$(sed -nE 's/^Done [0-9]+ runs in ([0-9]+) second.*/\1/p' <<<"$done_line")
    if [ -z "$took" ] || [ "$took" -lt "$secs" ]; then
        say "FAIL: fuzz_$t: libFuzzer ran ${took:-no} seconds, want $secs (${done_line:-no 'Done' line})"
        bad=1
    fi
    [ $bad -eq 0 ] &&
        say "ok: fuzz_$t built with clang, ${took}s from $seeds seeds, nothing found ($((SECONDS - start)) s with the build)"
    fail=$((fail | bad))
done
exit $fail
