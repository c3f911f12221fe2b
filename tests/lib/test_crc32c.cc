#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>


#include "fixtures.h"
#include "cpu_flags.h"
#include "guarded.h"
#include "tailmark/crc32c.h"

using namespace tailmark;
using tmtest::CpuFlags;
using tmtest::cpu_flags;
using tmtest::Guarded;

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

// ---------------------------------------------------------------------------
// Every kernel the CPU supports, each forced by crc32c_update_with and
// crc32c_copy_with, against the bitwise reference (the tests above cover the
// dispatched one). The 512-bit kernel's bounds: a crc32 chain below 128
// bytes, one zmm accumulator (64-byte strides) below 512, four (256-byte
// strides) from 512; its first stride is a masked load padded in front, and
// len % 4 bytes go through crc32 first. Every length to 4096 crosses each of
// those at every residue.

namespace {

constexpr Crc32cKernel kAllKernels[] = {Crc32cKernel::Table, Crc32cKernel::Chains, Crc32cKernel::Fold128,
                                        Crc32cKernel::Fold512};

std::vector<Crc32cKernel> supported_kernels() {
    std::vector<Crc32cKernel> v;
    for (Crc32cKernel k : kAllKernels)
        if (crc32c_kernel_supported(k))
            v.push_back(k);
    return v;
}

// The raw register after p[0, n) from `crc`, bit by bit.
uint32_t reference_raw(uint32_t crc, const uint8_t* p, size_t n) {
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return crc;
}

// Element i: the raw register after p[0, i) from `crc`.
std::vector<uint32_t> reference_raw_prefixes(uint32_t crc, const uint8_t* p, size_t n) {
    std::vector<uint32_t> out(n + 1);
    out[0] = crc;
    for (size_t i = 0; i < n; i++)
        out[i + 1] = crc = reference_raw(crc, p + i, 1);
    return out;
}

} // namespace

TEST_CASE("crc32c dispatch picks the fastest kernel the CPU has", "[crc32c]") {
    const CpuFlags f = cpu_flags();
    INFO("sse4.2 " << f.sse42 << " pclmul " << f.pclmul << " avx512f/bw/vl+vpclmulqdq " << f.avx512 << ", picked "
                   << crc32c_kernel_name(crc32c_kernel()));
    CHECK(crc32c_kernel_supported(Crc32cKernel::Table));
    CHECK(crc32c_kernel_supported(Crc32cKernel::Chains) == f.sse42);
    CHECK(crc32c_kernel_supported(Crc32cKernel::Fold128) == (f.sse42 && f.pclmul));
    CHECK(crc32c_kernel_supported(Crc32cKernel::Fold512) == (f.sse42 && f.pclmul && f.avx512));
    const Crc32cKernel want = f.sse42 && f.pclmul && f.avx512 ? Crc32cKernel::Fold512
                              : f.sse42 && f.pclmul           ? Crc32cKernel::Fold128
                              : f.sse42                       ? Crc32cKernel::Chains
                                                              : Crc32cKernel::Table;
    CHECK(crc32c_kernel() == want);
    CHECK((crc32c_kernel() == Crc32cKernel::Fold512) == crc32c_kernel_supported(Crc32cKernel::Fold512));
    // Names are distinct, for the bench's keys.
    for (Crc32cKernel a : kAllKernels)
        for (Crc32cKernel b : kAllKernels)
            CHECK((std::string(crc32c_kernel_name(a)) == crc32c_kernel_name(b)) == (a == b));
    // The dispatched entry point gives the bitwise reference's value, and the
    // value of the kernel chosen above from CPUID (`want`, not the library's
    // own crc32c_kernel(), which would compare the dispatch with itself), at
    // every bound of the kernels: the 512-bit one's crc32 chain below 128
    // bytes, one accumulator below 512, four from 512.
    auto data = tmtest::pattern(5000, 3);
    for (size_t len : {0ul, 1ul, 3ul, 63ul, 64ul, 127ul, 128ul, 200ul, 511ul, 512ul, 1456ul, 5000ul}) {
        INFO("len " << len << ", want " << crc32c_kernel_name(want));
        const uint32_t ref = reference_raw(kCrc32cInit, data.data(), len);
        CHECK(crc32c_update(kCrc32cInit, {data.data(), len}) == ref);
        CHECK(crc32c_update_with(want, kCrc32cInit, {data.data(), len}) == ref);
    }
}

