#!/usr/bin/env bash
# Ranks that share one daemon, as torchrun starts them on one host (issue
# 39): one network namespace, one `tailmarkd --mode service` on
# net_af_packet over its veth, and torchrun (python3 -m torch.distributed.run,
# rendezvous on 127.0.0.1) starting every rank in it with the daemon's
# socket. The ranks find each other at the daemon's address, and their
# messages go through the daemon's memory, never its port.
#
#  1. torchrun --nproc_per_node 2: ops.py (every op, every dtype, 1..65543 elements) exact.
#  2. torchrun --nproc_per_node 4: ops.py at small counts, exact.
#  3. torchrun --nproc_per_node 4: gloo_compare.py (as ops.sh runs it at 2
#     and 3 ranks) against gloo on the same host, every op and dtype at
#     0..4099 elements with 4 KiB messages (TAILMARK_TORCH_MSG=4096: a
#     piece is 4032 bytes, so 4099 elements are 3 to 9 of them in every
#     dtype); without its last case, which leaves a message undelivered
#     by design (5. wants none failed).
#  3b. torchrun --nproc_per_node 4: heap.py: all_to_all_single, send,
#     gather, scatter and the forwarding collectives (all_reduce's ring,
#     broadcast, reduce, all_gather_into_tensor, reduce_scatter_tensor)
#     exact, and each rank's pieces to the others read in place in its
#     tensor when the tensor was made after the group (the TensorHeap), and
#     copied into a slot when made before (tailmark.torch.stats, exact
#     counts). Seen failing with TAILMARK_TORCH_HEAP_MB=0 (0 in place, 3
#     copied).
#  3c. torchrun --nproc_per_node 2: idle.py: rank 0 waits 1.8 s for its
#     send to be delivered while rank 1's next piece sits in its ring; its
#     CPU time over the wait is under a quarter of it (its engine thread
#     spun on tm_wait before tm_wait_sent), and both tensors are exact.
#  4. DDP at 4 ranks (ddp.py, torchrun) equals DDP over gloo on the same
#     host within rtol 1e-6 (ddp_compare.py, as ddp.sh's 3 ranks).
#  5. at SIGINT, the daemon: exit 0; its port sent nothing (port.tx == 0),
#     the veth's other end received nothing (its kernel counter), and
#     packets went through its in-memory loopback (packets_local ==
#     packets_tx > 0), each of them a piece's 64-byte header alone
#     (bytes_local == 64 x packets_local): the ranks read each other's
#     bytes in place (Mesh::direct), the daemon copied none. Seen failing
#     with TAILMARK_TORCH_DIRECT=0 (every byte through the daemon).
#  6. on a second daemon, ops.py at 4 ranks where ranks 0 and 2 keep their
#     pieces inline (TAILMARK_TORCH_DIRECT=0) and 1 and 3 send by
#     reference: exact (each receiver takes either form). Then teardown.py: 2 ranks destroy 20 groups each with
#     64 operations in flight, and every rank exits within 60 s (Python held
#     the GIL in the group's destructor, joining an engine thread that
#     waited for it to free a tensor: 3 of 3 runs hung before the fix).
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require

NS=tm_th_$$
NP=tm_thp_$$ # the veth's other end: counts what reaches the wire
TM_NETNS+=("$NS" "$NP")
ip netns add "$NS" && ip netns add "$NP" || { tm_fail "namespaces"; tm_finish; }
ip link add eth0 netns "$NS" type veth peer name p0 netns "$NP" || { tm_fail "veth"; tm_finish; }
for n in "$NS" "$NP"; do
    ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip netns exec "$n" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
    ip netns exec "$n" ip link set lo up
done
ip netns exec "$NS" ip addr add 10.77.0.1/24 dev eth0 # gloo's, for the DDP reference
ip netns exec "$NS" ip link set eth0 up
ip netns exec "$NP" ip link set p0 up
# daemon NAME: tailmarkd --mode service in the namespace, its socket $SOCK, pid $PID.
daemon() {
    SOCK=$TM_WORK/$1.sock
    tm_start "$1" 900 ns "$NS" -- --vdev=net_af_packet0,iface=eth0,framecnt=4096 -l 0 -- --mode service \
        --src-ip 198.18.1.1 --control-socket "$SOCK" --secret "$TM_SECRET" --stats-period 0 \
        --idle-sleep-us "${TT_IDLE_SLEEP_US:-50}"
    PID=$TM_PID
    DNAME=$1
    up() { grep -q "applications attach on" "$TM_WORK/$DNAME.err" 2>/dev/null && [ -S "$SOCK" ]; }
    tm_await "$1" "$PID" 30 up "the daemon never listened on its socket"
}
daemon d

# run NAME NPROC SCRIPT ARGS...: torchrun in the namespace; sets RC, output in NAME.out.
# --redirects 1 --tee 1: Debian's torch 1.13 under Python 3.11 cannot parse
# their default "0" (IntFlag iteration skips NONE: 'NoneType' object has no
# attribute 'get'); 1 sends each rank's stdout to the console and a log.
PORT=29500
run() {
    local name=$1 n=$2 script=$3
    shift 3
    PORT=$((PORT + 1))
    ip netns exec "$NS" env TAILMARK_SOCKET="$SOCK" PYTHONPATH="$TT_PYPATH" OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=eth0 \
        timeout -k 5 "${RUN_TIMEOUT:-600}" "${TT_PYRUN[@]}" -m torch.distributed.run --nnodes 1 --nproc_per_node "$n" \
        --redirects 1 --tee 1 --log_dir "$TM_WORK/$name.logs" \
        --master_addr 127.0.0.1 --master_port $PORT "$script" "$@" >"$TM_WORK/$name.out" 2>&1
    RC=$?
}
report() { # NAME WHAT: RC 0, or a failure with the output's tail
    if [ "$RC" -eq 0 ]; then
        tm_log "ok: $2: $(grep -m1 -o 'ok future.*' "$TM_WORK/$1.out")"
    else
        tm_fail "$2: torchrun exit $RC"
        tail -n 20 "$TM_WORK/$1.out" | sed 's/^/    /'
    fi
}

