#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include <rte_malloc.h>

#include "fixtures.h"
#include "tailmark/crc32c.h"
#include "tailmark/packet_parser.h"
#include "tailmark/tx_marker.h"

using namespace tailmark;

namespace {

// Parses every packet of a group, reassembles the message by offset, and
// checks the trailer sits whole at the end of the last packet's final segment.
std::vector<uint8_t> reassemble(const std::vector<rte_mbuf*>& pkts, uint32_t msg_id, uint32_t key) {
    REQUIRE(!pkts.empty());
    std::vector<uint8_t> msg;
    ParserConfig cfg;
    for (size_t i = 0; i < pkts.size(); i++) {
        ParsedPacket p;
        REQUIRE(parse_packet(pkts[i], cfg, p) == DropReason::None);
        CHECK(p.hdr.msg_id == msg_id);
        CHECK(p.hdr.pkt_idx == i);
        CHECK(p.is_last() == (i + 1 == pkts.size()));
        auto f = tmtest::flat(pkts[i]);
        if (msg.size() < p.hdr.offset + p.hdr.pay_len)
            msg.resize(p.hdr.offset + p.hdr.pay_len);
        if (p.hdr.pay_len)
            memcpy(msg.data() + p.hdr.offset, f.data() + kFrameOverhead, p.hdr.pay_len);
        if (p.is_last()) {
            CHECK(p.trailer.key == key);
            CHECK(p.trailer.pkt_count == pkts.size());
            CHECK(p.trailer.msg_len == msg.size());
            CHECK(p.trailer.crc32c == crc32c(msg));
            // The trailer is the tail of the final segment, whole.
            const rte_mbuf* seg = rte_pktmbuf_lastseg(const_cast<rte_mbuf*>(pkts[i]));
            REQUIRE(seg->data_len >= kTrailerLen);
            const auto* wt = rte_pktmbuf_mtod_offset(seg, const WireTrailer*, seg->data_len - kTrailerLen);
            CHECK(decode(wt) == p.trailer);
        }
        CHECK(rte_pktmbuf_pkt_len(pkts[i]) ==
              kFrameOverhead + p.hdr.pay_len + (p.is_last() ? kTrailerLen : 0));
    }
    return msg;
}

// A one-packet message of `data` built by tx, its mbuf from the stash or
// (stashed false) from the marker's pool; by build(), or (one given) by
// build_one() from that frame.
rte_mbuf* build_one(const TxMarker& tx, MbufStash& stash, const TxFlow& flow, std::span<const uint8_t> data,
                    uint32_t msg_id, bool stashed, OneFrame* one = nullptr) {
    TxMessage m;
    m.msg_id = msg_id;
    m.bytes = data;
    REQUIRE(tx.prepare_streamed(flow, m));
    REQUIRE(tx.one_packet(flow, m));
    rte_mbuf* out[1];
    stash.open(1);
    if (one != nullptr)
        REQUIRE(tx.build_one(flow, *one, m, out, stashed ? &stash : nullptr) == 1);
    else
        REQUIRE(tx.build(flow, m, 0, 1, out, Flags::None, stashed ? &stash : nullptr) == 1);
    stash.release();
    return out[0];
}

} // namespace

TEST_CASE("copy mode: sizes around the MTU and 16 MiB", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow(3, 0xABCD, 16);
    const uint32_t stride = flow.stride;
    for (uint32_t len : {0u, 1u, stride - kTrailerLen, stride - kTrailerLen + 1, stride, stride + 1, 65536u}) {
        INFO("len " << len);
        auto data = tmtest::pattern(len, len);
        auto pkts = tmtest::build_group(pool.mp, flow, 9, data);
        CHECK(pkts.size() == plan_group(len, stride).pkt_count);
        for (auto* m : pkts)
            CHECK(m->nb_segs == 1);
        CHECK(reassemble(pkts, 9, 0xABCD) == data);
        tmtest::free_all(pkts);
    }
    CHECK(pool.avail() == 8191);
}

