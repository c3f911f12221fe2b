#!/usr/bin/env bash
# net_null: tx throughput. net_null swallows every tx packet and its rx returns
# junk frames (whatever sits in the pool's mbufs, cut to 64 bytes): every one
# of them must be dropped as malformed and none may complete anything. The
# sender runs without flow control (credits would never come back) and the run
# ends at --duration, incomplete by design: exit code 1.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

# Every message sent within --duration: 1 s, which a sanitizer build's
# TM_SAN_SLOW times slower sender does not make (ASan+UBSan: 16116 of the
# 20000 messages in 1 s, 0.048 Mpps, beside the junk it drops; the release
# build sends them all and drops 77 M junk frames in that second).
for mode in message packet; do
    name=null_$mode
    tm_run "$name" 30 -- --vdev=net_null0 -l 0,1 -- \
        --flows 4 --messages 5000 --msg-size 4096 --completion $mode \
        --flow-control off --duration "$TM_SAN_SLOW" --stats-period 0
    tm_expect_rc "$name" 1 || continue # every message sent, none completed
    pkts=$(tm_pkts 4096 1500)
    tm_check "$name" \
        "d['messages_requested'] == 20000" \
        "d['messages_sent'] == 20000" \
        "d['packets_tx'] == 20000 * $pkts" \
        "d['tx_dropped'] == 0" \
        "d['packets_rx'] > 0" \
        "d['drops_total'] == d['packets_rx']" \
        "sum(d['drops'].values()) == d['packets_rx']" \
        "d['packets_placed'] == 0" \
        "d['completion_writes'] == 0" \
        "d['messages_completed'] == 0" \
        "d['verify_errors'] == 0" \
        "d['mpps'] > 0" \
        "d['ok'] is False" &&
        tm_log "ok: $name: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['packets_tx'], 'packets tx,', d['packets_rx'], 'junk rx, dropped as', {k: v for k, v in d['drops'].items() if v})" "$TM_WORK/$name.json")"
done

# --replay: ready-made packet groups, each set sent again once net_null's
# free marked it reusable (drivers/replay_pool.h): every message's packets
# exactly once, none lost to a set still in use.
tm_run null_replay 30 -- --vdev=net_null0,no-rx=1 -l 0,1 -- \
    --flows 4 --messages 5000 --msg-size 4096 --ring-size 16 --flow-control off --replay on \
    --duration 1 --stats-period 0
if tm_expect_rc null_replay 1; then
    pkts=$(tm_pkts 4096 1500)
    tm_check null_replay \
        "d['packets_tx'] == 20000 * $pkts" \
        "d['tx_dropped'] == 0" \
        "d['messages_completed'] == 0" &&
        tm_log "ok: null_replay: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['packets_tx'])" "$TM_WORK/null_replay.json") ready-made packets, each set reused once freed"
fi

# One flow of one-packet messages on its lcore: the replay's own loop
# (replay_run) stops exactly at --messages.
tm_run null_replay64 30 -- --vdev=net_null0,no-rx=1 -l 0,1 -- \
    --flows 1 --messages 100000 --msg-size 64 --ring-size 64 --flow-control off --replay on \
    --duration 1 --stats-period 0
if tm_expect_rc null_replay64 1; then
    tm_check null_replay64 \
        "d['packets_tx'] == 100000" \
        "d['tx_dropped'] == 0" &&
        tm_log "ok: null_replay64: 100000 ready-made one-packet messages, no more"
fi

# Sizes in turn, to a sink: one-packet messages and a 3000-byte one, each
# message's packets exactly once.
tm_run null_mix 30 -- --vdev=net_null0,no-rx=1 -l 0,1 -- \
    --flows 2 --messages 20000 --msg-size 64,64,64,3000 --flow-control off --duration 1 --stats-period 0
if tm_expect_rc null_mix 1; then
    tm_check null_mix \
        "d['messages_sent'] == 40000" \
        "d['packets_tx'] == 2 * 5000 * (3 + $(tm_pkts 3000 1500))" \
        "d['tx_dropped'] == 0" &&
        tm_log "ok: null_mix: 40000 messages of 64 and 3000 B to a sink, $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['packets_tx'])" "$TM_WORK/null_mix.json") packets"
fi

# Throughput: 64-byte messages until the time limit.
tm_run null_rate 30 -- --vdev=net_null0 -l 0,1 -- \
    --flows 4 --messages 0 --msg-size 64 --flow-control off --duration 1 --stats-period 0
if tm_expect_rc null_rate 1; then
    tm_check null_rate \
        "d['messages_sent'] > 0" \
        "d['packets_tx'] == d['messages_sent']" \
        "d['tx_dropped'] == 0" \
        "d['drops_total'] == d['packets_rx']" \
        "d['completion_writes'] == 0" &&
        tm_log "ok: null_rate: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{d['mpps']:.3f} Mpps tx of 64 B messages ({d['messages_sent']} in {d['elapsed_s']:.2f} s, with {d['packets_rx']} junk rx dropped)\")" "$TM_WORK/null_rate.json")"
fi

tm_finish
