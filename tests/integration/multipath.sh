#!/usr/bin/env bash
# Spraying over parallel paths (issue 38, items 2 and 4): sender (S) -> router
# R1 -> 4 parallel veth links -> router R2 -> receiver (D). R1 routes D's
# subnet over the 4 links with a Linux multipath route hashed on L4
# (net.ipv4.fib_multipath_hash_policy=1: the UDP source port picks the
# link), R2 routes back the same way; each link carries, from R1 towards
# R2, tbf at $MP_RATE. Loss is an nftables rule in R1's forward hook on
# a link (this kernel has no netem): a black hole drops all, a lossy link
# 2% (numgen random).
#
#   vethS (S, 198.18.1.1/24) - s1 [R1] l0a..l3a ==== l0b..l3b [R2] d1 - vethD (D, 198.18.2.1/24)
#
# The rate: 200 Mbit/s per link, as the issue asks. Without tbf the same
# topology carried 1787 Mbit/s (--paths 1) and 1728 (--paths 16), 2 flows of
# 1 MiB, 2026-12-04 on 539db44 (MP_MEASURE=1): the CPUs are not the limit
# at 4 x 200, so the rates were not scaled down.
#
# Cases (TM_ONLY="a b c" for a subset; ~45 s together):
#  a. --paths 1 (one flow, one port) is capped by one link (<= 1.1 x 200);
#     --paths 16, 1 MiB messages, carries >= 1.5x --paths 1 of the same run.
#  b. --paths 16, link 0 black-holed ~1 s into the transfer (~1/6): every
#     message completes and none fails; from 200 ms after the cut, link 0
#     carries < 5% of the data frames (it carries probes only).
#  c. --paths 16, link 0 losing 2%: every message completes, and link 0
#     carries less than its equal share (a quarter) of the frames.
# The issue's goodput bounds (a: >= 85% of 800 Mbit/s; b: >= 70% of the 600
# left; c: >= 80% of 800) are speed goals: each is printed, `MP_STRICT=1`
# fails them, and scripts/bench.sh --paths reports them. Measured 2026-12-05
# (3 interleaved runs), with a rate per path (tx_paths.h): a 683-708 Mbit/s
# (85-89%), b 557-573 (93-96%), c 648-653 (81-82%); with one rate for the
# session, shared out by weights (before): a 501-516, b 395-422, c 444-449.
# Which link a port takes is the kernel's hash, with a fixed seed
# (fib_multipath_hash_seed, Linux 6.11 on): the 16 ports fall 3/3/4/6 on
# the 4 links here; each case prints them (`ip route get ... sport P`).
source "$(dirname "$0")/lib.sh"
TM_DATA_VERSION=2
tm_require_daemon
tm_require_root

only() { [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" $1 "* ]]; }
MP_RATE=${MP_RATE:-200} # Mbit/s per link
LINKS=4
PATHS=${MP_PATHS:-16}
IP_S=198.18.1.1 IP_D=198.18.2.1
CASE=0

