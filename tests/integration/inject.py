#!/usr/bin/env python3
"""Crafted and random hostile frames for tailmarkd's rx path (issue 6).

    inject.py IFACE PHASE OUT.json [--flood N] [--seed S]

Sends frames on IFACE through an AF_PACKET socket and writes what it sent:
{"frames": total reaching the receiver, "expect": {drop_reason: count},
"accepted": count, "absorbed_by_kernel": count}.
Every frame's fate is known by construction, so the receiver's counters can
be checked exactly. The receiver must be tailmarkd --mode recv with --flows 2
--ring-size 8 --msg-size 4096 --mtu 1500 and the default key.

PHASE stateless: every case of the spec's field boundaries that is dropped
    before it touches any receive state, plus the random flood (every flood
    frame is dropped too: each kind is built so that exactly one reason holds).
    The receive window is [BASE, BASE+8) (--base): the session's flows 0 and 1
    after BASE real messages each.
PHASE stateful: cases that live in a slot's state (a LAST with nothing before
    it, two different LASTs, duplicates, a CRC mismatch), on msg_ids
    [BASE, BASE+8) past the real traffic (--base).
    Those two phases need a --data-version 1 session with --key 0x7A11C0DE.
PHASE forge: against a version 2 session (the default), while its real
    messages flow: what an off-path host can send that is well-formed. Whole
    version 1 messages for the session's flows, every msg_id of the window
    and beyond, with the right CRC and any key (bad_version: the flows take
    version 2 only); the same as version 2 packets, LAST and not, under
    random tags and the tag 0 (data_bad_tag). None may place a byte.
"""
import json
import random
import socket
import struct
import sys

KEY = 0x7A11C0DE
UDP_PORT = 47474
RING = 8
REGION = 4096
MTU = 1500
STRIDE = MTU - 20 - 8 - 16
MAGIC = 0x544D4B31
SRC_MAC = bytes.fromhex("020000000001")
DST_MAC = bytes.fromhex("020000000002")


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def ip_checksum(hdr: bytes) -> int:
    s = sum(struct.unpack("!10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(flow, msg_id, pkt_idx, payload, offset, last=None, flags=None, version=1,
          udp_port=UDP_PORT, ethertype=0x0800, ihl=5, frag=0x4000, proto=17,
          ip_len_delta=0, udp_len_delta=0, pay_len=None, ip_csum_ok=True, options=b"", tag=None):
    """One tailmark frame; `last` is a dict of trailer fields (LAST packet)."""
    if flags is None:
        flags = 0x01 if last is not None else 0x00
    body = payload
    if last is not None:
        t = dict(flag=msg_id + 1, slot=msg_id % RING, key=KEY, msg_len=offset + len(payload),
                 pkt_count=pkt_idx + 1, reserved=0, crc=0, magic=MAGIC)
        t.update(last)
        body += struct.pack("!QIIIHHII", t["flag"], t["slot"], t["key"], t["msg_len"],
                            t["pkt_count"], t["reserved"], t["crc"], t["magic"])
    hdr = struct.pack("!BBHIHHI", version, flags, flow, msg_id, pkt_idx,
                      len(payload) if pay_len is None else pay_len, offset)
    if tag is not None:  # version 2: the 8-byte tag after the 16 bytes of version 1
        hdr += struct.pack("!Q", tag)
    udp_len = 8 + len(hdr) + len(body) + udp_len_delta
    udp = struct.pack("!HHHH", 49152 + flow % 16384, udp_port, udp_len & 0xFFFF, 0)
    ip_len = 20 + len(options) + 8 + len(hdr) + len(body) + ip_len_delta
    ip = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, 0, ip_len & 0xFFFF, 0, frag, 64, proto, 0,
                     bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])) + options
    if ip_csum_ok:
        csum = ip_checksum(ip[:20]) if not options else 0
        ip = ip[:10] + struct.pack("!H", csum) + ip[12:]
    else:
        ip = ip[:10] + b"\x12\x34" + ip[12:]
    eth = DST_MAC + SRC_MAC + struct.pack("!H", ethertype)
    return eth + ip + udp + hdr + body


