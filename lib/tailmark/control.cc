#include "tailmark/control.h"

#include <cstring>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_udp.h>

namespace tailmark {

namespace {

inline void put16(uint8_t* p, uint16_t v) {
    const rte_be16_t be = rte_cpu_to_be_16(v);
    memcpy(p, &be, 2);
}
inline void put32(uint8_t* p, uint32_t v) {
    const rte_be32_t be = rte_cpu_to_be_32(v);
    memcpy(p, &be, 4);
}
inline void put64(uint8_t* p, uint64_t v) {
    const rte_be64_t be = rte_cpu_to_be_64(v);
    memcpy(p, &be, 8);
}
inline uint16_t get16(const uint8_t* p) {
    rte_be16_t be;
    memcpy(&be, p, 2);
    return rte_be_to_cpu_16(be);
}
inline uint32_t get32(const uint8_t* p) {
    rte_be32_t be;
    memcpy(&be, p, 4);
    return rte_be_to_cpu_32(be);
}
inline uint64_t get64(const uint8_t* p) {
    rte_be64_t be;
    memcpy(&be, p, 8);
    return rte_be_to_cpu_64(be);
}

// A control frame of `body` bytes (MAC included) from the template: lengths,
// the IPv4 checksum and the tailmark header. Returns the header's address.
uint8_t* start_frame(rte_mbuf* m, const uint8_t (&l2l4)[kEthLen + kIpLen + kUdpLen], const Header& h,
                     uint32_t body) {
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(kFrameOverhead + body)));
    if (p == nullptr)
        return nullptr;
    memcpy(p, l2l4, sizeof(l2l4));
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(p + kEthLen + kIpLen);
    const uint16_t udp_len = static_cast<uint16_t>(kUdpLen + kHeaderLen + body);
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(kIpLen + udp_len));
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    udp->dgram_len = rte_cpu_to_be_16(udp_len);
    udp->dgram_cksum = 0;
    uint8_t* hdr = p + kEthLen + kIpLen + kUdpLen;
    encode(h, reinterpret_cast<WireHeader*>(hdr));
    m->l2_len = kEthLen;
    m->l3_len = kIpLen;
    return hdr;
}

// The MAC over the header and the body before it, written at its end.
inline void sign(uint8_t* hdr, uint32_t body, const SipKey& key) {
    const uint32_t covered = kHeaderLen + body - kMacLen;
    put64(hdr + covered, siphash24(key, {hdr, covered}));
}

inline bool mac_ok(const uint8_t* hdr, uint32_t len, const SipKey& key) {
    const uint32_t covered = len - kMacLen;
    return mac_equal(siphash24(key, {hdr, covered}), get64(hdr + covered));
}

} // namespace

rte_mbuf* build_ack(rte_mempool* pool, const uint8_t (&l2l4)[kEthLen + kIpLen + kUdpLen], const SipKey& key,
                    const Control& c) {
    const uint32_t nranges = c.nack ? c.n.nranges : 0;
    if (nranges > kMaxNackRanges || (c.nack && nranges == 0))
        return nullptr;
    const uint32_t body = kAckBodyLen + 4 * nranges;
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr)
        return nullptr;
    Header h;
    h.flags = c.nack ? Flags::Nack : Flags::Ack;
    h.flow = c.n.flow;
    h.msg_id = c.nack ? c.n.msg_id : c.acked_upto;
    h.pay_len = static_cast<uint16_t>(body);
    uint8_t* hdr = start_frame(m, l2l4, h, body);
    if (hdr == nullptr) {
        rte_pktmbuf_free(m);
        return nullptr;
    }
    uint8_t* b = hdr + kHeaderLen;
    put32(b + 0, c.released_upto);
    put32(b + 4, c.acked_upto);
    put32(b + 8, c.sender_epoch);
    put32(b + 12, c.receiver_epoch);
    put16(b + 16, static_cast<uint16_t>(nranges));
    put16(b + 18, c.hold_ns == kNoEcho ? 0 : c.echo);
    put32(b + 20, c.hold_ns);
    put64(b + 24, c.seq);
    for (uint32_t i = 0; i < nranges; i++) {
        put16(b + kAckFixedLen + 4 * i, c.n.ranges[i].first);
        put16(b + kAckFixedLen + 2 + 4 * i, c.n.ranges[i].count);
    }
    sign(hdr, body, key);
    return m;
}

