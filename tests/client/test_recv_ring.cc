// The receive side: a ring laid out by hand with ring_layout(), read the
// way the library reads the daemon's (flags, order, the release cursor),
// and headers that must be refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fake_daemon.h"
#include "recv_ring.h"

using tailmark::client::LastError;
using tailmark::client::RecvRing;
using tailmark::client::RecvView;

namespace {

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string str(const RecvView& v) { return {reinterpret_cast<const char*>(v.data), v.len}; }

struct HandRing {
    std::vector<uint8_t> mem;
    uint8_t* base;
    uint64_t total;
    HandRing(uint32_t ring, uint64_t region) {
        total = tailmark::ring_layout(ring, region).total;
        mem.resize(total + 4096);
        base = mem.data() + (4096 - reinterpret_cast<uintptr_t>(mem.data()) % 4096) % 4096;
        tmtest::lay_out_ring(base, ring, region);
    }
    tailmark::RingHeader* hdr() { return reinterpret_cast<tailmark::RingHeader*>(base); }
};

} // namespace

TEST_CASE("recv ring: messages in msg_id order once their flags read msg_id + 1", "[recv]") {
    HandRing h(4, 100);
    RecvRing r;
    LastError err;
    REQUIRE(RecvRing::open(h.base, h.total, 4, 100, r, err) == 0);
    RecvView v{};
    CHECK(!r.ready());
    CHECK(r.next(&v, err) == 0);
    tmtest::complete(h.base, 1, bytes("second")); // out of order: not returned before 0
    CHECK(r.next(&v, err) == 0);
    CHECK(!r.ready());
    tmtest::complete(h.base, 0, bytes("first"));
    CHECK(r.ready());
    REQUIRE(r.next(&v, err) == 1);
    CHECK(v.msg_id == 0);
    CHECK(str(v) == "first");
    REQUIRE(r.next(&v, err) == 1); // held two at once: allowed
    CHECK(v.msg_id == 1);
    CHECK(str(v) == "second");
    CHECK(r.next(&v, err) == 0);
    CHECK(tmtest::released(h.base) == 0); // nothing handed back yet
    CHECK(r.release(0, err) == 0);
    CHECK(tmtest::released(h.base) == 1);
    CHECK(r.release(1, err) == 0);
    CHECK(tmtest::released(h.base) == 2);
}

TEST_CASE("recv ring: a stale flag of the previous lap is not a message", "[recv]") {
    HandRing h(2, 64);
    RecvRing r;
    LastError err;
    REQUIRE(RecvRing::open(h.base, h.total, 2, 64, r, err) == 0);
    RecvView v{};
    for (uint32_t id = 0; id < 2; ++id) {
        tmtest::complete(h.base, id, bytes("x"));
        REQUIRE(r.next(&v, err) == 1);
        REQUIRE(r.release(id, err) == 0);
    }
    // Slot 0 still holds message 0's flag (1); message 2 wants 3.
    CHECK(!r.ready());
    CHECK(r.next(&v, err) == 0);
    tmtest::complete(h.base, 2, bytes("lap two"));
    REQUIRE(r.next(&v, err) == 1);
    CHECK(v.msg_id == 2);
    CHECK(str(v) == "lap two");
    // Region of slot 0 again, at the layout's offset.
    const auto* hdr = h.hdr();
    CHECK(v.data == h.base + hdr->regions_offset);
}

TEST_CASE("recv ring: release only in order, only what was received", "[recv]") {
    HandRing h(8, 64);
    RecvRing r;
    LastError err;
    REQUIRE(RecvRing::open(h.base, h.total, 8, 64, r, err) == 0);
    CHECK(r.release(0, err) == -EINVAL); // nothing received yet
    CHECK_THAT(err.get(), Catch::Contains("was not received"));
    for (uint32_t id = 0; id < 3; ++id)
        tmtest::complete(h.base, id, bytes("m"));
    RecvView v{};
    for (int i = 0; i < 3; ++i)
        REQUIRE(r.next(&v, err) == 1);
    CHECK(r.release(1, err) == -EINVAL);
    CHECK_THAT(err.get(), Catch::Contains("message 1 out of order (the next to release on this flow is 0)"));
    CHECK(tmtest::released(h.base) == 0);
    CHECK(r.release(0, err) == 0);
    CHECK(r.release(0, err) == -EINVAL); // twice
    CHECK(r.release(1, err) == 0);
    CHECK(r.release(2, err) == 0);
    CHECK(r.release(3, err) == -EINVAL);
    CHECK(tmtest::released(h.base) == 3);
}

