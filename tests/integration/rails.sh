#!/usr/bin/env bash
# Rails (issue 38, item 3): one tailmarkd drives several ports, each with an
# IPv4 address of its own (--rails PORT:IP beside --tx-port/--src-ip); the
# handshake trades the rails' addresses, and a session stripes its data over
# the rails both ends have (max(--paths, rails) paths, path p on rail
# p % rails), control on the primary. Two namespaces, no router: rail i is a
# veth pair ra$i (S) - rb$i (D), no kernel address on it (af_packet), with
# tbf at 500 Mbit/s on the S end, ra0 and ra1, as the issue asks.
#
#   S  port 0 ra0 (10.79.0.1) =tbf 500=> rb0 port 0 (10.79.0.2)  D
#      port 1 ra1 (10.79.1.1) =tbf 500=> rb1 port 1 (10.79.1.2)
#
# The ports run with net_af_packet's qdisc_bypass=0: its default sends past
# the qdisc, and "500 Mbit/s" carried 881. Through the qdisc, the tbf holds
# af_packet back (its socket's send buffer fills); it drops nothing.
#
# MTU 1500. Without tbf, one rail (one pair of daemons, one lcore each)
# carried 3.02-3.04 Gbit/s and two rails 1.91-2.34 at MTU 1500; 4.10-5.31
# and 3.46-5.49 at MTU 9000 (250 x 1 MiB, RAILS_MEASURE=1 RAILS_RATE=none,
# 2-3 runs with no build beside; AMD EPYC, 2 vCPUs, 2026-12-05): 2 x 500
# is within the CPUs' reach at 1500, the MTU every other test runs (and 6x
# the packets per rail of 9000). Through the tbf, 9000 did no better: one
# rail 441-452 Mbit/s, two 818-879 (1.84-1.92x; 4 runs), against 1500's
# below.
#
# Cases (TM_ONLY="a b c d" for a subset; ~30 s together):
#  a. one rail (no --rails) against two (--rails on both ends), 250 x 1 MiB
#     each: every message completes in both, none fails; in the two-rail run
#     ra0 and ra1 each carry >= 30% of the frames, the summary's paths[]
#     name their rail (p % 2) and each rail's paths sent what its veth
#     carried, less the session's few control frames; two rails' goodput > 1.3x one rail's of the same run.
#  b. two rails, 400 x 1 MiB; D's end of rail 1 (rb1) goes down once ~1/4
#     of the frames went: every message completes, none fails; from the cut
#     nothing crosses rail 1 (ra1 and rb1's counters), and the sender puts
#     < 5% of its frames on rail 1 (what its rail-1 paths sent beyond what
#     ra1 carried: the kernel drops them uncounted), the probes among them.
#  d. the same with rail 0, the first (the handshake's), cut at D's end
#     (rb0): every message completes, none fails; rail 0 takes < 5% of the
#     data frames from the cut; D's ACKs come back by rail 1, and the
#     sender's CLOSE too (the receiver's session ends peer_closed).
#  c. rails on one end only, --paths 2: the receiver two and the sender one,
#     then the other way round: both paths on rail 0, ra1 carries nothing,
#     every message completes.
# The issue's goal, two rails >= 1.8x one, is a speed goal: printed, failed
# with RAILS_STRICT=1 only. Measured 2026-12-05 (AMD EPYC, 2 vCPUs), 11 runs
# with no build beside: a one rail 435-457 Mbit/s, two 841-949 (1.84-2.10x);
# b 494-528 over the run (one rail's rate after the cut), 156-413 frames
# sent into rail 1 from the cut, of ~213,000 (0.2%); c 422-471. Loaded,
# both fell, two rails the more: beside a build (cc1plus on both CPUs), 4
# runs, one rail 303-307, two 450-505 (1.47-1.65x); beside two busy loops,
# 2 runs, 224-298 and 525-526 (1.76-2.35x). The bound, 1.3x, leaves room.
#
# RAILS_MEASURE=1: the figures above, no assertions (RAILS_RATE=none: no
# tbf; RAILS_MTU; RAILS_MEASURE_RAILS="1 2"; RAILS_MEASURE_MSGS).
source "$(dirname "$0")/lib.sh"
TM_DATA_VERSION=2
tm_require_daemon
tm_require_root

