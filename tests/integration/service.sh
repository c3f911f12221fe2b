#!/usr/bin/env bash
# Applications through `tailmarkd --mode service`, end to end: two daemons in
# two network namespaces over net_af_packet on a veth pair (IP addresses only;
# ARP finds the MACs), and applications on libtailmark-client attached to
# them by their Unix sockets: tailmark-cat, tailmark-perf and the README's
# minimal sender and receiver. Every check is exact (sha256 of what arrived,
# exit codes, counts); nothing waits on a fixed sleep but case 11's measured
# 5 s.
#
#  1. the README's hello_send / hello_recv: "delivered", and the text.
#  2. a 256 MiB random file through tailmark-cat: sha256 equal.
#  3. 100 000 messages of 64 B (a 6 400 000-byte file, --msg-size 64).
#  4. three applications per side at once: two streams A->B, one B->A,
#     each daemon serving three cats.
#  5. kill -9 of a sending application mid-stream: the receiver exits 1
#     saying the stream ended early, holding exactly what was sent; the
#     daemon frees the dead application's memory; a new sender and receiver
#     on the same port at once complete a transfer.
#  6. kill -9 of a receiving application mid-stream: the sender exits 1 (it
#     never claims delivery it did not get) within 30 s while its input pipe
#     stays open and quiet, what arrived is a prefix of the input, the daemon
#     frees the dead application, and serves on.
#  7. a second listener on a port gets EBUSY (tm_listen's errno); the first
#     serves on.
#  8. a refused setting: a listener taking messages of at most 4096 B, a
#     sender of 8192 B: the sender exits 2 within 5 s with one line naming
#     the message size and both values; the listener then serves a sender
#     of 4096 B.
#  9. two senders into one receiver at once (tailmark-perf --verify): each
#     session's every message arrives, every byte checked.
# 10. the daemons' summaries at SIGINT: exit 0, nothing dropped at tx, no
#     flow failed but case 6's (A's flow to the killed receiver, closed:
#     exactly one; case 5's killed sender fails none), and every submission
#     delivered or failed (failed only in case 6), none invalid.
# 11. an idle session: the acceptor's frames on the wire over 5 s are its
#     keep-alive answers, about one a second (1..7).
# 12. forged control packets (forge.py, as in sessions.sh case 3b) toward a
#     daemon whose application is sending, on a fresh pair of daemons: every
#     byte arrives, and that daemon's drops are exactly the forgeries, reason
#     by reason (control_bad_auth for every one that reached the MAC).
# TM_ONLY="2 5": a subset.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
BIN=$TM_SRC/build/app
CAT=${TAILMARK_CAT:-$BIN/tailmark-cat/tailmark-cat}
PERF=${TAILMARK_PERF:-$BIN/tailmark-perf/tailmark-perf}
HELLO_SEND=${TAILMARK_HELLO_SEND:-$BIN/examples/hello_send}
HELLO_RECV=${TAILMARK_HELLO_RECV:-$BIN/examples/hello_recv}
for b in "$CAT" "$PERF" "$HELLO_SEND" "$HELLO_RECV"; do
    [ -x "$b" ] || { tm_log "not built: $b"; exit 1; }
done
only() { [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" $1 "* ]]; }

tm_af_pair sv
SA=$TM_WORK/a.sock
SB=$TM_WORK/b.sock
tm_start da 900 ns "$NA" -- $VDEV_A -l 0 -- --mode service --src-ip $IP_A --control-socket "$SA" \
    --secret $TM_SECRET --stats-period 0
PID_A=$TM_PID
tm_start db 900 ns "$NB" -- $VDEV_B -l 1 -- --mode service --src-ip $IP_B --control-socket "$SB" \
    --secret $TM_SECRET --stats-period 0
PID_B=$TM_PID
up_a() { grep -q "applications attach on" "$TM_WORK/da.err" 2>/dev/null && [ -S "$SA" ]; }
up_b() { grep -q "applications attach on" "$TM_WORK/db.err" 2>/dev/null && [ -S "$SB" ]; }
tm_await da "$PID_A" 30 up_a "the daemon never listened on its socket"
tm_await db "$PID_B" 30 up_b "the daemon never listened on its socket"

