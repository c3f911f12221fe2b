#!/usr/bin/env bash
# The fault shim (drivers/fault_shim.*, --fault) on net_ring loopback: tailmark
# survives every fault and never completes a message falsely (recovery by
# retransmission between two processes is tests/integration/reliability.sh):
#   dup=1      every duplicate recognised (duplicate or already_completed),
#              each message completed exactly once, all verified;
#   reorder    packets held back behind later ones: every message completes,
#              verified, nothing dropped;
#   drop=1     nothing arrives: no completion, every packet the shim saw is
#              counted dropped; the retransmission timer probes
#              --retry-limit times, then both flows are reported failed
#              with all their messages, exit 1 (never a hang);
#   corrupt=1  one bit flipped past Ethernet in every data packet, the UDP
#              checksum on (the default): the IP or UDP checksum drops every
#              one of them (drops == corrupted, by those two reasons alone),
#              so nothing completes; NACKs and the timer are off, so the run
#              ends at --duration with every message undelivered (exit 1);
#   corrupt_crc  --udp-checksum off, data version 2 (the default), two processes over net_af_packet through
#              a bridge whose nftables chain overwrites 4 payload bytes of
#              every 8th first-transmission LAST packet: nothing but the
#              message CRC can see that. The CRC discards exactly those
#              messages (crc_mismatch == the rule's counter == messages / 8),
#              each is NACKed whole and retransmitted, and every message
#              completes once, verified, exit 0 at both ends;
#   corrupt_tag  the same with --data-auth on: each such packet's tag fails
#              (data_bad_tag == the rule's counter), nothing of it is placed,
#              the CRC sees nothing wrong, and the LAST comes again.
#              Both need root (namespaces): without it the suite exits 77
#              after the rest.
# A fixed seed replays the same decisions: two corrupt runs agree exactly
# (without NACKs and timer, whose timing would change what is sent). The
# shim leaves the session's own packets (the handshake with itself, CLOSE)
# alone: `passed` counts them, and they are the only ones that arrive in the
# drop=1 case.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

F=2 M=200 S=4096
PKTS=$(tm_pkts $S 1500)
run() {
    local name=$1 fault=$2 dur=$3
    shift 3
    tm_run "$name" 40 -- --vdev=net_ring0 -l 0,1 -- --flows $F --messages $M --msg-size $S --ring-size 16 \
        --exit-when-done --duration "$dur" --stats-period 0 --fault "$fault" \
        --keepalive-ms 60000 --peer-timeout-ms 120000 "$@" # no probe in the control counts, however slow
}

run dup "dup=1,seed=5" 30
tm_expect_rc dup 0 && tm_transfer_checks dup $F $M $S 1500 message &&
    tm_check dup \
        "d['fault']['duplicated'] > 0" \
        "d['fault']['seen'] + d['fault']['passed'] == d['packets_tx']" \
        "d['fault']['passed'] == d['control_tx'] == d['control_rx'] == 6" \
        "d['packets_rx'] == d['packets_tx'] + d['fault']['duplicated']" \
        "d['drops']['duplicate'] + d['drops']['already_completed'] == d['fault']['duplicated']" \
        "d['drops_total'] == d['fault']['duplicated']" &&
    tm_log "ok: dup=1: $F x $M messages completed once each, every duplicate recognised"

run reorder "reorder=0.5,seed=7" 30
tm_expect_rc reorder 0 && tm_transfer_checks reorder $F $M $S 1500 message &&
    tm_check reorder \
        "d['fault']['reordered'] > 0" \
        "d['packets_rx'] == d['packets_tx'] == $F * $M * $PKTS + d['reliability']['retx_pkts'] + d['control_tx']" \
        "d['drops_total'] == d['reliability']['retx_rx']" \
        "d['packets_streamed'] == 0" &&
    tm_log "ok: reorder=0.5: every message completed and verified, in any arrival order"

