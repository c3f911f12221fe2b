#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

#include <rte_cycles.h>
#include <rte_ring.h>

#include "fixtures.h"
#include "tailmark/crc32c.h"
#include "tailmark/rx_placer.h"

using namespace tailmark;
using R = DropReason;

namespace {

uint16_t next_flow_id() {
    static uint16_t id = 100;
    return id++;
}

// A flow end to end in one place: sender template, receiver ring and placer.
struct Rig {
    tmtest::Pool pool{16383};
    uint16_t flow_id = next_flow_id();
    uint32_t key = 0x5EC2E7;
    TxFlow flow;
    std::unique_ptr<CompletionRing> ring;
    RxPlacer placer{ParserConfig{}, SOCKET_ID_ANY};

    explicit Rig(uint32_t ring_size = 8, uint64_t region = 64 * 1024) {
        flow = tmtest::make_flow(flow_id, key, ring_size);
        ring = tmtest::make_ring(flow_id, ring_size, region);
        REQUIRE(ring);
        REQUIRE(placer.add_flow(flow_id, ring.get(), key, flow.stride));
    }
    std::vector<rte_mbuf*> group(uint32_t msg_id, const std::vector<uint8_t>& data) {
        return tmtest::build_group(pool.mp, flow, msg_id, data);
    }
    R feed(rte_mbuf* m) { return placer.process(m, rte_rdtsc()); }
    R feed_bytes(const std::vector<uint8_t>& f) {
        rte_mbuf* m = tmtest::mbuf_of(pool.mp, f);
        R r = feed(m);
        rte_pktmbuf_free(m);
        return r;
    }
    const RxCounters& ctr() const { return placer.counters(); }
    uint64_t drops(R r) const { return ctr().drops[index(r)]; }
    bool completed(uint32_t msg_id) const { return ring->poll(msg_id) != nullptr; }
    std::vector<uint8_t> message(uint32_t msg_id) const {
        auto s = ring->message(ring->poll(msg_id));
        return {s.begin(), s.end()};
    }
};

} // namespace

TEST_CASE("a single-packet message completes once, with its metadata", "[rx]") {
    Rig rig;
    auto data = tmtest::pattern(500, 1);
    auto pkts = rig.group(0, data);
    REQUIRE(pkts.size() == 1);
    CHECK_FALSE(rig.completed(0));
    CHECK(rig.feed(pkts[0]) == R::None);
    REQUIRE(rig.completed(0));
    const CompletionSlot* s = rig.ring->poll(0);
    CHECK(s->flag == 1);
    CHECK(s->msg_id == 0);
    CHECK(s->msg_len == 500);
    CHECK(s->pkt_count == 1);
    CHECK(s->crc32c == crc32c(data));
    CHECK(s->flow == rig.flow_id);
    CHECK(rig.message(0) == data);
    CHECK(rig.ctr().completions == 1);
    // The same packet again: the message is done.
    CHECK(rig.feed(pkts[0]) == R::AlreadyCompleted);
    CHECK(rig.ctr().completions == 1);
    tmtest::free_all(pkts);
}

TEST_CASE("messages of 0 B, 1 B, one MTU, one byte over", "[rx]") {
    Rig rig;
    const uint32_t stride = rig.flow.stride;
    uint32_t id = 0;
    for (uint32_t len : {0u, 1u, stride - kTrailerLen, stride - kTrailerLen + 1, stride, stride + 1}) {
        INFO("len " << len);
        auto data = tmtest::pattern(len, len + 1);
        auto pkts = rig.group(id, data);
        for (auto* m : pkts)
            CHECK(rig.feed(m) == R::None);
        REQUIRE(rig.completed(id));
        CHECK(rig.message(id) == data);
        REQUIRE(rig.ring->release(id));
        tmtest::free_all(pkts);
        id++;
    }
    CHECK(rig.ctr().completions == 6);
    CHECK(rig.ctr().dropped() == 0);
}

