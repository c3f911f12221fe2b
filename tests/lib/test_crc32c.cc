#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "fixtures.h"
#include "tailmark/crc32c.h"

using namespace tailmark;

TEST_CASE("crc32c matches the Castagnoli check value", "[crc32c]") {
    const char* s = "123456789";
    CHECK(crc32c({reinterpret_cast<const uint8_t*>(s), 9}) == 0xE3069283u);
    CHECK(crc32c({}) == 0u);
    // RFC 3720 B.4: 32 bytes of zeros, and of 0xFF.
    std::vector<uint8_t> z(32, 0), f(32, 0xFF);
    CHECK(crc32c(z) == 0x8A9136AAu);
    CHECK(crc32c(f) == 0x62A8AB43u);
}

TEST_CASE("crc32c running form equals one shot at every split", "[crc32c]") {
    auto data = tmtest::pattern(4099, 5);
    const uint32_t whole = crc32c(data);
    for (size_t cut = 0; cut <= data.size(); cut += 13) {
        uint32_t st = crc32c_update(kCrc32cInit, {data.data(), cut});
        st = crc32c_update(st, {data.data() + cut, data.size() - cut});
        REQUIRE(crc32c_finish(st) == whole);
    }
}

namespace {
// Bit-at-a-time reference: slow, obviously right.
uint32_t crc32c_reference(const uint8_t* p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return ~crc;
}

// The same bitwise reference, run once over p[0, n): element i is the
// finished CRC of the first i bytes, so every prefix length costs one step.
std::vector<uint32_t> crc32c_reference_prefixes(const uint8_t* p, size_t n) {
    std::vector<uint32_t> out(n + 1);
    uint32_t crc = 0xFFFFFFFFu;
    out[0] = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
        out[i + 1] = ~crc;
    }
    return out;
}
} // namespace

TEST_CASE("crc32c agrees with a bitwise reference across block sizes and alignments", "[crc32c]") {
    auto data = tmtest::pattern(3 * 8192 * 2 + 3 * 256 + 100, 99);
    // Around the 3x256 and 3x8192 interleave thresholds, at odd alignments.
    const size_t lens[] = {0, 1, 7, 8, 9, 255, 767, 768, 769, 1456, 4096, 24575, 24576, 24577,
                           3 * 8192 + 3 * 256 + 13, 65536 - 24, data.size() - 7};
    for (size_t align = 0; align < 8; align += 3) {
        for (size_t len : lens) {
            if (align + len > data.size())
                continue;
            INFO("align " << align << " len " << len);
            REQUIRE(crc32c({data.data() + align, len}) == crc32c_reference(data.data() + align, len));
        }
    }
}

// The SIMD kernel switches strategy by length (a plain crc32 chain, folding
// lanes, chunks that also run a table chain), so every length through the
// small-buffer range and well past the first few chunk sizes is checked, each
// at several start alignments (loads are unaligned; no path may depend on it).
TEST_CASE("crc32c agrees with the bitwise reference at every length and alignment", "[crc32c]") {
    constexpr size_t kMaxAlign = 16;
    auto data = tmtest::pattern(12288 + kMaxAlign, 7);
    for (size_t align : {0, 1, 3, 7, 8, 13}) {
        const auto ref = crc32c_reference_prefixes(data.data() + align, 12288);
        for (size_t len = 0; len <= 2048; len++) {
            INFO("align " << align << " len " << len);
            REQUIRE(crc32c({data.data() + align, len}) == ref[len]);
        }
        // Past the small sizes: every length at two alignments, a stride of
        // 7 (co-prime with every block size in the kernel) at the others.
        const size_t stride = (align == 0 || align == 13) ? 1 : 7;
        for (size_t len = 2049; len <= 12288; len += stride) {
            INFO("align " << align << " len " << len);
            REQUIRE(crc32c({data.data() + align, len}) == ref[len]);
        }
    }
}

