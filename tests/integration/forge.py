#!/usr/bin/env python3
"""Forged control packets toward a tailmarkd sender, by a party without the secret.

    forge.py IFACE OUT.json --state connecting|established --own-mac M --sender-mac M
             --own-ip A --sender-ip A --flows F --secret HEX [--rounds N] [--pps P]
             [--seed S] [--timeout S] [--ready FILE]

Runs on the far end of the sender's link (the receiver's side), where it sees
what the sender sends, as anyone on the path would. It sniffs the sender's
SESSION packets for what is not secret (its session id, epoch and flow ids:
its CONNECT; the receiver's session id and epoch: its liveness probes), then
sends control packets in tailmark's format (sessions.sh, case 3):

  - ACKs and NACKs to the sender's flows and to one flow it does not have,
    cursors 0..20, with guessed epochs (7, random) and the session's real
    ones: the MAC random, or SipHash-2-4 computed with a wrong key; ACKs
    whose last 4 bytes are a correct CRC32C of the header and the body before
    them (what fooled the code before the MAC), in the new length and in the
    old 20-byte layout;
  - SESSION packets (ACCEPT, REFUSE, RESET, CLOSE) to every session id 1..8,
    with guessed epochs and the real ones, the MAC random or wrong-keyed.

--state connecting: no receiver runs; the forger answers the sender's ARP as
    the receiver's address (ARP is not authenticated) so that the sender
    CONNECTs to it, and forges once it has seen the CONNECT: the sender is
    then connecting, with no flows installed.
--state established: a real receiver runs; the forger waits for the sender's
    CONNECT and then for its first liveness probe (a KEEPALIVE asking for an
    answer, a second after the session came up: its flows are installed).

Every forged frame's fate follows from the state, so the sender's drop
counters can be checked exactly; OUT.json says what was sent and where each
must land: {"frames": N, "expect": {drop_reason: count}, "arp_replies": K,
"learned": {...}}. The socket bypasses the qdisc (PACKET_QDISC_BYPASS), so
a receiver polling the same interface through net_af_packet does not see
the forgeries as outgoing frames: they reach the sender alone.

--secret is the session's real one, used only to check that the sniffed
packets' MACs verify (so that this file's SipHash and framing are tailmark's,
and a wrong-keyed MAC is wrong only by its key); it never signs anything.
"""
import ctypes
import json
import random
import select
import socket
import struct
import sys
import time

UDP_PORT = 47474
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_QDISC_BYPASS = 20
SO_ATTACH_FILTER = 26
HDR_LEN = 16
MAC_LEN = 8
F_ACK, F_NACK, F_SESSION = 0x02, 0x04, 0x10
CONNECT, ACCEPT, REFUSE, KEEPALIVE, RESET, CLOSE = 1, 2, 3, 4, 5, 6
KA_ASK = 0x01
M64 = (1 << 64) - 1


# --- SipHash-2-4 (control.h: the tag is written big-endian after the body) --

def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & M64


def siphash24(key: bytes, data: bytes) -> int:
    k0, k1 = struct.unpack("<QQ", key)
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rnd():
        nonlocal v0, v1, v2, v3
        v0 = (v0 + v1) & M64; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & M64; v3 = _rotl(v3, 16); v3 ^= v2
        v0 = (v0 + v3) & M64; v3 = _rotl(v3, 21); v3 ^= v0
        v2 = (v2 + v1) & M64; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)

    n = len(data)
    whole = n & ~7
    for i in range(0, whole, 8):
        m = struct.unpack_from("<Q", data, i)[0]
        v3 ^= m; rnd(); rnd(); v0 ^= m
    last = (n & 0xFF) << 56
    for i, b in enumerate(data[whole:]):
        last |= b << (8 * i)
    v3 ^= last; rnd(); rnd(); v0 ^= last
    v2 ^= 0xFF
    for _ in range(4):
        rnd()
    return v0 ^ v1 ^ v2 ^ v3


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


class Link:
    """Addresses of the forged frames: from the receiver's side to the sender."""

    def __init__(self, own_mac, sender_mac, own_ip, sender_ip):
        self.own_mac = bytes.fromhex(own_mac.replace(":", ""))
        self.sender_mac = bytes.fromhex(sender_mac.replace(":", ""))
        self.own_ip = socket.inet_aton(own_ip)
        self.sender_ip = socket.inet_aton(sender_ip)

    def frame(self, tm: bytes) -> bytes:
        """Ethernet | IPv4 (DF) | UDP 47474 -> 47474 | tm (header and body)."""
        udp = struct.pack("!HHHH", UDP_PORT, UDP_PORT, 8 + len(tm), 0)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(tm), 0, 0x4000, 64, 17, 0,
                         self.own_ip, self.sender_ip)
        ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
        return self.sender_mac + self.own_mac + b"\x08\x00" + ip + udp + tm