only() { [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" $1 "* ]]; }
RATE=${RAILS_RATE:-500} # Mbit/s per rail (tbf on ra0, ra1); "none": no tbf
MTU=${RAILS_MTU:-1500}
IP_S=10.79.0.1 IP_D=10.79.0.2   # the primaries (rail 0)
RIP_S=10.79.1.1 RIP_D=10.79.1.2 # rail 1
PKTS=$(tm_pkts 1048576 "$MTU")  # data frames per 1 MiB message
CASE=0

# net: fresh namespaces S and D joined by two veth pairs, rail i = ra$i (S)
# - rb$i (D), no kernel addresses, tbf at $RATE on ra$i. Sets NS ND.
net() {
    CASE=$((CASE + 1))
    NS=tm_rls${CASE}_$$ ND=tm_rld${CASE}_$$
    local i
    tm_netns "$NS" "$ND" || return 1
    for i in 0 1; do
        ip link add ra$i netns "$NS" type veth peer name rb$i netns "$ND" || return 1
        ip -n "$NS" link set dev ra$i mtu "$MTU" && ip -n "$ND" link set dev rb$i mtu "$MTU" || return 1
        if [ "$RATE" != none ]; then
            ip netns exec "$NS" tc qdisc add dev ra$i root tbf rate ${RATE}mbit burst 64kb latency 5ms ||
                { echo "tbf on ra$i" >&2; return 1; }
        fi
        ip -n "$NS" link set dev ra$i up && ip -n "$ND" link set dev rb$i up || return 1
    done
}

# vdevs SIDE RAILS: the EAL vdevs of one end (SIDE a: S's ra*, b: D's rb*),
# port i on rail i. qdisc_bypass=0: net_af_packet's default (1) sends past
# the qdisc, and the tbf would shape nothing (881 Mbit/s through "500").
vdevs() {
    local i out=() f=,framecnt=4096
    [ "$MTU" -gt 1500 ] && f=,framesz=9216,blocksz=73728,framecnt=1024
    for ((i = 0; i < $2; i++)); do out+=("--vdev=net_af_packet$i,iface=r$1$i,qdisc_bypass=0$f"); done
    echo "${out[@]}"
}
COMMON=(--secret $TM_SECRET --exit-when-done --idle-sleep-us 50 --duration 40 --ring-size 16 --msg-size 1048576
        --stats-period 0.1 --mtu "$MTU")

# transfer TAG MSGS SEND_RAILS RECV_RAILS [SEND OPTIONS]: one flow, one
# sender in S and one receiver in D, each with that many ports (rails);
# --rails with 2; $RAILS_SEND_EXTRA: more sender options (experiments).
# Sets SPID, RPID.
transfer() {
    local tag=$1 msgs=$2 sr=$3 rr=$4
    shift 4
    local o=(--flows 1 --messages "$msgs" "${COMMON[@]}") srails=() rrails=()
    [ "$sr" -gt 1 ] && srails=(--rails 1:$RIP_S)
    [ "$rr" -gt 1 ] && rrails=(--rails 1:$RIP_D)
    tm_start "${tag}_recv" 60 ns "$ND" -- $(vdevs b "$rr") -l 1 -- --mode recv --src-ip $IP_D/24 "${rrails[@]}" \
        "${o[@]}" --verify off
    RPID=$TM_PID
    tm_start "${tag}_send" 60 ns "$NS" -- $(vdevs a "$sr") -l 0 -- --mode send --src-ip $IP_S/24 "${srails[@]}" \
        --dst-ip $IP_D "${o[@]}" --payload fixed "$@" ${RAILS_SEND_EXTRA:-}
    SPID=$TM_PID
}
# link_stat NS DEV FIELD: a veth's counter (/sys/class/net/DEV/statistics/FIELD).
link_stat() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
# rails_tx: "ra0 ra1", the frames S's two rails sent so far (one cheap read:
# case b polls it).
rails_tx() { echo $(ip netns exec "$NS" cat /sys/class/net/ra{0,1}/statistics/tx_packets); }
# rail_sent TAG RAIL: data packets the sender's summary says its paths on RAIL sent.
rail_sent() {
    python3 -c "import json; d = json.load(open('$TM_WORK/$1_send.json'))
print(sum(p['sent'] for p in d['paths'] if p['rail'] == $2))"
}
paths_line() { # TAG: per path: path@rail:sent/lost/share, D when dead
    python3 - "$TM_WORK/$1_send.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(f"{p['path']}@r{p.get('rail', '?')}:{p['sent']}/{p['lost']}/{p['share']:.2f}{'D' if p['dead'] else ''}"
               for p in d.get("paths", [])) or "(none)")
