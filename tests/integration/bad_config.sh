#!/usr/bin/env bash
# Configuration: a bad value, from the command line or from an INI file, gets
# exit code 2 and exactly one message on stderr that names the option (or the
# INI field). Errors found before EAL starts leave stderr otherwise empty;
# those that need EAL (lcores, ports) still print one "tailmarkd:" line. Also:
# the built-in defaults equal config/loopback.ini, and a command-line flag
# overrides the file.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

EAL=(--vdev=net_ring0 -l 0,1)

# bad NAME NEEDLE EXPECT_LINES -- EAL... -- OPTIONS...
# EXPECT_LINES: 1 (stderr is that one line) or "eal" (one tailmarkd: line among EAL's).
bad() {
    local name=$1 needle=$2 lines=$3
    shift 3
    tm_run "$name" 30 "$@"
    local err="$TM_WORK/$name.err"
    if [ "$TM_RC" -ne 2 ]; then
        tm_fail "$name: exit code $TM_RC, want 2"
        tm_show "$name"
        return
    fi
    local ours
    ours=$(grep -c '^tailmarkd: ' "$err")
    if [ "$ours" -ne 1 ]; then
        tm_fail "$name: $ours 'tailmarkd:' lines on stderr, want 1"
        tm_show "$name"
        return
    fi
    if [ "$lines" = 1 ] && [ "$(wc -l <"$err")" -ne 1 ]; then
        tm_fail "$name: stderr has more than the one message"
        tm_show "$name"
        return
    fi
    if ! grep '^tailmarkd: ' "$err" | grep -F -- "$needle" >/dev/null; then
        tm_fail "$name: the message does not name '$needle': $(grep '^tailmarkd: ' "$err")"
        return
    fi
    if [ -s "$TM_WORK/$name.json" ]; then
        tm_fail "$name: a summary was written for a run that never started"
        return
    fi
    tm_log "ok: $name -> $(grep '^tailmarkd: ' "$err")"
}

bad ring_size     --ring-size    1 -- "${EAL[@]}" -- --ring-size 3
bad ring_size_big --ring-size    1 -- "${EAL[@]}" -- --ring-size 8192
bad mode          --mode         1 -- "${EAL[@]}" -- --mode bogus
bad flows         --flows        1 -- "${EAL[@]}" -- --flows 0
bad msg_size      --msg-size     1 -- "${EAL[@]}" -- --msg-size 100M
bad msg_size_neg  --msg-size     1 -- "${EAL[@]}" -- --msg-size -5
bad completion    --completion   1 -- "${EAL[@]}" -- --completion sometimes
bad key           --key          1 -- "${EAL[@]}" -- --key 0x1FFFFFFFF
bad src_ip        --src-ip       1 -- "${EAL[@]}" -- --src-ip 300.1.1.1
bad dst_mac       --dst-mac      1 -- "${EAL[@]}" -- --dst-mac zz:00
bad mtu           --mtu          1 -- "${EAL[@]}" -- --mtu 40
bad stream_min    --stream-min   1 -- "${EAL[@]}" -- --stream-min 64Q
bad lcore_list    --rx-lcores    1 -- "${EAL[@]}" -- --rx-lcores 1,1
bad unknown       --frobnicate   1 -- "${EAL[@]}" -- --frobnicate 3
bad missing       --ring-size    1 -- "${EAL[@]}" -- --ring-size
bad stray         stray          1 -- "${EAL[@]}" -- stray
bad no_file       --config       1 -- "${EAL[@]}" -- --config "$TM_WORK/does-not-exist.ini"
# Sessions: send and recv need the shared secret, 128 bits as 32 hex digits.
bad no_secret     --secret       1 -- "${EAL[@]}" -- --mode send
bad no_secret_rx  --secret       1 -- "${EAL[@]}" -- --mode recv
bad secret_short  "--secret: expected 32 hex digits (128 bits), got 31" 1 -- "${EAL[@]}" -- --mode send \
    --secret 00112233445566778899aabbccddeef
bad secret_hex    --secret       1 -- "${EAL[@]}" -- --mode send --secret 00112233445566778899aabbccddeefg
bad peer_timeout  --peer-timeout-ms 1 -- "${EAL[@]}" -- --keepalive-ms 1000 --peer-timeout-ms 1500
bad nullsend_mac  --dst-mac      1 -- "${EAL[@]}" -- --mode send --flow-control off
# Service mode (applications attach on a Unix socket).
bad svc_secret    --secret       1 -- "${EAL[@]}" -- --mode service
bad svc_shell     "--mode service" 1 -- "${EAL[@]}" -- --mode service --insecure -i
bad svc_sock_long --control-socket 1 -- "${EAL[@]}" -- --mode service --insecure \
    --control-socket "/tmp/$(printf 'x%.0s' {1..120})"