TEST_CASE("streamed CRC32C: folded into the copy, right in any build order", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow(4, 0xBEEF, 16);
    const uint32_t stride = flow.stride;
    TxMarker tx(pool.mp, PayloadMode::Copy);
    for (uint32_t len : {0u, 1u, 64u, stride - kTrailerLen, stride, stride + 1, 5 * stride + 7, 100000u}) {
        auto data = tmtest::pattern(len, len + 3);
        // In order, in pieces of 1, 2, 3 ... packets; then the LAST first,
        // then every other one before it (out of order: checksummed whole).
        for (int order = 0; order < 2; order++) {
            INFO("len " << len << (order ? ", LAST first" : ", in order"));
            TxMessage m;
            m.msg_id = 21;
            m.bytes = data;
            REQUIRE(tx.prepare_streamed(flow, m));
            CHECK(m.crc_pending == (len >= TxMarker::kStreamMin)); // short ones: checksummed at once
            const uint32_t n = m.plan.pkt_count;
            std::vector<rte_mbuf*> pkts(n, nullptr);
            if (order == 0) {
                for (uint32_t first = 0, k = 1; first < n; first += k, k++) {
                    k = std::min(k, n - first);
                    REQUIRE(tx.build(flow, m, first, k, pkts.data() + first) == static_cast<int>(k));
                }
            } else {
                REQUIRE(tx.build(flow, m, n - 1, 1, pkts.data() + n - 1) == 1);
                for (uint32_t i = 0; i + 1 < n; i++)
                    REQUIRE(tx.build(flow, m, i, 1, pkts.data() + i) == 1);
            }
            CHECK_FALSE(m.crc_pending);
            CHECK(m.crc32c == crc32c(data));
            CHECK(reassemble(pkts, 21, 0xBEEF) == data); // the trailer carries that CRC
            tmtest::free_all(pkts);
        }
    }
    // Multi-segment packets (a small data room) do not stream: the CRC is
    // taken whole when the first packet is built.
    tmtest::Pool small(1023, 512 + RTE_PKTMBUF_HEADROOM);
    TxMarker txs(small.mp, PayloadMode::Copy);
    auto data = tmtest::pattern(4000, 9);
    TxMessage m;
    m.msg_id = 22;
    m.bytes = data;
    REQUIRE(txs.prepare_streamed(flow, m));
    CHECK_FALSE(m.crc_pending);
    CHECK(m.crc32c == crc32c(data));
    CHECK(pool.avail() == 8191);
}

TEST_CASE("copy mode: a 16 MiB message is 11523 packets and reassembles", "[tx]") {
    tmtest::Pool pool(16383);
    TxFlow flow = tmtest::make_flow();
    auto data = tmtest::pattern(16u << 20, 77);
    auto pkts = tmtest::build_group(pool.mp, flow, 1, data);
    CHECK(pkts.size() == 11523);
    CHECK(reassemble(pkts, 1, 0xC0FFEE) == data);
    tmtest::free_all(pkts);
    CHECK(pool.avail() == 16383);
}

TEST_CASE("copy mode: multi-segment packets keep the trailer whole in the final segment", "[tx]") {
    // 256-byte data rooms: a 1500-byte frame needs 6 segments.
    tmtest::Pool pool(4095, 256 + RTE_PKTMBUF_HEADROOM);
    TxFlow flow = tmtest::make_flow();
    for (uint32_t len : {0u, 100u, 198u, 199u, 200u, 1424u, 5000u, 256u * 7}) {
        INFO("len " << len);
        auto data = tmtest::pattern(len, 3);
        auto pkts = tmtest::build_group(pool.mp, flow, 2, data);
        bool chained = false;
        for (auto* m : pkts) {
            chained |= m->nb_segs > 1;
            uint32_t segs = 0, bytes = 0;
            for (rte_mbuf* s = m; s; s = s->next) {
                segs++;
                bytes += s->data_len;
            }
            CHECK(segs == m->nb_segs);
            CHECK(bytes == m->pkt_len);
        }
        if (len > 200)
            CHECK(chained);
        CHECK(reassemble(pkts, 2, 0xC0FFEE) == data);
        tmtest::free_all(pkts);
    }
    CHECK(pool.avail() == 4095);
}