def header(flags, flow, msg_id, pay_len):
    return struct.pack("!BBHIHHI", 1, flags, flow, msg_id, 0, pay_len, 0)


def sign(tm_without_mac: bytes, how: str, rng: random.Random, wrong_key: bytes) -> bytes:
    """The 8-byte tag: random, or SipHash with a key that is not the secret."""
    if how == "random":
        tag = rng.getrandbits(64)
    else:
        tag = siphash24(wrong_key, tm_without_mac)
    return tm_without_mac + struct.pack("!Q", tag)


def ack(flow, released, acked, se, re, nack_ranges, how, rng, wrong_key):
    """An ACK (no ranges) or a NACK, body in control.h's layout, tagged `how`."""
    # no echo; a fresh-looking number (the MAC is what fails)
    body = struct.pack("!IIIIHHIQ", released, acked, se, re, len(nack_ranges), 0, 0xFFFFFFFF, rng.getrandbits(40) + 1)
    for first, count in nack_ranges:
        body += struct.pack("!HH", first, count)
    flags = F_NACK if nack_ranges else F_ACK
    msg_id = (acked + 1) if nack_ranges else acked
    hdr = header(flags, flow, msg_id, len(body) + MAC_LEN)
    if how == "crc":  # the MAC's place, its last 4 bytes a correct CRC32C of what precedes
        pre = hdr + body + b"\x00\x00\x00\x00"
        return pre + struct.pack("!I", crc32c(pre))
    return sign(hdr + body, how, rng, wrong_key)


def old_ack(flow, released, acked, epoch):
    """The layout before sessions: 16 bytes, then a CRC32C of header and body (20 bytes)."""
    body = struct.pack("!IIIHH", released, acked, epoch, 0, 0)
    hdr = header(F_ACK, flow, acked, len(body) + 4)
    return hdr + body + struct.pack("!I", crc32c(hdr + body))


def session(typ, dst_session, src_session, src_epoch, dst_epoch, nonce, how, rng, wrong_key, params=None):
    body = struct.pack("!BBHHHIIQQ", typ, 0, UDP_PORT, src_session, 0, src_epoch, dst_epoch, nonce,
                       rng.getrandbits(40) + 1)  # seq: a number the peer has not taken
    if typ == ACCEPT:
        nflows, flow_base, mtu, ring, max_msg, key = params
        # cookie, the parameters, then data_version 2, data_flags, reserved, key_nonce
        body += struct.pack("!QHHIIIIHHHHIQ", 0, nflows, flow_base, mtu, ring, max_msg, key, 0, 0, 2, 0, 0,
                            rng.getrandbits(64))
    elif typ in (REFUSE, RESET):
        reason = 3 if typ == REFUSE else 8  # msg_size; unknown_session
        body += struct.pack("!HHIQQ", reason, 0, 0, 8192, 4096)
    hdr = header(F_SESSION, dst_session, 0, len(body) + MAC_LEN)
    return sign(hdr + body, how, rng, wrong_key)


# --- sniffing -----------------------------------------------------------------

def attach_filter(sock):
    """Classic BPF: ARP, and IPv4/UDP frames whose tailmark flags are SESSION (IHL 5)."""
    prog = [
        (0x28, 0, 0, 12),          # ldh [12]           ethertype
        (0x15, 5, 0, 0x0806),      # jeq ARP -> accept
        (0x15, 0, 5, 0x0800),      # jeq IPv4, else drop
        (0x30, 0, 0, 23),          # ldb [23]           protocol
        (0x15, 0, 3, 17),          # jeq UDP, else drop
        (0x30, 0, 0, 43),          # ldb [43]           tailmark flags (14 + 20 + 8 + 1)
        (0x15, 0, 1, F_SESSION),   # jeq SESSION, else drop
        (0x06, 0, 0, 0x40000),     # ret accept
        (0x06, 0, 0, 0),           # ret drop
    ]
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    return buf  # keep alive while the filter is installed (the kernel copies it; harmless)


