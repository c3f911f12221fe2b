#!/usr/bin/env bash
# A receiver restarted in the middle of a transfer (two processes over
# net_af_packet on a veth pair between two namespaces this test creates).
#
# The sender runs an endless transfer; receiver 1 is stopped (SIGTERM) once
# it has consumed a few thousand messages; receiver 2 starts on the same
# port. It holds no session: the sender's data there are unknown flows, and
# the sender's next liveness probe (an authenticated KEEPALIVE) is answered
# with an authenticated RESET echoing the probe's nonce, so the sender knows
# the receiver restarted and gives the session's flows up.
#
# Exact, per flow:
#   - receiver 1 verified every message it consumed ([0, released1));
#   - the sender's delivered messages [0, released) were all consumed by
#     receiver 1 (released <= released1): nothing reported delivered is lost;
#   - every other message the flow owed is reported failed (failed ==
#     messages - released), reason receiver_restarted; the ones receiver 1
#     consumed but could not confirm in time (released1 - released, at most a
#     window) are among them: "failed" means "not confirmed", never "lost
#     silently";
#   - receiver 2 completed nothing.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root

tm_af_pair rs
F=2
M=100000000
RING=32
COMMON=(--flows $F --messages $M --msg-size 64,4096,20000 --ring-size $RING --exit-when-done --secret $TM_SECRET)

receiver() { # NAME DURATION
    tm_start "$1" $(($2 + 30)) ns "$NB" -- $VDEV_B -l 1 -- --mode recv \
        --src-ip $IP_B "${COMMON[@]}" \
        --duration "$2" --stats-period 0.05
}

receiver recv1 60
R1=$TM_PID
# A high retry limit: the flows must fail because the receiver restarted,
# not because receiver 2 took long to start.
tm_start send 90 ns "$NA" -- $VDEV_A -l 0 -- --mode send \
    --src-ip $IP_A --dst-ip $IP_B "${COMMON[@]}" \
    --duration 60 --stats-period 0 --retry-limit 30
S=$TM_PID

consumed_enough() {
    grep -Eo 'completed=[0-9]+' "$TM_WORK/recv1.out" 2>/dev/null | tail -1 | awk -F= '{exit !($2 >= 5000)}'
}
tm_await recv1 "$R1" 30 consumed_enough "did not consume 5000 messages"
kill -TERM "$R1"
wait "$R1"
TM_RC=$?
tm_expect_rc recv1 1 # stopped before --messages: incomplete, by design

receiver recv2 5
R2=$TM_PID
wait "$S"
TM_RC=$?
tm_expect_rc send 1
wait "$R2"

tm_check recv1 \
    "d['verify_errors'] == 0" \
    "d['messages_verified'] == d['messages_completed'] == sum(f['released'] for f in d['per_flow'])" \
    "d['messages_completed'] >= 5000" \
    "d['exit_reason'] == 'signal'"
tm_check recv2 "d['messages_completed'] == 0" "d['completion_writes'] == 0" "d['session']['established'] == 0"
tm_check send \
    "d['flows_failed'] == $F" \
    "all(f['state'] == 'receiver_restarted' for f in d['per_flow'])" \
    "all(f['failed'] == $M - f['released'] for f in d['per_flow'])" \
    "d['messages_failed'] == sum($M - f['released'] for f in d['per_flow'])"
tm_check_pair send recv1 \
    "all(s['per_flow'][i]['released'] <= r['per_flow'][i]['released'] for i in range($F))" \
    "all(r['per_flow'][i]['released'] - s['per_flow'][i]['released'] <= $RING for i in range($F))" \
    "all(r['per_flow'][i]['released'] <= s['per_flow'][i]['sent'] for i in range($F))" &&
    tm_log "ok: receiver restarted after $(python3 -c "import json;print(json.load(open('$TM_WORK/recv1.json'))['messages_completed'])") verified messages;" \
        "the sender confirmed $(python3 -c "import json;print(sum(f['released'] for f in json.load(open('$TM_WORK/send.json'))['per_flow']))")," \
        "reported every other message failed (receiver_restarted); receiver 2 completed nothing"
tm_finish