TEST_CASE("zero-copy: extbuf payload segments over the caller's bytes", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow();
    auto data = tmtest::pattern(10000, 11);
    bool freed = false;
    rte_mbuf_ext_shared_info shinfo{};
    shinfo.free_cb = [](void*, void* opaque) { *static_cast<bool*>(opaque) = true; };
    shinfo.fcb_opaque = &freed;
    rte_mbuf_ext_refcnt_set(&shinfo, 1); // the caller's own reference

    TxMarker tx(pool.mp, PayloadMode::ZeroCopy);
    TxMessage m;
    m.msg_id = 4;
    m.bytes = data;
    m.shinfo = &shinfo;
    REQUIRE(tx.prepare(flow, m));
    std::vector<rte_mbuf*> pkts(m.plan.pkt_count);
    REQUIRE(tx.build(flow, m, 0, m.plan.pkt_count, pkts.data()) == static_cast<int>(m.plan.pkt_count));
    CHECK(rte_mbuf_ext_refcnt_read(&shinfo) == 1 + m.plan.pkt_count);
    for (size_t i = 0; i < pkts.size(); i++) {
        rte_mbuf* pay = pkts[i]->next;
        REQUIRE(pay != nullptr);
        CHECK(RTE_MBUF_HAS_EXTBUF(pay));
        CHECK(rte_pktmbuf_mtod(pay, const uint8_t*) == data.data() + m.plan.offset_of(i));
        if (i + 1 == pkts.size())
            CHECK(pkts[i]->nb_segs == 3); // header, payload, trailer
        else
            CHECK(pkts[i]->nb_segs == 2);
    }
    CHECK(reassemble(pkts, 4, 0xC0FFEE) == data);
    tmtest::free_all(pkts);
    CHECK(rte_mbuf_ext_refcnt_read(&shinfo) == 1);
    CHECK_FALSE(freed);
    CHECK(pool.avail() == 8191);
}

TEST_CASE("a message given as an mbuf chain, copied and referenced", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow();
    auto data = tmtest::pattern(1000 + 2000 + 333, 21);
    auto make_chain = [&]() {
        rte_mbuf* a = tmtest::mbuf_of(pool.mp, std::vector<uint8_t>(data.begin(), data.begin() + 1000));
        rte_mbuf* b = tmtest::mbuf_of(pool.mp, std::vector<uint8_t>(data.begin() + 1000, data.begin() + 3000));
        rte_mbuf* c = tmtest::mbuf_of(pool.mp, std::vector<uint8_t>(data.begin() + 3000, data.end()));
        REQUIRE(rte_pktmbuf_chain(a, b) == 0);
        REQUIRE(rte_pktmbuf_chain(a, c) == 0);
        return a;
    };
    for (PayloadMode mode : {PayloadMode::Copy}) {
        rte_mbuf* chain = make_chain();
        TxMarker tx(pool.mp, mode);
        TxMessage m;
        m.msg_id = 8;
        m.chain = chain;
        REQUIRE(tx.prepare(flow, m));
        CHECK(m.crc32c == crc32c(data));
        std::vector<rte_mbuf*> pkts(m.plan.pkt_count);
        REQUIRE(tx.build(flow, m, 0, m.plan.pkt_count, pkts.data()) == static_cast<int>(m.plan.pkt_count));
        rte_pktmbuf_free(chain); // the packets keep what they reference alive
        CHECK(reassemble(pkts, 8, 0xC0FFEE) == data);
        if (mode == PayloadMode::ZeroCopy)
            CHECK(RTE_MBUF_CLONED(pkts[0]->next));
        tmtest::free_all(pkts);
        CHECK(pool.avail() == 8191);
    }
}

TEST_CASE("allocation failure leaks nothing and says so", "[tx]") {
    tmtest::Pool pool(15);
    TxFlow flow = tmtest::make_flow();
    auto data = tmtest::pattern(64 * 1456, 1);
    TxMarker tx(pool.mp, PayloadMode::Copy);
    TxMessage m;
    m.bytes = data;
    REQUIRE(tx.prepare(flow, m));
    rte_mbuf* out[TxMarker::kMaxBurst];
    CHECK(tx.build(flow, m, 0, 16, out) == -ENOMEM);
    CHECK(pool.avail() == 15);
    CHECK(tx.build(flow, m, 0, 15, out) == 15);
    CHECK(pool.avail() == 0);
    rte_pktmbuf_free_bulk(out, 15);
    CHECK(pool.avail() == 15);
}

TEST_CASE("build refuses ranges outside the group", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow();
    auto data = tmtest::pattern(3000, 1);
    TxMarker tx(pool.mp, PayloadMode::Copy);
    TxMessage m;
    m.bytes = data;
    REQUIRE(tx.prepare(flow, m));
    rte_mbuf* out[TxMarker::kMaxBurst];
    CHECK(tx.build(flow, m, 0, 4, out) == -EINVAL);
    CHECK(tx.build(flow, m, 3, 1, out) == -EINVAL);
    CHECK(tx.build(flow, m, 0, 0, out) == -EINVAL);
    CHECK(pool.avail() == 8191);
    TxMessage zc;
    zc.bytes = data; // zero copy of raw bytes needs the caller's shared info
    TxMarker ztx(pool.mp, PayloadMode::ZeroCopy);
    REQUIRE(ztx.prepare(flow, zc));
    CHECK(ztx.build(flow, zc, 0, 1, out) == -EINVAL);
}

