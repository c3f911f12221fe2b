#!/usr/bin/env bash
# tailmark-cat end to end through a real `tailmarkd --mode service` on
# net_ring (no namespace, no root): the daemon connects to its own address,
# so one daemon carries both ends. Streams of several sizes, flows and
# message sizes arrive byte for byte (an empty one, an exact multiple of the
# message size, from a pipe); the progress line (an ETA only when the size
# is known); a refused setting exits 2 with the daemon's reason; usage
# errors exit 2 naming the option; no daemon exits 1 naming the socket; a
# sender on a quiet pipe exits 1 once its receiver is killed. (Sessions
# killed mid-stream: service.sh.)
source "$(dirname "$0")/lib.sh"
tm_require_daemon
cat_bin=${TAILMARK_CAT:-$TM_SRC/build/app/tailmark-cat/tailmark-cat}
[ -x "$cat_bin" ] || { tm_log "not built: $cat_bin"; exit 1; }
tmp=$TM_WORK
sock=$TM_WORK/d.sock
export TAILMARK_SOCKET=$sock
fail() { tm_fail "$*"; }
pass() { tm_log "ok: $*"; }

tm_start d 300 -- --vdev=net_ring0 -l 0,1 -- --mode service --control-socket "$sock" --insecure --stats-period 0
DPID=$TM_PID
up() { grep -q "applications attach on" "$TM_WORK/d.err" 2>/dev/null && [ -S "$sock" ]; }
tm_await d "$DPID" 30 up "the daemon never listened on its socket"

# Starts a listener on port 7000 (args: its options) and returns once the
# daemon has its LISTEN; its pid in $lpid.
start_listener() {
    local before
    before=$(grep -c "listens on port 7000$" "$TM_WORK/d.err")
    timeout 60 "$cat_bin" --listen 7000 "$@" >"$tmp/out" 2>"$tmp/listen.err" &
    lpid=$!
    tm_wait_for 20 bash -c "[ \$(grep -c 'listens on port 7000\$' '$TM_WORK/d.err') -gt $before ]" ||
        fail "no listener on port 7000"
}

# transfer INPUT LISTEN_ARGS... -- CONNECT_ARGS...: a listener, then a sender
# reading INPUT; $send_rc and $listen_rc.
transfer() {
    local input=$1
    shift
    local largs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do largs+=("$1"); shift; done
    shift
    start_listener --quiet "${largs[@]}"
    timeout 60 "$cat_bin" --connect 198.18.0.1 "$@" <"$input" 2>"$tmp/send.err"
    send_rc=$?
    wait "$lpid"
    listen_rc=$?
}

head -c 5000000 /dev/urandom >"$tmp/in5m"
head -c $((3 * 7 * 1024)) /dev/urandom >"$tmp/in_exact"
: >"$tmp/empty"

check_same() {
    local name=$1 input=$2
    if [ "$send_rc" -ne 0 ] || [ "$listen_rc" -ne 0 ]; then
        fail "$name: exit codes send $send_rc listen $listen_rc"
        sed 's/^/  send: /' "$tmp/send.err" >&2
        sed 's/^/  listen: /' "$tmp/listen.err" >&2
    elif ! cmp -s "$input" "$tmp/out"; then
        fail "$name: the output differs from the input ($(stat -c %s "$tmp/out") of $(stat -c %s "$input") bytes)"
    else
        pass "$name ($(stat -c %s "$input") bytes)"
    fi
}

transfer "$tmp/in5m" -- --quiet
check_same "5 MB, defaults" "$tmp/in5m"

transfer "$tmp/in5m" -- --quiet --flows 3 --msg-size 7K --ring 4
check_same "5 MB, 3 flows of 7 KiB messages, ring 4" "$tmp/in5m"

transfer "$tmp/in_exact" -- --quiet --msg-size 7k --flows 2
check_same "an exact multiple of the message size" "$tmp/in_exact"

# The sender keeps --ring messages in flight over all its flows: at --flows
# 8 its arena is 64 x 64 KiB, where a buffer per message of every flow's
# ring took 8 times that.
arenas() { grep -c "'tailmark-cat' (pid [0-9]*) (uid [0-9]*) attached: arena $1 MiB" "$TM_WORK/d.err"; }
a4=$(arenas 4)
transfer "$tmp/in5m" -- --quiet --flows 8 --msg-size 64K
check_same "5 MB, 8 flows of 64 KiB messages" "$tmp/in5m"
[ "$(arenas 4)" -eq $((a4 + 1)) ] || fail "--flows 8 --msg-size 64K: the sender's arena is not 4 MiB ($(grep -o "attached: arena [0-9]* MiB" "$TM_WORK/d.err" | tail -2 | tr '\n' ' '))"