# net: fresh namespaces and links. Sets NS N1 N2 ND.
net() {
    CASE=$((CASE + 1))
    NS=tm_mps${CASE}_$$ N1=tm_mp1${CASE}_$$ N2=tm_mp2${CASE}_$$ ND=tm_mpd${CASE}_$$
    local ns i
    tm_netns "$NS" "$N1" "$N2" "$ND" || return 1
    ip link add vethS netns "$NS" type veth peer name s1 netns "$N1" || return 1
    ip link add vethD netns "$ND" type veth peer name d1 netns "$N2" || return 1
    ip -n "$N1" addr add 198.18.1.254/24 dev s1 && ip -n "$N2" addr add 198.18.2.254/24 dev d1 || return 1
    local via1=() via2=()
    for ((i = 0; i < LINKS; i++)); do
        ip link add l${i}a netns "$N1" type veth peer name l${i}b netns "$N2" || return 1
        ip -n "$N1" addr add 10.77.$i.1/24 dev l${i}a && ip -n "$N2" addr add 10.77.$i.2/24 dev l${i}b || return 1
        ip -n "$N1" link set l${i}a up && ip -n "$N2" link set l${i}b up || return 1
        if [ "$MP_RATE" != none ]; then
            ip netns exec "$N1" tc qdisc add dev l${i}a root tbf rate ${MP_RATE}mbit burst 32kb latency 5ms ||
                { echo "tbf on l${i}a" >&2; return 1; }
        fi
        via1+=(nexthop via 10.77.$i.2 dev l${i}a weight 1)
        via2+=(nexthop via 10.77.$i.1 dev l${i}b weight 1)
    done
    for ns in "$N1" "$N2"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 || return 1
        ip netns exec "$ns" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 || return 1
        # A fixed hash seed (Linux 6.11 on; per namespace, random otherwise):
        # which link each port takes is then the same every run.
        ip netns exec "$ns" sysctl -qw net.ipv4.fib_multipath_hash_seed=${MP_SEED:-1} 2>/dev/null || true
    done
    ip -n "$N1" route add 198.18.2.0/24 "${via1[@]}" || return 1
    ip -n "$N2" route add 198.18.1.0/24 "${via2[@]}" || return 1
    ip -n "$N1" link set s1 up && ip -n "$N2" link set d1 up || return 1
    ip netns exec "$N1" nft -f - <<NFT || return 1
table ip tm_mp {
    chain tmfw {
        type filter hook forward priority 0; policy accept;
    }
}
NFT
    ip -n "$NS" link set vethS up && ip -n "$ND" link set vethD up
}

VDEV_S="--vdev=net_af_packet0,iface=vethS,framecnt=4096"
VDEV_D="--vdev=net_af_packet0,iface=vethD,framecnt=4096"
ROUTE_S=(--src-ip $IP_S/24 --gateway 198.18.1.254)
ROUTE_D=(--src-ip $IP_D/24 --gateway 198.18.2.254)
COMMON=(--secret $TM_SECRET --exit-when-done --idle-sleep-us 50 --duration 40 --ring-size 16 --msg-size 1048576
        --stats-period 0.1)

# lose LINK PERCENT: R1 drops PERCENT of what it forwards by LINK (100: a black hole).
lose() {
    local r=(oifname "l$1a" udp dport 47474)
    [ "$2" -lt 100 ] && r+=(numgen random mod 100 "<" "$2")
    ip netns exec "$N1" nft add rule ip tm_mp tmfw "${r[@]}" counter drop
}
# link_of PORT: the parallel link R1 sends a data packet of source port PORT by.
link_of() {
    ip -n "$N1" route get $IP_D from $IP_S iif s1 ipproto udp sport "$1" dport 47474 |
        sed -n 's/.* dev l\([0-9]\)a .*/\1/p'
}

# transfer TAG FLOWS MSGS PATHS [EXTRA RECV OPTIONS]: one sender, one receiver;
# waits for both. Sets SRC, RRC.
transfer() {
    local tag=$1 flows=$2 msgs=$3 paths=$4
    local o=(--flows "$flows" --messages "$msgs" "${COMMON[@]}")
    tm_start "${tag}_recv" 60 ns "$ND" -- $VDEV_D -l 1 -- --mode recv "${ROUTE_D[@]}" "${o[@]}" --verify off
    RPID=$TM_PID
    tm_start "${tag}_send" 60 ns "$NS" -- $VDEV_S -l 0 -- --mode send "${ROUTE_S[@]}" --dst-ip $IP_D "${o[@]}" \
        --paths "$paths" --payload fixed ${MP_SEND_EXTRA:-}
    SPID=$TM_PID
}
paths_line() { # TAG: per path: link, sent, lost, share
    python3 - "$TM_WORK/$1_send.json" "${2:-}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
links = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] else []
out = []
for p in d.get("paths", []):
    l = links[p["path"]] if p["path"] < len(links) else "?"
    out.append(f"{p['path']}@l{l}:{p['sent']}/{p['lost']}/{p['share']:.2f}{'D' if p['dead'] else ''}")
