#!/usr/bin/env bash
# net_ring loopback (the embedded default): sender and receiver in one
# process, tx queue q looping back to rx queue q. Single-packet and
# multi-packet messages (64 B, 4 KiB, 1 MiB, and the group-cut edge cases),
# several flows, both completion modes, one lcore holding every role and
# flows spread over two rx lcores by queue. Every case asserts the exact
# counts: messages_completed == requested, completion_writes == messages
# (message mode) or == data packets (packet mode), verify_errors == 0, no drop,
# packets_tx == the plan's packet count plus the session's own packets (one
# handshake with itself: CONNECT, RETRY, CONNECT with the cookie, ACCEPT, the
# confirmation, CLOSE), and as
# many received, exit code 0.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

MTU=1500
# name flows messages msg_size ring completion [lcore options...]
cases=(
    "msg64      4 20000 64      64 message"
    "pkt64      4 20000 64      64 packet"
    "msg4k      4 4000  4096    64 message"
    "pkt4k      4 4000  4096    64 packet"
    "msg1m      3 12    1048576 4  message"
    "pkt1m      3 12    1048576 4  packet"
    "zero       2 500   0       16 message"
    "tailfit    2 500   1424    16 packet"
    "stride     2 500   1456    16 packet"
    "tworx      5 3000  4096    32 message --tx-lcores 0,1 --rx-lcores 0,1 --consumer-lcores 0,1"
    "tworxpkt   5 3000  4096    32 packet --tx-lcores 1 --rx-lcores 0,1 --consumer-lcores 0"
)
for c in "${cases[@]}"; do
    read -r name flows msgs size ring mode extra <<<"$c"
    # shellcheck disable=SC2086
    tm_run "$name" 40 -- --vdev=net_ring0 -l 0,1 -- \
        --flows "$flows" --messages "$msgs" --msg-size "$size" --ring-size "$ring" --mtu $MTU \
        --completion "$mode" --exit-when-done --duration 30 --stats-period 0 \
        --keepalive-ms 60000 --peer-timeout-ms 120000 $extra # no probe in the count, however slow (--sanitize)
    tm_expect_rc "$name" 0 || continue
    pkts=$(tm_pkts "$size" $MTU)
    total=$((flows * msgs * pkts))
    tm_transfer_checks "$name" "$flows" "$msgs" "$size" $MTU "$mode" &&
        tm_check "$name" \
            "d['mode'] == 'loopback'" \
            "d['messages_sent'] == $((flows * msgs))" \
            "d['packets_tx'] == $total + d['reliability']['retx_pkts'] + d['control_tx']" \
            "d['packets_rx'] == $total + d['reliability']['retx_rx'] + d['control_rx']" \
            "d['session']['tx'] == 6 and d['session']['rx'] == 6" \
            "d['session']['established'] == 2 and d['session']['refused'] == 0" \
            "d['drops_total'] == d['reliability']['retx_rx']" \
            "d['tx_dropped'] == 0" \
            "d['exit_reason'] == 'done'" &&
        tm_log "ok: $name ($flows flows x $msgs x $size B, $pkts pkt/msg, $mode mode)"
done

# --tx-quantum: a message up to the quantum goes out whole from the queue's one
# buffer; larger ones interleave with other flows in pieces of it. Six flows,
# sizes on both sides of a 64 KiB quantum: a message whose bytes another flow
# overwrote mid-send would fail its CRC (a drop) and be retransmitted.
qsizes=(4096 70000 65536 200000 1)
tm_run quantum 60 -- --vdev=net_ring0 -l 0,1 -- --flows 6 --messages 300 --msg-size "$(IFS=,; echo "${qsizes[*]}")" \
    --tx-quantum 65536 --ring-size 16 --mtu $MTU --exit-when-done --duration 30 --stats-period 0
