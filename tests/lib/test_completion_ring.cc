#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_memzone.h>

#include "fixtures.h"
#include "tailmark/rx_placer.h"

using namespace tailmark;

TEST_CASE("ring layout: power-of-two 64-byte slots, aligned regions", "[ring]") {
    CHECK(tmtest::make_ring(900, 3, 4096) == nullptr);
    CHECK(rte_errno == EINVAL);
    CHECK(tmtest::make_ring(900, 0, 4096) == nullptr);
    auto r = tmtest::make_ring(900, 16, 5000);
    REQUIRE(r);
    CHECK(r->size() == 16);
    CHECK(r->mask() == 15);
    CHECK(r->flow() == 900);
    CHECK(r->region_size() == 5000);
    const auto base = reinterpret_cast<uintptr_t>(r->slot(0));
    CHECK(base % 64 == 0);
    for (uint32_t i = 0; i < 16; i++) {
        CHECK(reinterpret_cast<uintptr_t>(r->slot(i)) == base + i * 64u);
        CHECK(reinterpret_cast<uintptr_t>(r->region(i)) % kRegionAlign == 0);
        CHECK(r->slot(i)->flag == 0);
    }
    CHECK(r->slot(16) == r->slot(0)); // msg_id mod ring
    CHECK(r->region(1) - r->region(0) >= 5000);
    // Regions lie inside the memzone, after the slots.
    const auto* mz = r->memzone();
    auto end = reinterpret_cast<uintptr_t>(mz->addr) + mz->len;
    CHECK(reinterpret_cast<uintptr_t>(r->region(15)) + 5000 <= end);
    CHECK(reinterpret_cast<uintptr_t>(r->region(0)) >= base + 16 * 64);
    CHECK(mz->socket_id >= 0);
}

TEST_CASE("a ring is found by name and freed with its owner", "[ring]") {
    {
        auto owner = tmtest::make_ring(901, 4, 1024);
        REQUIRE(owner);
        CHECK(rte_memzone_lookup(ring_name(901).c_str()) == owner->memzone());
        CHECK(tmtest::make_ring(901, 4, 1024) == nullptr); // one ring per flow
        auto seen = CompletionRing::attach(901);
        REQUIRE(seen);
        CHECK(seen->size() == 4);
        CHECK(seen->slot(3) == owner->slot(3));
        CHECK(seen->region(2) == owner->region(2));
    }
    CHECK(rte_memzone_lookup(ring_name(901).c_str()) == nullptr);
    CHECK(CompletionRing::attach(901) == nullptr);
}

TEST_CASE("a ring of another layout version is refused, not misread", "[ring]") {
    auto owner = tmtest::make_ring(903, 4, 1024);
    REQUIRE(owner);
    auto* hdr = static_cast<RingHeader*>(owner->memzone()->addr);
    CHECK(hdr->version == kRingVersion);
    REQUIRE(CompletionRing::attach(903));
    hdr->version = kRingVersion - 1; // a daemon from an older build
    rte_errno = 0;
    CHECK(CompletionRing::attach(903) == nullptr);
    CHECK(rte_errno == EPROTO);
    hdr->version = kRingVersion;
    CHECK(CompletionRing::attach(903) != nullptr);
}

TEST_CASE("consumer API: poll, read in place, release in order", "[ring]") {
    auto r = tmtest::make_ring(902, 4, 256);
    REQUIRE(r);
    CHECK(r->poll(0) == nullptr);
    CHECK(r->released() == 0);
    // Complete msg 0 by hand as the receiver would.
    memset(r->region(0), 0x5A, 10);
    r->slot(0)->msg_id = 0;
    r->slot(0)->msg_len = 10;
    std::atomic_ref<uint64_t>(r->slot(0)->flag).store(1, std::memory_order_release);
    const CompletionSlot* s = r->poll(0);
    REQUIRE(s != nullptr);
    CHECK(r->poll(4) == nullptr); // same slot, a later message: not yet
    auto msg = r->message(s);
    CHECK(msg.size() == 10);
    CHECK(msg[9] == 0x5A);
    CHECK_FALSE(r->release(1));
    CHECK(r->release(0));
    CHECK_FALSE(r->release(0));
    CHECK(r->released() == 1);
}