print(" ".join(out))
PY
}
links_of_paths() { # the link of each of the session's ports, comma-separated
    python3 - "$TM_WORK/$1_send.json" <<'PY' | while read -r port; do printf '%s,' "$(link_of "$port")"; done
import json, sys
for p in json.load(open(sys.argv[1])).get("paths", []):
    print(p["port"])
PY
}

# link_drops: per link, the packets R1's loss rule on it dropped (0: no
# rule), from one listing of the chain.
link_drops() {
    ip netns exec "$N1" nft -j list chain ip tm_mp tmfw | python3 -c "
import json, sys
n = [0] * $LINKS
for e in json.load(sys.stdin)['nftables']:
    r = e.get('rule')
    for i in range($LINKS):
        if r and any('match' in x and x['match'].get('right') == f'l{i}a' for x in r['expr']):
            n[i] += sum(x['counter']['packets'] for x in r['expr'] if 'counter' in x)
print(' '.join(map(str, n)))"
}
# link_txs: per link, the data frames R1 sent by it so far: one read of
# R1's sysfs for all of them (`ip netns exec` mounts the namespace's own), so
# the counts are of one instant even while a transfer runs.
link_txs() {
    ip netns exec "$N1" sh -c 'for i in $(seq 0 $(('"$LINKS"' - 1))); do cat /sys/class/net/l${i}a/statistics/tx_packets; done' |
        tr '\n' ' '
}
# carried: per link, the data frames R1 sent by it plus those its rule dropped.
carried() {
    local tx=($(link_txs)) dr=($(link_drops)) i
    for ((i = 0; i < LINKS; i++)); do printf '%s ' $((tx[i] + dr[i])); done
}
# port_links TAG: the link of each of the session's ports, "l0:5 l1:3 ..." (paths per link).
port_links() {
    local tag=$1 l
    declare -A per
    for port in $(python3 -c "import json; [print(p['port']) for p in json.load(open('$TM_WORK/${tag}_send.json'))['paths']]"); do
        l=$(link_of "$port")
        per[$l]=$((${per[$l]:-0} + 1))
    done
    for ((l = 0; l < LINKS; l++)); do printf 'l%s:%s ' $l "${per[$l]:-0}"; done
}
# sender_ok TAG N: every message acknowledged, none failed.
sender_ok() {
    TM_RC=$SRC
    tm_expect_rc "$1_send" 0 &&
        tm_check "$1_send" "d['messages_acked'] == d['messages_sent'] == $2" "d['flows_failed'] == 0" \
            "d['messages_failed'] == 0"
}
recv_ok() {
    TM_RC=$RRC
    tm_expect_rc "$1_recv" 0 && tm_check "$1_recv" "d['messages_completed'] == $2" "d['exit_reason'] == 'done'"
}
CAP=$((LINKS * MP_RATE)) # Mbit/s, the 4 links together

