// The send side's SPSC rings (channel_abi.h tm_spsc): full and empty, index
// wrap past 2^32, a producer and a consumer on two threads, and the
// validation of the CONNECTED geometry.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "fake_daemon.h"
#include "send_rings.h"
#include "spsc_ring.h"

namespace abi = tailmark::channel;
using tailmark::client::SpscConsumer;
using tailmark::client::SpscProducer;

namespace {

struct Ring {
    alignas(64) abi::tm_spsc hdr{};
    std::vector<abi::tm_sqe> e;
    explicit Ring(uint32_t size, uint32_t start = 0) : e(size) {
        hdr.size = size;
        hdr.entry_bytes = sizeof(abi::tm_sqe);
        hdr.head = hdr.tail = start;
    }
};

abi::tm_sqe sqe(uint64_t i) { return abi::tm_sqe{i * 64, static_cast<uint32_t>(i), 0, ~i}; }

} // namespace

TEST_CASE("spsc: empty, full, then in order", "[rings]") {
    Ring r(4);
    SpscProducer<abi::tm_sqe> p(&r.hdr, r.e.data());
    SpscConsumer<abi::tm_sqe> c(&r.hdr, r.e.data());
    abi::tm_sqe out{};
    CHECK(c.empty());
    CHECK(c.pop(&out) == 0);
    for (uint64_t i = 0; i < 4; ++i)
        CHECK(p.push(sqe(i)));
    CHECK(!p.push(sqe(4))); // full: size entries
    CHECK(p.pending() == 4);
    CHECK(r.hdr.head == 4);
    for (uint64_t i = 0; i < 4; ++i) {
        REQUIRE(c.pop(&out) == 1);
        CHECK(out.offset == i * 64);
        CHECK(out.cookie == ~i);
    }
    CHECK(c.pop(&out) == 0);
    CHECK(r.hdr.tail == 4);
    CHECK(p.push(sqe(4))); // room again
    CHECK(c.pop(&out) == 1);
    CHECK(out.len == 4);
}

TEST_CASE("spsc: indexes wrap past 2^32", "[rings]") {
    Ring r(8, 0xFFFFFFFCu);
    SpscProducer<abi::tm_sqe> p(&r.hdr, r.e.data());
    SpscConsumer<abi::tm_sqe> c(&r.hdr, r.e.data());
    for (uint64_t i = 0; i < 8; ++i)
        REQUIRE(p.push(sqe(i)));
    CHECK(!p.push(sqe(8)));        // full across the wrap
    CHECK(r.hdr.head == 4u);       // 0xFFFFFFFC + 8
    CHECK(p.pending() == 8);
    abi::tm_sqe out{};
    for (uint64_t i = 0; i < 8; ++i) {
        REQUIRE(c.pop(&out) == 1);
        CHECK(out.len == i);
    }
    CHECK(c.pop(&out) == 0);
    CHECK(r.hdr.tail == 4u);
    // Entry i sat in slot (0xFFFFFFFC + i) mod 8.
    CHECK(r.e[4].len == 0);
    CHECK(r.e[3].len == 7);
}

TEST_CASE("spsc: a producer's head more than a ring ahead is refused, not read", "[rings]") {
    Ring r(4);
    SpscConsumer<abi::tm_sqe> c(&r.hdr, r.e.data());
    r.hdr.head = 5; // the other side broke it
    abi::tm_sqe out{};
    CHECK(c.pop(&out) == -EPROTO);
    CHECK(!tailmark::client::spsc_valid<abi::tm_sqe>(&r.hdr, 4));
    r.hdr.head = 4;
    CHECK(tailmark::client::spsc_valid<abi::tm_sqe>(&r.hdr, 4));
    CHECK(!tailmark::client::spsc_valid<abi::tm_cqe>(&r.hdr, 4)); // another entry size
    CHECK(!tailmark::client::spsc_valid<abi::tm_sqe>(&r.hdr, 8)); // another ring size
}

TEST_CASE("spsc: two threads, a million entries, every one once and in order", "[rings]") {
    Ring r(64, 0xFFFF0000u); // wraps on the way
    constexpr uint64_t kN = 1'000'000;
    std::thread prod([&] {
        SpscProducer<abi::tm_sqe> p(&r.hdr, r.e.data());
        for (uint64_t i = 0; i < kN;) {
            if (p.push(sqe(i)))
                ++i;
            else
                std::this_thread::yield(); // two cores, or valgrind's one: let the consumer run
        }
    });
    SpscConsumer<abi::tm_sqe> c(&r.hdr, r.e.data());
    uint64_t next = 0, bad = 0;
    abi::tm_sqe out{};
    while (next < kN) {
        const int rc = c.pop(&out);
        if (rc < 0) {
            FAIL("pop: " << rc);
        } else if (rc == 1) {
            bad += out.offset != next * 64 || out.cookie != ~next || out.len != static_cast<uint32_t>(next);
            ++next;
        } else {
            std::this_thread::yield();
        }
    }
    prod.join();
    CHECK(bad == 0);
    CHECK(c.pop(&out) == 0);
    CHECK(r.hdr.tail == static_cast<uint32_t>(0xFFFF0000u + kN));
}

TEST_CASE("send rings: the CONNECTED geometry is checked before the rings are used", "[rings]") {
    tailmark::client::LastError err;
    tmtest::SendSide s = tmtest::SendSide::make(2, 16, 32);
    abi::tm_msg_connected c{};
    c.session = 5;
    c.nflows = 2;
    c.sq_size = 16;
    c.cq_size = 32;
    c.flow_stride = s.stride;
    c.send_bytes = 2 * s.stride;
    tailmark::client::Mapping m;
    std::vector<tailmark::client::SendFlow> flows;
    REQUIRE(tailmark::client::map_send_rings(c, s.mem.fd.get(), m, flows, err) == 0);
    REQUIRE(flows.size() == 2);
    // Our producer writes what the daemon's side reads, on the right flow.
    CHECK(flows[1].sq.push(sqe(9)));
    abi::tm_sqe got{};
    CHECK(!s.pop_sqe(0, got));
    REQUIRE(s.pop_sqe(1, got));
    CHECK(got.cookie == ~9ull);
    CHECK(s.push_cqe(0, abi::tm_cqe{77, 3, abi::TM_DELIVERED, 0, 0}));
    abi::tm_cqe cq{};
    CHECK(flows[1].cq.pop(&cq) == 0);
    REQUIRE(flows[0].cq.pop(&cq) == 1);
    CHECK(cq.cookie == 77);
    CHECK(cq.msg_id == 3);

    auto bad = [&](abi::tm_msg_connected x, const char* what) {
        tailmark::client::Mapping mm;
        std::vector<tailmark::client::SendFlow> ff;
        CHECK(tailmark::client::map_send_rings(x, s.mem.fd.get(), mm, ff, err) == -EPROTO);
        CHECK_THAT(err.get(), Catch::Contains(what));
    };
    abi::tm_msg_connected x = c;
    x.sq_size = 12;
    bad(x, "not powers of two");
    x = c;
    x.flow_stride = s.stride - 64;
    bad(x, "flow stride");
    x = c;
    x.send_bytes = s.stride;
    bad(x, "do not fit");
    x = c;
    x.nflows = 3;
    x.send_bytes = 3 * s.stride;
    bad(x, "holds");          // the memfd is smaller than announced
    x = c;
    x.cq_size = 16;           // the headers say 32
    x.flow_stride = s.stride;
    bad(x, "ring headers do not match");
}