transfer "$tmp/empty" -- --quiet
check_same "an empty stream" "$tmp/empty"
[ "$(grep -c "service: session [0-9]* to .* up" "$TM_WORK/d.err")" -eq 5 ] || fail "expected 5 sessions in the daemon's log"

# From a pipe (no size known: no ETA), with the progress line on.
mkfifo "$tmp/fifo"
cat "$tmp/in5m" >"$tmp/fifo" &
transfer "$tmp/fifo" -- --msg-size 64K
check_same "5 MB from a pipe, progress on" "$tmp/in5m"
if grep -q "ETA" "$tmp/send.err"; then fail "an ETA without a known size"; fi
grep -q "sent 5.0 MB, .* MB/s in .* s" "$tmp/send.err" || { fail "no final progress line"; cat "$tmp/send.err" >&2; }

transfer "$tmp/in5m" -- --msg-size 4K --ring 2
check_same "a regular file with progress: ETA" "$tmp/in5m"
grep -q " of 5.0 MB" "$tmp/send.err" || { fail "no size in the progress line of a regular file"; cat "$tmp/send.err" >&2; }

# The listener's limits refuse a sender over them: exit 2 (a setting), the daemon's reason.
start_listener --quiet --msg-size 4K
timeout 60 "$cat_bin" --connect 198.18.0.1 --quiet --msg-size 8K <"$tmp/in5m" 2>"$tmp/send.err"
send_rc=$?
kill "$lpid"; wait "$lpid" 2>/dev/null
if [ "$send_rc" -eq 2 ] && grep -q "refused by .*: msg_size (theirs 4096, ours 8192)" "$tmp/send.err"; then
    pass "a refused session: exit 2 ($(cat "$tmp/send.err"))"
else
    fail "a refused session: exit $send_rc, '$(cat "$tmp/send.err")'"
fi
# A sender whose pipe stays open and quiet, everything it sent delivered,
# learns that its receiver died: exit 1 within 10 s, not at its producer's
# next byte (it looks at its session while it waits for input).
start_listener --quiet --msg-size 4K
mkfifo "$tmp/quiet.fifo"
timeout 60 "$cat_bin" --connect 198.18.0.1 --quiet --msg-size 4K <"$tmp/quiet.fifo" 2>"$tmp/send.err" &
spid=$!
exec {qfd}>"$tmp/quiet.fifo" # the write end stays open until the case ends
head -c 8192 "$tmp/in5m" >&$qfd # two whole messages
if tm_wait_for 20 size_ge "$tmp/out" 8192; then
    kill -KILL $(pgrep -P "$lpid") "$lpid" # the listener itself, and its timeout
    wait "$lpid" 2>/dev/null
    if tm_wait_for 10 bash -c "! kill -0 $spid 2>/dev/null"; then
        wait "$spid"
        send_rc=$?
        if [ "$send_rc" -eq 1 ] && grep -q "the session ended (.*) before the end of the input" "$tmp/send.err"; then
            pass "a quiet sender whose receiver died: exit 1 ($(cat "$tmp/send.err"))"
        else
            fail "a quiet sender whose receiver died: exit $send_rc, '$(cat "$tmp/send.err")'"
        fi
    else
        fail "a quiet sender whose receiver died still runs after 10 s"
        kill "$spid" 2>/dev/null
    fi
else
    fail "a quiet sender: its 8192 bytes never arrived"
    kill "$spid" "$lpid" 2>/dev/null
fi
exec {qfd}>&-
wait "$spid" 2>/dev/null

# Usage: exit 2, one line naming the option.
usage() {
    local want=$1
    shift
    local err rc
    err=$("$cat_bin" "$@" 2>&1 </dev/null)
    rc=$?
    if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && printf '%s' "$err" | grep -q -- "$want"; then
        pass "usage: $* -> 2, '$err'"
    else
        fail "usage: $* -> $rc, '$err' (wanted 2 and '$want')"
    fi
}
usage "--msg-size" --connect 10.0.0.1 --msg-size 12X
usage "--flows" --listen --flows 0
usage "--ring" --listen --ring 3
usage "--connect" --connect 10.0.0.300
usage "--connect" --connect 10.0.0.1:99999
usage "--listen" --listen 0
usage "unknown option '--bogus'" --listen --bogus
usage "one of --listen" --quiet
"$cat_bin" --help | grep -q "^usage: tailmark-cat" || fail "--help"

# No daemon: exit 1 naming the socket.
err=$("$cat_bin" --socket "$tmp/none.sock" --connect 10.0.0.1 </dev/null 2>&1)
rc=$?
if [ $rc -eq 1 ] && printf '%s' "$err" | grep -q "$tmp/none.sock"; then
    pass "no daemon: exit 1 ($err)"
else
    fail "no daemon: exit $rc, '$err'"
fi

kill -INT "$DPID"
wait "$DPID" || fail "the daemon exited $? on SIGINT"
tm_finish
