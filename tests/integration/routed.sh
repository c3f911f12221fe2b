#!/usr/bin/env bash
# Routed peers (issue 38, item 1): the two ends on two subnets with a Linux
# router between them, as on a routed fabric. vethA (A, 198.18.1.1/24) -
# rA [router R: 198.18.1.254 and 198.18.2.254, ip_forward] rB - vethB (B,
# 198.18.2.1/24). Each end is given `--src-ip IP/24 --gateway` its side of
# the router: a peer off its subnet is reached through the gateway, whose
# MAC its own ARP resolves; the acceptor answers the MAC the CONNECT came
# from (the router's).
#  1. send/recv, 4 flows x 200 x 64 KiB: every message exact (the
#     afpacket_two_process checks), and the router forwarded at least every
#     data packet the sender sent (rB's tx count);
#  2. service mode: 4 MiB through tailmark-cat, byte for byte;
#  3. without --gateway the sender ARPs for the peer itself, which no one on
#     its link answers: its session ends arp_failed, exit 1, nothing sent,
#     and its error says a peer on another subnet needs --gateway;
#  4. the options: --gateway without /LEN, or off the subnet: exit 2, named.
source "$(dirname "$0")/lib.sh"
TM_DATA_VERSION=2
tm_require_daemon
tm_require_root

NA=tm_rta_$$ NR=tm_rtr_$$ NB=tm_rtb_$$
setup() {
    tm_netns "$NA" "$NR" "$NB" || return 1
    ip link add vethA netns "$NA" type veth peer name rA netns "$NR" || return 1
    ip link add vethB netns "$NB" type veth peer name rB netns "$NR" || return 1
    ip -n "$NR" addr add 198.18.1.254/24 dev rA && ip -n "$NR" addr add 198.18.2.254/24 dev rB || return 1
    ip -n "$NR" link set rA up && ip -n "$NR" link set rB up || return 1
    ip netns exec "$NR" sysctl -qw net.ipv4.ip_forward=1 || return 1
    ip -n "$NA" link set vethA up && ip -n "$NB" link set vethB up
}
setup || { tm_fail "namespace/router set-up"; tm_finish; }
VDEV_A="--vdev=net_af_packet0,iface=vethA,framecnt=4096"
VDEV_B="--vdev=net_af_packet0,iface=vethB,framecnt=4096"
IP_A=198.18.1.1 IP_B=198.18.2.1
ROUTE_A=(--src-ip $IP_A/24 --gateway 198.18.1.254)
ROUTE_B=(--src-ip $IP_B/24 --gateway 198.18.2.254)
MTU=1500
rb_tx() { ip -n "$NR" -s -j link show rB | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["packets"])'; }

# --- 1. send/recv through the router ------------------------------------------------------
FLOWS=4 MSGS=200 SIZE=65536
common=(--flows $FLOWS --messages $MSGS --msg-size $SIZE --ring-size 16 --secret $TM_SECRET --exit-when-done
        --duration 30 --stats-period 0)
tx0=$(rb_tx)
tm_start rt_recv 45 ns "$NB" -- $VDEV_B -l 1 -- --mode recv "${ROUTE_B[@]}" "${common[@]}"
rpid=$TM_PID
tm_run rt_send 45 ns "$NA" -- $VDEV_A -l 0 -- --mode send "${ROUTE_A[@]}" --dst-ip $IP_B "${common[@]}"
SRC=$TM_RC
wait $rpid
TM_RC=$?
forwarded=$(($(rb_tx) - tx0))
req=$((FLOWS * MSGS))
pkts=$(tm_pkts $SIZE $MTU)
tm_expect_rc rt_recv 0 && tm_transfer_checks rt_recv $FLOWS $MSGS $SIZE $MTU message &&
    tm_check rt_recv "d['session']['established'] == 1" "d['exit_reason'] == 'done'"
TM_RC=$SRC
tm_expect_rc rt_send 0 &&
    tm_check rt_send "d['messages_acked'] == $req" "d['flows_failed'] == 0" \
        "d['session']['arp_tx'] >= 1" "d['session']['established'] == 1" \
        "$forwarded >= d['packets_tx'] - d['reliability']['retx_pkts'] - d['control_tx'] == $req * $pkts" &&
    tm_log "ok: $req x $SIZE B through the router; it forwarded $forwarded frames towards B"