# trace_start TAG / trace_mark WHAT / trace_stop: with MP_TRACE=DIR (scripts/bench.sh
# --paths), R1's link counters every 50 ms while TAG runs, in DIR/TAG.trace:
# "T ns" lines, each followed by `ip -s -j link show`; "M ns WHAT" marks.
# MP_TRACE_ONLY="TAG ..." traces those runs only: the sampler forks `ip` 20
# times a second, and on 2 vCPUs it cost cases a and c 25-45 Mbit/s (2
# interleaved rounds, 2026-12-05: a 675-680 traced against 706-707, c
# 613-621 against 645-657).
# TRACE_FILE is set while a run is traced, and empty otherwise.
trace_start() {
    TRACE_FILE=
    [ -n "${MP_TRACE:-}" ] || return 0
    [ -z "${MP_TRACE_ONLY:-}" ] || [[ " $MP_TRACE_ONLY " == *" $1 "* ]] || return 0
    mkdir -p "$MP_TRACE"
    TRACE_FILE=$MP_TRACE/$1.trace
    touch "$TRACE_FILE.on"
    (while [ -e "$TRACE_FILE.on" ]; do
        echo "T $(date +%s%N)"
        ip -n "$N1" -s -j link show
        sleep 0.05
    done >"$TRACE_FILE") &
    TRACE_PID=$!
}
trace_mark() { [ -n "${TRACE_FILE:-}" ] && echo "M $(date +%s%N) $1" >>"$TRACE_FILE.marks"; return 0; }
trace_stop() {
    [ -n "${TRACE_FILE:-}" ] || return 0
    rm -f "$TRACE_FILE.on"
    wait "$TRACE_PID" 2>/dev/null
}

# --- a. one path against 16 ---------------------------------------------------------------
if only a && [ -z "${MP_MEASURE:-}" ]; then
    net || { tm_fail "a: set-up"; tm_finish; }
    # --paths 1: one flow, one port, one link: ~3 s at $MP_RATE.
    n1=$((MP_RATE * 3 / 8))
    trace_start a1
    transfer a1 1 $n1 1
    tm_wait_pair
    trace_stop
    gp1=$(tm_goodput a1_recv)
    tm_log "a: --paths 1: $n1 x 1 MiB, goodput $gp1 Mbit/s (one link: $MP_RATE); links $(carried)"
    recv_ok a1 $n1 && sender_ok a1 $n1
    python3 -c "import sys; sys.exit(0 if $gp1 <= 1.1 * $MP_RATE else 1)" ||
        tm_fail "a: --paths 1 carried $gp1 Mbit/s, more than one link ($MP_RATE)"
    # --paths 16: ~2 s at the 4 links' rate (~4 s at what it reaches now).
    n16=$((CAP * 2 / 8))
    before=($(carried))
    trace_start a16
    transfer a16 1 $n16 $PATHS
    tm_wait_pair
    trace_stop
    gp16=$(tm_goodput a16_recv)
    after=($(carried))
    tm_log "a: --paths $PATHS: $n16 x 1 MiB, goodput $gp16 Mbit/s of $CAP; ports per link $(port_links a16);" \
        "frames per link $(for i in 0 1 2 3; do printf '%s ' $((after[i] - before[i])); done)"
    tm_log "a: paths (path@link:sent/lost/share): $(paths_line a16 "$(links_of_paths a16)")"
    recv_ok a16 $n16 && sender_ok a16 $n16
    # Against --paths 1 of the same run, not a rate: a build beside it on
    # these 2 vCPUs took both to about 60% (102.8 and 238.0 Mbit/s).
    python3 -c "import sys; sys.exit(0 if $gp16 >= 1.5 * $gp1 else 1)" ||
        tm_fail "a: --paths $PATHS: goodput $gp16 Mbit/s, not 1.5x --paths 1's $gp1"
    tm_speed_goal MP_STRICT "$gp16 >= 0.85 * $CAP / $TM_SAN_SLOW" \
        "a: --paths $PATHS goodput $gp16 >= 85% of $CAP Mbit/s"
fi

