#!/usr/bin/env bash
# tailmarkd --check (app/tailmarkd/preflight/preflight.h): preflight without EAL.
#
# A healthy command line exits 0 and says "ready". Then each item broken in
# turn, every one without touching the host: the hugepages taken away in a
# private mount namespace (every hugetlbfs unmounted there, or one mounted
# there that cannot hold what -m asks), --huge-dir on a plain directory, a
# secret file others may read, a CPU that does not exist, interfaces in a
# network namespace of this test's (missing, down, an MTU below --mtu,
# net_af_packet frames too small for --mtu, net_af_xdp queues it has not),
# a control socket a live process answers on, a --file-prefix whose config a
# live process locks. Each: exit 1, the item's FAIL line, and its fix line
# naming the command. Exact lines, not just a non-zero exit.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root

NS=tm_pf_$$
TM_NETNS+=("$NS")
ip netns add "$NS" || { tm_fail "netns"; tm_finish; }
ip -n "$NS" link set lo up

# check NAME WANT_RC [ns] -- ARGS...: runs tailmarkd --check ARGS, output in NAME.out.
check() {
    local name=$1 want=$2
    shift 2
    local pre=()
    if [ "$1" = ns ]; then
        pre=(ip netns exec "$NS")
        shift
    elif [ "$1" = unshare ]; then # a private mount namespace: $2 runs there first
        pre=(unshare -m --propagation private bash -c "$2"' && exec "$@"' _)
        shift 2
    fi
    [ "$1" = -- ] && shift
    "${pre[@]}" timeout 20 "$TAILMARKD" --check "$@" >"$TM_WORK/$name.out" 2>&1
    local rc=$?
    if [ $rc -ne "$want" ]; then
        tm_fail "$name: exit $rc, want $want"
        sed 's/^/    /' "$TM_WORK/$name.out"
        return 1
    fi
    return 0
}

# has NAME REGEX...: each (extended) regex matches a line of NAME.out.
has() {
    local name=$1 re bad=0
    shift
    for re in "$@"; do
        if ! grep -qE -- "$re" "$TM_WORK/$name.out"; then
            tm_fail "$name: no line matching: $re"
            bad=1
        fi
    done
    [ $bad -eq 0 ] || sed 's/^/    /' "$TM_WORK/$name.out"
    [ $bad -eq 0 ] && tm_log "ok: $name: $(grep -m1 -E '^FAIL' "$TM_WORK/$name.out" || tail -n1 "$TM_WORK/$name.out")"
}

P=$(tm_prefix pf)
EAL=(--no-pci --vdev=net_ring0 -l 0-1 --file-prefix "$P")

# Healthy: this machine's memory arguments (hugepages, or --no-huge where
# scripts/test.sh found none), the default loopback.
check healthy 0 -- "${TM_MEM[@]}" "${EAL[@]}" -- --config "$TAILMARK_CONFIG_DIR/loopback.ini" &&
    has healthy '^ok +options +--mode loopback, --mtu 1500, from .*loopback.ini$' \
        '^(ok|warn) +hugepages ' '^ok +port +--vdev net_ring0: net_ring \(virtual, no NIC\)$' \
        '^ok +prefix +--file-prefix '"$P"': free' '^(ok|warn) +cpus ' \
        '^tailmarkd --check: [0-9]+ ok, [0-9]+ warning\(s\), 0 failure\(s\): ready$'
! grep -q '^FAIL' "$TM_WORK/healthy.out" || tm_fail "healthy: a FAIL line"

# Hugepages taken away: every hugetlbfs unmounted in a private mount namespace.
UNMOUNT='for m in $(awk '"'"'$3 == "hugetlbfs" {print $2}'"'"' /proc/mounts); do umount -l "$m" || exit 1; done'
check nohuge 1 unshare "$UNMOUNT" -- "${EAL[@]}" -- --config "$TAILMARK_CONFIG_DIR/loopback.ini" &&
    has nohuge '^FAIL +hugepages +no hugetlbfs is mounted: EAL has nowhere to map hugepages from$' \
        'fix: mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages$' \
        'or run without hugepages \(slower\): --no-huge -m 1024$' \
        '^tailmarkd --check: [0-9]+ ok, [0-9]+ warning\(s\), 1 failure\(s\): a real start would fail'

# --huge-dir on a directory that is not hugetlbfs.
mkdir -p "$TM_WORK/plain"
check hugedir 1 -- "${EAL[@]}" --huge-dir "$TM_WORK/plain" -- &&
    has hugedir "^FAIL +hugepages +--huge-dir $TM_WORK/plain is not a hugetlbfs mount point" \
        "fix: mkdir -p $TM_WORK/plain && mount -t hugetlbfs nodev $TM_WORK/plain\$"

# Mounted, but -m asks for more than is free: the sysctl that reserves more.
mkdir -p "$TM_WORK/huge"
check hugefree 1 unshare "mount -t hugetlbfs nodev $TM_WORK/huge" -- "${EAL[@]}" --huge-dir "$TM_WORK/huge" \
    -m 100000000 -- &&
    has hugefree "^FAIL +hugepages +.* pages free on $TM_WORK/huge: [0-9]+ MiB free, this run needs 100000000 MiB \(-m\)" \
        'fix: echo [0-9]+ > /sys/kernel/mm/hugepages/hugepages-[0-9]+kB/nr_hugepages'