def single(flow, msg_id, data, **trailer):
    """A whole one-packet message, trailer consistent unless overridden."""
    t = dict(crc=crc32c(data), msg_len=len(data))
    t.update(trailer)
    return frame(flow, msg_id, 0, data, 0, last=t)


class Sender:
    def __init__(self, iface):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind((iface, 0))
        self.frames = 0
        self.expect = {}
        self.accepted = 0
        self.absorbed = 0

    def absorb(self, f):
        """A frame the kernel keeps from the receiver (see the fragments)."""
        self.sock.send(f)
        self.absorbed += 1

    def send(self, f, reason):
        self.sock.send(f)
        self.frames += 1
        if reason is None:
            self.accepted += 1
        else:
            self.expect[reason] = self.expect.get(reason, 0) + 1


def stateless(s: Sender, rng: random.Random, flood: int, base: int):
    data = bytes(rng.randrange(256) for _ in range(300))
    good = single(0, 0, data)
    # Truncated at every length from the Ethernet header on (the kernel will
    # not send less than 14 bytes): before the IPv4 header ends the frame is
    # too short; after, IPv4's total length exceeds the frame.
    for n in range(14, len(good)):
        s.send(good[:n], "frame_too_short" if n < 34 else "ip_bad_length")
    s.send(frame(0, 0, 0, data, 0, ethertype=0x8100), "vlan_tagged")
    s.send(frame(0, 0, 0, data, 0, ethertype=0x88A8), "vlan_tagged")
    s.send(frame(0, 0, 0, data, 0, ethertype=0x86DD), "not_ipv4")
    s.send(frame(0, 0, 0, data, 0, ethertype=0x0806), "arp_not_ours")   # ARP's type, not ARP inside
    s.send(frame(0, 0, 0, data, 0, ihl=6, options=b"\x01\x01\x01\x01"), "ip_options")
    # IP fragments: net_af_packet joins its socket to a PACKET_FANOUT group
    # with PACKET_FANOUT_FLAG_DEFRAG, so the kernel holds fragments for
    # reassembly and these never reach DPDK. They are sent all the same, to
    # show they cannot hurt, and are left out of what the receiver must count
    # (the unit tests and the fuzz corpus cover ip_fragment inside tailmark).
    s.absorb(frame(0, 0, 0, data, 0, frag=0x2000))                     # MF
    s.absorb(frame(0, 0, 0, data, 0, frag=0x4001))                     # offset
    s.send(frame(0, 0, 0, data, 0, frag=0x0000), "ip_no_df")
    s.send(frame(0, 0, 0, data, 0, ip_csum_ok=False), "ip_bad_checksum")
    s.send(frame(0, 0, 0, data, 0, proto=6), "not_udp")
    s.send(frame(0, 0, 0, data, 0, udp_port=53), "wrong_udp_port")
    s.send(frame(0, 0, 0, data, 0, udp_len_delta=-1), "udp_bad_length")    # UDP vs IP length
    s.send(frame(0, 0, 0, data, 0, ip_len_delta=-1, udp_len_delta=-1),    # pay_len vs UDP length
           "pay_len_mismatch")
    s.send(frame(0, 0, 0, data, 0, pay_len=299), "pay_len_mismatch")
    s.send(frame(0, 0, 0, b"", 0), "empty_packet")
    s.send(frame(0, 0, 0, data, 0, version=0), "bad_version")
    s.send(frame(0, 0, 0, data, 0, version=2, tag=0), "bad_version")  # version 2 to a version 1 flow
    s.send(frame(0, 0, 0, data, 0, version=3), "bad_version")
    s.send(frame(0, 0, 0, data, 0, flags=0x20), "bad_flags")
    s.send(frame(0, 0, 0, data, 0, flags=0x80), "bad_flags")
    s.send(frame(0, 0, 0, data, 0, flags=0x11), "bad_flags")             # SESSION with LAST
    s.send(frame(0, 0, 0, data, 0, flags=0x10), "control_malformed")     # SESSION, not a session body
    s.send(frame(0, 0, 0, data, 0, flags=0x02), "unknown_flow")          # an ACK: no flow of ours sends
    s.send(single(0, 0, data, magic=0x544D4B32), "bad_magic")
    s.send(single(0, 0, data, reserved=1), "bad_reserved")
    s.send(single(0, 0, data, flag=0), "bad_flag")                       # zero flag
    s.send(single(0, 0, data, flag=7), "bad_flag")
    s.send(single(0, 0, data, pkt_count=0), "bad_pkt_count")
    s.send(single(0, 0, data, pkt_count=2), "bad_pkt_count")
    s.send(single(0, 0, data, msg_len=301), "bad_offset")                # offset + pay_len != msg_len
    s.send(frame(0, 0, 1, data, 100), "bad_offset")                     # off the geometry
    s.send(single(9, 0, data), "unknown_flow")
    s.send(single(65535, 0, data), "unknown_flow")
    s.send(single(0, 0, data, key=KEY ^ 1), "bad_key")
    s.send(single(0, 0, data, key=0), "bad_key")
    s.send(single(0, 0, data, slot=1), "bad_slot")                       # not msg_id mod ring
    s.send(single(0, 0, data, slot=RING), "bad_slot")                    # out of range
    big = frame(0, 1, 3, data[:100], 3 * STRIDE, last=dict(msg_len=3 * STRIDE + 100, crc=0))
    s.send(big, "msg_too_large")                                        # larger than the region
    s.send(frame(0, 0, 3, data, 3 * STRIDE), "outside_region")           # past the region
    s.send(single(0, (base + RING) & 0xFFFFFFFF, data), "outside_window") # no credit granted
    s.send(single(1, (base - 1) & 0xFFFFFFFF, data), "outside_window")   # behind the window

    # The flood: random content in every field that is not forced, and the
    # forced part makes exactly one reason hold.
    kinds = ["not_ipv4", "wrong_udp_port", "bad_version", "bad_flags", "unknown_flow",
             "outside_window", "ip_bad_length", "bad_key", "arp_not_ours"]
    for i in range(flood):
        kind = kinds[i % len(kinds)]
        n = rng.randrange(0, 1200)
        pay = rng.randbytes(n) if hasattr(rng, "randbytes") else bytes(rng.getrandbits(8) for _ in range(n))
        if kind == "not_ipv4":
            et = rng.choice([0x86DD, 0x88CC, 0x8847, rng.randrange(0x0600, 0x0800)])
            f = DST_MAC + SRC_MAC + struct.pack("!H", et) + pay
        elif kind == "arp_not_ours":
            # ARP goes to the control plane: random bodies are malformed, and
            # well-formed ones ask for or announce another address.
            if rng.randrange(2):
                f = DST_MAC + SRC_MAC + struct.pack("!H", 0x0806) + pay
            else:
                op = rng.choice([1, 2])
                tpa = bytes([10, rng.randrange(256), rng.randrange(256), rng.randrange(1, 255)])
                f = (b"\xff" * 6 + SRC_MAC + struct.pack("!HHHBBH", 0x0806, 1, 0x0800, 6, 4, op) + SRC_MAC +
                     bytes([10, 9, 9, 9]) + b"\x00" * 6 + tpa)
                if op == 2:
                    continue  # a reply nobody asked for is learnt from nothing, and not counted: skip it
        elif kind == "wrong_udp_port":
            f = frame(rng.randrange(65536), rng.getrandbits(32), 0, pay, 0,
                      udp_port=rng.choice([53, 4791, 47475, rng.randrange(1, 47474)]))
        elif kind == "bad_version":
            f = frame(0, 0, 0, pay, 0, version=rng.choice([0] + list(range(3, 256))))  # 2: its own case
        elif kind == "bad_flags":
            f = frame(0, 0, 0, pay, 0, flags=rng.randrange(0x20, 256))
        elif kind == "unknown_flow":
            f = frame(rng.randrange(2, 65536), rng.getrandbits(32), 0, pay or b"x", 0)
        elif kind == "outside_window":
            f = frame(rng.randrange(2), (base + rng.randrange(RING, 1 << 31)) & 0xFFFFFFFF, 0,
                      (pay or b"x")[:STRIDE], 0)
        elif kind == "ip_bad_length":
            whole = frame(0, 0, 0, pay or b"x", 0)
            f = whole[:rng.randrange(34, len(whole))]
        else:  # bad_key
            f = single(rng.randrange(2), rng.randrange(RING), pay[:1000], key=rng.choice([0, KEY ^ 0x80000000, rng.getrandbits(32) | 1]))
            if struct.unpack("!I", f[-20:-16])[0] == KEY:
                continue
        s.send(f, kind)


