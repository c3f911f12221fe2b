#!/usr/bin/env bash
# The interactive shell (-i, --cmdline-file), driven for real:
#   file  - a command file: sends of several sizes on several flows, `wait
#           idle`, exact `show flow` lines, `show drops` all zero, an unknown
#           command and a malformed one (errors, the next command still
#           works), a SIZE beyond the receive region refused, `set fault`
#           checked, `quit`: exit 0 and the summary JSON with exact counts;
#   pipe  - stdin a FIFO: `send 0 65536 100`, then `show flow 0` polled
#           (bounded) until it reports 100 completed; errors; `quit`;
#   sigterm - SIGTERM while the prompt waits on a pipe: clean exit 0;
#   pty   - tmux: the `tailmark> ` prompt, TAB completes `sho` to `show`,
#           a command's output, `quit`.
# No fixed sleep synchronises anything: every wait is a bounded poll.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

EAL=(--vdev=net_ring0 -l 0,1)
# The shell's output, without the terminal's carriage returns.
out() { tr -d '\r' <"$TM_WORK/$1.out"; }
# count NAME FIXED-LINE: how many output lines are exactly that; a `show
# flow` line ("flow N: ...") followed by its rates over the last second,
# whatever they are (rate_sent=R/s rate_done=R/s).
RATES=' rate_sent=[0-9]+/s rate_done=[0-9]+/s'
count() {
    case "$2" in
    "flow "*) out "$1" | grep -cxE -- "$2$RATES" ;;
    *) out "$1" | grep -cxF -- "$2" ;;
    esac
}
expect_count() { # NAME WANT FIXED-LINE
    local n
    n=$(count "$1" "$3")
    if [ "$n" -ne "$2" ]; then
        tm_fail "$1: '$3' printed $n time(s), want $2"
        return 1
    fi
}
# start_stdin NAME STDIN OPTIONS...: tm_start, with the daemon's stdin from
# STDIN (a background job's stdin is /dev/null unless the job redirects it).
start_stdin() {
    local name=$1 in=$2
    shift 2
    local prefix
    prefix=$(tm_prefix "$name")
    TM_PREFIXES+=("$prefix") # tm_prefix ran in a subshell: remember it here for the cleanup
    rm -f "$TM_WORK/$name.json"
    timeout -k 5 30 "$TAILMARKD" "${TM_MEM[@]}" --no-pci --file-prefix "$prefix" --log-level=lib.eal:warning \
        "${EAL[@]}" -- --summary-json "$TM_WORK/$name.json" "$@" \
        <"$in" >"$TM_WORK/$name.out" 2>"$TM_WORK/$name.err" &
    TM_PID=$!
}
expect_grep() { # NAME REGEX
    if ! out "$1" | grep -E -- "$2" >/dev/null; then # no -q: with pipefail, an early exit would SIGPIPE `out`
        tm_fail "$1: no output line matches /$2/"
        return 1
    fi
}

# --- 1. a command file --------------------------------------------------------
cat >"$TM_WORK/cmds.txt" <<'EOF'
show config
send 0 65536 100
wait idle
show flow 0
show drops
no such command
show flow 0
send 0 sixty 1
send 0 65537 1
set fault drop=0.01,dup=0,reorder=0,corrupt=0,seed=7
set fault drop=2,dup=0,reorder=0,corrupt=0
set fault drop=0
set burst 8
send 1 1000 50
send 1 0 3
send 1 65536 10
start
wait idle
stop
show flow 1
show flow 2
show completions 1 2
show drops
show lcores
quit
EOF
tm_run file 30 -- "${EAL[@]}" -- -i --cmdline-file "$TM_WORK/cmds.txt" --msg-size 65536 --messages 20 \
    --stats-period 0 </dev/null
