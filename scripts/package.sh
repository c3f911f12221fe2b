#!/usr/bin/env bash
# Builds Debian packages from this tree, with dpkg-deb: control files,
# Depends from dpkg-shlibdeps (Debian's DPDK runtime packages among them),
# md5sums, conffiles, maintainer scripts.
#   tailmarkd               the daemon, tailmark-cat, tailmark-ctl and the tools,
#                           tailmarkd@.service, an example instance
#   libtailmark-client0     libtailmark-client.so.0 (the package of the library's soname)
#   libtailmark-client-dev  the headers, the .so link, tailmark-client.pc
#   python3-tailmark        tailmark.torch, the torch.distributed backend
#                           (left out, said, when torch is not installed)
#
#   scripts/package.sh                    a release build in build-pkg/ (prefix /usr,
#                                         -march=x86-64-v2), packages in build-pkg/debs/
#   scripts/package.sh --out DIR          the .debs there
#   scripts/package.sh --from-build DIR   package an existing build directory as it is
#                                         (its prefix moved to /usr; its -march kept):
#                                         quick, for tests/integration/packages.sh
#   scripts/package.sh --version V        the Debian version (default: the project's
#                                         version, +git<commits>.<hash>, -1)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

out= from= version= compress=(-Zxz)
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift ;;
    --from-build) from=$(cd "$2" && pwd); shift ;;
    --version) version=$2; shift ;;
    --fast) compress=(-Zgzip -z1) ;; # tests: quicker to build, the same contents
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) tm_say "package.sh: unknown argument '$1'"; exit 2 ;;
    esac
    shift
done

tm_ensure_packages run pkg
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
upstream=$(sed -n "s/^  version : '\(.*\)',$/\1/p" "$TM_ROOT/meson.build" | head -1)
if [ -z "$version" ]; then
    version="$upstream-1"
    if git -C "$TM_ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        version="$upstream+git$(git -C "$TM_ROOT" rev-list --count HEAD).$(git -C "$TM_ROOT" rev-parse --short HEAD)-1"
    fi
fi
work=$(mktemp -d /tmp/tm_pkg.XXXXXX)
trap 'rm -rf "$work"' EXIT
stage=$work/stage

if [ -z "$from" ]; then
    dir=$TM_ROOT/build-pkg
    out=${out:-$dir/debs}
    if [ ! -f "$dir/build.ninja" ]; then
        tm_say "configuring $dir: prefix /usr, release, -march=x86-64-v2 (Debian's DPDK baseline), no tests"
        meson setup "$dir" "$TM_ROOT" --prefix=/usr --libdir="lib/$ma" --buildtype=release -Dmarch=x86-64-v2 \
            -Dtests=false >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; exit 1; }
    fi
    TM_TESTS=false tm_build "$dir"
    meson install -C "$dir" --destdir "$stage" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
        { cat "$work/install.log"; exit 1; }
else
    out=${out:-$from/debs}
    tm_say "packaging $from as it is built"
    meson install -C "$from" --destdir "$stage" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
        { cat "$work/install.log"; exit 1; }
    # Its prefix (/usr/local, meson's default) becomes /usr.
    prefix=$(meson introspect --buildoptions "$from" | python3 -c \
        "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name'] == 'prefix'][0])")
    if [ "$prefix" != /usr ]; then
        mkdir -p "$stage/usr"
        cp -a "$stage$prefix/." "$stage/usr/"
        rm -rf "${stage:?}$prefix"
        rmdir -p --ignore-fail-on-non-empty "$(dirname "$stage$prefix")" 2>/dev/null || true
        find "$stage/usr" -name '*.pc' -exec sed -i "s#$prefix#/usr#g" {} +
        # Python's site directory under /usr/local is dist-packages of the versioned python: Debian's is python3/.
        for d in "$stage"/usr/lib/python3*/dist-packages "$stage"/usr/local/lib/python3*/dist-packages; do
            [ -d "$d" ] && [ "$d" != "$stage/usr/lib/python3/dist-packages" ] || continue
            mkdir -p "$stage/usr/lib/python3/dist-packages"
            cp -a "$d/." "$stage/usr/lib/python3/dist-packages/"
            rm -rf "$d"
        done
    fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# --- the packages' trees ---------------------------------------------------------