# listens DAEMON PORT N: the daemon's log has N lines of an app listening on PORT.
listens() { [ "$(grep -c "listens on port $2\$" "$TM_WORK/$1.err")" -ge "$3" ]; }
nlistens() { grep -c "listens on port $2\$" "$TM_WORK/$1.err"; }
released() { [ "$(grep -c "(pid $2): memory released" "$TM_WORK/$1.err")" -ge 1 ]; }
same() { # NAME A B: equal sha256
    if [ "$(sha256sum <"$2" | cut -d' ' -f1)" = "$(sha256sum <"$3" | cut -d' ' -f1)" ]; then
        return 0
    fi
    tm_fail "$1: the bytes that arrived differ from those sent ($(stat -c %s "$3") of $(stat -c %s "$2"))"
    return 1
}
# listen_cat DAEMON_SOCK DAEMON PORT OUT ARGS...: a receiving tailmark-cat,
# in the background (LPID), returned once its daemon has its LISTEN.
listen_cat() {
    local sock=$1 d=$2 port=$3 out=$4
    shift 4
    local before
    before=$(nlistens "$d" "$port")
    timeout -k 5 120 "$CAT" --socket "$sock" --listen "$port" --quiet "$@" >"$out" 2>"$out.err" &
    LPID=$!
    tm_wait_for 20 listens "$d" "$port" $((before + 1)) || tm_fail "$d: no listener on port $port"
}
# transfer NAME FROM_SOCK TO_SOCK TO_DAEMON TO_IP PORT FILE ARGS...: one
# stream through tailmark-cat; both exit 0 and the bytes are equal.
transfer() {
    local name=$1 from=$2 to=$3 d=$4 ip=$5 port=$6 file=$7
    shift 7
    listen_cat "$to" "$d" "$port" "$TM_WORK/$name.out" "$@"
    timeout -k 5 120 "$CAT" --socket "$from" --connect "$ip:$port" --quiet "$@" <"$file" 2>"$TM_WORK/$name.send.err"
    local src=$?
    wait "$LPID"
    local lrc=$?
    if [ $src -ne 0 ] || [ $lrc -ne 0 ]; then
        tm_fail "$name: sender exit $src, receiver exit $lrc: $(cat "$TM_WORK/$name.send.err" "$TM_WORK/$name.out.err")"
        return 1
    fi
    same "$name" "$file" "$TM_WORK/$name.out"
}

# 1. The README's minimal sender and receiver.
if only 1; then
    before=$(nlistens db 7000)
    TAILMARK_SOCKET=$SB timeout -k 5 30 "$HELLO_RECV" >"$TM_WORK/hello_recv.out" 2>&1 &
    hr=$!
    tm_wait_for 20 listens db 7000 $((before + 1)) || tm_fail "hello_recv: no listener"
    TAILMARK_SOCKET=$SA timeout -k 5 30 "$HELLO_SEND" $IP_B >"$TM_WORK/hello_send.out" 2>&1
    hs=$?
    wait $hr
    hrc=$?
    if [ $hs -eq 0 ] && [ $hrc -eq 0 ] && grep -qx 'message 0 (cookie 42): delivered' "$TM_WORK/hello_send.out" &&
        grep -Eqx '16 bytes from session [0-9]+: hello, tailmark' "$TM_WORK/hello_recv.out"; then
        tm_log "ok: hello_send -> hello_recv: $(cat "$TM_WORK/hello_recv.out")"
    else
        tm_fail "hello: send exit $hs ($(cat "$TM_WORK/hello_send.out")), recv exit $hrc ($(cat "$TM_WORK/hello_recv.out"))"
    fi
fi

# 2. 256 MiB of random bytes.
if only 2; then
    head -c $((256 << 20)) /dev/urandom >"$TM_WORK/big.bin"
    t0=$(date +%s.%N)
    transfer big "$SA" "$SB" db $IP_B 7001 "$TM_WORK/big.bin" &&
        tm_log "ok: 256 MiB A->B, sha256 equal ($(python3 -c "print(round(256 / ($(date +%s.%N) - $t0), 1))") MiB/s)"
    rm -f "$TM_WORK/big.bin" "$TM_WORK/big.out"
