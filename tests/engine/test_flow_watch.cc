// engine::FlowWatch on its own: flows in a registry, their completion rings
// real (hugepage memzones), the clock explicit (hz 1000: a tick is a ms).
// What an application running sessions is told about its flows: a consumer
// process that stopped releasing (stalled, then resumed), a session held at
// congestion control's floor (once, and not when its ceiling is the floor),
// and each flow's rates over the last second.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "fixtures.h"
#include "tailmark/engine/flow_watch.h"

using namespace tailmark;
using engine::FlowWatch;
using engine::FlowWatchConfig;
using engine::SessionFlow;

namespace {

constexpr uint64_t kHz = 1000;

// A completed message msg on ring r: its flag, as a Receiver stores it last.
void complete(CompletionRing& r, uint32_t msg) { __atomic_store_n(&r.slot(msg)->flag, uint64_t(msg) + 1, __ATOMIC_RELEASE); }

struct Flows {
    engine::FlowRegistry<SessionFlow> reg{8};
    std::vector<std::unique_ptr<SessionFlow>> own;
    SessionFlow& add(uint16_t ring_id) {
        own.push_back(std::make_unique<SessionFlow>());
        SessionFlow& f = *own.back();
        if (ring_id != 0)
            f.ring = tmtest::make_ring(ring_id, 16, 4096);
        uint32_t i = 0;
        SessionFlow* old = nullptr;
        REQUIRE(reg.add(&f, i, old));
        f.index = i;
        reg.publish();
        return f;
    }
};

} // namespace

TEST_CASE("FlowWatch: a consumer process that stops releasing a complete message is stalled, and resumes", "[engine]") {
    Flows fl;
    SessionFlow& a = fl.add(0xF171);
    SessionFlow& b = fl.add(0xF172);
    REQUIRE(a.ring);
    REQUIRE(b.ring);
    FlowWatch w(8);
    FlowWatchConfig c;
    c.hz = kHz;
    c.send_side = false;
    c.consumer_process = true; // stall_us 1 s: 1000 ticks
    w.configure(c);
    std::vector<uint32_t> cursor(2, 99);
    auto seen = [&](SessionFlow& f, uint32_t rel) { cursor[f.index] = rel; };

    w.tick(fl.reg, 1000, seen);
    CHECK(cursor == std::vector<uint32_t>{0, 0}); // every ring's cursor handed over
    // Nothing complete: no consumer is owing anything, however long.
    w.tick(fl.reg, 5000, seen);
    CHECK(w.stalled_count() == 0);

    complete(*b.ring, 0); // flow 1's message 0, from t=5000 on
    w.tick(fl.reg, 5999, seen);
    CHECK_FALSE(w.stalled(1));
    w.tick(fl.reg, 6000, seen); // a second since its cursor last had nothing to do
    CHECK(w.stalled(1));
    CHECK_FALSE(w.stalled(0));
    CHECK(w.stalled_count() == 1);

    REQUIRE(b.ring->release(0)); // the consumer moves again
    w.tick(fl.reg, 6001, seen);
    CHECK(cursor[1] == 1);
    CHECK_FALSE(w.stalled(1));
    CHECK(w.stalled_count() == 0);

    // A stalled slot that serves a new flow starts over.
    complete(*b.ring, 1);
    w.tick(fl.reg, 7001, seen);
    REQUIRE(w.stalled(1));
    w.slot_taken(1);
    CHECK_FALSE(w.stalled(1));
}

TEST_CASE("FlowWatch: a flow's rates are its messages over the last second", "[engine]") {
    Flows fl;
    SessionFlow& a = fl.add(0xF173);
    FlowWatch w(8);
    FlowWatchConfig c;
    c.hz = kHz;
    c.send_side = false;
    w.configure(c);
    w.tick(fl.reg, 1000); // the first look: no interval yet
    CHECK(w.rate_done(0) == 0);
    for (uint32_t m = 0; m < 5; m++) {
        complete(*a.ring, m);
        REQUIRE(a.ring->release(m));
    }
    w.tick(fl.reg, 1999); // not a second yet: the last figure stands
    CHECK(w.rate_done(0) == 0);
    w.tick(fl.reg, 2000);
    CHECK(w.rate_done(0) == 5.0);
    CHECK(w.rate_sent(0) == 0); // no send half on a receiver
    REQUIRE(a.ring->release(5));
    w.tick(fl.reg, 3000);
    CHECK(w.rate_done(0) == 1.0);
    w.slot_taken(0); // a new flow in the slot: no rate of the old one
    CHECK(w.rate_done(0) == 0);
}

TEST_CASE("FlowWatch: a session held at the congestion floor for a second is said once, not when its ceiling is the floor",
          "[engine]") {
    for (const uint64_t ceiling : {uint64_t(0), uint64_t(1)}) {
        CAPTURE(ceiling);
        Flows fl;
        SessionFlow& f = fl.add(0);
        engine::SessionRec rec;
        f.send_session = &rec;
        f.last_send.cc_rate_bps = 1e6; // the floor
        f.last_send.submitted = 5;     // work to do
        f.last_send.released = 0;
        FlowWatch w(8);
        FlowWatchConfig c;
        c.hz = kHz;
        c.cc_max_mbps = ceiling;
        w.configure(c);
        w.tick(fl.reg, 1000); // at the floor from here
        w.tick(fl.reg, 2000);
        CHECK_FALSE(rec.floor_said);
        w.tick(fl.reg, 2010);
        CHECK(rec.floor_said == (ceiling == 0));
        // Work done: a flow at the floor with nothing to send is no news.
        rec.floor_said = false;
        f.last_send.released = 5;
        w.tick(fl.reg, 2020);
        w.tick(fl.reg, 4000);
        CHECK_FALSE(rec.floor_said);
    }
}
