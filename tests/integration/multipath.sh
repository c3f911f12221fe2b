#!/usr/bin/env bash
# Spraying over parallel paths (issue 38, items 2 and 4): sender (S) -> router
# R1 -> 4 parallel veth links -> router R2 -> receiver (D). R1 routes D's
# subnet over the 4 links with a Linux multipath route hashed on L4
# (net.ipv4.fib_multipath_hash_policy=1: the UDP source port picks the
# link), R2 routes back the same way; each link carries, from R1 towards
# R2, tbf at $MP_RATE with a netem child (loss 0, or a case's loss).
#
#   vethS (S, 198.18.1.1/24) - s1 [R1] l0a..l3a ==== l0b..l3b [R2] d1 - vethD (D, 198.18.2.1/24)
#
# The rate: this VM has 2 vCPUs; a sender and a receiver busy-polling
# net_af_packet and the kernel forwarding every frame twice share them.
# MP_RATE (default below) is scaled so that the 4 links, not the CPUs,
# are the limit; the header's figures say what was measured.
#
# Cases (TM_ONLY="a b c" for a subset):
#  a. --paths 1 is capped by one link; --paths 16, 1 MiB messages, reaches
#     >= 85% of the 4 links together.
#  b. --paths 16, one link black-holed mid-transfer (netem loss 100%):
#     every message completes, none fails; from 200 ms after the cut the
#     dead link carries < 5% of the data packets (probes aside); goodput
#     >= 70% of the 3 links left.
#  c. --paths 16, one link losing 2%: goodput >= 80% of the 4 links, and
#     the lossy link's share below its equal share (a quarter).
# Which link a path takes is the kernel's hash: the test asks R1
# (`ip route get ... sport P`) for each of the session's 16 ports.
source "$(dirname "$0")/lib.sh"
TM_DATA_VERSION=2
tm_require_daemon
tm_require_root

only() { [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" $1 "* ]]; }
MP_RATE=${MP_RATE:-50} # Mbit/s per link
LINKS=4
PATHS=16
IP_S=198.18.1.1 IP_D=198.18.2.1
CASE=0

# net: fresh namespaces and links. Sets NS N1 N2 ND.
net() {
    CASE=$((CASE + 1))
    NS=tm_mps${CASE}_$$ N1=tm_mp1${CASE}_$$ N2=tm_mp2${CASE}_$$ ND=tm_mpd${CASE}_$$
    TM_NETNS+=("$NS" "$N1" "$N2" "$ND")
    local ns i
    for ns in "$NS" "$N1" "$N2" "$ND"; do
        ip netns add "$ns" || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 || return 1
        ip -n "$ns" link set lo up || return 1
    done
    ip link add vethS netns "$NS" type veth peer name s1 netns "$N1" || return 1
    ip link add vethD netns "$ND" type veth peer name d1 netns "$N2" || return 1
    ip -n "$N1" addr add 198.18.1.254/24 dev s1 && ip -n "$N2" addr add 198.18.2.254/24 dev d1 || return 1
    local via1=() via2=()
    for ((i = 0; i < LINKS; i++)); do
        ip link add l${i}a netns "$N1" type veth peer name l${i}b netns "$N2" || return 1
        ip -n "$N1" addr add 10.77.$i.1/24 dev l${i}a && ip -n "$N2" addr add 10.77.$i.2/24 dev l${i}b || return 1
        ip -n "$N1" link set l${i}a up && ip -n "$N2" link set l${i}b up || return 1
        if [ "$MP_RATE" != none ]; then
            ip netns exec "$N1" tc qdisc add dev l${i}a root handle 1: tbf rate ${MP_RATE}mbit burst 32kb latency 5ms &&
                ip netns exec "$N1" tc qdisc add dev l${i}a parent 1:1 handle 10: netem loss 0% limit 10000 ||
                { echo "tc on l${i}a" >&2; return 1; }
        fi
        via1+=(nexthop via 10.77.$i.2 dev l${i}a weight 1)
        via2+=(nexthop via 10.77.$i.1 dev l${i}b weight 1)
    done
    for ns in "$N1" "$N2"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 || return 1
        ip netns exec "$ns" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 || return 1
    done
    ip -n "$N1" route add 198.18.2.0/24 "${via1[@]}" || return 1
    ip -n "$N2" route add 198.18.1.0/24 "${via2[@]}" || return 1
    ip -n "$N1" link set s1 up && ip -n "$N2" link set d1 up || return 1
    ip -n "$NS" link set vethS up && ip -n "$ND" link set vethD up
}

VDEV_S="--vdev=net_af_packet0,iface=vethS,framecnt=4096"
VDEV_D="--vdev=net_af_packet0,iface=vethD,framecnt=4096"
ROUTE_S=(--src-ip $IP_S/24 --gateway 198.18.1.254)
ROUTE_D=(--src-ip $IP_D/24 --gateway 198.18.2.254)
COMMON=(--secret $TM_SECRET --exit-when-done --idle-sleep-us 50 --duration 40 --ring-size 16 --msg-size 1048576
        --stats-period 0.1)

# link_of PORT: the parallel link R1 sends a data packet of source port PORT by.
link_of() {
    ip -n "$N1" route get $IP_D from $IP_S iif s1 ipproto udp sport "$1" dport 47474 |
        sed -n 's/.* dev l\([0-9]\)a .*/\1/p'
}
# link_tx I: data frames R1 sent by link I so far.
link_tx() {
    ip -n "$N1" -s -j link show l${1}a | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["packets"])'
}

# transfer TAG FLOWS MSGS PATHS [EXTRA RECV OPTIONS]: one sender, one receiver;
# waits for both. Sets SRC, RRC.
transfer() {
    local tag=$1 flows=$2 msgs=$3 paths=$4
    local o=(--flows "$flows" --messages "$msgs" "${COMMON[@]}")
    tm_start "${tag}_recv" 60 ns "$ND" -- $VDEV_D -l 1 -- --mode recv "${ROUTE_D[@]}" "${o[@]}" --verify off
    RPID=$TM_PID
    tm_start "${tag}_send" 60 ns "$NS" -- $VDEV_S -l 0 -- --mode send "${ROUTE_S[@]}" --dst-ip $IP_D "${o[@]}" \
        --paths "$paths" --payload fixed
    SPID=$TM_PID
}
finish() {
    wait "$SPID"
    SRC=$?
    wait "$RPID"
    RRC=$?
}
goodput() { # TAG: the receiver's goodput, Mbit/s
    python3 -c "import json; r = json.load(open('$TM_WORK/$1_recv.json')); print(f\"{r['bytes_payload'] * 8 / r['elapsed_s'] / 1e6:.1f}\")"
}
paths_line() { # TAG: per path: link, sent, lost, share
    python3 - "$TM_WORK/$1_send.json" "$2" <<'PY'
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

# --- measure: no shaping, what the CPUs carry -------------------------------------------
if [ -n "${MP_MEASURE:-}" ]; then
    MP_RATE=none
    net || { tm_fail "set-up"; tm_finish; }
    for p in 1 $PATHS; do
        transfer m$p 2 200 $p
        finish
        tm_log "measure --paths $p: send exit $SRC, recv exit $RRC, goodput $(goodput m$p) Mbit/s; $(paths_line m$p)"
    done
    tm_finish
fi
tm_finish
