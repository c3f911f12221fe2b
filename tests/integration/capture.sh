#!/usr/bin/env bash
# Capture and dissection. DPDK's dpdk-dumpcap (a secondary process on the
# daemon's --file-prefix; tailmarkd calls rte_pdump_init) captures N packets
# of a running loopback daemon (--messages 0) into pcapng; the daemon is then
# stopped with SIGTERM and must exit cleanly. tshark reads the file back:
#   - its packet count equals what dumpcap reported (>= N: dumpcap writes
#     whole bursts), every packet UDP to port 47474;
#   - with -X lua_script:scripts/tailmark.lua every packet decodes as
#     tailmark, and every field is exactly what the wire format says for
#     --msg-size 3000 at MTU 1500 (3 packets: 1456 B at 0, 1456 B at 1456,
#     LAST 88 B at 2912 with flag msg_id+1, slot msg_id mod 64, the default
#     key, msg_len 3000, pkt_count 3, magic TMK1), and the trailer's crc32c
#     equals the CRC32C of the captured payloads of each message captured whole;
#   - a hand-made ACK (control.h: body starts with u32 released_upto) and a NACK decode too.
# Needs hugepages (secondary process): exit 77 with a message without them.
# Needs the Debian packages dpdk-dev (dpdk-dumpcap) and tshark: fails without them.
source "$(dirname "$0")/lib.sh"
tm_require_daemon

LUA="$TM_SRC/scripts/tailmark.lua"
PY=/usr/bin/python3
for tool in dpdk-dumpcap tshark; do
    if ! command -v "$tool" >/dev/null; then
        tm_fail "$tool not installed (Debian package: $([ $tool = tshark ] && echo tshark || echo dpdk-dev))"
        tm_finish
    fi
done
free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages 2>/dev/null || echo 0)
if [ "${free:-0}" -lt 300 ] || ! grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
    tm_log "SKIP: dpdk-dumpcap (a secondary process) needs hugepages: $free free 2 MiB pages (want 300) or hugetlbfs not on /dev/hugepages (scripts/test.sh reserves them as root)"
    exit 77
fi
# Hugepages, whatever TAILMARK_EAL_MEM says: --no-huge has no secondaries. The
# fixed base keeps the primary's reservation clear of the secondary's own
# mappings (secondary_consumer.sh says more).
TM_MEM=(-m 256 --base-virtaddr=0x500000000000)

N=300 SIZE=3000 RING=64
name=daemon
tm_start "$name" 90 -- --vdev=net_ring0 -l 0,1 -- --messages 0 --flows 2 --msg-size $SIZE --ring-size $RING \
    --stats-period 0.1
tpid=$TM_PID
prefix=${TM_PREFIXES[-1]}
progress() { grep -qE '^stats .* completed=[1-9]' "$TM_WORK/$name.out" 2>/dev/null; }
tm_await "$name" "$tpid" 30 progress "no progress within 30 s"

PCAP="$TM_WORK/cap.pcapng"
timeout -k 5 60 dpdk-dumpcap --file-prefix="$prefix" -i 0 -w "$PCAP" -c $N >"$TM_WORK/dumpcap.out" 2>&1
dc=$?
dpid=$(pgrep -P "$tpid")
kill -TERM "$dpid"
wait "$tpid"
TM_RC=$?
tm_expect_rc "$name" 0
tm_check "$name" "d['exit_reason'] == 'signal'" "d['verify_errors'] == 0" "d['drops_total'] == d['reliability']['retx_rx']" "d['ok'] is True"
if [ $dc -ne 0 ] || [ ! -s "$PCAP" ]; then
    tm_fail "dpdk-dumpcap: exit $dc, no capture"
    sed 's/^/    /' "$TM_WORK/dumpcap.out"
    tm_finish
fi
# "Packets captured: 32 64 ... 320": the last number is what it wrote.
reported=$(tr -d '\r\b' <"$TM_WORK/dumpcap.out" | grep -o 'Packets captured:.*' | tail -n 1 | awk '{print $NF}')
got=$(tshark -r "$PCAP" 2>/dev/null | wc -l)
udp=$(tshark -r "$PCAP" -Y "udp.dstport == 47474" 2>/dev/null | wc -l)
if [ -z "$reported" ] || [ "$got" -ne "$reported" ] || [ "$got" -lt $N ] || [ "$udp" -ne "$got" ]; then
    tm_fail "capture: tshark read $got packets ($udp to UDP 47474), dumpcap reported '${reported}', asked $N"
    sed 's/^/    /' "$TM_WORK/dumpcap.out"
else
    tm_log "ok: dpdk-dumpcap captured $got packets of a running daemon, read back by tshark"
fi

