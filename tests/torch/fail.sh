#!/usr/bin/env bash
# Failure is an exception, never a hang: three ranks all_reduce in a loop
# (fail.py, process group timeout 20 s); then
#  1. one rank's process is killed (-9): the other two raise (exit 3);
#  2. on fresh ranks, one rank's tailmarkd is killed (-9): the other two,
#     and the rank whose daemon died, raise.
# Each within the timeout of the kill (measured here, in whole seconds);
# each error names the session that ended, or the daemon.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
tt_require
TIMEOUT=20
tt_mesh 3

# launch NAME: the three ranks in the background (pids in RP[r]).
launch() {
    local name=$1 r
    rm -f "$TM_WORK/$name.store.tailmark" "$TM_WORK/$name.mark".*
    for r in 0 1 2; do
        ip netns exec "${TT_NS[r]}" env RANK=$r WORLD_SIZE=3 TT_STORE="$TM_WORK/$name.store" \
            TAILMARK_SOCKET="${TT_SOCK[r]}" TT_MARK="$TM_WORK/$name.mark" TT_TIMEOUT=$TIMEOUT \
            PYTHONPATH="$TT_PYPATH" OMP_NUM_THREADS=1 \
            timeout -k 5 120 "${TT_PYRUN[@]}" "$TT_DIR/fail.py" >"$TM_WORK/$name.$r.out" 2>&1 &
        RP[r]=$!
    done
    running() { [ -f "$TM_WORK/$name.mark.0" ] && [ -f "$TM_WORK/$name.mark.1" ] && [ -f "$TM_WORK/$name.mark.2" ]; }
    tm_wait_for 60 running || { tm_fail "$name: the ranks never got going"; tt_show_f "$name"; return 1; }
}
tt_show_f() { local r; for r in 0 1 2; do tm_log "--- $1 rank $r"; tail -n 5 "$TM_WORK/$1.$r.out" | sed 's/^/    /'; done; }

# expect_raise NAME KILLED_AT RANK...: each rank exits 3 within the timeout.
expect_raise() {
    local name=$1 t0=$2 r rc
    shift 2
    for r in "$@"; do
        wait "${RP[r]}"
        rc=$?
        local took=$((SECONDS - t0))
        if [ $rc -ne 3 ]; then
            tm_fail "$name: rank $r exit $rc, want 3 (raised): $(tail -n 2 "$TM_WORK/$name.$r.out")"
        elif [ $took -gt $TIMEOUT ]; then
            tm_fail "$name: rank $r raised $took s after the kill (timeout $TIMEOUT s)"
        else
            tm_log "ok: $name: rank $r raised within $took s: $(tail -n 1 "$TM_WORK/$name.$r.out" | cut -c1-200)"
        fi
    done
}

# 1. A rank's process dies.
if launch rank; then
    kill -KILL "$(pgrep -P "${RP[2]}" -f fail.py)" 2>/dev/null
    t0=$SECONDS
    expect_raise rank $t0 0 1
    wait "${RP[2]}"
fi

# 2. A rank's daemon dies.
if launch daemon; then
    pkill -KILL -f -- "--file-prefix ${TM_PREFIXES[1]}( |$)"
    t0=$SECONDS
    expect_raise daemon $t0 0 2 1
fi
kill -INT "${TT_PID[0]}" "${TT_PID[2]}" 2>/dev/null
wait "${TT_PID[0]}" "${TT_PID[2]}"
tm_finish
