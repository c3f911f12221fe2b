// Internal to the CRC32C kernels (crc32c*.cc): each kernel's entry points,
// which crc32c.cc dispatches to by CPU flags, and the arithmetic they share.
//
// Each kernel is compiled with its own target attribute rather than the
// build's -march, so a baseline (x86-64) build still carries all of them and
// the CPU picks at run time. The attribute is on the declarations too: in C++
// GCC takes a definition whose target differs from its declaration's for
// another version of a multiversioned function.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <nmmintrin.h>

#define TM_TARGET_SSE42 __attribute__((target("sse4.2")))
#define TM_TARGET_FOLD128 __attribute__((target("sse4.2,pclmul")))
#define TM_TARGET_FOLD512 __attribute__((target("sse4.2,pclmul,avx512f,avx512bw,avx512vl,vpclmulqdq")))

namespace tailmark::crc32c_detail {

inline constexpr uint32_t kPoly = 0x82F63B78u; // reflected Castagnoli

inline uint64_t load64(const uint8_t* p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

// x^n mod P, reflected (bit 31 stands for x^0). consteval: a run-time call
// would cost n steps.
consteval uint32_t xpow(size_t n) {
    uint32_t v = 0x80000000u;
    while (n--)
        v = (v >> 1) ^ (kPoly & (0u - (v & 1)));
    return v;
}
static_assert(xpow(0) == 0x80000000u && xpow(31) == 1u && xpow(32) == kPoly);

// Folding conventions (all bit-reflected, as the crc32 instruction and the
// trailer are): a 128-bit lane loaded little-endian from 16 bytes has bit k
// standing for x^(127-k), counted from the lane's last bit. The raw CRC
// register of a message M (initial value 0) is M(x)*x^32 mod P, so a register
// value c is carried into following data by XORing it into their first 4
// bytes, and a lane value R ends as crc32(0, R) run over its 16 bytes.
//
// Moving a lane forward by d bits: its low qword H (bits 0..63, the earlier
// bytes) stands for H*x^64, its high qword L for L; each is multiplied by a
// 32-bit constant. A 64x32 carry-less product of reflected operands lands in
// bits 0..94 with bit k for x^(94-k), i.e. the lane value (H*K)*x^33, so the
// constants are x^(64+d-33) and x^(d-33). Checked against a bitwise CRC by
// tests/lib/test_crc32c.cc at every length through the lane/chunk thresholds.
struct FoldK {
    uint64_t lo, hi;
};
consteval FoldK fold_k(size_t bits) { return {xpow(bits + 31), xpow(bits - 33)}; }

// The register after p[0, len) by the crc32 instruction, one chain: the
// fastest way through a short buffer (the folding kernels' tails and small
// sizes).
TM_TARGET_SSE42 inline uint32_t crc32_bytes(uint32_t state, const uint8_t* p, size_t len) {
    uint64_t crc = state;
    for (; len >= 8; len -= 8, p += 8)
        crc = _mm_crc32_u64(crc, load64(p));
    if (len & 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        crc = _mm_crc32_u32(static_cast<uint32_t>(crc), v);
        p += 4;
    }
    if (len & 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        crc = _mm_crc32_u16(static_cast<uint32_t>(crc), v);
        p += 2;
    }
    if (len & 1)
        crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p);
    return static_cast<uint32_t>(crc);
}

// Slicing tables: kSlice[k][n] is the CRC register of byte n followed by k
// zero bytes. The portable kernel runs all eight; the 128-bit folding kernel
// runs a slicing-by-4 chain beside its multiplies.
using SliceTables = std::array<std::array<uint32_t, 256>, 8>;
consteval SliceTables slice_tables() {
    SliceTables t{};
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (kPoly & (0u - (c & 1)));
        t[0][n] = c;
    }
    for (size_t s = 1; s < t.size(); s++)
        for (uint32_t n = 0; n < 256; n++)
            t[s][n] = (t[s - 1][n] >> 8) ^ t[0][t[s - 1][n] & 0xFF];
    return t;
}
inline constexpr SliceTables kSlice = slice_tables();

// Every kernel: the raw register after `bytes`, from `state` (crc32c_update);
// and the same while copying src to dst, which must not overlap (crc32c_copy).
using UpdateFn = uint32_t (*)(uint32_t state, std::span<const uint8_t> bytes);
using CopyFn = uint32_t (*)(uint32_t state, uint8_t* dst, std::span<const uint8_t> src);

// crc32c_chains.cc: slicing-by-8 (any x86-64), and three crc32 chains (SSE4.2).
uint32_t update_table(uint32_t state, std::span<const uint8_t> bytes);
uint32_t copy_table(uint32_t state, uint8_t* dst, std::span<const uint8_t> src);
TM_TARGET_SSE42 uint32_t update_chains(uint32_t state, std::span<const uint8_t> bytes);
TM_TARGET_SSE42 uint32_t copy_chains(uint32_t state, uint8_t* dst, std::span<const uint8_t> src);

// crc32c_fold128.cc: 128-bit PCLMULQDQ folding.
TM_TARGET_FOLD128 uint32_t update_fold128(uint32_t state, std::span<const uint8_t> bytes);
TM_TARGET_FOLD128 uint32_t copy_fold128(uint32_t state, uint8_t* dst, std::span<const uint8_t> src);

// crc32c_avx512.cc: 512-bit VPCLMULQDQ folding (under 128 bytes, one crc32 chain).
TM_TARGET_FOLD512 uint32_t update_fold512(uint32_t state, std::span<const uint8_t> bytes);
TM_TARGET_FOLD512 uint32_t copy_fold512(uint32_t state, uint8_t* dst, std::span<const uint8_t> src);

} // namespace tailmark::crc32c_detail
