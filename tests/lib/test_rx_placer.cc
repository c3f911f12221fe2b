#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

#include <rte_cycles.h>
#include <rte_ring.h>

#include "fixtures.h"
#include "tailmark/control.h"
#include "tailmark/crc32c.h"
#include "tailmark/engine/config.h"
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
    const bool stream = GENERATE(false, true);
    INFO("streaming " << stream);
    rig.placer.set_stream_min(stream ? 16u << 20 : 0);
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
    CHECK(rig.ctr().streamed == (stream ? 11523u : 0u));
    tmtest::free_all(pkts);
}

// Streaming placement (set_stream_min): a flow whose region slots hold at
// least stream_min bytes has its groups' payloads written around the caches;
// one-packet messages keep the cached path. Whatever the path, the same
// bytes, verdicts and counts.
TEST_CASE("streaming placement: the same bytes and verdicts, and only where asked", "[rx]") {
    Rig rig(8);
    const uint64_t region = rig.ring->region_size();
    const uint64_t stream_min = GENERATE_COPY(uint64_t{0}, region, region + 1);
    const bool on = stream_min == region;
    INFO("stream_min " << stream_min << " region " << region);
    rig.placer.set_stream_min(stream_min);
    CHECK(rig.placer.stream_min() == stream_min);
    const uint32_t stride = rig.flow.stride;
    uint64_t streamed = 0;

    // In order (copy and CRC in one go), then in reverse (the CRC from the
    // region at completion): 4 packets, each with payload.
    for (uint32_t id : {0u, 1u}) {
        auto data = tmtest::pattern(3 * stride + 10, 40 + id);
        auto pkts = rig.group(id, data);
        REQUIRE(pkts.size() == 4);
        if (id == 1)
            std::reverse(pkts.begin(), pkts.end());
        for (auto* m : pkts)
            REQUIRE(rig.feed(m) == R::None);
        streamed += 4;
        REQUIRE(rig.completed(id));
        CHECK(rig.message(id) == data);
        CHECK(rig.ctr().streamed == (on ? streamed : 0));
        tmtest::free_all(pkts);
    }
    // A one-packet message: the cached path either way.
    auto small = tmtest::pattern(500, 42);
    auto one = rig.group(2, small);
    REQUIRE(one.size() == 1);
    REQUIRE(rig.feed(one[0]) == R::None);
    REQUIRE(rig.completed(2));
    CHECK(rig.message(2) == small);
    CHECK(rig.ctr().streamed == (on ? streamed : 0));
    tmtest::free_all(one);
    // A corrupted byte: nothing completes; the clean copy does.
    auto data = tmtest::pattern(2 * stride + 100, 43);
    auto bad = rig.group(3, data);
    REQUIRE(bad.size() == 3);
    rte_pktmbuf_mtod_offset(bad[1], uint8_t*, kFrameOverhead + 17)[0] ^= 0x40;
    for (auto* m : bad)
        rig.feed(m);
    streamed += 3;
    CHECK_FALSE(rig.completed(3));
    CHECK(rig.ring->slot(3)->flag == 0);
    CHECK(rig.drops(R::CrcMismatch) == 1);
    tmtest::free_all(bad);
    auto good = rig.group(3, data);
    for (auto* m : good)
        CHECK(rig.feed(m) == R::None);
    streamed += 3;
    REQUIRE(rig.completed(3));
    CHECK(rig.message(3) == data);
    tmtest::free_all(good);
    CHECK(rig.ctr().completions == 4);
    CHECK(rig.ctr().placed == 4 + 4 + 1 + 3 + 3);
    CHECK(rig.ctr().streamed == (on ? streamed : 0));
    CHECK(rig.ctr().dropped() == 1);
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

// One-packet messages complete on their own path (RxPlacer::place): the
// same verdicts as a group's. A corrupted copy completes nothing and is
// NACKed; the clean copy completes; a duplicate is AlreadyCompleted; each
// slot's later messages, one packet or a group, complete in it (the bitset
// is cleared by the extent the path leaves).
TEST_CASE("one-packet messages: CRC mismatch, retransmission, duplicate, the slot reused", "[rx]") {
    Rig rig(4);
    auto data = tmtest::pattern(64, 9);
    auto bad = rig.group(0, data);
    REQUIRE(bad.size() == 1);
    rte_pktmbuf_mtod_offset(bad[0], uint8_t*, kFrameOverhead + 3)[0] ^= 0x01;
    CHECK(rig.feed(bad[0]) == R::None); // placed, then discarded whole at the check
    CHECK_FALSE(rig.completed(0));
    CHECK(rig.ring->slot(0)->flag == 0);
    CHECK(rig.drops(R::CrcMismatch) == 1);
    CHECK(rig.ctr().completions == 0);
    auto good = rig.group(0, data);
    CHECK(rig.feed(good[0]) == R::None);
    REQUIRE(rig.completed(0));
    CHECK(rig.message(0) == data);
    CHECK(rig.ring->slot(0)->crc32c == crc32c(data));
    CHECK(rig.feed(good[0]) == R::AlreadyCompleted);
    CHECK(rig.feed(bad[0]) == R::AlreadyCompleted);
    CHECK(rig.ctr().completions == 1);
    CHECK(rig.ctr().placed == 2);
    REQUIRE(rig.ring->release(0));
    tmtest::free_all(bad);
    tmtest::free_all(good);
    // Slot 0 again and again: msg_ids 4, 8 (one packet), 12 (three), 16 (one).
    uint32_t done = 1;
    for (uint32_t id : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u, 11u, 12u, 13u, 14u, 15u, 16u}) {
        const uint32_t len = id == 12 ? 4000 : static_cast<uint32_t>(id % 3 == 0 ? 0 : 64 + id);
        INFO("msg " << id << ", " << len << " B");
        auto d = tmtest::pattern(len, id);
        auto pkts = rig.group(id, d);
        for (auto* m : pkts)
            CHECK(rig.feed(m) == R::None);
        REQUIRE(rig.completed(id));
        CHECK(rig.message(id) == d);
        CHECK(rig.ring->poll(id)->pkt_count == pkts.size());
        REQUIRE(rig.ring->release(id));
        tmtest::free_all(pkts);
        done++;
    }
    CHECK(rig.ctr().completions == done);
    CHECK(rig.drops(R::Duplicate) == 0);
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
    // A LAST without payload (a message of two full strides) claiming 100
    // packets: the region (4 KiB) holds groups of at most 4, and the slot's
    // bitset has room for just those.
    auto two = rig.group(3, tmtest::pattern(2 * 1456, 3));
    REQUIRE(two.size() == 3);
    auto empty_last = tmtest::flat(two[2]);
    tmtest::free_all(two);
    CHECK(hostile([](auto& f) {
        tmtest::hdr_of(f)->pkt_idx = RTE_BE16(99);
        tmtest::trailer_of(f)->pkt_count = RTE_BE16(100);
    }, empty_last) == R::PktIdxRange);
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

TEST_CASE("late copies of released messages leave the slot's newer message alone", "[rx]") {
    // The placer checks the window against its cached copy of the consumer's
    // cursor; these copies pass that check and must still be refused.
    Rig rig(2);
    auto d0 = tmtest::pattern(3000, 10), d1 = tmtest::pattern(64, 11), d2 = tmtest::pattern(3000, 12);
    auto m0 = rig.group(0, d0), m1 = rig.group(1, d1), m2 = rig.group(2, d2);
    for (auto* m : m0)
        REQUIRE(rig.feed(m) == R::None);
    REQUIRE(rig.feed(m1[0]) == R::None);
    REQUIRE(rig.ring->release(0));
    REQUIRE(rig.ring->release(1));
    CHECK(*rig.ring->gave_up_word() == 0); // both had completed
    CHECK(rig.feed(m1[0]) == R::OutsideWindow); // completed, released, slot not reused yet
    REQUIRE(rig.feed(m2[0]) == R::None);        // slot 0: message 2 now
    CHECK(rig.feed(m0[1]) == R::OutsideWindow); // message 0's copy: not message 2's state
    CHECK(rig.feed(m0[2]) == R::OutsideWindow);
    CHECK(rig.feed(m2[1]) == R::None);
    CHECK(rig.feed(m2[2]) == R::None);
    REQUIRE(rig.completed(2));
    CHECK(rig.message(2) == d2);
    CHECK(rig.drops(R::OutsideWindow) == 3);
    CHECK(rig.ctr().completions == 3);
    tmtest::free_all(m0);
    tmtest::free_all(m1);
    tmtest::free_all(m2);
}

TEST_CASE("a message the consumer gave up on is never completed late", "[rx]") {
    Rig rig(2);
    auto data = tmtest::pattern(3000, 6);
    auto pkts = rig.group(0, data);
    CHECK(rig.feed(pkts[0]) == R::None);
    REQUIRE(rig.ring->release(0)); // given up: incomplete, credit returned
    CHECK(*rig.ring->gave_up_word() == 1);
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

// FlowAuth::loopback, TxFlow::loopback: a session between two applications
// of one daemon, whose frames never leave its memory. A 1 MiB message at the
// loopback's MTU, zero copy as the service sends it: 18 packets (721 at
// 1500), its trailer's CRC32C 0 (none made), completed with every byte and
// no CRC32C checked. The same frames from a port are no flow's: every one
// dropped as unknown_flow, nothing placed, no completion; and a flow of the
// wire still checks its CRC32C.
TEST_CASE("a loopback flow: 60 KiB packets, no CRC32C, and no frame from a port", "[rx]") {
    tmtest::Pool pool{1023};
    const uint16_t id = next_flow_id();
    const uint32_t key = 0x10CA1;
    TxFlow flow;
    REQUIRE(TxFlow::make(flow, id, key, 4, engine::kLoopbackMtu, tmtest::test_addr()));
    flow.loopback = true;
    REQUIRE(flow.stride == 61440);
    auto ring = tmtest::make_ring(id, 4, 1 << 20);
    REQUIRE(ring);
    RxPlacer placer{ParserConfig{}, SOCKET_ID_ANY};
    FlowAuth auth{};
    auth.version = kVersion;
    auth.loopback = true;
    REQUIRE(placer.add_flow(id, ring.get(), key, flow.stride, auth));
    auto data = tmtest::pattern(1 << 20, 5);
    rte_mbuf_ext_shared_info shinfo{};
    shinfo.free_cb = [](void*, void*) {};
    rte_mbuf_ext_refcnt_set(&shinfo, 1);
    auto build = [&](uint32_t msg_id) {
        TxMarker tx(pool.mp, PayloadMode::ZeroCopy);
        TxMessage m;
        m.msg_id = msg_id;
        m.bytes = data;
        m.shinfo = &shinfo;
        m.iova = 0;
        REQUIRE(tx.prepare_streamed(flow, m));
        CHECK((m.crc32c == 0) == flow.loopback);
        std::vector<rte_mbuf*> out(m.plan.pkt_count);
        REQUIRE(tx.build(flow, m, 0, m.plan.pkt_count, out.data()) == static_cast<int>(m.plan.pkt_count));
        return out;
    };
    // A short message of such a flow is still one mbuf, copied: the tx
    // path's one-packet build (TxMarker::one_packet, one_max), whatever
    // the stride.
    {
        TxMarker cm(pool.mp, PayloadMode::Copy);
        TxMessage m;
        m.bytes = std::span<const uint8_t>(data.data(), 64);
        REQUIRE(cm.prepare_streamed(flow, m));
        CHECK(cm.one_packet(flow, m));
        uint64_t max_len = 0;
        CHECK(cm.one_max(flow, max_len));
        CHECK(max_len == TxMarker::kStreamMin - 1);
    }
    auto pkts = build(0);
    REQUIRE(pkts.size() == 18);
    CHECK(pkts[0]->pkt_len == kFrameOverhead + 61440);
    auto last = tmtest::flat(pkts.back());
    CHECK(tmtest::trailer_of(last)->crc32c == 0);
    const auto unknown = [&] { return placer.counters().drops[index(R::UnknownFlow)]; };
    // From a port.
    placer.rx_burst(pkts.data(), static_cast<uint16_t>(pkts.size()), rte_rdtsc());
    CHECK(unknown() == 18);
    CHECK(placer.counters().placed == 0);
    CHECK(ring->poll(0) == nullptr);
    // From the loopback.
    pkts = build(0);
    placer.from_loopback(true);
    placer.rx_burst(pkts.data(), static_cast<uint16_t>(pkts.size()), rte_rdtsc());
    placer.from_loopback(false);
    CHECK(placer.counters().placed == 18);
    CHECK(placer.counters().drops[index(R::CrcMismatch)] == 0);
    REQUIRE(ring->poll(0) != nullptr);
    CHECK(ring->poll(0)->crc32c == 0);
    auto got = ring->message(ring->poll(0));
    CHECK(std::equal(got.begin(), got.end(), data.begin(), data.end()));
    CHECK(unknown() == 18);
    // No CRC32C is checked: message 1 with a CRC32C made, and a byte of it
    // changed in the sender's memory after (its packets reference it),
    // completes with what came.
    const uint32_t sum = crc32c(data);
    flow.loopback = false;
    pkts = build(1);
    flow.loopback = true;
    const size_t at = 3 * 61440 + 100;
    data[at] ^= 0x20;
    placer.from_loopback(true);
    placer.rx_burst(pkts.data(), static_cast<uint16_t>(pkts.size()), rte_rdtsc());
    placer.from_loopback(false);
    REQUIRE(ring->poll(1) != nullptr);
    CHECK(ring->poll(1)->crc32c == sum);
    got = ring->message(ring->poll(1));
    CHECK(std::equal(got.begin(), got.end(), data.begin(), data.end()));
    CHECK(placer.counters().drops[index(R::CrcMismatch)] == 0);
    data[at] ^= 0x20;
    CHECK(rte_mbuf_ext_refcnt_read(&shinfo) == 1); // every reference on the message given back
    // A flow of the wire: the same frames, made without a CRC32C, complete nothing.
    Rig wire;
    wire.flow.loopback = true; // the sender's mistake: no CRC32C
    auto w = wire.group(0, tmtest::pattern(4000, 6));
    for (auto* m : w)
        wire.feed(m);
    CHECK_FALSE(wire.completed(0));
    CHECK(wire.drops(R::CrcMismatch) == 1);
    tmtest::free_all(w);
}

// ---------------------------------------------------------------------------
// Reliability: cumulative ACK, gap NACKs, probes, ACK requests.

namespace {

constexpr uint64_t kT0 = 1'000'000; // the TSC the tests start at
constexpr uint64_t kDelay = 1000;   // NACK delay, cycles

// A NACK request queue as the daemon makes it: Nack records, single consumer.
struct NackQ {
    rte_ring* r = nullptr;
    explicit NackQ(unsigned count = 64, unsigned flags = RING_F_SC_DEQ) {
        r = rte_ring_create_elem(tmtest::unique_name("nq").c_str(), sizeof(Nack), count, SOCKET_ID_ANY,
                                 flags);
    }
    ~NackQ() { rte_ring_free(r); }
    NackQ(const NackQ&) = delete;
    NackQ& operator=(const NackQ&) = delete;
    std::vector<Nack> drain() {
        std::vector<Nack> out;
        Nack n;
        while (rte_ring_dequeue_elem(r, &n, sizeof(n)) == 0)
            out.push_back(n);
        return out;
    }
};

// "{first,count}..." of a Nack's ranges, for exact comparison with readable failures.
std::string ranges(const Nack& n) {
    std::string s;
    char b[24];
    for (uint32_t i = 0; i < n.nranges && i < kMaxNackRanges; i++) { // snprintf: GCC 12 -O3 warns on string +
        snprintf(b, sizeof(b), "{%u,%u}", unsigned(n.ranges[i].first), unsigned(n.ranges[i].count));
        s.append(b);
    }
    return s;
}

// A Rig with gap detection on: a NACK queue and a delay.
struct RelRig : Rig {
    NackQ q;
    explicit RelRig(uint64_t delay = kDelay, uint32_t ring_size = 8, unsigned q_count = 64,
                    unsigned q_flags = RING_F_SC_DEQ)
        : Rig(ring_size), q(q_count, q_flags) {
        REQUIRE(q.r != nullptr);
        placer.set_nack_ring(flow_id, q.r);
        placer.set_nack_delay(delay);
    }
    R at(rte_mbuf* m, uint64_t tsc) { return placer.process(m, tsc); }
    uint32_t acked() const { return placer.acked_upto(flow_id); }
    // The same group, every packet flagged RETX (the sender's retransmission).
    std::vector<rte_mbuf*> retx_group(uint32_t msg_id, const std::vector<uint8_t>& data) {
        TxMarker tx(pool.mp, PayloadMode::Copy);
        TxMessage m;
        m.msg_id = msg_id;
        m.bytes = data;
        REQUIRE(tx.prepare(flow, m));
        std::vector<rte_mbuf*> out(m.plan.pkt_count);
        REQUIRE(m.plan.pkt_count <= TxMarker::kMaxBurst);
        REQUIRE(tx.build(flow, m, 0, m.plan.pkt_count, out.data(), Flags::Retx) ==
                static_cast<int>(m.plan.pkt_count));
        return out;
    }
    // Exactly one Nack queued, for msg_id; returns its ranges.
    std::string one_nack(uint32_t msg_id) {
        auto v = q.drain();
        REQUIRE(v.size() == 1);
        CHECK(v[0].flow == flow_id);
        CHECK(v[0].msg_id == msg_id);
        return ranges(v[0]);
    }
    size_t queued() const { return rte_ring_count(q.r); }
};

// 4 full packets and a LAST with a 100-byte tail: a 5-packet group.
std::vector<uint8_t> five_pkt_msg(const Rig& rig, uint32_t seed) {
    return tmtest::pattern(4 * rig.flow.stride + 100, seed);
}

} // namespace

TEST_CASE("cumulative ACK advances only over messages completed in a row", "[rx][nack]") {
    RelRig rig;
    auto m0 = rig.group(0, tmtest::pattern(3000, 10));
    auto m1 = rig.group(1, tmtest::pattern(100, 11));
    auto m2 = rig.group(2, tmtest::pattern(2000, 12));
    REQUIRE(m0.size() == 3);
    REQUIRE(m2.size() == 2);
    CHECK(rig.acked() == 0);
    CHECK(rig.at(m1[0], kT0) == R::None);
    REQUIRE(rig.completed(1));
    CHECK(rig.acked() == 0); // 0 is not complete: 1 does not count yet
    CHECK(rig.at(m2[0], kT0) == R::None);
    for (auto* m : m0)
        CHECK(rig.at(m, kT0) == R::None);
    REQUIRE(rig.completed(0));
    CHECK(rig.acked() == 2); // 0 and 1; 2 is still incomplete
    CHECK(rig.at(m2[1], kT0) == R::None);
    CHECK(rig.acked() == 3);
    CHECK(rig.placer.acked_upto(static_cast<uint16_t>(rig.flow_id + 5000)) == 0); // unknown flow
    CHECK(rig.queued() == 0);
    CHECK(rig.ctr().nacks == 0);
    tmtest::free_all(m0);
    tmtest::free_all(m1);
    tmtest::free_all(m2);
}

TEST_CASE("a message the consumer gave up on moves the cumulative ACK at the next scan", "[rx][nack]") {
    RelRig rig;
    auto m0 = rig.group(0, tmtest::pattern(3000, 13));
    auto m1 = rig.group(1, tmtest::pattern(100, 14));
    CHECK(rig.at(m0[0], kT0) == R::None);
    CHECK(rig.at(m1[0], kT0) == R::None);
    CHECK(rig.acked() == 0);
    REQUIRE(rig.ring->release(0)); // given up, incomplete
    rig.placer.poll(kT0 + 1);
    CHECK(rig.acked() == 2); // released 0, completed 1
    CHECK(rig.queued() == 0); // nothing to ask for below the cursor
    tmtest::free_all(m0);
    tmtest::free_all(m1);
}

TEST_CASE("gaps under a LAST are NACKed after the delay, then with back-off", "[rx][nack]") {
    RelRig rig;
    auto data = five_pkt_msg(rig, 20);
    auto pkts = rig.group(0, data);
    REQUIRE(pkts.size() == 5);
    for (int i : {0, 2, 4})
        CHECK(rig.at(pkts[i], kT0) == R::None);
    CHECK(rig.queued() == 0); // nothing at once: reordering is not loss

    rig.placer.poll(kT0 + 500); // a scan: 500 < delay
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 999); // no scan before kT0 + 1000 (every delay/2)
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 1000);
    CHECK(rig.one_nack(0) == "{1,1}{3,1}");
    CHECK(rig.ctr().nacks == 1);

    // Back-off: the next NACK 2x the delay after this one, then 4x.
    for (uint64_t t : {1500, 2000, 2500}) {
        rig.placer.poll(kT0 + t);
        CHECK(rig.queued() == 0);
    }
    rig.placer.poll(kT0 + 3000);
    CHECK(rig.one_nack(0) == "{1,1}{3,1}");
    for (uint64_t t = 3500; t < 7000; t += 500) {
        rig.placer.poll(kT0 + t);
        CHECK(rig.queued() == 0);
    }
    rig.placer.poll(kT0 + 7000);
    CHECK(rig.one_nack(0) == "{1,1}{3,1}");
    CHECK(rig.ctr().nacks == 3);

    // The missing packets arrive: complete, ACKed, nothing more asked.
    CHECK(rig.at(pkts[1], kT0 + 7100) == R::None);
    CHECK(rig.at(pkts[3], kT0 + 7200) == R::None);
    REQUIRE(rig.completed(0));
    CHECK(rig.message(0) == data);
    CHECK(rig.acked() == 1);
    for (uint64_t t = 7500; t <= 200000; t += 500)
        rig.placer.poll(kT0 + t);
    CHECK(rig.queued() == 0);
    CHECK(rig.ctr().nacks == 3);
    CHECK(rig.ctr().nack_q_full == 0);
    tmtest::free_all(pkts);
}

