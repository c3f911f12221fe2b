#!/usr/bin/env bash
# Sessions agreed at run time, end to end: tailmarkd --mode recv listening,
# --mode send resolving the receiver's MAC by ARP and connecting, over
# net_af_packet on veth pairs between network namespaces this test creates
# (only IP addresses are configured). Every assertion is exact, from the
# summaries, the kernel's interface counters or the daemon's own lines;
# nothing waits on a fixed sleep (the 5 s of case 5 is what is measured).
#
#  1. refused: receiver --msg-size 4096, sender --msg-size 8192. The sender
#     exits 2 within 5 s with exactly one "tailmarkd:" line on stderr naming
#     --msg-size and both values; the receiver logs the refusal and serves on:
#     a correctly configured sender then completes its transfer against it.
#  2. a sender SIGKILLed mid-transfer and restarted at once (same options, a
#     new epoch, the same session id and address): the new session replaces
#     the old one once confirmed (the old ends "replaced"); every message of
#     the new run completes exactly once, verified.
#  3. forged control packets (forge.py, without the secret: guessed and
#     sniffed epochs, random or wrong-keyed MACs, CRC32C where the MAC goes,
#     the old 20-byte ACK; ACK/NACK to every flow, ACCEPT/REFUSE/RESET/CLOSE
#     to session ids 1..8) toward a sender:
#     a) with no receiver (the forger answers ARP as the receiver, sniffs the
#        CONNECT and forges ACCEPTs with its nonce): nothing is delivered, the
#        sender gives up (no_answer, exit 1), and its drops are exactly the
#        forgeries, each under the reason its state implies;
#     b) during a real transfer (the forger also knows the receiver's session
#        id and epoch from the liveness probes): every message completes and
#        is verified, no flow fails, and the sender's drops are exactly the
#        forgeries (control_bad_auth for every one that reached the MAC); the
#        receiver saw none of them.
#  4. two senders into one receiver (--sessions 2) through a bridge: two
#     sessions, each message exact, distinct flows.
#  5. an idle session: the receiver's frames on the wire over 5 s (the
#     kernel's tx counter of its veth) are the keep-alive answers, about one
#     per second: between 1 and 7.
# And ARP in every run: the sender sent requests (arp_tx >= 1), and no data
# went anywhere but the receiver's MAC (no unknown_flow at a receiver).
#
# TM_ONLY="1 3b": a subset of the cases.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
FORGE="$(cd "$(dirname "$0")" && pwd)/forge.py"

only() { [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" $1 "* ]]; }

tm_af_pair ss
F=2
BASE=(--flows $F --msg-size 4096 --ring-size 64 --secret $TM_SECRET)

# recv NAME TIMEOUT OPTIONS...: a receiver in NB (lcore 1), in the background.
recv() {
    local name=$1 tmo=$2
    shift 2
    tm_start "$name" "$tmo" ns "$NB" -- $VDEV_B -l 1 -- --mode recv --src-ip $IP_B "$@"
}
# send NAME TIMEOUT OPTIONS...: a sender in NA (lcore 0), in the background.
send() {
    local name=$1 tmo=$2
    shift 2
    tm_start "$name" "$tmo" ns "$NA" -- $VDEV_A -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "$@"
}
# stat NAME KEY: NAME's latest stats line's KEY (0 before the first).
stat() {
    local v
    v=$(grep -o " $2=[0-9]*" "$TM_WORK/$1.out" 2>/dev/null | tail -n 1 | cut -d= -f2)
    echo "${v:-0}"
}
stat_ge() { [ "$(stat "$1" "$2")" -ge "$3" ]; }
# listening NAME: a daemon is set up (its mode line is out; it listens from its next step).
listening() { grep -q "tailmark.app: mode " "$TM_WORK/$1.err" 2>/dev/null; }
# await NAME PID SECONDS WHAT CMD...: tm_await for a command with arguments.
await() {
    local name=$1 pid=$2 secs=$3 what=$4
    shift 4
    tm_wait_for "$secs" "$@" && return 0
    tm_fail "$name: $what"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    tm_show "$name"
    tm_finish
}
# the daemon under a `timeout` PID (tm_launch's TM_PID)
daemon_of() { pgrep -P "$1" | head -n 1; }
# the end of a daemon (its `timeout`), its status in TM_RC
reap() {
    { wait "$1"; } 2>/dev/null # no job-control note for a daemon killed on purpose
    TM_RC=$?
}
# json NAME EXPR: one value from a summary
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$TM_WORK/$1.json"; }
# tailmarkd_lines NAME: the "tailmarkd:" error lines of its stderr (its
# warnings aside: the tests pass --secret on the command line, which it warns of)
tailmarkd_errors() { grep '^tailmarkd:' "$TM_WORK/$1.err" | grep -v '^tailmarkd: warning:'; }
tailmarkd_lines() { tailmarkd_errors "$1" | wc -l; }
elapsed() { python3 -c "print(f'{$2 - $1:.2f}')"; }

