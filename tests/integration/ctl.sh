#!/usr/bin/env bash
# tailmark-ctl end to end against a real `tailmarkd --mode service` on
# net_ring (one daemon carries both ends, as in cat.sh): the status with
# nothing attached, a listening application, then a session of two flows
# carrying exactly 10 messages of 4 KiB (tailmark-cat from a fifo the test
# holds open, so the session stays up while it is looked at), watch mode,
# the end, and the errors (no daemon, a user the socket refuses, usage).
# Every figure that is exact here is asserted exactly: ids, pids, names,
# ports, roles, states, flows, messages sent, delivered and released, and
# that tailmark-ctl's own connections leave no trace in the daemon's log.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
ctl=${TAILMARK_CTL:-$TM_SRC/build/app/tailmark-ctl/tailmark-ctl}
cat_bin=${TAILMARK_CAT:-$TM_SRC/build/app/tailmark-cat/tailmark-cat}
[ -x "$ctl" ] || { tm_log "not built: $ctl"; exit 1; }
sock=$TM_WORK/d.sock

tm_start d 120 -- --vdev=net_ring0 -l 0,1 -- --mode service --control-socket "$sock" --insecure --stats-period 0
DPID=$TM_PID
up() { grep -q "applications attach on" "$TM_WORK/d.err" 2>/dev/null && [ -S "$sock" ]; }
tm_await d "$DPID" 30 up "the daemon never listened on its socket"
daemon_pid=$(ps -o pid= --ppid "$DPID" | tr -d ' ')

# js NAME 'python expr'...: each holds on the JSON in $TM_WORK/NAME.json (bound to d).
js() {
    local name=$1 out
    shift
    if ! out=$(python3 - "$TM_WORK/$name.json" "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
bad = 0
for e in sys.argv[2:]:
    try:
        ok = eval(e, {"d": d})
    except Exception as x:
        ok, e = False, f"{e}  ({type(x).__name__}: {x})"
    if not ok:
        bad += 1
        print(f"    does not hold: {e}")
if bad:
    print("    the JSON: " + json.dumps(d)[:3000])
sys.exit(1 if bad else 0)
EOF
    ); then
        tm_fail "$name: JSON assertions"
        printf '%s\n' "$out"
        return 1
    fi
    tm_log "ok: $name"
}

# ask NAME ARGS...: tailmark-ctl --socket $sock ARGS > NAME.json, exit 0 wanted.
ask() {
    local name=$1
    shift
    if ! "$ctl" --socket "$sock" "$@" >"$TM_WORK/$name.json" 2>"$TM_WORK/$name.err"; then
        tm_fail "$name: tailmark-ctl $* exited $?: $(cat "$TM_WORK/$name.err")"
        return 1
    fi
}

# Nothing attached.
ask idle status --json &&
    js idle "d['schema'] == 1" \
        "d['daemon']['pid'] == $daemon_pid" \
        "d['daemon']['mode'] == 'service'" \
        "(d['daemon']['abi'], d['daemon']['abi_minor']) == (2, 3)" \
        "d['daemon']['control_socket'] == '$sock'" \
        "d['daemon']['local_ip'] == '198.18.0.1' and d['daemon']['udp_port'] == 47474 and d['daemon']['mtu'] == 1500" \
        "d['daemon']['zero_copy'] is True" \
        "[(p['port'], p['name'], p['driver'], p['role']) for p in d['ports']] == [(0, 'net_ring0', 'net_ring', 'data'), (1, 'net_ring_tmlocal', 'net_ring', 'local')]" \
        "d['apps'] == [] and d['sessions'] == []" \
        "d['drops']['total'] == 0 and d['drops']['tx_dropped'] == 0" \
        "sum(d['drops']['by_reason'].values()) == 0 and 'crc_mismatch' in d['drops']['by_reason']" \
        "d['service']['attached'] == 0 and d['service']['refused_peer'] == 0"
"$ctl" --socket "$sock" >"$TM_WORK/idle.txt" 2>&1 || tm_fail "status (text) exited $?"
for re in "^tailmarkd 0.1.0, pid $daemon_pid, --mode service, up [0-9]+ s: 198.18.0.1 udp 47474, MTU 1500, zero copy; socket $sock \\(channel ABI 2.3\\)\$" \
    '^  0    net_ring0 +net_ring +data +up' '^apps \(0\)$' '^sessions \(0\)$' '^drops: total 0, tx_dropped 0$'; do
    grep -qE -- "$re" "$TM_WORK/idle.txt" || { tm_fail "status (text): no line matching $re"; cat "$TM_WORK/idle.txt"; }
