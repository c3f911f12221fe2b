#!/usr/bin/env bash
# client_install: `meson install` of the build into a scratch root, then a C
# program and a C++ one compiled and linked against what was installed with
# `pkg-config --cflags --libs tailmark-client` alone, run; and the library
# needs no DPDK (no librte_* in its DT_NEEDED, nor in ldd) and exports only tm_*.
#   install_test.sh BUILD_DIR SRC_DIR B_SANITIZE
set -euo pipefail
build=$1 src=$2 sanitize=${3:-none}
# A sanitizer build's library calls the sanitizer runtime: the programs built
# against it link that runtime too (-fsanitize=, as meson's b_sanitize).
san=()
[ "$sanitize" != "none" ] && san=("-fsanitize=$sanitize")
tmp=$(mktemp -d /tmp/tm_install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "client_install: $*" >&2; exit 1; }

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install failed"; }

pc=$(find "$tmp/root" -name tailmark-client.pc | head -1)
[ -n "$pc" ] || fail "no tailmark-client.pc installed"
hdr=$(find "$tmp/root" -path '*/include/tailmark/client.h' | head -1)
[ -n "$hdr" ] || fail "no include/tailmark/client.h installed"
[ -f "$(dirname "$hdr")/client.hpp" ] || fail "no include/tailmark/client.hpp installed"
lib=$(find "$tmp/root" -name 'libtailmark-client.so.*.*' -type f | head -1)
[ -n "$lib" ] || fail "no libtailmark-client.so installed"
[ -L "$(dirname "$lib")/libtailmark-client.so" ] || fail "no libtailmark-client.so development link"

export PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_SYSROOT_DIR=$tmp/root
flags=$(pkg-config --cflags --libs tailmark-client) || fail "pkg-config failed"
echo "pkg-config: $flags"
case "$flags" in *"$tmp/root"*) ;; *) fail "pkg-config flags do not point into the install root: $flags" ;; esac

libdir=$(dirname "$lib")
cc=${CC:-cc}
cxx=${CXX:-c++}
# shellcheck disable=SC2086
"$cc" "${san[@]}" -std=c99 -Wall -Wextra -Werror -pedantic -o "$tmp/check_c" "$src/install_check.c" $flags ||
    fail "the C program does not build against the installed header and library"
# shellcheck disable=SC2086
"$cxx" "${san[@]}" -std=c++20 -Wall -Wextra -Werror -o "$tmp/check_cpp" "$src/install_check.cc" $flags ||
    fail "the C++ program does not build against the installed client.hpp"
LD_LIBRARY_PATH=$libdir "$tmp/check_c" "$tmp/no/such/tailmarkd.sock" || fail "the C program failed"
LD_LIBRARY_PATH=$libdir "$tmp/check_cpp" || fail "the C++ program failed"

if readelf -d "$lib" | grep -q 'NEEDED.*librte_'; then
    readelf -d "$lib" | grep NEEDED >&2
    fail "libtailmark-client.so needs DPDK"
fi
if LD_LIBRARY_PATH=$libdir ldd "$tmp/check_c" | grep -q 'librte_'; then
    fail "a program linked with libtailmark-client loads DPDK"
fi
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^tm_' || true)
[ -z "$others" ] || fail "exports more than tm_*: $others"
echo "client_install: ok ($(nm -D --defined-only "$lib" | grep -c ' tm_') tm_* symbols, $(readelf -d "$lib" | grep -c NEEDED) NEEDED, no librte_*)"