TEST_CASE("flow template: UDP source port is stable per flow, IPv4 checksum valid", "[tx]") {
    CHECK(TxFlow::source_port(1) == TxFlow::source_port(1));
    CHECK(TxFlow::source_port(1) != TxFlow::source_port(2));
    CHECK(TxFlow::source_port(0) >= 49152);
    TxFlow f;
    CHECK_FALSE(TxFlow::make(f, 1, 1, 3, 1500, tmtest::test_addr())); // ring not a power of two
    CHECK_FALSE(TxFlow::make(f, 1, 1, 4, 60, tmtest::test_addr()));   // MTU too small
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow();
    for (uint32_t len : {0u, 1u, 777u, 1424u}) {
        auto pkts = tmtest::build_group(pool.mp, flow, 1, tmtest::pattern(len, 1));
        auto fr = tmtest::flat(pkts[0]);
        CHECK(rte_ipv4_cksum(tmtest::ip_of(fr)) == 0);
        CHECK((tmtest::ip_of(fr)->fragment_offset & RTE_BE16(RTE_IPV4_HDR_DF_FLAG)) != 0);
        tmtest::free_all(pkts);
    }
}

TEST_CASE("send stamp: every packet's IPv4 ID, the IPv4 checksum still right", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow();
    TxMarker mk(pool.mp, PayloadMode::Copy);
    auto bytes = tmtest::pattern(5000, 3);
    for (uint16_t stamp : {uint16_t(0), uint16_t(1), uint16_t(0xBEEF), uint16_t(0xFFFF)}) {
        INFO("stamp " << stamp);
        TxMessage msg;
        msg.msg_id = 1;
        msg.bytes = bytes;
        msg.stamp = rte_cpu_to_be_16(stamp);
        REQUIRE(mk.prepare(flow, msg));
        std::vector<rte_mbuf*> pkts(msg.plan.pkt_count);
        REQUIRE(mk.build(flow, msg, 0, msg.plan.pkt_count, pkts.data()) == static_cast<int>(pkts.size()));
        for (rte_mbuf* m : pkts) {
            auto fr = tmtest::flat(m);
            CHECK(rte_be_to_cpu_16(tmtest::ip_of(fr)->packet_id) == stamp);
            CHECK(rte_ipv4_cksum(tmtest::ip_of(fr)) == 0);
            ParsedPacket p;
            REQUIRE(parse_packet(m, ParserConfig{}, p) == DropReason::None);
            CHECK(rte_be_to_cpu_16(p.ip_id) == stamp);
        }
        tmtest::free_all(pkts);
    }
}

