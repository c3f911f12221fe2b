#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include "drivers/fault_shim.h"
#include "fixtures.h"

using tailmark::drivers::FaultShim;
using tailmark::drivers::FaultSpec;
using tailmark::drivers::parse_fault_spec;

namespace {

// A burst of n distinct one-segment packets; byte 20 of packet i is i.
std::vector<rte_mbuf*> burst(rte_mempool* mp, uint16_t n, uint16_t first = 0) {
    std::vector<rte_mbuf*> v;
    for (uint16_t i = 0; i < n; i++) {
        std::vector<uint8_t> b(100, 0);
        b[20] = static_cast<uint8_t>(first + i);
        v.push_back(tmtest::mbuf_of(mp, b));
    }
    return v;
}

uint8_t tag(const rte_mbuf* m) { return rte_pktmbuf_mtod(m, const uint8_t*)[20]; }

} // namespace

TEST_CASE("fault spec: parsed, and every error names its field", "[fault]") {
    FaultSpec s;
    std::string err;
    REQUIRE(parse_fault_spec("drop=0.01,dup=0.02,reorder=0.1,corrupt=0.01,seed=42", s, err));
    CHECK(s.drop == 0.01);
    CHECK(s.dup == 0.02);
    CHECK(s.reorder == 0.1);
    CHECK(s.corrupt == 0.01);
    CHECK(s.seed == 42);
    CHECK(s.active());
    REQUIRE(parse_fault_spec("", s, err));
    CHECK_FALSE(s.active());
    struct Bad {
        const char* text;
        const char* names;
    } bad[] = {{"drop=1.5", "drop"}, {"dup=-0.1", "dup"}, {"reorder=x", "reorder"}, {"corrupt=", "corrupt"},
               {"loss=0.1", "loss"}, {"drop", "drop"}, {"seed=-1", "seed"}, {"seed=abc", "seed"}};
    for (const Bad& b : bad) {
        INFO(b.text);
        CHECK_FALSE(parse_fault_spec(b.text, s, err));
        CHECK(err.find(b.names) != std::string::npos);
    }
}

TEST_CASE("fault shim: nothing configured changes nothing", "[fault]") {
    tmtest::Pool pool;
    FaultShim shim(FaultSpec{}, tmtest::unique_name("fs").c_str());
    auto v = burst(pool.mp, 32);
    auto orig = v;
    CHECK(shim.apply(v.data(), 32, 32) == 32);
    CHECK(v == orig);
    tmtest::free_all(v);
    CHECK(pool.avail() == 8191);
}

TEST_CASE("fault shim: drop=1 frees everything, nothing leaks", "[fault]") {
    tmtest::Pool pool;
    FaultShim shim(FaultSpec{1, 0, 0, 0, 1}, tmtest::unique_name("fs").c_str());
    auto v = burst(pool.mp, 32);
    CHECK(shim.apply(v.data(), 32, 32) == 0);
    CHECK(shim.counters().dropped == 32);
    CHECK(pool.avail() == 8191);
}

TEST_CASE("fault shim: dup=1 doubles within the burst's room, by reference", "[fault]") {
    tmtest::Pool pool;
    FaultShim shim(FaultSpec{0, 1, 0, 0, 1}, tmtest::unique_name("fs").c_str());
    std::vector<rte_mbuf*> v = burst(pool.mp, 8);
    v.resize(16);
    CHECK(shim.apply(v.data(), 8, 16) == 16);
    for (int i = 0; i < 16; i += 2) {
        CHECK(v[i] == v[i + 1]);
        CHECK(rte_mbuf_refcnt_read(v[i]) == 2);
    }
    CHECK(shim.counters().duplicated == 8);
    rte_pktmbuf_free_bulk(v.data(), 16); // each reference freed once
    CHECK(pool.avail() == 8191);
    // No room: no duplicate, and no packet pushed out.
    auto w = burst(pool.mp, 8);
    CHECK(shim.apply(w.data(), 8, 8) == 8);
    tmtest::free_all(w);
    CHECK(pool.avail() == 8191);
}