fi

# 3. 100 000 messages of 64 B: every message full, so the bytes say the count.
if only 3; then
    head -c 6400000 /dev/urandom >"$TM_WORK/small.bin"
    transfer small "$SA" "$SB" db $IP_B 7002 "$TM_WORK/small.bin" --msg-size 64 &&
        tm_log "ok: 100000 messages of 64 B, sha256 equal"
fi

# 4. Three applications per side at once.
if only 4; then
    for k in 1 2 3; do head -c $((24 << 20)) /dev/urandom >"$TM_WORK/three$k.bin"; done
    transfer three1 "$SA" "$SB" db $IP_B 7011 "$TM_WORK/three1.bin" --msg-size 256K &
    p1=$!
    transfer three2 "$SA" "$SB" db $IP_B 7012 "$TM_WORK/three2.bin" --flows 3 &
    p2=$!
    transfer three3 "$SB" "$SA" da $IP_A 7013 "$TM_WORK/three3.bin" --msg-size 64K &
    p3=$!
    ok=0
    for p in $p1 $p2 $p3; do wait $p || ok=1; done
    # the checks ran in subshells: their failures are in their output
    if [ $ok -eq 0 ] && [ -f "$TM_WORK/three3.out" ]; then
        same three1 "$TM_WORK/three1.bin" "$TM_WORK/three1.out" && same three2 "$TM_WORK/three2.bin" "$TM_WORK/three2.out" &&
            same three3 "$TM_WORK/three3.bin" "$TM_WORK/three3.out" &&
            tm_log "ok: three applications per side at once (2 streams A->B, 1 B->A), sha256 equal"
    else
        tm_fail "three at once: a transfer failed"
    fi
fi

# 5. kill -9 of a sending application mid-stream.
if only 5; then
    head -c $((4 << 20)) /dev/urandom >"$TM_WORK/k5.bin"
    mkfifo "$TM_WORK/k5.fifo"
    listen_cat "$SB" db 7021 "$TM_WORK/k5.out"
    lp=$LPID
    timeout -k 5 120 "$CAT" --socket "$SA" --connect $IP_B:7021 --quiet <"$TM_WORK/k5.fifo" 2>"$TM_WORK/k5.send.err" &
    sp=$!
    # 4 whole messages of 1 MiB, then the stream stays open (the feeder sleeps).
    (cat "$TM_WORK/k5.bin"; sleep 60) >"$TM_WORK/k5.fifo" &
    feeder=$!
    if tm_wait_for 30 size_ge "$TM_WORK/k5.out" $((4 << 20)); then
        cat_pid=$(pgrep -f -- "^$CAT .*--connect $IP_B:7021" | head -n 1)
        kill -KILL "$sp" ${cat_pid:-} 2>/dev/null
        wait "$lp"
        lrc=$?
        stop_feeder "$feeder"
        wait "$sp" 2>/dev/null
        if [ $lrc -eq 1 ] && grep -q "before the end of the stream" "$TM_WORK/k5.out.err"; then
            same k5 "$TM_WORK/k5.bin" "$TM_WORK/k5.out" &&
                tm_log "ok: sender killed: the receiver exits 1 ($(cat "$TM_WORK/k5.out.err")), holding exactly the 4 MiB sent"
        else
            tm_fail "sender killed: receiver exit $lrc, $(cat "$TM_WORK/k5.out.err")"
        fi
        tm_wait_for 20 released da "${cat_pid:-$sp}" && tm_log "ok: daemon A let the dead sender's memory go" ||
            tm_fail "daemon A did not release the dead sender (pid ${cat_pid:-$sp})"
        head -c $((3 << 20)) /dev/urandom >"$TM_WORK/k5b.bin"
        transfer k5b "$SA" "$SB" db $IP_B 7021 "$TM_WORK/k5b.bin" && tm_log "ok: a new sender on the same port at once"
    else
        tm_fail "sender killed: the first 4 MiB never arrived"
        stop_feeder "$feeder"
        kill "$sp" "$lp" 2>/dev/null
    fi