TEST_CASE("UDP checksum: software fills it whole; offload leaves the pseudo-header sum and the request", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow();
    auto bytes = tmtest::pattern(3000, 9); // 3 packets, the last with the trailer
    for (PayloadMode mode : {PayloadMode::Copy}) {
        INFO("mode " << int(mode));
        TxMarker sw(pool.mp, mode), nic(pool.mp, mode);
        sw.set_udp_checksum(true);
        nic.set_udp_checksum(true, true);
        TxMessage a, b;
        a.msg_id = b.msg_id = 4;
        a.bytes = b.bytes = bytes;
        REQUIRE(sw.prepare(flow, a));
        REQUIRE(nic.prepare(flow, b));
        std::vector<rte_mbuf*> pa(a.plan.pkt_count), pb(b.plan.pkt_count);
        REQUIRE(sw.build(flow, a, 0, a.plan.pkt_count, pa.data()) == 3);
        REQUIRE(nic.build(flow, b, 0, b.plan.pkt_count, pb.data()) == 3);
        ParserConfig verify;
        verify.verify_udp_checksum = true;
        for (size_t i = 0; i < 3; i++) {
            auto fa = tmtest::flat(pa[i]);
            auto* ipa = tmtest::ip_of(fa);
            auto* udpa = reinterpret_cast<rte_udp_hdr*>(fa.data() + kEthLen + kIpLen);
            CHECK(udpa->dgram_cksum != 0);
            CHECK(rte_ipv4_udptcp_cksum_verify(ipa, udpa) == 0);
            CHECK((pa[i]->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM) == 0);
            ParsedPacket p;
            CHECK(parse_packet(pa[i], verify, p) == DropReason::None);
            // Offload: the request, the lengths, and the pseudo-header sum the NIC completes.
            CHECK((pb[i]->ol_flags & (RTE_MBUF_F_TX_UDP_CKSUM | RTE_MBUF_F_TX_IPV4)) ==
                  (RTE_MBUF_F_TX_UDP_CKSUM | RTE_MBUF_F_TX_IPV4));
            CHECK(pb[i]->l2_len == kEthLen);
            CHECK(pb[i]->l3_len == kIpLen);
            auto fb = tmtest::flat(pb[i]);
            auto* ipb = tmtest::ip_of(fb);
            auto* udpb = reinterpret_cast<rte_udp_hdr*>(fb.data() + kEthLen + kIpLen);
            CHECK(udpb->dgram_cksum == rte_ipv4_phdr_cksum(ipb, pb[i]->ol_flags));
            // What the NIC then writes is what software wrote.
            udpb->dgram_cksum = 0;
            CHECK(rte_ipv4_udptcp_cksum(ipb, udpb) == udpa->dgram_cksum);
            // A flipped payload bit: software verification drops it.
            fa[kFrameOverhead + 1] ^= 0x10;
            rte_mbuf* bad = tmtest::mbuf_of(pool.mp, fa);
            CHECK(parse_packet(bad, verify, p) == DropReason::UdpBadChecksum);
            rte_pktmbuf_free(bad);
        }
        tmtest::free_all(pa);
        tmtest::free_all(pb);
    }
}

// build_single takes raw mbufs from the pool and sets them up itself. An
// mbuf a receiver freed keeps its rx fields (flags, packet type, VLAN, its
// data offset, lengths): none of it may reach a built packet.
TEST_CASE("single-segment packets: a reused mbuf carries nothing of its last use", "[tx]") {
    tmtest::Pool pool(1); // one mbuf, no cache: the dirty one comes back
    TxFlow flow = tmtest::make_flow(2, 0x77, 16);
    rte_mbuf* d = rte_pktmbuf_alloc(pool.mp);
    REQUIRE(d != nullptr);
    d->ol_flags = RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_IP_CKSUM_BAD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    d->packet_type = RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4 | RTE_PTYPE_L4_UDP;
    d->vlan_tci = 7;
    d->vlan_tci_outer = 9;
    d->data_off = 17;
    d->data_len = 300;
    d->pkt_len = 300;
    d->port = 3;
    d->tx_offload = ~0ull;
    d->hash.rss = 0xdeadbeef;
    rte_pktmbuf_free(d);

    auto data = tmtest::pattern(64, 5);
    TxMarker tx(pool.mp, PayloadMode::Copy);
    MbufStash stash(pool.mp);
    OneFrame one;
    for (int round = 0; round < 4; round++) {
        const bool stashed = round & 1;
        OneFrame* by_one = round >= 2 ? &one : nullptr; // build(), then build_one()
        INFO("stash " << stashed << (by_one ? ", build_one" : ", build"));
        rte_mbuf* p = build_one(tx, stash, flow, data, 4, stashed, by_one);
        CHECK(p == d);
        CHECK(p->ol_flags == 0);
        CHECK(p->packet_type == 0);
        CHECK(p->vlan_tci == 0);
        CHECK(p->vlan_tci_outer == 0);
        CHECK(p->data_off == RTE_PKTMBUF_HEADROOM);
        CHECK(p->port == RTE_MBUF_PORT_INVALID);
        CHECK(p->nb_segs == 1);
        CHECK(p->next == nullptr);
        CHECK(rte_mbuf_refcnt_read(p) == 1);
        CHECK(p->l2_len == kEthLen);
        CHECK(p->l3_len == kIpLen);
        CHECK(p->l4_len == 0);
        CHECK(p->pkt_len == kFrameOverhead + 64 + kTrailerLen);
        CHECK(p->data_len == p->pkt_len);
        CHECK(rte_pktmbuf_mtod(p, uint8_t*) == static_cast<uint8_t*>(p->buf_addr) + RTE_PKTMBUF_HEADROOM);
        CHECK(reassemble({p}, 4, flow.key) == data);
        rte_pktmbuf_free(p);
        d->ol_flags = RTE_MBUF_F_RX_VLAN; // dirty again for the next round
        d->packet_type = RTE_PTYPE_L2_ETHER;
        d->vlan_tci = 7;
        d->vlan_tci_outer = 9;
        d->data_off = 17;
        d->data_len = 300;
        d->pkt_len = 300;
        d->port = 3;
        d->tx_offload = ~0ull;
    }
    CHECK(pool.avail() == 1);
}

