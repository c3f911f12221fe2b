// FlowIds (flow_ids.h): released ids come back, but only after their
// quarantine, so a late packet of the old owner never finds a new flow
// under its id. Time is explicit ticks.
#include <catch2/catch.hpp>

#include "tailmark/flow_ids.h"

using namespace tailmark;

namespace {
constexpr uint64_t T0 = 1'000'000;
constexpr uint64_t Q = 6000; // the quarantine
} // namespace

TEST_CASE("FlowIds: first fit, contiguous blocks, refusal when full", "[flowids]") {
    FlowIds ids;
    ids.set_quarantine(Q);
    CHECK(ids.alloc(0, T0) == -1);
    CHECK(ids.alloc(FlowIds::kIds + 1, T0) == -1);
    CHECK(ids.alloc(4, T0) == 0);
    CHECK(ids.alloc(1, T0) == 4);
    CHECK(ids.alloc(FlowIds::kIds - 5, T0) == 5);
    CHECK(ids.alloc(1, T0) == -1);
    CHECK(ids.used(0));
    CHECK(ids.used(FlowIds::kIds - 1));
    CHECK_FALSE(ids.used(FlowIds::kIds));
    CHECK(ids.reused() == 0);
}

TEST_CASE("FlowIds: a released id waits out its quarantine, to the tick", "[flowids]") {
    FlowIds ids;
    ids.set_quarantine(Q);
    REQUIRE(ids.alloc(4, T0) == 0);
    ids.release(0, 4, T0 + 10);
    CHECK(ids.quarantined() == 4);
    CHECK(ids.used(0));
    // Within the quarantine a new session gets other ids, never 0..3.
    CHECK(ids.alloc(4, T0 + 10 + Q - 1) == 4);
    CHECK(ids.quarantined() == 4);
    CHECK(ids.reused() == 0);
    // At its end exactly they are free again, and first fit takes them.
    CHECK(ids.alloc(2, T0 + 10 + Q) == 0);
    CHECK(ids.quarantined() == 0);
    CHECK(ids.reused() == 2);
    CHECK(ids.alloc(2, T0 + 10 + Q) == 2);
    CHECK(ids.reused() == 4);
    CHECK(ids.alloc(1, T0 + 10 + Q) == 8);
    CHECK(ids.reused() == 4);
}

TEST_CASE("FlowIds: ids no packet carried come back at once", "[flowids]") {
    FlowIds ids;
    ids.set_quarantine(Q);
    REQUIRE(ids.alloc(3, T0) == 0);
    ids.unuse(0, 3);
    CHECK_FALSE(ids.used(0));
    CHECK(ids.quarantined() == 0);
    CHECK(ids.alloc(3, T0) == 0);
    CHECK(ids.reused() == 3);
}

TEST_CASE("FlowIds: more sessions in turn than the id space holds", "[flowids]") {
    // 1024 flows a session (the largest), 64 sessions fill the space; each
    // session ends as the next begins, a quarantine apart: 1000 sessions,
    // 15.6 times the id space, all served, and every id came back.
    FlowIds ids;
    ids.set_quarantine(Q);
    uint64_t now = T0;
    int prev = -1;
    uint32_t served = 0;
    for (uint32_t k = 0; k < 1000; k++, now += Q / 32) {
        const int base = ids.alloc(1024, now);
        if (base < 0)
            break;
        served++;
        if (prev >= 0)
            ids.release(static_cast<uint32_t>(prev), 1024, now);
        prev = base;
    }
    CHECK(served == 1000);
    CHECK(ids.reused() >= uint64_t(1000 - 64) * 1024);
    // With all 64 blocks held (in use or quarantined), the 65th waits.
    FlowIds full;
    full.set_quarantine(Q);
    for (uint32_t k = 0; k < 64; k++)
        REQUIRE(full.alloc(1024, T0) == int(k * 1024));
    for (uint32_t k = 0; k < 64; k++)
        full.release(k * 1024, 1024, T0 + k);
    CHECK(full.alloc(1024, T0 + Q - 1) == -1);
    CHECK(full.alloc(1024, T0 + Q) == 0);
    CHECK(full.alloc(1024, T0 + Q) == -1); // the second block's quarantine ends a tick later
    CHECK(full.alloc(1024, T0 + Q + 1) == 1024);
}
