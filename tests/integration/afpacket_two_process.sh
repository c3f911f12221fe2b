#!/usr/bin/env bash
# Two processes over net_af_packet: a sender (--mode send) and a receiver
# (--mode recv), each with its own --file-prefix, in two network namespaces
# joined by a veth pair that this test creates and removes. Data flows
# sender -> receiver; the receiver returns ACKs (released_upto per flow for
# the credits, see lib/tailmark/control.h) so the sender never overruns the receiver's
# completion window. The sender sends nothing before the first ACK, so the
# start order does not matter and nothing sleeps.
#
# Per case, exact: the receiver completed and verified flows x messages, with
# completion_writes == messages (message mode) or == data packets (packet
# mode) and no drop but redundant retransmitted copies (the timer may fire
# when a receiver is descheduled for longer than --rto-us; the link loses
# nothing, so the copies the sender counts are the ones the receiver counts); the sender sent exactly that and saw all of it
# acknowledged; both exit 0. Last, a key mismatch on one flow (per-flow keys
# from an INI file): that flow's LAST packets are all dropped as bad_key,
# nothing of it completes, the other flow does, and both sides exit 1.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root

tm_af_pair af
MTU=1500

# pair NAME FLOWS MESSAGES MSG_SIZE RING MODE DURATION [extra options for both]
# Receiver on lcore 1, sender on lcore 0: one lcore each, every role on it.
pair() {
    local name=$1 flows=$2 msgs=$3 size=$4 ring=$5 mode=$6 dur=$7
    shift 7
    local common=(--flows "$flows" --messages "$msgs" --msg-size "$size" --ring-size "$ring"
                  --mtu $MTU --completion "$mode" --exit-when-done --duration "$dur" --stats-period 0 "$@")
    tm_start "${name}_recv" $((dur + 15)) ns "$NB" -- $VDEV_B -l 1 -- --mode recv \
        --src-mac "$MAC_B" --dst-mac "$MAC_A" --src-ip $IP_B --dst-ip $IP_A "${common[@]}"
    local rpid=$TM_PID
    tm_run "${name}_send" $((dur + 15)) ns "$NA" -- $VDEV_A -l 0 -- --mode send \
        --src-mac "$MAC_A" --dst-mac "$MAC_B" --src-ip $IP_A --dst-ip $IP_B "${common[@]}"
    SEND_RC=$TM_RC
    wait "$rpid"
    RECV_RC=$?
}

# name flows messages msg_size ring completion
cases=(
    "af64msg  4 5000 64      64 message"
    "af4kmsg  4 2000 4096    64 message"
    "af4kpkt  3 2000 4096    64 packet"
    "af1mmsg  2 8    1048576 2  message"
    "af1mpkt  2 8    1048576 2  packet"
)
for c in "${cases[@]}"; do
    read -r name flows msgs size ring mode <<<"$c"
    pair "$name" "$flows" "$msgs" "$size" "$ring" "$mode" 40
    req=$((flows * msgs))
    pkts=$(tm_pkts "$size" $MTU)
    TM_RC=$RECV_RC
    tm_expect_rc "${name}_recv" 0 &&
        tm_transfer_checks "${name}_recv" "$flows" "$msgs" "$size" $MTU "$mode" &&
        tm_check "${name}_recv" \
            "d['mode'] == 'recv'" \
            "d['drops_total'] == d['reliability']['retx_rx']" \
            "d['reliability']['nacks_tx'] == 0" \
            "d['acks_tx'] > 0" \
            "d['exit_reason'] == 'done'"
    r1=$?
    TM_RC=$SEND_RC
    tm_expect_rc "${name}_send" 0 &&
        tm_check "${name}_send" \
            "d['mode'] == 'send'" \
            "d['messages_sent'] == $req" \
            "d['messages_acked'] == $req" \
            "d['packets_tx'] == $req * $pkts + d['reliability']['retx_pkts']" \
            "d['tx_dropped'] == 0" \
            "d['acks_rx'] > 0" \
            "d['drops_total'] == 0" \
            "d['ok'] is True"
    r2=$?
    # No loss on the veth: a retransmission happens only when the receiver
    # was descheduled past the timeout; each such copy is redundant there.
    tm_check_pair "${name}_send" "${name}_recv" "s['reliability']['retx_pkts'] == r['reliability']['retx_rx']"
    r3=$?
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ] &&
        tm_log "ok: $name ($flows flows x $msgs x $size B, $pkts pkt/msg, $mode mode, two processes)"
done

# Per-flow keys from INI files: flow 1's key differs between the two sides.
cat >"$TM_WORK/keys_send.ini" <<'INI'
[tailmark]
key = 0x11111111
[flow.1]
key = 0x22222222
INI
cat >"$TM_WORK/keys_recv.ini" <<'INI'
[tailmark]
key = 0x11111111
[flow.1]
key = 0x33333333
INI
# 10 single-packet messages per flow fit the window: each is sent once.
tm_start keys_recv 20 ns "$NB" -- $VDEV_B -l 1 -- --config "$TM_WORK/keys_recv.ini" --mode recv \
    --src-mac "$MAC_B" --dst-mac "$MAC_A" --src-ip $IP_B --dst-ip $IP_A \
    --flows 2 --messages 10 --msg-size 64 --exit-when-done --duration 3 --stats-period 0
rpid=$TM_PID
tm_run keys_send 20 ns "$NA" -- $VDEV_A -l 0 -- --config "$TM_WORK/keys_send.ini" --mode send \
    --src-mac "$MAC_A" --dst-mac "$MAC_B" --src-ip $IP_A --dst-ip $IP_B \
    --flows 2 --messages 10 --msg-size 64 --exit-when-done --duration 3 --stats-period 0
SEND_RC=$TM_RC
wait "$rpid"
TM_RC=$?
# Flow 1's messages never complete: the sender's timer probes their LAST
# packets (RETX) until --retry-limit, then reports the flow failed with its
# 10 messages; every probe is one more bad_key at the receiver.
if tm_expect_rc keys_recv 1; then
    tm_check keys_recv \
        "d['messages_completed'] == 10" \
        "d['messages_verified'] == 10" \
        "d['completion_writes'] == 10" \
        "d['reliability']['retx_rx'] > 0" \
        "d['drops']['bad_key'] == 10 + d['reliability']['retx_rx']" \
        "d['verify_errors'] == 0" && tm_log "ok: per-flow key mismatch: flow 1 refused (bad_key), flow 0 complete"
fi
TM_RC=$SEND_RC
tm_expect_rc keys_send 1 && tm_check keys_send "d['messages_sent'] == 20" "d['messages_acked'] == 10" \
    "d['flows_failed'] == 1" "d['messages_failed'] == 10" \
    "d['per_flow'][1]['state'] == 'retry_limit'" "d['per_flow'][0]['state'] == 'ok'" \
    "d['reliability']['retx_pkts'] == d['reliability']['probes']" \
    "d['reliability']['rto_expired'] == 9" &&
    tm_log "ok: the sender gave flow 1 up after 8 retries (9 timeouts) and reported its 10 messages failed"

tm_finish