done

# A listener.
export TAILMARK_SOCKET=$sock
timeout 60 "$cat_bin" --listen 7000 --msg-size 4k --flows 2 --quiet >"$TM_WORK/received" 2>"$TM_WORK/listen.err" &
lpid=$!
tm_wait_for 20 grep -q "listens on port 7000$" "$TM_WORK/d.err" || tm_fail "no listener on port 7000"
lcat=$(ps -o pid= --ppid $lpid | tr -d ' ') # tailmark-cat, under timeout
ask listening apps --json &&
    js listening "len(d) == 1" "d[0]['name'] == 'tailmark-cat' and d[0]['pid'] == $lcat" \
        "d[0]['listening'] == [7000] and d[0]['sessions'] == 0 and d[0]['uid'] == $(id -u)" \
        "d[0]['zero_copy'] is True and d[0]['arena_bytes'] > 0"
listen_app=$(python3 -c "import json; print(json.load(open('$TM_WORK/listening.json'))[0]['id'])" 2>/dev/null)

# A sender of exactly 10 messages of 4 KiB on 2 flows, its stdin held open.
mkfifo "$TM_WORK/feed"
timeout 60 "$cat_bin" --connect 198.18.0.1:7000 --msg-size 4k --flows 2 --quiet <"$TM_WORK/feed" 2>"$TM_WORK/send.err" &
spid=$!
exec 3>"$TM_WORK/feed"
tm_wait_for 5 bash -c "ps -o pid= --ppid $spid | grep -q ." || tm_fail "the sender did not start"
scat=$(ps -o pid= --ppid $spid | tr -d ' ')
head -c $((10 * 4096)) /dev/urandom >"$TM_WORK/sent"
cat "$TM_WORK/sent" >&3
delivered() {
    "$ctl" --socket "$sock" sessions --json >"$TM_WORK/s.json" 2>/dev/null &&
        python3 -c "import json,sys; d=json.load(open('$TM_WORK/s.json')); sys.exit(0 if any(s['role']=='connector' and s['delivered']==10 for s in d) else 1)"
}
tm_wait_for 20 delivered || tm_fail "the connector never showed 10 messages delivered"
ask live status --json &&
    js live "len(d['apps']) == 2 and sorted(a['pid'] for a in d['apps']) == sorted([$lcat, $scat])" \
        "all(a['sessions'] == 1 for a in d['apps'])" \
        "len(d['sessions']) == 2" \
        "sorted(s['role'] for s in d['sessions']) == ['acceptor', 'connector']" \
        "all(s['peer'] == '198.18.0.1:47474' and s['service'] == 7000 and s['flows'] == 2 for s in d['sessions'])" \
        "all(s['state'] == 'established' and s['end'] == 'none' and s['up_s'] > 0 for s in d['sessions'])" \
        "all(s['ring_size'] == 64 and s['max_msg'] == 4096 for s in d['sessions'])" \
        "[s['app'] for s in d['sessions'] if s['role'] == 'acceptor'] == [$listen_app]" \
        "[s['app'] for s in d['sessions'] if s['role'] == 'connector'] == [a['id'] for a in d['apps'] if a['pid'] == $scat]" \
        "[(s['sent'], s['acked'], s['released'], s['delivered'], s['failed']) for s in d['sessions'] if s['role'] == 'connector'] == [(10, 10, 10, 10, 0)]" \
        "[s['released'] for s in d['sessions'] if s['role'] == 'acceptor'] == [10]" \
        "d['service']['attached'] == 2 and d['service']['taken'] == 10 and d['service']['delivered'] == 10" \
        "d['drops']['total'] == 0" \
        "[p['tx_packets'] for p in d['ports'] if p['role'] == 'local'][0] > 0"
cmp -s "$TM_WORK/sent" "$TM_WORK/received" || tm_fail "the listener's output is not the 40960 bytes sent (yet)"

