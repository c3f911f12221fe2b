#include "tailmark/packet_parser.h"

#include "tailmark/data_tag.h"
#include "tailmark/udp_cksum.h"

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

namespace tailmark {

namespace {

constexpr uint16_t kIpv4DfBe = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
constexpr uint16_t kIpv4FragMaskBe = RTE_BE16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK);

struct alignas(2) L2L4 {
    rte_ether_hdr eth;
    rte_ipv4_hdr ip;
    rte_udp_hdr udp;
    WireHeader tm;
};
static_assert(sizeof(L2L4) == kFrameOverhead);

} // namespace

DropReason parse_packet(const rte_mbuf* m, const ParserConfig& cfg, ParsedPacket& out) {
    const uint32_t pkt_len = rte_pktmbuf_pkt_len(m);
    if (pkt_len < kEthLen)
        return DropReason::FrameTooShort;

    // The common case is one contiguous first segment: no copy.
    L2L4 copy;
    const uint32_t have = pkt_len < kFrameOverhead ? pkt_len : kFrameOverhead;
    auto* f = static_cast<const L2L4*>(rte_pktmbuf_read(m, 0, have, &copy));
    if (f == nullptr)
        return DropReason::FrameTooShort;

    const uint16_t ether_type = f->eth.ether_type;
    if (ether_type == RTE_BE16(RTE_ETHER_TYPE_VLAN) || ether_type == RTE_BE16(RTE_ETHER_TYPE_QINQ) ||
        ether_type == RTE_BE16(RTE_ETHER_TYPE_QINQ1) || (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED))
        return DropReason::VlanTagged;
    if (ether_type != RTE_BE16(RTE_ETHER_TYPE_IPV4))
        return DropReason::NotIpv4;

    if (pkt_len < kEthLen + kIpLen)
        return DropReason::FrameTooShort;
    const rte_ipv4_hdr& ip = f->ip;
    if ((ip.version_ihl >> 4) != 4)
        return DropReason::IpBadVersion;
    if ((ip.version_ihl & 0x0F) != 5)
        return DropReason::IpOptions;
    if (ip.fragment_offset & kIpv4FragMaskBe)
        return DropReason::IpFragment;
    if (!(ip.fragment_offset & kIpv4DfBe))
        return DropReason::IpNoDf;
    const uint32_t ip_len = rte_be_to_cpu_16(ip.total_length);
    if (ip_len < kIpLen || kEthLen + ip_len > pkt_len)
        return DropReason::IpBadLength;
    const uint64_t ip_ck = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
    if (ip_ck == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
        (ip_ck != RTE_MBUF_F_RX_IP_CKSUM_GOOD && cfg.verify_ip_checksum && rte_ipv4_cksum(&ip) != 0))
        return DropReason::IpBadChecksum;
    if (ip.next_proto_id != IPPROTO_UDP)
        return DropReason::NotUdp;
    out.ip_id = ip.packet_id; // the sender's send stamp, as it came (echoed verbatim)

    if (ip_len < kIpLen + kUdpLen)
        return DropReason::FrameTooShort;
    const rte_udp_hdr& udp = f->udp;
    if (udp.dst_port != rte_cpu_to_be_16(cfg.udp_port))
        return DropReason::WrongPort;
    const uint32_t udp_len = rte_be_to_cpu_16(udp.dgram_len);
    if (udp_len != ip_len - kIpLen)
        return DropReason::UdpBadLength;
    if (udp_len < kUdpLen + kHeaderLen || have < kFrameOverhead)
        return DropReason::FrameTooShort;
    const uint64_t l4_ck = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
    if (udp.dgram_cksum != 0) {
        if (l4_ck == RTE_MBUF_F_RX_L4_CKSUM_BAD)
            return DropReason::UdpBadChecksum;
        if (l4_ck != RTE_MBUF_F_RX_L4_CKSUM_GOOD && cfg.verify_udp_checksum &&
            !udp4_cksum_ok(m, &ip, kEthLen + kIpLen))
            return DropReason::UdpBadChecksum;
    }

    out.hdr = decode(&f->tm);
    const Header& h = out.hdr;
    if (h.version != kVersion && h.version != kVersion2)
        return DropReason::BadVersion;
    const uint8_t flags = static_cast<uint8_t>(h.flags);
    if (flags & ~kKnownFlags)
        return DropReason::BadFlags;
    const bool last = has(h.flags, Flags::Last);
    const bool control = has(h.flags, Flags::Ack) || has(h.flags, Flags::Nack) || has(h.flags, Flags::Session);
    if (last && control)
        return DropReason::BadFlags;
    if (control && h.version != kVersion)
        return DropReason::BadVersion; // control packets keep version 1's framing

    const uint32_t hl = header_len(h.version);
    if (udp_len < kUdpLen + hl)
        return DropReason::FrameTooShort;
    out.payload_off = kEthLen + kIpLen + kUdpLen + hl;
    out.body_len = udp_len - kUdpLen - hl;
    if (control)
        return DropReason::None; // the reliability layer validates its own body
    if (h.version == kVersion2) {
        uint64_t tcopy;
        const void* t = rte_pktmbuf_read(m, kFrameOverhead, kTagLen, &tcopy);
        if (t == nullptr)
            return DropReason::FrameTooShort;
        out.tag = get_tag(t);
    }

    if (!last) {
        if (h.pay_len != out.body_len)
            return DropReason::PayLenMismatch;
        if (h.pay_len == 0)
            return DropReason::EmptyPacket;
        if (static_cast<uint64_t>(h.offset) + h.pay_len > UINT32_MAX)
            return DropReason::BadOffset;
        return DropReason::None;
    }

    if (out.body_len < kTrailerLen || h.pay_len != out.body_len - kTrailerLen)
        return DropReason::PayLenMismatch;
    // The trailer ends the UDP payload; the frame may carry Ethernet padding after it.
    WireTrailer tcopy;
    auto* wt = static_cast<const WireTrailer*>(
        rte_pktmbuf_read(m, kEthLen + kIpLen + udp_len - kTrailerLen, kTrailerLen, &tcopy));
    if (wt == nullptr)
        return DropReason::FrameTooShort;
    decode_into(wt, out.trailer);
    const Trailer& t = out.trailer;
    if (t.magic != kMagic)
        return DropReason::BadMagic;
    if (t.reserved != 0)
        return DropReason::BadReserved;
    if (t.flag != flag_for(h.msg_id))
        return DropReason::BadFlag;
    if (t.pkt_count == 0 || h.pkt_idx != t.pkt_count - 1u)
        return DropReason::BadPktCount;
    if (static_cast<uint64_t>(h.offset) + h.pay_len != t.msg_len)
        return DropReason::BadOffset;
    return DropReason::None;
}

} // namespace tailmark