if tm_expect_rc quantum 0; then
    qbytes=0 qpkts=0
    for z in "${qsizes[@]}"; do
        qbytes=$((qbytes + z))
        qpkts=$((qpkts + $(tm_pkts "$z" $MTU)))
    done
    per=$((300 / ${#qsizes[@]})) # messages of each size per flow
    tm_check quantum \
        "d['messages_completed'] == 1800" \
        "d['messages_verified'] == 1800" \
        "d['verify_errors'] == 0" \
        "d['completion_writes'] == 1800" \
        "d['bytes_payload'] == 6 * $per * $qbytes" \
        "d['packets_placed'] == 6 * $per * $qpkts" \
        "d['packets_tx'] == 6 * $per * $qpkts + d['control_tx']" \
        "d['drops_total'] == 0" \
        "d['reliability']['retx_pkts'] == 0" &&
        tm_log "ok: quantum (6 flows, sizes ${qsizes[*]}, --tx-quantum 65536)"
fi

# Regression: --duration without --exit-when-done, the work done early. The
# rates must be over the time the work was in flight, not the idle rest of
# the run (a run that moved its messages in a fraction of a second reported
# them divided by the whole --duration).
tm_run idle 40 -- --vdev=net_ring0 -l 0,1 -- --flows 2 --messages 2000 --msg-size 1024 --duration 4 --stats-period 0
tm_expect_rc idle 0 &&
    tm_check idle \
        "d['messages_completed'] == 4000" \
        "d['exit_reason'] == 'duration'" \
        "0 < d['elapsed_s'] < 2.0" \
        "abs(d['msgs_per_s'] * d['elapsed_s'] - 4000) < 4" &&
    tm_log "ok: idle: rates over the $(python3 -c "import json;print(round(json.load(open('$TM_WORK/idle.json'))['elapsed_s'], 3))") s of work, not the 4 s run"

# Regression: --replay (the rx benchmark's ready-made packets) never saw its
# work done: it has no Sender flows, so --exit-when-done waited for the
# --duration and the rates were over the whole of it.
tm_run replay 40 -- --vdev=net_ring0 -l 0,1 -- --flows 2 --messages 20000 --msg-size 64 --ring-size 64 \
    --replay on --tx-lcores 0 --rx-lcores 1 --consumer-lcores 0 --exit-when-done --duration 30 --stats-period 0
tm_expect_rc replay 0 &&
    tm_check replay \
        "d['messages_completed'] == 40000" \
        "d['messages_verified'] == 40000" \
        "d['exit_reason'] == 'done'" \
        "abs(d['msgs_per_s'] * d['elapsed_s'] - 40000) < 40" &&
    tm_log "ok: replay: done when every ready-made message was consumed"
# The same with 45-packet groups: a set is sent again only once the receiver
# freed every one of its packets, and each packet keeps its own bytes.
tm_run replay64k 40 -- --vdev=net_ring0 -l 0,1 -- --flows 2 --messages 2000 --msg-size 65536 --ring-size 16 \
    --replay on --tx-lcores 0 --rx-lcores 1 --consumer-lcores 0 --exit-when-done --duration 30 --stats-period 0
tm_expect_rc replay64k 0 &&
    tm_check replay64k \
        "d['messages_completed'] == 4000" \
        "d['messages_verified'] == 4000" \
        "d['verify_errors'] == 0" \
        "d['packets_placed'] == 4000 * $(tm_pkts 65536 1500)" &&
    tm_log "ok: replay64k: 4000 ready-made 64 KiB messages, every byte verified"

# --stream-min: the 64 KiB messages' packets placed by streaming stores, the
# 64 B ones (one packet) by the cached path; a bound one byte over the
# regions streams nothing. Every byte verified either way.
P64K=$(tm_pkts 65536 1500)
for sm in 64K 65537; do
    tm_run stream_$sm 40 -- --vdev=net_ring0 -l 0,1 -- --flows 2 --messages 2000 --msg-size 65536,64 --ring-size 16 \
        --stream-min $sm --exit-when-done --duration 30 --stats-period 0
    want=0
    [ $sm = 64K ] && want=$((2 * 1000 * P64K))
    tm_expect_rc stream_$sm 0 &&
        tm_check stream_$sm \
            "d['messages_completed'] == d['messages_verified'] == 4000" \
            "d['verify_errors'] == 0" \
            "d['drops_total'] == 0" \
            "d['packets_placed'] == 2 * 1000 * ($P64K + 1)" \
            "d['packets_streamed'] == $want" &&
        tm_log "ok: --stream-min $sm: $want of $((2 * 1000 * (P64K + 1))) packets streamed, 4000 messages verified"
done

# Without flow control (a flow without records, each message cut straight
# from the generator's bytes, its cursors moved at its LAST; Sender::one_run
# cuts the one-packet ones in runs): 64, 64, 64 and 3000 bytes in turn, a
# window large enough for all of them, every byte verified. Generated per
# message and, with --payload fixed, ready.
for payload in gen fixed; do
    extra=()
    [ $payload = fixed ] && extra=(--payload fixed)
    tm_run sink_$payload 40 -- --vdev=net_ring0 -l 0,1 -- --flows 2 --messages 4000 --msg-size 64,64,64,3000 \
        --ring-size 4096 --flow-control off --exit-when-done --duration 30 --stats-period 0 "${extra[@]}"
    tm_expect_rc sink_$payload 0 &&
        tm_check sink_$payload \
            "d['messages_completed'] == 8000" \
            "d['messages_verified'] == 8000" \
            "d['verify_errors'] == 0" \
            "d['packets_tx'] == 2 * 1000 * (3 + $(tm_pkts 3000 1500))" \
            "d['packets_rx'] == d['packets_tx']" \
            "d['drops_total'] == 0" &&
        tm_log "ok: sink_$payload: 8000 messages of a flow without records, each verified"
done

# One flow of one-packet messages with the receiver on the tx lcore: the
# replay's own loop (replay_run), runs of messages back to back. Ring size 4
# against a 32-packet burst: a run takes each packet at most once.
for ring in 64 4; do
    tm_run replay_own$ring 40 -- --vdev=net_ring0 -l 0,1 -- --flows 1 --messages 30000 --msg-size 64 \
        --ring-size $ring --replay on --tx-lcores 1 --rx-lcores 1 --consumer-lcores 0 --exit-when-done \
        --duration 30 --stats-period 0
    tm_expect_rc replay_own$ring 0 &&
        tm_check replay_own$ring \
            "d['messages_completed'] == 30000" \
            "d['messages_verified'] == 30000" \
            "d['verify_errors'] == 0" \
            "d['packets_tx'] == d['packets_rx']" \
            "d['packets_placed'] == 30000" \
            "d['drops_total'] == 0" &&
        tm_log "ok: replay_own$ring: 30000 ready-made messages stamped in runs, each verified once"
done

# --trace-slow-ns 1: every completion is over the bound, so every message
# has its timeline, once: the consumer's lcore's last 6 iterations, the one
# it was seen in last, which consumed it and the nth before it.
tm_run trace 40 -- --vdev=net_ring0 -l 0,1 -- --flows 2 --messages 1000 --msg-size 4096 --ring-size 64 \
    --exit-when-done --duration 30 --stats-period 0 --trace-slow-ns 1
tm_expect_rc trace 0 &&
    tm_check trace \
        "d['messages_completed'] == 2000" \
        "d['slow_messages']['seen'] == 2000" \
        "d['slow_messages']['kept'] == 2000" \
        "sorted((m['flow'], m['msg_id']) for m in d['slow_messages']['messages']) == [(f, i) for f in range(2) for i in range(1000)]" \
        "all(len(m['iters']) == 6 for m in d['slow_messages']['messages'])" \
        "all(m['iters'][-1]['cons_msgs'] >= m['nth'] + 1 for m in d['slow_messages']['messages'])" \
        "all(m['latency_ns'] > 0 for m in d['slow_messages']['messages'])" \
        "sum(1 for m in d['slow_messages']['messages'] if m['iters'][-1]['rx_pkts'] > 0) > 0" \
        "set(m['cause'] for m in d['slow_messages']['messages']) <= {'stall', 'burst', 'queued', 'long_step', 'other'}" &&
    tm_log "ok: trace: a timeline for each of the 2000 messages over a 1 ns bound"

# The embedded default with its sample file, as scripts/run.sh runs it (fewer messages).
tm_run default 40 -- --vdev=net_ring0 -l 0,1 -- \
    --config "$TAILMARK_CONFIG_DIR/loopback.ini" --messages 5000 --exit-when-done --stats-period 0
if tm_expect_rc default 0; then
    tm_transfer_checks default 4 5000 4096 1500 message && tm_log "ok: config/loopback.ini"
fi

tm_finish
