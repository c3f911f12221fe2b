#!/usr/bin/env bash
# A hostile local user against `tailmarkd --mode service` (issue 35, the
# local part): each attack performed end to end by hostile_client.py (the
# channel spoken by hand, no library), then a genuine transfer through the
# same daemon that must succeed (tailmark-perf --loop: every message
# received, completed once and verified), and at SIGINT the daemon's
# summary counts exactly what was refused. One daemon at a time, on net_ring
# (no namespace), each with the secret passed another way.
#
# Daemon A (--secret on the command line):
#  1. the memfds handed over (control block, send rings, receive rings):
#     sealed SHRINK|GROW|SEAL, every ftruncate (shrink, grow) EPERM; the
#     daemon, which reads the control block every loop, lives.
#  2. the wake fd made blocking and filled (a second write end through
#     /proc, or an eventfd's counter at its maximum), then 5 wake-ups
#     asked for: each answered, none written (wake_full 5), no stall.
#  2b. the wake pipe's read end closed, then 3 wake-ups asked for: each
#     answered, none written (wake_closed 3), the daemon alive (no SIGPIPE).
#  3. HELLO with a full pipe as its wake fd (ABI 1's way): EINVAL; an ABI 1
#     HELLO: EPROTO.
#  4. a connection that never says HELLO: ERROR ETIMEDOUT and closed 3 s
#     after it connected.
#  5. arenas: 64 GiB declared: EFBIG at once; one of exactly --max-arena
#     (1 GiB of 4 KiB pages, sparse): welcomed within 500 ms, and the
#     daemon's resident memory grows by less than 16 MiB (nothing
#     prefaulted); unsealed: EINVAL naming F_SEAL_SHRINK (were it welcomed,
#     the client shrinks it and sends from it); declared larger than its
#     memfd: EINVAL.
#  6. another application's port: LISTEN EBUSY, UNLISTEN ENOENT, and a
#     session to it goes to its owner; once the owner is gone the port
#     serves a new listener.
#  7. --secret on the command line: blanked in /proc/PID/cmdline, warned
#     about; zero copy (virtual devices), said once; the summary's exact
#     counters.
# Daemon B (TAILMARK_SECRET; --max-apps 1 --max-pending 4; --iova-mode=va):
#  8. 8 idle connections: 4 wait, 4 refused EBUSY, and one more too; one
#     idle one closes: then one HELLO is welcomed (--max-apps counts only
#     applications, not the 3 connections waiting) and a second refused
#     EBUSY (--max-apps 1); the 3 idle ones closed within 3 s + 1.5 s.
# Daemon C (--secret-file; --allow-uid nobody --allow-group nogroup; the
# socket in a public directory; --zero-copy off):
#  9. the directory made 0750 and the socket 0660, both group nogroup.
# 10. root (not allowed): ERROR EACCES, closed. nobody: a genuine transfer.
#     uid 4242 (no group): the filesystem refuses it; with the directory
#     and socket opened to everyone (an admin's mistake), the daemon still
#     refuses it (SO_PEERCRED). Every message copied (--zero-copy off).
# 11. Secrets: --secret-file and a --config holding the secret readable by
#     group or others: exit 2; --dump-config never prints the secret (file,
#     environment, command line); no daemon output of this suite holds any
#     of the three secrets.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
PERF=${TAILMARK_PERF:-$TM_SRC/build/app/tailmark-perf/tailmark-perf}
[ -x "$PERF" ] || { tm_log "not built: $PERF"; exit 1; }
HC=$(cd "$(dirname "$0")" && pwd)/hostile_client.py
PY=/usr/bin/python3 # the same for root and nobody
[ -x $PY ] || PY=$(command -v python3)

SECRET_A=a11ce0000000000000000000000000a1
SECRET_B=b0b0000000000000000000000000000b
SECRET_C=c0ffee000000000000000000000000c3

# hostile NAME ARGS...: the client as root; its lines logged; 0 when every
# expectation held.
hostile() {
    local name=$1
    shift
    timeout -k 5 60 $PY "$HC" "$@" >"$TM_WORK/$name.hc" 2>&1
    local rc=$?
    sed "s/^/    [$name] /" "$TM_WORK/$name.hc"
    return $rc
}

