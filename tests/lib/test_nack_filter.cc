// NackFilter (nack_filter.h): which part of a NACK is news to the Sender.
// Run with the [sender] suite.
#include <catch2/catch.hpp>

#include "tailmark/nack_filter.h"

using namespace tailmark;

namespace {
constexpr unsigned kShift = 10; // a stamp unit: 1024 cycles

Nack nack(uint32_t msg_id, std::initializer_list<NackRange> rs) {
    Nack n{};
    n.flow = 1;
    n.msg_id = msg_id;
    for (const NackRange& r : rs)
        n.ranges[n.nranges++] = r;
    return n;
}

uint16_t stamp(uint64_t tsc) { return static_cast<uint16_t>(tsc >> kShift); }

std::vector<std::pair<int, int>> ranges(const Nack& n) {
    std::vector<std::pair<int, int>> v;
    for (uint32_t i = 0; i < n.nranges; i++)
        v.emplace_back(n.ranges[i].first, n.ranges[i].count);
    return v;
}
using V = std::vector<std::pair<int, int>>;

// What the Sender does with a NACK: its news served, and recorded so.
Nack take(NackFilter& f, const Nack& n, bool has_echo, uint16_t echo, uint64_t now) {
    const Nack out = f.news(n, has_echo, echo, now, kShift);
    if (out.nranges != 0)
        f.took(out, now);
    return out;
}
} // namespace

TEST_CASE("NackFilter: a NACK that cannot have seen the last retransmission keeps only new gaps", "[sender]") {
    NackFilter f;
    const uint64_t t0 = 1000000;               // the data packets left
    const uint64_t t1 = t0 + 400 * (1 << kShift); // the first NACK is taken
    // The first NACK of a message is all news.
    CHECK(ranges(take(f, nack(7, {{2, 3}, {9, 1}}), true, stamp(t0), t1)) == V{{2, 3}, {9, 1}});
    SECTION("the same gaps again, echoing a packet sent before the taking: nothing new") {
        const uint64_t t2 = t1 + 200 * (1 << kShift);
        CHECK(take(f, nack(7, {{2, 3}, {9, 1}}), true, stamp(t0 + 300 * (1 << kShift)), t2).nranges == 0);
        SECTION("new gaps beyond those asked for are news, cut at the old ones' end") {
            CHECK(ranges(take(f, nack(7, {{2, 3}, {8, 4}, {20, 0}}), true, stamp(t0), t2 + 10)) ==
                  V{{10, 2}, {20, 0}});
            // ... and from then on every packet was asked for.
            CHECK(take(f, nack(7, {{30, 2}}), true, stamp(t0), t2 + 20).nranges == 0);
        }
    }
    SECTION("echoing a packet sent after the taking: the retransmission was lost, all news") {
        const uint64_t t2 = t1 + 5000 * (1 << kShift);
        CHECK(ranges(take(f, nack(7, {{2, 3}}), true, stamp(t1 + 1 * (1 << kShift)), t2)) == V{{2, 3}});
    }
    SECTION("a NACK without an echo, or of another message: news") {
        CHECK(ranges(take(f, nack(7, {{2, 3}}), false, 0, t1 + 10)) == V{{2, 3}});
        CHECK(ranges(take(f, nack(8, {{2, 3}}), true, stamp(t0), t1 + 20)) == V{{2, 3}});
    }
    SECTION("after a timer probe: news") {
        f.forget();
        CHECK(ranges(take(f, nack(7, {{2, 3}}), true, stamp(t0), t1 + 10)) == V{{2, 3}});
    }
    SECTION("a taking older than half the stamps' circle is no evidence: news") {
        const uint64_t t2 = t1 + (uint64_t(0x8000) << kShift);
        CHECK(ranges(take(f, nack(7, {{2, 3}}), true, stamp(t0), t2)) == V{{2, 3}});
    }
    SECTION("stamps that wrapped between the data and the NACK") {
        // Data at stamp 0xFFF0, the taking and the repeat past the wrap.
        NackFilter g;
        const uint64_t d = uint64_t(0xFFF0) << kShift;
        const uint64_t a = d + (uint64_t(0x20) << kShift), b = a + (uint64_t(0x10) << kShift);
        REQUIRE(take(g, nack(3, {{0, 1}}), true, stamp(d), a).nranges == 1);
        CHECK(take(g, nack(3, {{0, 1}}), true, stamp(d), b).nranges == 0);
        CHECK(take(g, nack(3, {{0, 1}}), true, stamp(a + 1024), b + 1).nranges == 1);
    }
}

TEST_CASE("NackFilter: four messages at once, the oldest taking gives way", "[sender]") {
    NackFilter f;
    const uint64_t t0 = 1 << 20, t1 = t0 + (100 << kShift);
    for (uint32_t m = 0; m < 4; m++)
        REQUIRE(take(f, nack(m, {{0, 1}}), true, stamp(t0), t1 + m).nranges == 1);
    for (uint32_t m = 0; m < 4; m++)
        CHECK(take(f, nack(m, {{0, 1}}), true, stamp(t0), t1 + 10 + m).nranges == 0);
    // A fifth message takes the entry of the oldest taking (message 0's).
    REQUIRE(take(f, nack(4, {{0, 1}}), true, stamp(t0), t1 + 20).nranges == 1);
    CHECK(take(f, nack(0, {{0, 1}}), true, stamp(t0), t1 + 21).nranges == 1);
    CHECK(take(f, nack(4, {{0, 1}}), true, stamp(t0), t1 + 22).nranges == 0);
}