# The drops a receiver may count on a clean link: redundant retransmitted
# copies (a sender's timer fires when a process is descheduled for longer
# than --rto-us on this loaded machine), nothing else.
CLEAN_RECV=("d['drops_total'] == d['reliability']['retx_rx']"
            "all(v == 0 or k in ('outside_window', 'already_completed', 'duplicate') for k, v in d['drops'].items())")

# --- 1. a refused session; the receiver serves on --------------------------------
if only 1; then
    t=$SECONDS
    recv r1 90 "${BASE[@]}" --messages 300 --exit-when-done --stats-period 0
    R=$TM_PID
    await r1 "$R" 30 "did not come up" listening r1
    t0=$(date +%s.%N)
    send s1bad 30 --flows $F --msg-size 8192 --ring-size 64 --secret $TM_SECRET --messages 300 --exit-when-done \
        --stats-period 0
    reap $TM_PID
    took=$(elapsed "$t0" "$(date +%s.%N)")
    want="tailmarkd: $IP_B:47474 refused the session: --msg-size 8192 is not the receiver's 4096"
    if tm_expect_rc s1bad 2; then
        if [ "$(tailmarkd_lines s1bad)" != 1 ] || [ "$(tailmarkd_errors s1bad)" != "$want" ]; then
            tm_fail "s1bad: want exactly one line \"$want\""
            tm_show s1bad
        elif ! python3 -c "import sys; sys.exit(not $took < 5)"; then
            tm_fail "s1bad: refused after $took s (want < 5 s)"
        fi
        tm_check s1bad "d['exit_reason'] == 'refused'" "d['messages_sent'] == 0" "d['messages_acked'] == 0" \
            "d['session']['refused'] == 1 and d['session']['established'] == 0" \
            "d['session']['arp_tx'] >= 1 and d['session']['arp_rx'] >= 1" \
            "d['packets_tx'] == d['control_tx']" "d['drops_total'] == 0"
    fi
    refusal_logged() { grep -q "session from $IP_A:47474 refused: msg_size (ours 4096, theirs 8192)" "$TM_WORK/r1.err"; }
    await r1 "$R" 10 "no log line of the refusal" refusal_logged
    kill -0 "$R" 2>/dev/null || tm_fail "r1: exited after the refusal"
    send s1 60 "${BASE[@]}" --messages 300 --exit-when-done --stats-period 0
    reap $TM_PID
    tm_expect_rc s1 0 &&
        tm_check s1 "d['messages_acked'] == $F * 300" "d['flows_failed'] == 0" "d['session']['established'] == 1" \
            "d['session']['arp_tx'] >= 1" "d['exit_reason'] == 'done'"
    reap $R
    tm_expect_rc r1 0 &&
        tm_check r1 "${CLEAN_RECV[@]}" \
            "d['session']['refused'] == 1 and d['session']['established'] == 1" \
            "len(d['sessions']) == 1" \
            "d['sessions'][0]['completed'] == d['sessions'][0]['verified'] == $F * 300" \
            "d['sessions'][0]['complete'] and d['sessions'][0]['end'] == 'peer_closed'" \
            "d['messages_verified'] == $F * 300 and d['verify_errors'] == 0" &&
        tm_log "ok 1: refused in $took s: $(grep '^tailmarkd:' "$TM_WORK/s1bad.err"); the receiver logged it," \
            "then served a correct sender ($F x 300 verified) ($((SECONDS - t)) s)"