TEST_CASE("the gap scan runs at most every delay/2; progress restarts the delay", "[rx][nack]") {
    RelRig rig;
    auto pkts = rig.group(0, five_pkt_msg(rig, 25));
    for (int i : {0, 4})
        CHECK(rig.at(pkts[i], kT0) == R::None);
    rig.placer.poll(kT0 + 600); // scans; the next scan is due at kT0 + 1100
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 1000); // a scan now would NACK: there is none
    CHECK(rig.queued() == 0);
    CHECK(rig.at(pkts[2], kT0 + 1050) == R::None); // progress: the delay starts again
    rig.placer.poll(kT0 + 1099);
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 1100);
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 1600);
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 2049); // no scan (due at kT0 + 2100), and 999 < delay anyway
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 2100);
    CHECK(rig.one_nack(0) == "{1,1}{3,1}");
    CHECK(rig.ctr().nacks == 1);
    tmtest::free_all(pkts);
}

TEST_CASE("no LAST: the newest message's prefix is in flight; a later message is evidence", "[rx][nack]") {
    RelRig rig;
    auto pkts = rig.group(0, five_pkt_msg(rig, 21));
    auto later = rig.group(1, tmtest::pattern(100, 22));
    for (int i : {0, 1, 2})
        CHECK(rig.at(pkts[i], kT0) == R::None);
    for (uint64_t t = 0; t <= 10 * kDelay; t += kDelay / 2)
        rig.placer.poll(kT0 + t);
    CHECK(rig.queued() == 0); // newest, no gap, no LAST: no evidence of loss
    // A packet of a later message: everything from index 3 on is missing.
    CHECK(rig.at(later[0], kT0 + 10 * kDelay + 100) == R::None);
    REQUIRE(rig.completed(1));
    rig.placer.poll(kT0 + 10 * kDelay + kDelay / 2);
    CHECK(rig.one_nack(0) == "{3,0}");
    CHECK(rig.ctr().nacks == 1);
    CHECK(rig.acked() == 0);
    tmtest::free_all(pkts);
    tmtest::free_all(later);
}

