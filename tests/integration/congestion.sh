#!/usr/bin/env bash
# Congestion: two processes (--mode send / --mode recv) over net_af_packet,
# through a real bottleneck. The senders' and the receiver's namespaces are
# joined by a Linux bridge br0 in a middle namespace (tm_bridged,
# tm_bridged_join) whose every port carries a tbf qdisc (RATE, 64 KiB burst,
# 2 ms latency): the port towards the receiver (mB) is the bottleneck the
# data shares, the ports towards the senders shape the ACKs. tbf drops what
# overflows its queue: loss the kernel makes, not tailmark's fault shim.
#
# Cases (each a few seconds at the bottleneck rate):
#  1. 100 Mbit/s: 1 MiB messages, 2 flows, ring 16; and 64 KiB messages;
#  2. 1 Gbit/s: the same two;
#     efficiency: data packets the sender sent (packets_tx - control_tx,
#     which is messages_sent x packets per message + reliability.retx_pkts,
#     checked exactly) <= 1.15 x what the messages need (messages x tm_pkts);
#     goodput: the receiver's payload (bytes_payload, every message
#     completed and verified) over its elapsed_s (from the session's accept
#     to the last message consumed) >= 85% of the bottleneck rate;
#  3. fairness: two sender processes (two namespaces, two sessions) into one
#     receiver (--sessions 2) through one 200 Mbit/s bottleneck. Each
#     sender's acknowledged messages over time come from its stats lines
#     (--stats-period 0.25: t= since its launch, completed= acknowledged),
#     stamped with the wall clock as they are printed, so the two align.
#     Over the interval both were sending (from the later first ACK to the
#     earlier last-but-done sample; at least 2 s), each one's goodput is its
#     acknowledged messages x size: each 40-60% of the sum, Jain's index >=
#     0.95; each sender's data packets <= 2 x what its messages need. The series goes to $TM_WORK/fair_goodput.csv (sender, t_s from
#     the earlier launch, acked_messages, goodput_mbps over the last period);
#  4. latency under load: a bulk flow (64 KiB messages, 2 flows, ring 16)
#     fills a 100 Mbit/s bottleneck while another session sends 64 B
#     messages at --rate 1000: their p99 completion latency <= 3 ms. Both
#     go into one receiver (--sessions 2; the small session's messages are
#     smaller than its --msg-size). The latency is the small sender's own
#     (latency_ns in send mode: a message's submission to its delivery,
#     heard in the receiver's ACK), so it holds the bottleneck's queue both
#     ways and the receiver; the figures go to $TM_WORK/4_lat.json;
#  5. the lossy wire both ways (the fault shim on both processes: drop 2%,
#     dup 1%, reorder 10%, corrupt 0.5%), 1 MiB messages, otherwise the
#     default settings, no bottleneck: every message completed once and
#     verified (reliability.sh's exact checks), data packets sent <= 1.5 x
#     needed.
#
#  6. the flows of one session share its rate (issue 41): below.
#
# What each case owes to the controller, and what it does with --cc off
# (CG_EXTRA="--cc off" runs the suite so; scripts/bench.sh --cc too):
#  - 1a 1b: the controller's work. --cc off floods the 100 Mbit/s queue:
#    10-12x the packets needed, the 1 MiB case does not finish. Fail.
#  - 2a 2b: its cost where the sender cannot outrun the path (at 1 Gbit/s
#    the light sender tops out near the link): --cc off passes them by
#    design, and a controller that cuts without cause fails them (before
#    the stall rule they ran at 13-16% under load; --cc-target-us 10 here:
#    fails).
#  - 3: the controller's work. --cc off keeps the shares (each sender is
#    CPU-bound near half) but floods the queue: 6.9x the packets needed, 81%
#    of 200 Mbit/s together. So each sender's packets are bounded at 2x
#    (the controller: 1.0x quiet, 1.2-1.5x beside other builds). Fail. The
#    total goodput is printed, not bounded: 92% quiet but 70-82% under load
#    with the controller, and --cc off's 81% lies inside that.
#  - 4: the controller's work: --cc off's p99 is 10-12 ms (a full tbf
#    queue), against the 3 ms bound. Fail.
#  - 5: loss recovery's, not the controller's (no bottleneck): --cc off
#    passes. Its ratio bound, 1.10x, is what selective repair achieves
#    (1.03-1.04x here); repair by timeouts alone fails it.
#  - 6: the Sender's round robin under a pacer: --cc off has no pacer, so
#    nothing to starve, and passes; the tree before issue 41 failed it.
#
# TM_ONLY="1a 3": a subset (1a 1b 2a 2b 3 4 5 6a 6b).
source "$(dirname "$0")/lib.sh"
TM_DATA_VERSION=2 # every session here is between two processes: tagged data (tm_pkts)
tm_require_daemon
tm_require_root

