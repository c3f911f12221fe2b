// The UDP checksum over chained mbufs (lib/tailmark/udp_cksum.h), against
// the same packet laid out flat, for every split of an odd or even payload
// into three segments (header, payload, trailer), as the zero-copy tx path
// chains them and a scattered rx path may receive them.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "fixtures.h"
#include "tailmark/udp_cksum.h"

using namespace tailmark;

namespace {

constexpr uint32_t kL4 = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr);

// An IPv4/UDP frame of `payload` bytes after the UDP header, bytes varied.
std::vector<uint8_t> frame(uint32_t payload) {
    std::vector<uint8_t> f(kL4 + sizeof(rte_udp_hdr) + payload);
    for (size_t i = 0; i < f.size(); i++)
        f[i] = static_cast<uint8_t>(0xA5 ^ (i * 131 + (i >> 3)));
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + sizeof(rte_ether_hdr));
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(f.size() - sizeof(rte_ether_hdr)));
    ip->next_proto_id = IPPROTO_UDP;
    auto* udp = reinterpret_cast<rte_udp_hdr*>(f.data() + kL4);
    udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(sizeof(rte_udp_hdr) + payload));
    udp->dgram_cksum = 0;
    return f;
}

// f in three segments: [0, a), [a, b), [b, end).
rte_mbuf* chain(rte_mempool* mp, const std::vector<uint8_t>& f, uint32_t a, uint32_t b) {
    const uint32_t cut[4] = {0, a, b, static_cast<uint32_t>(f.size())};
    rte_mbuf* head = nullptr;
    for (int i = 0; i < 3; i++) {
        rte_mbuf* m = rte_pktmbuf_alloc(mp);
        REQUIRE(m != nullptr);
        const uint32_t n = cut[i + 1] - cut[i];
        memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(n)), f.data() + cut[i], n);
        if (head == nullptr)
            head = m;
        else
            REQUIRE(rte_pktmbuf_chain(head, m) == 0);
    }
    return head;
}

} // namespace

TEST_CASE("UDP checksum of a chain: as of the flat frame, for every odd and even segment length", "[udp_cksum]") {
    tmtest::Pool pool(1023);
    uint32_t chains = 0;
    for (uint32_t payload : {40u, 41u, 1455u, 1456u}) {
        const std::vector<uint8_t> f = frame(payload);
        const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(f.data() + sizeof(rte_ether_hdr));
        const uint16_t want = rte_ipv4_udptcp_cksum(ip, f.data() + kL4); // contiguous: DPDK's is right
        // The header segment ends within the UDP payload's first bytes (the
        // tailmark header), the payload segment anywhere after it.
        for (uint32_t a = kL4 + 8; a <= kL4 + 12; a++) {
            for (uint32_t b = a + 1; b < f.size(); b += (b < a + 24 || b + 24 > f.size()) ? 1 : 97) {
                rte_mbuf* m = chain(pool.mp, f, a, b);
                INFO("payload " << payload << ", segments " << a << "/" << b - a << "/" << f.size() - b);
                REQUIRE(udp4_cksum(m, ip, kL4) == want);
                // The receiver's check: the frame with the field filled verifies,
                // and one flipped payload bit does not.
                rte_pktmbuf_mtod_offset(m, rte_udp_hdr*, kL4)->dgram_cksum = want;
                CHECK(udp4_cksum_ok(m, ip, kL4));
                uint8_t* last = rte_pktmbuf_mtod_offset(m->next->next, uint8_t*, 0);
                *last ^= 0x10;
                CHECK_FALSE(udp4_cksum_ok(m, ip, kL4));
                rte_pktmbuf_free(m);
                chains++;
            }
        }
    }
    CHECK(chains == 755); // 4 payloads x 5 header cuts x the payload cuts
    CHECK(pool.avail() == 1023);
}