def stateful(s: Sender, rng: random.Random, base: int):
    data = bytes(rng.randrange(256) for _ in range(3000))
    # A LAST with nothing before it: accepted, waits for packets that never come.
    m = base
    s.send(frame(0, m, 2, data[2 * STRIDE:], 2 * STRIDE,
                 last=dict(msg_len=len(data), crc=crc32c(data))), None)
    # ...the same LAST again: a duplicate; a different LAST: a conflict.
    s.send(frame(0, m, 2, data[2 * STRIDE:], 2 * STRIDE,
                 last=dict(msg_len=len(data), crc=crc32c(data))), "duplicate")
    s.send(single(0, m, data[:50]), "conflicting_last")
    # Packets past the LAST's pkt_count, or past its msg_len: dropped.
    s.send(frame(0, m, 3, data[:100], 3 * STRIDE), "outside_region")
    # A one-packet message whose CRC does not match: placed, then discarded.
    d2 = data[:200]
    s.send(single(1, base + 1, d2, crc=crc32c(d2) ^ 1), "crc_mismatch")
    # All packets in but the bytes do not add up: pkt 0 short, LAST says more.
    s.send(frame(1, base + 2, 0, data[:100], 0), None)
    s.send(frame(1, base + 2, 1, data[STRIDE:STRIDE + 100], STRIDE,
                 last=dict(msg_len=STRIDE + 100, crc=crc32c(data[:STRIDE + 100]))), "length_mismatch")