only() { [ -z "${TM_ONLY:-}" ] || [[ " $TM_ONLY " == *" $1 "* ]]; }

MTU=1500
IP_A=198.18.0.1  # sender
IP_B=198.18.0.2  # receiver
IP_C=198.18.0.3  # second sender
IP_D=198.18.0.4  # second receiver (case 4), on the receiver's veth
VDEV() { echo "--vdev=net_af_packet0,iface=$1,framecnt=4096"; }
COMMON=(--secret $TM_SECRET --exit-when-done --idle-sleep-us 50 --duration 40)
# scripts/bench.sh --cc: CG_EXTRA options for every daemon (--cc off: the
# table without congestion control), CG_RESULTS a directory for the figures.
read -r -a CG_EXTRA_ARGS <<<"${CG_EXTRA:-}"
COMMON+=("${CG_EXTRA_ARGS[@]}")
CASE=0

# net TAG RATE [extra sender]: fresh namespaces NA - [br0 in NM] - NB (and NC
# on the same bridge), tbf RATE on every bridge port (RATE "none": no
# shaping). Sets NA NM NB NC.
net() {
    local tag=$1 rate=$2 extra=${3:-} p
    CASE=$((CASE + 1))
    NA=tm_cg${CASE}a_$$ NM=tm_cg${CASE}m_$$ NB=tm_cg${CASE}b_$$ NC=tm_cg${CASE}c_$$
    tm_bridged "$NA" "$NM" "$NB" || { tm_fail "$tag: bridged namespaces"; return 1; }
    if [ -n "$extra" ]; then
        tm_bridged_join "$NC" "$NM" vethC mC >/dev/null || { tm_fail "$tag: second sender namespace"; return 1; }
    fi
    [ "$rate" = none ] && return 0
    for p in mA mB ${extra:+mC}; do
        ip netns exec "$NM" tc qdisc add dev "$p" root tbf rate "$rate" burst 64kb latency 2ms ||
            { tm_fail "$tag: tbf on $p"; return 1; }
    done
}

# tbf_line TAG PORT: what the bottleneck's qdisc sent and dropped.
tbf_line() {
    ip netns exec "$NM" tc -s qdisc show dev "$1" | awk '/Sent/ {print "tbf " $2 " B " $4 " pkts, dropped " $7}' | tr -d ','
}

# reap NAME PID GRACE: waits for a daemon; one still running GRACE s after its
# peer ended gets SIGTERM (its summary says exit_reason "signal"). Sets TM_RC.
reap() {
    local name=$1 pid=$2 grace=$3
    if ! tm_wait_for "$grace" eval "! kill -0 $pid 2>/dev/null"; then
        tm_log "$name: still running ${grace} s after its peer ended: SIGTERM"
        kill -TERM "$pid" 2>/dev/null
    fi
    wait "$pid"
    TM_RC=$?
}

# stamp NAME PID: every line of NAME.out, as printed, prefixed with the wall
# clock ($EPOCHREALTIME) into NAME.ts; ends with the process PID.
stamp() {
    tail -n +1 -F --pid="$2" "$TM_WORK/$1.out" 2>/dev/null |
        while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done >"$TM_WORK/$1.ts" &
    STAMP_PID=$!
}