# The text tables, and watch mode: 3 rounds of sessions, 2 of JSON lines.
fails=$TM_FAILS
"$ctl" --socket "$sock" sessions >"$TM_WORK/sessions.txt" || tm_fail "sessions (text) exited $?"
grep -qE '^  [0-9]+ +[0-9]+ +connector 198\.18\.0\.1:47474 +7000 +established +2 +- +[0-9]+ +- +[0-9]+ +10 +10 +0$' \
    "$TM_WORK/sessions.txt" || { tm_fail "sessions (text): no connector row"; cat "$TM_WORK/sessions.txt"; }
"$ctl" --socket "$sock" --interval 0.2 --count 3 sessions >"$TM_WORK/watch.txt" || tm_fail "--interval exited $?"
[ "$(grep -c '^--- .* (every 0.2 s)$' "$TM_WORK/watch.txt")" -eq 3 ] && [ "$(grep -c '^sessions (2)$' "$TM_WORK/watch.txt")" -eq 3 ] ||
    { tm_fail "--interval 0.2 --count 3: not 3 rounds"; cat "$TM_WORK/watch.txt"; }
"$ctl" --socket "$sock" --json --interval 0.2 --count 2 apps >"$TM_WORK/watch.json" || tm_fail "--json --interval exited $?"
python3 -c "
import json, sys
lines = open('$TM_WORK/watch.json').read().splitlines()
sys.exit(0 if len(lines) == 2 and all(len(json.loads(l)) == 2 for l in lines) else 1)" ||
    { tm_fail "--json --interval 0.2 --count 2: not 2 lines of 2 apps"; cat "$TM_WORK/watch.json"; }
[ "$TM_FAILS" -eq "$fails" ] && tm_log "ok: text tables and watch mode"

# The end: the sender's EOF, both exit 0, nothing left.
exec 3>&-
wait $spid || tm_fail "the sender exited $?"
wait $lpid || tm_fail "the listener exited $?"
cmp -s "$TM_WORK/sent" "$TM_WORK/received" || tm_fail "the listener's output differs from what was sent"
empty() {
    "$ctl" --socket "$sock" --json >"$TM_WORK/after.json" 2>/dev/null &&
        python3 -c "import json,sys; d=json.load(open('$TM_WORK/after.json')); sys.exit(0 if not d['apps'] and not d['sessions'] else 1)"
}
tm_wait_for 10 empty || tm_fail "apps or sessions left after both ended"
js after "d['service']['attached'] == 2" "d['service']['failed'] == 0 and d['service']['delivered'] == 11"
# tailmark-ctl's connections (more than 15 so far) are not applications: the
# log has the two tailmark-cats' lines only.
n=$(grep -c "memory released" "$TM_WORK/d.err")
[ "$n" -eq 2 ] || { tm_fail "the daemon logged $n 'memory released' lines, want 2 (the two tailmark-cats)"; grep "service: app" "$TM_WORK/d.err"; }

# Errors: no daemon, a user the socket refuses, a bad command line.
fails=$TM_FAILS
"$ctl" --socket "$TM_WORK/nothing.sock" status >"$TM_WORK/e1.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "^tailmark-ctl: cannot connect to $TM_WORK/nothing.sock: No such file or directory (is tailmarkd --mode service running?" "$TM_WORK/e1.out" ||
    { tm_fail "no daemon: exit $rc"; cat "$TM_WORK/e1.out"; }
if [ "$(id -u)" -eq 0 ]; then
    chmod o+x "$TM_WORK"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$ctl" --socket "$sock" >"$TM_WORK/e2.out" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q "^tailmark-ctl: cannot connect to $sock: Permission denied (the socket is its --allow-group's" "$TM_WORK/e2.out" ||
        { tm_fail "uid 65534: exit $rc"; cat "$TM_WORK/e2.out"; }
fi
"$ctl" --interval 0 >"$TM_WORK/e3.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "^tailmark-ctl: --interval: '0' is not a number of seconds in \[0.1, 86400\]$" "$TM_WORK/e3.out" ||
    { tm_fail "--interval 0: exit $rc"; cat "$TM_WORK/e3.out"; }
[ "$TM_FAILS" -eq "$fails" ] && tm_log "ok: errors (no daemon: 1, refused user: 1, usage: 2)"

kill -INT "$DPID"
wait "$DPID"
TM_RC=$?
tm_expect_rc d 0
tm_finish
