#!/usr/bin/env bash
# Life cycle. SIGTERM (then SIGINT) on a daemon running with --messages 0:
# the test waits, by polling its stats lines, until messages are completing,
# then signals it. Every loop stops, the in-flight messages drain, the summary
# is printed and written, the exit is clean (0: everything sent was completed
# and verified), the EAL files are gone, and a second run right after -- on
# the same --file-prefix -- works. Also: --duration ends an endless run
# cleanly, and a second signal stops at once.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

EAL=(--vdev=net_ring0 -l 0,1)

# progress NAME: a stats line shows completed messages.
progress() { grep -qE '^stats .* completed=[1-9]' "$TM_WORK/$1.out" 2>/dev/null; }

# signal_run NAME SIGNAL [options...]
signal_run() {
    local name=$1 sig=$2
    shift 2
    tm_start "$name" 30 -- "${EAL[@]}" -- --messages 0 --stats-period 0.1 "$@"
    local tpid=$TM_PID dpid
    if ! tm_wait_for 20 progress "$name"; then
        tm_fail "$name: no progress within 20 s"
        kill -KILL "$tpid" 2>/dev/null
        wait "$tpid"
        tm_show "$name"
        return 1
    fi
    dpid=$(pgrep -P "$tpid") # the daemon itself, child of `timeout`
    kill "-$sig" "$dpid"
    wait "$tpid"
    TM_RC=$?
    tm_expect_rc "$name" 0 || return 1
    tm_check "$name" \
        "d['exit_reason'] == 'signal'" \
        "d['messages_sent'] > 0" \
        "d['messages_completed'] == d['messages_sent']" \
        "d['messages_verified'] == d['messages_sent']" \
        "d['verify_errors'] == 0" \
        "d['tx_dropped'] == 0" \
        "d['ok'] is True" || return 1
    grep -q '^summary: ' "$TM_WORK/$name.out" || { tm_fail "$name: no human summary on stdout"; return 1; }
    local p=${TM_PREFIXES[-1]}
    if [ -e "/var/run/dpdk/$p" ] || compgen -G "/dev/hugepages/${p}map_*" >/dev/null; then
        tm_fail "$name: EAL files of $p left behind"
        return 1
    fi
    tm_log "ok: $name: SIG$sig after $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{d['messages_completed']} messages, drained and summarised\")" "$TM_WORK/$name.json")"
}

export TM_FIXED_PREFIX="tm_it_lifecycle_$$"
signal_run sigterm TERM
# A second run right after, on the same --file-prefix.
tm_run again 30 -- "${EAL[@]}" -- --messages 2000 --exit-when-done --stats-period 0
tm_expect_rc again 0 && tm_transfer_checks again 4 2000 4096 1500 message && tm_log "ok: second run right after"
signal_run sigint INT --completion packet --msg-size 64k --ring-size 8
unset TM_FIXED_PREFIX

# --duration ends an endless run: drained, complete, exit 0.
tm_run duration 30 -- "${EAL[@]}" -- --messages 0 --duration 1 --stats-period 0
tm_expect_rc duration 0 && tm_check duration \
    "d['exit_reason'] == 'duration'" "d['messages_sent'] > 0" \
    "d['messages_completed'] == d['messages_sent']" "d['verify_errors'] == 0" \
    "0.9 < d['elapsed_s'] < 2.0" && tm_log "ok: --duration 1 stops an endless run"

# Two signals: the second stops without waiting for the drain. net_null never
# completes anything, so the drain could only end by its own timeout.
tm_start twice 30 -- --vdev=net_null0 -l 0,1 -- --messages 0 --flow-control off --stats-period 0.1
tpid=$TM_PID
if tm_wait_for 20 grep -q '^stats ' "$TM_WORK/twice.out"; then
    dpid=$(pgrep -P "$tpid")
    kill -TERM "$dpid"
    tm_wait_for 5 grep -q 'draining' "$TM_WORK/twice.err"
    kill -TERM "$dpid" 2>/dev/null
    wait "$tpid"
    TM_RC=$?
    tm_expect_rc twice 1 && tm_check twice "d['exit_reason'] == 'signal'" "d['elapsed_s'] < 25" &&
        tm_log "ok: a second signal stops at once"
else
    tm_fail "twice: no stats line"
    kill -KILL "$tpid"
    wait "$tpid"
fi

tm_finish