fi

# --- 2. a sender killed mid-transfer and restarted at once --------------------------
if only 2; then
    t=$SECONDS
    M=4000
    KILL_AT=3000
    # Paced, so that sender 1 is killed mid-way (KILL_AT of the $F x $M the
    # receiver expects of a session) whatever the machine's speed.
    S2=("${BASE[@]}" --rate 5000 --exit-when-done --stats-period 0)
    # A long peer timeout: the old session must end because the new one
    # replaced it, however long sender 2's start takes on a loaded machine.
    recv r2 90 "${BASE[@]}" --messages $M --sessions 1 --exit-when-done --stats-period 0.05 --peer-timeout-ms 30000
    R=$TM_PID
    send s2a 90 "${S2[@]}" --messages 100000000
    SA=$TM_PID
    await r2 "$R" 40 "did not consume $KILL_AT messages of sender 1" stat_ge r2 completed $KILL_AT
    kill -KILL "$(daemon_of "$SA")"
    reap "$SA"
    tm_expect_rc s2a 137
    send s2b 60 "${S2[@]}" --messages $M
    reap $TM_PID
    tm_expect_rc s2b 0 &&
        tm_check s2b "d['messages_acked'] == $F * $M" "d['flows_failed'] == 0" "d['exit_reason'] == 'done'" \
            "d['session']['arp_tx'] >= 1" \
            "d['sessions'][0]['id'] == 1" # the same session id as sender 1's: a new incarnation of it
    reap $R
    tm_expect_rc r2 0 &&
        tm_check r2 "${CLEAN_RECV[@]}" \
            "len(d['sessions']) == 2 and d['session']['established'] == 2" \
            "d['sessions'][0]['end'] == 'replaced' and not d['sessions'][0]['complete']" \
            "d['sessions'][0]['id'] != d['sessions'][1]['id']" \
            "d['sessions'][0]['completed'] == d['sessions'][0]['verified'] >= $KILL_AT" \
            "d['sessions'][0]['completed'] < $F * $M" \
            "d['sessions'][0]['released'] == d['sessions'][0]['completed']" \
            "sum(f['released'] for f in d['per_flow'] if f['session'] == 0) == d['sessions'][0]['completed']" \
            "d['sessions'][1]['completed'] == d['sessions'][1]['verified'] == $F * $M" \
            "d['sessions'][1]['released'] == $F * $M" \
            "d['sessions'][1]['complete'] and d['sessions'][1]['end'] == 'peer_closed'" \
            "sorted(f['session'] for f in d['per_flow']) == [0] * $F + [1] * $F" \
            "all(f['released'] == $M for f in d['per_flow'] if f['session'] == 1)" \
            "d['messages_completed'] == d['messages_verified'] == d['sessions'][0]['completed'] + $F * $M" \
            "d['verify_errors'] == 0" "d['exit_reason'] == 'done'" &&
        tm_log "ok 2: sender 1 killed after $(json r2 "d['sessions'][0]['completed']") messages;" \
            "its session ended $(json r2 "d['sessions'][0]['end']"); the restarted sender's $F x $M completed once each," \
            "verified ($((SECONDS - t)) s)"
fi

