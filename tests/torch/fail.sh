#!/usr/bin/env bash
# Failure is an exception naming its cause, soon, never a hang: three ranks
# all_reduce in a loop (fail.py) under a process group timeout of 120 s; then
#  1. one rank's process is killed (-9): its daemon closes its sessions, and
#     the other two raise naming that rank;
#  2. on fresh ranks, one rank's tailmarkd is killed (-9): the other two
#     raise naming that rank (its sessions time out after the daemons'
#     --peer-timeout-ms, 5 s, or a message to it runs out of retries), and
#     the rank whose daemon died raises naming the daemon's socket.
# Each within BOUND_MS (10 s) of the kill, measured from just before the
# kill to the time fail.py took the exception: far below the timeout, so the
# timeout can't be what raised. A rank that raised keeps its process group
# (fail.py) until every survivor has, so none learns of the loss from
# another survivor's exit.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require
TIMEOUT=120
BOUND_MS=10000
tt_mesh 3

# launch NAME: the three ranks in the background (RP[r]: each one's
# `timeout`, which passes a TERM on to its python).
launch() {
    local name=$1 r
    rm -f "$TM_WORK/$name.store.tailmark" "$TM_WORK/$name.mark".*
    for r in 0 1 2; do
        ip netns exec "${TT_NS[r]}" env RANK=$r WORLD_SIZE=3 TT_STORE="$TM_WORK/$name.store" \
            TAILMARK_SOCKET="${TT_SOCK[r]}" TT_MARK="$TM_WORK/$name.mark" TT_TIMEOUT=$TIMEOUT \
            PYTHONPATH="$TT_PYPATH" OMP_NUM_THREADS=1 \
            timeout -k 5 $((TIMEOUT + 60)) "${TT_PYRUN[@]}" "$TT_DIR/fail.py" >"$TM_WORK/$name.$r.out" 2>&1 &
        RP[r]=$!
    done
    running() { [ -f "$TM_WORK/$name.mark.0" ] && [ -f "$TM_WORK/$name.mark.1" ] && [ -f "$TM_WORK/$name.mark.2" ]; }
    tm_wait_for 60 running || { tm_fail "$name: the ranks never got going"; tt_show_f "$name"; finish "$name" 0 1 2; return 1; }
}
tt_show_f() { local r; for r in 0 1 2; do tm_log "--- $1 rank $r"; tail -n 5 "$TM_WORK/$1.$r.out" | sed 's/^/    /'; done; }

# raised NAME RANK: the rank's `raised at` line (fail.py), if it printed one.
raised() { grep -m1 '^raised at ' "$TM_WORK/$1.$2.out" 2>/dev/null; }

# expect_raise NAME KILLED_NS RANK WANT...: the rank raised within BOUND_MS of
# KILLED_NS (date +%s%N just before the kill), its error matches each WANT
# (a bash regular expression; one that starts with ! must not match), and
# it is not the operation timeout.
# Waits for the line until BOUND_MS + 5 s after the kill.
expect_raise() {
    local name=$1 t0=$2 r=$3 line at ms w bad=""
    shift 3
    # shellcheck disable=SC2317
    have() { raised "$name" "$r" >/dev/null; }
    tm_wait_for $(((t0 / 1000000 + BOUND_MS + 5000 - $(date +%s%3N)) / 1000 + 1)) have
    if ! line=$(raised "$name" "$r"); then
        tm_fail "$name: rank $r did not raise within $((BOUND_MS / 1000 + 5)) s of the kill: $(tail -n 2 "$TM_WORK/$name.$r.out")"
        return
    fi
    at=${line#raised at }
    at=${at%% *}
    ms=$(((at - t0) / 1000000))
    [ "$ms" -le "$BOUND_MS" ] || bad+=" raised $ms ms after the kill (bound $BOUND_MS ms);"
    for w in "$@"; do
        if [ "${w:0:1}" = "!" ]; then
            [[ $line =~ ${w:1} ]] && bad+=" the error matches '${w:1}';"
        else
            [[ $line =~ $w ]] || bad+=" the error does not match '$w';"
        fi
    done
    [[ $line == *"timed out after"* ]] && bad+=" the operation timeout raised it;"
    if [ -n "$bad" ]; then
        tm_fail "$name: rank $r:$bad $(cut -c1-300 <<<"$line")"
    else
        tm_log "ok: $name: rank $r raised $ms ms after the kill: ${line#raised at * after }"
    fi
}

# finish NAME RANK...: lets the ranks exit (fail.py waits for the release
# file); each must exit 3 (raised). One that never raised is stopped.
finish() {
    local name=$1 r rc
    shift
    touch "$TM_WORK/$name.mark.release"
    for r in "$@"; do
        raised "$name" "$r" >/dev/null || kill -TERM "${RP[r]}" 2>/dev/null
        wait "${RP[r]}"
        rc=$?
        [ $rc -eq 3 ] || tm_fail "$name: rank $r exit $rc, want 3 (raised): $(tail -n 2 "$TM_WORK/$name.$r.out")"
    done
}

# 1. A rank's process dies.
if launch rank; then
    t0=$(date +%s%N)
    kill -KILL "$(pgrep -P "${RP[2]}" -f fail.py)" 2>/dev/null
    expect_raise rank "$t0" 0 '(to|from) rank 2 '
    expect_raise rank "$t0" 1 '(to|from) rank 2 '
    finish rank 0 1
    wait "${RP[2]}"
fi

# 2. A rank's daemon dies.
if launch daemon; then
    t0=$(date +%s%N)
    pkill -KILL -f -- "--file-prefix ${TM_PREFIXES[1]}( |$)"
    expect_raise daemon "$t0" 0 '(to|from) rank 1 '
    expect_raise daemon "$t0" 2 '(to|from) rank 1 '
    # Its own daemon, not a session with a peer (which it would blame).
    expect_raise daemon "$t0" 1 "the daemon closed the connection \\(${TT_SOCK[1]}\\)" \
        '!session (to|from) rank [0-9]+ ended'
    finish daemon 0 2 1
fi
kill -INT "${TT_PID[0]}" "${TT_PID[2]}" 2>/dev/null
wait "${TT_PID[0]}" "${TT_PID[2]}"
tm_finish