# The dissector on the capture.
FIELDS=(tailmark.version tailmark.flags tailmark.flow tailmark.msg_id tailmark.pkt_idx tailmark.pay_len
        tailmark.offset tailmark.flag tailmark.slot tailmark.key tailmark.msg_len tailmark.pkt_count
        tailmark.reserved tailmark.crc32c tailmark.magic tailmark.payload)
targs=()
for fld in "${FIELDS[@]}"; do targs+=(-e "$fld"); done
tshark -X lua_script:"$LUA" -r "$PCAP" -Y tailmark -T fields -E separator=';' "${targs[@]}" \
    >"$TM_WORK/fields.txt" 2>"$TM_WORK/tshark.err"
check_py=$(cat <<'PY_EOF'
import sys
rows = [l.rstrip("\n").split(";") for l in open(sys.argv[1]) if l.strip()]
total, size, ring = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def crc32c(b, c=0xFFFFFFFF):
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xFFFFFFFF
bad = []
msgs = {}
for r in rows:
    (ver, flags, flow, mid, idx, plen, off, flag, slot, key, mlen, cnt, rsv, crc, magic, pay) = r
    flags, mid, idx, plen, off = int(flags, 16), int(mid), int(idx), int(plen), int(off)
    ok = ver == "1" and int(flow) in (0, 1) and len(pay) == 2 * plen
    if idx < 2:
        ok = ok and flags == 0 and plen == 1456 and off == 1456 * idx and flag == ""
    else:
        ok = ok and idx == 2 and flags == 1 and plen == 88 and off == 2912 and int(flag) == mid + 1 \
            and int(slot) == mid % ring and int(key, 16) == 0x7A11C0DE and int(mlen) == size \
            and int(cnt) == 3 and int(rsv, 16) == 0 and int(magic, 16) == 0x544D4B31
    if not ok:
        bad.append("bad fields: " + ";".join(r[:15]))
    m = msgs.setdefault((int(flow), mid), {})
    m[idx] = (bytes.fromhex(pay), crc)
if len(rows) != total:
    bad.append(f"{len(rows)} packets decoded as tailmark, {total} captured")
whole = 0
for (flow, mid), m in msgs.items():
    if sorted(m) != [0, 1, 2]:
        continue
    whole += 1
    data = m[0][0] + m[1][0] + m[2][0]
    if len(data) != size or crc32c(data) != int(m[2][1], 16):
        bad.append(f"flow {flow} msg {mid}: crc32c of the captured payload {crc32c(data):#x}, trailer {m[2][1]}")
if whole == 0:
    bad.append("no message captured whole")
for b in bad[:10]:
    print("    " + b)
print(f"{len(rows)} packets, {whole} whole messages")
sys.exit(1 if bad else 0)
PY_EOF
)
if out=$("$PY" -c "$check_py" "$TM_WORK/fields.txt" "$got" $SIZE $RING); then
    tm_log "ok: tailmark.lua decodes every header and trailer field exactly: $out"
else
    tm_fail "tailmark.lua on the capture"
    printf '%s\n' "$out"
    sed 's/^/    /' "$TM_WORK/tshark.err" | head
fi

# ACK and NACK: hand-made frames (loopback sends none), written as classic pcap.
"$PY" - "$TM_WORK/ack.pcap" <<'PY_EOF'
import struct, sys
def frame(flags, flow, msg_id, body):
    tm = struct.pack(">BBHIHHI", 1, flags, flow, msg_id, 0, len(body), 0) + body
    udp = struct.pack(">HHHH", 50000, 47474, 8 + len(tm), 0) + tm
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     bytes([198, 18, 0, 2]), bytes([198, 18, 0, 1])) + udp
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i, fr in enumerate([frame(0x02, 3, 77, struct.pack(">I", 77)),
                            frame(0x04, 5, 1234, struct.pack(">I", 1200))]):
        f.write(struct.pack("<IIII", i, 0, len(fr), len(fr)) + fr)
PY_EOF
acks=$(tshark -X lua_script:"$LUA" -r "$TM_WORK/ack.pcap" -Y tailmark -T fields -E separator=';' \
    -e tailmark.flags -e tailmark.flags.ack -e tailmark.flags.nack -e tailmark.flow -e tailmark.msg_id \
    -e tailmark.pay_len -e tailmark.released_upto -e tailmark.flag 2>/dev/null | tr -d '\r')
want=$'0x02;1;0;3;77;4;77;\n0x04;0;1;5;1234;4;1200;'
if [ "$acks" = "$want" ]; then
    tm_log "ok: ACK and NACK decoded: flags, flow, msg_id, released_upto"
else
    tm_fail "ACK/NACK decoding: got"$'\n'"$acks"$'\n'"want"$'\n'"$want"
fi
tm_finish