# --- 3. forged control packets toward a sender ---------------------------------------
MAC_A=$(ip netns exec "$NA" cat /sys/class/net/vethA/address)
MAC_B=$(ip netns exec "$NB" cat /sys/class/net/vethB/address)
# forge NAME STATE OPTIONS...: forge.py in NB on vethB, in the background (FPID);
# returns once it listens.
forge() {
    local name=$1 state=$2
    shift 2
    rm -f "$TM_WORK/$name.ready"
    ip netns exec "$NB" $PY "$FORGE" vethB "$TM_WORK/$name.json" --state "$state" --own-mac "$MAC_B" \
        --sender-mac "$MAC_A" --own-ip $IP_B --sender-ip $IP_A --secret $TM_SECRET --seed $RANDOM \
        --ready "$TM_WORK/$name.ready" "$@" >"$TM_WORK/$name.out" 2>&1 &
    FPID=$!
    tm_wait_for 20 test -e "$TM_WORK/$name.ready" || { tm_fail "$name: forge.py did not start"; cat "$TM_WORK/$name.out"; }
}
# drops_exact NAME FORGED: NAME's drops are exactly what FORGED.json says it sent, reason by reason.
drops_exact() {
    local out
    if ! out=$(python3 - "$TM_WORK/$1.json" "$TM_WORK/$2.json" <<'EOF'
import json, sys
d, f = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
got = {k: v for k, v in d["drops"].items() if v}
want = f["expect"]
if got != want or d["drops_total"] != f["frames"]:
    print(f"    drops {got} (total {d['drops_total']}), want {want} (total {f['frames']})")
    sys.exit(1)
EOF
    ); then
        tm_fail "$1: drops are not the forgeries"
        printf '%s\n' "$out"
        return 1
    fi
}

if only 3a; then
    t=$SECONDS
    forge f3a connecting --pps 2000
    send s3a 60 "${BASE[@]}" --messages 100 --connect-timeout-ms 4000 --stats-period 0.2
    S=$TM_PID
    wait $FPID || { tm_fail "f3a: forge.py failed"; cat "$TM_WORK/f3a.out"; }
    reap $S
    if tm_expect_rc s3a 1; then
        n=$(json f3a "d['frames']")
        tm_check s3a "d['exit_reason'] == 'no_answer'" "d['messages_acked'] == 0" "d['messages_sent'] == 0" \
            "all(f['released'] == 0 and f['acked'] == 0 for f in d['per_flow'])" "len(d['per_flow']) == $F" \
            "d['session']['established'] == 0 and d['session']['refused'] == 0" \
            "d['session']['arp_tx'] >= 1 and d['session']['arp_rx'] == $(json f3a "d['arp_replies']")" \
            "d['packets_rx'] == $(json f3a "d['frames'] + d['arp_replies']")" &&
            drops_exact s3a f3a &&
            if [ "$(tailmarkd_lines s3a)" != 1 ] || ! grep -q "^tailmarkd: no answer from $IP_B:47474" "$TM_WORK/s3a.err"; then
                tm_fail "s3a: want one line saying no answer came"
                tm_show s3a
            else
                tm_log "ok 3a: no receiver; $n forged packets ($(json f3a "d['expect']")) after the sniffed CONNECT:" \
                    "none believed, nothing delivered, the sender gave up (no_answer) ($((SECONDS - t)) s)"
            fi
    fi
fi

