#!/usr/bin/env bash
# The application path as scripts/bench.sh measures it: tailmark-perf --loop
# (libtailmark-client only) sending from its arena to itself through a real
# `tailmarkd --mode service` on net_ring (no namespace), every byte verified.
#  1. 64 B messages: copied into the packets, taken without a shared info.
#  2. 512 and 513 B, each side of the Sender's copy break: the first copied,
#     the second referenced from the arena (a shared info per message).
#  3. 4 KiB messages, zero copy, two flows.
#  4. --lazy-completions (64 B and 4 KiB): the app takes its completions
#     only once the daemon's completion ring is full, so the daemon must stop
#     taking submissions and wait each time; nothing lost, nothing doubled.
# Each run: exit 0, exactly COUNT received and COUNT completed, no byte
# wrong. At SIGINT the daemon's summary counts exactly the submissions taken
# and delivered, none invalid or failed, and waits for completions; just
# before it, /tailmark/service (dpdk-telemetry.py) reads the same counters.
source "$(dirname "$0")/lib.sh"
tm_require_daemon
perf=${TAILMARK_PERF:-$TM_SRC/build/app/tailmark-perf/tailmark-perf}
[ -x "$perf" ] || { tm_log "not built: $perf"; exit 1; }
sock=$TM_WORK/d.sock

tm_start d 300 -- --vdev=net_ring0 -l 0,1 -- --mode service --control-socket "$sock" --insecure --stats-period 0
DPID=$TM_PID
up() { grep -q "applications attach on" "$TM_WORK/d.err" 2>/dev/null && [ -S "$sock" ]; }
tm_await d "$DPID" 30 up "the daemon never listened on its socket"

total=0
# loop NAME PORT SIZE COUNT ARGS...: one tailmark-perf --loop, checked exactly.
loop() {
    local name=$1 port=$2 size=$3 count=$4
    shift 4
    timeout 120 "$perf" --socket "$sock" --loop "198.18.0.1:$port" --size "$size" --count "$count" --verify "$@" \
        >"$TM_WORK/$name.json" 2>"$TM_WORK/$name.err"
    local rc=$?
    total=$((total + count))
    if [ $rc -eq 0 ] && python3 - "$TM_WORK/$name.json" "$size" "$count" <<'EOF'; then
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
size, count = int(sys.argv[2]), int(sys.argv[3])
sys.exit(0 if d["size"] == size and d["messages"] == count and d["received"] == count and d["completed"] == count
         and d["failed"] == 0 and d["verified"] and d["errors"] == 0 else 1)
EOF
        tm_log "ok: $name: $count messages of $size B $*: all received and completed once, every byte right"
    else
        tm_fail "$name: exit $rc: $(cat "$TM_WORK/$name.json" "$TM_WORK/$name.err")"
    fi
}

loop b64 7100 64 200000
loop b512 7101 512 20000
loop b513 7102 513 20000
loop b4k 7103 4096 20000 --flows 2
loop lazy64 7104 64 100000 --lazy-completions
loop lazy4k 7105 4096 20000 --lazy-completions --ring 16

# The same counters live, through DPDK's telemetry client, before SIGINT:
# every run has ended, so they are final and must equal the summary's.
if printf '/tailmark/service\n' | /usr/bin/python3 /usr/bin/dpdk-telemetry.py -f "${TM_PREFIXES[-1]}" \
    >"$TM_WORK/tele.out" 2>"$TM_WORK/tele.err"; then
    python3 -c '
import re, sys
m = re.search(r"\{\"/tailmark/service\": (\{.*?\})\}", open(sys.argv[1]).read())
print(m.group(1)) if m else sys.exit(1)' "$TM_WORK/tele.out" >"$TM_WORK/tele.json" ||
        tm_fail "no /tailmark/service answer: $(cat "$TM_WORK/tele.out")"
else
    tm_fail "dpdk-telemetry.py failed: $(cat "$TM_WORK/tele.err")"
fi

kill -INT "$DPID"
wait "$DPID" || tm_fail "the daemon exited $? on SIGINT"
python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))["service"]
bad = [k for k in ("taken", "invalid", "delivered", "failed", "cq_waits", "shinfo_waits", "bad_head") if t.get(k) != s[k]]
if bad or not isinstance(t.get("sessions"), int):
    sys.exit(f"telemetry {t} against the summary {s}: {bad}")' \
    "$TM_WORK/tele.json" "$TM_WORK/d.json" &&
    tm_log "ok: /tailmark/service read the summary's counters exactly" ||
    tm_fail "/tailmark/service does not match the summary"
tm_check d "d['service']['taken'] == $total" "d['service']['delivered'] == $total" \
    "d['service']['invalid'] == 0" "d['service']['failed'] == 0" "d['service']['bad_head'] == 0" \
    "d['service']['cq_waits'] > 0" "d['messages_failed'] == 0" "d['tx_dropped'] == 0" &&
    tm_log "ok: the daemon took and delivered exactly $total submissions, waiting for completions when the app held them"
tm_finish
