#!/usr/bin/env bash
# tailmarkd@.service under a real systemd (issue 40, item 2): this machine's
# own root, seen through an overlay on a tmpfs (nothing it writes reaches
# the machine), booted as a container by systemd-nspawn with its own
# network namespace. In it, as an operator would:
#
#  1. dpkg -i the tailmarkd and libtailmark-client0 packages of this build;
#     /etc/tailmark/t.ini (--mode service options and an [eal] section on
#     net_ring) and /etc/tailmark/t.secret (0600, root's);
#     systemctl start tailmarkd@t: active, the preflight's verdict and the
#     daemon's log in the journal, each line once (DPDK's default log
#     stream wrote every line to stderr and to syslog: twice in the journal);
#  2. /run/tailmark root:tailmark 0750, its socket root:tailmark 0660;
#  3. two tailmark-cat processes through `--instance t`: 4 MiB byte for byte;
#  4. a member of group tailmark reads `tailmark-ctl --instance t status`, a
#     user outside it is refused;
#  5. the daemon killed with SIGKILL: systemd starts it again (NRestarts 1)
#     and it serves again;
#  6. systemctl stop: exit status 0, the socket gone, the summary logged;
#  7. an instance whose INI has an unknown option: exit 2 and no restart
#     loop (RestartPreventExitStatus=2).
source "$(dirname "$0")/lib.sh"
tm_require_daemon
tm_require_root
BUILD=${TAILMARK_BUILD_ROOT:-$TM_SRC/build}
unset LD_LIBRARY_PATH PYTHONPATH PKG_CONFIG_PATH
if ! command -v systemd-nspawn >/dev/null || [ ! -x /lib/systemd/systemd ]; then
    tm_fail "systemd-nspawn or systemd missing: apt-get install systemd systemd-container (scripts/test.sh installs them)"
    tm_finish
fi

# --- packages -----------------------------------------------------------------
if ! "$TM_SRC/scripts/package.sh" --from-build "$BUILD" --out "$TM_WORK/debs" --fast >"$TM_WORK/package.log" 2>&1; then
    tm_fail "scripts/package.sh failed"
    tail -20 "$TM_WORK/package.log"
    tm_finish
fi
rm -f "$TM_WORK"/debs/libtailmark-client-dev_* "$TM_WORK"/debs/python3-tailmark_*

# --- the container --------------------------------------------------------------
OV=$TM_WORK/ov
ROOT=$OV/root
MACHINE=tmunit$$
mkdir -p "$OV/t" "$ROOT"
NSPAWN=
LEADER=
teardown() {
    [ -n "$LEADER" ] && nsenter -t "$LEADER" -a journalctl -o short-precise --no-pager -u 'tailmarkd@*' >"$TM_WORK/journal" 2>&1
    [ -n "$LEADER" ] && nsenter -t "$LEADER" -a systemctl poweroff --no-block >/dev/null 2>&1
    if [ -n "$NSPAWN" ]; then
        for _ in $(seq 100); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$NSPAWN" 2>/dev/null
    fi
    # The container's PID 1: killing it ends every process of its PID
    # namespace (an nspawn killed from outside leaves its systemd running).
    [ -n "$LEADER" ] && kill -KILL "$LEADER" 2>/dev/null
    umount -l "$ROOT" 2>/dev/null
    umount -l "$OV/t" 2>/dev/null
}
TM_CLEANUPS+=(teardown)
mount -t tmpfs -o size=2g tmpfs "$OV/t" && mkdir -p "$OV/t/u" "$OV/t/w" &&
    mount -t overlay overlay -o "lowerdir=/,upperdir=$OV/t/u,workdir=$OV/t/w" "$ROOT" ||
    { tm_fail "the overlay of / on a tmpfs"; tm_finish; }
# /sys/module: EAL looks for the vfio module there, and nspawn's /sys has none.
systemd-nspawn -q --register=no --keep-unit -D "$ROOT" -M "$MACHINE" --private-network -b \
    --bind=/dev/hugepages --bind-ro=/sys/module --bind-ro="$TM_WORK/debs:/debs" \
    >"$TM_WORK/boot.log" 2>&1 </dev/null &
