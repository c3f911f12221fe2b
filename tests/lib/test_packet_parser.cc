#include <catch2/catch.hpp>

#include <functional>

#include <rte_ether.h>
#include <rte_udp.h>

#include "fixtures.h"
#include "tailmark/packet_parser.h"

using namespace tailmark;
using tmtest::flat;

namespace {

struct Frames {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow();
    std::vector<uint8_t> last;  // a valid single-packet message (LAST)
    std::vector<uint8_t> first; // a valid non-LAST packet of a 3-packet message

    Frames() {
        auto one = tmtest::build_group(pool.mp, flow, 5, tmtest::pattern(300, 1));
        last = flat(one[0]);
        tmtest::free_all(one);
        auto three = tmtest::build_group(pool.mp, flow, 6, tmtest::pattern(3000, 2));
        first = flat(three[0]);
        tmtest::free_all(three);
    }

    DropReason parse(const std::vector<uint8_t>& f, const ParserConfig& cfg = {}) {
        rte_mbuf* m = tmtest::mbuf_of(pool.mp, f);
        ParsedPacket p;
        DropReason r = parse_packet(m, cfg, p);
        rte_pktmbuf_free(m);
        return r;
    }

    DropReason mutate(const std::vector<uint8_t>& base, const std::function<void(std::vector<uint8_t>&)>& fn,
                      bool fix_ip = true) {
        auto f = base;
        fn(f);
        if (fix_ip)
            tmtest::fix_ip_checksum(f);
        return parse(f);
    }
};

void set_udp_len(std::vector<uint8_t>& f, int delta) {
    auto* udp = reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen);
    udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(rte_be_to_cpu_16(udp->dgram_len) + delta));
}
void set_ip_len(std::vector<uint8_t>& f, int delta) {
    auto* ip = tmtest::ip_of(f);
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(rte_be_to_cpu_16(ip->total_length) + delta));
}

} // namespace

TEST_CASE("valid frames parse, with their header and trailer", "[parser]") {
    Frames fr;
    rte_mbuf* m = tmtest::mbuf_of(fr.pool.mp, fr.last);
    ParsedPacket p;
    REQUIRE(parse_packet(m, {}, p) == DropReason::None);
    CHECK(p.is_last());
    CHECK(p.hdr.flow == 7);
    CHECK(p.hdr.msg_id == 5);
    CHECK(p.hdr.pay_len == 300);
    CHECK(p.trailer.flag == 6);
    CHECK(p.trailer.slot == 5);
    CHECK(p.trailer.key == 0xC0FFEE);
    CHECK(p.trailer.msg_len == 300);
    CHECK(p.trailer.pkt_count == 1);
    CHECK(p.trailer.magic == kMagic);
    CHECK(p.payload_off == kFrameOverhead);
    rte_pktmbuf_free(m);
    CHECK(fr.parse(fr.first) == DropReason::None);
}

TEST_CASE("the trailer is found from the UDP length, not the frame length", "[parser]") {
    Frames fr;
    auto padded = fr.last;
    padded.resize(padded.size() + 20, 0xEE); // Ethernet padding / trailing junk
    CHECK(fr.parse(padded) == DropReason::None);
}