if tm_expect_rc file 0; then
    ok=1
    # 100 sends on flow 0; flow 1: 63 sends of 3 sizes + 20 generator messages; flows 2, 3: 20 each.
    expect_count file 2 "flow 0: sent=100 completed=100 consumed=100 in_flight=0 retransmits=0 send_requested=100 send_queued=0" || ok=0
    expect_count file 1 "flow 1: sent=83 completed=83 consumed=83 in_flight=0 retransmits=0 send_requested=63 send_queued=0" || ok=0
    expect_count file 1 "flow 2: sent=20 completed=20 consumed=20 in_flight=0 retransmits=0 send_requested=0 send_queued=0" || ok=0
    expect_count file 2 "drops: total=0 tx_dropped=0 verify_errors=0" || ok=0
    expect_count file 1 "Command not found" || ok=0
    expect_count file 1 "Bad arguments" || ok=0
    expect_count file 2 "idle" || ok=0
    expect_grep file '^error: send: SIZE 65537 B is larger than the receive region of flow 0 \(65536 B' || ok=0
    expect_grep file '^fault shim: drop=0.01,dup=0,reorder=0,corrupt=0,seed=7 on every rx queue' || ok=0
    expect_grep file "^error: set fault: drop '2' is not a probability in \[0, 1\]" || ok=0
    expect_grep file '^fault shim: drop=0,dup=0,reorder=0,corrupt=0,seed=1 on every rx queue' || ok=0
    expect_grep file '^burst set to 8 packets$' || ok=0
    expect_grep file 'Forward statistics for port 0' || ok=0
    expect_grep file '^generator started: up to 20 messages of 65536 B per flow' || ok=0
    expect_grep file '^lcore 1 \(socket [0-9]+\): tx\(port 0, queues 0 \[flows 0 1 2 3\]\) rx\(port 0, queue 0\) consumer\(flows 0 1 2 3\)$' || ok=0
    # The last two messages of flow 1 (msg_id 81, 82) are complete and consumed.
    expect_grep file '^ +82 +18 0x0000000000000053 +[0-9]+  consumed$' || ok=0
    total=$((100 + 63 + 20 * 4))
    bytes=$((100 * 65536 + 50 * 1000 + 10 * 65536 + 80 * 65536))
    tm_check file \
        "d['messages_requested'] == $total" "d['messages_sent'] == $total" \
        "d['messages_completed'] == $total" "d['messages_verified'] == $total" \
        "d['verify_errors'] == 0" "d['drops_total'] == d['reliability']['retx_rx']" "d['tx_dropped'] == 0" \
        "d['bytes_payload'] == $bytes" "d['exit_reason'] == 'quit'" "d['ok'] is True" || ok=0
    [ $ok = 1 ] && tm_log "ok: file: sends of 65536/1000/0 B with the generator, exact flow lines, errors go on, quit"
fi
[ "$TM_FAILS" -ne 0 ] && tm_show file

# --- 2. a pipe ------------------------------------------------------------------
mkfifo "$TM_WORK/pipe.in"
exec 3<>"$TM_WORK/pipe.in" # read-write: opening never blocks, and the daemon never sees EOF early
start_stdin pipe "$TM_WORK/pipe.in" -i --msg-size 65536 --stats-period 0
pipe_pid=$TM_PID
echo "send 0 65536 100" >&3
done100() {
    echo "show flow 0" >&3
    out pipe | grep -xE "flow 0: sent=100 completed=100 consumed=100 in_flight=0 retransmits=0 send_requested=100 send_queued=0$RATES" >/dev/null
}
if tm_wait_for 20 done100; then
    echo "show flow 0 extra" >&3 # malformed
    echo "show drops" >&3
    tm_wait_for 10 grep -qF "drops: total=0 tx_dropped=0 verify_errors=0" "$TM_WORK/pipe.out" ||
        tm_fail "pipe: no 'show drops' after a malformed command"
    echo "quit" >&3
    wait "$pipe_pid"
    TM_RC=$?
    if tm_expect_rc pipe 0; then
        ok=1
        expect_count pipe 1 "Bad arguments" || ok=0
        tm_check pipe "d['exit_reason'] == 'quit'" "d['messages_sent'] == 100" "d['messages_completed'] == 100" \
            "d['messages_verified'] == 100" "d['verify_errors'] == 0" "d['drops_total'] == d['reliability']['retx_rx']" \
            "d['bytes_payload'] == 100 * 65536" "d['ok'] is True" || ok=0
        [ $ok = 1 ] && tm_log "ok: pipe: send 0 65536 100, polled show flow 0 until 100 completed, quit"
    fi
else
    tm_fail "pipe: flow 0 did not report 100 completed within 20 s"
    kill -KILL "$pipe_pid" 2>/dev/null
    wait "$pipe_pid"
    tm_show pipe
fi
exec 3>&-

# --- 3. SIGTERM while the prompt waits on a pipe ----------------------------------
mkfifo "$TM_WORK/sig.in"
exec 4<>"$TM_WORK/sig.in"
start_stdin sigterm "$TM_WORK/sig.in" -i --stats-period 0
sig_pid=$TM_PID
echo "send 2 4096 10" >&4
if tm_wait_for 20 grep -qF "flow 2: 10 message(s) of 4096 B queued" "$TM_WORK/sigterm.out"; then
    kill -TERM "$(pgrep -P "$sig_pid")"
    wait "$sig_pid"
    TM_RC=$?
    tm_expect_rc sigterm 0 && tm_check sigterm "d['exit_reason'] == 'signal'" \
        "d['messages_completed'] == d['messages_sent']" "d['messages_sent'] == 10" \
        "d['verify_errors'] == 0" "d['ok'] is True" && tm_log "ok: SIGTERM ends a shell blocked on its input"
else
    tm_fail "sigterm: the shell did not answer"
    kill -KILL "$sig_pid" 2>/dev/null
    wait "$sig_pid"
    tm_show sigterm
fi
exec 4>&-