TEST_CASE("crc32c agrees with the bitwise reference on large buffers", "[crc32c]") {
    constexpr size_t kMax = (size_t(1) << 20) + 3;
    auto data = tmtest::pattern(kMax + 16, 11);
    for (size_t align : {0, 1, 4, 8, 15}) {
        const auto ref = crc32c_reference_prefixes(data.data() + align, kMax);
        for (size_t len : {size_t(4095), size_t(4096), size_t(4097), size_t(65535), size_t(65536), size_t(65537),
                           size_t(100000), size_t(1) << 20, kMax}) {
            INFO("align " << align << " len " << len);
            REQUIRE(crc32c({data.data() + align, len}) == ref[len]);
        }
    }
    // All-ones and all-zeros data: no lane or table may lose a bit.
    std::vector<uint8_t> ones(65536 + 5, 0xFF), zeros(65536 + 5, 0);
    CHECK(crc32c(ones) == crc32c_reference(ones.data(), ones.size()));
    CHECK(crc32c(zeros) == crc32c_reference(zeros.data(), zeros.size()));
}

// The running form must carry its state across any cut: pieces of every kind
// of size (empty, single bytes, around the kernel's block and chunk sizes --
// 64-byte lane strides, 3264-byte chunks taken from 3520 bytes on -- and
// large), in a fixed pseudo-random order, over a 1 MiB + 3 buffer.
TEST_CASE("crc32c fed in pieces equals the bitwise reference", "[crc32c]") {
    constexpr size_t kLen = (size_t(1) << 20) + 3;
    auto data = tmtest::pattern(kLen + 8, 23);
    const size_t sizes[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 63, 64, 65, 127, 128, 255, 256, 257,
                            1000, 1500, 3263, 3264, 3265, 3519, 3520, 4096, 6528, 9000, 65536, 70001};
    uint32_t x = 12345;
    for (size_t align : {0, 3}) {
        const uint8_t* base = data.data() + align;
        const uint32_t whole = crc32c_reference(base, kLen);
        for (int round = 0; round < 4; round++) {
            uint32_t st = kCrc32cInit;
            size_t off = 0;
            while (off < kLen) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                // Round 0 uses only small pieces, the others the whole menu.
                const size_t pick = round == 0 ? x % 12 : x % std::size(sizes);
                const size_t n = std::min(sizes[pick], kLen - off);
                st = crc32c_update(st, {base + off, n});
                off += n;
            }
            INFO("align " << align << " round " << round);
            REQUIRE(crc32c_finish(st) == whole);
        }
    }
    // A piece boundary at every offset of a buffer big enough for the chunked
    // path on both sides of the cut.
    auto two = tmtest::pattern(2 * 3520 + 64, 29);
    const uint32_t whole = crc32c_reference(two.data(), two.size());
    for (size_t cut = 0; cut <= two.size(); cut++) {
        uint32_t st = crc32c_update(kCrc32cInit, {two.data(), cut});
        st = crc32c_update(st, {two.data() + cut, two.size() - cut});
        INFO("cut " << cut);
        REQUIRE(crc32c_finish(st) == whole);
    }
}

TEST_CASE("crc32c_copy copies exactly and checksums like crc32c_update", "[crc32c]") {
    // Every length through the folding threshold and a packet's size, jumbo
    // and chunk sizes, at several source and destination alignments, from a
    // running state (a packet continues its message's CRC).
    std::vector<uint8_t> src(12000 + 64), dst(12000 + 64 + 32);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = static_cast<uint8_t>(i * 131 + (i >> 7) * 7 + 1);
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 1600; n++)
        lens.push_back(n);
    for (size_t n : {3519ul, 3520ul, 3521ul, 3776ul, 9000ul, 12000ul})
        lens.push_back(n);
    for (size_t n : lens) {
        for (size_t so : {0ul, 1ul, 13ul}) {
            for (size_t dof : {0ul, 3ul, 16ul}) {
                std::fill(dst.begin(), dst.end(), 0xEE);
                const uint32_t state = tailmark::crc32c_update(tailmark::kCrc32cInit, {src.data(), 5});
                const uint32_t got = tailmark::crc32c_copy(state, dst.data() + dof, {src.data() + so, n});
                const uint32_t want = tailmark::crc32c_update(state, {src.data() + so, n});
                REQUIRE(got == want);
                REQUIRE(std::equal(src.begin() + so, src.begin() + so + n, dst.begin() + dof));
                // Nothing written outside [dof, dof + n).
                REQUIRE(std::all_of(dst.begin(), dst.begin() + dof, [](uint8_t b) { return b == 0xEE; }));
                REQUIRE(std::all_of(dst.begin() + dof + n, dst.end(), [](uint8_t b) { return b == 0xEE; }));
            }
        }
    }
}