TEST_CASE("every frame-level drop reason", "[parser]") {
    Frames fr;
    auto& L = fr.last;
    auto& F = fr.first;
    using R = DropReason;
    CHECK(fr.parse(std::vector<uint8_t>(L.begin(), L.begin() + 10)) == R::FrameTooShort);
    CHECK(fr.mutate(L, [](auto& f) { reinterpret_cast<rte_ether_hdr*>(f.data())->ether_type = RTE_BE16(RTE_ETHER_TYPE_VLAN); }, false) == R::VlanTagged);
    CHECK(fr.mutate(L, [](auto& f) { reinterpret_cast<rte_ether_hdr*>(f.data())->ether_type = RTE_BE16(RTE_ETHER_TYPE_QINQ); }, false) == R::VlanTagged);
    CHECK(fr.mutate(L, [](auto& f) { reinterpret_cast<rte_ether_hdr*>(f.data())->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV6); }, false) == R::NotIpv4);
    CHECK(fr.mutate(L, [](auto& f) { reinterpret_cast<rte_ether_hdr*>(f.data())->ether_type = RTE_BE16(RTE_ETHER_TYPE_ARP); }, false) == R::NotIpv4);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->version_ihl = 0x65; }) == R::IpBadVersion);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->version_ihl = 0x46; }) == R::IpOptions);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG | 1); }) == R::IpFragment);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->fragment_offset = RTE_BE16(RTE_IPV4_HDR_MF_FLAG); }) == R::IpFragment);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->fragment_offset = 0; }) == R::IpNoDf);
    CHECK(fr.mutate(L, [](auto& f) { set_ip_len(f, 1); }) == R::IpBadLength);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->total_length = RTE_BE16(19); }) == R::IpBadLength);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->hdr_checksum ^= 0x0100; }, false) == R::IpBadChecksum);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::ip_of(f)->next_proto_id = IPPROTO_TCP; }) == R::NotUdp);
    CHECK(fr.mutate(L, [](auto& f) { reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen)->dst_port = RTE_BE16(53); }) == R::WrongPort);
    CHECK(fr.mutate(L, [](auto& f) { set_udp_len(f, -1); }) == R::UdpBadLength);
    CHECK(fr.mutate(L, [](auto& f) { set_ip_len(f, -1); }) == R::UdpBadLength);
    // A UDP datagram on our port too short for a Header.
    CHECK(fr.mutate(L, [](auto& f) { set_ip_len(f, -(int)(rte_be_to_cpu_16(tmtest::ip_of(f)->total_length) - 20 - 8 - 4)); set_udp_len(f, -(int)(rte_be_to_cpu_16(reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen)->dgram_len) - 12)); }) == R::FrameTooShort);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::hdr_of(f)->version = 3; }) == R::BadVersion);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::hdr_of(f)->version = 0; }) == R::BadVersion);
    // Version 2 is data only: a control packet keeps version 1's framing.
    CHECK(fr.mutate(L, [](auto& f) {
              tmtest::hdr_of(f)->version = 2;
              tmtest::hdr_of(f)->flags = static_cast<uint8_t>(Flags::Ack);
          }) == R::BadVersion);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::hdr_of(f)->flags |= 0x10; }) == R::BadFlags);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::hdr_of(f)->flags |= 0x02; }) == R::BadFlags); // LAST+ACK
    CHECK(fr.mutate(L, [](auto& f) { tmtest::hdr_of(f)->pay_len = RTE_BE16(299); }) == R::PayLenMismatch);
    CHECK(fr.mutate(F, [](auto& f) { tmtest::hdr_of(f)->pay_len = RTE_BE16(1455); }) == R::PayLenMismatch);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::trailer_of(f)->magic ^= 1; }) == R::BadMagic);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::trailer_of(f)->reserved = RTE_BE16(1); }) == R::BadReserved);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::trailer_of(f)->flag = 0; }) == R::BadFlag);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::trailer_of(f)->flag = rte_cpu_to_be_64(5); }) == R::BadFlag);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::trailer_of(f)->pkt_count = 0; }) == R::BadPktCount);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::trailer_of(f)->pkt_count = RTE_BE16(2); }) == R::BadPktCount);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::trailer_of(f)->msg_len = RTE_BE32(301); }) == R::BadOffset);
    CHECK(fr.mutate(L, [](auto& f) { tmtest::hdr_of(f)->offset = RTE_BE32(1); }) == R::BadOffset);
    CHECK(fr.mutate(F, [](auto& f) { tmtest::hdr_of(f)->offset = RTE_BE32(0xFFFFFFF0u); }) == R::BadOffset);

    // A non-LAST packet with no payload.
    auto empty = F;
    empty.resize(kFrameOverhead);
    tmtest::hdr_of(empty)->pay_len = 0;
    set_ip_len(empty, -1456);
    set_udp_len(empty, -1456);
    tmtest::fix_ip_checksum(empty);
    CHECK(fr.parse(empty) == R::EmptyPacket);

    // UDP checksum: zero is accepted; a wrong non-zero one is caught when verified.
    auto bad_udp = L;
    reinterpret_cast<rte_udp_hdr*>(bad_udp.data() + kEthLen + kIpLen)->dgram_cksum = RTE_BE16(0x1234);
    ParserConfig verify;
    verify.verify_udp_checksum = true;
    CHECK(fr.parse(bad_udp) == R::None);
    CHECK(fr.parse(bad_udp, verify) == R::UdpBadChecksum);
    CHECK(fr.parse(L, verify) == R::None);
}

TEST_CASE("control packets parse and are told apart", "[parser]") {
    Frames fr;
    auto ack = fr.first;
    tmtest::hdr_of(ack)->flags = static_cast<uint8_t>(Flags::Ack);
    rte_mbuf* m = tmtest::mbuf_of(fr.pool.mp, ack);
    ParsedPacket p;
    CHECK(parse_packet(m, {}, p) == DropReason::None);
    CHECK(p.is_control());
    CHECK(p.body_len == 1456);
    rte_pktmbuf_free(m);
}

TEST_CASE("truncated frames at every length are dropped", "[parser]") {
    Frames fr;
    for (const auto* base : {&fr.last, &fr.first}) {
        for (size_t len = 0; len < base->size(); len++) {
            std::vector<uint8_t> t(base->begin(), base->begin() + len);
            INFO("length " << len);
            REQUIRE(fr.parse(t) != DropReason::None);
        }
    }
}

TEST_CASE("headers split across chained segments still parse", "[parser]") {
    Frames fr;
    // Split the LAST frame at every point into two segments.
    for (size_t cut = 1; cut < fr.last.size(); cut += 7) {
        rte_mbuf* a = tmtest::mbuf_of(fr.pool.mp, std::vector<uint8_t>(fr.last.begin(), fr.last.begin() + cut));
        rte_mbuf* b = tmtest::mbuf_of(fr.pool.mp, std::vector<uint8_t>(fr.last.begin() + cut, fr.last.end()));
        REQUIRE(rte_pktmbuf_chain(a, b) == 0);
        ParsedPacket p;
        INFO("cut " << cut);
        CHECK(parse_packet(a, {}, p) == DropReason::None);
        CHECK(p.trailer.magic == kMagic);
        rte_pktmbuf_free(a);
    }
}
