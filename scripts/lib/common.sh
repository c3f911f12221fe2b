# Shared by scripts/*.sh: packages, hugepages, build. Source it; do not run it.
# shellcheck shell=bash

TM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TM_BUILD=${TM_BUILD:-$TM_ROOT/build}

tm_say() { printf '[tailmark] %s\n' "$*" >&2; }

# Debian packages, in sets (tm_ensure_packages SET..):
#   run    what scripts/run.sh needs to build and run tailmarkd's main job;
#   test   the test suites' tools: Catch2, namespaces and nftables, tmux,
#          tshark, valgrind, and clang with its libFuzzer and sanitizer
#          runtime and llvm-symbolizer for the test fuzz_libfuzzer;
#   torch  the torch.distributed backend (lib/tailmark-torch) and its tests;
#   pkg    scripts/package.sh (dpkg-shlibdeps, fakeroot).
# scripts/test.sh installs them all; scripts/deps.sh SET.. any of them.
TM_PACKAGES_RUN=(dpdk libdpdk-dev libnuma-dev meson ninja-build pkg-config g++ python3)
TM_PACKAGES_TEST=(dpdk-dev catch2 iproute2 nftables procps tmux tshark valgrind
                  clang libclang-rt-14-dev llvm-14)
TM_PACKAGES_TORCH=(python3-dev python3-torch libtorch-dev pybind11-dev)
TM_PACKAGES_PKG=(dpkg-dev fakeroot systemd systemd-container)
# Every set (what scripts/test.sh wants).
TM_PACKAGES=("${TM_PACKAGES_RUN[@]}" "${TM_PACKAGES_TEST[@]}" "${TM_PACKAGES_TORCH[@]}" "${TM_PACKAGES_PKG[@]}")

# tm_packages_of SET..: the packages of those sets, one a line.
tm_packages_of() {
    local set
    for set in "$@"; do
        case "$set" in
        run) printf '%s\n' "${TM_PACKAGES_RUN[@]}" ;;
        test) printf '%s\n' "${TM_PACKAGES_TEST[@]}" ;;
        torch) printf '%s\n' "${TM_PACKAGES_TORCH[@]}" ;;
        pkg) printf '%s\n' "${TM_PACKAGES_PKG[@]}" ;;
        all) printf '%s\n' "${TM_PACKAGES[@]}" ;;
        *) tm_say "unknown package set '$set' (run, test, torch, pkg, all)"; return 1 ;;
        esac
    done
}

# tm_ensure_packages [SET..]: installs what is missing of those sets (default:
# all), saying what and showing apt's progress: one line per package
# downloaded and per package set up, so a first run on a fresh machine is
# never silent.
tm_ensure_packages() {
    local missing=() p want
    want=$(tm_packages_of "${@:-all}") || return 1
    for p in $want; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    tm_say "installing missing packages (${*:-all}): ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        tm_say "not root: install them with: sudo apt-get install ${missing[*]}"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # tshark: no setuid dumpcap, and no question about it.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    local t0=$SECONDS
    tm_say "apt-get update"
    apt-get update -q 2>&1 | grep --line-buffered -E '^(Get:|Hit:|Err:|E:|W:)' | sed -u 's/^/    /'
    [ "${PIPESTATUS[0]}" -eq 0 ] || { tm_say "apt-get update failed"; return 1; }
    tm_say "apt-get install (progress: one line per package fetched, then per package set up)"
    apt-get install -y -q --no-install-recommends "${missing[@]}" 2>&1 |
        grep --line-buffered -E '^(Need to get|[0-9]+ upgraded|Get:|Setting up|E:|W:)' |
        sed -u -E 's/^Get:[0-9]+ [^ ]+ [^ ]+ [^ ]+ /    fetched /; s/^Setting up /    set up /; s/^([^ ])/    \1/'
    [ "${PIPESTATUS[0]}" -eq 0 ] || { tm_say "apt-get install failed"; return 1; }
    tm_say "packages installed in $((SECONDS - t0)) s"
}