fi

# 6. kill -9 of a receiving application mid-stream.
if only 6; then
    head -c $((32 << 20)) /dev/urandom >"$TM_WORK/k6.bin"
    mkfifo "$TM_WORK/k6.fifo"
    listen_cat "$SB" db 7031 "$TM_WORK/k6.out"
    lp=$LPID
    timeout -k 5 120 "$CAT" --socket "$SA" --connect $IP_B:7031 --quiet <"$TM_WORK/k6.fifo" 2>"$TM_WORK/k6.send.err" &
    sp=$!
    (cat "$TM_WORK/k6.bin"; sleep 60) >"$TM_WORK/k6.fifo" &
    feeder=$!
    if tm_wait_for 30 size_ge "$TM_WORK/k6.out" $((2 << 20)); then
        cat_pid=$(pgrep -f -- "^$CAT .*--listen 7031" | head -n 1)
        kill -KILL ${cat_pid:-} "$lp" 2>/dev/null
        wait "$lp" 2>/dev/null
        # Its input stays open (the feeder sleeps 60 s after the file), so
        # only the failure can end the sender in time.
        t0=$SECONDS
        if tm_wait_for 30 bash -c "! kill -0 $sp 2>/dev/null"; then
            tm_log "ok: the sender, its input open and quiet, exited $((SECONDS - t0)) s after its receiver's death"
        else
            tm_fail "receiver killed: the sender, its input open and quiet, still runs after 30 s"
        fi
        wait "$sp"
        src=$?
        stop_feeder "$feeder"
        got=$(stat -c %s "$TM_WORK/k6.out")
        if [ $src -eq 1 ] && cmp -s -n "$got" "$TM_WORK/k6.bin" "$TM_WORK/k6.out"; then
            tm_log "ok: receiver killed: the sender exits 1 ($(cat "$TM_WORK/k6.send.err")); the $got bytes that arrived are the stream's first"
        else
            tm_fail "receiver killed: sender exit $src ($(cat "$TM_WORK/k6.send.err")); arrived $got bytes, a prefix: $(cmp -s -n "$got" "$TM_WORK/k6.bin" "$TM_WORK/k6.out" && echo yes || echo no)"
        fi
        tm_wait_for 20 released db "${cat_pid:-$lp}" && tm_log "ok: daemon B let the dead receiver's memory go" ||
            tm_fail "daemon B did not release the dead receiver (pid ${cat_pid:-$lp})"
        head -c $((3 << 20)) /dev/urandom >"$TM_WORK/k6b.bin"
        transfer k6b "$SA" "$SB" db $IP_B 7031 "$TM_WORK/k6b.bin" && tm_log "ok: a new receiver on the same port at once"
    else
        tm_fail "receiver killed: nothing arrived"
        stop_feeder "$feeder"
        kill "$sp" "$lp" 2>/dev/null
    fi
fi

# 7. One listener per port.
if only 7; then
    head -c $((1 << 20)) /dev/urandom >"$TM_WORK/busy.bin"
    listen_cat "$SB" db 7041 "$TM_WORK/busy.out"
    lp=$LPID
    # By its errno: tailmark-perf prints tm_listen's return code as
    # strerror(-rc) in the last parentheses of its line, whatever the
    # daemon's text says; that must be EBUSY's.
    busy_text=$(python3 -c 'import errno, os; print(os.strerror(errno.EBUSY))')
    timeout -k 5 30 "$PERF" --socket "$SB" --listen 7041 >/dev/null 2>"$TM_WORK/busy2.err"
    brc=$?
    busy_errno=$(sed -nE 's/^tailmark-perf: listen: .*\(([^()]*)\)$/\1/p' "$TM_WORK/busy2.err")
    if [ $brc -eq 1 ] && [ "$busy_errno" = "$busy_text" ]; then
        tm_log "ok: a second listener on port 7041: tm_listen gave EBUSY, exit $brc ($(cat "$TM_WORK/busy2.err"))"
    else
        tm_fail "second listener: exit $brc, errno '${busy_errno:-none}' (want '$busy_text', EBUSY): $(cat "$TM_WORK/busy2.err")"
    fi
    timeout -k 5 60 "$CAT" --socket "$SA" --connect $IP_B:7041 --quiet <"$TM_WORK/busy.bin" 2>"$TM_WORK/busy.send.err"
    src=$?
    wait "$lp"
    lrc=$?
    [ $src -eq 0 ] && [ $lrc -eq 0 ] && same busy "$TM_WORK/busy.bin" "$TM_WORK/busy.out" &&
        tm_log "ok: the first listener served on" || tm_fail "the first listener: exits $src/$lrc"
