// lib/tailmark-engine's parts on their own: deferred free (what other
// threads may read goes only once its delay passed, oldest first), and the
// request rings an lcore serves between rounds (the engine's ops applied by
// the library, the application's handed to its handler, every one answered
// in order). Time is explicit ticks; the rings are real rte_rings.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "fixtures.h"
#include "tailmark/engine/deferred_free.h"
#include "tailmark/engine/lcore.h"

using namespace tailmark;
using engine::DeferredFree;
using engine::Request;

TEST_CASE("DeferredFree: an entry runs once its delay passed, to the tick, oldest first", "[engine]") {
    DeferredFree d(100);
    std::vector<int> ran;
    d.later(1000, [&] { ran.push_back(1); });
    d.later(1050, [&] { ran.push_back(2); });
    d.later(1020, [&] { ran.push_back(3); }); // let go later than 2's time, but queued after it
    CHECK(d.pending() == 3);
    CHECK(d.run(1099) == 0);
    CHECK(ran.empty());
    CHECK(d.run(1100) == 1);
    CHECK(ran == std::vector<int>{1});
    // 3 is due at 1120, but waits behind 2 (due at 1150): order is kept.
    CHECK(d.run(1120) == 0);
    CHECK(d.run(1150) == 2);
    CHECK(ran == std::vector<int>{1, 2, 3});
    CHECK(d.pending() == 0);
}

TEST_CASE("DeferredFree: an entry may defer another; run_all runs everything", "[engine]") {
    DeferredFree d(10);
    int a = 0, b = 0;
    d.later(0, [&] {
        a++;
        d.later(10, [&] { b++; });
    });
    CHECK(d.run(10) == 1); // the one it deferred is not due yet (10 + 10)
    CHECK(a == 1);
    CHECK(b == 0);
    CHECK(d.pending() == 1);
    d.later(1000, [&] { b += 10; });
    CHECK(d.run_all() == 2);
    CHECK(b == 11);
    CHECK(d.pending() == 0);
}

TEST_CASE("serve_requests: the application's ops to its handler, each answered in order", "[engine]") {
    const std::string name = tmtest::unique_name("eng_rq");
    rte_ring* req = rte_ring_create_elem((name + "q").c_str(), sizeof(Request), 16, SOCKET_ID_ANY,
                                         RING_F_SP_ENQ | RING_F_SC_DEQ);
    rte_ring* resp = rte_ring_create_elem((name + "p").c_str(), sizeof(Request), 16, SOCKET_ID_ANY,
                                          RING_F_SP_ENQ | RING_F_SC_DEQ);
    REQUIRE(req != nullptr);
    REQUIRE(resp != nullptr);
    std::vector<uint32_t> seen;
    auto app = [&](Request& r) {
        seen.push_back(r.index);
        r.ok = r.index % 2 == 0;
    };
    CHECK_FALSE(engine::serve_requests(req, resp, app)); // nothing asked

    const auto op = Request::Op::App1;
    for (uint32_t i = 0; i < 5; i++) {
        Request r{op};
        r.index = i;
        REQUIRE(rte_ring_sp_enqueue_elem(req, &r, sizeof(r)) == 0);
    }
    CHECK(engine::serve_requests(req, resp, app));
    CHECK(seen == std::vector<uint32_t>{0, 1, 2, 3, 4});
    for (uint32_t i = 0; i < 5; i++) {
        Request r{};
        REQUIRE(rte_ring_sc_dequeue_elem(resp, &r, sizeof(r)) == 0);
        CHECK(r.index == i);
        CHECK(r.op == op);
        CHECK(r.ok == (i % 2 == 0));
    }
    CHECK(rte_ring_count(resp) == 0);
    rte_ring_free(req);
    rte_ring_free(resp);
}