TEST_CASE("fault shim: reordering holds packets back behind later ones", "[fault]") {
    tmtest::Pool pool;
    FaultShim shim(FaultSpec{0, 0, 0.5, 0, 7}, tmtest::unique_name("fs").c_str());
    std::vector<uint8_t> order;
    size_t in = 0;
    for (int b = 0; b < 20; b++) {
        std::vector<rte_mbuf*> v = burst(pool.mp, 8, static_cast<uint16_t>(b * 8));
        v.resize(32);
        in += 8;
        const uint16_t k = shim.apply(v.data(), 8, 32);
        for (uint16_t i = 0; i < k; i++)
            order.push_back(tag(v[i]));
        rte_pktmbuf_free_bulk(v.data(), k);
    }
    std::vector<rte_mbuf*> tail(32);
    const uint16_t k = shim.apply(tail.data(), 0, 32); // an empty poll releases the rest
    for (uint16_t i = 0; i < k; i++)
        order.push_back(tag(tail[i]));
    rte_pktmbuf_free_bulk(tail.data(), k);
    CHECK(order.size() == in); // nothing lost, nothing added
    std::vector<uint8_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); i++)
        CHECK(sorted[i] == static_cast<uint8_t>(i));
    CHECK_FALSE(std::is_sorted(order.begin(), order.end())); // some came behind later ones
    CHECK(shim.counters().reordered > 0);
    CHECK(pool.avail() == 8191);
}

TEST_CASE("fault shim: corruption flips one bit past the Ethernet header", "[fault]") {
    tmtest::Pool pool;
    FaultShim shim(FaultSpec{0, 0, 0, 1, 3}, tmtest::unique_name("fs").c_str());
    auto v = burst(pool.mp, 16);
    std::vector<std::vector<uint8_t>> before;
    for (auto* m : v)
        before.push_back(tmtest::flat(m));
    CHECK(shim.apply(v.data(), 16, 16) == 16);
    for (size_t i = 0; i < v.size(); i++) {
        auto after = tmtest::flat(v[i]);
        int bits = 0;
        for (size_t j = 0; j < after.size(); j++) {
            bits += __builtin_popcount(after[j] ^ before[i][j]);
            if (j < RTE_ETHER_HDR_LEN)
                CHECK(after[j] == before[i][j]);
        }
        CHECK(bits == 1);
    }
    CHECK(shim.counters().corrupted == 16);
    tmtest::free_all(v);
}

TEST_CASE("fault shim: a fixed seed replays every decision", "[fault]") {
    tmtest::Pool pool;
    const FaultSpec spec{0.2, 0.1, 0.2, 0.1, 12345};
    auto run = [&]() {
        FaultShim shim(spec, tmtest::unique_name("fs").c_str());
        std::vector<int> trace;
        for (int b = 0; b < 50; b++) {
            std::vector<rte_mbuf*> v = burst(pool.mp, 16, static_cast<uint16_t>(b * 16));
            v.resize(32);
            const uint16_t k = shim.apply(v.data(), 16, 32);
            for (uint16_t i = 0; i < k; i++) {
                auto f = tmtest::flat(v[i]);
                trace.push_back(tag(v[i]));
                trace.push_back(static_cast<int>(std::accumulate(f.begin(), f.end(), 0u)));
            }
            rte_pktmbuf_free_bulk(v.data(), k);
        }
        auto c = shim.counters();
        trace.insert(trace.end(), {int(c.dropped), int(c.duplicated), int(c.reordered), int(c.corrupted)});
        return trace;
    };
    auto a = run();
    auto b = run();
    CHECK(a == b);
    CHECK(pool.avail() == 8191);
}

TEST_CASE("fault shim: a new spec from the control plane applies from the next burst", "[fault]") {
    tmtest::Pool pool;
    FaultShim shim(FaultSpec{}, tmtest::unique_name("fs").c_str());
    auto v = burst(pool.mp, 8);
    CHECK(shim.apply(v.data(), 8, 8) == 8);
    tmtest::free_all(v);
    REQUIRE(shim.set(FaultSpec{1, 0, 0, 0, 9}));
    CHECK(shim.counters().dropped == 0);
    auto w = burst(pool.mp, 8);
    CHECK(shim.apply(w.data(), 8, 8) == 0);
    CHECK(shim.counters().dropped == 8);
    CHECK(shim.spec().seed == 9);
    REQUIRE(shim.set(FaultSpec{}));
    auto x = burst(pool.mp, 8);
    CHECK(shim.apply(x.data(), 8, 8) == 8);
    tmtest::free_all(x);
    CHECK(pool.avail() == 8191);
}