fi

# 8. A refused setting: the message size.
if only 8; then
    head -c 100000 /dev/urandom >"$TM_WORK/ref.bin"
    listen_cat "$SB" db 7051 "$TM_WORK/ref.out" --msg-size 4096
    lp=$LPID
    t0=$SECONDS
    timeout -k 5 30 "$CAT" --socket "$SA" --connect $IP_B:7051 --msg-size 8192 --quiet <"$TM_WORK/ref.bin" \
        2>"$TM_WORK/ref.send.err"
    rrc=$?
    dt=$((SECONDS - t0))
    if [ $rrc -eq 2 ] && [ $dt -le 5 ] && [ "$(wc -l <"$TM_WORK/ref.send.err")" -eq 1 ] &&
        grep -q "msg_size" "$TM_WORK/ref.send.err" && grep -q "4096" "$TM_WORK/ref.send.err" &&
        grep -q "8192" "$TM_WORK/ref.send.err"; then
        tm_log "ok: refused in ${dt}s, exit 2: $(cat "$TM_WORK/ref.send.err")"
    else
        tm_fail "refused: exit $rrc after ${dt}s: $(cat "$TM_WORK/ref.send.err")"
    fi
    timeout -k 5 60 "$CAT" --socket "$SA" --connect $IP_B:7051 --msg-size 4096 --quiet <"$TM_WORK/ref.bin" \
        2>"$TM_WORK/ref2.send.err"
    src=$?
    wait "$lp"
    lrc=$?
    [ $src -eq 0 ] && [ $lrc -eq 0 ] && same ref "$TM_WORK/ref.bin" "$TM_WORK/ref.out" &&
        tm_log "ok: the listener then served a sender of 4096 B" || tm_fail "after the refusal: exits $src/$lrc"
fi

# 9. Two senders into one receiver at once, every byte checked.
if only 9; then
    before=$(nlistens db 7061)
    timeout -k 5 120 "$PERF" --socket "$SB" --listen 7061 --sessions 2 --verify >"$TM_WORK/two.out" 2>&1 &
    rp=$!
    tm_wait_for 20 listens db 7061 $((before + 1)) || tm_fail "perf: no listener"
    timeout -k 5 120 "$PERF" --socket "$SA" --connect $IP_B:7061 --size 1000 --count 20000 --flows 2 --verify \
        >"$TM_WORK/two1.out" 2>&1 &
    s1=$!
    timeout -k 5 120 "$PERF" --socket "$SA" --connect $IP_B:7061 --size 3000 --count 10000 --verify \
        >"$TM_WORK/two2.out" 2>&1 &
    s2=$!
    wait $s1; r1=$?
    wait $s2; r2=$?
    wait $rp; rr=$?
    if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $rr -eq 0 ] && python3 - "$TM_WORK/two.out" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
got = sorted((r['messages'], r['bytes'], r['errors'], r['complete']) for r in runs)
want = sorted([(20000, 20000 * 1000, 0, True), (10000, 10000 * 3000, 0, True)])
sys.exit(0 if got == want else print(got) or 1)
EOF
    then
        tm_log "ok: two senders into one receiver: 20000 x 1000 B and 10000 x 3000 B, every byte checked"
    else
        tm_fail "two senders: exits $r1/$r2/$rr: $(cat "$TM_WORK/two.out" "$TM_WORK/two1.out" "$TM_WORK/two2.out")"
    fi
