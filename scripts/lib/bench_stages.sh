# scripts/bench.sh --stages: where the rx lcore's cycles go, per stage, at
# 64 B and 64 KiB. Sourced by bench.sh.
# shellcheck shell=bash
#
# How: perf record, sampling the CPU clock (this VM exposes no hardware
# counters to perf, so cycles:u is "not supported"; cpu-clock is the kernel's
# timer, 4 kHz: more costs the VM a timer exit per sample and slows the run several times), on the rx lcore's thread of the rx replay run (bench.sh's
# rx rows: lcore 1 runs rx alone, lcore 0 replays ready-made packets and
# consumes). The binary is a second build, build-stages/, with
# -Dstage_profile=true: the placer's stages (rx_placer.cc) out of line, so
# each has its own symbol; everything else is the normal -O3 build. Each
# stage's share of the rx thread's samples times the rx cycles per packet the
# normal build reaches in the same invocation gives cycles per packet. The
# out-of-line calls cost a few cycles each; the profile build's own rx
# cycles per packet are shown beside the normal build's.
# Writes $out/stages.md and stages.json.
bench_stages() {
    local out=$1 sdir=$TM_ROOT/build-stages size ring total
    command -v perf >/dev/null || { tm_say "--stages: perf is not installed (apt install linux-perf)"; return 1; }
    tm_say "stages: building build-stages/ (-Dstage_profile=true)"
    tm_build "$sdir" -Dstage_profile=true -Dtests=false || return 1
    local sdaemon
    sdaemon=$(tm_daemon "$sdir") || { tm_say "build-stages: no tailmarkd"; return 1; }
    local raw=$out/stages_raw
    rm -rf "$raw"
    mkdir -p "$raw"
    read -r -a MEM <<<"${TAILMARK_EAL_MEM---no-huge -m 1024}"
    [ ${#MEM[@]} -eq 0 ] || MEM=(--no-huge -m 2048)
    # Two placements of the replay: on lcore 0 (bench.sh's rx rows: every
    # packet's header, trailer and mbuf lines cross between the cores,
    # as the consumer's completion lines do), and on the rx lcore itself (no
    # mbuf line crosses; what a NIC's DMA would leave).
    local place txl
    for place in cross local; do
    txl=0
    [ $place = local ] && txl=1
    for size in 64 65536; do
        ring=64
        [ "$size" -ge 65536 ] && ring=16
        total=$((2000000000 / size))
        [ $total -gt 8000000 ] && total=8000000
        for which in normal stages; do
            local bin=$daemon
            [ $which = stages ] && bin=$sdaemon
            local name=${which}_${place}_$size
            # perf follows the daemon (-p after it starts would miss the
            # start-up; recording the whole command includes EAL's threads,
            # which the report's --comm filter leaves out).
            local rec=()
            [ $which = stages ] && rec=(perf record -q -F 4000 -e cpu-clock -o "$raw/$name.data" --)
            timeout -k 5 120 "${rec[@]}" "$bin" -l 0-1 --no-pci "${MEM[@]}" --file-prefix "tm_bench_st_$$" \
                --log-level=lib.eal:warning --log-level='tailmark.*:warning' --vdev=net_ring0 -- \
                --stats-period 0 --summary-json "$raw/$name.json" --udp-checksum off \
                --flows 1 --msg-size "$size" --messages "$total" --ring-size "$ring" --replay on \
                --tx-lcores $txl --rx-lcores 1 --consumer-lcores 0 --exit-when-done --duration 60 \
                >"$raw/$name.out" 2>&1
            if [ $which = stages ]; then
                # The rx lcore's thread only: DPDK 22.11 names it rte-worker-1.
                perf report -q -i "$raw/$name.data" --comm rte-worker-1 --no-children --sort dso,sym \
                    --percent-limit 0 --stdio 2>/dev/null >"$raw/$name.report"
            fi
        done
    done
    done
    /usr/bin/python3 - "$raw" "$out" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" <<'PY'
import json, os, re, sys
raw, out, cpu = sys.argv[1], sys.argv[2], sys.argv[3]
# Symbol (or DSO) -> stage, first match wins. The placer's stages are the
# out-of-line functions of the profile build (rx_placer.cc, TM_STAGE).
RULES = [
    ("rx burst (PMD)", lambda d, s: "librte_net_ring" in d or "eth_ring_rx" in s),
    ("rx timestamp callback", lambda d, s: "rx_timestamp" in s or "rx_tsc" in s),
    ("parse", lambda d, s: "parse_packet" in s),
    ("trailer and geometry checks", lambda d, s: "check_geometry" in s),
    ("window", lambda d, s: "check_window" in s or "in_window" in s),
    ("slot state and bitset", lambda d, s: "claim<" in s or "::claim" in s or "reset_slot" in s),
    ("placement copy + CRC32C", lambda d, s: "crc32c" in s or "memcpy" in s or "rte_memcpy" in s),
    ("completion (CRC check, flag, cursor)", lambda d, s: "complete<" in s or "::complete" in s
        or "write_completion" in s or "advance" in s),
    ("ACK / NACK scheduling", lambda d, s: "Receiver::poll" in s or "RxPlacer::scan" in s or "emit" in s
        or "nack" in s.lower()),
    ("mbuf free", lambda d, s: "free_bulk" in s or "librte_mempool" in d or "mempool" in s or "librte_mbuf" in d),
    ("the burst loop (prefetch, dispatch, counters)", lambda d, s: "burst_as" in s or "process_as" in s
        or "Receiver::rx_burst" in s or "rx_step" in s),
]
def stage_of(dso, sym):
    for name, f in RULES:
        if f(dso, sym):
            return name
    return "what is left (lcore loop, other)"
# The replay's own work when it runs on the rx lcore: not the rx path's.
TX = ("tx_step", "replay", "Sender::", "TxBurst", "tx_burst")
res = {"cpu": cpu, "method": "perf record -e cpu-clock -F 4000, rx lcore thread, -Dstage_profile build", "sizes": []}
lines = []
for place, size in (("cross", 64), ("cross", 65536), ("local", 64), ("local", 65536)):
    def js(which):
        p = os.path.join(raw, f"{which}_{place}_{size}.json")
        return json.load(open(p)) if os.path.exists(p) else None
    normal, prof = js("normal"), js("stages")
    rep = os.path.join(raw, f"stages_{place}_{size}.report")
    shares, other, kernel = {}, {}, 0.0
    if os.path.exists(rep):
        for ln in open(rep):
            m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)$", ln)
            if not m:
                continue
            pct, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
            if "kernel" in dso:  # the sampling timer's own exits (a PVM guest), faults: not the rx path's
                kernel += pct
                continue
            if any(t in sym for t in TX):
                continue
            st = stage_of(dso, sym)
            shares[st] = shares.get(st, 0) + pct
            if st.startswith("what is left"):
                other[f"{dso} {sym}"] = pct
    tot = sum(shares.values()) or 1
    cyc_n = normal["cycles"]["rx_per_packet"] if normal else 0
    cyc_p = prof["cycles"]["rx_per_packet"] if prof else 0
    row = {"replay": place, "msg_size": size, "rx_cycles_per_packet": cyc_n, "rx_cycles_per_packet_profile_build": cyc_p,
           "msgs_per_s": normal["msgs_per_s"] if normal else 0,
           "stages": [{"stage": k, "share": v / tot, "cycles_per_packet": cyc_n * v / tot}
                      for k, v in sorted(shares.items(), key=lambda kv: -kv[1])],
           "left_top": sorted(other.items(), key=lambda kv: -kv[1])[:6], "kernel_share_of_samples": kernel / 100}
    res["sizes"].append(row)
names = [n for n, _ in RULES] + ["what is left (lcore loop, other)"]
lines += [f"rx lcore cycle account (machine: {cpu}; {res['method']}; shares of the rx thread's samples "
          "times the normal build's rx cycles per packet in the same run).", "",
          "Columns: the replay on lcore 0 (cross: packets and their mbuf lines cross cores, as in bench.sh's "
          "rx rows) or on the rx lcore itself (local: its own work left out of the shares).", "",
          "| stage | " + " | ".join(f"{r['msg_size']} B {r['replay']}: share | cycles/packet" for r in res["sizes"]) + " |",
          "|---|" + "---:|---:|" * len(res["sizes"])]
for n in names:
    cells = []
    for r in res["sizes"]:
        st = next((x for x in r["stages"] if x["stage"] == n), None)
        cells += [f"{100 * st['share']:.1f}%" if st else "-", f"{st['cycles_per_packet']:.0f}" if st else "-"]
    lines.append(f"| {n} | " + " | ".join(cells) + " |")
lines.append("| **rx cycles/packet** (normal build; profile build) | " + " | ".join(
    f"| {r['rx_cycles_per_packet']:.0f} ({r['rx_cycles_per_packet_profile_build']:.0f})" for r in res["sizes"]) + " |")
lines.append("| (kernel samples, left out of the shares: the sampling timer's exits) | " + " | ".join(
    f"{100 * r['kernel_share_of_samples']:.1f}% | " for r in res["sizes"]) + " |")
for r in res["sizes"]:
    if r["left_top"]:
        lines += ["", f"{r['msg_size']} B {r['replay']}, the largest of what is left: " +
                  ", ".join(f"{k} {v:.1f}%" for k, v in r["left_top"])]
open(os.path.join(out, "stages.md"), "w").write("\n".join(lines) + "\n")
json.dump(res, open(os.path.join(out, "stages.json"), "w"), indent=1)
print("\n".join(lines))
PY
}