PY
}
sender_ok() { # TAG N: every message acknowledged, none failed
    TM_RC=$SRC
    tm_expect_rc "$1_send" 0 &&
        tm_check "$1_send" "d['messages_acked'] == d['messages_sent'] == $2" "d['flows_failed'] == 0" \
            "d['messages_failed'] == 0"
}
recv_ok() { # TAG N: every message completed, none given up
    TM_RC=$RRC
    tm_expect_rc "$1_recv" 0 &&
        tm_check "$1_recv" "d['messages_completed'] == $2" "d['exit_reason'] == 'done'" \
            "all(f['gave_up'] == 0 for f in d['per_flow'])"
}
holds() { python3 -c "import sys; sys.exit(0 if $1 else 1)"; }

# --- a. one rail against two ------------------------------------------------------------------
if only a && [ -z "${RAILS_MEASURE:-}" ]; then
    net || { tm_fail "a: set-up"; tm_finish; }
    na=${RAILS_MSGS_A:-250} # one rail: ~4.5 s at 460 Mbit/s; two: ~2.3 s at 920
    transfer a1 $na 1 1
    tm_wait_pair
    gp1=$(tm_goodput a1_recv)
    tm_log "a: one rail: $na x 1 MiB, goodput $gp1 Mbit/s (one rail: $RATE)"
    recv_ok a1 $na && sender_ok a1 $na
    b=($(rails_tx))
    transfer a2 $na 2 2
    tm_wait_pair
    e=($(rails_tx))
    d0=$((e[0] - b[0])) d1=$((e[1] - b[1]))
    gp2=$(tm_goodput a2_recv)
    tm_log "a: two rails: $na x 1 MiB, goodput $gp2 Mbit/s, $(python3 -c "print(f'{$gp2 / $gp1:.2f}')")x" \
        "one rail's; frames ra0 $d0, ra1 $d1"
    tm_log "a: paths (path@rail:sent/lost/share): $(paths_line a2)"
    recv_ok a2 $na && sender_ok a2 $na
    # Each rail carries its half, give or take (paths 0 and 1, one per rail,
    # each with its own rate): at least 30% of the frames each.
    holds "$d0 >= 0.3 * ($d0 + $d1) and $d1 >= 0.3 * ($d0 + $d1)" ||
        tm_fail "a: two rails: ra0 carried $d0 frames, ra1 $d1: not 30% each"
    # The summary names each path's rail, path p on rail p % 2, and says
    # what the veths saw: each rail's frames are its paths' (retransmissions
    # and probes included) and a few of the session's own: a keep-alive by
    # every rail each second and a CLOSE by every rail; ra0 also the
    # handshake. (A sender's rail 1 sends no ACK: its peer sends it no data.)
    tm_check a2_send "len(d['paths']) >= 2" "all(p['rail'] == p['path'] % 2 for p in d['paths'])" \
        "0 <= $d1 - sum(p['sent'] for p in d['paths'] if p['rail'] == 1) <= 16" \
        "0 <= $d0 - sum(p['sent'] for p in d['paths'] if p['rail'] == 0) <= 64"
    # Against one rail of the same run, not a rate: a build beside it on
    # these 2 vCPUs took one rail to ~300 Mbit/s and two to 1.47-1.65x that
    # (see the header). A sanitizer build's daemons are CPU-bound below one
    # rail's 500 already (lib.sh, TM_SAN_SLOW: one pair over af_packet,
    # 209-255 Mbit/s), and a second rail on the same lcore adds no CPU:
    # there the bound is printed only.
    if [ "$TM_SAN_SLOW" -eq 1 ]; then
        holds "$gp2 > 1.3 * $gp1" || tm_fail "a: two rails: goodput $gp2 Mbit/s, not 1.3x one rail's $gp1"
    else
        tm_log "a: sanitizer build (${TAILMARK_SANITIZE:-}): two rails > 1.3x one not checked"
    fi
    tm_speed_goal RAILS_STRICT "$gp2 >= 1.8 * $gp1" "a: two rails' goodput $gp2 >= 1.8x one rail's $gp1 Mbit/s"