TEST_CASE("recv ring: ids wrap past 2^32 (the flag is 64 bits: msg_id + 1 without wrapping)", "[recv]") {
    HandRing h(4, 64);
    auto* cur = reinterpret_cast<tailmark::ConsumerCursor*>(h.base + tailmark::ring_layout(4, 64).cursor);
    cur->released = 0xFFFFFFFFu; // a ring that has seen 2^32 - 1 messages
    RecvRing r;
    LastError err;
    REQUIRE(RecvRing::open(h.base, h.total, 4, 64, r, err) == 0);
    CHECK(r.next_id() == 0xFFFFFFFFu);
    tmtest::complete(h.base, 0xFFFFFFFFu, bytes("last"));
    tmtest::complete(h.base, 0, bytes("first again"));
    RecvView v{};
    REQUIRE(r.next(&v, err) == 1);
    CHECK(v.msg_id == 0xFFFFFFFFu);
    CHECK(str(v) == "last");
    REQUIRE(r.next(&v, err) == 1);
    CHECK(v.msg_id == 0);
    CHECK(str(v) == "first again");
    CHECK(r.release(0xFFFFFFFFu, err) == 0);
    CHECK(r.release(0, err) == 0);
    CHECK(tmtest::released(h.base) == 1);
}

TEST_CASE("recv ring: a length past the region is refused, never read", "[recv]") {
    HandRing h(4, 100);
    RecvRing r;
    LastError err;
    REQUIRE(RecvRing::open(h.base, h.total, 4, 100, r, err) == 0);
    tmtest::complete(h.base, 0, bytes("ok"));
    auto* slot = reinterpret_cast<tailmark::CompletionSlot*>(h.base + h.hdr()->slots_offset);
    slot->msg_len = 101;
    RecvView v{};
    CHECK(r.next(&v, err) == -EPROTO);
    CHECK_THAT(err.get(), Catch::Contains("claims 101 bytes, past its 100-byte region"));
    slot->msg_len = 100; // exactly the region: fine
    REQUIRE(r.next(&v, err) == 1);
    CHECK(v.len == 100);
}

TEST_CASE("recv ring: a header that is not what ACCEPTED said is refused", "[recv]") {
    LastError err;
    RecvRing r;
    auto refused = [&](HandRing& h, uint32_t ring, uint64_t region, uint64_t avail, const char* what) {
        CHECK(RecvRing::open(h.base, avail, ring, region, r, err) == -EPROTO);
        CHECK_THAT(err.get(), Catch::Contains(what));
    };
    {
        HandRing h(4, 100);
        h.hdr()->magic = 0x12345678;
        refused(h, 4, 100, h.total, "magic 0x12345678");
    }
    {
        HandRing h(4, 100);
        h.hdr()->version = tailmark::kRingVersion + 1;
        refused(h, 4, 100, h.total, "layout version");
    }
    {
        HandRing h(4, 100);
        refused(h, 8, 100, h.total + 4096, "4 slots of 100 B, but ACCEPTED said 8 of 100 B");
        refused(h, 4, 64, h.total, "4 slots of 100 B, but ACCEPTED said 4 of 64 B");
        refused(h, 4, 100, h.total - 1, "mapped for it"); // not all of it is mapped
        refused(h, 3, 100, h.total, "out of range");
    }
    {
        HandRing h(4, 100);
        h.hdr()->region_stride = 64; // regions overlapping
        refused(h, 4, 100, h.total, "offsets");
    }
    {
        HandRing h(4, 100);
        h.hdr()->slots_offset += 64;
        refused(h, 4, 100, h.total, "offsets");
    }
}
