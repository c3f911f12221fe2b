#!/usr/bin/env bash
# The rx scaling curve (issue 17, item 5): tailmark's rx path on 1, 2, 4, 8
# and 12 rx lcores, each polling its own net_ring queue, fed ready-made
# packets (--replay) by tx lcores of their own, the completions taken by
# consumer lcores (--verify off); against dpdk-testpmd io on net_null with
# as many forwarding cores and queues, in the same run.
#
# It needs 1 + N + (tx) + (consumer) CPUs for N rx lcores: 16 for the whole
# curve (the device machine). Prepared to run there in one call, well inside
# its 15 minutes (about 1 minute of runs):
#   ../shared/tools/make-devbundle.sh build/app/tailmarkd/tailmarkd
#   # then, on the device, carrying devbundle and scripts:
#   LD_LIBRARY_PATH=devbundle/lib TAILMARKD=devbundle/tailmarkd \
#     TESTPMD=devbundle/dpdk-testpmd TM_EAL_EXTRA="-d devbundle/pmds" \
#     scripts/scaling.sh --out "$OUT"
# Here (2 vCPUs), --oversubscribe maps the lcores onto the CPUs there are:
# the mechanics and the exact counts, no figures.
#
#   scripts/scaling.sh [--lcores "1 2 4 8 12"] [--size 64] [--secs 4] [--out DIR] [--oversubscribe]
#
# Writes DIR/scaling.md and scaling.json (default build/bench). Exits 1
# when a run failed or its counts do not add up: every message completed,
# every rx lcore placed packets, the lanes' packets sum to the port's,
# nothing dropped.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"

lcores="1 2 4 8 12"
size=64
secs=4
out=$TM_BUILD/bench
over=0
while [ $# -gt 0 ]; do
    case $1 in
    --lcores) lcores=${2:-}; shift ;;
    --size) size=${2:-}; shift ;;
    --secs) secs=${2:-}; shift ;;
    --out) out=${2:-}; shift ;;
    --oversubscribe) over=1 ;;
    *) echo "usage: scripts/scaling.sh [--lcores \"1 2 4 8 12\"] [--size B] [--secs S] [--out DIR] [--oversubscribe]" >&2
       exit 2 ;;
    esac
    shift
done
daemon=${TAILMARKD:-$(tm_daemon)} || { tm_say "no tailmarkd: build first (scripts/run.sh), or set TAILMARKD"; exit 1; }
testpmd_bin=${TESTPMD:-$(command -v dpdk-testpmd)}
read -r -a extra <<<"${TM_EAL_EXTRA:-}"
tm_setup_hugepages
read -r -a MEM <<<"${TAILMARK_EAL_MEM:-}"
[ ${#MEM[@]} -eq 0 ] || MEM=(--no-huge -m 2048)
ncpu=$(nproc)
raw=$out/scaling_raw
rm -rf "$raw"
mkdir -p "$raw"

# The lcore list for K lcores: 0..K-1, each on its own CPU, or on CPU
# (lcore mod ncpu) with --oversubscribe.
eal_lcores() {
    local k=$1 i s=""
    for ((i = 0; i < k; i++)); do
        s+="${s:+,}$i@$((over ? i % ncpu : i))"
    done
    echo "$s"
}

# testpmd io on net_null, N forwarding cores and queue pairs: the median
# of its per-second Rx-pps lines.
testpmd_io() {
    local n=$1
    timeout -s INT $((secs + 10)) "$testpmd_bin" --lcores "$(eal_lcores $((n + 1)))" --no-pci "${MEM[@]}" "${extra[@]}" \
        --file-prefix "tm_scale_tp_$$" --vdev=net_null0,copy=0 --log-level=lib.eal:warning -- \
        --port-topology=loop --forward-mode=io --nb-cores="$n" --rxq="$n" --txq="$n" --auto-start \
        --stats-period 1 --total-num-mbufs=$((65536 * n)) >"$raw/testpmd_$n.out" 2>&1
    grep -o "Rx-pps: *[0-9]*" "$raw/testpmd_$n.out" | awk '{print $2}' | awk '$1 > 0' |
        sort -n | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : 0)}'
}

