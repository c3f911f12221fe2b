#!/usr/bin/env bash
# net_tap: two tap ports joined by a Linux bridge, inside a network namespace
# this test makes and removes; loopback across the ports (--tx-port 0
# --rx-port 1): DPDK writes to dtap0, the kernel bridges the frame to dtap1,
# DPDK reads it there.
#
# Synchronisation, without sleeping: the test creates dtap0/dtap1 itself as
# persistent multi-queue taps, enslaves them to the bridge and brings
# everything up *before* the daemon starts, and runs the daemon inside the
# namespace (ip netns exec). net_tap's TUNSETIFF with iface=dtapN then attaches
# to the existing devices, so the path is complete when the first packet is
# sent. (Letting net_tap create the taps would need a hand-over point: the
# daemon would have to wait until the test has bridged them.)
#
# Addressing: net_tap gives each DPDK port its kernel tap's MAC (a new random
# one at every start). The bridge delivers frames addressed to its ports' own
# MACs to the host stack instead of forwarding them, and after a restart it
# also stopped forwarding frames whose *source* was dtap0's own address. So
# the frames carry MACs no bridge port owns (02:00:00:00:00:01 ->
# 02:00:00:00:00:02); the bridge floods them to dtap1. IPv6 is off in the
# namespace so the kernel sends (almost) no traffic of its own.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root

# A fresh namespace, taps and bridge for every run: nothing a previous run
# did to the taps (net_tap changes their MAC and flags at every start) or
# the bridge's tables can leak into the next one.
tap_setup() {
    NS=tm_tap_$$_$1
    TM_NETNS+=("$NS")
    ip netns add "$NS" || return 1
    ip netns exec "$NS" sh -e -c '
        sysctl -qw net.ipv6.conf.all.disable_ipv6=1
        sysctl -qw net.ipv6.conf.default.disable_ipv6=1
        ip link set lo up
        for t in dtap0 dtap1; do
            ip tuntap add dev $t mode tap multi_queue
            ip link set $t txqueuelen 20000
        done
        ip link add br0 type bridge
        ip link set dtap0 master br0
        ip link set dtap1 master br0
        ip link set br0 up
        ip link set dtap0 up
        ip link set dtap1 up
    '
}
tap_teardown() {
    ip netns del "$NS"
}

MTU=1500
# name flows messages msg_size ring completion
cases=(
    "tap64msg  4 2000 64      64 message"
    "tap4kpkt  4 1000 4096    64 packet"
    "tap1mmsg  2 6    1048576 4  message"
    "tap1mpkt  2 6    1048576 4  packet"
)
for c in "${cases[@]}"; do
    read -r name flows msgs size ring mode <<<"$c"
    tap_setup "$name" || { tm_fail "$name: namespace set-up"; continue; }
    tm_run "$name" 50 ns "$NS" -- --vdev=net_tap0,iface=dtap0 --vdev=net_tap1,iface=dtap1 -l 0,1 -- \
        --tx-port 0 --rx-port 1 --src-mac 02:00:00:00:00:01 --dst-mac 02:00:00:00:00:02 \
        --flows "$flows" --messages "$msgs" --msg-size "$size" --ring-size "$ring" --mtu $MTU \
        --completion "$mode" --exit-when-done --duration 40 --stats-period 0 \
        --keepalive-ms 60000 --peer-timeout-ms 120000 # no probe in the session's count, however slow
    tap_teardown
    tm_expect_rc "$name" 0 || continue
    pkts=$(tm_pkts "$size" $MTU)
    tm_transfer_checks "$name" "$flows" "$msgs" "$size" $MTU "$mode" &&
        tm_check "$name" \
            "d['packets_tx'] == $((flows * msgs * pkts)) + d['reliability']['retx_pkts'] + d['control_tx']" \
            "d['session']['tx'] == 6" \
            "d['tx_dropped'] == 0" &&
        tm_log "ok: $name ($flows flows x $msgs x $size B over tap/bridge, $mode mode)"
done

tm_finish