def parse_session(f: bytes):
    """(type, flags, dst_session, src_session, src_epoch, dst_epoch, nonce, tm bytes) or None."""
    if len(f) < 14 + 20 + 8 + HDR_LEN + 32 + MAC_LEN or f[12:14] != b"\x08\x00" or f[23] != 17:
        return None
    udp_len = struct.unpack_from("!H", f, 38)[0]
    tm = f[42:34 + udp_len]
    if len(tm) < HDR_LEN + 32 + MAC_LEN or tm[1] != F_SESSION:
        return None
    dst_session = struct.unpack_from("!H", tm, 2)[0]
    typ, flags, _svc, src_session, _r, src_epoch, dst_epoch, nonce = struct.unpack_from("!BBHHHIIQ", tm, HDR_LEN)
    return typ, flags, dst_session, src_session, src_epoch, dst_epoch, nonce, tm


class Forger:
    def __init__(self, iface, link, secret, rng):
        # Protocol 0: nothing queues before the filter is on; then bound to every protocol.
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        self._filter = attach_filter(self.sock)
        self.sock.bind((iface, ETH_P_ALL))  # Python puts it in network order
        self.sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
        self.sock.setblocking(False)
        self.link = link
        self.secret = secret
        self.rng = rng
        self.frames = 0
        self.expect = {}
        self.arp_replies = 0
        self.answer_arp = False
        self.learned = {}
        self.checked_macs = 0

    def _answer_arp(self, f):
        if len(f) < 42 or f[12:14] != b"\x08\x06":
            return
        op = struct.unpack_from("!H", f, 20)[0]
        sha, spa, tpa = f[22:28], f[28:32], f[38:42]
        if op != 1 or tpa != self.link.own_ip or sha != self.link.sender_mac:
            return
        reply = (sha + self.link.own_mac + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2) +
                 self.link.own_mac + self.link.own_ip + sha + spa)
        self.sock.send(reply + b"\x00" * (60 - len(reply)))
        self.arp_replies += 1

    def pump(self):
        """Takes what the sender sent (filtered): answers ARP, learns from SESSION packets."""
        while True:
            try:
                f, addr = self.sock.recvfrom(65535)
            except BlockingIOError:
                return
            if addr[2] == socket.PACKET_OUTGOING or f[6:12] != self.link.sender_mac:
                continue
            if self.answer_arp:
                self._answer_arp(f)
            s = parse_session(f)
            if s is None:
                continue
            typ, flags, dst_session, src_session, src_epoch, dst_epoch, nonce, tm = s
            # The sniffed packet must verify with the real secret: our framing and
            # SipHash are tailmark's, so a wrong key is the only thing wrong below.
            if siphash24(self.secret, tm[:-MAC_LEN]) != struct.unpack("!Q", tm[-MAC_LEN:])[0]:
                raise SystemExit(f"forge.py: a sniffed {typ} does not verify with --secret: framing or SipHash differ")
            self.checked_macs += 1
            if typ == CONNECT:
                nflows, flow_base = struct.unpack_from("!HH", tm, HDR_LEN + 40)  # after seq and cookie
                self.learned.update(session=src_session, epoch=src_epoch, nonce=nonce, flow_base=flow_base,
                                    nflows=nflows, connect=tm)
            elif typ == KEEPALIVE and flags & KA_ASK:
                self.learned.update(session=src_session, epoch=src_epoch, peer_session=dst_session,
                                    peer_epoch=dst_epoch)

    def wait(self, what, deadline):
        while not what():
            if time.monotonic() > deadline:
                return False
            select.select([self.sock], [], [], 0.05)
            self.pump()
        return True

    def send(self, tm, reason):
        self.sock.send(self.link.frame(tm))
        self.frames += 1
        self.expect[reason] = self.expect.get(reason, 0) + 1