bad svc_max_apps  --max-apps     1 -- "${EAL[@]}" -- --mode service --insecure --max-apps 0
bad svc_sock_dir  --control-socket eal -- "${EAL[@]}" -- --mode service --insecure \
    --control-socket /proc/no/such/dir/tm.sock

printf '[tailmark]\nflows = 2\nring-size = 5\n' >"$TM_WORK/ring5.ini"
bad ini_value     "--ring-size: 5 is not a power of two" 1 -- "${EAL[@]}" -- --config "$TM_WORK/ring5.ini"
grep -q 'ring5.ini' "$TM_WORK/ini_value.err" || tm_fail "ini_value: the message does not name the file"
printf '[tailmark]\ncolour = blue\n' >"$TM_WORK/colour.ini"
bad ini_unknown   "colour"       1 -- "${EAL[@]}" -- --config "$TM_WORK/colour.ini"
printf '[tailmark]\nflows = 4\n[flow.7]\nkey = 5\n' >"$TM_WORK/flow7.ini"
bad ini_flow      "[flow.7]"     1 -- "${EAL[@]}" -- --config "$TM_WORK/flow7.ini"
printf '[flow.1]\nkey = banana\n' >"$TM_WORK/badkey.ini"
bad ini_key       "[flow.1] key" 1 -- "${EAL[@]}" -- --config "$TM_WORK/badkey.ini"
printf '[network]\nmtu = 1500\n' >"$TM_WORK/section.ini"
bad ini_section   "[network]"    1 -- "${EAL[@]}" -- --config "$TM_WORK/section.ini"

# Found once EAL runs: lcores, ports. (Several rx lcores on a port without
# RSS are no longer an error: they hand each other their flows' data.)
bad lcores        --tx-lcores    eal -- "${EAL[@]}" -- --tx-lcores 1-3
bad tx_port       --tx-port      eal -- "${EAL[@]}" -- --tx-port 5
bad send_ports    --rx-port      1 -- "${EAL[@]}" -- --mode send --insecure --tx-port 0 --rx-port 1

# Nothing left behind by the refused runs (the daemon removes its EAL files).
for p in "${TM_PREFIXES[@]}"; do
    if [ -e "/var/run/dpdk/$p" ] || compgen -G "/dev/hugepages/${p}map_*" >/dev/null; then
        tm_fail "EAL files of $p left behind"
    fi
done

# Defaults == config/loopback.ini; a flag overrides the file; per-flow keys parse.
timeout 10 "$TAILMARKD" -- --dump-config >"$TM_WORK/defaults.ini" 2>&1
timeout 10 "$TAILMARKD" -- --config "$TAILMARK_CONFIG_DIR/loopback.ini" --dump-config >"$TM_WORK/fromfile.ini" 2>&1
if diff -u "$TM_WORK/defaults.ini" "$TM_WORK/fromfile.ini"; then
    tm_log "ok: built-in defaults == config/loopback.ini"
else
    tm_fail "built-in defaults differ from config/loopback.ini"
fi
timeout 10 "$TAILMARKD" -- --config "$TAILMARK_CONFIG_DIR/two-process-keys.ini" --messages 7 --key 0x42 \
    --dump-config >"$TM_WORK/override.ini" 2>&1
if grep -qx 'messages = 7' "$TM_WORK/override.ini" && grep -qx 'key = 0x00000042' "$TM_WORK/override.ini" &&
    grep -qx 'msg-size = 4096' "$TM_WORK/override.ini" && grep -A1 -x '\[flow.3\]' "$TM_WORK/override.ini" | grep -x 'key = 0xdeadbeef' >/dev/null; then
    tm_log "ok: command line overrides the file; per-flow keys read"
else
    tm_fail "override / per-flow keys"
    cat "$TM_WORK/override.ini"
fi
timeout 10 "$TAILMARKD" --help >"$TM_WORK/help.txt" 2>&1
for o in mode flows msg-size messages duration ring-size mtu completion tx-lcores rx-lcores \
    consumer-lcores tx-port rx-port src-mac dst-mac src-ip dst-ip udp-port key stats-period \
    summary-json exit-when-done config secret insecure service sessions keepalive-ms peer-timeout-ms \
    connect-timeout-ms control-socket max-apps max-session-mb stream-min; do
    grep -q -- "--$o" "$TM_WORK/help.txt" || tm_fail "--help does not list --$o"
done
grep -q -- '^  -i ' "$TM_WORK/help.txt" || tm_fail "--help does not list -i"

tm_finish