TEST_CASE("a 16 MiB message completes with every byte", "[rx]") {
    Rig rig(1, 16u << 20);
    auto data = tmtest::pattern(16u << 20, 9);
    auto pkts = rig.group(0, data);
    REQUIRE(pkts.size() == 11523);
    // Reverse order: the LAST first, every other packet after it.
    for (size_t i = pkts.size(); i-- > 0;) {
        CHECK_FALSE(rig.completed(0));
        REQUIRE(rig.feed(pkts[i]) == R::None);
    }
    REQUIRE(rig.completed(0));
    CHECK(rig.message(0) == data);
    CHECK(rig.ctr().completions == 1);
    CHECK(rig.ctr().placed == 11523);
    tmtest::free_all(pkts);
}

TEST_CASE("every arrival order of a 4-packet group, plus duplicates", "[rx]") {
    Rig rig(8);
    std::vector<int> order = {0, 1, 2, 3};
    uint32_t msg_id = 0;
    do {
        auto data = tmtest::pattern(3 * rig.flow.stride + 10, msg_id);
        auto pkts = rig.group(msg_id, data);
        REQUIRE(pkts.size() == 4);
        for (size_t k = 0; k < order.size(); k++) {
            CHECK_FALSE(rig.completed(msg_id));
            REQUIRE(rig.feed(pkts[order[k]]) == R::None);
            // A duplicate of what just arrived, before the message is complete.
            if (k + 1 < order.size())
                CHECK(rig.feed(pkts[order[k]]) == R::Duplicate);
        }
        REQUIRE(rig.completed(msg_id));
        CHECK(rig.message(msg_id) == data);
        for (auto* m : pkts) // every packet again, after completion
            CHECK(rig.feed(m) == R::AlreadyCompleted);
        REQUIRE(rig.ring->release(msg_id));
        tmtest::free_all(pkts);
        msg_id++;
    } while (std::next_permutation(order.begin(), order.end()));
    CHECK(msg_id == 24);
    CHECK(rig.ctr().completions == 24);
    CHECK(rig.drops(R::Duplicate) == 24 * 3);
    CHECK(rig.drops(R::AlreadyCompleted) == 24 * 4);
}

TEST_CASE("a CRC mismatch completes nothing; the retransmission completes", "[rx]") {
    Rig rig;
    auto data = tmtest::pattern(4000, 4);
    auto pkts = rig.group(0, data);
    REQUIRE(pkts.size() == 3);
    // Corrupt one payload byte of the middle packet.
    rte_pktmbuf_mtod_offset(pkts[1], uint8_t*, kFrameOverhead + 17)[0] ^= 0x40;
    for (auto* m : pkts)
        rig.feed(m);
    CHECK_FALSE(rig.completed(0));
    CHECK(rig.ring->slot(0)->flag == 0);
    CHECK(rig.drops(R::CrcMismatch) == 1);
    CHECK(rig.ctr().completions == 0);
    tmtest::free_all(pkts);
    // The whole message was discarded: a clean copy is accepted in full.
    auto again = rig.group(0, data);
    for (auto* m : again)
        CHECK(rig.feed(m) == R::None);
    REQUIRE(rig.completed(0));
    CHECK(rig.message(0) == data);
    CHECK(rig.ctr().completions == 1);
    tmtest::free_all(again);
}

// Shrinks a non-LAST frame's payload to `len` bytes, lengths kept consistent.
static void shrink(std::vector<uint8_t>& f, uint16_t len) {
    f.resize(kFrameOverhead + len);
    tmtest::hdr_of(f)->pay_len = rte_cpu_to_be_16(len);
    tmtest::ip_of(f)->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(kIpLen + kUdpLen + kHeaderLen + len));
    reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen)->dgram_len =
        rte_cpu_to_be_16(static_cast<uint16_t>(kUdpLen + kHeaderLen + len));
    tmtest::fix_ip_checksum(f);
}