root() { echo "$work/pkg/$1"; }
take() { # take PKG PATH..: move staged paths (relative to the stage) into PKG's tree
    local pkg=$1 p
    shift
    for p in "$@"; do
        [ -e "$stage/$p" ] || [ -L "$stage/$p" ] || { tm_say "package.sh: $p was not installed"; exit 1; }
        mkdir -p "$(root "$pkg")/$(dirname "$p")"
        mv "$stage/$p" "$(root "$pkg")/$p"
    done
}
lib=usr/lib/$ma
take libtailmark-client0 "$lib/libtailmark-client.so.0" $(cd "$stage" && ls "$lib"/libtailmark-client.so.0.*)
take libtailmark-client-dev "$lib/libtailmark-client.so" "$lib/pkgconfig/tailmark-client.pc" usr/include/tailmark
have_python=0
if [ -d "$stage/usr/lib/python3/dist-packages/tailmark" ]; then
    take python3-tailmark usr/lib/python3/dist-packages/tailmark
    have_python=1
else
    tm_say "python3-tailmark left out: the build has no tailmark.torch (needs python3-torch, libtorch-dev, pybind11-dev: scripts/deps.sh torch)"
fi
take tailmarkd $(cd "$stage" && ls -d usr/bin/*)
d=$(root tailmarkd)
install -D -m 0644 "$TM_ROOT/packaging/systemd/tailmarkd@.service" "$d/lib/systemd/system/tailmarkd@.service"
install -D -m 0644 "$TM_ROOT/packaging/examples/service.ini" "$d/usr/share/doc/tailmarkd/examples/service.ini"
[ -f "$TM_ROOT/docs/operating.md" ] && install -D -m 0644 "$TM_ROOT/docs/operating.md" "$d/usr/share/doc/tailmarkd/operating.md"
install -d -m 0755 "$d/etc/tailmark"
left=$(cd "$stage" && find . -type f -o -type l)
if [ -n "$left" ]; then
    tm_say "package.sh: installed files no package takes:"
    echo "$left" >&2
    exit 1
fi

pkgs=(tailmarkd libtailmark-client0 libtailmark-client-dev)
[ $have_python -eq 1 ] && pkgs+=(python3-tailmark)
date=$(date -R)
for p in "${pkgs[@]}"; do
    d=$(root "$p")
    install -d "$d/usr/share/doc/$p"
    cat >"$d/usr/share/doc/$p/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tailmark
Comment: Built from the tailmark source tree by scripts/package.sh. The tree
 declares no licence of its own; its terms are those of its authors.
EOF
    printf '%s (%s) unstable; urgency=medium\n\n  * Built from the source tree by scripts/package.sh.\n\n -- tailmark maintainers <tailmark@localhost>  %s\n' \
        "$p" "$version" "$date" | gzip -9n >"$d/usr/share/doc/$p/changelog.Debian.gz"
done
# Binaries: stripped of their symbols (a -dbgsym package is for dh).
while IFS= read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] &&
        strip --strip-unneeded --remove-section=.comment --remove-section=.note "$f"
done < <(find "$work/pkg" -type f)

# --- dependencies ----------------------------------------------------------------
# dpkg-shlibdeps reads debian/control and debian/shlibs.local where it runs:
# the library's own package for its soname.
mkdir -p "$work/src/debian"
printf 'Source: tailmark\n\nPackage: tailmarkd\nArchitecture: any\n' >"$work/src/debian/control"
echo "libtailmark-client 0 libtailmark-client0 (>= $version)" >"$work/src/debian/shlibs.local"
is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
shlibs() { # shlibs PKG: the Depends dpkg-shlibdeps finds for PKG's ELF files
    local d f elf=() deps
    d=$(root "$1")
    while IFS= read -r f; do
        is_elf "$f" && elf+=("$f")
    done < <(find "$d" -type f)
    [ ${#elf[@]} -eq 0 ] && return 0
    deps=$(cd "$work/src" && dpkg-shlibdeps -O -l"$(root libtailmark-client0)/$lib" "${elf[@]}" 2>"$work/shlibdeps.err") ||
        { cat "$work/shlibdeps.err" >&2; return 1; }
    sed -n 's/^shlibs:Depends=//p' <<<"$deps"
}
join() { # join A B..: the non-empty ones, ", " between
    local r= x
    for x in "$@"; do
        [ -n "$x" ] && r=${r:+$r, }$x
    done
    echo "$r"
}

control() { # control PKG DEPENDS DESCRIPTION [EXTRA FIELDS]
    local p=$1 deps=$2 desc=$3 extra=${4:-} d size
    d=$(root "$p")
    size=$(du -sk --exclude=DEBIAN "$d" | cut -f1)
    mkdir -p "$d/DEBIAN"
    {
        echo "Package: $p"
        echo "Source: tailmark"
        echo "Version: $version"
        echo "Architecture: $arch"
        echo "Maintainer: tailmark maintainers <tailmark@localhost>"
        echo "Installed-Size: $size"
        [ -n "$deps" ] && echo "Depends: $deps"
        [ -n "$extra" ] && printf '%s\n' "$extra"
        echo "Homepage: https://github.com/tailmark/tailmark"
        printf '%s\n' "$desc"
    } >"$d/DEBIAN/control"
    (cd "$d" && find . -path ./DEBIAN -prune -o -type f -print | sed 's#^\./##' | sort | xargs -r md5sum) >"$d/DEBIAN/md5sums"
}

control libtailmark-client0 "$(shlibs libtailmark-client0)" \
"Section: libs
Priority: optional
Multi-Arch: same
Description: tailmark client library: send and receive through tailmarkd
 Applications send and receive whole messages through a running
 tailmarkd --mode service, without DPDK of their own (C API in
 tailmark/client.h). This package holds the shared library."

# For packages built against it (dpkg-shlibdeps), and ldconfig's cache.
echo "libtailmark-client 0 libtailmark-client0 (>= $upstream)" >"$(root libtailmark-client0)/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$(root libtailmark-client0)/DEBIAN/triggers"

control libtailmark-client-dev "libtailmark-client0 (= $version)" \
"Section: libdevel
Priority: optional
Multi-Arch: same
Description: tailmark client library: development files
 The headers (tailmark/client.h, the C++20 tailmark/client.hpp), the
 libtailmark-client.so link and tailmark-client.pc
 (pkg-config --cflags --libs tailmark-client)."

tdeps=$(join "$(shlibs tailmarkd)" "librte-net-ring23" "librte-mempool-ring23" "passwd")
control tailmarkd "$tdeps" \
"Section: net
Priority: optional
Recommends: librte-net-af-xdp23, librte-net-af-packet23
Suggests: dpdk
Description: tailmark: whole messages over DPDK with one completion per message
 tailmarkd, the poll-mode dataplane (DPDK 22.11): --mode service serves
 the host's applications (libtailmark-client) over a Unix socket;
 tailmarkd --check is its preflight. With tailmark-cat (netcat over
 tailmark), tailmark-ctl (status of a running daemon), tailmark-perf,
 tailmark-consumer, tailmark-jitter, and the unit tailmarkd@.service
 (one instance per /etc/tailmark/NAME.ini)."
d=$(root tailmarkd)
# The unit's group; /etc/tailmark for the instances. Instances are the
# administrator's to enable (systemctl enable --now tailmarkd@NAME).
cat >"$d/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    getent group tailmark >/dev/null || groupadd --system tailmark
    install -d -m 0755 /etc/tailmark
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload >/dev/null || true
    fi
fi
exit 0
EOF
cat >"$d/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    systemctl stop 'tailmarkd@*.service' >/dev/null 2>&1 || true
fi
exit 0
EOF
cat >"$d/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
    rmdir /etc/tailmark 2>/dev/null || true
fi
exit 0
EOF
chmod 0755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm" "$d/DEBIAN/postrm"

if [ $have_python -eq 1 ]; then
    # Byte-compiled by Debian's python3 for itself, and those files removed
    # with the package (as dh_python3's scripts do).
    d=$(root python3-tailmark)
    mkdir -p "$d/DEBIAN"
    printf '#!/bin/sh\nset -e\nif command -v py3compile >/dev/null; then py3compile -p python3-tailmark; fi\nexit 0\n' >"$d/DEBIAN/postinst"
    printf '#!/bin/sh\nset -e\nif command -v py3clean >/dev/null; then py3clean -p python3-tailmark; else\n  rm -rf /usr/lib/python3/dist-packages/tailmark/__pycache__; fi\nexit 0\n' >"$d/DEBIAN/prerm"
    chmod 0755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm"
    pydeps=$(join "$(shlibs python3-tailmark)" "python3 (>= 3.11~)" "python3 (<< 3.12)" "python3-torch")
    control python3-tailmark "$pydeps" \
"Section: python
Priority: optional
Description: tailmark: the torch.distributed backend
 import tailmark.torch registers the torch.distributed backend
 \"tailmark\": collectives over a running tailmarkd --mode service,
 through libtailmark-client."
fi

rm -f "$out"/*.deb
for p in "${pkgs[@]}"; do
    dpkg-deb --root-owner-group "${compress[@]}" --build "$(root "$p")" "$out/${p}_${version}_${arch}.deb" >/dev/null
    tm_say "built $out/${p}_${version}_${arch}.deb"
done