if only 3b; then
    t=$SECONDS
    M=2000
    recv r3 90 "${BASE[@]}" --messages $M --exit-when-done --stats-period 0.2 --peer-timeout-ms 30000
    R=$TM_PID
    forge f3b established --pps 2000 --rounds 2
    # Paced over a few seconds so that the forgeries arrive during the
    # transfer; no --exit-when-done: the session (and its flows) stays up
    # until every forgery is counted.
    send s3b 90 "${BASE[@]}" --messages $M --rate 1500 --stats-period 0.2 --duration 70 --peer-timeout-ms 30000
    S=$TM_PID
    wait $FPID || { tm_fail "f3b: forge.py failed"; cat "$TM_WORK/f3b.out"; }
    n=$(json f3b "d['frames']")
    all_counted() { stat_ge s3b drops "$n"; }
    await s3b "$S" 30 "did not count all $n forged packets" all_counted
    await s3b "$S" 60 "not every message was acknowledged" stat_ge s3b completed $((F * M))
    kill -TERM "$S"
    reap $S
    tm_expect_rc s3b 0 &&
        tm_check s3b "d['messages_acked'] == $F * $M" "d['flows_failed'] == 0" \
            "all(f['released'] == $M for f in d['per_flow'])" "d['drops']['control_bad_auth'] > 0" \
            "d['session']['arp_tx'] >= 1" &&
        drops_exact s3b f3b
    reap $R
    tm_expect_rc r3 0 &&
        tm_check r3 "${CLEAN_RECV[@]}" \
            "d['messages_completed'] == d['messages_verified'] == $F * $M" "d['verify_errors'] == 0" \
            "d['sessions'][0]['completed'] == d['sessions'][0]['verified'] == $F * $M" &&
        tm_log "ok 3b: $n forged packets ($(json f3b "d['expect']")) in $(json f3b "d['seconds']") s during the" \
            "transfer, counted exactly; $F x $M messages completed and verified ($((SECONDS - t)) s)"
fi

# --- 4. two senders, one receiver --------------------------------------------------------
# vethA (NA4) -- mA [br0 in NM4] mB -- vethB (NB4), and mC -- vethC (NC4).
bridged3() {
    local ns x
    TM_NETNS+=("$NA4" "$NM4" "$NB4" "$NC4")
    for ns in "$NA4" "$NM4" "$NB4" "$NC4"; do
        ip netns add "$ns" || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || return 1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 || return 1
    done
    # No multicast snooping: with it, br0 joins the all-snoopers group and
    # sends IGMPv3 reports (IP options) to every port as it comes up, frames
    # the daemons would count as ip_options drops.
    ip -n "$NM4" link add br0 type bridge mcast_snooping 0 || return 1
    for x in A:"$NA4" B:"$NB4" C:"$NC4"; do
        ip link add "veth${x%%:*}" netns "${x#*:}" type veth peer name "m${x%%:*}" netns "$NM4" || return 1
        ip -n "$NM4" link set "m${x%%:*}" master br0 && ip -n "$NM4" link set "m${x%%:*}" up || return 1
        ip -n "${x#*:}" link set "veth${x%%:*}" up || return 1
    done
    ip -n "$NM4" link set br0 up
}
if only 4; then
    t=$SECONDS
    M=1500
    NA4=tm_ss4a_$$ NM4=tm_ss4m_$$ NB4=tm_ss4b_$$ NC4=tm_ss4c_$$
    if bridged3; then
        tm_start r4 90 ns "$NB4" -- --vdev=net_af_packet0,iface=vethB,framecnt=4096 -l 1 -- --mode recv \
            --src-ip $IP_B "${BASE[@]}" --messages $M --sessions 2 --exit-when-done --stats-period 0
        R=$TM_PID
        tm_start s4a 90 ns "$NA4" -- --vdev=net_af_packet0,iface=vethA,framecnt=4096 -l 0 -- --mode send \
            --src-ip 198.18.0.1 --dst-ip $IP_B "${BASE[@]}" --messages $M --exit-when-done --stats-period 0
        SA=$TM_PID
        tm_start s4c 90 ns "$NC4" -- --vdev=net_af_packet0,iface=vethC,framecnt=4096 -l 0 -- --mode send \
            --src-ip 198.18.0.3 --dst-ip $IP_B "${BASE[@]}" --messages $M --exit-when-done --stats-period 0
        SC=$TM_PID
        # A sender sees the other's ARP broadcast: arp_not_ours, nothing else.
        SENDER_OK=("d['messages_acked'] == $F * $M" "d['flows_failed'] == 0" "d['session']['arp_tx'] >= 1"
                   "all(v == 0 or k == 'arp_not_ours' for k, v in d['drops'].items())")
        reap $SA
        tm_expect_rc s4a 0 && tm_check s4a "${SENDER_OK[@]}"
        reap $SC
        tm_expect_rc s4c 0 && tm_check s4c "${SENDER_OK[@]}"
        reap $R
        tm_expect_rc r4 0 &&
            tm_check r4 "${CLEAN_RECV[@]}" \
                "len(d['sessions']) == 2 and d['session']['established'] == 2" \
                "sorted(s['peer'] for s in d['sessions']) == ['198.18.0.1:47474', '198.18.0.3:47474']" \
                "all(s['completed'] == s['verified'] == $F * $M and s['complete'] for s in d['sessions'])" \
                "all(s['released'] == $F * $M and s['end'] == 'peer_closed' for s in d['sessions'])" \
                "len(d['per_flow']) == 2 * $F and sorted(f['flow'] for f in d['per_flow']) == list(range(2 * $F))" \
                "sorted(f['session'] for f in d['per_flow']) == [0] * $F + [1] * $F" \
                "all(f['released'] == $M for f in d['per_flow'])" \
                "d['messages_verified'] == 2 * $F * $M and d['verify_errors'] == 0" &&
            tm_log "ok 4: two senders at once, two sessions of $F x $M, each message verified ($((SECONDS - t)) s)"
    else
        tm_fail "4: cannot set up the bridged namespaces"
    fi