NSPAWN=$!
# The container's PID 1 is the child of nspawn that runs systemd: nspawn's
# first child is a short-lived helper, and a LEADER taken while it lived
# named a dead pid for good (CI on b93b20e: "the container did not boot in
# 60 s" with the boot complete in boot.log, and "stat of /proc/3179/ns/user
# failed" from the journal's nsenter).
booted() {
    [ -n "$LEADER" ] || LEADER=$(pgrep -P "$NSPAWN" -x systemd | head -n 1)
    [ -n "$LEADER" ] || return 1
    local st
    st=$(nsenter -t "$LEADER" -a systemctl is-system-running 2>/dev/null)
    [ "$st" = running ] || [ "$st" = degraded ]
}
if ! tm_wait_for 60 booted; then
    tm_fail "the container did not boot in 60 s"
    tail -20 "$TM_WORK/boot.log"
    tm_finish
fi
in_ct() { nsenter -t "$LEADER" -a "$@"; }
# ok WHAT: said only if no check failed since the step began (mark).
MARK=0
mark() { MARK=$TM_FAILS; }
ok() { [ "$TM_FAILS" -eq "$MARK" ] && tm_log "ok: $*"; }
tm_log "booted: systemd $(in_ct systemctl --version | head -1 | cut -d' ' -f2) as PID 1 of a container (leader $LEADER)"

# --- 1. install, configure, start --------------------------------------------------
mark
if ! in_ct sh -c 'dpkg -i /debs/*.deb' >"$TM_WORK/dpkg.log" 2>&1; then
    tm_fail "dpkg -i"
    tail -20 "$TM_WORK/dpkg.log"
    tm_finish
fi
in_ct sh -c 'mkdir -p /etc/tailmark && cat > /etc/tailmark/t.ini && umask 077 &&
    head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n" > /etc/tailmark/t.secret' <<'EOF'
[tailmark]
src-ip = 192.0.2.10

[eal]
args = -l 0 --no-pci -m 256 --vdev=net_ring0
EOF
prop() { in_ct systemctl show "tailmarkd@$1" -p "$2" --value; }
journal() { in_ct journalctl -u "tailmarkd@$1" -o cat --no-pager; }
in_ct systemctl start tailmarkd@t || tm_fail "systemctl start tailmarkd@t"
# Served: a daemon answers on the socket (a killed one leaves its file).
listening() { in_ct tailmark-ctl --instance t status >/dev/null 2>&1; }
if ! tm_wait_for 20 listening; then
    tm_fail "tailmarkd@t: no /run/tailmark/t.sock after 20 s ($(prop t ActiveState))"
    journal t | tail -20
    tm_finish
fi
[ "$(prop t ActiveState)" = active ] || tm_fail "tailmarkd@t is $(prop t ActiveState), not active"
# journald takes the daemon's stderr and its syslog datagrams on its own
# time: the lines are awaited, and counted after `journalctl --sync` (every
# message journald has received is then readable) once step 3 is over.
logged() { journal t | grep -q "applications attach on /run/tailmark/t.sock"; }
tm_wait_for 10 logged || tm_fail "the daemon's 'applications attach on' line is not in the journal"
journal t | grep -q "^tailmarkd --check: .* 0 failure(s): ready" ||
    tm_fail "the preflight's verdict is not in the journal"

# --- 2. owners and modes --------------------------------------------------------------
got=$(in_ct stat -c '%a %U %G' /run/tailmark)
[ "$got" = "750 root tailmark" ] || tm_fail "/run/tailmark: $got, not 750 root tailmark"
got=$(in_ct stat -c '%a %U %G' /run/tailmark/t.sock)
[ "$got" = "660 root tailmark" ] || tm_fail "/run/tailmark/t.sock: $got, not 660 root tailmark"
ok "started; /run/tailmark 750 root:tailmark, t.sock 660 root:tailmark"

# --- 3. a transfer through the instance -------------------------------------------
mark
cat_transfer() { # WHAT: 4 MiB between two tailmark-cat of the container, through --instance t
    in_ct sh -c 'head -c 4194304 /dev/urandom > /tmp/in
        timeout 30 tailmark-cat --instance t --listen 7000 --quiet > /tmp/out 2>/tmp/l.err & l=$!
        for i in $(seq 100); do journalctl -u tailmarkd@t -o cat --no-pager | grep -q "listens on port 7000" && break; sleep 0.1; done
        timeout 30 tailmark-cat --instance t --connect 192.0.2.10:7000 --quiet < /tmp/in || exit 1
        wait $l || exit 2
        cmp -s /tmp/in /tmp/out || exit 3' >"$TM_WORK/cat.log" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || { tm_fail "$1: tailmark-cat through --instance t: step $rc failed"; cat "$TM_WORK/cat.log"; }
    return $rc
}
cat_transfer "started" && ok "4 MiB through tailmark-cat --instance t, byte for byte"
in_ct journalctl --sync
journal t >"$TM_WORK/journal1"
n=$(grep -c "applications attach on /run/tailmark/t.sock" "$TM_WORK/journal1")
[ "$n" -eq 1 ] || tm_fail "the journal has the daemon's 'applications attach on' line $n times, not once"
dups=$(grep -v '^ ' "$TM_WORK/journal1" | sort | uniq -d | grep -c .)
[ "$dups" -eq 0 ] || tm_fail "$dups lines appear twice in the journal: $(grep -v '^ ' "$TM_WORK/journal1" | sort | uniq -d | head -2 | tr '\n' '|')"
ok "the journal has each of the daemon's lines once"

