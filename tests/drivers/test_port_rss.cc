// drivers/port's software RSS (rss_queue): the queue a NIC's Toeplitz hash
// and RETA give a flow's UDP/IPv4 tuple, so a flow is owned by the rx lcore
// its frames reach. No virtual device here reports a RETA, so the path is
// checked against the 82599 datasheet's RSS verification suite (7.1.2.8.3),
// which NICs implement: the tuple's field order, its byte order and the key.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include <rte_ip.h>

#include "drivers/port.h"
#include "tailmark/tx_marker.h"

using tailmark::drivers::rss_queue;

namespace {

// The datasheet's (and Microsoft's) verification key.
constexpr std::array<uint8_t, 40> kKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

struct Vector {
    uint32_t dst_ip, src_ip;
    uint16_t dst_port, src_port;
    uint32_t hash; // IPv4 with ports
};
const Vector kVectors[] = {
    {RTE_IPV4(161, 142, 100, 80), RTE_IPV4(66, 9, 149, 187), 1766, 2794, 0x51ccc178},
    {RTE_IPV4(65, 69, 140, 83), RTE_IPV4(199, 92, 111, 2), 4739, 14230, 0xc626b0ea},
    {RTE_IPV4(12, 22, 207, 184), RTE_IPV4(24, 19, 198, 95), 38024, 12898, 0x5c2b394a},
    {RTE_IPV4(209, 142, 163, 6), RTE_IPV4(38, 27, 205, 30), 2217, 48228, 0xafc7327f},
    {RTE_IPV4(202, 188, 127, 2), RTE_IPV4(153, 39, 163, 191), 1303, 44251, 0x10e828a2},
};

} // namespace

TEST_CASE("rss: the datasheet's verification suite, through a RETA", "[rss]") {
    // A RETA naming every entry's own index: the queue is the hash's low bits.
    std::vector<uint16_t> ident(128);
    std::iota(ident.begin(), ident.end(), 0);
    // A RETA of 512 entries over 7 queues, as a driver fills it.
    std::vector<uint16_t> seven(512);
    for (size_t i = 0; i < seven.size(); i++)
        seven[i] = static_cast<uint16_t>(i % 7);
    for (const Vector& v : kVectors) {
        INFO("hash " << std::hex << v.hash);
        CHECK(rss_queue(kKey, ident, v.src_ip, v.dst_ip, v.src_port, v.dst_port) == int(v.hash & 127));
        CHECK(rss_queue(kKey, seven, v.src_ip, v.dst_ip, v.src_port, v.dst_port) == int((v.hash & 511) % 7));
    }
    CHECK(rss_queue(kKey, {}, 1, 2, 3, 4) == -1); // RSS off: no prediction
}

TEST_CASE("rss: a session's flows spread over the queues by their UDP source ports", "[rss]") {
    // 64 flows of one sender to one receiver under the verification key, a
    // 128-entry RETA over 4 queues: each queue gets a share, none is empty.
    std::vector<uint16_t> reta(128);
    for (size_t i = 0; i < reta.size(); i++)
        reta[i] = static_cast<uint16_t>(i % 4);
    std::array<int, 4> per{};
    for (uint16_t flow = 0; flow < 64; flow++) {
        const int q = rss_queue(kKey, reta, RTE_IPV4(10, 0, 0, 1), RTE_IPV4(10, 0, 0, 2),
                                tailmark::TxFlow::source_port(flow), tailmark::kDefaultUdpPort);
        REQUIRE(q >= 0);
        REQUIRE(q < 4);
        per[q]++;
    }
    for (int q = 0; q < 4; q++) {
        INFO("queue " << q << ": " << per[q] << " flows");
        CHECK(per[q] >= 8);
        CHECK(per[q] <= 24);
    }
}
