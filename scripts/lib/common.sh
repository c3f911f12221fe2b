# Shared by scripts/*.sh: packages, hugepages, build. Source it; do not run it.
# shellcheck shell=bash

TM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TM_BUILD=${TM_BUILD:-$TM_ROOT/build}

tm_say() { printf '[tailmark] %s\n' "$*" >&2; }

# Debian packages the build and the test suites need: clang, its libFuzzer
# and sanitizer runtime and llvm-symbolizer for the test fuzz_libfuzzer.
TM_PACKAGES=(dpdk dpdk-dev libdpdk-dev libnuma-dev catch2 meson ninja-build pkg-config g++
             python3 iproute2 nftables procps tmux tshark valgrind
             python3-dev python3-torch libtorch-dev pybind11-dev
             clang libclang-rt-14-dev llvm-14)

tm_ensure_packages() {
    local missing=() p
    for p in "${TM_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    tm_say "installing missing packages: ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        tm_say "not root: install them with: sudo apt-get install ${missing[*]}"
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # tshark: no setuid dumpcap, and no question about it.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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

# Configures (once) and builds. Extra arguments go to meson setup.
tm_build() {
    local dir=${1:-$TM_BUILD}
    shift || true
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$TM_ROOT" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
    fi
    ninja -C "$dir" >"$dir.ninja.log" 2>&1 || { tail -50 "$dir.ninja.log"; return 1; }
}

tm_daemon() {
    local dir=${1:-$TM_BUILD}
    if [ -x "$dir/app/tailmarkd/tailmarkd" ]; then echo "$dir/app/tailmarkd/tailmarkd"
    elif [ -x "$dir/app/tailmarkd" ]; then echo "$dir/app/tailmarkd"
    else return 1; fi
}