run ops2 2 "$TT_DIR/ops.py" 1,4096,65543 float32,float64,bfloat16,int32,int64
report ops2 "2 ranks on one daemon, every op and dtype"
run ops4 4 "$TT_DIR/ops.py" 1,4096 float32,int64
report ops4 "4 ranks on one daemon"
start=$SECONDS
TAILMARK_TORCH_MSG=4096 run gc4 4 "$TT_DIR/gloo_compare.py" 0,1,7,4099 float32,float64,bfloat16,int32,int64 "" nobreak
if [ "$RC" -eq 0 ]; then
    tm_log "ok: 4 ranks on one daemon, tailmark against gloo: $(grep -m1 -o 'ok gloo_compare.*' "$TM_WORK/gc4.out") ($((SECONDS - start)) s)"
else
    tm_fail "4 ranks on one daemon, tailmark against gloo: torchrun exit $RC"
    grep -v '^\[' "$TM_WORK/gc4.out" | tail -n 20 | sed 's/^/    /'
fi

# checked NAME NPROC SCRIPT WHAT: run, then its rank 0's "ok <script>" line,
# or a failure with the ranks' findings ("rank N: ...", from their logs)
# before torchrun's summary.
checked() {
    local name=$1 ok="ok $(basename "$3" .py)" what=$4
    run "$name" "$2" "$3"
    if [ "$RC" -eq 0 ] && grep -q "$ok" "$TM_WORK/$name.out"; then
        tm_log "ok: $what: $(grep -m1 -o "$ok.*" "$TM_WORK/$name.out")"
    else
        tm_fail "$what: torchrun exit $RC"
        grep -rhE '^rank [0-9]+: ' "$TM_WORK/$name.logs" | head -n 20 | sed 's/^/    /'
        grep -v '^\[' "$TM_WORK/$name.out" | tail -n 20 | sed 's/^/    /'
    fi
}
checked heap4 4 "$TT_DIR/heap.py" "4 ranks on one daemon, pieces read in place"
checked idle2 2 "$TT_DIR/idle.py" "a rank waiting on its peer sleeps"

ok=1
for b in tailmark gloo; do
    run ddp4$b 4 "$TT_DIR/ddp.py" $b "$TM_WORK/ddp4$b" "${TT_STEPS:-10}"
    if [ "$RC" -ne 0 ]; then
        tm_fail "DDP, 4 ranks on one host, $b: torchrun exit $RC"
        tail -n 20 "$TM_WORK/ddp4$b.out" | sed 's/^/    /'
        ok=0
    fi
done
if [ $ok -eq 1 ]; then
    if out=$("$TT_PY" "$TT_DIR/ddp_compare.py" "$TM_WORK/ddp4tailmark" "$TM_WORK/ddp4gloo" 4 1e-6); then
        tm_log "ok: DDP, 4 ranks on one daemon: tailmark = gloo: $out"
    else
        tm_fail "DDP, 4 ranks on one daemon: tailmark != gloo: $out"
    fi
fi

kill -INT "$PID"
wait "$PID"
TM_RC=$?
wire=$(ip netns exec "$NP" cat /sys/class/net/p0/statistics/rx_packets)
tm_log "the daemon: $(grep -m1 'in memory (between' "$TM_WORK/d.out" | sed 's/^ *//'); the veth's other end received $wire frames"
[ "$wire" -eq 0 ] || tm_fail "the veth's other end received $wire frames: the ranks' sessions went out of the port"
tm_expect_rc d 0 &&
    tm_check d "d['port']['tx'] == 0" "d['packets_local'] > 0" "d['packets_local'] == d['packets_tx']" \
        "d['bytes_local'] == 64 * d['packets_local']" \
        "d['reliability']['retx_pkts'] == 0" "d['service']['failed'] == 0"

# Last, on a daemon of its own (its messages fail by design): a group
# destroyed while its engine thread finishes operations whose tensors only it
# holds. The destructor held the GIL and joined a thread waiting for it
# (3 of 3 runs hung before the fix, none after).
daemon td
TT_INLINE_RANKS=0,2 run mix4 4 "$TT_DIR/ops.py" 1,4096,65543 float32,int64
report mix4 "4 ranks on one daemon, 2 of them inline, 2 by reference"
RUN_TIMEOUT=60 run td 2 "$TT_DIR/teardown.py" 20
if [ "$RC" -eq 0 ] && grep -q "ok teardown" "$TM_WORK/td.out"; then
    tm_log "ok: 2 ranks destroy 20 groups each with 64 operations in flight: $(grep -m1 -o 'ok teardown.*' "$TM_WORK/td.out")"
else
    tm_fail "groups destroyed with operations in flight: torchrun exit $RC (124: a rank never exited)"
    grep -v '^\[' "$TM_WORK/td.out" | tail -n 20 | sed 's/^/    /'
fi
kill -INT "$PID"
wait "$PID"
tm_finish