DropReason parse_ack(const rte_mbuf* m, const ParsedPacket& p, const SipKey& key, Control& out) {
    if (p.body_len < kAckBodyLen || p.body_len > kMaxAckBodyLen || p.hdr.pay_len != p.body_len ||
        (p.body_len - kAckBodyLen) % 4 != 0)
        return DropReason::ControlMalformed;
    // Header and body in one contiguous copy (the frame may be chained).
    uint8_t buf[kHeaderLen + kMaxAckBodyLen];
    const uint32_t len = kHeaderLen + p.body_len;
    const auto* d = static_cast<const uint8_t*>(rte_pktmbuf_read(m, p.payload_off - kHeaderLen, len, buf));
    if (d == nullptr)
        return DropReason::ControlMalformed;
    if (!mac_ok(d, len, key))
        return DropReason::ControlBadAuth;
    const uint8_t* b = d + kHeaderLen;
    const uint16_t nranges = get16(b + 16);
    const bool nack = has(p.hdr.flags, Flags::Nack);
    if (has(p.hdr.flags, Flags::Ack) == nack || has(p.hdr.flags, Flags::Retx) || has(p.hdr.flags, Flags::Session) ||
        p.body_len != kAckBodyLen + 4u * nranges || (!nack && nranges != 0) ||
        (nack && nranges == 0) || p.hdr.pkt_idx != 0 || p.hdr.offset != 0)
        return DropReason::ControlMalformed;
    out.nack = nack;
    out.released_upto = get32(b + 0);
    out.acked_upto = get32(b + 4);
    out.sender_epoch = get32(b + 8);
    out.receiver_epoch = get32(b + 12);
    out.echo = get16(b + 18);
    out.hold_ns = get32(b + 20);
    out.seq = get64(b + 24);
    if ((out.hold_ns == kNoEcho && out.echo != 0) || out.sender_epoch == 0 || out.receiver_epoch == 0 ||
        out.seq == 0 || (!nack && p.hdr.msg_id != out.acked_upto))
        return DropReason::ControlMalformed;
    out.n.flow = p.hdr.flow;
    out.n.msg_id = p.hdr.msg_id;
    out.n.nranges = nranges;
    for (uint32_t i = 0; i < nranges; i++) {
        out.n.ranges[i].first = get16(b + kAckFixedLen + 4 * i);
        out.n.ranges[i].count = get16(b + kAckFixedLen + 2 + 4 * i);
    }
    return DropReason::None;
}

// --- sessions ---------------------------------------------------------------

const char* to_string(SessionType t) {
    switch (t) {
    case SessionType::Connect: return "connect";
    case SessionType::Accept: return "accept";
    case SessionType::Refuse: return "refuse";
    case SessionType::Keepalive: return "keepalive";
    case SessionType::Reset: return "reset";
    case SessionType::Close: return "close";
    case SessionType::Retry: return "retry";
    }
    return "?";
}

const char* to_string(RefuseReason r) {
    switch (r) {
    case RefuseReason::None: return "none";
    case RefuseReason::NoListener: return "no_listener";
    case RefuseReason::Flows: return "flows";
    case RefuseReason::MsgSize: return "msg_size";
    case RefuseReason::RingSize: return "ring_size";
    case RefuseReason::Mtu: return "mtu";
    case RefuseReason::Key: return "key";
    case RefuseReason::NoRoom: return "no_room";
    case RefuseReason::UnknownSession: return "unknown_session";
    case RefuseReason::Closed: return "closed";
    case RefuseReason::Busy: return "busy";
    case RefuseReason::Version: return "version";
    }
    return "?";
}

namespace {
bool has_params(SessionType t) { return t == SessionType::Connect || t == SessionType::Accept; }
bool has_reason(SessionType t) { return t == SessionType::Refuse || t == SessionType::Reset; }
constexpr uint32_t P = kSessionFixedLen; // where a type's own fields start
constexpr uint32_t kParamsLen = 48;      // CONNECT, ACCEPT: before the overrides
constexpr uint32_t kReasonLen = 24;      // REFUSE, RESET
constexpr uint32_t kCookieLen = 8;       // RETRY
constexpr uint32_t kRailLen = 12;        // CONNECT, ACCEPT: per rail after the first
} // namespace

uint32_t session_body_len(const SessionMsg& s) {
    uint32_t n = kSessionFixedLen;
    if (has_params(s.type))
        n += kParamsLen + 8u * s.noverrides + kRailLen * s.nrails;
    else if (has_reason(s.type))
        n += kReasonLen;
    else if (s.type == SessionType::Retry)
        n += kCookieLen;
    return n + kMacLen;
}

