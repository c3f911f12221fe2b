#!/usr/bin/env bash
# client_cat_loopback: tailmark-cat end to end through fake_tailmarkd (the
# daemon's side of channel_abi.h with a loopback for a data plane): streams
# of several sizes, flows and message sizes arrive byte for byte; a session
# that fails makes both ends exit 1 with a line saying why; usage errors
# exit 2 naming the option. No DPDK, no network, no root.
#   cat_loopback.sh TAILMARK_CAT FAKE_TAILMARKD
set -uo pipefail
cat_bin=$1 fake=$2
tmp=$(mktemp -d /tmp/tm_cat.XXXXXX)
fake_pid=
cleanup() {
    [ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
sock=$tmp/d.sock
export TAILMARK_SOCKET=$sock
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# Waits (bounded) until the fake daemon's log has a line matching $1.
await_log() {
    local i
    for i in $(seq 1 200); do
        grep -q "$1" "$tmp/fake.log" && return 0
        sleep 0.05
    done
    echo "timed out waiting for '$1' in the fake daemon's log" >&2
    cat "$tmp/fake.log" >&2
    return 1
}

start_fake() {
    : >"$tmp/fake.log"
    env "$@" "$fake" "$sock" >"$tmp/fake.log" 2>&1 &
    fake_pid=$!
    await_log "^ready"
}
stop_fake() {
    kill "$fake_pid" 2>/dev/null
    wait "$fake_pid" 2>/dev/null
    fake_pid=
}

# Waits (bounded) until the fake daemon's log has more than $2 lines matching $1.
await_count() {
    local i
    for i in $(seq 1 200); do
        [ "$(grep -c "$1" "$tmp/fake.log")" -gt "$2" ] && return 0
        sleep 0.05
    done
    echo "timed out waiting for line $(($2 + 1)) matching '$1' in the fake daemon's log" >&2
    return 1
}

# Starts a listener on port 7000 (args: its options) and returns once the
# daemon has its LISTEN; its pid in $lpid.
start_listener() {
    local before
    before=$(grep -c '^listen 7000' "$tmp/fake.log")
    timeout 60 "$cat_bin" --listen 7000 "$@" >"$tmp/out" 2>"$tmp/listen.err" &
    lpid=$!
    await_count '^listen 7000' "$before"
}

# transfer INPUT LISTEN_ARGS... -- CONNECT_ARGS...: a listener, then a sender
# reading INPUT; $send_rc and $listen_rc.
transfer() {
    local input=$1
    shift
    local largs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do largs+=("$1"); shift; done
    shift
    start_listener --quiet "${largs[@]}" || { send_rc=99; listen_rc=99; return; }
    timeout 60 "$cat_bin" --connect 127.0.0.1 "$@" <"$input" 2>"$tmp/send.err"
    send_rc=$?
    wait "$lpid"
    listen_rc=$?
}

start_fake
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

transfer "$tmp/empty" -- --quiet
check_same "an empty stream" "$tmp/empty"
[ "$(grep -c '^connected' "$tmp/fake.log")" -eq 4 ] || fail "expected 4 sessions in the fake daemon's log"

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

# The listener's limits refuse a sender over them: exit 1, the daemon's reason.
start_listener --quiet --msg-size 4K
timeout 60 "$cat_bin" --connect 127.0.0.1 --quiet --msg-size 8K <"$tmp/in5m" 2>"$tmp/send.err"
send_rc=$?
kill "$lpid"; wait "$lpid" 2>/dev/null
if [ "$send_rc" -eq 1 ] && grep -q "refused" "$tmp/send.err"; then
    pass "a refused session: exit 1 ($(cat "$tmp/send.err"))"
else
    fail "a refused session: exit $send_rc, '$(cat "$tmp/send.err")'"
fi
stop_fake

# A session that fails midway: both ends exit 1 with a line.
start_fake FAKE_FAIL_AFTER=10
transfer "$tmp/in5m" -- --quiet --msg-size 64K --ring 4
if [ "$send_rc" -eq 1 ] && grep -q "failed: retry limit reached" "$tmp/send.err"; then
    pass "sender of a failed session: exit 1 ($(cat "$tmp/send.err"))"
else
    fail "sender of a failed session: exit $send_rc, '$(cat "$tmp/send.err")'"
fi
if [ "$listen_rc" -eq 1 ] && grep -q "ended (peer timed out) before the end of the stream" "$tmp/listen.err"; then
    pass "receiver of a failed session: exit 1 ($(cat "$tmp/listen.err"))"
else
    fail "receiver of a failed session: exit $listen_rc, '$(cat "$tmp/listen.err")'"
fi
stop_fake

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

if [ $failures -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "all passed"