# start NAME SOCK EAL... -- OPTS...: a service daemon on net_ring, up.
start() {
    local name=$1 sock=$2
    shift 2
    local eal=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do eal+=("$1"); shift; done
    shift
    tm_start "$name" 300 -- --vdev=net_ring0 -l 0,1 "${eal[@]}" -- --mode service --control-socket "$sock" \
        --stats-period 0 "$@"
    DPID=$TM_PID
    up() { grep -q "applications attach on" "$TM_WORK/$name.err" 2>/dev/null && [ -S "$sock" ]; }
    tm_await "$name" "$DPID" 30 up "the daemon never listened on its socket"
}

alive() { # NAME PID WHAT: the daemon's `timeout` has not exited (a zombie until waited for)
    if [ -e "/proc/$2/stat" ] && [ "$(awk '{ print $3 }' "/proc/$2/stat")" != Z ]; then
        return 0
    fi
    tm_fail "$1: the daemon died after $3"
    tm_show "$1"
    tm_finish
}

GENUINE=0
# genuine NAME SOCK PORT COUNT [as-nobody]: tailmark-perf --loop, 4 KiB
# messages, checked exactly; counted in GENUINE.
genuine() {
    local name=$1 sock=$2 port=$3 count=$4 who=()
    [ "${5:-}" = as-nobody ] && who=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    timeout -k 5 60 "${who[@]}" "$PERF" --socket "$sock" --loop "198.18.0.1:$port" --size 4096 --count "$count" \
        --verify >"$TM_WORK/$name.perf" 2>"$TM_WORK/$name.perf.err"
    local rc=$?
    if [ $rc -eq 0 ] && $PY - "$TM_WORK/$name.perf" "$count" <<'EOF'; then
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
n = int(sys.argv[2])
sys.exit(0 if d["messages"] == n and d["received"] == n and d["completed"] == n and d["failed"] == 0
         and d["verified"] and d["errors"] == 0 else 1)
EOF
        tm_log "ok: $name: a genuine transfer, $count messages of 4 KiB${5:+ ($5)}, all received, completed once, verified"
        GENUINE=$((GENUINE + count))
        return 0
    fi
    tm_fail "$name: the genuine transfer failed (exit $rc): $(cat "$TM_WORK/$name.perf" "$TM_WORK/$name.perf.err")"
    return 1
}

# stop NAME PID: SIGINT, exit 0.
stop() {
    kill -INT "$2"
    wait "$2"
    local rc=$?
    [ $rc -eq 0 ] || { tm_fail "$1: the daemon exited $rc at SIGINT"; tm_show "$1"; }
}

only() { [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" $1 "* ]]; }