# --- 5. set completion: message -> packet -> message, nothing in flight ---------------
cat >"$TM_WORK/compl.txt" <<'EOF'
send 0 4096 10
set completion message
wait idle
set completion packet
send 0 4096 10
wait idle
show flow 0
set completion message
send 0 4096 5
wait idle
quit
EOF
tm_run compl 30 -- "${EAL[@]}" -- -i --cmdline-file "$TM_WORK/compl.txt" --flows 1 --msg-size 4096 \
    --messages 0 --stats-period 0 </dev/null
if tm_expect_rc compl 0; then
    ok=1
    expect_grep compl '^completion is already message$' || ok=0
    expect_count compl 1 'completion set to packet' || ok=0
    expect_count compl 1 'completion set to message' || ok=0
    expect_grep compl '^flow 0: sent=20 completed=20 consumed=20 in_flight=0' || ok=0
    # 10 + 5 messages with one write each, 10 with one per packet (3 packets of 4 KiB).
    tm_check compl "d['messages_completed'] == 25" "d['messages_verified'] == 25" "d['verify_errors'] == 0" \
        "d['completion_writes'] == 10 + 10 * $(tm_pkts 4096 1500) + 5" "d['drops_total'] == d['reliability']['retx_rx']" \
        "d['completion_mode'] == 'message'" "d['ok'] is True" || ok=0
    [ $ok -eq 1 ] && tm_log "ok: set completion switched modes with nothing in flight; every write counted"
fi

# --- 4. a pseudo-terminal (tmux) ------------------------------------------------------
if ! command -v tmux >/dev/null; then
    tm_skip_rest "case 4 (pty) needs tmux (scripts/test.sh installs it); cases 1-3 passed"
fi
sock="tm_shell_$$"
TM_CLEANUPS+=("tmux -L $sock kill-server")
prefix=$(tm_prefix pty)
TM_PREFIXES+=("$prefix")
# timeout --foreground: the daemon stays in the terminal's foreground process
# group (else it is stopped by SIGTTOU when the shell sets the terminal up).
tmux -L "$sock" new-session -d -s pty -x 200 -y 50 \
    "timeout --foreground -k 5 30 '$TAILMARKD' ${TM_MEM[*]} --no-pci --file-prefix $prefix --log-level=lib.eal:warning \
     ${EAL[*]} -- -i --stats-period 0 --summary-json '$TM_WORK/pty.json' 2>'$TM_WORK/pty.err'; \
     echo \$? >'$TM_WORK/pty.rc'"
pane() { tmux -L "$sock" capture-pane -p -t pty 2>/dev/null; }
# The last non-empty line of the pane.
last_line() { pane | grep -v '^$' | tail -n 1; }
prompt_is() { [ "$(last_line)" = "$1" ] || [ "$(last_line)" = "$1 " ]; }
ok=1
if ! tm_wait_for 20 prompt_is "tailmark>"; then
    tm_fail "pty: no 'tailmark> ' prompt within 20 s"
    ok=0
else
    tmux -L "$sock" send-keys -t pty 'sho' Tab
    if ! tm_wait_for 10 prompt_is "tailmark> show"; then
        tm_fail "pty: TAB did not complete 'sho' to 'show' (last line: '$(last_line)')"
        ok=0
    fi
    tmux -L "$sock" send-keys -t pty 'flow 3' Enter
    tm_wait_for 10 sh -c "tmux -L $sock capture-pane -p -t pty | grep -qxE 'flow 3: sent=0 completed=0 consumed=0 in_flight=0 retransmits=0 send_requested=0 send_queued=0$RATES'" ||
        { tm_fail "pty: no output of 'show flow 3'"; ok=0; }
    tmux -L "$sock" send-keys -t pty 'send 3 4096 5' Enter 'wait idle' Enter 'show flow 3' Enter
    tm_wait_for 10 sh -c "tmux -L $sock capture-pane -p -t pty | grep -qxE 'flow 3: sent=5 completed=5 consumed=5 in_flight=0 retransmits=0 send_requested=5 send_queued=0$RATES'" ||
        { tm_fail "pty: 'send 3 4096 5' not completed"; ok=0; }
    tmux -L "$sock" send-keys -t pty 'quit' Enter
fi
if ! tm_wait_for 20 test -s "$TM_WORK/pty.rc"; then
    tm_fail "pty: the daemon did not exit after quit"
    ok=0
    pane | tail -n 20 | sed 's/^/    /'
elif [ "$(cat "$TM_WORK/pty.rc")" != 0 ]; then
    tm_fail "pty: exit code $(cat "$TM_WORK/pty.rc"), want 0"
    ok=0
else
    cp "$TM_WORK/pty.json" "$TM_WORK/ptyj.json" 2>/dev/null
    tm_check ptyj "d['messages_sent'] == 5" "d['messages_verified'] == 5" "d['ok'] is True" || ok=0
fi
[ $ok = 1 ] && tm_log "ok: pty: prompt, TAB completion, output, quit"
tm_finish
