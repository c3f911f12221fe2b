#!/usr/bin/env bash
# Installs what is missing, reserves hugepages (or falls back to --no-huge),
# builds, and runs every test suite. Lists each skipped suite with its reason
# (the suite's own "SKIP: ..." line; meson counts exit code 77 as a skip), then
# ends with one line: "N passed, N failed, N skipped".
# Under CI=true a skip is a failure, unless tests/allowed-skips.txt names the
# suite with its reason.
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

tm_ensure_packages || { tm_say "package installation failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
tm_setup_hugepages

dir=$TM_BUILD
if [ $sanitize -eq 1 ]; then
    dir=$TM_ROOT/build-asan
    tm_build "$dir" -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$TM_ROOT/tests/lsan.supp:print_suppressions=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
    tm_build "$dir" || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
fi

log=$dir/meson-test.out
# The JSON log of this run only: each result with the suite's own output.
rm -f "$dir"/meson-logs/tm-test*.json
meson test -C "$dir" --print-errorlogs --num-processes 1 --logbase tm-test "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
json=$(ls "$dir"/meson-logs/tm-test*.json 2>/dev/null | head -1)
if [ -z "$json" ]; then
    tm_say "meson test wrote no JSON log (exit $rc)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
ci=()
[ "${CI:-}" = true ] && ci=(--ci)
# Passed: OK, EXPECTEDFAIL. Skipped: SKIP (exit 77), with the suite's last
# line that says "SKIP" or "skipped" as the reason, else its last line.
# Failed: the rest (FAIL, UNEXPECTEDPASS, TIMEOUT, INTERRUPT, ERROR), and
# under CI=true a skip that tests/allowed-skips.txt does not name.
python3 - "$json" "$TM_ROOT/tests/allowed-skips.txt" "${ci[@]}" <<'PY'
import json
import re
import sys


def suite_name(pretty):
    # meson prints "project:suite / name" when several suites ran, else "name".
    return pretty.rsplit(" / ", 1)[-1].strip()


def skip_reason(out):
    lines = [l.strip() for l in (out or "").splitlines() if l.strip()]
    said = [l for l in lines if re.search(r"\bSKIP\b|\bskipped\b", l, re.IGNORECASE)]
    if said:
        return said[-1]
    return lines[-1] if lines else "(no reason given: the suite printed nothing)"


def allowed(path):
    out = {}
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                sys.exit(f"{path}:{n}: '{parts[0]}' has no reason; write 'NAME  REASON'")
            out[parts[0]] = parts[1]
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: - TESTLOG.json ALLOWED_SKIPS [--ci]")
    log, allow_path = sys.argv[1], sys.argv[2]
    ci = "--ci" in sys.argv[3:]
    allow = allowed(allow_path)
    passed = failed = skipped = 0
    skips, bad_skips = [], []
    with open(log) as f:
        for raw in f:
            if not raw.strip():
                continue
            t = json.loads(raw)
            res = t["result"]
            name = suite_name(t["name"])
            if res in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif res == "SKIP":
                why = skip_reason(t.get("stdout", "") + "\n" + t.get("stderr", ""))
                if ci and name not in allow:
                    failed += 1
                    bad_skips.append((name, why))
                else:
                    skipped += 1
                    skips.append((name, why, allow.get(name)))
            else:
                failed += 1
    for name, why, listed in skips:
        print(f"skipped: {name}: {why}" + (f" (allowed: {listed})" if listed else ""))
    for name, why in bad_skips:
        print(f"FAILED (a skip under CI=true, and {allow_path} does not allow it): {name}: {why}")
    if passed + failed + skipped == 0:
        print("no test ran", file=sys.stderr)
        failed = 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
PY
totals=$?
# meson failed for a reason of its own (a build error, an interrupted run).
if [ $totals -eq 0 ] && [ $rc -ne 0 ]; then
    tm_say "meson test exited $rc with no failed test"
    exit 1
fi
exit $totals