fi

# --- b. rail 1 cut mid-transfer -----------------------------------------------------------------
if only b && [ -z "${RAILS_MEASURE:-}" ]; then
    net || { tm_fail "b: set-up"; tm_finish; }
    nb=${RAILS_MSGS_B:-400}
    b=($(rails_tx))
    transfer b $nb 2 2
    want=$((nb * PKTS / 4))
    went() { local t=($(rails_tx)); [ $((t[0] - b[0] + t[1] - b[1])) -ge "$want" ]; }
    tm_await b_send "$SPID" 30 went "the transfer never got going"
    # The cut: D's end of rail 1 goes down. S's ra1 loses its carrier and the
    # kernel drops what S's port 1 still sends, past the veth's counters: from
    # the cut, ra1 counts nothing and rb1 receives nothing; what the sender
    # put on rail 1 from then on is what its summary says rail 1's paths sent
    # less what ra1 carried. (S's own end down works as well, the kernel
    # refusing af_packet's sends there: 141-431 frames into rail 1 from the
    # cut, 3 runs.)
    ip -n "$ND" link set dev rb1 down || tm_fail "b: rb1 down"
    c=($(rails_tx))
    cut_rb1=$(link_stat "$ND" rb1 rx_packets)
    tm_wait_pair
    e=($(rails_tx))
    end_rb1=$(link_stat "$ND" rb1 rx_packets)
    gp=$(tm_goodput b_recv)
    after1=$(($(rail_sent b 1) - (e[1] - b[1]))) after0=$((e[0] - c[0]))
    tm_log "b: rail 1 cut at frame $((c[0] + c[1] - b[0] - b[1])) of $((nb * PKTS)) (want $want); from the cut:" \
        "rail 1 $after1 frames sent (dropped), rail 0 $after0; goodput $gp Mbit/s over the run"
    tm_log "b: veths from the cut: ra1 tx $((e[1] - c[1])), rb1 rx $((end_rb1 - cut_rb1))"
    tm_log "b: paths (path@rail:sent/lost/share): $(paths_line b)"
    recv_ok b $nb && sender_ok b $nb
    # A cut after the transfer's end would pass the bounds below with nothing cut.
    [ $((c[0] + c[1] - b[0] - b[1])) -lt $((nb * PKTS / 2)) ] ||
        tm_fail "b: the cut came at frame $((c[0] + c[1] - b[0] - b[1])), past half the transfer"
    [ "$end_rb1" -eq "$cut_rb1" ] && [ "${e[1]}" -eq "${c[1]}" ] ||
        tm_fail "b: the cut let frames through: ra1 sent $((e[1] - c[1])), rb1 received $((end_rb1 - cut_rb1))"
    holds "$after1 < 0.05 * ($after1 + $after0)" ||
        tm_fail "b: the cut rail took $after1 of $((after1 + after0)) frames from the cut on (>= 5%)"
fi

