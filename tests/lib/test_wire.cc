#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "tailmark/wire.h"

using namespace tailmark;

namespace {
std::vector<uint8_t> bytes_of(const WireHeader& w) {
    std::vector<uint8_t> v(sizeof(w));
    memcpy(v.data(), &w, sizeof(w));
    return v;
}
std::vector<uint8_t> bytes_of(const WireTrailer& w) {
    std::vector<uint8_t> v(sizeof(w));
    memcpy(v.data(), &w, sizeof(w));
    return v;
}
} // namespace

TEST_CASE("header encodes in network order at the spec's offsets", "[wire]") {
    Header h;
    h.version = 1;
    h.flags = Flags::Last | Flags::Retx;
    h.flow = 0x1234;
    h.msg_id = 0x89ABCDEF;
    h.pkt_idx = 0xFEDC;
    h.pay_len = 0x0102;
    h.offset = 0x0A0B0C0D;
    WireHeader w;
    encode(h, &w);
    std::vector<uint8_t> want = {0x01, 0x09, 0x12, 0x34, 0x89, 0xAB, 0xCD, 0xEF,
                                 0xFE, 0xDC, 0x01, 0x02, 0x0A, 0x0B, 0x0C, 0x0D};
    REQUIRE(bytes_of(w) == want);
    REQUIRE(decode(&w) == h);
}

TEST_CASE("trailer encodes in network order, magic last", "[wire]") {
    Trailer t;
    t.flag = 0x0102030405060708ull;
    t.slot = 0x11121314;
    t.key = 0x21222324;
    t.msg_len = 0x31323334;
    t.pkt_count = 0x4142;
    t.reserved = 0;
    t.crc32c = 0x51525354;
    WireTrailer w;
    encode(t, &w);
    std::vector<uint8_t> want = {1,    2,    3,    4,    5,    6,    7,    8,    0x11, 0x12, 0x13,
                                 0x14, 0x21, 0x22, 0x23, 0x24, 0x31, 0x32, 0x33, 0x34, 0x41, 0x42,
                                 0,    0,    0x51, 0x52, 0x53, 0x54, 0x54, 0x4D, 0x4B, 0x31};
    REQUIRE(bytes_of(w) == want);
    REQUIRE(decode(&w) == t);
}

TEST_CASE("round trips at every field boundary", "[wire]") {
    const uint64_t v8[] = {0, 1, 0x7F, 0x80, 0xFE, 0xFF};
    const uint64_t v16[] = {0, 1, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF};
    const uint64_t v32[] = {0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF};
    const uint64_t v64[] = {0, 1, 0x7FFFFFFFFFFFFFFFull, 0x8000000000000000ull, ~1ull, ~0ull};
    for (int i = 0; i < 6; i++) {
        Header h;
        h.version = static_cast<uint8_t>(v8[i]);
        h.flags = static_cast<Flags>(v8[5 - i]);
        h.flow = static_cast<uint16_t>(v16[i]);
        h.msg_id = static_cast<uint32_t>(v32[5 - i]);
        h.pkt_idx = static_cast<uint16_t>(v16[5 - i]);
        h.pay_len = static_cast<uint16_t>(v16[i]);
        h.offset = static_cast<uint32_t>(v32[i]);
        WireHeader wh;
        encode(h, &wh);
        CHECK(decode(&wh) == h);
        CHECK(bytes_of(wh)[2] == static_cast<uint8_t>(h.flow >> 8));

        Trailer t;
        t.flag = v64[i];
        t.slot = static_cast<uint32_t>(v32[i]);
        t.key = static_cast<uint32_t>(v32[5 - i]);
        t.msg_len = static_cast<uint32_t>(v32[i]);
        t.pkt_count = static_cast<uint16_t>(v16[5 - i]);
        t.reserved = static_cast<uint16_t>(v16[i]);
        t.crc32c = static_cast<uint32_t>(v32[5 - i]);
        t.magic = static_cast<uint32_t>(v32[i]);
        WireTrailer wt;
        encode(t, &wt);
        CHECK(decode(&wt) == t);
        CHECK(bytes_of(wt)[0] == static_cast<uint8_t>(t.flag >> 56));
    }
}

TEST_CASE("flag is msg_id + 1 in 64 bits, never 0", "[wire]") {
    CHECK(flag_for(0) == 1);
    CHECK(flag_for(41) == 42);
    CHECK(flag_for(0xFFFFFFFFu) == 0x100000000ull);
}

TEST_CASE("group plan cuts at the stride and keeps room for the trailer", "[wire]") {
    const uint32_t stride = stride_for_mtu(1500);
    REQUIRE(stride == 1456);
    struct Case {
        uint32_t len, count, last;
    } cases[] = {
        {0, 1, 0},                  // a 0-byte message is one LAST packet with pay_len 0
        {1, 1, 1},
        {stride - kTrailerLen, 1, stride - kTrailerLen}, // fills one packet exactly
        {stride - kTrailerLen + 1, 2, 0},                // one byte over: the trailer moves out
        {stride, 2, 0},                                  // one full MTU of payload
        {stride + 1, 2, 1},
        {2 * stride, 3, 0},
        {16u << 20, 11523, (16u << 20) - 11522 * stride},
    };
    for (const Case& c : cases) {
        INFO("len " << c.len);
        GroupPlan p = plan_group(c.len, stride);
        REQUIRE(p.ok());
        CHECK(p.pkt_count == c.count);
        CHECK(p.last_len == c.last);
    }
}

TEST_CASE("group plan covers every byte once, in order", "[wire]") {
    for (uint32_t stride : {64u, 100u, 1456u, 8952u}) {
        for (uint32_t len = 0; len < 5 * stride; len += (len < 3 * stride ? 1 : 7)) {
            GroupPlan p = plan_group(len, stride);
            REQUIRE(p.ok());
            uint64_t next = 0;
            for (uint32_t i = 0; i < p.pkt_count; i++) {
                REQUIRE(p.offset_of(i) == next);
                REQUIRE(p.len_of(i) <= stride);
                if (!p.is_last(i))
                    REQUIRE(p.len_of(i) > 0);
                next += p.len_of(i);
            }
            REQUIRE(next == len);
            REQUIRE(p.last_len + kTrailerLen <= stride);
        }
    }
}

TEST_CASE("group plan refuses what the wire cannot carry", "[wire]") {
    CHECK_FALSE(plan_group(100, kTrailerLen).ok());          // no room for a trailer
    CHECK_FALSE(plan_group(100, 70000).ok());                // pay_len is 16 bits
    CHECK_FALSE(plan_group(1ull << 33, 1456).ok());          // msg_len is 32 bits
    CHECK_FALSE(plan_group(65535ull * 64, 64).ok());         // > 65535 packets
    CHECK(plan_group(65534ull * 64 - 1, 64).pkt_count == 65535);
    CHECK(stride_for_mtu(60) == 0);
}