TEST_CASE("every kernel agrees with the bitwise reference at every length to 4096", "[crc32c]") {
    constexpr size_t kMax = 4096, kMaxAlign = 64;
    auto data = tmtest::pattern(kMax + kMaxAlign, 41);
    for (Crc32cKernel k : supported_kernels()) {
        for (size_t align : {0, 1, 2, 3, 7, 13, 33, 63}) {
            // From the initial state and from a running one: the state goes
            // into a different place of the 512-bit kernel's padded stride.
            for (uint32_t state : {kCrc32cInit, 0x12345678u}) {
                const auto ref = reference_raw_prefixes(state, data.data() + align, kMax);
                for (size_t len = 0; len <= kMax; len++) {
                    INFO(crc32c_kernel_name(k) << " align " << align << " state " << state << " len " << len);
                    REQUIRE(crc32c_update_with(k, state, {data.data() + align, len}) == ref[len]);
                }
            }
        }
    }
}

TEST_CASE("every kernel agrees with the bitwise reference on large buffers", "[crc32c]") {
    constexpr size_t kMax = (size_t(1) << 20) + 7;
    auto data = tmtest::pattern(kMax + 64, 43);
    std::vector<size_t> lens = {4095, 4096, 4097, 8191, 8192, 8193, 65535, 65536, 65537, 65539, 100000, kMax - 8};
    for (size_t n = 1 << 20; n <= kMax; n++)
        lens.push_back(n);
    for (size_t align : {0, 1, 13, 60}) {
        const auto ref = reference_raw_prefixes(kCrc32cInit, data.data() + align, kMax);
        for (Crc32cKernel k : supported_kernels()) {
            for (size_t len : lens) {
                INFO(crc32c_kernel_name(k) << " align " << align << " len " << len);
                REQUIRE(crc32c_update_with(k, kCrc32cInit, {data.data() + align, len}) == ref[len]);
            }
        }
    }
    std::vector<uint8_t> ones(65536 + 5, 0xFF), zeros(65536 + 5, 0);
    for (Crc32cKernel k : supported_kernels()) {
        INFO(crc32c_kernel_name(k));
        CHECK(crc32c_update_with(k, kCrc32cInit, ones) == reference_raw(kCrc32cInit, ones.data(), ones.size()));
        CHECK(crc32c_update_with(k, kCrc32cInit, zeros) == reference_raw(kCrc32cInit, zeros.data(), zeros.size()));
        CHECK(crc32c_update_with(k, 0, zeros) == 0u); // zeros from a zero register stay zero
    }
}

TEST_CASE("every kernel carries its state across any cut", "[crc32c]") {
    // A cut at every offset of a buffer big enough for every kernel's widest
    // path on both sides (fold128's 3520-byte chunks, fold512's 256-byte
    // strides from 512 bytes on).
    auto two = tmtest::pattern(2 * 3520 + 64, 47);
    const uint32_t whole = reference_raw(kCrc32cInit, two.data(), two.size());
    for (Crc32cKernel k : supported_kernels()) {
        for (size_t cut = 0; cut <= two.size(); cut++) {
            uint32_t st = crc32c_update_with(k, kCrc32cInit, {two.data(), cut});
            st = crc32c_update_with(k, st, {two.data() + cut, two.size() - cut});
            INFO(crc32c_kernel_name(k) << " cut " << cut);
            REQUIRE(st == whole);
        }
        // Pieces of pseudo-random sizes, through every bound, in copies too.
        std::vector<uint8_t> out(two.size());
        uint32_t x = 777, st = kCrc32cInit, cst = kCrc32cInit;
        for (size_t off = 0; off < two.size();) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            const size_t n = std::min<size_t>(x % 700, two.size() - off);
            st = crc32c_update_with(k, st, {two.data() + off, n});
            cst = crc32c_copy_with(k, cst, out.data() + off, {two.data() + off, n});
            off += n;
        }
        INFO(crc32c_kernel_name(k));
        CHECK(st == whole);
        CHECK(cst == whole);
        CHECK(out == two);
    }
}

