#!/usr/bin/env bash
# Reliability on a lossy, reordering, duplicating, corrupting link: two
# processes (--mode send / --mode recv) over net_af_packet on a veth pair
# between two network namespaces that this test creates.
#
# Faults come from the fault shim on the rx queue of BOTH processes (data
# one way, ACKs/NACKs the other; the session's own handshake and keep-alives
# pass it untouched), or, independently of tailmark, from the kernel:
# nftables netdev ingress chains dropping 2% at random both ways, ARP and the
# handshake included (`numgen random mod 100 < 2`, on a bridge between the
# two, see below).
#
# Each case sends 2 flows x 1500 messages whose sizes cycle through 64 B
# (one packet), 1000 B, 9000 B, 64 KiB and 1 MiB (721 packets). Exact
# assertions:
#   - the receiver completed every message exactly once (completion writes ==
#     messages), verified every byte, no verify error, exit 0;
#   - the sender saw every message acknowledged and released, no flow
#     failed, exit 0;
#   - retransmissions agree between the two sides: the RETX data packets the
#     sender sent are the ones that arrived at the receiver's port (the
#     shim's tap counts them before any fault; with nftables, the kernel's
#     counter at the veth ingress), and the NACKs the receiver sent are the
#     ones that arrived at the sender; with nftables, what the receiver's
#     placer saw is what reached the bridge minus what the kernel dropped;
#   - where packets are lost (drop, corrupt, all, nftables) retransmissions
#     are non-zero. Duplication and reordering lose nothing: there the
#     counters must only agree.
source "$(dirname "$0")/lib.sh"
TM_DATA_VERSION=2 # every session here is between two processes: tagged data (tm_pkts)
tm_require_daemon
tm_require_root

tm_af_pair rl
FLOWS=2
MSGS=1500
SIZES=64,1000,9000,65536,1048576
N=$((FLOWS * MSGS))
COMMON=(--flows $FLOWS --messages $MSGS --msg-size $SIZES --ring-size 8 --exit-when-done --stats-period 0
        --duration 100 --secret $TM_SECRET)

# pair NAME [options for both]: receiver in NB on lcore 1, sender in NA on lcore 0.
pair() {
    local name=$1
    shift
    tm_start "${name}_recv" 130 ns "$NB" -- $VDEV_B -l 1 -- --mode recv \
        --src-ip $IP_B "${COMMON[@]}" "$@"
    local rpid=$TM_PID
    tm_run "${name}_send" 130 ns "$NA" -- $VDEV_A -l 0 -- --mode send \
        --src-ip $IP_A --dst-ip $IP_B "${COMMON[@]}" "$@"
    SEND_RC=$TM_RC
    wait "$rpid"
    RECV_RC=$?
}

# delivered NAME: the exact end state of a transfer that had to recover.
delivered() {
    local name=$1
    TM_RC=$RECV_RC
    tm_expect_rc "${name}_recv" 0 &&
        tm_check "${name}_recv" \
            "d['messages_completed'] == $N" \
            "d['messages_verified'] == $N" \
            "d['completion_writes'] == $N" \
            "d['verify_errors'] == 0" \
            "all(f['released'] == $MSGS and f['acked'] == $MSGS for f in d['per_flow'])" \
            "d['exit_reason'] == 'done'"
    local r1=$?
    TM_RC=$SEND_RC
    tm_expect_rc "${name}_send" 0 &&
        tm_check "${name}_send" \
            "d['messages_sent'] == $N" \
            "d['messages_acked'] == $N" \
            "d['flows_failed'] == 0" \
            "d['messages_failed'] == 0" \
            "all(f['released'] == $MSGS and f['acked'] == $MSGS for f in d['per_flow'])" \
            "d['ok'] is True"
    local r2=$?
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ]
}

