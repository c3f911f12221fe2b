#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <rte_launch.h>
#include <rte_lcore.h>

#include "drivers/replay_pool.h"
#include "fixtures.h"

using tailmark::drivers::ReplayPool;

namespace {

constexpr uint32_t kN = 8;

std::unique_ptr<ReplayPool> make_pool() {
    std::string err;
    auto p = ReplayPool::create(tmtest::unique_name("rp"), kN, 2048, SOCKET_ID_ANY, err);
    INFO(err);
    REQUIRE(p);
    return p;
}

// kN packets from the pool, packet i's payload bytes 0xa0 + i, sealed: the
// builder's ready set.
std::vector<rte_mbuf*> ready_set(ReplayPool& p) {
    std::vector<rte_mbuf*> v(kN);
    REQUIRE(rte_pktmbuf_alloc_bulk(p.get(), v.data(), kN) == 0);
    for (uint32_t i = 0; i < kN; i++) {
        char* d = rte_pktmbuf_append(v[i], 100);
        REQUIRE(d != nullptr);
        memset(d, 0xa0 + i, 100);
    }
    p.seal(v.data(), kN);
    return v;
}

int free_all(void* arg) {
    auto* v = static_cast<std::vector<rte_mbuf*>*>(arg);
    rte_pktmbuf_free_bulk(v->data(), static_cast<unsigned>(v->size()));
    return 0;
}

} // namespace

TEST_CASE("replay pool: an ordinary pool until sealed", "[replaypool]") {
    auto p = make_pool();
    CHECK(rte_mempool_avail_count(p->get()) == kN);
    std::vector<rte_mbuf*> v(kN + 1);
    CHECK(rte_pktmbuf_alloc_bulk(p->get(), v.data(), kN + 1) != 0); // one too many
    REQUIRE(rte_pktmbuf_alloc_bulk(p->get(), v.data(), kN) == 0);
    CHECK(rte_mempool_avail_count(p->get()) == 0);
    rte_pktmbuf_free(v[0]); // back into the pool, and out again
    CHECK(rte_mempool_avail_count(p->get()) == 1);
    rte_mbuf* again = rte_pktmbuf_alloc(p->get());
    CHECK(again == v[0]);
    rte_pktmbuf_free_bulk(v.data(), kN);
    CHECK(rte_mempool_avail_count(p->get()) == kN);
}

TEST_CASE("replay pool: sealed, a free marks the packet reusable and keeps its bytes", "[replaypool]") {
    auto p = make_pool();
    std::vector<rte_mbuf*> v(kN - 2);
    REQUIRE(rte_pktmbuf_alloc_bulk(p->get(), v.data(), kN - 2) == 0);
    for (uint32_t i = 0; i < kN - 2; i++)
        memset(rte_pktmbuf_append(v[i], 100), 0xa0 + i, 100);
    p->seal(v.data(), kN - 2); // two spares stay in the pool
    CHECK(rte_mempool_avail_count(p->get()) == 2);
    for (uint32_t i = 0; i < kN - 2; i++) {
        CHECK(p->reusable(i));
        CHECK(rte_mbuf_refcnt_read(v[i]) == 1);
    }
    // Sent: not reusable until its free, then reusable, its bytes kept and
    // nothing back in the pool.
    p->take(3);
    CHECK_FALSE(p->reusable(3));
    CHECK(p->reusable(2));
    rte_pktmbuf_free(v[3]);
    CHECK(p->reusable(3));
    CHECK(rte_mbuf_refcnt_read(v[3]) == 1);
    CHECK(rte_pktmbuf_data_len(v[3]) == 100);
    CHECK(rte_pktmbuf_mtod(v[3], uint8_t*)[99] == 0xa3);
    CHECK(rte_mempool_avail_count(p->get()) == 2);
    // A bulk free (the receiver's) counts each; over 256 sends (the counts
    // wrap) the verdicts stay exact.
    for (int round = 0; round < 300; round++) {
        for (uint32_t i = 0; i < kN - 2; i++)
            p->take(i);
        for (uint32_t i = 0; i < kN - 2; i++)
            REQUIRE_FALSE(p->reusable(i));
        rte_pktmbuf_free_bulk(v.data(), kN - 2);
        for (uint32_t i = 0; i < kN - 2; i++)
            REQUIRE(p->reusable(i));
    }
    CHECK(rte_mempool_avail_count(p->get()) == 2);
    // A spare taken and freed after the seal goes back into the pool and
    // counts for no packet.
    rte_mbuf* spare = rte_pktmbuf_alloc(p->get());
    REQUIRE(spare != nullptr);
    CHECK(rte_mempool_avail_count(p->get()) == 1);
    p->take(0);
    rte_pktmbuf_free(spare);
    CHECK(rte_mempool_avail_count(p->get()) == 2);
    CHECK_FALSE(p->reusable(0));
    rte_pktmbuf_free(v[0]);
    CHECK(p->reusable(0));
}

TEST_CASE("replay pool: a free on another lcore is seen on the builder's", "[replaypool][lcores]") {
    const unsigned worker = rte_get_next_lcore(rte_lcore_id(), 1, 0);
    REQUIRE(worker < RTE_MAX_LCORE); // the runner starts EAL with -l 0-1
    auto p = make_pool();
    auto v = ready_set(*p);
    for (int round = 0; round < 1000; round++) {
        for (uint32_t i = 0; i < kN; i++)
            p->take(i);
        for (uint32_t i = 0; i < kN; i++)
            REQUIRE_FALSE(p->reusable(i));
        REQUIRE(rte_eal_remote_launch(free_all, &v, worker) == 0);
        REQUIRE(rte_eal_wait_lcore(worker) == 0);
        for (uint32_t i = 0; i < kN; i++)
            REQUIRE(p->reusable(i));
    }
    for (uint32_t i = 0; i < kN; i++)
        CHECK(rte_pktmbuf_mtod(v[i], uint8_t*)[50] == 0xa0 + i);
}
