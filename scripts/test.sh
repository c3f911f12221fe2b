#!/usr/bin/env bash
# Installs what is missing, reserves hugepages (or falls back to --no-huge),
# builds, and runs every test suite. Ends with one line: "N passed, N failed".
#   scripts/test.sh                 all suites
#   scripts/test.sh --suite unit    one suite (meson test --suite)
#   scripts/test.sh --sanitize      debug build with ASan/UBSan (build-asan/), every suite
#   scripts/test.sh --valgrind      the unit suite under valgrind (slow: ~12 min here)
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

args=()
sanitize=0
while [ $# -gt 0 ]; do
    case "$1" in
        --sanitize) sanitize=1 ;;
        --valgrind) args+=(--setup valgrind --suite unit) ;;
        *) args+=("$1") ;;
    esac
    shift
done

tm_ensure_packages || { tm_say "package installation failed"; echo "0 passed, 1 failed"; exit 1; }
tm_setup_hugepages

dir=$TM_BUILD
if [ $sanitize -eq 1 ]; then
    dir=$TM_ROOT/build-asan
    tm_build "$dir" -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false || { echo "0 passed, 1 failed"; exit 1; }
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$TM_ROOT/tests/lsan.supp:print_suppressions=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
    tm_build "$dir" || { echo "0 passed, 1 failed"; exit 1; }
fi

log=$dir/meson-test.out
meson test -C "$dir" --print-errorlogs --num-processes 1 "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

count() { awk -v k="$1" -F: '$1 == k { gsub(/ /, "", $2); print $2 }' "$log" | tail -1; }
ok=$(count "Ok"); xfail=$(count "Expected Fail"); fail=$(count "Fail")
upass=$(count "Unexpected Pass"); tout=$(count "Timeout")
passed=$(( ${ok:-0} + ${xfail:-0} ))
failed=$(( ${fail:-0} + ${upass:-0} + ${tout:-0} ))
if [ $rc -ne 0 ] && [ $failed -eq 0 ]; then failed=1; fi
if [ $passed -eq 0 ] && [ $failed -eq 0 ]; then
    tm_say "no test ran"; failed=1
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