rte_mbuf* build_session(rte_mempool* pool, const uint8_t (&l2l4)[kEthLen + kIpLen + kUdpLen], const SipKey& key,
                        const SessionMsg& s) {
    if (s.noverrides > kMaxKeyOverrides || s.nrails >= kMaxRails)
        return nullptr;
    const uint32_t body = session_body_len(s);
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr)
        return nullptr;
    Header h;
    h.flags = Flags::Session;
    h.flow = s.dst_session;
    h.pay_len = static_cast<uint16_t>(body);
    uint8_t* hdr = start_frame(m, l2l4, h, body);
    if (hdr == nullptr) {
        rte_pktmbuf_free(m);
        return nullptr;
    }
    uint8_t* b = hdr + kHeaderLen;
    b[0] = static_cast<uint8_t>(s.type);
    b[1] = s.flags;
    put16(b + 2, s.service);
    put16(b + 4, s.src_session);
    put16(b + 6, 0);
    put32(b + 8, s.src_epoch);
    put32(b + 12, s.dst_epoch);
    put64(b + 16, s.nonce);
    put64(b + 24, s.seq);
    if (has_params(s.type)) {
        put64(b + P, s.cookie);
        put16(b + P + 8, s.nflows);
        put16(b + P + 10, s.flow_base);
        put32(b + P + 12, s.mtu);
        put32(b + P + 16, s.ring_size);
        put32(b + P + 20, s.max_msg);
        put32(b + P + 24, s.key);
        put16(b + P + 28, s.key_flags);
        put16(b + P + 30, s.noverrides);
        put16(b + P + 32, s.data_version);
        put16(b + P + 34, s.data_flags);
        put32(b + P + 36, 0);
        b[P + 36] = s.nrails;
        put64(b + P + 40, s.key_nonce);
        for (uint32_t i = 0; i < s.noverrides; i++) {
            put16(b + P + kParamsLen + 8 * i, s.overrides[i].index);
            put16(b + P + kParamsLen + 2 + 8 * i, 0);
            put32(b + P + kParamsLen + 4 + 8 * i, s.overrides[i].key);
        }
        uint8_t* r = b + P + kParamsLen + 8u * s.noverrides;
        for (uint32_t i = 0; i < s.nrails; i++, r += kRailLen) {
            put32(r, s.rails[i].ip);
            memcpy(r + 4, s.rails[i].mac, 6);
            put16(r + 10, 0);
        }
    } else if (has_reason(s.type)) {
        put16(b + P, static_cast<uint16_t>(s.reason));
        put16(b + P + 2, s.index);
        put32(b + P + 4, 0);
        put64(b + P + 8, s.expected);
        put64(b + P + 16, s.got);
    } else if (s.type == SessionType::Retry) {
        put64(b + P, s.cookie);
    }
    sign(hdr, body, key);
    return m;
}