TEST_CASE("every kernel's copy copies exactly and checksums like the reference", "[crc32c]") {
    std::vector<uint8_t> src(70000 + 64), dst(70000 + 64 + 80);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = static_cast<uint8_t>(i * 131 + (i >> 7) * 7 + 1);
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 1100; n++)
        lens.push_back(n);
    for (size_t n : {1455ul, 1456ul, 1457ul, 2047ul, 2048ul, 2049ul, 3519ul, 3520ul, 3521ul, 3776ul, 4096ul, 9000ul,
                     65536ul, 65539ul, 70000ul})
        lens.push_back(n);
    const uint32_t state = reference_raw(kCrc32cInit, src.data() + 100, 5); // a packet continues its message
    for (size_t so : {0ul, 1ul, 13ul, 63ul}) {
        const auto ref = reference_raw_prefixes(state, src.data() + so, 70000);
        for (Crc32cKernel k : supported_kernels()) {
            for (size_t dof : {0ul, 3ul, 16ul, 61ul}) {
                for (size_t n : lens) {
                    std::fill(dst.begin(), dst.begin() + static_cast<long>(dof + n + 80), 0xEE);
                    INFO(crc32c_kernel_name(k) << " src +" << so << " dst +" << dof << " len " << n);
                    REQUIRE(crc32c_copy_with(k, state, dst.data() + dof, {src.data() + so, n}) == ref[n]);
                    REQUIRE(std::equal(src.begin() + static_cast<long>(so), src.begin() + static_cast<long>(so + n),
                                       dst.begin() + static_cast<long>(dof)));
                    // Nothing written outside [dof, dof + n).
                    REQUIRE(std::all_of(dst.begin(), dst.begin() + static_cast<long>(dof),
                                        [](uint8_t b) { return b == 0xEE; }));
                    REQUIRE(std::all_of(dst.begin() + static_cast<long>(dof + n),
                                        dst.begin() + static_cast<long>(dof + n + 80),
                                        [](uint8_t b) { return b == 0xEE; }));
                }
            }
        }
    }
}

// The 512-bit kernel reads its first stride with masked loads from before the
// data (and writes it with masked stores): buffers that start right after, or
// end right before, a page nobody may touch fault if a masked-out byte were
// accessed.
TEST_CASE("every kernel touches only the bytes it is given", "[crc32c]") {
    Guarded in(8192), out(8192);
    auto data = tmtest::pattern(8192, 53);
    memcpy(in.begin(), data.data(), data.size());
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 1100; n++)
        lens.push_back(n);
    for (size_t n : {4095ul, 4096ul, 4097ul, 8191ul, 8192ul})
        lens.push_back(n);
    for (Crc32cKernel k : supported_kernels()) {
        for (size_t n : lens) {
            INFO(crc32c_kernel_name(k) << " len " << n);
            // Data at a page's start (the pad's bytes are on the guard page
            // before it) and at a page's end (the guard page after it).
            const uint8_t* head = in.begin();
            const uint8_t* tail = in.end() - n;
            const uint32_t want_head = reference_raw(kCrc32cInit, head, n);
            const uint32_t want_tail = reference_raw(kCrc32cInit, tail, n);
            REQUIRE(crc32c_update_with(k, kCrc32cInit, {head, n}) == want_head);
            REQUIRE(crc32c_update_with(k, kCrc32cInit, {tail, n}) == want_tail);
            REQUIRE(crc32c_copy_with(k, kCrc32cInit, out.begin(), {tail, n}) == want_tail);
            REQUIRE(memcmp(out.begin(), tail, n) == 0);
            REQUIRE(crc32c_copy_with(k, kCrc32cInit, out.end() - n, {head, n}) == want_head);
            REQUIRE(memcmp(out.end() - n, head, n) == 0);
        }
    }
}

// crc32c_inline: the crc32 instruction inline under kCrc32cShortMax bytes,
// the dispatch from there on; the same value as the reference at every
// length across that boundary, every alignment, and from a running state.
TEST_CASE("crc32c_inline agrees with the bitwise reference around its short-buffer bound", "[crc32c]") {
    auto data = tmtest::pattern(2 * kCrc32cShortMax + 16, 11);
    for (size_t align = 0; align < 8; align++) {
        const auto ref = crc32c_reference_prefixes(data.data() + align, 2 * kCrc32cShortMax);
        for (size_t len = 0; len <= 2 * kCrc32cShortMax; len++) {
            INFO("align " << align << " len " << len);
            REQUIRE(crc32c_finish(crc32c_inline(kCrc32cInit, {data.data() + align, len})) == ref[len]);
        }
    }
    // Running: a short piece after a long one, and the other way round.
    const size_t total = kCrc32cShortMax + 100;
    const uint32_t whole = crc32c_reference(data.data(), total);
    for (size_t cut : {size_t(3), size_t(64), kCrc32cShortMax - 1, kCrc32cShortMax, total - 5}) {
        INFO("cut " << cut);
        const uint32_t st = crc32c_inline(kCrc32cInit, {data.data(), cut});
        CHECK(crc32c_finish(crc32c_inline(st, {data.data() + cut, total - cut})) == whole);
    }
}