TEST_CASE("no LAST: a hole below an arrived packet is NACKed, the tail once a later message comes",
          "[rx][nack]") {
    RelRig rig;
    auto pkts = rig.group(0, five_pkt_msg(rig, 23));
    auto later = rig.group(1, tmtest::pattern(3000, 24));
    CHECK(rig.at(pkts[0], kT0) == R::None);
    CHECK(rig.at(pkts[2], kT0) == R::None);
    rig.placer.poll(kT0 + 500);
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 1000);
    CHECK(rig.one_nack(0) == "{1,1}"); // newest: the end of the group is not asked for
    // Packet 0 of message 1 (incomplete, newest, no gap: not NACKed itself).
    CHECK(rig.at(later[0], kT0 + 1100) == R::None);
    for (uint64_t t = 1500; t < 3000; t += 500) {
        rig.placer.poll(kT0 + t);
        CHECK(rig.queued() == 0);
    }
    rig.placer.poll(kT0 + 3000); // 2x the delay after the first NACK
    CHECK(rig.one_nack(0) == "{1,1}{3,0}");
    tmtest::free_all(pkts);
    tmtest::free_all(later);
}

TEST_CASE("a message nothing arrived for, between two that did, is NACKed whole", "[rx][nack]") {
    RelRig rig;
    auto m0 = rig.group(0, tmtest::pattern(100, 30));
    auto m2 = rig.group(2, tmtest::pattern(100, 32));
    CHECK(rig.at(m0[0], kT0) == R::None);
    CHECK(rig.at(m2[0], kT0) == R::None);
    CHECK(rig.acked() == 1);
    // The first scan finds message 1 and starts its clock, however late it runs.
    rig.placer.poll(kT0 + 5 * kDelay);
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 5 * kDelay + kDelay / 2);
    CHECK(rig.queued() == 0);
    rig.placer.poll(kT0 + 6 * kDelay);
    CHECK(rig.one_nack(1) == "{0,0}");
    CHECK(rig.ctr().nacks == 1);
    // Its retransmission completes it, and the ACK jumps over 2.
    auto m1 = rig.retx_group(1, tmtest::pattern(100, 31));
    CHECK(rig.at(m1[0], kT0 + 6 * kDelay + 10) == R::None);
    CHECK(rig.acked() == 3);
    CHECK(rig.ctr().retx == 1);
    tmtest::free_all(m0);
    tmtest::free_all(m1);
    tmtest::free_all(m2);
}

