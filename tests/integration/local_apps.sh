#!/usr/bin/env bash
# Two applications of one `tailmarkd --mode service` connect to each other
# (issue 39: ranks that share a daemon, as torchrun starts them). The daemon
# drives a real port (net_af_packet on a veth into a second namespace), and
# the applications reach each other by the daemon's own address or by a
# loopback address: their messages go through memory, never the port.
#
#  0. idle, with no application attached, the daemon takes under half a
#     CPU over 2 s: --mode service's lcores nap when idle (--idle-sleep-us'
#     service default, 50 us; it shares the host's CPUs with the ranks it
#     serves). Measured: 6-7% of a CPU; 100% when it polled (the default
#     until 2026-12-06, and --idle-sleep-us 0 now).
#  1. 5 MB of random bytes through tailmark-cat, by the daemon's address.
#  2. the same by 127.0.0.1, 3 flows of 7 KiB messages, ring 4.
#  3. the README's hello_send / hello_recv, by 127.0.0.1.
#  4. at SIGINT, the daemon's summary: exit 0; its port sent nothing
#     (port.tx == 0) and the veth's other end received nothing (its kernel
#     counter); every packet its senders sent went through the in-memory
#     loopback (packets_local == packets_tx) and was placed once
#     (packets_placed == packets_local, nothing retransmitted), their
#     payload exactly the two streams' and hello's (bytes_local), and was the
#     zero-copy marker's (referencing the sender's arena, packets_zero_copy)
#     but for the three messages at or under 512 B, copied: the two
#     streams' 0-byte end markers and hello's 16 bytes. Nothing is
#     dropped and every session packet is taken (session.tx == session.rx):
#     the service ends both ends of a session between its applications at
#     once, and each end's CLOSE, which finds the other ended already, is
#     the goodbye it owes, not stale input (it was 6 control_stale drops of
#     21 sent). Per flow: each
#     message sent, acknowledged and released on its send flow, and
#     released once on a receive flow (706 in all).
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
BIN=$TM_SRC/build/app
CAT=${TAILMARK_CAT:-$BIN/tailmark-cat/tailmark-cat}
HELLO_SEND=${TAILMARK_HELLO_SEND:-$BIN/examples/hello_send}
HELLO_RECV=${TAILMARK_HELLO_RECV:-$BIN/examples/hello_recv}
for b in "$CAT" "$HELLO_SEND" "$HELLO_RECV"; do
    [ -x "$b" ] || { tm_log "not built: $b"; exit 1; }
done

tm_af_pair lo
S=$TM_WORK/d.sock
tm_start d 300 ns "$NA" -- $VDEV_A -l 0 -- --mode service --src-ip $IP_A --control-socket "$S" \
    --secret $TM_SECRET --stats-period 0
PID=$TM_PID
up() { grep -q "applications attach on" "$TM_WORK/d.err" 2>/dev/null && [ -S "$S" ]; }
tm_await d "$PID" 30 up "the daemon never listened on its socket"
grep -q "sessions between applications of this daemon: in memory" "$TM_WORK/d.err" ||
    tm_fail "the daemon did not say it carries its applications' sessions in memory"

# 0. The idle daemon's CPU time (utime + stime, in clock ticks) over 2 s.
DPID=$(pgrep -P "$PID" tailmarkd | head -1)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$DPID/stat"; }
if [ -z "$DPID" ]; then
    tm_fail "0: the daemon's process (a child of $PID) not found"
else
    HZ=$(getconf CLK_TCK)
    t0=$(cpu_ticks)
    sleep 2
    t1=$(cpu_ticks)
    # Half a CPU; a sanitizer build's idle turns cost more (TM_SAN_SLOW):
    # three quarters there, still below a polling lcore's whole CPU.
    limit=$((TM_SAN_SLOW > 1 ? HZ * 3 / 2 : HZ))
    tm_log "0: idle, the daemon took $((t1 - t0)) of $((2 * HZ)) clock ticks in 2 s (limit $limit)"
    [ $((t1 - t0)) -lt "$limit" ] ||
        tm_fail "0: the idle daemon took $((t1 - t0)) clock ticks of $((2 * HZ)) in 2 s: it polls while idle"
fi

listens() { [ "$(grep -c "listens on port $1\$" "$TM_WORK/d.err")" -ge 1 ]; }
# transfer NAME ADDR PORT FILE ARGS...: a listening and a connecting
# tailmark-cat on the one daemon; both exit 0 and the bytes are equal.
transfer() {
    local name=$1 addr=$2 port=$3 file=$4
    shift 4
    ip netns exec "$NA" timeout -k 5 60 "$CAT" --socket "$S" --listen "$port" --quiet "$@" \
        >"$TM_WORK/$name.out" 2>"$TM_WORK/$name.listen.err" &
    local lpid=$!
    tm_wait_for 20 listens "$port" || tm_fail "$name: no listener on port $port"
    ip netns exec "$NA" timeout -k 5 60 "$CAT" --socket "$S" --connect "$addr:$port" --quiet "$@" <"$file" \
        2>"$TM_WORK/$name.send.err"
    local src=$?
    wait "$lpid"
    local lrc=$?
    if [ $src -ne 0 ] || [ $lrc -ne 0 ]; then
        tm_fail "$name: sender exit $src, receiver exit $lrc: $(cat "$TM_WORK/$name.send.err" "$TM_WORK/$name.listen.err")"
    elif ! cmp -s "$file" "$TM_WORK/$name.out"; then
        tm_fail "$name: the bytes that arrived differ ($(stat -c %s "$TM_WORK/$name.out") of $(stat -c %s "$file"))"
    else
        tm_log "ok: $name ($(stat -c %s "$file") bytes, equal)"
    fi
}