# Reserves 2 MiB hugepages and mounts hugetlbfs. Sets TAILMARK_EAL_MEM to the
# EAL memory arguments every DPDK process of ours gets: nothing on hugepages,
# or "--no-huge -m 1024" when hugepages cannot be had.
TM_HUGEPAGES=${TM_HUGEPAGES:-1024}
tm_setup_hugepages() {
    if [ -n "${TAILMARK_EAL_MEM+x}" ]; then
        tm_say "EAL memory from the environment: '${TAILMARK_EAL_MEM}'"
        return 0
    fi
    local nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
    local free=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
    local ok=0
    if [ -w "$nr" ]; then
        [ "$(cat "$nr")" -lt "$TM_HUGEPAGES" ] && echo "$TM_HUGEPAGES" >"$nr" 2>/dev/null
        if ! mountpoint -q /dev/hugepages 2>/dev/null; then
            mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages 2>/dev/null
        fi
        # Files left by an earlier run that died: their pages are not free.
        rm -f /dev/hugepages/tm_* 2>/dev/null
        if mountpoint -q /dev/hugepages && [ "$(cat "$free")" -ge 256 ]; then
            ok=1
        fi
    fi
    if [ $ok -eq 1 ]; then
        tm_say "hugepages: $(cat "$free") free 2 MiB pages on /dev/hugepages"
        export TAILMARK_EAL_MEM=""
    else
        tm_say "WARNING: could not reserve 2 MiB hugepages (not root, or refused by the kernel);"
        tm_say "WARNING: falling back to --no-huge: DPDK runs on anonymous memory, slower, no secondary processes"
        export TAILMARK_EAL_MEM="--no-huge -m 1024"
    fi
    export TAILMARK_EAL="$TAILMARK_EAL_MEM"
}

# tm_build [DIR [SETUP ARGS..]]: configures (once) and builds everything,
# the tests too (a directory scripts/run.sh configured without them gets
# them now). TM_TARGETS: only those ninja targets (scripts/run.sh: tailmarkd).
# TM_TESTS=false: never the tests (scripts/package.sh).
# Prints one line per build step; the whole log is in DIR.ninja.log.
tm_build() {
    local dir=${1:-$TM_BUILD}
    shift || true
    local tests=true targets=()
    [ -n "${TM_TARGETS:-}" ] && read -r -a targets <<<"$TM_TARGETS"
    # Only the daemon: the tests (and Catch2) are not needed.
    [ ${#targets[@]} -gt 0 ] && ! pkg-config --exists catch2 && tests=false
    [ "${TM_TESTS:-}" = false ] && tests=false
    if [ ! -f "$dir/build.ninja" ]; then
        tm_say "configuring $dir (meson setup; log: $dir.setup.log)"
        meson setup "$dir" "$TM_ROOT" -Dtests=$tests "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
    elif [ $tests = true ] && grep -q '"name": "tests", "value": false' "$dir/meson-info/intro-buildoptions.json" 2>/dev/null; then
        tm_say "$dir was configured without the tests (scripts/run.sh): turning them on"
        meson configure "$dir" -Dtests=true >>"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
    fi
    tm_say "building ${targets[*]:-everything} in $dir (log: $dir.ninja.log)"
    local t0=$SECONDS
    ninja -C "$dir" "${targets[@]}" 2>&1 | tee "$dir.ninja.log" |
        sed -u -n -E 's/^\[([0-9]+\/[0-9]+)\] (Compiling|Linking)[^ ]* [^ ]+ (object |target )?(.*)$/    [\1] \2 \4/p'
    [ "${PIPESTATUS[0]}" -eq 0 ] || { tail -50 "$dir.ninja.log"; return 1; }
    tm_say "built in $((SECONDS - t0)) s"
}

tm_daemon() {
    local dir=${1:-$TM_BUILD}
    if [ -x "$dir/app/tailmarkd/tailmarkd" ]; then echo "$dir/app/tailmarkd/tailmarkd"
    elif [ -x "$dir/app/tailmarkd" ]; then echo "$dir/app/tailmarkd"
    else return 1; fi
}

# tm_veth_netns NA NB: two network namespaces joined by a veth pair, vethA in
# NA and vethB in NB, up, IPv6 off (the benchmarks' two-process set-up; the
# caller deletes the namespaces).
tm_veth_netns() {
    local n
    ip netns add "$1" && ip netns add "$2" || return 1
    ip link add vethA netns "$1" type veth peer name vethB netns "$2" || return 1
    for n in "$1" "$2"; do
        ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
        ip -n "$n" link set lo up
    done
    ip -n "$1" link set vethA up && ip -n "$2" link set vethB up
}