TEST_CASE("flow-level drop reasons", "[rx]") {
    Rig rig(8, 8192);
    auto one = rig.group(1, tmtest::pattern(300, 1));
    auto base = tmtest::flat(one[0]);
    tmtest::free_all(one);
    auto mutate = [&](auto fn) {
        auto f = base;
        fn(f);
        return rig.feed_bytes(f);
    };
    CHECK(mutate([](auto& f) { tmtest::hdr_of(f)->flow = RTE_BE16(9999); }) == R::UnknownFlow);
    CHECK(mutate([](auto& f) { tmtest::trailer_of(f)->key ^= 1; }) == R::BadKey);
    CHECK(mutate([](auto& f) { tmtest::trailer_of(f)->slot = RTE_BE32(2); }) == R::BadSlot);
    CHECK(mutate([](auto& f) { tmtest::trailer_of(f)->slot = RTE_BE32(9); }) == R::BadSlot);
    // ACK/NACK reach a placer with no reliability peer.
    CHECK(mutate([](auto& f) { tmtest::hdr_of(f)->flags = static_cast<uint8_t>(Flags::Ack); }) == R::Control);

    // A message larger than the 8 KiB region: data past it, and the LAST.
    auto big = rig.group(2, tmtest::pattern(9000, 2));
    REQUIRE(big.size() == 7);
    CHECK(rig.feed(big[5]) == R::OutsideRegion); // offset 7280 + 1456 > 8192
    CHECK(rig.feed(big[6]) == R::MsgTooLarge);
    tmtest::free_all(big);

    // Outside the window: the ring has 8 slots and nothing is released yet.
    auto far = rig.group(8, tmtest::pattern(10, 8));
    CHECK(rig.feed(far[0]) == R::OutsideWindow);
    tmtest::free_all(far);
    auto behind = rig.group(0xFFFFFFFFu, tmtest::pattern(10, 8));
    CHECK(rig.feed(behind[0]) == R::OutsideWindow);
    tmtest::free_all(behind);

    // Two different LAST packets for one message.
    auto a = rig.group(3, tmtest::pattern(3000, 3));
    auto b = rig.group(3, tmtest::pattern(200, 4));
    CHECK(rig.feed(a[2]) == R::None);
    CHECK(rig.feed(b[0]) == R::ConflictingLast);
    // After the LAST, a packet index beyond its pkt_count.
    auto wrong_idx = tmtest::flat(a[0]);
    tmtest::hdr_of(wrong_idx)->pkt_idx = RTE_BE16(3);
    tmtest::hdr_of(wrong_idx)->offset = RTE_BE32(3 * 1456);
    CHECK(rig.feed_bytes(wrong_idx) == R::PktIdxRange);
    // ...and one whose bytes end beyond the LAST's msg_len.
    auto beyond = tmtest::flat(a[0]);
    tmtest::hdr_of(beyond)->pkt_idx = RTE_BE16(2);
    tmtest::hdr_of(beyond)->offset = RTE_BE32(2 * 1456);
    CHECK(rig.feed_bytes(beyond) == R::BadOffset);
    // Off the group geometry: overlapping its neighbour.
    auto overlap = tmtest::flat(a[1]);
    tmtest::hdr_of(overlap)->offset = RTE_BE32(1000);
    CHECK(rig.feed_bytes(overlap) == R::BadOffset);
    tmtest::free_all(a);
    tmtest::free_all(b);

    // All pkt_count packets in, but the bytes do not add up to msg_len.
    auto c = rig.group(4, tmtest::pattern(2000, 5));
    REQUIRE(c.size() == 2);
    auto short0 = tmtest::flat(c[0]);
    shrink(short0, 100);
    CHECK(rig.feed_bytes(short0) == R::None);
    CHECK(rig.feed(c[1]) == R::None);
    CHECK(rig.drops(R::LengthMismatch) == 1);
    CHECK_FALSE(rig.completed(4));
    // Discarded, so the real packets rebuild it.
    CHECK(rig.feed(c[0]) == R::None);
    CHECK(rig.feed(c[1]) == R::None);
    CHECK(rig.completed(4));
    tmtest::free_all(c);

    CHECK(rig.ctr().completions == 1);
    for (R r : {R::UnknownFlow, R::BadKey, R::Control, R::OutsideRegion, R::MsgTooLarge,
                R::ConflictingLast, R::PktIdxRange, R::LengthMismatch})
        CHECK(rig.drops(r) == 1);
    CHECK(rig.drops(R::BadOffset) == 2);
    CHECK(rig.drops(R::BadSlot) == 2);
    CHECK(rig.drops(R::OutsideWindow) == 2);
}