DropReason read_session(const rte_mbuf* m, const ParsedPacket& p, SessionFrame& raw, SessionMsg& out) {
    const uint32_t len = kHeaderLen + p.body_len;
    if (p.body_len < kSessionFixedLen + kMacLen || len > sizeof(raw.bytes) || p.hdr.pay_len != p.body_len ||
        p.hdr.flags != Flags::Session || p.hdr.pkt_idx != 0 || p.hdr.offset != 0 || p.hdr.msg_id != 0)
        return DropReason::ControlMalformed;
    const auto* d = static_cast<const uint8_t*>(rte_pktmbuf_read(m, p.payload_off - kHeaderLen, len, raw.bytes));
    if (d == nullptr)
        return DropReason::ControlMalformed;
    if (d != raw.bytes)
        memcpy(raw.bytes, d, len);
    raw.len = len;
    const uint8_t* b = raw.bytes + kHeaderLen;
    const uint8_t type = b[0];
    if (type < static_cast<uint8_t>(SessionType::Connect) || type > static_cast<uint8_t>(SessionType::Retry) ||
        get16(b + 6) != 0)
        return DropReason::ControlMalformed;
    out = SessionMsg{};
    out.type = static_cast<SessionType>(type);
    out.flags = b[1];
    out.service = get16(b + 2);
    out.src_session = get16(b + 4);
    out.src_epoch = get32(b + 8);
    out.dst_epoch = get32(b + 12);
    out.nonce = get64(b + 16);
    out.seq = get64(b + 24);
    out.dst_session = p.hdr.flow;
    const uint32_t flags_ok = out.type == SessionType::Keepalive ? (kKeepaliveAsk | kKeepaliveAnswer) : 0;
    if ((out.flags & ~flags_ok) != 0 || out.flags == (kKeepaliveAsk | kKeepaliveAnswer) || out.src_epoch == 0 ||
        out.seq == 0)
        return DropReason::ControlMalformed;
    if (has_params(out.type)) {
        if (p.body_len < kSessionFixedLen + kParamsLen + kMacLen)
            return DropReason::ControlMalformed;
        out.cookie = get64(b + P);
        out.nflows = get16(b + P + 8);
        out.flow_base = get16(b + P + 10);
        out.mtu = get32(b + P + 12);
        out.ring_size = get32(b + P + 16);
        out.max_msg = get32(b + P + 20);
        out.key = get32(b + P + 24);
        out.key_flags = get16(b + P + 28);
        out.noverrides = get16(b + P + 30);
        out.data_version = get16(b + P + 32);
        out.data_flags = get16(b + P + 34);
        out.key_nonce = get64(b + P + 40);
        out.nrails = b[P + 36];
        if ((out.data_flags & ~kDataAuth) != 0 || b[P + 37] != 0 || get16(b + P + 38) != 0 ||
            out.nrails >= kMaxRails ||
            (out.data_version != kVersion && out.data_version != kVersion2) ||
            (out.data_flags != 0 && out.data_version != kVersion2) ||
            (out.type == SessionType::Connect) != (out.key_nonce == 0))
            return DropReason::ControlMalformed;
        if (out.noverrides > kMaxKeyOverrides ||
            p.body_len != kSessionFixedLen + kParamsLen + 8u * out.noverrides + kRailLen * out.nrails + kMacLen ||
            (out.key_flags & ~kKeysGiven) != 0 || (out.type == SessionType::Accept && (out.key_flags != 0 || out.cookie != 0)) ||
            out.nflows == 0 || static_cast<uint32_t>(out.flow_base) + out.nflows > 65536)
            return DropReason::ControlMalformed;
        for (uint32_t i = 0; i < out.noverrides; i++) {
            out.overrides[i].index = get16(b + P + kParamsLen + 8 * i);
            out.overrides[i].key = get32(b + P + kParamsLen + 4 + 8 * i);
            if (get16(b + P + kParamsLen + 2 + 8 * i) != 0 || out.overrides[i].index >= out.nflows)
                return DropReason::ControlMalformed;
        }
        const uint8_t* r = b + P + kParamsLen + 8u * out.noverrides;
        for (uint32_t i = 0; i < out.nrails; i++, r += kRailLen) {
            out.rails[i].ip = get32(r);
            memcpy(out.rails[i].mac, r + 4, 6);
            // A rail needs an address and a unicast MAC (a data frame goes to it).
            if (get16(r + 10) != 0 || out.rails[i].ip == 0 || (out.rails[i].mac[0] & 1) != 0)
                return DropReason::ControlMalformed;
        }
    } else if (has_reason(out.type)) {
        if (p.body_len != kSessionFixedLen + kReasonLen + kMacLen || get32(b + P + 4) != 0)
            return DropReason::ControlMalformed;
        out.reason = static_cast<RefuseReason>(get16(b + P));
        out.index = get16(b + P + 2);
        out.expected = get64(b + P + 8);
        out.got = get64(b + P + 16);
    } else if (out.type == SessionType::Retry) {
        if (p.body_len != kSessionFixedLen + kCookieLen + kMacLen)
            return DropReason::ControlMalformed;
        out.cookie = get64(b + P);
        if (out.cookie == 0)
            return DropReason::ControlMalformed;
    } else if (p.body_len != kSessionFixedLen + kMacLen) {
        return DropReason::ControlMalformed;
    }
    // Session ids and epochs are never 0: a CONNECT names no destination
    // session (it has none yet), everything else names one.
    if ((out.type == SessionType::Connect) != (out.dst_epoch == 0 && out.dst_session == 0) ||
        (out.type != SessionType::Connect && (out.dst_epoch == 0 || out.dst_session == 0)) ||
        (out.src_session == 0) != (out.type == SessionType::Retry)) // a RETRY belongs to no session yet
        return DropReason::ControlMalformed;
    return DropReason::None;
}

bool authentic(const SessionFrame& raw, const SipKey& key) {
    return raw.len >= kHeaderLen + kMacLen && mac_ok(raw.bytes, raw.len, key);
}

} // namespace tailmark