# figures SEND RECV PKTS SIZE RATE_BPS: "packets ratio, goodput" of a pair (RATE_BPS 0: no bottleneck).
figures() {
    python3 - "$TM_WORK/$1.json" "$TM_WORK/$2.json" "$3" "$4" "$5" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
pkts, size, rate = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
need = s['messages_requested'] * pkts
data = s['packets_tx'] - s['control_tx']
gp = r['bytes_payload'] * 8 / r['elapsed_s'] if r['elapsed_s'] > 0 else 0
of = f" = {100 * gp / rate:.1f}% of {rate / 1e6:.0f}" if rate > 0 else ""
print(f"data packets {data} (retx {s['reliability']['retx_pkts']}, {s['reliability']['rto_expired']} timeouts)"
      f" / needed {need} = {data / need:.3f}; delivered {r['messages_completed']}/{s['messages_requested']}"
      f" in {r['elapsed_s']:.2f} s: goodput {gp / 1e6:.1f} Mbit/s{of}")
EOF
}

# efficiency TAG RATE RATE_BPS SIZE MSGS [light]: one sender, one receiver, 2
# flows, ring 16, MSGS messages per flow through the bottleneck. light (the
# 1 Gbit/s cases): the sender sends message 0's bytes again (--payload fixed)
# and the receiver does not regenerate and compare them (--verify off; the
# trailer's CRC32C still checks every message, and the UDP checksum every
# packet): on these 2 vCPUs one af_packet sender with every byte generated
# and compared tops out near 1 Gbit/s, and the goodput would measure the CPU.
efficiency() {
    local tag=$1 rate=$2 bps=$3 size=$4 msgs=$5 light=${6:-}
    local flows=2 n pkts
    n=$((flows * msgs))
    pkts=$(tm_pkts "$size" $MTU)
    net "$tag" "$rate" || return
    local o=(--flows $flows --ring-size 16 --msg-size "$size" --messages "$msgs" --stats-period 0.5 "${COMMON[@]}")
    local so=() ro=()
    [ -n "$light" ] && so=(--payload fixed) ro=(--verify off)
    tm_start "${tag}_recv" 60 ns "$NB" -- "$(VDEV vethB)" -l 1 -- --mode recv --src-ip $IP_B "${o[@]}" "${ro[@]}"
    local rpid=$TM_PID
    tm_run "${tag}_send" 60 ns "$NA" -- "$(VDEV vethA)" -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "${o[@]}" \
        "${so[@]}"
    local src=$TM_RC
    reap "${tag}_recv" "$rpid" 5
    local rrc=$TM_RC
    tbf_line mB >"$TM_WORK/${tag}_tbf.txt"
    tm_log "$tag: $(tbf_line mB); $(figures "${tag}_send" "${tag}_recv" "$pkts" "$size" "$bps")"
    TM_RC=$rrc
    # It saw every message through and left by itself, not by reap's SIGTERM.
    tm_check "${tag}_recv" "d['exit_reason'] == 'done'"
    if [ -n "$light" ]; then
        tm_expect_rc "${tag}_recv" 0 &&
            tm_check "${tag}_recv" "d['messages_completed'] == d['completion_writes'] == $n" \
                "d['packets_placed'] == $n * $pkts" "d['bytes_payload'] == $n * $size" \
                "d['drops']['crc_mismatch'] == 0" "d['verify_errors'] == 0" "d['ok'] is True"
    else
        tm_expect_rc "${tag}_recv" 0 && tm_transfer_checks "${tag}_recv" $flows "$msgs" "$size" $MTU message
    fi
    TM_RC=$src
    # Every message sent: the data packets are exactly the messages' and the retransmissions.
    tm_expect_rc "${tag}_send" 0 &&
        tm_check "${tag}_send" "d['messages_acked'] == d['messages_sent'] == $n" "d['flows_failed'] == 0" \
            "d['packets_tx'] - d['control_tx'] == $n * $pkts + d['reliability']['retx_pkts']" "d['ok'] is True"
    # Always: the two figures. At 1 Gbit/s the most a 1500-byte MTU carries
    # is 96% (1454 payload bytes per 1512-byte frame); with --cc off the
    # light sender fills it (95.9%, tbf dropping nothing), so the CPU is not
    # the limit there and the 85% tests the controller.
    # A sanitizer build (TM_SAN_SLOW times slower): the goodput bound over
    # TM_SAN_SLOW and the packets' excess over what the messages need
    # (0.15) times it. Measured under ASan+UBSan: at 1 Gbit/s the CPU is
    # the limit, 310-472 Mbit/s (31-47%; the release build 954-957); at
    # 100 Mbit/s with the machine busy (other builds on both vCPUs) 1a sent
    # 1.217 x the packets at 84.8% and 1b 81.5% (the release build, as busy:
    # 1.023, 91.5% and 92.0%), on a quiet machine 93.1% and 94.5%.
    local gp="r['messages_completed'] == $n and r['bytes_payload'] * 8 / r['elapsed_s'] >= 0.85 * $bps / $TM_SAN_SLOW"
    tm_check_pair "${tag}_send" "${tag}_recv" \
        "(s['packets_tx'] - s['control_tx']) / ($n * $pkts) <= 1 + 0.15 * $TM_SAN_SLOW" "$gp" ||
        tm_log "$tag: FAIL above: packets ratio <= 1 + 0.15 x $TM_SAN_SLOW and goodput >= 85% of $rate / $TM_SAN_SLOW"
}