# ---------------------------------------------------------------- daemon A
if only A; then
    SA=$TM_WORK/a.sock
    start a "$SA" -- --secret $SECRET_A
    PA=$DPID
    GENUINE=0
    N=2000

    # 7 (first): the command line's secret is blanked, and said so.
    DA=$(pgrep -P "$PA" -x tailmarkd | head -1)
    if [ -n "$DA" ] && ! tr '\0' ' ' <"/proc/$DA/cmdline" | grep -q "$SECRET_A" &&
        tr '\0' ' ' <"/proc/$DA/cmdline" | grep -q -- "--secret xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" &&
        grep -q "warning: --secret on the command line was readable by every local user" "$TM_WORK/a.err"; then
        tm_log "ok: --secret's value is blanked in /proc/$DA/cmdline, with a warning"
    else
        tm_fail "--secret still in /proc/${DA:-?}/cmdline, or no warning: $(tr '\0' ' ' <"/proc/${DA:-0}/cmdline" 2>&1)"
    fi

    # 1. Every memfd handed over is sealed; the daemon outlives the attempts.
    hostile seals seals "$SA" 7001 && tm_log "ok: no memfd the daemon handed over can be resized" ||
        tm_fail "a memfd the daemon handed over could be resized"
    alive a "$PA" "its memfds were truncated"
    genuine a1 "$SA" 7101 $N

    # 2. The wake fd, made blocking and full: the daemon is never held up.
    hostile wake wake "$SA" 7002 5 && tm_log "ok: a blocking, full wake fd blocks nothing" ||
        tm_fail "the wake fd attack"
    alive a "$PA" "its wake fd was filled"
    genuine a2 "$SA" 7102 $N
    # 2b. The wake pipe's read end closed: the daemon's write is EPIPE, not
    # a SIGPIPE that ends it (the service suite's killed receivers hit it).
    hostile wake-closed wake-closed "$SA" 7012 3 && tm_log "ok: a closed wake pipe ends nothing" ||
        tm_fail "the closed wake pipe"
    alive a "$PA" "its wake pipe was closed"
    genuine a2b "$SA" 7112 $N
    # 2c. What the app waits for (tm_wait_flow, tm_wait_sent): honoured,
    # and no word of it makes the daemon do worse than wake the app.
    hostile want want "$SA" 7013 && tm_log "ok: an app asleep for one flow, or for its completions, is left asleep for another's message" ||
        tm_fail "tm_doorbell.want"
    alive a "$PA" "nonsense in tm_doorbell.want"
    genuine a2c "$SA" 7113 $N

    # 3. ABI 1's HELLO, and a full pipe as the wake fd.
    hostile hello-fds hello-fds "$SA" && tm_log "ok: HELLO takes no wake fd from the application" ||
        tm_fail "HELLO with the application's wake fd"
    genuine a3 "$SA" 7103 $N

    # 4. No HELLO.
    hostile nohello nohello "$SA" && tm_log "ok: a connection without HELLO is closed after 3 s" ||
        tm_fail "a connection without HELLO"
    genuine a4 "$SA" 7104 $N

    # 5. Arenas.
    rss() { awk '/^VmRSS/ { print $2 }' "/proc/$DA/status"; }
    hostile arena64g arena "$SA" sealed $((64 << 30))
    grep -q "^answer=EFBIG ms=" "$TM_WORK/arena64g.hc" &&
        $PY -c "import sys; sys.exit(0 if float(open(sys.argv[1]).read().split('ms=')[1].split()[0]) < 500 else 1)" \
            "$TM_WORK/arena64g.hc" && tm_log "ok: a 64 GiB arena is refused at once (EFBIG)" ||
        tm_fail "a 64 GiB arena: $(cat "$TM_WORK/arena64g.hc")"
    rss0=$(rss)
    hostile arena1g arena "$SA" sealed $((1 << 30))
    rss1=$(rss)
    if grep -q "^answer=WELCOME ms=" "$TM_WORK/arena1g.hc" &&
        $PY -c "import sys; sys.exit(0 if float(open(sys.argv[1]).read().split('ms=')[1].split()[0]) < 500 else 1)" \
            "$TM_WORK/arena1g.hc" && [ $((rss1 - rss0)) -lt 16384 ]; then
        tm_log "ok: an arena of --max-arena (1 GiB of 4 KiB pages) welcomed in $(sed -n 's/.*ms=//p' "$TM_WORK/arena1g.hc") ms; the daemon's RSS grew $((rss1 - rss0)) KiB"
    else
        tm_fail "an arena of --max-arena: $(cat "$TM_WORK/arena1g.hc"), RSS $rss0 -> $rss1 KiB"
    fi
    hostile unsealed unsealed "$SA" 7005 && tm_log "ok: an unsealed arena is refused" ||
        tm_fail "an unsealed arena"
    alive a "$PA" "an unsealed arena"
    hostile short arena "$SA" short $((4 << 20))
    grep -q "^answer=EINVAL .*larger than its memfd" "$TM_WORK/short.hc" &&
        tm_log "ok: an arena larger than its memfd is refused" || tm_fail "a short arena: $(cat "$TM_WORK/short.hc")"
    genuine a5 "$SA" 7105 $N

    # 6. Another application's port.
    hostile steal steal "$SA" 7006 && tm_log "ok: a port stays its listener's" || tm_fail "another application's port"
    genuine a6 "$SA" 7006 $N # the port, free again

    # 7. The summary.
    stop a "$PA"
    # attached: seals 1, wake 1, wake-closed 1, want 1, arena1g 1, steal 2, and the genuine runs.
    # refused_hello: hello-fds 2, arena64g 1, unsealed 1, short 1.
    # taken: the genuine messages and wake's, wake-closed's and want's one each; want releases its
    # own (delivered), the other two are never released (failed).
    tm_check a "d['service']['attached'] == 7 + 8" "d['service']['refused_hello'] == 5" \
        "d['service']['hello_timeouts'] == 1" "d['service']['wake_full'] == 5" \
        "d['service']['wake_closed'] == 3" \
        "d['service']['refused_peer'] == 0" "d['service']['refused_pending'] == 0" \
        "d['service']['refused_apps'] == 0" "d['service']['copied'] == 0" \
        "d['service']['taken'] == $GENUINE + 3" "d['service']['delivered'] == $GENUINE + 1" \
        "d['service']['failed'] == 2" "d['service']['invalid'] == 0" &&
        tm_log "ok: daemon A's summary: exactly the refusals above, $GENUINE genuine messages (and want's) delivered"
    if [ "$(grep -c "service: zero copy from the applications' arenas" "$TM_WORK/a.err")" -eq 1 ]; then
        tm_log "ok: zero copy said once: $(grep -o "zero copy from .*" "$TM_WORK/a.err")"
    else
        tm_fail "daemon A: the zero copy line is not there once"
    fi
fi

# ---------------------------------------------------------------- daemon B
if only B; then
    SB=$TM_WORK/b.sock
    TAILMARK_SECRET=$SECRET_B start b "$SB" --iova-mode=va -- --max-apps 1 --max-pending 4
    PB=$DPID
    GENUINE=0
    hostile pending pending "$SB" 8 2
    if grep -qx "pending=4 refused=4" "$TM_WORK/pending.hc" && grep -qx "welcomed=1 busy=1" "$TM_WORK/pending.hc" &&
        ! grep -q FAIL "$TM_WORK/pending.hc"; then
        tm_log "ok: --max-pending 4 of 8 idle connections, apart from --max-apps 1; all closed in time"
    else
        tm_fail "pending connections"
    fi
    alive b "$PB" "a flood of connections"
    genuine b1 "$SB" 7201 2000
    stop b "$PB"
    tm_check b "d['service']['refused_pending'] == 5" "d['service']['refused_apps'] == 1" \
        "d['service']['hello_timeouts'] == 3" "d['service']['attached'] == 2" \
        "d['service']['refused_peer'] == 0" "d['service']['taken'] == $GENUINE" &&
        tm_log "ok: daemon B's summary: 5 refused pending, 1 refused for --max-apps, 3 timed out"
    grep -q "zero copy from the applications' arenas (IOVA as VA)" "$TM_WORK/b.err" &&
        tm_log "ok: --iova-mode=va: zero copy, IOVA as VA" || tm_fail "daemon B: no 'IOVA as VA' line"
fi

# ---------------------------------------------------------------- daemon C
if only C; then
    PUB=$(mktemp -d /tmp/tm_hl_pub.XXXXXX)
    chmod 0755 "$PUB"
    TM_CLEANUPS+=("rm -rf '$PUB'")
    SC=$PUB/run/c.sock
    umask 022
    printf '%s\n' $SECRET_C >"$TM_WORK/secret"
    chmod 0644 "$TM_WORK/secret"
    # 11 (first): a secret file others may read is refused.
    timeout 10 "$TAILMARKD" -- --mode service --secret-file "$TM_WORK/secret" --dump-config >"$TM_WORK/sf644.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q "mode 0644): chmod 600" "$TM_WORK/sf644.out" &&
        tm_log "ok: a secret file of mode 0644 is refused (exit 2)" || tm_fail "secret file 0644: exit $rc: $(cat "$TM_WORK/sf644.out")"
    printf '[tailmark]\nsecret = %s\n' $SECRET_C >"$TM_WORK/secret.ini"
    chmod 0640 "$TM_WORK/secret.ini"
    timeout 10 "$TAILMARKD" -- --mode service --config "$TM_WORK/secret.ini" --dump-config >"$TM_WORK/ini640.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q "holds the secret and is readable" "$TM_WORK/ini640.out" &&
        tm_log "ok: a --config of mode 0640 holding the secret is refused (exit 2)" ||
        tm_fail "config 0640 with the secret: exit $rc: $(cat "$TM_WORK/ini640.out")"
    chmod 0600 "$TM_WORK/secret" "$TM_WORK/secret.ini"
    timeout 10 "$TAILMARKD" -- --mode service --secret-file "$TM_WORK/secret" --dump-config >"$TM_WORK/dump_file.ini" 2>&1
    TAILMARK_SECRET=$SECRET_B timeout 10 "$TAILMARKD" -- --mode service --dump-config >"$TM_WORK/dump_env.ini" 2>&1
    timeout 10 "$TAILMARKD" -- --mode service --secret $SECRET_A --dump-config >"$TM_WORK/dump_cmd.ini" 2>&1
    timeout 10 "$TAILMARKD" -- --mode service --config "$TM_WORK/secret.ini" --dump-config >"$TM_WORK/dump_ini.ini" 2>&1
    if grep -qx "secret-file = $TM_WORK/secret" "$TM_WORK/dump_file.ini" &&
        grep -qx "; secret: from TAILMARK_SECRET (not printed)" "$TM_WORK/dump_env.ini" &&
        grep -qx "; secret: from --secret (not printed)" "$TM_WORK/dump_cmd.ini" &&
        grep -qx "; secret: from the --config file (not printed)" "$TM_WORK/dump_ini.ini" &&
        ! grep -qiE "$SECRET_A|$SECRET_B|$SECRET_C" "$TM_WORK"/dump_*.ini; then
        tm_log "ok: --dump-config says where the secret comes from, never the secret"
    else
        tm_fail "--dump-config and the secret: $(grep -i secret "$TM_WORK"/dump_*.ini)"
    fi

    start c "$SC" -- --secret-file "$TM_WORK/secret" --allow-uid nobody --allow-group nogroup --zero-copy off
    PC=$DPID
    GENUINE=0
    # 9. The directory and the socket.
    if [ "$(stat -c '%a %G' "$PUB/run")" = "750 nogroup" ] && [ "$(stat -c '%a %G' "$SC")" = "660 nogroup" ]; then
        tm_log "ok: $PUB/run is 0750 and the socket 0660, both group nogroup"
    else
        tm_fail "permissions: $(stat -c '%n %a %U:%G' "$PUB/run" "$SC")"
    fi
    # 10. Who may attach.
    hostile root-refused refused "$SC" && tm_log "ok: root (not allowed here) is refused by the daemon" ||
        tm_fail "root was not refused"
    genuine c1 "$SC" 7301 2000 as-nobody
    timeout -k 5 30 setpriv --reuid=4242 --regid=4242 --clear-groups $PY "$HC" refused "$SC" >"$TM_WORK/u4242a.hc" 2>&1
    grep -q "^FAIL: connect: Permission denied" "$TM_WORK/u4242a.hc" &&
        tm_log "ok: uid 4242 cannot reach the socket (0750 directory, 0660 socket)" ||
        tm_fail "uid 4242 reached the socket: $(cat "$TM_WORK/u4242a.hc")"
    chmod 0755 "$PUB/run"
    chmod 0666 "$SC"
    timeout -k 5 30 setpriv --reuid=4242 --regid=4242 --clear-groups $PY "$HC" refused "$SC" >"$TM_WORK/u4242b.hc" 2>&1 &&
        tm_log "ok: uid 4242 through widened permissions: refused by the daemon (SO_PEERCRED)" ||
        tm_fail "uid 4242 through widened permissions: $(cat "$TM_WORK/u4242b.hc")"
    alive c "$PC" "refused peers"
    genuine c2 "$SC" 7302 2000 as-nobody
    stop c "$PC"
    tm_check c "d['service']['refused_peer'] == 2" "d['service']['attached'] == 2" \
        "d['service']['copied'] == $GENUINE" "d['service']['taken'] == $GENUINE" \
        "d['service']['delivered'] == $GENUINE" &&
        tm_log "ok: daemon C's summary: 2 peers refused, all $GENUINE messages copied (--zero-copy off)"
    [ "$(grep -c "the applications' messages are copied into mbufs: --zero-copy off" "$TM_WORK/c.err")" -eq 1 ] &&
        tm_log "ok: copying said once" || tm_fail "daemon C: the copy line is not there once"
fi

# 11. No output of any daemon here holds a secret.
if grep -lE "$SECRET_A|$SECRET_B|$SECRET_C" "$TM_WORK"/*.out "$TM_WORK"/*.err "$TM_WORK"/*.json 2>/dev/null; then
    tm_fail "a daemon printed a secret (files above)"
else
    tm_log "ok: no daemon output holds a secret"
fi
tm_finish