head -c 5000000 /dev/urandom >"$TM_WORK/in5m"
transfer by_address $IP_A 7000 "$TM_WORK/in5m"
transfer by_loopback 127.0.0.1 7001 "$TM_WORK/in5m" --flows 3 --msg-size 7K --ring 4

# 3. hello_send / hello_recv (port 7000, the README's), by 127.0.0.1.
ip netns exec "$NA" env TAILMARK_SOCKET="$S" timeout -k 5 30 "$HELLO_RECV" >"$TM_WORK/hello_recv.out" 2>&1 &
hr=$!
tm_wait_for 20 bash -c "[ \$(grep -c 'listens on port 7000\$' '$TM_WORK/d.err') -ge 2 ]" || tm_fail "hello_recv: no listener"
ip netns exec "$NA" env TAILMARK_SOCKET="$S" timeout -k 5 30 "$HELLO_SEND" 127.0.0.1 >"$TM_WORK/hello_send.out" 2>&1
hs=$?
wait $hr
hrc=$?
if [ $hs -eq 0 ] && [ $hrc -eq 0 ] && grep -qx 'message 0 (cookie 42): delivered' "$TM_WORK/hello_send.out" &&
    grep -Eqx '16 bytes from session [0-9]+: hello, tailmark' "$TM_WORK/hello_recv.out"; then
    tm_log "ok: hello_send -> hello_recv by 127.0.0.1: $(cat "$TM_WORK/hello_recv.out")"
else
    tm_fail "hello: send exit $hs ($(cat "$TM_WORK/hello_send.out")), recv exit $hrc ($(cat "$TM_WORK/hello_recv.out"))"
fi

# 4. Nothing on the wire.
kill -INT "$PID"
wait "$PID"
TM_RC=$?
wire=$(ip netns exec "$NB" cat /sys/class/net/vethB/statistics/rx_packets)
tm_log "the daemon: $(grep -m1 'in memory (between' "$TM_WORK/d.out" | sed 's/^ *//'); the veth's other end received $wire frames"
[ "$wire" -eq 0 ] || tm_fail "the veth's other end received $wire frames: the applications' sessions went out of the port"
# The data packets, exactly: 5 MB in 1 MiB messages (4 and the 805696-byte
# tail), 5 MB in 7 KiB messages (697 and a 3904-byte tail), each stream's
# 0-byte end marker and hello's 16 bytes (one packet each). Cut at the
# in-memory loopback's MTU (engine::kLoopbackMtu: a 60 KiB stride, version
# 1), not the port's 1500: 18 packets a 1 MiB message, not 721, and one a
# 7 KiB message, not 5 (784 zero-copy packets; at the port's MTU, 6,926).
LMTU=$((61440 + 20 + 8 + 16))
P1M=$(tm_pkts 1048576 $LMTU 1); PT1=$(tm_pkts 805696 $LMTU 1); P7K=$(tm_pkts 7168 $LMTU 1); PT7=$(tm_pkts 3904 $LMTU 1)
ZC=$((4 * P1M + PT1 + 697 * P7K + PT7))
tm_log "zero copy: $(python3 -c "import json; d = json.load(open('$TM_WORK/d.json')); print(d['packets_zero_copy'], 'of', d['packets_local'])") packets (want $ZC of $((ZC + 3)))"
tm_expect_rc d 0 &&
    tm_check d "d['port']['tx'] == 0" "d['packets_local'] > 0" "d['packets_local'] == d['packets_tx']" \
        "d['packets_placed'] == d['packets_local']" "d['reliability']['retx_pkts'] == 0" \
        "d['packets_zero_copy'] == $ZC" "d['packets_local'] == $ZC + 3" "d['bytes_local'] == 2 * 5000000 + 16" \
        "d['drops_total'] == 0" "d['session']['tx'] == d['session']['rx'] > 0" \
        "d['tx_dropped'] == 0" "d['service']['failed'] == 0" "d['service']['delivered'] == d['service']['taken'] > 0"
# The summary's per_flow after the sessions ended: every message counted on
# its send flow as sent, acknowledged and released, and released once on a
# receive flow: 6 + 699 of the two streams (end markers included) and
# hello's 1. (A send flow of an ended session once showed 0 and 0.)
tm_check d "sum(f['sent'] for f in d['per_flow']) == 706" \
    "all(f['acked'] == f['released'] == f['sent'] for f in d['per_flow'] if f['sent'])" \
    "sum(f['released'] for f in d['per_flow'] if not f['sent']) == 706"
tm_finish
