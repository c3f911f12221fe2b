#include "tailmark/control.h"

#include <cstring>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "tailmark/crc32c.h"

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

} // namespace

rte_mbuf* build_control(rte_mempool* pool, const TxFlow& tmpl, const Control& c) {
    const uint32_t nranges = c.nack ? c.n.nranges : 0;
    if (nranges > kMaxNackRanges)
        return nullptr;
    const uint32_t body = kAckBodyLen + 4 * nranges;
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr)
        return nullptr;
    uint8_t* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(kFrameOverhead + body)));
    if (p == nullptr) {
        rte_pktmbuf_free(m);
        return nullptr;
    }
    memcpy(p, tmpl.l2l4, sizeof(tmpl.l2l4));
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(p + kEthLen + kIpLen);
    const uint16_t udp_len = static_cast<uint16_t>(kUdpLen + kHeaderLen + body);
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(kIpLen + udp_len));
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    udp->dgram_len = rte_cpu_to_be_16(udp_len);

    Header h;
    h.flags = c.nack ? Flags::Nack : Flags::Ack;
    h.flow = tmpl.id;
    h.msg_id = c.nack ? c.n.msg_id : c.acked_upto;
    h.pay_len = static_cast<uint16_t>(body);
    uint8_t* hdr = p + kEthLen + kIpLen + kUdpLen;
    encode(h, reinterpret_cast<WireHeader*>(hdr));
    uint8_t* b = hdr + kHeaderLen;
    put32(b + 0, c.released_upto);
    put32(b + 4, c.acked_upto);
    put32(b + 8, c.epoch);
    put16(b + 12, static_cast<uint16_t>(nranges));
    put16(b + 14, 0);
    for (uint32_t i = 0; i < nranges; i++) {
        put16(b + 16 + 4 * i, c.n.ranges[i].first);
        put16(b + 18 + 4 * i, c.n.ranges[i].count);
    }
    const uint32_t covered = kHeaderLen + body - kControlCrcLen;
    put32(hdr + covered, crc32c({hdr, covered}));
    m->l2_len = kEthLen;
    m->l3_len = kIpLen;
    return m;
}

DropReason parse_control(const rte_mbuf* m, const ParsedPacket& p, Control& out) {
    if (p.body_len < kAckBodyLen || p.body_len > kMaxControlBodyLen || p.hdr.pay_len != p.body_len)
        return DropReason::ControlMalformed;
    // Header and body in one contiguous copy (the frame may be chained).
    uint8_t buf[kHeaderLen + kMaxControlBodyLen];
    const uint32_t len = kHeaderLen + p.body_len;
    const auto* d = static_cast<const uint8_t*>(rte_pktmbuf_read(m, p.payload_off - kHeaderLen, len, buf));
    if (d == nullptr)
        return DropReason::ControlMalformed;
    const uint32_t covered = len - kControlCrcLen;
    if (crc32c({d, covered}) != get32(d + covered))
        return DropReason::ControlBadCrc;
    const uint8_t* b = d + kHeaderLen;
    const uint16_t nranges = get16(b + 12);
    const bool nack = has(p.hdr.flags, Flags::Nack);
    if (has(p.hdr.flags, Flags::Ack) == nack || has(p.hdr.flags, Flags::Retx) || get16(b + 14) != 0 ||
        p.body_len != kAckBodyLen + 4u * nranges || (!nack && nranges != 0) || (nack && nranges == 0) ||
        p.hdr.pkt_idx != 0 || p.hdr.offset != 0)
        return DropReason::ControlMalformed;
    out.nack = nack;
    out.released_upto = get32(b + 0);
    out.acked_upto = get32(b + 4);
    out.epoch = get32(b + 8);
    if (out.epoch == 0 || (!nack && p.hdr.msg_id != out.acked_upto))
        return DropReason::ControlMalformed;
    out.n.flow = p.hdr.flow;
    out.n.msg_id = p.hdr.msg_id;
    out.n.nranges = nranges;
    for (uint32_t i = 0; i < nranges; i++) {
        out.n.ranges[i].first = get16(b + 16 + 4 * i);
        out.n.ranges[i].count = get16(b + 18 + 4 * i);
    }
    return DropReason::None;
}

} // namespace tailmark