fi

# --- 5. an idle session's control packets -------------------------------------------------
if only 5; then
    t=$SECONDS
    # Both end by themselves (no signal): the sender at --duration, which
    # closes the session, the receiver on that CLOSE. Long peer timeouts: a
    # process descheduled for seconds on this loaded machine must not end
    # the session inside the window.
    IDLE=(--messages 1 --stats-period 0.2 --peer-timeout-ms 30000)
    recv r5 60 "${BASE[@]}" "${IDLE[@]}" --exit-when-done
    R=$TM_PID
    send s5 60 "${BASE[@]}" "${IDLE[@]}" --duration 10
    S=$TM_PID
    await s5 "$S" 30 "its $F messages were not acknowledged" stat_ge s5 completed $F
    await r5 "$R" 10 "did not complete $F messages" stat_ge r5 completed $F
    ctr() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
    # Idle from here: the transfer is over (released and acknowledged); what
    # the receiver sends now is its answers to the sender's probes. The
    # kernel counts every frame the receiver's port puts on its veth.
    tx0=$(ctr "$NB" vethB tx_packets) rx0=$(ctr "$NB" vethB rx_packets)
    sleep 5 # the window measured, not a synchronisation
    tx1=$(ctr "$NB" vethB tx_packets) rx1=$(ctr "$NB" vethB rx_packets)
    [ -n "$(daemon_of "$S")" ] || tm_fail "5: the sender ended before the window did (raise its --duration)"
    reap $S
    tm_expect_rc s5 0 &&
        tm_check s5 "d['messages_acked'] == $F" "d['flows_failed'] == 0" "d['exit_reason'] == 'duration'"
    reap $R
    tm_expect_rc r5 0 &&
        tm_check r5 "${CLEAN_RECV[@]}" "d['messages_verified'] == $F" \
            "d['sessions'][0]['end'] == 'peer_closed'" "d['exit_reason'] == 'done'"
    dtx=$((tx1 - tx0)) drx=$((rx1 - rx0))
    if [ $dtx -lt 1 ] || [ $dtx -gt 7 ]; then
        tm_fail "5: the idle receiver sent $dtx frames in 5 s (want 1..7: one keep-alive answer a second)"
    elif [ $dtx -gt $((drx + 1)) ]; then # an acceptor only answers (one probe may straddle the window's edge)
        tm_fail "5: the idle receiver sent $dtx frames for $drx it took"
    else
        tm_log "ok 5: idle for 5 s, the receiver sent $dtx frames (keep-alive answers) and took $drx ($((SECONDS - t)) s)"
    fi
fi

tm_finish