def forge(s: Sender, rng: random.Random, rounds: int):
    # Chunks that leave room for the trailer in every packet (a LAST fits).
    stride1, stride2 = STRIDE - 32, STRIDE - 8 - 32
    for r in range(rounds):
        flow = r % 2
        msg_id = rng.randrange(0, 1 << 12)
        key = rng.choice([KEY, rng.getrandbits(32) | 1])
        data = rng.getrandbits(8 * 4096).to_bytes(4096, "little")[:rng.randrange(1, 4096)]
        crc = crc32c(data)
        # A whole version 1 message, consistent in every field.
        npk = max(1, -(-len(data) // stride1))
        for i in range(npk):
            chunk = data[i * stride1:(i + 1) * stride1]
            last = dict(msg_len=len(data), crc=crc, key=key, pkt_count=npk) if i == npk - 1 else None
            s.send(frame(flow, msg_id, i, chunk, i * stride1, last=last), "bad_version")
        # The same as version 2, under a guessed tag.
        npk = max(1, -(-len(data) // stride2))
        for i in range(npk):
            chunk = data[i * stride2:(i + 1) * stride2]
            last = dict(msg_len=len(data), crc=crc, key=key, pkt_count=npk) if i == npk - 1 else None
            tag = 0 if r % 7 == 0 else rng.getrandbits(64)
            s.send(frame(flow, msg_id, i, chunk, i * stride2, last=last, version=2, tag=tag), "data_bad_tag")


def main():
    iface, phase, out = sys.argv[1], sys.argv[2], sys.argv[3]
    args = sys.argv[4:]
    flood = int(args[args.index("--flood") + 1]) if "--flood" in args else 0
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    base = int(args[args.index("--base") + 1]) if "--base" in args else 0
    rng = random.Random(seed)
    s = Sender(iface)
    if phase == "stateless":
        stateless(s, rng, flood, base)
    elif phase == "forge":
        forge(s, rng, int(args[args.index("--rounds") + 1]) if "--rounds" in args else 200)
    else:
        stateful(s, rng, base)
    with open(out, "w") as f:
        json.dump({"frames": s.frames, "expect": s.expect, "accepted": s.accepted,
                   "absorbed_by_kernel": s.absorbed}, f)


if __name__ == "__main__":
    main()