def forge_round(fg: Forger, state: str, wrong_key: bytes, pace):
    rng = fg.rng
    L = fg.learned
    S, Es = L["session"], L["epoch"]
    Er = L.get("peer_epoch")
    base, nflows = L["flow_base"], L["nflows"]
    established = state == "established"

    def guess():
        while True:
            g = rng.getrandbits(32)
            if g not in (0, Es, Er):
                return g

    # ACKs and NACKs: the sender's flows, and one it does not have.
    epochs = [(7, 7), (guess(), guess())]
    if established:
        epochs.append((Es, Er))  # the session's real epochs: only the MAC is wrong
    for flow in list(range(base, base + nflows)) + [(base + nflows) & 0xFFFF]:
        mine = established and base <= flow < base + nflows
        for c in range(21):
            for se, re in epochs:
                for how in ("random", "wrongkey", "crc"):
                    fg.send(ack(flow, c, c, se, re, [], how, rng, wrong_key),
                            "control_bad_auth" if mine else "unknown_flow")
                    pace()
                fg.send(ack(flow, c, c, se, re, [(0, 0), (c, 1)], "wrongkey", rng, wrong_key),
                        "control_bad_auth" if mine else "unknown_flow")
                pace()
                fg.send(old_ack(flow, c, c, re), "control_malformed" if mine else "unknown_flow")
                pace()
    if not established:
        # The ACCEPT the sender waits for: its session, epoch and nonce, only
        # the MAC wrong; each agreeing to something else (flow ids, MTU).
        for k in range(21):
            for how in ("random", "wrongkey"):
                fg.send(session(ACCEPT, S, 1 + k % 8, guess(), Es, L["nonce"], how, rng, wrong_key,
                                (nflows, k, 1500 - k, 64, 4096, 0)), "control_bad_auth")
                pace()
    # SESSION packets to every session id 1..8.
    params = (nflows, 0, 1500, 64, 4096, 0)
    for dst in range(1, 9):
        for typ in (ACCEPT, REFUSE, RESET, CLOSE):
            for kind in ("seven", "guess", "real"):
                if kind == "seven":
                    dst_epoch, src_epoch = 7, 7
                elif kind == "guess":
                    dst_epoch, src_epoch = guess(), guess()
                else:
                    dst_epoch, src_epoch = Es, Er if Er else guess()
                nonce = L["nonce"] if typ in (ACCEPT, REFUSE) and "nonce" in L else rng.getrandbits(64)
                src_session = L.get("peer_session", 1 + rng.randrange(8))
                for how in ("random", "wrongkey"):
                    if dst != S:
                        reason = "unknown_session"
                    elif dst_epoch != Es:
                        reason = "control_stale"
                    elif typ in (ACCEPT, REFUSE):
                        reason = "control_bad_auth"  # the MAC is checked before the nonce
                    elif established:
                        reason = "control_bad_auth"  # both epochs right: only the MAC stops it
                    else:
                        reason = "control_stale"     # connecting: no peer epoch yet
                    fg.send(session(typ, dst, src_session, src_epoch, dst_epoch, nonce, how, rng, wrong_key,
                                    params), reason)
                    pace()


def main():
    iface, out = sys.argv[1], sys.argv[2]
    a = sys.argv[3:]

    def opt(name, default=None):
        return a[a.index(name) + 1] if name in a else default

    state = opt("--state")
    rng = random.Random(int(opt("--seed", "1")))
    link = Link(opt("--own-mac"), opt("--sender-mac"), opt("--own-ip"), opt("--sender-ip"))
    secret = bytes.fromhex(opt("--secret"))
    wrong_key = bytes(b ^ 0x5A for b in secret)  # a key, not the key
    rounds = int(opt("--rounds", "1"))
    pps = float(opt("--pps", "1000"))
    timeout = float(opt("--timeout", "30"))
    fg = Forger(iface, link, secret, rng)
    fg.answer_arp = state == "connecting"
    if opt("--ready"):
        open(opt("--ready"), "w").close()  # listening: the sender may start
    deadline = time.monotonic() + timeout
    ok = fg.wait(lambda: "flow_base" in fg.learned, deadline)
    if ok and state == "established":
        ok = fg.wait(lambda: "peer_epoch" in fg.learned, deadline)
    if not ok:
        raise SystemExit(f"forge.py: nothing learned from the sender within {timeout} s: {sorted(fg.learned)}")

    t0 = time.monotonic()

    def pace():
        # Never faster than --pps; answer ARP and keep sniffing meanwhile.
        due = t0 + fg.frames / pps
        while True:
            now = time.monotonic()
            if now >= due:
                break
            time.sleep(min(due - now, 0.01))
        if fg.frames % 64 == 0:
            fg.pump()

    for _ in range(rounds):
        forge_round(fg, state, wrong_key, pace)
    learned = {k: v for k, v in fg.learned.items() if k != "connect"}
    with open(out, "w") as f:
        json.dump({"frames": fg.frames, "expect": fg.expect, "arp_replies": fg.arp_replies,
                   "checked_macs": fg.checked_macs, "learned": learned,
                   "seconds": round(time.monotonic() - t0, 3)}, f)


if __name__ == "__main__":
    main()
