#!/usr/bin/env bash
# Builds a libFuzzer target (clang, -fsanitize=fuzzer,address,undefined) in
# build-fuzz/ and runs it on a copy of its seed corpus:
#   rx   tests/fuzz/fuzz_rx, the data receive path (corpus: tests/fuzz/corpus)
#   ctl  tests/fuzz/fuzz_ctl, the control packets and the handshake
#        (corpus: tests/fuzz/corpus_ctl)
#
#   scripts/fuzz.sh [SECONDS] [TARGET]   fuzz TARGET (default rx) for SECONDS
#                                        (default 600), one job
#
# Environment:
#   FUZZ_BUILD     build directory (default: build-fuzz)
#   FUZZ_MAX_LEN   -max_len (default: rx 9300, a jumbo frame and change;
#                  ctl 4096, a few control frames)
#   FUZZ_ARGS      more libFuzzer arguments
#   TAILMARK_EAL   EAL memory arguments (default: --no-huge -m 512)
#   FUZZ_NO_PACKAGES=1  install nothing (the meson test fuzz_libfuzzer runs this)
#
# Ends with one line, "fuzz: PASS ..." or "fuzz: FAIL ...", and exits with
# libFuzzer's status (non-zero: crash or invariant violation; the reproducer
# is in $FUZZ_BUILD/fuzz-run/TARGET/artifacts/).
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

secs=${1:-600}
target=${2:-rx}
if ! [[ $secs =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ] || [[ $target != rx && $target != ctl ]]; then
    echo "usage: $0 [SECONDS] [rx|ctl]" >&2
    exit 2
fi
dir=${FUZZ_BUILD:-$TM_ROOT/build-fuzz}
case $target in
rx) corpus=$TM_ROOT/tests/fuzz/corpus; max_len=${FUZZ_MAX_LEN:-9300} ;;
ctl) corpus=$TM_ROOT/tests/fuzz/corpus_ctl; max_len=${FUZZ_MAX_LEN:-4096} ;;
esac
dict=$TM_ROOT/tests/fuzz/fuzz_$target.dict

# Packages: the build's, then clang and its runtime (libFuzzer, sanitizers).
# FUZZ_NO_PACKAGES=1 (the test fuzz_libfuzzer): installs nothing.
[ "${FUZZ_NO_PACKAGES:-0}" = 1 ] || tm_ensure_packages || { echo "fuzz: FAIL (packages)"; exit 1; }
missing=()
[ "${FUZZ_NO_PACKAGES:-0}" = 1 ] || for p in clang libclang-rt-14-dev llvm-14; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        tm_say "not root: install them with: sudo apt-get install ${missing[*]}"
        echo "fuzz: FAIL (missing ${missing[*]})"
        exit 1
    fi
    tm_say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
        echo "fuzz: FAIL (apt-get install ${missing[*]})"
        exit 1
    fi
fi

# Configure once with clang; only the fuzz target is built, so the rest of the
# tree need not build under clang.
if [ ! -f "$dir/build.ninja" ]; then
    tm_say "configuring $dir (clang, -Dfuzzer=true)"
    CC=clang CXX=clang++ meson setup "$dir" "$TM_ROOT" -Dfuzzer=true -Dtests=true \
        -Dbuildtype=debugoptimized -Db_lundef=false >"$dir.setup.log" 2>&1 ||
        { cat "$dir.setup.log"; echo "fuzz: FAIL (meson setup)"; exit 1; }
fi
ninja -C "$dir" "tests/fuzz/fuzz_$target" >"$dir.ninja.log" 2>&1 ||
    { tail -50 "$dir.ninja.log"; echo "fuzz: FAIL (build)"; exit 1; }
bin=$dir/tests/fuzz/fuzz_$target

# A fresh copy of the seeds: what libFuzzer adds stays out of the source tree.
run=$dir/fuzz-run/$target
rm -rf "$run"
mkdir -p "$run/corpus" "$run/artifacts"
cp "$corpus"/* "$run/corpus/"
seeds=$(ls "$run/corpus" | wc -l)

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
log=$run/fuzz.log
dict_arg=()
[ -f "$dict" ] && dict_arg=(-dict="$dict")
tm_say "fuzzing fuzz_$target ${secs}s from $seeds seeds; log: $log"
# shellcheck disable=SC2086
"$bin" -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 "${dict_arg[@]}" \
    -artifact_prefix="$run/artifacts/" ${FUZZ_ARGS:-} "$run/corpus" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' INT TERM
# Progress every minute, not every NEW line.
while kill -0 $pid 2>/dev/null; do
    for _ in $(seq 60); do kill -0 $pid 2>/dev/null || break; sleep 1; done
    line=$(grep -E '^#[0-9]+' "$log" | tail -1)
    [ -n "$line" ] && tm_say "$line"
done
wait $pid
rc=$?

stat() { awk -v k="stat::$1:" '$1 == k { print $2 }' "$log" | tail -1; }
last=$(grep -E '^#[0-9]+' "$log" | tail -1)
cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9a-zA-Z]+).*/\1/p' <<<"$last")
summary="$(stat number_of_executed_units) execs, $(stat average_exec_per_sec)/s, cov ${cov:-n/a}, ft ${ft:-n/a}, corpus ${corp:-n/a}, peak rss $(stat peak_rss_mb) MB"
if [ $rc -eq 0 ]; then
    echo "fuzz: PASS: fuzz_$target ${secs}s, $summary, nothing found"
else
    grep -E 'INVARIANT VIOLATED|ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer|LeakSanitizer)|runtime error' "$log" | head -5
    arts=$(ls "$run"/artifacts/ 2>/dev/null | tr '\n' ' ')
    echo "fuzz: FAIL (exit $rc): fuzz_$target $summary; reproducer: ${arts:-none} in $run/artifacts/" \
         "(replay: $bin FILE; minimise: $bin -minimize_crash=1 -runs=20000 FILE)"
fi
exit $rc
