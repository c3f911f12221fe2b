#!/usr/bin/env bash
# Two processes over net_af_xdp (AF_XDP sockets, copy mode: veth has no
# zero copy) on a veth pair between two network namespaces this test makes
# and removes: the way tailmarkd runs beside the kernel's stack on a NIC the
# kernel keeps (docs/operating.md). tailmarkd is unchanged; only the vdev
# differs from afpacket_two_process.sh. libxdp warns that there is no bpffs
# in the namespaces and loads its program alone: harmless.
#
# Exact, per case, as afpacket_two_process.sh: the receiver completed and
# verified flows x messages, one completion write per message, every packet
# placed once, nothing dropped but redundant retransmitted copies; the
# sender sent and saw acknowledged exactly that; a retransmitted copy is
# counted alike on both sides; both exit 0.
# Then the same in --mode service: two daemons, tailmark-cat carrying 5 MB
# byte for byte, and tailmark-ctl on the sending host seeing the session
# mid-stream: established to the peer, its paced rate and its RTT.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
CAT=${TAILMARK_CAT:-$TM_SRC/build/app/tailmark-cat/tailmark-cat}
CTL=${TAILMARK_CTL:-$TM_SRC/build/app/tailmark-ctl/tailmark-ctl}

NA=tm_xa_$$
NB=tm_xb_$$
tm_veth_pair "$NA" "$NB" || { tm_fail "namespace/veth set-up"; tm_finish; }
IP_A=198.18.0.1
IP_B=198.18.0.2
MTU=1500
TM_DATA_VERSION=2 # every session here is between two processes: tagged data (tm_pkts)
VDEV_A="--vdev=net_af_xdp0,iface=vethA,start_queue=0,queue_count=1"
VDEV_B="--vdev=net_af_xdp0,iface=vethB,start_queue=0,queue_count=1"

# name flows messages msg_size ring
cases=(
    "x4k  4 2000 4096    64"
    "x1m  2 8    1048576 2"
)
for c in "${cases[@]}"; do
    read -r name flows msgs size ring <<<"$c"
    common=(--flows "$flows" --messages "$msgs" --msg-size "$size" --ring-size "$ring" --secret $TM_SECRET
            --mtu $MTU --exit-when-done --duration 40 --stats-period 0)
    tm_start "${name}_recv" 55 ns "$NB" -- $VDEV_B -l 1 -- --mode recv --src-ip $IP_B "${common[@]}"
    rpid=$TM_PID
    tm_run "${name}_send" 55 ns "$NA" -- $VDEV_A -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "${common[@]}"
    SEND_RC=$TM_RC
    wait "$rpid"
    TM_RC=$?
    req=$((flows * msgs))
    pkts=$(tm_pkts "$size" $MTU)
    tm_expect_rc "${name}_recv" 0 &&
        tm_transfer_checks "${name}_recv" "$flows" "$msgs" "$size" $MTU message &&
        tm_check "${name}_recv" \
            "d['mode'] == 'recv'" \
            "d['session']['established'] == 1 and d['session']['arp_tx'] >= 1" \
            "d['sessions'][0]['end'] == 'peer_closed'" \
            "d['exit_reason'] == 'done'" &&
        tm_redundant_drops "${name}_recv"
    r1=$?
    TM_RC=$SEND_RC
    tm_expect_rc "${name}_send" 0 &&
        tm_check "${name}_send" \
            "d['messages_sent'] == $req" \
            "d['messages_acked'] == $req" \
            "d['packets_tx'] == $req * $pkts + d['reliability']['retx_pkts'] + d['control_tx']" \
            "d['tx_dropped'] == 0" \
            "d['drops_total'] == 0" \
            "d['ok'] is True"
    r2=$?
    tm_check_pair "${name}_send" "${name}_recv" "s['reliability']['retx_pkts'] == r['reliability']['retx_rx']"
    r3=$?
    if grep -q "net_af_xdp" "$TM_WORK/${name}_send.err" "$TM_WORK/${name}_send.out" 2>/dev/null; then :; else
        tm_fail "${name}_send: no net_af_xdp port in its log"
    fi
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ] &&
        tm_log "ok: $name ($flows flows x $msgs x $size B, $pkts pkt/msg over net_af_xdp: $(python3 -c "
import json; d = json.load(open('$TM_WORK/${name}_recv.json')); print(f\"{d['elapsed_s']:.2f} s, {d['gbps']:.2f} Gbit/s\")" 2>/dev/null))"
done

# --mode service over net_af_xdp: tailmark-cat A -> B, tailmark-ctl on A.
printf '%s\n' "$TM_SECRET" >"$TM_WORK/secret"
chmod 600 "$TM_WORK/secret"
SA=$TM_WORK/a.sock
SB=$TM_WORK/b.sock
tm_start da 120 ns "$NA" -- $VDEV_A -l 0 -- --mode service --src-ip $IP_A --control-socket "$SA" \
    --secret-file "$TM_WORK/secret" --stats-period 0
PID_A=$TM_PID
tm_start db 120 ns "$NB" -- $VDEV_B -l 1 -- --mode service --src-ip $IP_B --control-socket "$SB" \
    --secret-file "$TM_WORK/secret" --stats-period 0