# The same, and duplicates, with the payload placed by streaming stores
# (--stream-min): packets out of offset order take the copy without the CRC,
# and the CRC is read back from the region at completion.
run reorder_stream "reorder=0.5,dup=0.2,seed=9" 30 --stream-min 4K
tm_expect_rc reorder_stream 0 && tm_transfer_checks reorder_stream $F $M $S 1500 message &&
    tm_check reorder_stream \
        "d['fault']['reordered'] > 0" \
        "d['fault']['duplicated'] > 0" \
        "d['packets_streamed'] == d['packets_placed'] == $F * $M * $PKTS" \
        "d['drops_total'] == d['fault']['duplicated'] + d['reliability']['retx_rx']" &&
    tm_log "ok: reorder=0.5,dup=0.2 with --stream-min 4K: every packet streamed, every message completed once and verified"

run drop "drop=1" 30 --rto-us 1000 --retry-limit 3
tm_expect_rc drop 1 && tm_check drop \
    "d['messages_completed'] == 0" \
    "d['completion_writes'] == 0" \
    "d['packets_rx'] == d['fault']['passed'] == d['control_rx']" \
    "d['fault']['dropped'] == d['fault']['seen'] == d['packets_tx'] - d['control_tx']" \
    "d['packets_tx'] == d['messages_sent'] * $PKTS + d['reliability']['retx_pkts'] + d['control_tx']" \
    "d['reliability']['retx_pkts'] == d['reliability']['probes'] > 0" \
    "d['reliability']['rto_expired'] == $F * 4" \
    "d['flows_failed'] == $F" \
    "d['messages_failed'] == $F * $M" \
    "all(f['state'] == 'retry_limit' for f in d['per_flow'])" \
    "d['exit_reason'] == 'done'" &&
    tm_log "ok: drop=1: nothing completed, every packet counted dropped; after 3 retries both flows failed, $F x $M messages reported, exit 1"

corrupt_ok=1
for n in corrupt_a corrupt_b; do
    run $n "corrupt=1,seed=11" 3 --nack-delay-us 0 --rto-us 10000000 --rto-max-us 10000000
    tm_expect_rc $n 1 || corrupt_ok=0
    tm_check $n \
        "d['messages_completed'] == d['completion_writes'] == d['messages_verified'] == 0" \
        "d['verify_errors'] == 0" \
        "d['fault']['corrupted'] == d['fault']['seen'] == d['packets_rx'] - d['fault']['passed'] > 0" \
        "d['drops']['ip_bad_checksum'] + d['drops']['udp_bad_checksum'] == d['fault']['corrupted']" \
        "d['drops_total'] == d['fault']['corrupted']" \
        "d['packets_tx'] == d['messages_sent'] * $PKTS + d['control_tx']" \
        "d['reliability']['retx_pkts'] == 0" \
        "d['exit_reason'] != 'done'" || corrupt_ok=0
done
if ! out=$(python3 - "$TM_WORK/corrupt_a.json" "$TM_WORK/corrupt_b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ["messages_completed", "completion_writes", "packets_tx", "packets_rx", "drops"]
diff = [k for k in keys if a[k] != b[k]]
print(", ".join(f"{k}: {a[k]} vs {b[k]}" for k in diff) if diff else "same")
sys.exit(1 if diff else 0)
PY
); then
    tm_fail "corrupt=1,seed=11 twice: the runs differ: $out"
elif [ $corrupt_ok -eq 1 ]; then
    tm_log "ok: corrupt=1: every corrupted packet dropped by the IP or UDP checksum, nothing completed, exit 1; the same seed replayed the same outcome"
fi

# corrupt_crc / corrupt_tag (header): the payload corrupted on the wire.
if [ "$(id -u)" -ne 0 ]; then
    tm_skip_rest "cases corrupt_crc and corrupt_tag need root (namespaces, nftables); the cases before them passed"
