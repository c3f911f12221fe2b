// The CRC32C kernels without carry-less multiplies: three interleaved crc32
// instruction chains (SSE4.2), and slicing-by-8 tables for a CPU without even
// that (DPDK itself wants SSE4.2, so the tables are a floor, not a path).
#include "tailmark/crc32c_kernels.h"

#include <nmmintrin.h>

namespace tailmark::crc32c_detail {

namespace {

// On Intel cores one crc32 instruction has a latency of 3 cycles and a
// throughput of 1, so a single chain (what rte_hash_crc does) leaves two
// thirds of the unit idle. Large buffers run three independent chains over
// adjacent blocks and join them with "append N zero bytes" operators, as in
// Mark Adler's crc32c.c and Intel's crc_pcl:
// shift(crc(A)) ^ crc(B) == crc(A || B) for the raw (non-inverted) register.

using Matrix = std::array<uint32_t, 32>; // GF(2) 32x32, one column per bit

constexpr uint32_t times(const Matrix& m, uint32_t v) {
    uint32_t sum = 0;
    for (int i = 0; v; i++, v >>= 1)
        if (v & 1)
            sum ^= m[i];
    return sum;
}

constexpr Matrix square(const Matrix& m) {
    Matrix r{};
    for (int n = 0; n < 32; n++)
        r[n] = times(m, m[n]);
    return r;
}

// The operator that appends `len` zero bytes to a raw CRC register.
constexpr Matrix zeros_operator(size_t len) {
    Matrix odd{};
    odd[0] = kPoly; // one zero bit
    for (int n = 1; n < 32; n++)
        odd[n] = 1u << (n - 1);
    const Matrix two = square(odd);
    const Matrix four = square(two);
    // One zero byte; then binary exponentiation over the bits of len.
    Matrix power = square(four);
    Matrix result{};
    bool have = false;
    while (len) {
        if (len & 1) {
            if (!have) {
                result = power;
                have = true;
            } else {
                Matrix r{};
                for (int n = 0; n < 32; n++)
                    r[n] = times(power, result[n]);
                result = r;
            }
        }
        len >>= 1;
        if (len)
            power = square(power);
    }
    return result;
}

using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;

constexpr ShiftTable shift_table(size_t len) {
    const Matrix op = zeros_operator(len);
    ShiftTable t{};
    for (uint32_t n = 0; n < 256; n++) {
        t[0][n] = times(op, n);
        t[1][n] = times(op, n << 8);
        t[2][n] = times(op, n << 16);
        t[3][n] = times(op, n << 24);
    }
    return t;
}

constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;
constexpr ShiftTable kShiftLong = shift_table(kLong);
constexpr ShiftTable kShiftShort = shift_table(kShort);

inline uint64_t shift(const ShiftTable& t, uint64_t crc) {
    return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][(crc >> 24) & 0xFF];
}

template <size_t kBlock>
TM_TARGET_SSE42 inline const uint8_t* three_way(uint64_t& crc0, const uint8_t* p, size_t& len, const ShiftTable& t) {
    while (len >= 3 * kBlock) {
        uint64_t crc1 = 0, crc2 = 0;
        const uint8_t* end = p + kBlock;
        do {
            crc0 = _mm_crc32_u64(crc0, load64(p));
            crc1 = _mm_crc32_u64(crc1, load64(p + kBlock));
            crc2 = _mm_crc32_u64(crc2, load64(p + 2 * kBlock));
            p += 8;
        } while (p < end);
        crc0 = shift(t, crc0) ^ crc1;
        crc0 = shift(t, crc0) ^ crc2;
        p += 2 * kBlock;
        len -= 3 * kBlock;
    }
    return p;
}

} // namespace

uint32_t update_table(uint32_t state, std::span<const uint8_t> bytes) {
    const uint8_t* p = bytes.data();
    size_t len = bytes.size();
    uint32_t crc = state;
    for (; len >= 8; len -= 8, p += 8) {
        const uint64_t v = load64(p) ^ crc;
        crc = kSlice[7][v & 0xFF] ^ kSlice[6][(v >> 8) & 0xFF] ^ kSlice[5][(v >> 16) & 0xFF] ^
              kSlice[4][(v >> 24) & 0xFF] ^ kSlice[3][(v >> 32) & 0xFF] ^ kSlice[2][(v >> 40) & 0xFF] ^
              kSlice[1][(v >> 48) & 0xFF] ^ kSlice[0][v >> 56];
    }
    for (; len; len--)
        crc = (crc >> 8) ^ kSlice[0][(crc ^ *p++) & 0xFF];
    return crc;
}

uint32_t copy_table(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    memcpy(dst, src.data(), src.size());
    return update_table(state, src);
}

uint32_t update_chains(uint32_t state, std::span<const uint8_t> bytes) {
    const uint8_t* p = bytes.data();
    size_t len = bytes.size();
    uint64_t crc = state;
    while (len && (reinterpret_cast<uintptr_t>(p) & 7)) {
        crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p++);
        len--;
    }
    p = three_way<kLong>(crc, p, len, kShiftLong);
    p = three_way<kShort>(crc, p, len, kShiftShort);
    for (; len >= 8; len -= 8, p += 8)
        crc = _mm_crc32_u64(crc, load64(p));
    for (; len; len--)
        crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p++);
    return static_cast<uint32_t>(crc);
}

uint32_t copy_chains(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    memcpy(dst, src.data(), src.size());
    return update_chains(state, src);
}

} // namespace tailmark::crc32c_detail