fail=0
rows=()
for n in $lcores; do
    # Lcore 0 (main) and the consumers, then the replay's tx lcores, then
    # the rx lcores. A consumer takes about a fifth of an rx lcore's time
    # per message at 64 B (--verify off), a replay tx lcore about a seventh:
    # one of each per 6 rx lcores, within the CPUs there are.
    t=$(((n + 5) / 6))
    c=$(((n + 5) / 6))
    if [ $over -eq 0 ] && [ $((n + t + c)) -gt "$ncpu" ]; then
        tm_say "$n rx lcores need $((n + t + c)) CPUs, this machine has $ncpu (--oversubscribe to run anyway)"
        fail=1
        continue
    fi
    cons="0-$((c - 1))"
    txl="$c-$((c + t - 1))"
    rxl="$((c + t))-$((c + t + n - 1))"
    [ "$c" -eq 1 ] && cons=0
    [ "$t" -eq 1 ] && txl=$c
    [ "$n" -eq 1 ] && rxl=$((c + t))
    # Every message counted: each flow sends a fixed number, about --secs
    # worth at an rx lcore's 64 B rate (15 M msgs/s; 30 000 oversubscribed),
    # and the run ends when all are completed.
    flows=$((4 * n))
    per=$((secs * (over ? 30000 : 15000000) / 4))
    name=rx_$n
    tm_say "rx lcores $rxl, replay tx $txl, consumers $cons; $flows flows x $per messages of $size B"
    timeout -k 5 $((secs + 60)) "$daemon" --lcores "$(eal_lcores $((n + t + c)))" --no-pci "${MEM[@]}" "${extra[@]}" \
        --file-prefix "tm_scale_$$" --log-level=lib.eal:warning --log-level='tailmark.*:warning' --vdev=net_ring0 -- \
        --stats-period 0 --summary-json "$raw/$name.json" --udp-checksum off --flows "$flows" --msg-size "$size" \
        --messages "$per" --exit-when-done --duration $((secs * 10 + 20)) --ring-size 64 --replay on --verify off \
        --tx-lcores "$txl" --rx-lcores "$rxl" --consumer-lcores "$cons" >"$raw/$name.out" 2>&1
    rc=$?
    tp=$(testpmd_io "$n")
    rows+=("$n $rc ${tp:-0} $t $c $((flows * per))")
done

python3 - "$raw" "$out" "$size" "$over" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
    "$ncpu" "${rows[@]}" <<'PYEOF' || fail=1
import json, os, sys
raw, out, size, over, cpu, ncpu = sys.argv[1:7]
rows, res, bad = [], [], 0
for r in sys.argv[7:]:
    n, rc, tp, t, c, want = (int(x) for x in r.split())
    p = os.path.join(raw, f"rx_{n}.json")
    d = json.load(open(p)) if os.path.exists(p) else {}
    lanes = (d.get("rx_steering") or {}).get("lcores", [])
    el = d.get("elapsed_s") or 0
    lane_mpps = [l["packets_rx"] / el / 1e6 if el else 0 for l in lanes]
    problems = []
    if rc != 0: problems.append(f"exit {rc}")
    if d.get("messages_completed") != want: problems.append(f"completed {d.get('messages_completed')} of {want}")
    if len(lanes) != n: problems.append(f"{len(lanes)} rx lanes, {n} wanted")
    if any(l["placed"] == 0 for l in lanes): problems.append("an rx lcore placed nothing")
    if sum(l["packets_rx"] for l in lanes) != d.get("packets_rx", -1): problems.append("the lanes do not sum to the port")
    # Every data packet placed: no drop but the session layer's at the end
    # (the loopback's keep-alive crossing its CLOSE reaches a session already
    # forgotten: unknown_session, or control_stale; tests/integration/sessions.sh
    # holds those counts exactly).
    dr = d.get("drops") or {}
    data_drops = d.get("drops_total", 1) - dr.get("unknown_session", 0) - dr.get("control_stale", 0)
    if data_drops != 0: problems.append(f"drops {data_drops}")
    if problems: bad += 1
    mpps = d.get("packets_rx", 0) / el / 1e6 if el else 0
    rxc = (d.get("cycles") or {}).get("rx_per_packet", 0)
    res.append({"rx_lcores": n, "tx_lcores": t, "consumer_lcores": c, "msgs_per_s": d.get("msgs_per_s", 0),
                "mpps": mpps, "lane_mpps": lane_mpps, "rx_cycles_per_packet": rxc, "testpmd_io_mpps": tp / 1e6,
                "problems": problems})
    rows.append(f"| {n} | {t} / {c} | {d.get('msgs_per_s', 0) / 1e6:.2f} | {mpps:.2f} | "
                f"{min(lane_mpps, default=0):.2f} - {max(lane_mpps, default=0):.2f} | {rxc:.0f} | {tp / 1e6:.2f} | "
                f"{(mpps / (tp / 1e6)) if tp else 0:.2f}x | {'; '.join(problems) or 'ok'} |")
md = [f"rx scaling, {size} B messages (one packet each), --replay fed, --verify off; {cpu}, {ncpu} CPUs"
      + (" (oversubscribed: mechanics only, no figures)" if over == "1" else "") + ".", "",
      "| rx lcores | tx / consumer lcores | M msgs/s | Mpps | per rx lcore Mpps | rx cycles/packet | testpmd io Mpps | tailmark / testpmd | counts |",
      "|---:|---|---:|---:|---|---:|---:|---:|---|"] + rows
open(os.path.join(out, "scaling.md"), "w").write("\n".join(md) + "\n")
json.dump({"cpu": cpu, "cpus": int(ncpu), "size": int(size), "oversubscribed": over == "1", "rows": res},
          open(os.path.join(out, "scaling.json"), "w"), indent=1)
print("\n".join(md))
sys.exit(1 if bad else 0)
PYEOF
exit $fail