# name  fault spec (both processes)  lossy?  extra options. Corruption: with
# the UDP checksum a damaged packet is dropped alone and resent; without it
# only the message CRC finds it, and a 1 MiB message (721 packets) on a link
# corrupting 1% of packets would almost never arrive whole (0.99^721).
cases=(
    "drop1    drop=0.01,seed=101                                  1"
    "drop5    drop=0.05,seed=102                                  1"
    "reorder  reorder=0.1,seed=103                                0"
    "dup      dup=0.02,seed=104                                   0"
    "corrupt  corrupt=0.01,seed=105                               1 --udp-checksum on"
    "all      drop=0.02,dup=0.02,reorder=0.1,corrupt=0.01,seed=106 1 --udp-checksum on"
)
for c in "${cases[@]}"; do
    read -r name spec lossy extra <<<"$c"
    [ -n "${TM_ONLY:-}" ] && [[ " $TM_ONLY " != *" $name "* ]] && continue # TM_ONLY="drop1 all": a subset
    # shellcheck disable=SC2086
    pair "$name" --fault "$spec" $extra
    delivered "$name" || continue
    checks=("s['reliability']['retx_pkts'] == r['fault']['arrived_retx']"
            "r['reliability']['nacks_tx'] == s['fault']['arrived_nack']"
            "s['reliability']['retx_pkts'] >= s['reliability']['retx_reqs'] >= 0")
    [ "$lossy" = 1 ] && checks+=("s['reliability']['retx_pkts'] > 0" "r['reliability']['retx_rx'] > 0"
                                 "r['fault']['dropped'] + r['fault']['corrupted'] > 0")
    [ -n "$extra" ] && checks+=("r['drops']['udp_bad_checksum'] + r['drops']['ip_bad_checksum'] > 0")
    tm_check_pair "${name}_send" "${name}_recv" "${checks[@]}" &&
        tm_log "ok: $name ($spec): $N messages of $SIZES B completed once each and verified;" \
            "$(python3 -c "import json;s=json.load(open('$TM_WORK/${name}_send.json'));r=json.load(open('$TM_WORK/${name}_recv.json'));print(f\"retransmitted {s['reliability']['retx_pkts']} packets ({s['reliability']['probes']} probes), NACKs {r['reliability']['nacks_tx']}, drops at the receiver {r['drops_total']}\")")"
done

# stopped NAME SECONDS VDEV: a pair (the receiver on VDEV) whose receiver
# gets no CPU for SECONDS (SIGSTOP, then SIGCONT) from 1 s into the transfer.
stopped() {
    local name=$1 secs=$2 vdev=$3 rpid spid dpid
    tm_start "${name}_recv" 130 ns "$NB" -- "$vdev" -l 1 -- --mode recv --src-ip $IP_B "${COMMON[@]}"
    rpid=$TM_PID
    tm_start "${name}_send" 130 ns "$NA" -- $VDEV_A -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "${COMMON[@]}"
    spid=$TM_PID
    sleep 1
    dpid=$(pgrep -P "$rpid") # the daemon, under tm_start's `timeout`
    kill -STOP "$dpid"
    sleep "$secs"
    kill -CONT "$dpid"
    wait "$spid"
    SEND_RC=$?
    wait "$rpid"
    RECV_RC=$?
}

# A receiver that gets no CPU for 4 s (SIGSTOP, then SIGCONT), as a daemon
# whose CPU an application takes may: its peer's timers expire meanwhile,
# and yet no flow fails (the default --retry-limit gives a peer the session's
# --peer-timeout-ms, 5 s, before its flows do; with the old limit of 8 the
# flows failed after 2-3 s) and every message arrives once, exact.
if [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" paused "* ]]; then
    stopped paused 4 "$VDEV_B"
    delivered paused &&
        tm_check paused_send "d['reliability']['rto_expired'] > 0" &&
        tm_log "ok: the receiver stopped for 4 s mid-transfer: $N messages completed once each and verified;" \
            "$(python3 -c "import json;s=json.load(open('$TM_WORK/paused_send.json'));print(f\"{s['reliability']['rto_expired']} timeouts meanwhile, {s['reliability']['probes']} probes\")")"
fi