TEST_CASE("a RETX LAST probe is answered at once with what is missing", "[rx][nack]") {
    RelRig rig(1'000'000'000); // a scan would wait far longer: only the probe can NACK
    auto data = five_pkt_msg(rig, 40);
    auto pkts = rig.group(0, data);
    auto retx = rig.retx_group(0, data);
    REQUIRE(retx.size() == 5);

    SECTION("a duplicate of the LAST already in") {
        for (int i : {0, 2, 4})
            CHECK(rig.at(pkts[i], kT0) == R::None);
        CHECK(rig.queued() == 0);
        CHECK(rig.at(retx[4], kT0 + 1) == R::Duplicate);
        CHECK(rig.one_nack(0) == "{1,1}{3,1}");
        CHECK(rig.ctr().retx == 1);
        CHECK(rig.drops(R::Duplicate) == 1);
    }
    SECTION("the first LAST to arrive") {
        CHECK(rig.at(pkts[0], kT0) == R::None);
        CHECK(rig.at(pkts[2], kT0) == R::None);
        CHECK(rig.at(retx[4], kT0 + 1) == R::None);
        CHECK(rig.one_nack(0) == "{1,1}{3,1}");
        CHECK(rig.ctr().retx == 1);
    }
    SECTION("a LAST that completes the message asks for nothing") {
        for (int i : {0, 1, 2, 3})
            CHECK(rig.at(pkts[i], kT0) == R::None);
        CHECK(rig.at(retx[4], kT0 + 1) == R::None);
        REQUIRE(rig.completed(0));
        CHECK(rig.message(0) == data);
        CHECK(rig.queued() == 0);
    }
    SECTION("a RETX non-LAST packet is no probe") {
        CHECK(rig.at(pkts[4], kT0) == R::None);
        CHECK(rig.at(retx[0], kT0 + 1) == R::None);
        CHECK(rig.queued() == 0);
        CHECK(rig.ctr().retx == 1);
    }
    tmtest::free_all(pkts);
    tmtest::free_all(retx);
}

TEST_CASE("a CRC mismatch discards the message and NACKs it whole at once", "[rx][nack]") {
    RelRig rig(1'000'000'000);
    auto data = tmtest::pattern(4000, 50);
    auto pkts = rig.group(0, data);
    REQUIRE(pkts.size() == 3);
    rte_pktmbuf_mtod_offset(pkts[1], uint8_t*, kFrameOverhead + 17)[0] ^= 0x40;
    for (auto* m : pkts)
        CHECK(rig.at(m, kT0) == R::None);
    CHECK(rig.drops(R::CrcMismatch) == 1);
    CHECK(rig.ctr().completions == 0);
    CHECK_FALSE(rig.completed(0));
    CHECK(rig.one_nack(0) == "{0,0}");
    CHECK(rig.ctr().nacks == 1);
    CHECK(rig.acked() == 0);
    // The retransmission rebuilds it.
    auto retx = rig.retx_group(0, data);
    for (auto* m : retx)
        CHECK(rig.at(m, kT0 + 10) == R::None);
    REQUIRE(rig.completed(0));
    CHECK(rig.message(0) == data);
    CHECK(rig.acked() == 1);
    CHECK(rig.ctr().retx == 3);
    CHECK(rig.queued() == 0);
    tmtest::free_all(pkts);
    tmtest::free_all(retx);
}

TEST_CASE("a RETX for a completed or released message requests one ACK", "[rx][nack]") {
    RelRig rig;
    auto data = tmtest::pattern(100, 60);
    auto pkts = rig.group(0, data);
    auto retx = rig.retx_group(0, data);
    CHECK_FALSE(rig.placer.take_ack_request(rig.flow_id));
    CHECK(rig.at(pkts[0], kT0) == R::None);
    REQUIRE(rig.completed(0));
    CHECK_FALSE(rig.placer.take_ack_request(rig.flow_id));
    CHECK(rig.at(pkts[0], kT0 + 1) == R::AlreadyCompleted); // a plain duplicate: no request
    CHECK_FALSE(rig.placer.take_ack_request(rig.flow_id));
    CHECK(rig.at(retx[0], kT0 + 2) == R::AlreadyCompleted);
    CHECK(rig.at(retx[0], kT0 + 3) == R::AlreadyCompleted); // one flag, not a count
    CHECK(rig.placer.take_ack_request(rig.flow_id));
    CHECK_FALSE(rig.placer.take_ack_request(rig.flow_id));
    // Released: out of the window now, the sender still missed the ACK.
    REQUIRE(rig.ring->release(0));
    CHECK(rig.at(retx[0], kT0 + 4) == R::OutsideWindow);
    CHECK(rig.placer.take_ack_request(rig.flow_id));
    CHECK_FALSE(rig.placer.take_ack_request(rig.flow_id));
    CHECK_FALSE(rig.placer.take_ack_request(static_cast<uint16_t>(rig.flow_id + 5000)));
    CHECK(rig.ctr().retx == 3);
    CHECK(rig.queued() == 0);
    tmtest::free_all(pkts);
    tmtest::free_all(retx);
}

TEST_CASE("a full NACK queue postpones the request to the next scan", "[rx][nack]") {
    RelRig rig(kDelay, 8, 1, RING_F_SC_DEQ | RING_F_EXACT_SZ); // room for one Nack
    auto a = rig.group(0, tmtest::pattern(3000, 70));
    auto b = rig.group(1, tmtest::pattern(3000, 71));
    for (auto* g : {&a, &b}) {
        CHECK(rig.at((*g)[0], kT0) == R::None);
        CHECK(rig.at((*g)[2], kT0) == R::None);
    }
    rig.placer.poll(kT0 + 500);
    rig.placer.poll(kT0 + 1000);
    CHECK(rig.one_nack(0) == "{1,1}");
    CHECK(rig.ctr().nacks == 1);
    CHECK(rig.ctr().nack_q_full == 1);
    rig.placer.poll(kT0 + 1500); // message 1 asks again; message 0 backs off
    CHECK(rig.one_nack(1) == "{1,1}");
    CHECK(rig.ctr().nacks == 2);
    CHECK(rig.ctr().nack_q_full == 1);
    tmtest::free_all(a);
    tmtest::free_all(b);
}

TEST_CASE("a discarded newest message whose NACK was postponed is asked for again", "[rx][nack]") {
    // Regression: after a CRC mismatch the slot is empty again; as the newest
    // message it showed no gap, so a NACK the full queue refused was never
    // asked again (only the sender's timer would have recovered it).
    RelRig rig(kDelay, 8, 1, RING_F_SC_DEQ | RING_F_EXACT_SZ); // room for one Nack
    Nack filler{};
    filler.flow = rig.flow_id;
    filler.msg_id = 77;
    filler.nranges = 1;
    REQUIRE(rte_ring_enqueue_elem(rig.q.r, &filler, sizeof(filler)) == 0); // the queue is full
    auto data = tmtest::pattern(4000, 90);
    auto pkts = rig.group(0, data);
    rte_pktmbuf_mtod_offset(pkts[1], uint8_t*, kFrameOverhead + 5)[0] ^= 0x01;
    for (auto* m : pkts)
        CHECK(rig.at(m, kT0) == R::None);
    CHECK(rig.drops(R::CrcMismatch) == 1);
    CHECK(rig.ctr().nack_q_full == 1);
    CHECK(rig.ctr().nacks == 0);
    CHECK(rig.one_nack(77) == "{0,0}"); // the filler; the queue has room again
    rig.placer.poll(kT0 + kDelay - 1);
    CHECK(rig.queued() == 0);            // not before the delay (this scan runs, the next is delay/2 later)
    rig.placer.poll(kT0 + kDelay - 1 + kDelay / 2);
    CHECK(rig.one_nack(0) == "{0,0}");   // the whole message, asked again
    CHECK(rig.ctr().nacks == 1);
    tmtest::free_all(pkts);
}

TEST_CASE("NACK delay 0: no NACK at all", "[rx][nack]") {
    RelRig rig(0);
    // Gaps under a LAST (scan), a probe, a missing message between two, a CRC mismatch.
    auto m0 = rig.group(0, five_pkt_msg(rig, 80));
    auto r0 = rig.retx_group(0, five_pkt_msg(rig, 80));
    for (int i : {0, 2, 4})
        CHECK(rig.at(m0[i], kT0) == R::None);
    CHECK(rig.at(r0[4], kT0 + 1) == R::Duplicate);
    auto m2 = rig.group(2, tmtest::pattern(100, 82));
    CHECK(rig.at(m2[0], kT0 + 2) == R::None);
    auto m3 = rig.group(3, tmtest::pattern(4000, 83));
    rte_pktmbuf_mtod_offset(m3[1], uint8_t*, kFrameOverhead + 17)[0] ^= 0x40;
    for (auto* m : m3)
        CHECK(rig.at(m, kT0 + 3) == R::None);
    CHECK(rig.drops(R::CrcMismatch) == 1);
    for (uint64_t t = 0; t <= 1'000'000; t += 250)
        rig.placer.poll(kT0 + t);
    CHECK(rig.queued() == 0);
    CHECK(rig.ctr().nacks == 0);
    CHECK(rig.ctr().nack_q_full == 0);
    CHECK(rig.ctr().retx == 1);
    // The cumulative ACK still works: nothing below 0 is complete.
    CHECK(rig.acked() == 0);
    tmtest::free_all(m0);
    tmtest::free_all(r0);
    tmtest::free_all(m2);
    tmtest::free_all(m3);
}

TEST_CASE("no NACK queue for the flow: nothing is asked, nothing breaks", "[rx][nack]") {
    Rig rig;
    rig.placer.set_nack_delay(kDelay);
    auto data = five_pkt_msg(rig, 90);
    auto pkts = rig.group(0, data);
    for (int i : {0, 2, 4})
        CHECK(rig.placer.process(pkts[i], kT0) == R::None);
    for (uint64_t t = 0; t <= 100 * kDelay; t += kDelay / 2)
        rig.placer.poll(kT0 + t);
    CHECK(rig.ctr().nacks == 0);
    CHECK(rig.placer.process(pkts[1], kT0 + 1) == R::None);
    CHECK(rig.placer.process(pkts[3], kT0 + 1) == R::None);
    CHECK(rig.completed(0));
    CHECK(rig.placer.acked_upto(rig.flow_id) == 1);
    tmtest::free_all(pkts);
}
