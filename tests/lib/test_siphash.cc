#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include <rte_cycles.h>

#include "fixtures.h"
#include "tailmark/siphash.h"

using namespace tailmark;

namespace {

// The reference implementation's SipHash-2-4 64-bit tags (veorq/SipHash,
// vectors.h, vectors_sip64): key 00 01 .. 0f, message 00 01 .. (len-1) for
// len 0..63; each tag is the little-endian bytes of the uint64_t.
const uint8_t kVectors[64][8] = {
    {0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72},
    {0xfd, 0x67, 0xdc, 0x93, 0xc5, 0x39, 0xf8, 0x74},
    {0x5a, 0x4f, 0xa9, 0xd9, 0x09, 0x80, 0x6c, 0x0d},
    {0x2d, 0x7e, 0xfb, 0xd7, 0x96, 0x66, 0x67, 0x85},
    {0xb7, 0x87, 0x71, 0x27, 0xe0, 0x94, 0x27, 0xcf},
    {0x8d, 0xa6, 0x99, 0xcd, 0x64, 0x55, 0x76, 0x18},
    {0xce, 0xe3, 0xfe, 0x58, 0x6e, 0x46, 0xc9, 0xcb},
    {0x37, 0xd1, 0x01, 0x8b, 0xf5, 0x00, 0x02, 0xab},
    {0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93},
    {0xb0, 0xe4, 0xa9, 0x0b, 0xdf, 0x82, 0x00, 0x9e},
    {0xf3, 0xb9, 0xdd, 0x94, 0xc5, 0xbb, 0x5d, 0x7a},
    {0xa7, 0xad, 0x6b, 0x22, 0x46, 0x2f, 0xb3, 0xf4},
    {0xfb, 0xe5, 0x0e, 0x86, 0xbc, 0x8f, 0x1e, 0x75},
    {0x90, 0x3d, 0x84, 0xc0, 0x27, 0x56, 0xea, 0x14},
    {0xee, 0xf2, 0x7a, 0x8e, 0x90, 0xca, 0x23, 0xf7},
    {0xe5, 0x45, 0xbe, 0x49, 0x61, 0xca, 0x29, 0xa1},
    {0xdb, 0x9b, 0xc2, 0x57, 0x7f, 0xcc, 0x2a, 0x3f},
    {0x94, 0x47, 0xbe, 0x2c, 0xf5, 0xe9, 0x9a, 0x69},
    {0x9c, 0xd3, 0x8d, 0x96, 0xf0, 0xb3, 0xc1, 0x4b},
    {0xbd, 0x61, 0x79, 0xa7, 0x1d, 0xc9, 0x6d, 0xbb},
    {0x98, 0xee, 0xa2, 0x1a, 0xf2, 0x5c, 0xd6, 0xbe},
    {0xc7, 0x67, 0x3b, 0x2e, 0xb0, 0xcb, 0xf2, 0xd0},
    {0x88, 0x3e, 0xa3, 0xe3, 0x95, 0x67, 0x53, 0x93},
    {0xc8, 0xce, 0x5c, 0xcd, 0x8c, 0x03, 0x0c, 0xa8},
    {0x94, 0xaf, 0x49, 0xf6, 0xc6, 0x50, 0xad, 0xb8},
    {0xea, 0xb8, 0x85, 0x8a, 0xde, 0x92, 0xe1, 0xbc},
    {0xf3, 0x15, 0xbb, 0x5b, 0xb8, 0x35, 0xd8, 0x17},
    {0xad, 0xcf, 0x6b, 0x07, 0x63, 0x61, 0x2e, 0x2f},
    {0xa5, 0xc9, 0x1d, 0xa7, 0xac, 0xaa, 0x4d, 0xde},
    {0x71, 0x65, 0x95, 0x87, 0x66, 0x50, 0xa2, 0xa6},
    {0x28, 0xef, 0x49, 0x5c, 0x53, 0xa3, 0x87, 0xad},
    {0x42, 0xc3, 0x41, 0xd8, 0xfa, 0x92, 0xd8, 0x32},
    {0xce, 0x7c, 0xf2, 0x72, 0x2f, 0x51, 0x27, 0x71},
    {0xe3, 0x78, 0x59, 0xf9, 0x46, 0x23, 0xf3, 0xa7},
    {0x38, 0x12, 0x05, 0xbb, 0x1a, 0xb0, 0xe0, 0x12},
    {0xae, 0x97, 0xa1, 0x0f, 0xd4, 0x34, 0xe0, 0x15},
    {0xb4, 0xa3, 0x15, 0x08, 0xbe, 0xff, 0x4d, 0x31},
    {0x81, 0x39, 0x62, 0x29, 0xf0, 0x90, 0x79, 0x02},
    {0x4d, 0x0c, 0xf4, 0x9e, 0xe5, 0xd4, 0xdc, 0xca},
    {0x5c, 0x73, 0x33, 0x6a, 0x76, 0xd8, 0xbf, 0x9a},
    {0xd0, 0xa7, 0x04, 0x53, 0x6b, 0xa9, 0x3e, 0x0e},
    {0x92, 0x59, 0x58, 0xfc, 0xd6, 0x42, 0x0c, 0xad},
    {0xa9, 0x15, 0xc2, 0x9b, 0xc8, 0x06, 0x73, 0x18},
    {0x95, 0x2b, 0x79, 0xf3, 0xbc, 0x0a, 0xa6, 0xd4},
    {0xf2, 0x1d, 0xf2, 0xe4, 0x1d, 0x45, 0x35, 0xf9},
    {0x87, 0x57, 0x75, 0x19, 0x04, 0x8f, 0x53, 0xa9},
    {0x10, 0xa5, 0x6c, 0xf5, 0xdf, 0xcd, 0x9a, 0xdb},
    {0xeb, 0x75, 0x09, 0x5c, 0xcd, 0x98, 0x6c, 0xd0},
    {0x51, 0xa9, 0xcb, 0x9e, 0xcb, 0xa3, 0x12, 0xe6},
    {0x96, 0xaf, 0xad, 0xfc, 0x2c, 0xe6, 0x66, 0xc7},
    {0x72, 0xfe, 0x52, 0x97, 0x5a, 0x43, 0x64, 0xee},
    {0x5a, 0x16, 0x45, 0xb2, 0x76, 0xd5, 0x92, 0xa1},
    {0xb2, 0x74, 0xcb, 0x8e, 0xbf, 0x87, 0x87, 0x0a},
    {0x6f, 0x9b, 0xb4, 0x20, 0x3d, 0xe7, 0xb3, 0x81},
    {0xea, 0xec, 0xb2, 0xa3, 0x0b, 0x22, 0xa8, 0x7f},
    {0x99, 0x24, 0xa4, 0x3c, 0xc1, 0x31, 0x57, 0x24},
    {0xbd, 0x83, 0x8d, 0x3a, 0xaf, 0xbf, 0x8d, 0xb7},
    {0x0b, 0x1a, 0x2a, 0x32, 0x65, 0xd5, 0x1a, 0xea},
    {0x13, 0x50, 0x79, 0xa3, 0x23, 0x1c, 0xe6, 0x60},
    {0x93, 0x2b, 0x28, 0x46, 0xe4, 0xd7, 0x06, 0x66},
    {0xe1, 0x91, 0x5f, 0x5c, 0xb1, 0xec, 0xa4, 0x6c},
    {0xf3, 0x25, 0x96, 0x5c, 0xa1, 0x6d, 0x62, 0x9f},
    {0x57, 0x5f, 0xf2, 0x8e, 0x60, 0x38, 0x1b, 0xe5},
    {0x72, 0x45, 0x06, 0xeb, 0x4c, 0x32, 0x8a, 0x95},
};

uint64_t tag_of(const uint8_t b[8]) {
    uint64_t t = 0;
    for (int i = 0; i < 8; i++)
        t |= static_cast<uint64_t>(b[i]) << (8 * i);
    return t;
}

SipKey reference_key() {
    uint8_t k[16];
    for (int i = 0; i < 16; i++)
        k[i] = static_cast<uint8_t>(i);
    return sip_key_from_bytes(k);
}

std::vector<uint8_t> counting(size_t n) {
    std::vector<uint8_t> m(n);
    for (size_t i = 0; i < n; i++)
        m[i] = static_cast<uint8_t>(i);
    return m;
}

// An independent SipHash-2-4, written from the paper's description rather
// than from the library: the message is padded first (zeros, then the
// length byte in the last byte of the last word), the state is an array, and
// the key bytes are read one by one.
uint64_t siphash_simple(const uint8_t key[16], const std::vector<uint8_t>& msg) {
    auto rot = [](uint64_t x, unsigned b) { return (x << b) | (x >> (64 - b)); };
    auto le = [](const uint8_t* p) {
        uint64_t x = 0;
        for (int i = 7; i >= 0; i--)
            x = (x << 8) | p[i];
        return x;
    };
    uint64_t v[4];
    const uint64_t k0 = le(key), k1 = le(key + 8);
    v[0] = k0 ^ 0x736f6d6570736575ULL;
    v[1] = k1 ^ 0x646f72616e646f6dULL;
    v[2] = k0 ^ 0x6c7967656e657261ULL;
    v[3] = k1 ^ 0x7465646279746573ULL;
    auto sipround = [&] {
        v[0] += v[1];
        v[2] += v[3];
        v[1] = rot(v[1], 13);
        v[3] = rot(v[3], 16);
        v[1] ^= v[0];
        v[3] ^= v[2];
        v[0] = rot(v[0], 32);
        v[2] += v[1];
        v[0] += v[3];
        v[1] = rot(v[1], 17);
        v[3] = rot(v[3], 21);
        v[1] ^= v[2];
        v[3] ^= v[0];
        v[2] = rot(v[2], 32);
    };
    std::vector<uint8_t> padded = msg;
    while (padded.size() % 8 != 7)
        padded.push_back(0);
    padded.push_back(static_cast<uint8_t>(msg.size()));
    for (size_t w = 0; w < padded.size(); w += 8) {
        const uint64_t m = le(&padded[w]);
        v[3] ^= m;
        for (int r = 0; r < 2; r++)
            sipround();
        v[0] ^= m;
    }
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        sipround();
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

} // namespace

TEST_CASE("siphash24 reproduces the 64 reference vectors", "[siphash]") {
    const SipKey key = reference_key();
    CHECK(key.k0 == 0x0706050403020100ULL);
    CHECK(key.k1 == 0x0f0e0d0c0b0a0908ULL);
    for (size_t len = 0; len < 64; len++) {
        INFO("len " << len);
        const auto msg = counting(len);
        const uint64_t want = tag_of(kVectors[len]);
        CHECK(siphash24(key, msg) == want);
        SipState s;
        sip_init(s, key);
        sip_update(s, msg);
        CHECK(sip_final(s) == want);
    }
}

TEST_CASE("siphash24 agrees with an independent simple implementation", "[siphash]") {
    uint8_t rk[16];
    for (int i = 0; i < 16; i++)
        rk[i] = static_cast<uint8_t>(i);
    // The simple one is checked against the reference too, so the two agree
    // for the right reason.
    for (size_t len = 0; len < 64; len++)
        REQUIRE(siphash_simple(rk, counting(len)) == tag_of(kVectors[len]));

    for (uint32_t seed = 1; seed <= 40; seed++) {
        const auto kb = tmtest::pattern(16, seed * 7919);
        const SipKey key = sip_key_from_bytes(kb.data());
        for (size_t len : {0, 1, 7, 8, 9, 15, 16, 17, 36, 63, 64, 65, 164, 255, 256, 257, 1500}) {
            const auto msg = tmtest::pattern(len, seed + static_cast<uint32_t>(len));
            INFO("seed " << seed << " len " << len);
            REQUIRE(siphash24(key, msg) == siphash_simple(kb.data(), msg));
        }
    }
}

TEST_CASE("siphash24: every single-bit flip of a 40-byte message changes the MAC", "[siphash]") {
    const SipKey key = sip_key_from_bytes(tmtest::pattern(16, 3).data());
    auto msg = tmtest::pattern(40, 11);
    const uint64_t base = siphash24(key, msg);
    std::vector<uint64_t> seen{base};
    for (size_t bit = 0; bit < 40 * 8; bit++) {
        msg[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        const uint64_t t = siphash24(key, msg);
        msg[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        INFO("bit " << bit);
        REQUIRE(!mac_equal(t, base));
        seen.push_back(t);
    }
    REQUIRE(siphash24(key, msg) == base); // restored
    // 321 tags, all distinct (a collision among 64-bit tags here would be a bug, not luck).
    std::sort(seen.begin(), seen.end());
    CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());

    // Every key bit matters too.
    for (int bit = 0; bit < 128; bit++) {
        SipKey k2 = key;
        (bit < 64 ? k2.k0 : k2.k1) ^= uint64_t{1} << (bit % 64);
        INFO("key bit " << bit);
        REQUIRE(siphash24(k2, msg) != base);
    }
    // And the length: a trailing zero byte is not the same message.
    auto longer = msg;
    longer.push_back(0);
    CHECK(siphash24(key, longer) != base);
}

TEST_CASE("siphash24 incremental form equals one shot at every split", "[siphash]") {
    const SipKey key = sip_key_from_bytes(tmtest::pattern(16, 5).data());
    for (size_t len : {0, 1, 7, 8, 9, 36, 40, 64, 164}) {
        const auto msg = tmtest::pattern(len, 17 + static_cast<uint32_t>(len));
        const uint64_t whole = siphash24(key, msg);
        for (size_t a = 0; a <= len; a++) {
            // Two pieces at every split, and three pieces at every pair of splits.
            SipState s;
            sip_init(s, key);
            sip_update(s, {msg.data(), a});
            sip_update(s, {msg.data() + a, len - a});
            INFO("len " << len << " split " << a);
            REQUIRE(sip_final(s) == whole);
            for (size_t b = a; b <= len; b++) {
                sip_init(s, key);
                sip_update(s, {msg.data(), a});
                sip_update(s, {}); // empty pieces are no-ops
                sip_update(s, {msg.data() + a, b - a});
                sip_update(s, {msg.data() + b, len - b});
                INFO("second split " << b);
                REQUIRE(sip_final(s) == whole);
            }
        }
        // Byte by byte.
        SipState s;
        sip_init(s, key);
        for (uint8_t c : msg)
            sip_update(s, {&c, 1});
        REQUIRE(sip_final(s) == whole);
    }
    // sip_final leaves the state usable: a shared prefix hashed once.
    const auto msg = tmtest::pattern(100, 1);
    SipState pre;
    sip_init(pre, key);
    sip_update(pre, {msg.data(), 20});
    CHECK(sip_final(pre) == siphash24(key, {msg.data(), 20}));
    SipState s = pre;
    sip_update(s, {msg.data() + 20, 80});
    CHECK(sip_final(s) == siphash24(key, msg));
}

TEST_CASE("mac_equal", "[siphash]") {
    CHECK(mac_equal(0, 0));
    CHECK(mac_equal(0x0123456789abcdefULL, 0x0123456789abcdefULL));
    for (int bit = 0; bit < 64; bit++)
        CHECK_FALSE(mac_equal(0x0123456789abcdefULL, 0x0123456789abcdefULL ^ (uint64_t{1} << bit)));
}

TEST_CASE("secret keys: hex parsing and formatting", "[siphash]") {
    std::string err;
    SipKey k;
    REQUIRE(parse_secret_hex("000102030405060708090a0b0c0d0e0f", k, err));
    CHECK(k == reference_key());
    // The parsed key is the reference key: vector 63 through the whole path.
    CHECK(siphash24(k, counting(63)) == tag_of(kVectors[63]));
    CHECK(format_secret_hex(k) == "000102030405060708090a0b0c0d0e0f");

    SipKey k2;
    REQUIRE(parse_secret_hex("0x000102030405060708090A0B0C0D0E0F", k2, err));
    CHECK(k2 == k);
    REQUIRE(parse_secret_hex("0X000102030405060708090a0B0c0D0e0F", k2, err));
    CHECK(k2 == k);

    const std::string s = "f00dfacefeedbeef0123456789ABCDEF";
    REQUIRE(parse_secret_hex(s, k2, err));
    CHECK(k2.k0 == 0xefbeedfecefa0df0ULL);
    CHECK(k2.k1 == 0xefcdab8967452301ULL);
    CHECK(format_secret_hex(k2) == "f00dfacefeedbeef0123456789abcdef");
    uint8_t b[16];
    sip_key_to_bytes(k2, b);
    CHECK(b[0] == 0xf0);
    CHECK(b[15] == 0xef);
    CHECK(sip_key_from_bytes(b) == k2);

    struct Bad {
        const char* in;
        const char* msg;
    };
    const Bad bad[] = {
        {"", "--secret: expected 32 hex digits (128 bits), got 0"},
        {"0x", "--secret: expected 32 hex digits (128 bits), got 0"},
        {"000102030405060708090a0b0c0d0e0", "--secret: expected 32 hex digits (128 bits), got 31"},
        {"000102030405060708090a0b0c0d0e0f0",
         "--secret: expected 32 hex digits (128 bits), got 33"},
        {"0x000102030405060708090a0b0c0d0e0",
         "--secret: expected 32 hex digits (128 bits), got 31"},
        {"0001020304050607", "--secret: expected 32 hex digits (128 bits), got 16"},
        {"000102030405060708090a0b0c0d0e0f\n",
         "--secret: expected 32 hex digits (128 bits), got 33"},
        {" 000102030405060708090a0b0c0d0e0f",
         "--secret: expected 32 hex digits (128 bits), got 33"},
        {"000102030405060708090a0b0c0d0e0g",
         "--secret: expected 32 hex digits (128 bits), got 'g' at position 31"},
        {"0x0g0102030405060708090a0b0c0d0e0f",
         "--secret: expected 32 hex digits (128 bits), got 'g' at position 3"},
        {"00010203 405060708090a0b0c0d0e0f",
         "--secret: expected 32 hex digits (128 bits), got 0x20 at position 8"},
        {"x000102030405060708090a0b0c0d0e0f",
         "--secret: expected 32 hex digits (128 bits), got 33"},
        {"0x0x0102030405060708090a0b0c0d0e0f",
         "--secret: expected 32 hex digits (128 bits), got 'x' at position 3"},
        {"-00102030405060708090a0b0c0d0e0f",
         "--secret: expected 32 hex digits (128 bits), got '-' at position 0"},
    };
    for (const Bad& t : bad) {
        INFO("input '" << t.in << "'");
        SipKey untouched{1, 2};
        err.clear();
        CHECK_FALSE(parse_secret_hex(t.in, untouched, err));
        CHECK(err == t.msg);
        CHECK(untouched == SipKey{1, 2});
    }
}

// Not a test: TSC cycles per MAC for the control packets' sizes (header +
// ACK body = 36 bytes; header + the largest NACK body = 164 bytes). Hidden;
// run with `build/tests/unit_tests "[.siphash-bench]"`. "chained": each MAC's
// key depends on the previous tag, so this is the latency of one MAC;
// "independent": consecutive MACs may overlap in the pipeline (throughput).
// 64 distinct messages, written before timing (no store-forwarding effects).
TEST_CASE("siphash24 cycles", "[.siphash-bench]") {
    const SipKey key = sip_key_from_bytes(tmtest::pattern(16, 9).data());
    constexpr int kInner = 64, kReps = 20000;
    printf("TSC %.3f GHz\n", double(rte_get_tsc_hz()) / 1e9);
    for (size_t len : {36, 164}) {
        std::vector<std::vector<uint8_t>> msgs;
        for (int i = 0; i < kInner; i++)
            msgs.push_back(tmtest::pattern(len, 100 + i));
        auto best_of = [&](auto&& one) {
            uint64_t best = UINT64_MAX;
            for (int rep = 0; rep < kReps; rep++) {
                const uint64_t t0 = rte_rdtsc_precise();
                for (int i = 0; i < kInner; i++)
                    one(msgs[i]);
                const uint64_t t1 = rte_rdtsc_precise();
                best = std::min(best, t1 - t0);
            }
            return double(best) / kInner;
        };
        uint64_t sum = 0, prev = 0;
        const double indep =
            best_of([&](const std::vector<uint8_t>& m) { sum += siphash24(key, m); });
        const double chained = best_of([&](const std::vector<uint8_t>& m) {
            prev = siphash24(SipKey{key.k0 ^ prev, key.k1}, m);
        });
        const double inc = best_of([&](const std::vector<uint8_t>& m) {
            SipState s;
            sip_init(s, SipKey{key.k0 ^ prev, key.k1});
            sip_update(s, {m.data(), 16}); // header, then body
            sip_update(s, {m.data() + 16, len - 16});
            prev = sip_final(s);
        });
        printf("siphash24 %3zu B: chained %.1f, independent %.1f, incremental 16+%zu chained %.1f "
               "TSC cycles "
               "(best of %d x %d) [%llx]\n",
               len, chained, indep, len - 16, inc, kReps, kInner, (unsigned long long)(sum ^ prev));
    }
}