if only 1a; then efficiency 1a_100m_1m 100mbit 100e6 1048576 24; fi    # 48 MiB: ~4 s
if only 1b; then efficiency 1b_100m_64k 100mbit 100e6 65536 380; fi    # 760 x 64 KiB: ~4 s
if only 2a; then efficiency 2a_1g_1m 1gbit 1e9 1048576 240 light; fi   # 480 MiB: ~4 s
if only 2b; then efficiency 2b_1g_64k 1gbit 1e9 65536 3800 light; fi   # 7600 x 64 KiB: ~4 s

# --- 3. two senders, one bottleneck --------------------------------------------------------
if only 3 && net 3_fair 200mbit extra; then
    SIZE=${CG_FAIR_SIZE:-65536}
    F=2
    # Each sender alone at half of 200 Mbit/s: ~5 s.
    M=$((100000000 / 8 * 5 / SIZE / F))
    PKTS3=$(tm_pkts "$SIZE" $MTU)
    o=(--flows $F --ring-size 16 --msg-size $SIZE --messages $M --stats-period 0.25 "${COMMON[@]}")
    tm_start 3_recv 60 ns "$NB" -- "$(VDEV vethB)" -l 1 -- --mode recv --src-ip $IP_B --sessions 2 "${o[@]}"
    R=$TM_PID
    tm_start 3_senda 60 ns "$NA" -- "$(VDEV vethA)" -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "${o[@]}"
    SA=$TM_PID
    stamp 3_senda $SA
    TA=$STAMP_PID
    tm_start 3_sendc 60 ns "$NC" -- "$(VDEV vethC)" -l 0 -- --mode send --src-ip $IP_C --dst-ip $IP_B "${o[@]}"
    SC=$TM_PID
    stamp 3_sendc $SC
    TC=$STAMP_PID
    wait $SA; RCA=$?
    wait $SC; RCC=$?
    reap 3_recv $R 5
    RCR=$TM_RC
    wait $TA $TC 2>/dev/null
    python3 - "$TM_WORK" $SIZE $((F * M)) 200e6 <<'EOF'
import json, sys
work, size, total, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
series = {}
for name in ("3_senda", "3_sendc"):
    rows = []
    for line in open(f"{work}/{name}.ts"):
        p = line.split()
        if len(p) < 3 or p[1] != "stats":
            continue
        kv = dict(x.split("=", 1) for x in p[2:] if "=" in x)
        rows.append((float(p[0]), float(kv["t"]), int(kv["completed"])))
    # launch on the wall clock: the least-delayed line's stamp minus its t=
    launch = min(w - t for w, t, _ in rows) if rows else 0
    series[name] = [(launch, 0)] + [(launch + t, c) for _, t, c in rows] if rows else []
