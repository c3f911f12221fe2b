// Shared helpers for the unit tests: real mempools and real mbufs.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>

#include "tailmark/completion_ring.h"
#include "tailmark/tx_marker.h"
#include "tailmark/wire.h"

namespace tmtest {

inline std::string unique_name(const char* base) {
    static std::atomic<unsigned> n{0};
    return std::string(base) + "_" + std::to_string(n++);
}

// RAII owner of a pktmbuf pool.
struct Pool {
    rte_mempool* mp = nullptr;
    explicit Pool(unsigned n = 8191, uint16_t dataroom = RTE_MBUF_DEFAULT_BUF_SIZE) {
        mp = rte_pktmbuf_pool_create(unique_name("tp").c_str(), n, n >= 512 ? 256 : 0, 0, dataroom,
                                     SOCKET_ID_ANY);
    }
    ~Pool() { rte_mempool_free(mp); }
    unsigned avail() const { return rte_mempool_avail_count(mp); }
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;
};

// An mbuf dynamic field of a uint64_t for the arrival floor the Receiver
// writes and the Sender reads (their configs' arrival_field; the engine
// gives them the rx TSC field): its offset, or -1.
inline int arrival_field() {
    rte_mbuf_dynfield desc{};
    snprintf(desc.name, sizeof(desc.name), "tmtest_arrival");
    desc.size = sizeof(uint64_t);
    desc.align = alignof(uint64_t);
    return rte_mbuf_dynfield_register(&desc);
}

inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[i] = static_cast<uint8_t>(x);
    }
    return v;
}

inline tailmark::Addressing test_addr() {
    tailmark::Addressing a;
    a.src_mac = {{0x02, 0, 0, 0, 0, 1}};
    a.dst_mac = {{0x02, 0, 0, 0, 0, 2}};
    a.src_ip = RTE_IPV4(198, 18, 0, 1);
    a.dst_ip = RTE_IPV4(198, 18, 0, 2);
    return a;
}

inline tailmark::TxFlow make_flow(uint16_t id = 7, uint32_t key = 0xC0FFEE, uint32_t ring = 8,
                                  uint32_t mtu = 1500) {
    tailmark::TxFlow f;
    bool ok = tailmark::TxFlow::make(f, id, key, ring, mtu, test_addr());
    if (!ok)
        throw std::runtime_error("TxFlow::make");
    return f;
}

// Builds a whole group (all packets) of a message in copy mode.
inline std::vector<rte_mbuf*> build_group(rte_mempool* mp, const tailmark::TxFlow& f,
                                          uint32_t msg_id, const std::vector<uint8_t>& bytes,
                                          tailmark::PayloadMode mode = tailmark::PayloadMode::Copy) {
    tailmark::TxMarker tx(mp, mode);
    tailmark::TxMessage m;
    m.msg_id = msg_id;
    m.bytes = bytes;
    if (!tx.prepare(f, m))
        throw std::runtime_error("prepare");
    std::vector<rte_mbuf*> out(m.plan.pkt_count);
    for (uint32_t first = 0; first < m.plan.pkt_count;) {
        uint32_t n = std::min<uint32_t>(tailmark::TxMarker::kMaxBurst, m.plan.pkt_count - first);
        int r = tx.build(f, m, first, n, out.data() + first);
        if (r != static_cast<int>(n))
            throw std::runtime_error("build: " + std::to_string(r));
        first += n;
    }
    return out;
}

inline void free_all(std::vector<rte_mbuf*>& v) {
    for (rte_mbuf* m : v)
        rte_pktmbuf_free(m);
    v.clear();
}

// Flat copy of a (possibly chained) packet.
inline std::vector<uint8_t> flat(const rte_mbuf* m) {
    std::vector<uint8_t> v(rte_pktmbuf_pkt_len(m));
    const void* p = rte_pktmbuf_read(m, 0, v.size(), v.data());
    if (p != v.data())
        memcpy(v.data(), p, v.size());
    return v;
}

// A single-segment mbuf holding exactly `bytes`.
inline rte_mbuf* mbuf_of(rte_mempool* mp, const std::vector<uint8_t>& bytes) {
    rte_mbuf* m = rte_pktmbuf_alloc(mp);
    if (m == nullptr)
        throw std::runtime_error("alloc");
    char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(bytes.size()));
    if (p == nullptr && !bytes.empty())
        throw std::runtime_error("append");
    if (!bytes.empty())
        memcpy(p, bytes.data(), bytes.size());
    return m;
}

// Field accessors into a flat frame, for mutation tests.
inline rte_ipv4_hdr* ip_of(std::vector<uint8_t>& f) {
    return reinterpret_cast<rte_ipv4_hdr*>(f.data() + tailmark::kEthLen);
}
inline void fix_ip_checksum(std::vector<uint8_t>& f) {
    rte_ipv4_hdr* ip = ip_of(f);
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
}
inline tailmark::WireHeader* hdr_of(std::vector<uint8_t>& f) {
    return reinterpret_cast<tailmark::WireHeader*>(f.data() + tailmark::kEthLen + tailmark::kIpLen +
                                                   tailmark::kUdpLen);
}
inline tailmark::WireTrailer* trailer_of(std::vector<uint8_t>& f) {
    const rte_ipv4_hdr* ip = ip_of(f);
    size_t end = tailmark::kEthLen + rte_be_to_cpu_16(ip->total_length);
    return reinterpret_cast<tailmark::WireTrailer*>(f.data() + end - tailmark::kTrailerLen);
}

// RAII completion ring with a unique flow id per test.
inline std::unique_ptr<tailmark::CompletionRing> make_ring(uint16_t flow, uint32_t size,
                                                           uint64_t region) {
    return tailmark::CompletionRing::create(flow, size, region, SOCKET_ID_ANY);
}

} // namespace tmtest