// A round's stash takes what the round may send at once and gives back the
// rest: the pool holds every mbuf again after release(), whatever was built.
TEST_CASE("mbuf stash: one allocation per round, the rest given back", "[tx]") {
    tmtest::Pool pool(100);
    TxFlow flow = tmtest::make_flow();
    auto data = tmtest::pattern(64, 9);
    TxMarker tx(pool.mp, PayloadMode::Copy);
    MbufStash stash(pool.mp);
    std::vector<rte_mbuf*> sent;
    stash.open(32);
    for (uint32_t i = 0; i < 5; i++) {
        TxMessage m;
        m.msg_id = i;
        m.bytes = data;
        REQUIRE(tx.prepare_streamed(flow, m));
        rte_mbuf* out[1];
        REQUIRE(tx.build(flow, m, 0, 1, out, Flags::None, &stash) == 1);
        sent.push_back(out[0]);
        CHECK(pool.avail() == 100 - 32); // the round's 32, taken at the first build
    }
    stash.release();
    CHECK(pool.avail() == 95);
    for (uint32_t i = 0; i < 5; i++)
        CHECK(reassemble({sent[i]}, i, flow.key) == data);
    tmtest::free_all(sent);
    CHECK(pool.avail() == 100);

    // Fewer left in the pool than the round wants: it takes what the build needs.
    tmtest::Pool small(3);
    TxMarker tx3(small.mp, PayloadMode::Copy);
    MbufStash s3(small.mp);
    s3.open(32);
    TxMessage m;
    m.bytes = data;
    REQUIRE(tx3.prepare_streamed(flow, m));
    rte_mbuf* out[4];
    REQUIRE(tx3.build(flow, m, 0, 1, out, Flags::None, &s3) == 1);
    CHECK(small.avail() == 2);
    rte_pktmbuf_free(out[0]);
    s3.release();
    CHECK(small.avail() == 3);
}

// An mbuf that last carried an application's bytes as an external buffer
// (zero copy) comes back to the pool detached: build_single writes into its
// own buffer, at the fixed offset it assumes, never into the old bytes.
TEST_CASE("single-segment packets: an mbuf that held an external buffer is written in its own", "[tx]") {
    tmtest::Pool pool(1);
    TxFlow flow = tmtest::make_flow(4, 0x99, 16);
    std::vector<uint8_t> ext(256, 0x5A);
    int freed = 0;
    rte_mbuf_ext_shared_info sh{};
    sh.free_cb = [](void*, void* opaque) { ++*static_cast<int*>(opaque); };
    sh.fcb_opaque = &freed;
    rte_mbuf_ext_refcnt_set(&sh, 1);
    rte_mbuf* d = rte_pktmbuf_alloc(pool.mp);
    REQUIRE(d != nullptr);
    void* own = d->buf_addr;
    rte_pktmbuf_attach_extbuf(d, ext.data(), rte_mem_virt2iova(ext.data()), static_cast<uint16_t>(ext.size()), &sh);
    d->data_len = 100;
    d->pkt_len = 100;
    REQUIRE(RTE_MBUF_HAS_EXTBUF(d));
    rte_pktmbuf_free(d);
    CHECK(freed == 1);

    auto data = tmtest::pattern(64, 3);
    TxMarker tx(pool.mp, PayloadMode::Copy);
    TxMessage m;
    m.msg_id = 1;
    m.bytes = data;
    REQUIRE(tx.prepare_streamed(flow, m));
    rte_mbuf* out[1];
    REQUIRE(tx.build(flow, m, 0, 1, out) == 1);
    rte_mbuf* p = out[0];
    CHECK(p == d);
    CHECK(p->buf_addr == own);
    CHECK((p->ol_flags & RTE_MBUF_F_EXTERNAL) == 0);
    CHECK(rte_pktmbuf_mtod(p, uint8_t*) ==
          reinterpret_cast<uint8_t*>(p) + sizeof(rte_mbuf) + rte_pktmbuf_priv_size(pool.mp) + RTE_PKTMBUF_HEADROOM);
    CHECK(reassemble({p}, 1, flow.key) == data);
    CHECK(std::all_of(ext.begin(), ext.end(), [](uint8_t b) { return b == 0x5A; }));
    rte_pktmbuf_free(p);
    CHECK(pool.avail() == 1);
}