fi

# 11. An idle session's control traffic.
if only 11; then
    listen_cat "$SB" db 7071 "$TM_WORK/idle.out"
    lp=$LPID
    before=$(grep -c "service: session [0-9]* to .* up" "$TM_WORK/da.err")
    # Its input: a pipe that stays open and quiet until the end of the case.
    mkfifo "$TM_WORK/idle.fifo"
    timeout -k 5 60 "$CAT" --socket "$SA" --connect $IP_B:7071 --quiet <"$TM_WORK/idle.fifo" \
        2>"$TM_WORK/idle.send.err" &
    sp=$!
    sleep 60 >"$TM_WORK/idle.fifo" &
    idle_feeder=$!
    upped() { [ "$(grep -c "service: session [0-9]* to .* up" "$TM_WORK/da.err")" -gt "$before" ]; }
    if tm_wait_for 20 upped; then
        tx0=$(ip netns exec "$NB" cat /sys/class/net/vethB/statistics/tx_packets)
        sleep 5 # the measurement itself
        tx1=$(ip netns exec "$NB" cat /sys/class/net/vethB/statistics/tx_packets)
        n=$((tx1 - tx0))
        if [ $n -ge 1 ] && [ $n -le 7 ]; then
            tm_log "ok: an idle session: the acceptor sent $n frames in 5 s"
        else
            tm_fail "idle session: the acceptor sent $n frames in 5 s (want 1..7)"
        fi
    else
        tm_fail "idle: the session never came up"
    fi
    pkill -KILL -f -- "^$CAT .*--connect $IP_B:7071" 2>/dev/null
    kill "$sp" "$lp" "$idle_feeder" 2>/dev/null
    wait "$sp" "$lp" "$idle_feeder" 2>/dev/null
fi

# 10. The daemons stop cleanly; their summaries.
kill -INT "$PID_A" "$PID_B"
wait "$PID_A"; ra=$?
wait "$PID_B"; rb=$?
if [ $ra -eq 0 ] && [ $rb -eq 0 ]; then
    tm_log "ok: both daemons stopped on SIGINT, exit 0"
else
    tm_fail "daemons: exit $ra / $rb"
    tm_show da
    tm_show db
fi
sent=0
only 2 && sent=1 # (a subset may send nothing)
# Case 6 is the one that fails a flow: A's flow to the receiver killed there
# is closed when B reaps it (its messages in flight fail, at least the one
# being sent). Case 5's killed sender fails nothing (its daemon closes its
# session), and B, receiving, fails none. Every submission an application
# made was delivered or failed by the stop (none left in flight).
k6=0
only 6 && k6=1
tm_check da \
    "d['flows_failed'] == $k6" \
    "[f['state'] for f in d['per_flow'] if f['state'] != 'ok'] == ['closed'] * $k6" \
    "(d['service']['failed'] > 0) == bool($k6)"
tm_check db \
    "d['flows_failed'] == 0" \
    "all(f['state'] == 'ok' for f in d['per_flow'])" \
    "d['service']['failed'] == 0"
for d in da db; do
    tm_check "$d" \
        "d['mode'] == 'service'" \
        "d['tx_dropped'] == 0" \
        "d['messages_sent'] > 0 or not $sent" \
        "d['service']['taken'] == d['service']['delivered'] + d['service']['failed']" \
        "d['service']['invalid'] == d['service']['bad_head'] == 0"
done

