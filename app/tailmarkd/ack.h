// Credit (ACK) control packets between a receiver and a sender process.
//
// Until the reliability issue defines the full ACK/NACK protocol, tailmarkd
// uses one minimal control packet so that a sender in another process never
// overruns the receiver's completion window:
//
//   Ethernet | IPv4 | UDP (dst = --udp-port) | Header | body (4 bytes)
//   Header:  version 1, flags ACK (0x02), flow, msg_id = released_upto,
//            pkt_idx 0, pay_len 4, offset 0
//   body:    u32 released_upto, big-endian: the receiver's consumer cursor
//            for the flow; every msg_id below it is completed, verified and
//            released. The sender may have msg_id < released_upto + ring_size
//            outstanding (the same window RxPlacer enforces).
//
// The receiver sends one per flow whenever the cursor advanced by a quarter of
// the ring (or at all, after 20 us), and at least every millisecond as a
// keep-alive; a sender sends nothing before it has seen the first one. The
// body is authoritative; the reliability issue extends it (selective ACK,
// NACK ranges) behind the same flag.
#pragma once

#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_udp.h>

#include "tailmark/packet_parser.h"
#include "tailmark/tx_marker.h"
#include "tailmark/wire.h"

namespace tailmark::app {

inline constexpr uint32_t kAckBodyLen = 4;

// Builds an ACK from a flow's L2-L4 template (own address -> peer). nullptr
// when the pool is empty.
inline rte_mbuf* build_ack(rte_mempool* pool, const TxFlow& tmpl, uint32_t released_upto) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr)
        return nullptr;
    const uint32_t len = kFrameOverhead + kAckBodyLen;
    uint8_t* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
    if (p == nullptr) {
        rte_pktmbuf_free(m);
        return nullptr;
    }
    memcpy(p, tmpl.l2l4, sizeof(tmpl.l2l4));
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(p + kEthLen + kIpLen);
    const uint16_t udp_len = static_cast<uint16_t>(kUdpLen + kHeaderLen + kAckBodyLen);
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(kIpLen + udp_len));
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    udp->dgram_len = rte_cpu_to_be_16(udp_len);
    Header h;
    h.flags = Flags::Ack;
    h.flow = tmpl.id;
    h.msg_id = released_upto;
    h.pay_len = kAckBodyLen;
    encode(h, reinterpret_cast<WireHeader*>(p + kEthLen + kIpLen + kUdpLen));
    const rte_be32_t body = rte_cpu_to_be_32(released_upto);
    memcpy(p + kFrameOverhead, &body, sizeof(body));
    m->l2_len = kEthLen;
    m->l3_len = kIpLen;
    return m;
}

// released_upto of a parsed control packet, or false when it is no ACK we know.
inline bool read_ack(const rte_mbuf* m, const ParsedPacket& p, uint32_t& released_upto) {
    if (!has(p.hdr.flags, Flags::Ack) || has(p.hdr.flags, Flags::Nack) || p.body_len < kAckBodyLen)
        return false;
    rte_be32_t be;
    const void* b = rte_pktmbuf_read(m, p.payload_off, sizeof(be), &be);
    if (b == nullptr)
        return false;
    memcpy(&be, b, sizeof(be));
    released_upto = rte_be_to_cpu_32(be);
    return true;
}

} // namespace tailmark::app