# The receiver's socket ring overruns: its af_packet ring holds 64 frames
# (framecnt=64), and it gets no CPU for 300 ms while its peer has up to 16
# messages in flight: the kernel drops what does not fit. Those drops are
# the port's (net_af_packet does not count them; drivers/port_stats.h reads
# the socket's PACKET_STATISTICS): the receiver's port.missed is above zero,
# and every frame the sender's port sent is one the receiver's port took
# or missed, exact (nothing else is on the veth; the receiver leaves on its
# peer's CLOSE, the sender's last frame). Every message completes once.
if [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" overrun "* ]]; then
    stopped overrun 0.3 "${VDEV_B%%,framecnt=*},framecnt=64"
    delivered overrun &&
        tm_check_pair overrun_send overrun_recv "r['port']['missed'] > 0" \
            "s['port']['tx'] == r['port']['rx'] + r['port']['missed']" &&
        tm_log "ok: the receiver's 64-frame ring overran while it was stopped for 300 ms: $N messages completed once" \
            "each and verified; $(python3 -c "import json;s=json.load(open('$TM_WORK/overrun_send.json'));r=json.load(open('$TM_WORK/overrun_recv.json'));print(f\"port: sent {s['port']['tx']}, received {r['port']['rx']}, missed {r['port']['missed']}; retransmitted {s['reliability']['retx_pkts']}\")")"
fi

# The kernel drops 2% both ways, independently of tailmark: sender and
# receiver are joined through a bridge in a third namespace, and netdev
# ingress chains on the bridge's two ports drop at random. (Not on the
# endpoints' own veths: an af_packet socket sees a packet before any ingress
# hook, and a drop in an egress hook is retried by af_packet's tx ring.)
# Before the drop, counters of what arrives: RETX data packets (flags byte &
# 0x0e == 0x08, UDP payload offset 1, i.e. transport header bit 72) and
# NACKs (& 0x04); the drop rule's own counter of RETX packets dropped.
nft_rules() {
    local dev=$1
    cat <<NFT
table netdev tm_loss_$dev {
    chain lossy {
        @th,72,8 & 0x0e == 0x08 counter drop
        counter drop
    }
    chain ingress {
        type filter hook ingress device $dev priority 0; policy accept;
        udp dport 47474 @th,72,8 & 0x0e == 0x08 counter
        udp dport 47474 @th,72,8 & 0x04 == 0x04 counter
        udp dport 47474 numgen random mod 100 < 2 jump lossy
    }
}
NFT
}
nft_counter() { # DEV CHAIN INDEX: packets of the INDEX-th counter in CHAIN
    ip netns exec "$NM" nft -j list chain netdev "tm_loss_$1" "$2" | python3 -c "
import json, sys
rules = [e['rule'] for e in json.load(sys.stdin)['nftables'] if 'rule' in e]
cs = [x['counter']['packets'] for r in rules for x in r['expr'] if 'counter' in x]
print(cs[$3])"
}
if [ -n "${TM_ONLY:-}" ] && [[ " $TM_ONLY " != *" nft "* ]]; then
    :
elif NA=tm_rlc_$$ NM=tm_rlm_$$ NB=tm_rld_$$ && tm_bridged "$NA" "$NM" "$NB" &&
    ip netns exec "$NM" nft -f - < <(nft_rules mA) && ip netns exec "$NM" nft -f - < <(nft_rules mB); then
    pair nft
    if delivered nft; then
        retx_in=$(nft_counter mA ingress 0)
        retx_dropped=$(nft_counter mA lossy 0)
        nack_in=$(nft_counter mB ingress 1)
        dropped_a=$(( $(nft_counter mA lossy 0) + $(nft_counter mA lossy 1) ))
        dropped_b=$(( $(nft_counter mB lossy 0) + $(nft_counter mB lossy 1) ))
        tm_check_pair nft_send nft_recv \
            "s['reliability']['retx_pkts'] > 0" \
            "s['reliability']['retx_pkts'] == $retx_in" \
            "r['reliability']['retx_rx'] == $retx_in - $retx_dropped" \
            "r['reliability']['nacks_tx'] == $nack_in" \
            "$dropped_a > 0 and $dropped_b > 0" &&
            tm_log "ok: nftables 2% loss both ways (the kernel dropped $dropped_a packets to the receiver," \
                "$dropped_b to the sender): $N messages completed once each and verified; $retx_in RETX" \
                "packets reached the bridge, $retx_dropped of them dropped there"
    fi
else
    tm_fail "nftables: cannot set up the bridged namespaces or load the netdev ingress rules"
fi

tm_finish