// A pool of pinned external buffers (rte_pktmbuf_pool_create_extbuf): each
// mbuf's data lives in the caller's memory for good. build_single writes
// there (through buf_addr) and keeps the mbuf marked external, as
// rte_pktmbuf_reset does, so the free does not take it for a direct one.
TEST_CASE("single-segment packets: a pool of pinned external buffers", "[tx]") {
    constexpr unsigned kN = 8;
    constexpr uint16_t kElt = 2048;
    auto* mem = static_cast<uint8_t*>(rte_malloc("tm_test_pinned", size_t(kN) * kElt, 4096));
    REQUIRE(mem != nullptr);
    rte_pktmbuf_extmem ext{};
    ext.buf_ptr = mem;
    ext.buf_iova = rte_malloc_virt2iova(mem);
    ext.buf_len = size_t(kN) * kElt;
    ext.elt_size = kElt;
    rte_mempool* mp = rte_pktmbuf_pool_create_extbuf(tmtest::unique_name("pin").c_str(), kN, 0, 0, kElt,
                                                     SOCKET_ID_ANY, &ext, 1);
    REQUIRE(mp != nullptr);
    TxFlow flow = tmtest::make_flow(5, 0x31, 16);
    auto data = tmtest::pattern(64, 21);
    TxMarker tx(mp, PayloadMode::Copy);
    MbufStash stash(mp);
    OneFrame one;
    for (int round = 0; round < 4; round++) {
        const bool stashed = round & 1;
        OneFrame* by_one = round >= 2 ? &one : nullptr; // build(), then build_one()
        INFO("stash " << stashed << (by_one ? ", build_one" : ", build"));
        rte_mbuf* p = build_one(tx, stash, flow, data, 2, stashed, by_one);
        CHECK((p->ol_flags & RTE_MBUF_F_EXTERNAL) != 0);
        CHECK(RTE_MBUF_HAS_PINNED_EXTBUF(p));
        uint8_t* b = static_cast<uint8_t*>(p->buf_addr);
        CHECK(b >= mem);
        CHECK(b < mem + size_t(kN) * kElt);
        CHECK(rte_pktmbuf_mtod(p, uint8_t*) == b + RTE_PKTMBUF_HEADROOM);
        CHECK(reassemble({p}, 2, flow.key) == data);
        rte_pktmbuf_free(p);
        CHECK(rte_mempool_avail_count(mp) == kN);
    }
    rte_mempool_free(mp);
    rte_free(mem);
}

