# Shared by the integration tests: source it, do not run it.
# shellcheck shell=bash
#
# Environment:
#   TAILMARKD           the daemon (meson passes it; else build/)
#   TAILMARK_EAL_MEM    EAL memory arguments; "--no-huge -m 1024" when unset
#                       (scripts/test.sh sets it: "" when hugepages are there)
#   TAILMARK_CONFIG_DIR config/ of the source tree
#   TM_KEEP=1           keep the work directory for inspection
#   TAILMARK_SANITIZE   a sanitizer build's b_sanitize ("address,undefined";
#                       meson sets it, and TAILMARK_SANITIZE_PRELOAD: see TM_SAN_RUN)
#
# Every daemon run: its own --file-prefix (tm_it_<test>_<pid>_<n>), --no-pci,
# `timeout` around it, and assertions read from its summary JSON. Nothing
# waits on a fixed sleep: conditions are polled with a bounded loop.
set -uo pipefail

TM_TEST=${TM_TEST:-$(basename "${0%.sh}")}
TM_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TAILMARKD=${TAILMARKD:-}
if [ -z "$TAILMARKD" ]; then
    for c in "$TM_SRC/build/app/tailmarkd/tailmarkd"; do
        [ -x "$c" ] && { TAILMARKD=$c; break; }
    done
