#!/usr/bin/env bash
# A daemon that serves session after session keeps only what it needs (issue
# 35): one `tailmarkd --mode service --keep-ended 2` on net_ring, and 3
# rounds of 10 tailmark-cat transfers between two of its applications, each
# transfer two sessions of 4 flows (the listener's and the sender's), with
# 3 s between rounds, so the ended sessions beyond the last 2 are
# forgotten (once a second, a second after they went) and their registry
# slots serve the next round's flows. Every stream arrives byte for byte.
# From the summary at SIGINT, exactly:
#  - flows_made 240 (30 x 2 x 4), slots_reused == flows_made - slots, and
#    slots at most one round's flows and the 2 kept sessions' (88): without
#    reuse, slots would be 240;
#  - sessions_forgotten 58 (60 ended, 2 kept), and the summary lists the
#    2 kept sessions and their 8 flows;
#  - no flow failed, nothing owed;
#  - bytes_payload is the applications' payload sent, 30 x 300000 B (it
#    read 0 in service mode, as did the stats line's gbps).
source "$(dirname "$0")/lib.sh"
tm_require_daemon
cat_bin=${TAILMARK_CAT:-$TM_SRC/build/app/tailmark-cat/tailmark-cat}
[ -x "$cat_bin" ] || { tm_log "not built: $cat_bin"; exit 1; }
sock=$TM_WORK/d.sock
export TAILMARK_SOCKET=$sock
ROUNDS=3 PER=10 FLOWS=4

tm_start d 300 -- --vdev=net_ring0 -l 0,1 -- --mode service --control-socket "$sock" --insecure --stats-period 0 \
    --keep-ended 2
DPID=$TM_PID
up() { grep -q "applications attach on" "$TM_WORK/d.err" 2>/dev/null && [ -S "$sock" ]; }
tm_await d "$DPID" 30 up "the daemon never listened on its socket"

head -c 300000 /dev/urandom >"$TM_WORK/in"
port=7000
bad=0
for ((r = 0; r < ROUNDS; r++)); do
    for ((k = 0; k < PER; k++)); do
        port=$((port + 1)) # a port each: a listener's LISTEN is never confused with the last one's
        before=$(grep -c "listens on port $port\$" "$TM_WORK/d.err")
        timeout 60 "$cat_bin" --listen $port --quiet --flows $FLOWS >"$TM_WORK/out" 2>"$TM_WORK/listen.err" &
        lpid=$!
        tm_wait_for 20 bash -c "[ \$(grep -c 'listens on port $port\$' '$TM_WORK/d.err') -gt $before ]" ||
            { tm_fail "round $r: no listener on port $port"; bad=1; break 2; }
        timeout 60 "$cat_bin" --connect 198.18.0.1:$port --quiet --flows $FLOWS <"$TM_WORK/in" 2>"$TM_WORK/send.err"
        src=$?
        wait $lpid
        lrc=$?
        if [ $src -ne 0 ] || [ $lrc -ne 0 ] || ! cmp -s "$TM_WORK/in" "$TM_WORK/out"; then
            tm_fail "round $r transfer $k: send exit $src, listen exit $lrc, $(stat -c %s "$TM_WORK/out") of 300000 bytes"
            sed 's/^/  send: /' "$TM_WORK/send.err" >&2
            sed 's/^/  listen: /' "$TM_WORK/listen.err" >&2
            bad=1
            break 2
        fi
    done
    sleep 3
done
[ $bad -eq 0 ] && tm_log "ok: $((ROUNDS * PER)) transfers of 300000 bytes over $FLOWS flows, each byte for byte"

kill -INT "$DPID"
wait "$DPID"
TM_RC=$?
tm_expect_rc d 0 &&
    tm_check d "d['registry']['flows_made'] == $((ROUNDS * PER * 2 * FLOWS))" \
        "d['registry']['slots_reused'] == d['registry']['flows_made'] - d['registry']['slots']" \
        "d['registry']['slots'] <= $(((PER + 1) * 2 * FLOWS))" \
        "d['registry']['sessions_forgotten'] == $((ROUNDS * PER * 2 - 2))" \
        "len(d['sessions']) == 2" "len(d['per_flow']) == 2 * $FLOWS" \
        "d['flows_failed'] == 0" "d['messages_failed'] == 0" \
        "d['bytes_payload'] == $((ROUNDS * PER)) * 300000" "d['gbps'] > 0" &&
    tm_log "ok: $(python3 -c "import json; print(json.load(open('$TM_WORK/d.json'))['registry'])")"
tm_finish