# --- b. a link black-holed mid-transfer -----------------------------------------------------
if only b && [ -z "${MP_MEASURE:-}" ]; then
    net || { tm_fail "b: set-up"; tm_finish; }
    nb=$((CAP * 6 / 8)) # ~6 s at the 4 links' rate
    base=($(link_txs))
    trace_start b
    transfer b 1 $nb $PATHS
    # The cut ~1 s after the data began to flow (~1/6 of the messages), on
    # link 0. On time, not on a frame count: a count read while the transfer
    # loads both vCPUs came so late once that the transfer had ended.
    frames() { local a=($(link_txs)) t=0 i; for ((i = 0; i < LINKS; i++)); do t=$((t + a[i] - base[i])); done; echo $t; }
    flowing() { [ "$(frames)" -ge 721 ]; } # a message's worth
    tm_await b "$SPID" 30 flowing "the transfer never got going"
    sleep 1
    want=$(frames)
    lose 0 100
    trace_mark "link 0 cut"
    sleep 0.2 # the bound's grace: what the dead link carries from here on counts
    at200=($(carried))
    tm_wait_pair
    trace_stop
    end=($(carried))
    dead=$((end[0] - at200[0]))
    rest=0
    for ((i = 1; i < LINKS; i++)); do rest=$((rest + end[i] - at200[i])); done
    gp=$(tm_goodput b_recv)
    tm_log "b: link 0 black from frame $want on; from 200 ms after: link 0 $dead frames" \
        "(dropped), the 3 others $rest; goodput $gp Mbit/s over the run (3 links: $((CAP * 3 / 4)))"
    tm_log "b: paths (path@link:sent/lost/share): $(paths_line b "$(links_of_paths b)")"
    recv_ok b $nb && sender_ok b $nb
    # A window with almost nothing in it says nothing about the dead link:
    # fail, and say so, rather than read a share out of it.
    if [ $((dead + rest)) -lt $((10 * 721)) ]; then
        tm_fail "b: only $((dead + rest)) frames went by from 200 ms after the cut: the transfer had (nearly) ended, nothing to judge"
    elif ! python3 -c "import sys; sys.exit(0 if $dead < 0.05 * ($dead + $rest) else 1)"; then
        tm_fail "b: the dead link carried $dead of $((dead + rest)) frames from 200 ms after the cut (>= 5%)"
    fi
    tm_speed_goal MP_STRICT "$gp >= 0.70 * $CAP * 3 / 4 / $TM_SAN_SLOW" \
        "b: goodput $gp >= 70% of the 3 links' $((CAP * 3 / 4)) Mbit/s"
fi

# --- c. one link losing 2% ------------------------------------------------------------------
if only c && [ -z "${MP_MEASURE:-}" ]; then
    net || { tm_fail "c: set-up"; tm_finish; }
    lose 0 2
    nc=$((CAP * 2 / 8))
    base=($(carried))
    trace_start c
    transfer c 1 $nc $PATHS
    tm_wait_pair
    trace_stop
    end=($(carried))
    tot=0
    for ((i = 0; i < LINKS; i++)); do tot=$((tot + end[i] - base[i])); done
    l0=$((end[0] - base[0]))
    gp=$(tm_goodput c_recv)
    dr=($(link_drops))
    tm_log "c: link 0 loses 2% (${dr[0]} dropped): it carried $l0 of $tot frames; goodput $gp Mbit/s of $CAP"
    tm_log "c: paths (path@link:sent/lost/share): $(paths_line c "$(links_of_paths c)")"
    recv_ok c $nc && sender_ok c $nc
    python3 -c "import sys; sys.exit(0 if $l0 < $tot / $LINKS else 1)" ||
        tm_fail "c: the lossy link carried $l0 of $tot frames, not below its equal share"
    tm_speed_goal MP_STRICT "$gp >= 0.80 * $CAP / $TM_SAN_SLOW" "c: goodput $gp >= 80% of $CAP Mbit/s"
fi

# --- measure: no shaping, what the CPUs carry -------------------------------------------
if [ -n "${MP_MEASURE:-}" ]; then
    MP_RATE=none
    net || { tm_fail "set-up"; tm_finish; }
    for p in 1 $PATHS; do
        transfer m$p 2 200 $p
        tm_wait_pair
        tm_log "measure --paths $p: send exit $SRC, recv exit $RRC, goodput $(tm_goodput m${p}_recv) Mbit/s;" \
            "$(paths_line m$p)"
    done
    tm_finish
fi
tm_finish