fi
TAILMARK_CONFIG_DIR=${TAILMARK_CONFIG_DIR:-$TM_SRC/config}
# Unset: no hugepages assumed. Set but empty: hugepages (EAL's defaults).
read -r -a TM_MEM <<<"${TAILMARK_EAL_MEM---no-huge -m 1024}"
TM_WORK=$(mktemp -d "/tmp/tm_it_${TM_TEST}.XXXXXX")
TM_RUNS=0
TM_FAILS=0
TM_PREFIXES=()
TM_NETNS=()
TM_CLEANUPS=()
# TM_SAN_RUN: the command prefix for a program not built with the sanitizer
# that runs code which is (/usr/bin/python3 importing tailmark.torch): empty
# for a normal build. Under ASan: TAILMARK_SANITIZE_PRELOAD preloaded (the
# ASan runtime, then libstdc++: tests/integration/meson.build says why), and
# leak detection off for that process (and its children) alone. CPython and
# torch leave memory allocated at exit by design (`import torch.distributed`
# alone: 6.8 MB in 27,000 allocations reported), and no suppression can name
# only theirs: every allocation of the extension is made under the
# interpreter's frames too. The daemons, tools and unit tests keep leak
# detection on.
TM_SAN_RUN=()
if [ -n "${TAILMARK_SANITIZE_PRELOAD:-}" ]; then
    TM_SAN_RUN=(env "LD_PRELOAD=$TAILMARK_SANITIZE_PRELOAD${LD_PRELOAD:+ $LD_PRELOAD}"
                "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
fi
# TM_SAN_SLOW: how many times slower the daemons of a sanitizer build run
# than the release build's (1 for a normal build), for the few bounds on
# time or rate that a slower CPU alone fails; each use names its bound and
# what was measured there. 8 is what ASan+UBSan at -O0 cost against -O3
# over net_af_packet, which those suites run on: congestion's 5_lossy (one
# pair, no bottleneck: the CPU is the limit) 1767 Mbit/s against 209-255
# (6.9-8.4x). The daemon's own code is slower still (net_null's 64 B rate:
# 7.77 Mpps against 0.303, 26x); the kernel's part of af_packet is not.
TM_SAN_SLOW=1
if [ "${TAILMARK_SANITIZE:-none}" != none ]; then TM_SAN_SLOW=8; fi

tm_log() { printf '[%s] %s\n' "$TM_TEST" "$*"; }

tm_cleanup() {
    local c ns p
    # A process a failed test left running (its file prefix is unique) must
    # not outlive the test and busy-poll a CPU.
    for p in "${TM_PREFIXES[@]}"; do
        pkill -KILL -f -- "--file-prefix $p( |$)" 2>/dev/null
    done
    for c in "${TM_CLEANUPS[@]}"; do eval "$c" >/dev/null 2>&1; done
    for ns in "${TM_NETNS[@]}"; do ip netns del "$ns" >/dev/null 2>&1; done
    # One killed by `timeout -k` (or above) cannot clean up after itself.
    for p in "${TM_PREFIXES[@]}"; do
        rm -f /dev/hugepages/"${p}"map_* 2>/dev/null
        rm -rf "/var/run/dpdk/$p" 2>/dev/null
    done
    if [ "${TM_KEEP:-0}" = 1 ] || [ "$TM_FAILS" -ne 0 ]; then
        tm_log "work directory kept: $TM_WORK"
    else
        rm -rf "$TM_WORK"
    fi
}
trap tm_cleanup EXIT

tm_require_daemon() {
    if [ -z "$TAILMARKD" ] || [ ! -x "$TAILMARKD" ]; then
        tm_log "tailmarkd not found (set TAILMARKD)"
        exit 1
    fi
}

# Network namespaces, veth, tap and bridges need root; meson counts 77 as a skip.
tm_require_root() {
    if [ "$(id -u)" -ne 0 ]; then
        tm_log "SKIP: needs root (network namespaces)"
        exit 77
    fi
}

# tm_skip_rest REASON: the rest of the test cannot run here. What ran must
# have passed (else the test fails as usual); then the test exits 77, which
# meson counts as a skip and scripts/test.sh lists with REASON: a test that
# left part of itself out is not a pass.
tm_skip_rest() {
    if [ "$TM_FAILS" -ne 0 ]; then
        tm_log "not run: $*"
        tm_finish
    fi
    tm_log "SKIP: $*"
    exit 77
}

tm_fail() {
    TM_FAILS=$((TM_FAILS + 1))
    tm_log "FAIL: $*"
}

# tm_prefix NAME: a fresh --file-prefix (or $TM_FIXED_PREFIX when set, to
# run again on the same one), remembered for the cleanup.
tm_prefix() {
    TM_RUNS=$((TM_RUNS + 1))
    local p="${TM_FIXED_PREFIX:-tm_it_${TM_TEST}_$$_${TM_RUNS}_$1}"
    TM_PREFIXES+=("$p")
    echo "$p"
}

# tm_launch NAME TIMEOUT [ns NETNS] -- EAL... -- OPTIONS...: starts the
# daemon under `timeout`, in the background; stdout and stderr go to
# $TM_WORK/NAME.out and NAME.err, the summary to NAME.json. Sets TM_PID (the
# `timeout` process; its status is the daemon's).
tm_launch() {
    local name=$1 tmo=$2
    shift 2
    local ns=()
    if [ "${1:-}" = ns ]; then
        ns=(ip netns exec "$2")
        shift 2
    fi
    [ "${1:-}" = -- ] && shift
    tm_prefix "$name" >/dev/null
    local prefix=${TM_PREFIXES[-1]}
    local eal=() opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do eal+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    opts=("$@")
    rm -f "$TM_WORK/$name.json"
    "${ns[@]}" timeout -k 5 "$tmo" "$TAILMARKD" "${TM_MEM[@]}" --no-pci --file-prefix "$prefix" \
        --log-level=lib.eal:warning "${eal[@]}" -- \
        --summary-json "$TM_WORK/$name.json" "${opts[@]}" \
        >"$TM_WORK/$name.out" 2>"$TM_WORK/$name.err" &
    TM_PID=$!
}

# tm_start: tm_launch, left running in the background.
tm_start() { tm_launch "$@"; }

# tm_run: tm_launch, waited for. Sets TM_RC.
tm_run() {
    tm_launch "$@"
    wait "$TM_PID"
    TM_RC=$?
}

# tm_netns NS...: network namespaces, each with IPv6 off (no neighbour
# discovery on the wire) and lo up, remembered for the cleanup.
tm_netns() {
    local ns
    TM_NETNS+=("$@")
    for ns in "$@"; do
        ip netns add "$ns" || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 || return 1
        ip -n "$ns" link set lo up || return 1
    done
}

# tm_veth_pair NA NB: two network namespaces joined by a veth pair, vethA in
# NA and vethB in NB, up, IPv6 off (no neighbour discovery on the wire), and
# remembered for the cleanup. Sets MAC_A and MAC_B.
tm_veth_pair() {
    local na=$1 nb=$2 ns
    TM_NETNS+=("$na" "$nb")
    ip netns add "$na" && ip netns add "$nb" || return 1
    ip link add vethA netns "$na" type veth peer name vethB netns "$nb" || return 1
    for ns in "$na" "$nb"; do
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 || return 1
        ip netns exec "$ns" ip link set lo up || return 1
    done
    ip netns exec "$na" ip link set vethA up && ip netns exec "$nb" ip link set vethB up || return 1
    MAC_A=$(ip netns exec "$na" cat /sys/class/net/vethA/address)
    MAC_B=$(ip netns exec "$nb" cat /sys/class/net/vethB/address)
}

# tm_bridged NA NM NB: three network namespaces, NA and NB joined through a
# Linux bridge br0 in NM: vethA (NA) - mA [br0 in NM] mB - vethB (NB). Loss,
# shaping (tc) and nftables chains go on the bridge's ports in NM, where they
# are real loss to both ends (not the endpoints' own veths: an af_packet
# socket sees a frame before any ingress hook, and af_packet retries a drop
# in an egress one). IPv6 off, remembered for the cleanup. Sets MAC_A, MAC_B.
tm_bridged() {
    local ns
    TM_NETNS+=("$1" "$2" "$3")
    for ns in "$1" "$2" "$3"; do
        ip netns add "$ns" || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 || return 1
    done
    ip link add vethA netns "$1" type veth peer name mA netns "$2" || return 1
    ip link add vethB netns "$3" type veth peer name mB netns "$2" || return 1
    ip -n "$2" link add br0 type bridge mcast_snooping 0 || return 1 # no IGMP reports of its own
    ip -n "$2" link set mA master br0 && ip -n "$2" link set mB master br0 || return 1
    ip -n "$2" link set mA up && ip -n "$2" link set mB up && ip -n "$2" link set br0 up || return 1
    ip -n "$1" link set vethA up && ip -n "$3" link set vethB up || return 1
    MAC_A=$(ip netns exec "$1" cat /sys/class/net/vethA/address)
    MAC_B=$(ip netns exec "$3" cat /sys/class/net/vethB/address)
}

# tm_bridged_join NS NM DEV PORT: one more namespace NS on tm_bridged's br0
# in NM: DEV (in NS) - PORT [br0 in NM], up, IPv6 off, remembered for the
# cleanup. Prints DEV's MAC.
tm_bridged_join() {
    local ns=$1 nm=$2 dev=$3 port=$4
    TM_NETNS+=("$ns")
    ip netns add "$ns" || return 1
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 || return 1
    ip link add "$dev" netns "$ns" type veth peer name "$port" netns "$nm" || return 1
    ip -n "$nm" link set "$port" master br0 && ip -n "$nm" link set "$port" up || return 1
    ip -n "$ns" link set "$dev" up || return 1
    ip netns exec "$ns" cat "/sys/class/net/$dev/address"
}

# The session secret both ends of a two-process test share (--secret): 128
# bits as 32 hex digits. Tests that want a mismatch use another.
TM_SECRET=00112233445566778899aabbccddeeff

# tm_af_pair TAG: the two-process set-up over net_af_packet: namespaces
# NA/NB (tm_veth_pair, ending the test if that fails), IP_A/IP_B, and the
# EAL vdev of each end, VDEV_A/VDEV_B, with a deep PACKET_MMAP rx ring (the
# credit window of 1 MiB messages is ring-size x 721 packets in flight).
tm_af_pair() {
    NA=tm_${1}a_$$
    NB=tm_${1}b_$$
    tm_veth_pair "$NA" "$NB" || { tm_fail "namespace/veth set-up"; tm_finish; }
    IP_A=198.18.0.1
    IP_B=198.18.0.2
    VDEV_A="--vdev=net_af_packet0,iface=vethA,framecnt=4096"
    VDEV_B="--vdev=net_af_packet0,iface=vethB,framecnt=4096"
}

# tm_show NAME: the tail of a run's output, for a failure report.
tm_show() {
    tm_log "--- $1: stderr"
    tail -n 15 "$TM_WORK/$1.err" 2>/dev/null | sed 's/^/    /'
    tm_log "--- $1: stdout (tail)"
    grep -v '^stats ' "$TM_WORK/$1.out" 2>/dev/null | tail -n 25 | sed 's/^/    /'
}

# tm_expect_rc NAME WANT: the last run's exit code.
tm_expect_rc() {
    if [ "$TM_RC" -ne "$2" ]; then
        tm_fail "$1: exit code $TM_RC, want $2"
        tm_show "$1"
        return 1
    fi
    return 0
}

# tm_check NAME 'python expr' ...: every expression must hold on the summary
# JSON, bound to `d`. A failing expression is printed with the values it read.
tm_check() {
    local name=$1
    shift
    local json="$TM_WORK/$name.json"
    if [ ! -s "$json" ]; then
        tm_fail "$name: no summary JSON"
        tm_show "$name"
        return 1
    fi
    local out
    if ! out=$(python3 - "$json" "$@" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
bad = 0
for expr in sys.argv[2:]:
    try:
        ok = eval(expr, {"d": d})
    except Exception as e:  # a missing key is a failure, not a crash
        ok, expr = False, f"{expr}  ({type(e).__name__}: {e})"
    if not ok:
        bad += 1
        keys = sorted(set(re.findall(r"d\['([a-z_0-9]+)'\]", expr)))
        vals = ", ".join(f"{k}={d.get(k)!r}" for k in keys)
        print(f"    does not hold: {expr}    [{vals}]")
sys.exit(1 if bad else 0)
EOF
    ); then
        tm_fail "$name: summary assertions"
        printf '%s\n' "$out"
        tm_show "$name"
        return 1
    fi
    return 0
}

# tm_check_pair SEND RECV 'python expr' ...: like tm_check, across the two
# summaries of a sender/receiver pair, bound to `s` and `r`.
tm_check_pair() {
    local a="$TM_WORK/$1.json" b="$TM_WORK/$2.json"
    shift 2
    local out
    if ! out=$(python3 - "$a" "$b" "$@" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
bad = 0
for expr in sys.argv[3:]:
    try:
        ok = eval(expr, {"s": s, "r": r})
    except Exception as e:
        ok, expr = False, f"{expr}  ({type(e).__name__}: {e})"
    if not ok:
        bad += 1
        print(f"    does not hold: {expr}    [s.reliability={s.get('reliability')}, r.reliability={r.get('reliability')}]")
sys.exit(1 if bad else 0)
EOF
    ); then
        tm_fail "pair assertions"
        printf '%s\n' "$out"
        return 1
    fi
    return 0
}

# tm_pkts MSG_SIZE MTU [VERSION]: data packets per message, by wire.h's
# plan_group rule: stride = MTU - 20 - 8 - 16 (version 2, a session with a
# remote peer: 8 less, the tag); full packets of `stride`, then the tail with
# the 32-byte trailer, or the tail alone plus an empty LAST when the trailer
# does not fit (also when the message ends on a stride boundary). VERSION
# defaults to $TM_DATA_VERSION, else 1 (one process: loopback).
tm_pkts() {
    python3 - "$1" "$2" "${3:-${TM_DATA_VERSION:-1}}" <<'EOF'
import sys
size, mtu, version = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
stride = mtu - 20 - 8 - (24 if version == 2 else 16)
full, tail = divmod(size, stride)
if tail == 0 and full > 0:
    n = full + 1
elif tail + 32 > stride:
    n = full + 2
else:
    n = full + 1
print(n)
EOF
}

# size_ge FILE BYTES: FILE exists and holds at least BYTES (for tm_wait_for).
size_ge() { [ -f "$1" ] && [ "$(stat -c %s "$1")" -ge "$2" ]; }

# stop_feeder PID: a background subshell feeding a fifo, and what it runs
# (a `sleep` keeping the fifo open outlives a subshell killed alone).
stop_feeder() {
    pkill -P "$1" 2>/dev/null
    kill "$1" 2>/dev/null
}

# tm_wait_for SECONDS CMD...: polls CMD (every 50 ms) until it succeeds.
tm_wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    while ! "$@"; do
        [ $SECONDS -ge $deadline ] && return 1
        sleep 0.05
    done
    return 0
}