# --- 2. service mode, tailmark-cat ----------------------------------------------------------
cat_bin=${TAILMARK_CAT:-$TM_SRC/build/app/tailmark-cat/tailmark-cat}
svc=(--mode service --secret $TM_SECRET --stats-period 0)
tm_start svc_a 60 ns "$NA" -- $VDEV_A -l 0 -- "${svc[@]}" "${ROUTE_A[@]}" --control-socket "$TM_WORK/a.sock"
PA=$TM_PID
tm_start svc_b 60 ns "$NB" -- $VDEV_B -l 1 -- "${svc[@]}" "${ROUTE_B[@]}" --control-socket "$TM_WORK/b.sock"
PB=$TM_PID
up() { [ -S "$TM_WORK/a.sock" ] && [ -S "$TM_WORK/b.sock" ]; }
tm_await svc_a "$PA" 30 up "the service daemons never listened on their sockets"
head -c 4194304 /dev/urandom >"$TM_WORK/in"
ip netns exec "$NB" env TAILMARK_SOCKET="$TM_WORK/b.sock" timeout 30 "$cat_bin" --listen 7000 --quiet \
    >"$TM_WORK/out" 2>"$TM_WORK/listen.err" &
lpid=$!
ip netns exec "$NA" env TAILMARK_SOCKET="$TM_WORK/a.sock" timeout 30 "$cat_bin" --connect $IP_B:7000 --quiet \
    --timeout 10000 <"$TM_WORK/in" 2>"$TM_WORK/send.err"
src=$?
wait $lpid
lrc=$?
if [ $src -eq 0 ] && [ $lrc -eq 0 ] && cmp -s "$TM_WORK/in" "$TM_WORK/out"; then
    tm_log "ok: 4 MiB through tailmark-cat between two service daemons, byte for byte"
else
    tm_fail "tailmark-cat: send exit $src, listen exit $lrc, $(stat -c %s "$TM_WORK/out") of 4194304 bytes"
    sed 's/^/  send: /' "$TM_WORK/send.err" >&2
    sed 's/^/  listen: /' "$TM_WORK/listen.err" >&2
fi
kill -INT "$PA" "$PB"
wait "$PA" "$PB"

# --- 3. no gateway: the peer is not on the link ----------------------------------------------
tm_start ng_recv 30 ns "$NB" -- $VDEV_B -l 1 -- --mode recv "${ROUTE_B[@]}" "${common[@]}" --duration 8
rpid=$TM_PID
tm_run ng_send 30 ns "$NA" -- $VDEV_A -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "${common[@]}" --duration 8
kill -INT $rpid 2>/dev/null
wait $rpid
tm_expect_rc ng_send 1 &&
    tm_check ng_send "d['exit_reason'] == 'arp_failed'" "d['messages_sent'] == 0" \
        "d['session']['established'] == 0" "d['session']['arp_tx'] >= 10" &&
    if grep -q "198.18.2.1:47474 did not answer ARP (check the link; a peer on another subnet needs --src-ip IP/LEN and --gateway" \
        "$TM_WORK/ng_send.err"; then
        tm_log "ok: without --gateway, ARP asked for the peer itself (10 tries), the session ends arp_failed, nothing sent"
    else
        tm_fail "ng_send: no line naming --gateway: $(grep ARP "$TM_WORK/ng_send.err")"
    fi

# --- 4. the options ----------------------------------------------------------------------------
opt_case() {
    local name=$1 want=$2
    shift 2
    tm_run "$name" 20 -- --vdev=net_null0 -l 0 -- --mode send --secret $TM_SECRET "$@"
    if [ "$TM_RC" -eq 2 ] && grep -q -- "$want" "$TM_WORK/$name.err"; then
        tm_log "ok: $* -> exit 2, '$want'"
    else
        tm_fail "$name: $* -> exit $TM_RC, want 2 and '$want': $(tail -n 2 "$TM_WORK/$name.err")"
    fi
}
opt_case opt_nolen "give --src-ip as IP/LEN" --src-ip $IP_A --gateway 198.18.1.254
opt_case opt_offnet "is not another address of --src-ip's subnet 198.18.1.0/24" --src-ip $IP_A/24 --gateway 198.18.2.254
tm_finish