// Regression: in packet mode the receiver writes no flag, so release() took
// every message for one that never completed and bumped the give-up line
// once per release, a write the receiver then reads per packet.
TEST_CASE("packet mode releases what it consumed without counting a give-up", "[ring]") {
    auto r = tmtest::make_ring(905, 4, 256);
    REQUIRE(r);
    for (uint32_t m = 0; m < 10; m++)
        CHECK(r->release_seen(m));
    CHECK(r->released() == 10);
    CHECK(r->gave_up() == 0);
    CHECK_FALSE(r->release_seen(3)); // out of order: refused
    // A give-up is still one: release() of a message whose flag is not set.
    CHECK(r->release(10));
    CHECK(r->gave_up() == 1);
}

namespace {

struct TwoLcore {
    CompletionRing* ring;
    RxPlacer* placer;
    rte_mempool* mp;
    TxFlow flow;
    uint32_t messages;
    uint32_t msg_len;
    std::atomic<bool> failed{false};
};

// Receiver side on its own lcore: builds each message's packets (as if they
// had just arrived) once the window has room, and feeds the placer.
int receiver_lcore(void* arg) {
    auto* t = static_cast<TwoLcore*>(arg);
    TxMarker tx(t->mp, PayloadMode::Copy);
    auto data = std::vector<uint8_t>(t->msg_len);
    for (uint32_t id = 0; id < t->messages; id++) {
        while (id - t->ring->released() >= t->ring->size())
            rte_pause();
        for (uint32_t i = 0; i < t->msg_len; i++)
            data[i] = static_cast<uint8_t>(id * 31 + i);
        TxMessage m;
        m.msg_id = id;
        m.bytes = data;
        if (!tx.prepare(t->flow, m)) {
            t->failed = true;
            return -1;
        }
        rte_mbuf* pkts[TxMarker::kMaxBurst];
        int n = tx.build(t->flow, m, 0, m.plan.pkt_count, pkts);
        if (n <= 0) {
            t->failed = true;
            return -1;
        }
        t->placer->rx_burst(pkts, static_cast<uint16_t>(n), rte_rdtsc());
    }
    return 0;
}

} // namespace

TEST_CASE("acquire/release between two lcores: every byte seen with its flag", "[ring][lcores]") {
    const unsigned worker = rte_get_next_lcore(rte_lcore_id(), 1, 0);
    REQUIRE(worker < RTE_MAX_LCORE); // the runner starts EAL with -l 0-1
    tmtest::Pool pool;
    auto ring = tmtest::make_ring(903, 8, 4096);
    REQUIRE(ring);
    RxPlacer placer(ParserConfig{}, SOCKET_ID_ANY);
    REQUIRE(placer.add_flow(903, ring.get(), 77, stride_for_mtu(1500)));
    TwoLcore t;
    t.ring = ring.get();
    t.placer = &placer;
    t.mp = pool.mp;
    t.flow = tmtest::make_flow(903, 77, 8);
    t.messages = 50000;
    t.msg_len = 2000; // two packets
    REQUIRE(rte_eal_remote_launch(receiver_lcore, &t, worker) == 0);

    uint32_t errors = 0;
    for (uint32_t id = 0; id < t.messages; id++) {
        const CompletionSlot* s;
        while ((s = ring->poll(id)) == nullptr) {
            if (t.failed)
                break;
            rte_pause();
        }
        if (s == nullptr)
            break;
        auto msg = ring->message(s);
        if (msg.size() != t.msg_len || s->msg_id != id)
            errors++;
        for (uint32_t i = 0; i < msg.size(); i++)
            if (msg[i] != static_cast<uint8_t>(id * 31 + i)) {
                errors++;
                break;
            }
        REQUIRE(ring->release(id));
    }
    CHECK(rte_eal_wait_lcore(worker) == 0);
    CHECK_FALSE(t.failed);
    CHECK(errors == 0);
    CHECK(ring->released() == t.messages);
    CHECK(placer.counters().completions == t.messages);
    CHECK(placer.counters().dropped() == 0);
}