PID_B=$TM_PID
up_a() { grep -q "applications attach on" "$TM_WORK/da.err" 2>/dev/null; }
up_b() { grep -q "applications attach on" "$TM_WORK/db.err" 2>/dev/null; }
tm_await da "$PID_A" 30 up_a "the daemon never listened on its socket"
tm_await db "$PID_B" 30 up_b "the daemon never listened on its socket"
head -c 5000000 /dev/urandom >"$TM_WORK/in"
timeout -k 5 60 "$CAT" --socket "$SB" --listen 7000 --quiet >"$TM_WORK/out" 2>"$TM_WORK/listen.err" &
lpid=$!
tm_wait_for 20 grep -q "listens on port 7000$" "$TM_WORK/db.err" || tm_fail "no listener on port 7000"
mkfifo "$TM_WORK/feed"
timeout -k 5 60 "$CAT" --socket "$SA" --connect $IP_B:7000 --quiet <"$TM_WORK/feed" 2>"$TM_WORK/send.err" &
spid=$!
exec 3>"$TM_WORK/feed"
head -c 3145728 "$TM_WORK/in" >&3 # 3 messages of 1 MiB, the stream held open
delivered() {
    "$CTL" --socket "$SA" --json >"$TM_WORK/st.json" 2>/dev/null &&
        python3 -c "import json,sys; d=json.load(open('$TM_WORK/st.json')); sys.exit(0 if any(s['delivered'] == 3 for s in d['sessions']) else 1)"
}
if tm_wait_for 20 delivered; then
    if python3 - "$TM_WORK/st.json" "$IP_B" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
s = d["sessions"]
checks = {
    "one session": len(s) == 1,
    "connector to the peer": s[0]["role"] == "connector" and s[0]["peer"] == sys.argv[2] + ":47474" and s[0]["service"] == 7000,
    "established": s[0]["state"] == "established" and s[0]["end"] == "none",
    "sent, delivered 3": (s[0]["sent"], s[0]["delivered"], s[0]["failed"]) == (3, 3, 0),
    "an RTT": s[0]["srtt_us"] > 0 and s[0]["base_rtt_us"] > 0 and s[0]["base_rtt_us"] <= s[0]["srtt_us"] * 4,
    "a paced rate": s[0]["rate_mbps"] > 0,
    "the af_xdp port": d["ports"][0]["driver"] == "net_af_xdp" and d["ports"][0]["rx_packets"] > 0 and d["ports"][0]["tx_packets"] > 0,
    "copies (no chained mbufs on af_xdp)": d["daemon"]["zero_copy"] is False and d["service"]["copied"] == 3,
}
bad = [k for k, v in checks.items() if not v]
if bad:
    print("    does not hold: " + ", ".join(bad) + "\n    " + json.dumps(s))
    sys.exit(1)
print(f"    session {s[0]['id']}: {s[0]['rate_mbps']:.1f} Mbit/s paced, srtt {s[0]['srtt_us']:.1f} us, base {s[0]['base_rtt_us']:.1f} us")
EOF
        tm_log "ok: tailmark-ctl on the sending daemon mid-stream"
    else
        tm_fail "tailmark-ctl: the session over net_af_xdp"
    fi
else
    tm_fail "the connector never showed 3 messages delivered: $(cat "$TM_WORK/st.json" 2>/dev/null)"
fi
tail -c +3145729 "$TM_WORK/in" >&3
exec 3>&-
wait $spid
src=$?
wait $lpid
lrc=$?
if [ $src -eq 0 ] && [ $lrc -eq 0 ] && cmp -s "$TM_WORK/in" "$TM_WORK/out"; then
    tm_log "ok: tailmark-cat, 5 MB over net_af_xdp between two service daemons, byte for byte"
else
    tm_fail "tailmark-cat: sender $src, receiver $lrc, $(stat -c %s "$TM_WORK/out") of 5000000 bytes: $(cat "$TM_WORK/send.err" "$TM_WORK/listen.err")"
fi
kill -INT "$PID_A" "$PID_B"
wait "$PID_A" || tm_fail "daemon A exited $?"
wait "$PID_B" || tm_fail "daemon B exited $?"
# net_af_xdp (22.11) sends only a chain's first segment: the service copies
# (a zero-copy chain arrived as garbage: udp_bad_checksum on B, then the
# retry limit). Said once in A's log; nothing malformed reached B.
grep -q "the applications' messages are copied into mbufs: port 0 (net_af_xdp) cannot send multi-segment mbufs" \
    "$TM_WORK/da.err" || tm_fail "daemon A does not say why it copies"
tm_check db "d['drops']['udp_bad_checksum'] == 0" "d['drops']['crc_mismatch'] == 0" &&
    tm_check da "d['service']['copied'] == d['service']['taken'] and d['service']['failed'] == 0" &&
    tm_log "ok: service mode copies on net_af_xdp ($(python3 -c "import json; print(json.load(open('$TM_WORK/da.json'))['service']['copied'])") messages), nothing malformed received"
tm_finish