// build_one: the same packet, byte for byte and field for field, as
// build(flow, m, 0, 1) of a one-packet message, with or without the stash;
// one_packet() says which messages it may build. One OneFrame serves every
// length in turn (remade when it changes) and two markers (remade for each).
TEST_CASE("build_one: a one-packet message as build makes it", "[tx]") {
    tmtest::Pool pool;
    TxFlow flow = tmtest::make_flow(5, 0xCAFE, 64);
    TxMarker summed(pool.mp, PayloadMode::Copy);
    summed.set_udp_checksum(true);
    TxMarker plain(pool.mp, PayloadMode::Copy);
    MbufStash stash(pool.mp);
    OneFrame one;
    const uint32_t fits = flow.stride - kTrailerLen; // the most a one-packet message carries
    uint32_t k = 0;
    for (const TxMarker* tx : {&summed, &plain}) {
        for (uint32_t len : {0u, 1u, 31u, 32u, 33u, 64u, 64u, 63u, 65u, 255u, 64u, 256u, 511u, 512u, fits}) {
            for (bool stashed : {false, true}) {
                k++;
                INFO("len " << len << (stashed ? ", stash" : ", pool") << (tx == &plain ? ", no UDP checksum" : ""));
                auto data = tmtest::pattern(len, len + 11);
                TxMessage a, b;
                // msg_ids across 2^32 and the ring's wrap; a new stamp each time
                a.msg_id = b.msg_id = 0xFFFFFFF0u + k * 7;
                a.bytes = b.bytes = data;
                a.stamp = b.stamp = static_cast<uint16_t>(0x1234 + k * 0x0101);
                REQUIRE(tx->prepare_streamed(flow, a));
                REQUIRE(tx->prepare_streamed(flow, b));
                // Short messages are checksummed by prepare_streamed; longer ones
                // stream the CRC into the copy, which build_one does not do.
                CHECK(tx->one_packet(flow, a) == (len < TxMarker::kStreamMin));
                if (!tx->one_packet(flow, a))
                    continue;
                rte_mbuf* pa[1];
                rte_mbuf* pb[1];
                stash.open(2);
                REQUIRE(tx->build(flow, a, 0, 1, pa, Flags::None, stashed ? &stash : nullptr) == 1);
                REQUIRE(tx->build_one(flow, one, b, pb, stashed ? &stash : nullptr) == 1);
                stash.release();
                CHECK(tmtest::flat(pa[0]) == tmtest::flat(pb[0]));
                CHECK(pa[0]->data_off == pb[0]->data_off);
                CHECK(rte_mbuf_refcnt_read(pb[0]) == 1);
                CHECK(pa[0]->nb_segs == pb[0]->nb_segs);
                CHECK(pa[0]->port == pb[0]->port);
                CHECK(pa[0]->ol_flags == pb[0]->ol_flags);
                CHECK(pa[0]->packet_type == pb[0]->packet_type);
                CHECK(pa[0]->pkt_len == pb[0]->pkt_len);
                CHECK(pa[0]->data_len == pb[0]->data_len);
                CHECK(pa[0]->vlan_tci == pb[0]->vlan_tci);
                CHECK(pa[0]->vlan_tci_outer == pb[0]->vlan_tci_outer);
                CHECK(pa[0]->tx_offload == pb[0]->tx_offload);
                CHECK(pb[0]->next == nullptr);
                CHECK(reassemble({pb[0]}, b.msg_id, 0xCAFE) == data);
                ParsedPacket pp;
                REQUIRE(parse_packet(pb[0], ParserConfig{}, pp) == DropReason::None);
                CHECK(pp.trailer.slot == (b.msg_id & flow.ring_mask));
                CHECK(pp.trailer.flag == flag_for(b.msg_id));
                rte_pktmbuf_free(pa[0]);
                rte_pktmbuf_free(pb[0]);
            }
        }
    }
    // Two packets: not one.
    auto two = tmtest::pattern(fits + 1, 3);
    TxMessage m;
    m.bytes = two;
    REQUIRE(plain.prepare_streamed(flow, m));
    CHECK(m.plan.pkt_count == 2);
    CHECK_FALSE(plain.one_packet(flow, m));
    CHECK(pool.avail() == 8191);
}

// Sender::one_run asks a batched source for messages up to one_max(), and
// counts on prepare_one taking every one of them: the two must agree, for
// any flow and pool (one_max repeats prepare_one's message-independent
// conditions).
TEST_CASE("one_max: exactly the lengths prepare_one takes", "[tx]") {
    for (uint16_t dataroom : {uint16_t(RTE_MBUF_DEFAULT_BUF_SIZE), uint16_t(RTE_PKTMBUF_HEADROOM + 600)}) {
        tmtest::Pool pool(64, dataroom);
        for (uint32_t mtu : {576u, 1500u, 9000u}) {
            const TxFlow flow = tmtest::make_flow(3, 0x51, 16, mtu);
            for (PayloadMode mode : {PayloadMode::Copy, PayloadMode::ZeroCopy}) {
                TxMarker mk(pool.mp, mode);
                uint64_t max_len = 0;
                const bool any = mk.one_max(flow, max_len);
                INFO("dataroom " << dataroom << ", mtu " << mtu << ", zero copy " << (mode == PayloadMode::ZeroCopy)
                                 << ", one_max " << any << " " << max_len);
                const auto bytes = tmtest::pattern(flow.stride + 64, 1);
                uint32_t taken = 0;
                for (uint32_t len = 0; len <= flow.stride + 64; len++) {
                    TxMessage tm;
                    tm.bytes = {bytes.data(), len};
                    const bool ok = mk.prepare_one(flow, tm);
                    taken += ok;
                    if (ok != (any && len <= max_len)) {
                        INFO("len " << len);
                        CHECK(ok == (any && len <= max_len));
                    }
                }
                CHECK(taken == (any ? max_len + 1 : 0));
            }
        }
    }
}