TEST_CASE("hostile packets write nothing anywhere in the ring", "[rx]") {
    Rig rig(4, 4096);
    auto span = rig.ring->writable_span();
    memset(span.data(), 0xAA, span.size());
    auto pkts = rig.group(1, tmtest::pattern(3000, 1));
    auto f0 = tmtest::flat(pkts[0]);
    auto last = tmtest::flat(pkts[2]);
    tmtest::free_all(pkts);
    auto hostile = [&](auto fn, const std::vector<uint8_t>& b) {
        auto f = b;
        fn(f);
        return rig.feed_bytes(f);
    };
    // Past the region's end, wrapping offsets, wrong key, far msg_ids, bad slots.
    CHECK(hostile([](auto& f) { tmtest::hdr_of(f)->offset = RTE_BE32(4096 - 100); }, f0) == R::OutsideRegion);
    CHECK(hostile([](auto& f) { tmtest::hdr_of(f)->offset = RTE_BE32(0xFFFFF000u); }, f0) == R::OutsideRegion);
    CHECK(hostile([](auto& f) { tmtest::hdr_of(f)->msg_id = RTE_BE32(1000); }, f0) == R::OutsideWindow);
    CHECK(hostile([](auto& f) { tmtest::trailer_of(f)->key = 0; }, last) == R::BadKey);
    CHECK(hostile([](auto& f) { tmtest::trailer_of(f)->msg_len = RTE_BE32(1u << 30); tmtest::hdr_of(f)->offset = RTE_BE32((1u << 30) - 3000 + 2 * 1456); }, last) == R::MsgTooLarge);
    for (uint8_t b : span)
        REQUIRE(b == 0xAA);
    CHECK(rig.ctr().completions == 0);
    CHECK(rig.ctr().placed == 0);
}

TEST_CASE("a slot is not reused before its message is released", "[rx]") {
    Rig rig(2);
    for (uint32_t id = 0; id < 2; id++) {
        auto p = rig.group(id, tmtest::pattern(64, id));
        CHECK(rig.feed(p[0]) == R::None);
        tmtest::free_all(p);
    }
    auto p2 = rig.group(2, tmtest::pattern(64, 2)); // slot 0 again
    CHECK(rig.feed(p2[0]) == R::OutsideWindow);
    CHECK(rig.message(0) == tmtest::pattern(64, 0)); // untouched
    CHECK_FALSE(rig.ring->release(1));               // in order only
    REQUIRE(rig.ring->release(0));
    CHECK(rig.feed(p2[0]) == R::None);
    CHECK(rig.completed(2));
    CHECK_FALSE(rig.completed(0));
    CHECK(rig.message(2) == tmtest::pattern(64, 2));
    tmtest::free_all(p2);
}

TEST_CASE("overlapping packets cannot stand in for missing bytes", "[rx]") {
    // The fuzzer's find: index 1 re-sent at index 0's offset, so the byte count
    // adds up while [1456, 2912) still holds the previous message's bytes.
    Rig rig(1);
    auto data = tmtest::pattern(3000, 5);
    auto first = rig.group(0, data);
    for (auto* m : first)
        REQUIRE(rig.feed(m) == R::None);
    REQUIRE(rig.completed(0));
    REQUIRE(rig.ring->release(0));
    auto again = rig.group(1, data); // same bytes, next message, same slot
    auto dup = tmtest::flat(again[0]);
    tmtest::hdr_of(dup)->pkt_idx = RTE_BE16(1);
    CHECK(rig.feed(again[0]) == R::None);
    CHECK(rig.feed_bytes(dup) == R::BadOffset);
    CHECK(rig.feed(again[2]) == R::None);
    CHECK_FALSE(rig.completed(1));
    CHECK(rig.feed(again[1]) == R::None);
    CHECK(rig.completed(1));
    tmtest::free_all(first);
    tmtest::free_all(again);
}

TEST_CASE("a message the consumer gave up on is never completed late", "[rx]") {
    Rig rig(2);
    auto data = tmtest::pattern(3000, 6);
    auto pkts = rig.group(0, data);
    CHECK(rig.feed(pkts[0]) == R::None);
    REQUIRE(rig.ring->release(0)); // given up: incomplete, credit returned
    CHECK(rig.feed(pkts[1]) == R::OutsideWindow);
    CHECK(rig.feed(pkts[2]) == R::OutsideWindow);
    CHECK(rig.ring->slot(0)->flag == 0);
    CHECK(rig.ctr().completions == 0);
    tmtest::free_all(pkts);
}

