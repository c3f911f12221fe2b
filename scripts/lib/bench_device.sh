#!/usr/bin/env bash
# scripts/bench.sh --compare on a machine lent for measuring (16 quiet cores,
# no DPDK, no compiler, no package registry), in two steps:
#   scripts/lib/bench_device.sh pack REV   here: builds this tree and REV, and
#       puts both builds' tailmarkd, tailmark-perf and tailmark-jitter, with
#       DPDK's libraries and PMDs (../shared/tools/make-devbundle.sh), in
#       devbundle/ (git-ignored; about 30 MiB)
#   scripts/lib/bench_device.sh run        there, with devbundle carried:
#       hugepages, then the --compare rows, both builds interleaved,
#       TM_BENCH_ROUNDS rounds (default 5) of TM_BENCH_SECS-second timed rows
#       (default 2); compare.md, compare.json and the raw runs in $OUT
#   scripts/lib/bench_device.sh test NAME..  there: tests/integration/NAME.sh
#       on this tree's daemon (MP_STRICT=1 and such pass through)
# Why a second machine: this VM's two vCPUs swing up to 2x between runs, so
# its --compare cannot tell a 10% change from noise.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
B=devbundle

case ${1:-} in
pack)
    rev=${2:?usage: bench_device.sh pack REV}
    source scripts/lib/common.sh
    tm_build "$TM_BUILD" || exit 1
    # REV in build-ab/, where scripts/bench.sh --compare builds it too.
    TM_BENCH_BUILD_ONLY=1 bash scripts/bench.sh --compare "$rev" >/dev/null || exit 1
    bins=(build/app/tailmarkd/tailmarkd build/app/tailmark-perf/tailmark-perf build/app/tailmark-jitter/tailmark-jitter
          build/app/tailmark-cat/tailmark-cat
          build-ab/build/app/tailmarkd/tailmarkd build-ab/build/app/tailmark-perf/tailmark-perf)
    for x in "${bins[@]}"; do [ -x "$x" ] || { tm_say "missing $x"; exit 1; }; done
    bash ../shared/tools/make-devbundle.sh || exit 1 # the libraries of testpmd and the PMDs
    for x in "${bins[@]}"; do # and of our binaries, laid out as their build trees
        side=A; [[ $x == build-ab/* ]] && side=B
        d=$B/$side/app/$(basename "$x")
        mkdir -p "$d" && cp "$x" "$d/" && strip "$d/$(basename "$x")"
        # The client library at the path of the binary's RUNPATH
        # ($ORIGIN/../../lib/tailmark-client), each side its own: the ABI
        # differs between revisions. The rest from the system, shared.
        ldd "$x" | awk '/=>/ {print $3}' | grep -vE '/libc.so.6$|/libm.so.6$' | while read -r l; do
            case $l in
            */libtailmark-client.so*) mkdir -p $B/$side/lib/tailmark-client && cp -L "$l" $B/$side/lib/tailmark-client/ ;;
            *) cp -nL "$l" $B/lib/ ;;
            esac
        done
    done
    rm -f $B/dpdk-testpmd
    # iproute2's ip, for --cat's network namespaces (the kernel there has
    # veth and netns built in; the image has no ip).
    # tc, nft and sysctl for the integration tests' routers (`test NAME`).
    mkdir -p $B/bin
    for t in ip tc nft sysctl; do
        cp -L "$(command -v $t)" $B/bin/
        ldd $B/bin/$t | awk '/=>/ {print $3}' | grep -vE '/libc.so.6$|/libm.so.6$' | while read -r l; do cp -nL "$l" $B/lib/; done
    done
    echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- app lib drivers || echo +)" >$B/A/rev
    git rev-parse --short "$rev" >$B/B/rev
    du -sh $B
    ;;
run)
    [ -d $B/A ] && [ -d $B/B ] || { echo "no $B/: run 'pack REV' first and carry $B"; exit 1; }
    out=${OUT:-/tmp/bench_device}
    mkdir -p "$out"
    export LD_LIBRARY_PATH=$here/$B/lib PATH=$here/$B/bin:$PATH
    echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), kernel $(uname -r)"
    for t in taskset timeout ip python3 strip; do printf '%s: %s\n' $t "$(command -v $t || echo none)"; done
    rc=0
    [ "${TM_BENCH_ONLY:-}" = cat ] || TM_BENCH_PREBUILT=1 TM_BUILD=$here/$B/A TM_BENCH_B_BUILD=$here/$B/B \
        TM_BENCH_A_REV="$(cat $B/A/rev)" TM_BENCH_B_REV="$(cat $B/B/rev)" TM_PY=${TM_PY:-python3} \
        TM_BENCH_EAL_EXTRA="-d $here/$B/pmds" TM_BENCH_ROUNDS=${TM_BENCH_ROUNDS:-5} TM_BENCH_SECS=${TM_BENCH_SECS:-2} \
        bash scripts/bench.sh --compare "$(cat $B/B/rev)"
    rc=$?
    # Issue 41 item 5 (tailmark-cat --flows 4 against 1) where this machine has
    # network namespaces and veth; 5 rounds. TM_BENCH_ONLY=cat: only this.
    if command -v ip >/dev/null && ip netns add tm_bd_probe 2>/dev/null && ip netns del tm_bd_probe; then
        TM_BENCH_PREBUILT=1 TM_BUILD=$here/$B/A TM_BENCH_A_REV="$(cat $B/A/rev)" TM_PY=${TM_PY:-python3} TM_BENCH_EAL_EXTRA="-d $here/$B/pmds" timeout 200 bash scripts/bench.sh --cat
        cp $B/A/bench/cat.md $B/A/bench/cat.json "$out/" 2>/dev/null
    else
        echo "no network namespaces here (ip: $(command -v ip || echo none)): no --cat"
    fi
    cp $B/A/bench/compare.md $B/A/bench/compare.json "$out/" 2>/dev/null
    tar -C $B/A/bench -czf "$out/raw.tar.gz" $(cd $B/A/bench && ls -d raw cat_raw 2>/dev/null)
    exit $rc
    ;;
test)
    # test NAME..: tests/integration/NAME.sh with this tree's daemon, on
    # hugepages, e.g. `test multipath` (issue 38's goodput on 16 CPUs).
    shift
    export LD_LIBRARY_PATH=$here/$B/lib PATH=$here/$B/bin:$PATH
    source scripts/lib/common.sh
    tm_setup_hugepages
    rc=0
    for t in "$@"; do
        TAILMARKD=$here/$B/A/app/tailmarkd/tailmarkd TAILMARK_EAL_MEM="$TAILMARK_EAL_MEM -d $here/$B/pmds" \
            TM_KEEP=1 bash "tests/integration/$t.sh" || rc=1
    done
    [ -n "${OUT:-}" ] && tar -czf "$OUT/tests.tar.gz" /tmp/tm_it_* 2>/dev/null
    exit $rc
    ;;
*)
    sed -n '2,15p' "$0"
    exit 2
    ;;
esac