mountpoint -q "$TM_WORK/huge" && tm_fail "hugefree: the private mount leaked into the test's namespace"

# The secret file: readable by others, then right.
printf '%s\n' "$TM_SECRET" >"$TM_WORK/secret"
chmod 644 "$TM_WORK/secret"
SVC=(--mode service --control-socket "$TM_WORK/run/tm.sock" --secret-file "$TM_WORK/secret")
check secret644 1 -- "${TM_MEM[@]}" "${EAL[@]}" -- "${SVC[@]}" &&
    has secret644 "^FAIL +secret +--secret-file: $TM_WORK/secret is readable or writable by its group or others \(mode 0644\)" \
        "fix: chmod 600 $TM_WORK/secret " \
        "^ok +socket +$TM_WORK/run/tm.sock: $TM_WORK/run is made at start"
chmod 600 "$TM_WORK/secret"
check secret600 0 -- "${TM_MEM[@]}" "${EAL[@]}" -- "${SVC[@]}" &&
    has secret600 "^ok +secret +$TM_WORK/secret: mode 0600, its owner's alone$" \
        '^ok +iova +zero copy: every port is virtual'

# A CPU that does not exist.
check cpu 1 -- "${TM_MEM[@]}" --no-pci --vdev=net_ring0 -l 0,4095 --file-prefix "$P" -- &&
    has cpu '^FAIL +cpus +-l 0,4095: CPU 4095 does not exist \(online: [0-9,-]+\)$' 'fix: -l [0-9,-]+ +\(CPUs that exist here\)$'

# Interfaces, in this test's namespace: missing, down, MTU, af_packet frames, af_xdp queues.
ip -n "$NS" link add pf0 numtxqueues 1 numrxqueues 1 type veth peer name pf1 || tm_fail "veth"
check nosuch 1 ns -- "${TM_MEM[@]}" --no-pci --vdev=net_af_packet0,iface=nosuch0 -l 0 --file-prefix "$P" -- &&
    has nosuch '^FAIL +port +interface nosuch0 does not exist \(in this network namespace\)$'
check down 1 ns -- "${TM_MEM[@]}" --no-pci --vdev=net_af_packet0,iface=pf0 -l 0 --file-prefix "$P" -- &&
    has down '^FAIL +port +interface pf0 is down$' 'fix: ip link set dev pf0 up$'
ip -n "$NS" link set pf0 up
ip -n "$NS" link set pf1 up
check mtu 1 ns -- "${TM_MEM[@]}" --no-pci --vdev=net_af_packet0,iface=pf0 -l 0 --file-prefix "$P" -- --mtu 9000 &&
    has mtu '^FAIL +mtu +--mtu 9000 is above pf0'"'"'s MTU 1500: frames that large never arrive$' \
        'fix: ip link set dev pf0 mtu 9000 ' 'or --mtu 1500$'
check frame 1 ns -- "${TM_MEM[@]}" --no-pci --vdev=net_af_packet0,iface=lo -l 0 --file-prefix "$P" -- --mtu 9000 &&
    has frame "^FAIL +mtu +--mtu 9000 needs net_af_packet's framesz >= 9216, in steps of 512 \(it is 2048\)$" \
        'fix: --vdev=net_af_packet0,iface=lo,framesz=9216,blocksz=73728$'
check xdpq 1 ns -- "${TM_MEM[@]}" --no-pci --vdev=net_af_xdp0,iface=pf0,start_queue=0,queue_count=2 -l 0 \
    --file-prefix "$P" -- &&
    has xdpq '^FAIL +port +--vdev net_af_xdp0: queues 0..1 of pf0, which has 1 rx queue\(s\)$' \
        'fix: ethtool -L pf0 combined 2$'
check xdp 0 ns -- "${TM_MEM[@]}" --no-pci --vdev=net_af_xdp0,iface=pf0,start_queue=0,queue_count=1 -l 0 \
    --file-prefix "$P" -- &&
    has xdp '^ok +port +--vdev net_af_xdp0: net_af_xdp on pf0 \(driver virtual, up, MTU 1500\), queues 0..0 of 1; copy mode'

# A control socket a live process answers on, and a prefix a live process locks.
mkdir -p "$TM_WORK/live" "/var/run/dpdk/$P"
/usr/bin/python3 - "$TM_WORK/live/tm.sock" "/var/run/dpdk/$P/config" <<'EOF' &
import fcntl, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(4)
f = open(sys.argv[2], "w")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1] + ".ready", "w").close()
time.sleep(30)
EOF
holder=$!
TM_CLEANUPS+=("kill $holder")
tm_wait_for 10 test -e "$TM_WORK/live/tm.sock.ready" || tm_fail "the socket holder did not start"
check live 1 -- "${TM_MEM[@]}" "${EAL[@]}" -- --mode service --insecure --control-socket "$TM_WORK/live/tm.sock" &&
    has live "^FAIL +socket +$TM_WORK/live/tm.sock is in use by a running daemon$" \
        "^FAIL +prefix +--file-prefix $P is in use by a running DPDK process \(pid $holder\)$" \
        'fix: --file-prefix <another>'
kill $holder 2>/dev/null
wait $holder 2>/dev/null

tm_finish