# --- 4. the socket's group -------------------------------------------------------------
mark
in_ct useradd -M -G tailmark tmmember && in_ct useradd -M tmother || tm_fail "useradd"
in_ct su tmmember -s /bin/sh -c 'tailmark-ctl --instance t status' >"$TM_WORK/member.out" 2>&1 ||
    tm_fail "a member of group tailmark: tailmark-ctl status failed: $(head -2 "$TM_WORK/member.out")"
grep -q "^tailmarkd .*--mode service" "$TM_WORK/member.out" || tm_fail "tailmark-ctl status (member): no status line"
if in_ct su tmother -s /bin/sh -c 'tailmark-ctl --instance t status' >"$TM_WORK/other.out" 2>&1; then
    tm_fail "a user outside group tailmark read the daemon's status"
fi
grep -q "Permission denied" "$TM_WORK/other.out" || tm_fail "the other user's refusal: $(cat "$TM_WORK/other.out")"
ok "a member of group tailmark reads the status; another user: $(head -1 "$TM_WORK/other.out")"

# --- 5. killed: restarted ----------------------------------------------------------------
mark
pid1=$(prop t MainPID)
in_ct systemctl kill -s KILL tailmarkd@t
restarted() { [ "$(prop t NRestarts)" = 1 ] && [ "$(prop t ActiveState)" = active ] && listening; }
if tm_wait_for 20 restarted; then
    pid2=$(prop t MainPID)
    [ "$pid2" != "$pid1" ] && [ "$pid2" != 0 ] || tm_fail "restarted, but MainPID $pid2 (was $pid1)"
    cat_transfer "restarted" && ok "SIGKILL: systemd restarted it (NRestarts 1, pid $pid1 -> $pid2), and it serves"
else
    tm_fail "after SIGKILL: NRestarts $(prop t NRestarts), $(prop t ActiveState)"
fi

# --- 6. stop -------------------------------------------------------------------------------
mark
in_ct systemctl stop tailmarkd@t
[ "$(prop t ExecMainStatus)" = 0 ] || tm_fail "systemctl stop: exit status $(prop t ExecMainStatus), not 0"
[ "$(prop t ActiveState)" = inactive ] || tm_fail "systemctl stop: $(prop t ActiveState)"
in_ct test -e /run/tailmark/t.sock && tm_fail "the socket outlived the daemon"
# journald reads the daemon's stderr on its own time: polled.
summarised() { journal t | grep -q "^summary: mode=service .*exit=signal OK"; }
tm_wait_for 10 summarised || tm_fail "no summary in the journal 10 s after stop"
ok "systemctl stop: exit 0, socket removed, summary in the journal"

# --- 7. a configuration error: no restart loop ----------------------------------------
mark
in_ct sh -c 'printf "[tailmark]\nsrc-ip = 192.0.2.10\nno-such-option = 1\n\n[eal]\nargs = -l 0 --no-pci -m 256 --vdev=net_ring1\n" > /etc/tailmark/bad.ini
    cp -p /etc/tailmark/t.secret /etc/tailmark/bad.secret'
in_ct systemctl start tailmarkd@bad 2>/dev/null
# A restart to come shows as activating/auto-restart; "failed" is final.
settled() { [ "$(prop bad ActiveState)" = failed ]; }
tm_wait_for 10 settled || tm_fail "tailmarkd@bad: $(prop bad ActiveState)/$(prop bad SubState) after 10 s, not failed"
[ "$(prop bad ExecMainStatus)" = 2 ] || tm_fail "tailmarkd@bad: exit status $(prop bad ExecMainStatus), not 2"
[ "$(prop bad NRestarts)" = 0 ] || tm_fail "tailmarkd@bad: restarted $(prop bad NRestarts) times"
named() { journal bad | grep -q "no-such-option"; }
tm_wait_for 10 named || tm_fail "tailmarkd@bad: the journal does not name the option"
ok "an unknown option: exit 2, not restarted; the journal says: $(journal bad | grep -m1 'no-such-option')"
tm_finish