# --- d. the first rail cut mid-transfer -------------------------------------------------------
# The rail the session's handshake and keep-alives ride: its data paths die
# as rail 1's do in b, the receiver's ACKs follow the data onto rail 1 (an
# ACK goes back by the rail of its flow's newest packet), and data arriving
# keeps the session alive while its keep-alives are lost.
if only d && [ -z "${RAILS_MEASURE:-}" ]; then
    net || { tm_fail "d: set-up"; tm_finish; }
    nd=${RAILS_MSGS_D:-300}
    b=($(rails_tx))
    transfer d $nd 2 2
    want=$((nd * PKTS / 4))
    went() { local t=($(rails_tx)); [ $((t[0] - b[0] + t[1] - b[1])) -ge "$want" ]; }
    tm_await d_send "$SPID" 30 went "the transfer never got going"
    ip -n "$ND" link set dev rb0 down || tm_fail "d: rb0 down"
    c=($(rails_tx))
    cut_rb0=$(link_stat "$ND" rb0 rx_packets) cut_acks=$(link_stat "$ND" rb1 tx_packets)
    tm_wait_pair
    e=($(rails_tx))
    end_rb0=$(link_stat "$ND" rb0 rx_packets) end_acks=$(link_stat "$ND" rb1 tx_packets)
    after0=$(($(rail_sent d 0) - (e[0] - b[0]))) after1=$((e[1] - c[1]))
    tm_log "d: rail 0 cut at frame $((c[0] + c[1] - b[0] - b[1])) of $((nd * PKTS)) (want $want); from the cut:" \
        "rail 0 $after0 data frames sent (dropped), rail 1 $after1; D sent $((end_acks - cut_acks)) frames (ACKs)" \
        "by rail 1; the sender's goodput $(tm_goodput d_send) Mbit/s over the run"
    tm_log "d: paths (path@rail:sent/lost/share): $(paths_line d)"
    recv_ok d $nd && sender_ok d $nd
    [ $((c[0] + c[1] - b[0] - b[1])) -lt $((nd * PKTS / 2)) ] ||
        tm_fail "d: the cut came at frame $((c[0] + c[1] - b[0] - b[1])), past half the transfer"
    [ "$end_rb0" -eq "$cut_rb0" ] || tm_fail "d: the cut let $((end_rb0 - cut_rb0)) frames through rb0"
    holds "$after0 < 0.05 * ($after0 + $after1)" ||
        tm_fail "d: the cut rail took $after0 of $((after0 + after1)) data frames from the cut on (>= 5%)"
    # The ACKs of the three quarters sent after the cut came back by rail 1.
    [ $((end_acks - cut_acks)) -gt 0 ] || tm_fail "d: D sent nothing by rail 1 from the cut: no ACK followed the data"
    # The sender's CLOSE reached the receiver by rail 1 (not its timeout).
    tm_check d_recv "[s['end'] for s in d['sessions']] == ['peer_closed']"
fi

# --- c. rails on one end only -------------------------------------------------------------------
if only c && [ -z "${RAILS_MEASURE:-}" ]; then
    net || { tm_fail "c: set-up"; tm_finish; }
    nc=${RAILS_MSGS_C:-60}
    # c1: the receiver has two rails, the sender one; c2: the other way round.
    for v in "c1 1 2" "c2 2 1"; do
        set -- $v
        b=($(rails_tx))
        transfer $1 $nc $2 $3 --paths 2 # two paths, both on rail 0
        tm_wait_pair
        e=($(rails_tx))
        tm_log "c: sender $2 rail(s), receiver $3: goodput $(tm_goodput ${1}_recv) Mbit/s;" \
            "frames ra0 $((e[0] - b[0]))," \
            "ra1 $((e[1] - b[1])); paths $(paths_line $1)"
        recv_ok $1 $nc && sender_ok $1 $nc
        [ "${e[1]}" -eq "${b[1]}" ] || tm_fail "c: sender $2 rail(s), receiver $3: ra1 carried $((e[1] - b[1])) frames"
        tm_check ${1}_send "len(d['paths']) == 2" "all(p['rail'] == 0 for p in d['paths'])"
    done
fi

# --- measure: what one pair carries ----------------------------------------------------------
if [ -n "${RAILS_MEASURE:-}" ]; then
    net || { tm_fail "set-up"; tm_finish; }
    for r in ${RAILS_MEASURE_RAILS:-1 2}; do
        b=($(rails_tx))
        transfer m$r ${RAILS_MEASURE_MSGS:-400} $r $r
        tm_wait_pair
        e=($(rails_tx))
        tm_log "measure MTU $MTU rate $RATE, $r rail(s): send exit $SRC, recv exit $RRC," \
            "goodput $(tm_goodput m${r}_recv)" \
            "Mbit/s; frames ra0 $((e[0] - b[0])) ra1 $((e[1] - b[1])); $(paths_line m$r)"
    done
fi
tm_finish