TEST_CASE("packet mode writes one completion per data packet", "[rx]") {
    Rig rig(4);
    rig.placer.set_mode(CompletionMode::Packet);
    rte_ring* cq = rte_ring_create_elem(tmtest::unique_name("cq").c_str(), sizeof(PacketCompletion),
                                        64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    REQUIRE(cq);
    rig.placer.set_packet_completion_ring(rig.flow_id, cq);
    auto data = tmtest::pattern(5000, 3);
    auto pkts = rig.group(0, data);
    REQUIRE(pkts.size() == 4);
    for (auto* m : pkts)
        CHECK(rig.feed(m) == R::None);
    CHECK(rig.ctr().packet_completions == 4);
    CHECK(rig.ctr().completions == 0);
    CHECK(rig.ring->slot(0)->flag == 0); // no per-message flag in this mode
    PacketCompletion pc[4];
    REQUIRE(rte_ring_dequeue_bulk_elem(cq, pc, sizeof(PacketCompletion), 4, nullptr) == 4);
    uint64_t bytes = 0;
    for (int i = 0; i < 4; i++) {
        CHECK(pc[i].pkt_idx == i);
        CHECK(pc[i].pkt_count == (i == 3 ? 4 : 0));
        bytes += pc[i].len;
    }
    CHECK(bytes == 5000);
    auto region = rig.ring->region(0);
    CHECK(std::equal(data.begin(), data.end(), region));
    tmtest::free_all(pkts);
    rte_ring_free(cq);
}

TEST_CASE("packet mode: a full completion queue drops the packet, placing nothing", "[rx]") {
    Rig rig(4);
    rig.placer.set_mode(CompletionMode::Packet);
    rte_ring* cq = rte_ring_create_elem(tmtest::unique_name("cq").c_str(), sizeof(PacketCompletion),
                                        2, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
    REQUIRE(cq);
    rig.placer.set_packet_completion_ring(rig.flow_id, cq);
    auto data = tmtest::pattern(3000, 7);
    auto pkts = rig.group(0, data);
    REQUIRE(pkts.size() == 3);
    CHECK(rig.placer.process(pkts[0], 111) == R::None);
    CHECK(rig.placer.process(pkts[1], 222) == R::None);
    CHECK(rig.feed(pkts[2]) == R::CompletionQueueFull);
    CHECK(rig.ctr().placed == 2);
    PacketCompletion pc[2];
    REQUIRE(rte_ring_dequeue_bulk_elem(cq, pc, sizeof(PacketCompletion), 2, nullptr) == 2);
    CHECK(pc[0].rx_tsc == 111);
    CHECK(pc[1].rx_tsc == 222);
    // Not marked as seen: the same packet is taken once there is room.
    CHECK(rig.placer.process(pkts[2], 333) == R::None);
    REQUIRE(rte_ring_dequeue_bulk_elem(cq, pc, sizeof(PacketCompletion), 1, nullptr) == 1);
    CHECK(pc[0].pkt_count == 3);
    CHECK(pc[0].rx_tsc == 333);
    CHECK(rig.ctr().packet_completions == 3);
    CHECK(std::equal(data.begin(), data.end(), rig.ring->region(0)));
    tmtest::free_all(pkts);
    rte_ring_free(cq);
}

TEST_CASE("rx_burst frees every mbuf it is given", "[rx]") {
    Rig rig(8);
    std::vector<rte_mbuf*> burst;
    for (uint32_t id = 0; id < 8; id++) {
        auto p = rig.group(id, tmtest::pattern(1000, id));
        burst.insert(burst.end(), p.begin(), p.end());
    }
    burst.push_back(tmtest::mbuf_of(rig.pool.mp, std::vector<uint8_t>(10, 0))); // a runt
    const unsigned before = rig.pool.avail();
    rig.placer.rx_burst(burst.data(), static_cast<uint16_t>(burst.size()), rte_rdtsc());
    CHECK(rig.pool.avail() == before + burst.size());
    CHECK(rig.ctr().completions == 8);
    CHECK(rig.drops(R::FrameTooShort) == 1);
}