out = {"ok": False, "why": ""}
origin = min((s[0][0] for s in series.values() if s), default=0)  # the earlier launch
with open(f"{work}/fair_goodput.csv", "w") as f:
    f.write("sender,t_s,acked_messages,goodput_mbps\n")
    for name, s in series.items():
        prev = s[0]
        for t, c in s[1:]:
            g = (c - prev[1]) * size * 8 / (t - prev[0]) / 1e6 if t > prev[0] else 0
            f.write(f"{name},{t - origin:.3f},{c},{g:.2f}\n")
            prev = (t, c)
def at(s, x):  # acknowledged messages at time x, linear between samples
    pts = s
    for (t0, c0), (t1, c1) in zip(pts, pts[1:]):
        if t0 <= x <= t1:
            return c0 + (c1 - c0) * (x - t0) / (t1 - t0) if t1 > t0 else c1
    return s[-1][1]
if all(series.values()):
    firsts = [next((t for t, c in s if c > 0), None) for s in series.values()]
    lasts = [max((t for t, c in s if c < total), default=None) for s in series.values()]
    if None in firsts or None in lasts:
        out["why"] = "a sender acknowledged nothing, or finished before its first stats line"
    else:
        t0, t1 = max(firsts), min(lasts)
        out.update(t0=t0 - origin, t1=t1 - origin, interval=t1 - t0)
        if t1 - t0 >= 2.0:
            x = [(at(s, t1) - at(s, t0)) * size * 8 / (t1 - t0) for s in series.values()]
            out.update(goodput_mbps=[v / 1e6 for v in x], share=[v / sum(x) if sum(x) else 0 for v in x],
                       jain=sum(x) ** 2 / (len(x) * sum(v * v for v in x)) if any(x) else 0,
                       total_pct=100 * sum(x) / rate, ok=True)
        else:
            out["why"] = f"both senders sent together only {t1 - t0:.2f} s"
else:
    out["why"] = "no stats lines from a sender"
json.dump(out, open(f"{work}/3_fair.json", "w"))
EOF
    TM_RC=$RCR
    tm_expect_rc 3_recv 0 &&
        tm_check 3_recv "d['messages_completed'] == d['messages_verified'] == 2 * $F * $M" "d['verify_errors'] == 0" \
            "d['exit_reason'] == 'done'" \
            "len(d['sessions']) == 2 and all(s['complete'] and s['verified'] == $F * $M for s in d['sessions'])"
    for x in "a $RCA" "c $RCC"; do
        set -- $x
        TM_RC=$2
        tm_expect_rc 3_send$1 0 && tm_check 3_send$1 "d['messages_acked'] == $F * $M" "d['flows_failed'] == 0"
        # What tells the controller from --cc off here: each sender's data
        # packets over what its messages need. --cc off floods the shared
        # queue, 6.9x; the controller 1.0x on a quiet machine and 1.2-1.5x
        # beside other builds on both vCPUs. 2x lies between them.
        tm_check 3_send$1 "(d['packets_tx'] - d['control_tx']) / ($F * $M * $PKTS3) <= 2.0" ||
            tm_log "3_send$1: FAIL above: data packets <= 2 x what the messages need"
    done
    tm_log "3_fair: $(tbf_line mB); $(python3 -c "