# tm_await NAME PID SECONDS CHECK WHAT: polls CHECK like tm_wait_for; if it
# never holds, the daemon NAME (its `timeout` PID) is killed, its output
# shown, and the test ends failed with "NAME: WHAT".
tm_await() {
    local name=$1 pid=$2 secs=$3 check=$4 what=$5
    tm_wait_for "$secs" "$check" && return 0
    tm_fail "$name: $what"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    tm_show "$name"
    tm_finish
}

# tm_transfer_checks NAME FLOWS MESSAGES MSG_SIZE MTU MODE: the exact
# assertions of a complete transfer seen by a receiver.
# tm_goodput NAME: the payload NAME's summary counted over its elapsed
# time, Mbit/s (a receiver's: what it placed; a sender's: what it sent).
tm_goodput() {
    python3 -c "import json; r = json.load(open('$TM_WORK/$1.json'))
print(f\"{r['bytes_payload'] * 8 / r['elapsed_s'] / 1e6:.1f}\")"
}

# tm_wait_pair: waits for a sender ($SPID) and its receiver ($RPID), both
# started with tm_start; sets SRC and RRC, their exit codes.
tm_wait_pair() {
    wait "$SPID"
    SRC=$?
    wait "$RPID"
    RRC=$?
}

# tm_speed_goal VAR EXPR WHAT: an issue's speed goal (a Python expression),
# printed met or not; it fails the test only with $VAR set, since speed goals
# live in scripts/bench.sh and this VM's speed swings.
tm_speed_goal() {
    if python3 -c "import sys; sys.exit(0 if $2 else 1)"; then
        tm_log "meets the issue's bound: $3"
    elif [ -n "${!1:-}" ]; then
        tm_fail "below the issue's bound: $3"
    else
        tm_log "below the issue's bound ($1=1 fails it): $3"
    fi
}

# tm_redundant_drops NAME: the receiver NAME dropped nothing but redundant
# retransmitted copies (a copy of a packet already placed, of a message
# already completed or released), and no more of them than it received.
# A veth may lose frames (a receiver's socket ring full while its lcore is
# descheduled: 398 of one burst over net_af_xdp in CI, 2026-12-05); the
# retransmission that fills such a gap is placed, not dropped.
tm_redundant_drops() {
    tm_check "$1" \
        "d['drops_total'] == d['drops']['duplicate'] + d['drops']['already_completed'] + d['drops']['outside_window']" \
        "d['drops_total'] <= d['reliability']['retx_rx']"
}

tm_transfer_checks() {
    local name=$1 flows=$2 msgs=$3 size=$4 mtu=$5 mode=$6
    local req=$((flows * msgs)) pkts writes
    pkts=$(tm_pkts "$size" "$mtu")
    if [ "$mode" = packet ]; then writes=$((req * pkts)); else writes=$req; fi
    tm_check "$name" \
        "d['messages_requested'] == $req" \
        "d['messages_completed'] == $req" \
        "d['messages_verified'] == $req" \
        "d['verify_errors'] == 0" \
        "d['completion_mode'] == '$mode'" \
        "d['completion_writes'] == $writes" \
        "d['packets_placed'] == $req * $pkts" \
        "d['bytes_payload'] == $req * $size" \
        "d['latency_ns']['samples'] == $req" \
        "all(f['gave_up'] == 0 for f in d['per_flow'])" \
        "d['ok'] is True"
}

tm_finish() {
    if [ "$TM_FAILS" -ne 0 ]; then
        tm_log "$TM_FAILS check(s) failed"
        exit 1
    fi
    tm_log "all checks passed"
    exit 0
}