fi
EVERY=8
N=$((F * M))
# corrupt NAME VERSION: a fresh bridge whose nftables rule on the port facing
# the sender takes UDP to tailmark's port, flags == LAST alone (not RETX,
# ACK, NACK or SESSION: `& 0x1f`, the tailmark header's byte 1 at transport
# bit 72), every EVERY-th (numgen inc: exact, not random), and makes its
# first 4 payload bytes 0xdeadbeef: transport byte 8 + 16 at --data-version
# 1, 8 + 16 + 8 (the tag) at 2. EXTRA: more options for both daemons. Sets
# NM, MANGLED, SEND_RC, RECV_RC.
corrupt() {
    local name=$1 version=$2 at
    shift 2
    at=$(((8 + 16 + (version == 2 ? 8 : 0)) * 8))
    CORRUPT_N=$((${CORRUPT_N:-0} + 1))
    NA=tm_f${CORRUPT_N}a_$$ NM=tm_f${CORRUPT_N}m_$$ NB=tm_f${CORRUPT_N}b_$$
    if ! tm_bridged "$NA" "$NM" "$NB"; then
        tm_fail "$name: cannot set up the bridged namespaces"
        return 1
    fi
    if ! ip netns exec "$NM" nft -f - <<NFT; then
table netdev tm_crc {
    chain ingress {
        type filter hook ingress device mA priority 0; policy accept;
        udp dport 47474 @th,72,8 & 0x1f == 0x01 numgen inc mod $EVERY == 0 counter @th,$at,32 set 0xdeadbeef
    }
}
NFT
        tm_fail "$name: cannot load the nftables rule"
        return 1
    fi
    local common=(--flows $F --messages $M --msg-size $S --ring-size 16 --exit-when-done --duration 30
        --stats-period 0 --secret $TM_SECRET --udp-checksum off --data-version "$version" "$@")
    tm_start "${name}_recv" 45 ns "$NB" -- --vdev=net_af_packet0,iface=vethB,framecnt=4096 -l 1 -- --mode recv \
        --src-ip 198.18.0.2 "${common[@]}"
    local rpid=$TM_PID
    # The sender starts once the receiver's port is up: every frame must
    # arrive (sender_checks), and an ARP request sent before it was up
    # was lost (seen under --sanitize, whose daemons start slowly).
    # shellcheck disable=SC2317
    RECV_ERR=$TM_WORK/${name}_recv.err # tm_await has a `name` of its own
    recv_up() { grep -q "^tailmark.app: mode recv" "$RECV_ERR" 2>/dev/null; }
    tm_await "${name}_recv" "$rpid" 30 recv_up "the receiver never came up"
    tm_run "${name}_send" 45 ns "$NA" -- --vdev=net_af_packet0,iface=vethA,framecnt=4096 -l 0 -- --mode send \
        --src-ip 198.18.0.1 --dst-ip 198.18.0.2 "${common[@]}"
    SEND_RC=$TM_RC
    wait "$rpid"
    RECV_RC=$?
    MANGLED=$(ip netns exec "$NM" nft -j list chain netdev tm_crc ingress | python3 -c "
import json, sys
print([x['counter']['packets'] for e in json.load(sys.stdin)['nftables'] if 'rule' in e
       for x in e['rule']['expr'] if 'counter' in x][0])")
}

# Every frame accounted for. A retransmitted packet beyond those the checks
# name (a NACK asked again, a timer probe) is a duplicate, dropped as one.
dup="(d['drops']['already_completed'] + d['drops']['duplicate'] + d['drops']['outside_window'])"
# sender_checks NAME PKTS: both ends' shared checks. Uses SEND_RC.
sender_checks() {
    local name=$1 pkts=$2 ok=1
    TM_RC=$SEND_RC
    tm_expect_rc "${name}_send" 0 || ok=0
    tm_check "${name}_send" \
        "d['messages_sent'] == d['messages_acked'] == $N" \
        "d['flows_failed'] == d['messages_failed'] == 0" \
        "d['packets_tx'] == $N * $pkts + d['reliability']['retx_pkts'] + d['control_tx']" \
        "d['ok'] is True" || ok=0
    # Nothing lost on the link either way.
    [ $ok -eq 1 ] && tm_check_pair "${name}_send" "${name}_recv" \
        "s['packets_tx'] == r['packets_rx']" "r['packets_tx'] == s['packets_rx']" \
        "s['reliability']['retx_pkts'] == r['reliability']['retx_rx']" || ok=0
    [ $ok -eq 1 ]
}

PKTS2=$(tm_pkts $S 1500 2)
# corrupt_crc: the default (--data-version 2, --data-auth off): the tag
# covers the header and the trailer, not the payload, so nothing but the
# message CRC can see it.
# The CRC discards exactly those messages (crc_mismatch == the rule's
# counter == messages / 8), each is NACKed whole and retransmitted, and
# every message completes once, verified, exit 0 at both ends. A discarded
# message's packets are placed twice (the corrupted attempt and the
# retransmitted one); crc_mismatch counts messages (its LAST was placed,
# then the whole message discarded), so it is not a packet's drop.
if corrupt corrupt_crc 2; then
    ok=1
    TM_RC=$RECV_RC
    tm_expect_rc corrupt_crc_recv 0 || ok=0
    tm_check corrupt_crc_recv \
        "d['messages_requested'] == d['messages_completed'] == d['messages_verified'] == $N" \
        "d['completion_writes'] == $N" \
        "d['verify_errors'] == 0" \
        "d['bytes_payload'] == $N * $S" \
        "d['latency_ns']['samples'] == $N" \
        "all(f['gave_up'] == 0 for f in d['per_flow'])" \
        "d['sessions'][0]['data_version'] == 2" \
        "$MANGLED == $N // $EVERY" \
        "d['drops']['crc_mismatch'] == $MANGLED" \
        "d['packets_placed'] == ($N + $MANGLED) * $PKTS2" \
        "d['reliability']['retx_rx'] == $MANGLED * $PKTS2 + $dup" \
        "d['drops_total'] == d['drops']['crc_mismatch'] + $dup" \
        "d['packets_rx'] == d['packets_placed'] + d['drops_total'] - d['drops']['crc_mismatch'] + d['control_rx']" \
        "d['exit_reason'] == 'done'" "d['ok'] is True" || ok=0
    sender_checks corrupt_crc "$PKTS2" || ok=0
    [ $ok -eq 1 ] && tm_log "ok: corrupt_crc: --udp-checksum off, data version 2 without --data-auth, $MANGLED of $N messages corrupted" \
        "in their payload: the message CRC discarded each, each retransmitted; $N completed once, verified, exit 0"
fi

# corrupt_tag: the same with --data-auth on: the packet's tag covers its
# payload and no longer matches, so the receiver drops the packet itself (data_bad_tag ==
# the rule's counter), places nothing of it, and the message's CRC never
# sees a wrong byte (crc_mismatch 0); the LAST is NACKed or probed and comes
# again, and every message completes once, verified.
if corrupt corrupt_tag 2 --data-auth on; then
    ok=1
    TM_RC=$RECV_RC
    tm_expect_rc corrupt_tag_recv 0 || ok=0
    tm_check corrupt_tag_recv \
        "d['messages_requested'] == d['messages_completed'] == d['messages_verified'] == $N" \
        "d['completion_writes'] == $N" \
        "d['verify_errors'] == 0" \
        "d['bytes_payload'] == $N * $S" \
        "d['sessions'][0]['data_version'] == 2" "d['sessions'][0]['data_auth'] is True" \
        "$MANGLED == $N // $EVERY" \
        "d['drops']['data_bad_tag'] == $MANGLED" \
        "d['drops']['crc_mismatch'] == 0" \
        "d['packets_placed'] == $N * $PKTS2" \
        "d['reliability']['retx_rx'] == $MANGLED + $dup" \
        "d['drops_total'] == d['drops']['data_bad_tag'] + $dup" \
        "d['packets_rx'] == d['packets_placed'] + d['drops_total'] + d['control_rx']" \
        "d['exit_reason'] == 'done'" "d['ok'] is True" || ok=0
    sender_checks corrupt_tag "$PKTS2" || ok=0
    [ $ok -eq 1 ] && tm_log "ok: corrupt_tag: --udp-checksum off, --data-auth on, $MANGLED of $N messages' LAST" \
        "packets corrupted in their payload: each dropped by its tag (data_bad_tag), the LAST sent again;" \
        "$N completed once, verified, exit 0"
fi
tm_finish