# 12. Forged control packets toward a sending application's daemon.
if only 12; then
    PY=/usr/bin/python3
    [ -x $PY ] || PY=python3
    FORGE="$(cd "$(dirname "$0")" && pwd)/forge.py"
    rm -f "$SA" "$SB"
    tm_start fa 300 ns "$NA" -- $VDEV_A -l 0 -- --mode service --src-ip $IP_A --control-socket "$SA" \
        --secret $TM_SECRET --stats-period 0.2 --peer-timeout-ms 30000
    PID_A=$TM_PID
    tm_start fb 300 ns "$NB" -- $VDEV_B -l 1 -- --mode service --src-ip $IP_B --control-socket "$SB" \
        --secret $TM_SECRET --stats-period 0 --peer-timeout-ms 30000
    PID_B=$TM_PID
    up_fa() { grep -q "applications attach on" "$TM_WORK/fa.err" 2>/dev/null && [ -S "$SA" ]; }
    up_fb() { grep -q "applications attach on" "$TM_WORK/fb.err" 2>/dev/null && [ -S "$SB" ]; }
    tm_await fa "$PID_A" 30 up_fa "the daemon never listened on its socket"
    tm_await fb "$PID_B" 30 up_fb "the daemon never listened on its socket"
    rm -f "$TM_WORK/f12.ready"
    ip netns exec "$NB" $PY "$FORGE" vethB "$TM_WORK/f12.json" --state established --own-mac "$MAC_B" \
        --sender-mac "$MAC_A" --own-ip $IP_B --sender-ip $IP_A --secret $TM_SECRET --seed $RANDOM \
        --ready "$TM_WORK/f12.ready" --pps 2000 --rounds 2 >"$TM_WORK/f12.out" 2>&1 &
    FPID=$!
    tm_wait_for 20 test -e "$TM_WORK/f12.ready" || tm_fail "forge.py did not start: $(cat "$TM_WORK/f12.out")"
    head -c $((4 << 20)) /dev/urandom >"$TM_WORK/f12.bin"
    mkfifo "$TM_WORK/f12.fifo"
    listen_cat "$SB" fb 7081 "$TM_WORK/f12.rx"
    lp=$LPID
    timeout -k 5 120 "$CAT" --socket "$SA" --connect $IP_B:7081 --quiet <"$TM_WORK/f12.fifo" 2>"$TM_WORK/f12.send.err" &
    sp=$!
    # The stream stays open while the forger works: the session and its flows stay up.
    (cat "$TM_WORK/f12.bin"; sleep 90) >"$TM_WORK/f12.fifo" &
    feeder=$!
    wait $FPID || tm_fail "forge.py failed: $(cat "$TM_WORK/f12.out")"
    n=$(python3 -c "import json;print(json.load(open('$TM_WORK/f12.json'))['frames'])")
    drops_now() { # the latest stats line's drops of fa
        local v
        v=$(grep -o ' drops=[0-9]*' "$TM_WORK/fa.out" 2>/dev/null | tail -n 1 | cut -d= -f2)
        [ "${v:-0}" -ge "$n" ]
    }
    tm_wait_for 30 drops_now || tm_fail "fa did not count all $n forged packets"
    tm_wait_for 30 size_ge "$TM_WORK/f12.rx" $((4 << 20)) || tm_fail "the 4 MiB never arrived"
    kill -INT "$PID_A" # the session still up, as in sessions.sh 3b
    wait "$PID_A"
    ra=$?
    stop_feeder "$feeder"
    pkill -KILL -f -- "^$CAT .*--connect $IP_B:7081" 2>/dev/null
    wait "$sp" "$lp" 2>/dev/null
    kill -INT "$PID_B"
    wait "$PID_B"
    [ $ra -eq 0 ] || tm_fail "fa: exit $ra"
    same f12 "$TM_WORK/f12.bin" "$TM_WORK/f12.rx"
    if out=$(python3 - "$TM_WORK/fa.json" "$TM_WORK/f12.json" <<'EOF'
import json, sys
d, f = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
got = {k: v for k, v in d["drops"].items() if v}
want = f["expect"]
ok = got == want and d["drops_total"] == f["frames"] and d["flows_failed"] == 0 and want.get("control_bad_auth", 0) > 0
print(f"drops {got} (total {d['drops_total']}), forged {want} (total {f['frames']}), flows failed {d['flows_failed']}")
sys.exit(0 if ok else 1)
EOF
    ); then
        tm_log "ok: $n forged control packets toward a sending application's daemon, counted exactly; every byte arrived: $out"
    else
        tm_fail "forged: $out"
    fi
fi
tm_finish