import json; d = json.load(open('$TM_WORK/3_fair.json'))
if d['ok']:
    print(f\"over {d['interval']:.2f} s together: goodput a {d['goodput_mbps'][0]:.1f}, c {d['goodput_mbps'][1]:.1f} Mbit/s\"
          f\" (shares {d['share'][0]:.2f}/{d['share'][1]:.2f}, {d['total_pct']:.1f}% of 200 Mbit/s), Jain {d['jain']:.3f}\")
else:
    print('no common interval:', d['why'])"); series $TM_WORK/fair_goodput.csv"
    tm_check 3_fair "d['ok'] is True" "all(0.40 <= x <= 0.60 for x in d['share'])" "d['jain'] >= 0.95" ||
        tm_log "3_fair: FAIL above: each 40-60% of the goodput, Jain >= 0.95"
fi

# --- 4. small messages' latency behind a bulk flow -----------------------------------------
# Three processes on the 2 vCPUs, as an application would run them: a bulk
# sender (64 KiB messages, lcore 0), a sender of 64 B messages at --rate
# 1000 (lcore 0 too: the bulk one sleeps while its pacer holds it), both
# into one receiver (lcore 1; --sessions 2, the small session's messages
# smaller than its --msg-size). The 64 B session's completion latency as its
# application sees it: the sender's latency_ns in send mode runs from the
# message's submission to its delivery (the receiver's consumer released
# it, heard in an ACK), so it holds the bottleneck's queue both ways, the
# receiver, and what the scheduler makes each process wait: the test says
# how late the 4000 messages at 1000/s came out (the scheduler's share).
if only 4 && net 4_lat 100mbit extra; then
    SM=4000
    BULK=(--flows 1 --ring-size 16 --msg-size 65536 --stats-period 0.25 "${COMMON[@]}")
    SMALL=(--flows 1 --ring-size 16 --msg-size 64 --messages $SM --rate 1000 --stats-period 0 "${COMMON[@]}")
    tm_start 4_recv 60 ns "$NB" -- "$(VDEV vethB)" -l 1 -- --mode recv --src-ip $IP_B --sessions 2 --messages 0 \
        "${BULK[@]}"
    RP=$TM_PID
    tm_start 4_bulk_send 60 ns "$NA" -- "$(VDEV vethA)" -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B \
        --messages 100000 "${BULK[@]}"
    BS=$TM_PID
    # The bulk flow first, acknowledged messages flowing, then the small one.
    tm_wait_for 15 grep -Eqs '^stats .* completed=[1-9]' "$TM_WORK/4_bulk_send.out" ||
        tm_fail "4_lat: no bulk message acknowledged within 15 s"
    tm_run 4_small_send 60 ns "$NC" -- "$(VDEV vethC)" -l 0 -- --mode send --src-ip $IP_C --dst-ip $IP_B "${SMALL[@]}"
    SRC=$TM_RC
    kill -0 $BS 2>/dev/null
    BULK_ALIVE=$?
    kill -TERM $BS 2>/dev/null
    wait $BS
    reap 4_recv $RP 1
    RRC=$TM_RC
    LINE=$(python3 - "$TM_WORK" $SM <<'EOF'
import json, sys
w, sm = sys.argv[1], int(sys.argv[2])
s = json.load(open(f"{w}/4_small_send.json"))
b = json.load(open(f"{w}/4_bulk_send.json"))  # acknowledged bulk bytes, from its session up to the SIGTERM
r = json.load(open(f"{w}/4_recv.json"))
lat = s["latency_ns"]
small = [x for x in r["sessions"] if x["completed"] == sm]
out = {"samples": lat["samples"], "p50_ns": lat["p50"], "p99_ns": lat["p99"], "max_ns": lat["max"],
       "small_elapsed_s": s["elapsed_s"], "retx": s["reliability"]["retx_pkts"],
       "small_at_recv": small[0] if len(small) == 1 else None,
       "bulk_mbps": b["messages_acked"] * 65536 * 8 / b["elapsed_s"] / 1e6 if b["elapsed_s"] > 0 else 0,
       "bulk_srtt_us": b["congestion"]["srtt_us"], "bulk_base_rtt_us": b["congestion"]["base_rtt_us"]}
json.dump(out, open(f"{w}/4_lat.json", "w"))
print(f"64 B x {lat['samples']} at --rate 1000 in {s['elapsed_s']:.2f} s (the scheduler's share: "
      f"{max(0.0, s['elapsed_s'] - sm / 1000):.2f} s late), {out['retx']} retransmitted: submit-to-delivered "
      f"p50 {lat['p50'] / 1e3:.1f} us, p99 {lat['p99'] / 1e3:.1f} us, max {lat['max'] / 1e3:.1f} us; bulk "
      f"{out['bulk_mbps']:.1f} Mbit/s, its smoothed RTT {out['bulk_srtt_us']:.0f} us (base {out['bulk_base_rtt_us']:.0f})")
EOF
)
    tm_log "4_lat: $(tbf_line mB); $LINE"
    [ $BULK_ALIVE -eq 0 ] || tm_fail "4_lat: the bulk sender had ended before the small session finished"
    TM_RC=$SRC
    tm_expect_rc 4_small_send 0 && tm_check 4_small_send "d['messages_acked'] == $SM" "d['flows_failed'] == 0"
    tm_check 4_recv "d['verify_errors'] == 0"
    # The p99 bound times TM_SAN_SLOW under a sanitizer: ASan+UBSan measured
    # 5.0 ms on a quiet machine, 23.1 ms with other builds on both vCPUs
    # (the release build, as busy: 2.5 ms; the 64 B sender came out 1.97 s
    # late against 0.01 s).
    tm_check 4_lat "d['samples'] == $SM" "d['small_at_recv'] is not None" \
        "d['small_at_recv']['verified'] == $SM and d['small_at_recv']['verify_errors'] == 0" \
        "d['p99_ns'] <= 3e6 * $TM_SAN_SLOW" ||
        tm_log "4_lat: FAIL above: p99 completion latency of the 64 B session <= 3 ms x $TM_SAN_SLOW"
    # The bulk session kept the path busy: 88-92 Mbit/s. A low p99 with the
    # bulk session held at the 1 Mbit/s floor (the repair of slow start's
    # losses cutting at every interval: 1.1-40 Mbit/s in 3 of 63 runs before
    # that was fixed) is no proof of the controller.
    tm_check 4_lat "d['bulk_mbps'] >= 50 / $TM_SAN_SLOW" ||
        tm_log "4_lat: FAIL above: the bulk session's goodput >= 50 Mbit/s / $TM_SAN_SLOW"
fi

# --- 5. the lossy wire, both ways ----------------------------------------------------------
if only 5 && net 5_lossy none; then
    F=2
    M=20
    N=$((F * M))
    PK=$(tm_pkts 1048576 $MTU)
    FAULT=drop=0.02,dup=0.01,reorder=0.1,corrupt=0.005
    o=(--flows $F --msg-size 1M --messages $M --stats-period 0 --secret $TM_SECRET --exit-when-done --duration 60)
    tm_start 5_recv 90 ns "$NB" -- "$(VDEV vethB)" -l 1 -- --mode recv --src-ip $IP_B "${o[@]}" --fault $FAULT,seed=501
    R=$TM_PID
    tm_run 5_send 90 ns "$NA" -- "$(VDEV vethA)" -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "${o[@]}" \
        --fault $FAULT,seed=502
    SRC=$TM_RC
    reap 5_recv $R 5
    RRC=$TM_RC
    tm_log "5_lossy: $(figures 5_send 5_recv "$PK" 1048576 0); $(python3 -c "
import json; r = json.load(open('$TM_WORK/5_recv.json')); s = json.load(open('$TM_WORK/5_send.json'))
print(f\"faults at the receiver {r['fault']}, at the sender {s['fault']}, crc_mismatch {r['drops']['crc_mismatch']}\")")"
    TM_RC=$RRC
    tm_expect_rc 5_recv 0 &&
        tm_check 5_recv \
            "d['messages_completed'] == $N" "d['messages_verified'] == $N" "d['completion_writes'] == $N" \
            "d['verify_errors'] == 0" "all(f['released'] == $M and f['acked'] == $M for f in d['per_flow'])" \
            "d['exit_reason'] == 'done'"
    TM_RC=$SRC
    tm_expect_rc 5_send 0 &&
        tm_check 5_send \
            "d['messages_sent'] == $N" "d['messages_acked'] == $N" "d['flows_failed'] == 0" \
            "d['messages_failed'] == 0" "all(f['released'] == $M and f['acked'] == $M for f in d['per_flow'])" \
            "d['ok'] is True"
    [ "$SRC" -eq 0 ] && tm_check 5_send "d['packets_tx'] - d['control_tx'] == $N * $PK + d['reliability']['retx_pkts']"
    tm_check_pair 5_send 5_recv \
        "s['reliability']['retx_pkts'] == r['fault']['arrived_retx']" \
        "(s['packets_tx'] - s['control_tx']) / ($N * $PK) <= 1.10" ||
        tm_log "5_lossy: FAIL above: data packets <= 1.10 x needed"
fi

# --- 6. the flows of one paced session share its rate --------------------------------------
# One session of 4 flows (ring 16) through a 200 Mbit/s bottleneck, every
# flow with a message always ready (--messages 0) for 6 s: 64 KiB (6a) and
# 1 MiB (6b) messages. From the sender's per_flow: each flow's messages
# sent within 0.8-1.25 of the mean, and each flow's p99 delivery latency
# (submit to the receiver's release, heard in an ACK) within 2x of the
# session's best flow's. Before the fix (issue 41) flow 0 took every pacer
# step: 1951/1/1/1 messages at 64 KiB, the starved flows' one message
# waiting the whole run. The receiver: every message it completed
# verified, none failed.
flows_share() {
    local tag=$1 size=$2 F=4
    net "$tag" 200mbit || return
    local o=(--flows $F --ring-size 16 --msg-size "$size" --messages 0 --stats-period 0 "${COMMON[@]}")
    tm_start "${tag}_recv" 60 ns "$NB" -- "$(VDEV vethB)" -l 1 -- --mode recv --src-ip $IP_B "${o[@]}"
    local rpid=$TM_PID
    tm_run "${tag}_send" 60 ns "$NA" -- "$(VDEV vethA)" -l 0 -- --mode send --src-ip $IP_A --dst-ip $IP_B "${o[@]}" \
        --duration 6
    local src=$TM_RC
    reap "${tag}_recv" "$rpid" 3
    local rrc=$TM_RC
    tm_log "$tag: $(tbf_line mB); per flow $(python3 -c "
import json; d = json.load(open('$TM_WORK/${tag}_send.json'))
print('; '.join(f\"{i}: sent {f['sent']}, p99 {f['lat_p99_ns'] / 1e6:.1f} ms ({f['latency_samples']} samples)\"
                for i, f in enumerate(d['per_flow'])))")"
    TM_RC=$src
    tm_expect_rc "${tag}_send" 0 &&
        tm_check "${tag}_send" "d['exit_reason'] == 'duration'" "d['flows_failed'] == 0" "len(d['per_flow']) == $F" \
            "min(f['sent'] for f in d['per_flow']) >= 10" \
            "all(0.8 <= f['sent'] * $F / sum(g['sent'] for g in d['per_flow']) <= 1.25 for f in d['per_flow'])" \
            "all(f['latency_samples'] >= 0.8 * f['sent'] for f in d['per_flow'])" \
            "max(f['lat_p99_ns'] for f in d['per_flow']) <= 2 * min(f['lat_p99_ns'] for f in d['per_flow'])" ||
        tm_log "$tag: FAIL above: each flow's share of the messages within 0.8-1.25 of the mean, p99 within 2x"
    TM_RC=$rrc
    tm_check "${tag}_recv" "d['verify_errors'] == 0" "d['messages_completed'] == d['messages_verified']"
    tm_check_pair "${tag}_send" "${tag}_recv" "r['messages_completed'] >= sum(f['acked'] for f in s['per_flow']) > 0"
}
if only 6a; then flows_share 6a_flows_64k 65536; fi
if only 6b; then flows_share 6b_flows_1m 1048576; fi

if [ -n "${CG_RESULTS:-}" ]; then
    mkdir -p "$CG_RESULTS" && cp "$TM_WORK"/*.json "$TM_WORK"/*.csv "$TM_WORK"/*_tbf.txt "$CG_RESULTS"/ 2>/dev/null
fi
tm_finish
