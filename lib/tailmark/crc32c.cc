#include "tailmark/crc32c.h"

#include <array>
#include <cstring>

#include <nmmintrin.h>
#if defined(__PCLMUL__)
#include <smmintrin.h>
#include <wmmintrin.h>
#endif

namespace tailmark {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u; // reflected Castagnoli

inline uint64_t load64(const uint8_t* p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#if defined(__PCLMUL__)

// On this project's reference machine (AMD Zen 1) one crc32 instruction
// retires every ~3 cycles however many chains run (the three-chain code below
// the #else peaked at 6 GB/s), while PCLMULQDQ retires every 2 cycles, and the
// two share the same resource. Folding 16-byte lanes with carry-less
// multiplies costs one PCLMULQDQ per 8 bytes (~4 B/cycle), the ceiling; the
// integer units are left idle by it, so large buffers also run a small
// table-driven chain over an interleaved slice of each chunk (another ~5%).
//
// Conventions (all bit-reflected, as the crc32 instruction and the trailer
// are): a 128-bit lane loaded little-endian from 16 bytes has bit k standing
// for x^(127-k), counted from the lane's last bit. The raw CRC register of a
// message M (initial value 0) is M(x)*x^32 mod P, so a register value c is
// carried into following data by XORing it into their first 4 bytes, and a
// lane value R ends as crc32(0, R) run over its 16 bytes.

// x^n mod P, reflected (bit 31 stands for x^0). consteval: a run-time call
// would cost n steps.
consteval uint32_t xpow(size_t n) {
    uint32_t v = 0x80000000u;
    while (n--)
        v = (v >> 1) ^ (kPoly & (0u - (v & 1)));
    return v;
}
static_assert(xpow(0) == 0x80000000u && xpow(31) == 1u && xpow(32) == kPoly);

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

inline __m128i kvec(FoldK k) {
    return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}
inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m128i with_crc(__m128i v, uint32_t crc) {
    return _mm_xor_si128(v, _mm_cvtsi32_si128(static_cast<int>(crc)));
}
// x moved forward by the distance k was made for, plus data (the lane there).
inline __m128i fold(__m128i x, __m128i k, __m128i data) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)),
                         data);
}
inline uint32_t lane_crc(__m128i r) {
    uint64_t crc = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(r)));
    return static_cast<uint32_t>(_mm_crc32_u64(crc, static_cast<uint64_t>(_mm_extract_epi64(r, 1))));
}

// Below this a single crc32 chain is as fast and the folding set-up is not paid.
constexpr size_t kFoldMin = 64;

// One 16-byte load; with a destination, the same register is stored there
// (crc32c_copy: the copy rides on the CRC's loads).
// Offsets apart from the pointers: without a copy d is null, and null + 16
// is undefined behaviour (UBSan says so).
template <bool kCopy>
inline __m128i take(const uint8_t* p, uint8_t* d, size_t off) {
    const __m128i v = load128(p + off);
    if constexpr (kCopy)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + off), v);
    return v;
}

// Four lanes over 64-byte strides, then one 16-byte lane value.
template <bool kCopy = false>
inline __m128i fold4(uint32_t crc, const uint8_t*& p, size_t& len, uint8_t** dst = nullptr) {
    uint8_t* d = kCopy ? *dst : nullptr;
    __m128i x0 = with_crc(take<kCopy>(p, d, 0), crc), x1 = take<kCopy>(p, d, 16),
            x2 = take<kCopy>(p, d, 32), x3 = take<kCopy>(p, d, 48);
    p += 64;
    len -= 64;
    if constexpr (kCopy)
        d += 64;
    constexpr FoldK k64 = fold_k(64 * 8), k48 = fold_k(48 * 8), k32 = fold_k(32 * 8), k16 = fold_k(16 * 8);
    const __m128i step = kvec(k64);
    for (; len >= 64; p += 64, len -= 64) {
        x0 = fold(x0, step, take<kCopy>(p, d, 0));
        x1 = fold(x1, step, take<kCopy>(p, d, 16));
        x2 = fold(x2, step, take<kCopy>(p, d, 32));
        x3 = fold(x3, step, take<kCopy>(p, d, 48));
        if constexpr (kCopy)
            d += 64;
    }
    if constexpr (kCopy)
        *dst = d;
    // Each lane straight to the last one's position: three multiplies in
    // parallel rather than in series.
    const __m128i a = fold(x0, kvec(k48), x3);
    const __m128i b = fold(x1, kvec(k32), _mm_setzero_si128());
    return fold(x2, kvec(k16), _mm_xor_si128(a, b));
}

// Slicing-by-4 tables: kSlice[k][n] is the CRC of byte n followed by k zeros.
using SliceTables = std::array<std::array<uint32_t, 256>, 4>;
constexpr SliceTables slice_tables() {
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
constexpr SliceTables kSlice = slice_tables();

inline uint32_t slice4(uint32_t crc, const uint8_t* p) {
    uint32_t v;
    memcpy(&v, p, 4);
    v ^= crc;
    return kSlice[3][v & 0xFF] ^ kSlice[2][(v >> 8) & 0xFF] ^ kSlice[1][(v >> 16) & 0xFF] ^ kSlice[0][v >> 24];
}

// Large buffers go in chunks of kIters steps. Each step folds kLanes lanes
// (region A, the chunk's first kIters*kLanes*16 bytes) and feeds kSlices*4
// bytes of region B (the chunk's tail) through the table chain; the lanes jump
// over B, and B's CRC enters the next chunk's first lane as a register value.
// 8 lanes + 8 table bytes per 128 was the best mix measured (8_24_2 of 10
// lane/step/table mixes); more table work per step competes with the
// multiplies for issue and costs more than it gives.
constexpr int kLanes = 8;
constexpr size_t kIters = 24;
constexpr int kSlices = 2;
constexpr size_t kChunkA = kIters * kLanes * 16;
constexpr size_t kChunkB = kIters * kSlices * 4;
constexpr size_t kChunk = kChunkA + kChunkB;
constexpr FoldK kStepK = fold_k(kLanes * 16 * 8);           // lane to the same lane one step on
constexpr FoldK kJumpK = fold_k((kLanes * 16 + kChunkB) * 8); // ... across region B
constexpr FoldK kOverB = fold_k(kChunkB * 8);
consteval std::array<FoldK, kLanes> to_last_lane() {
    std::array<FoldK, kLanes> k{};
    for (int i = 0; i < kLanes - 1; i++)
        k[i] = fold_k((kLanes - 1 - i) * 16 * 8);
    return k;
}

// Whole chunks of p (at least one): returns the raw register after them.
inline uint32_t chunks(uint32_t crc, const uint8_t*& p, size_t& len) {
    const size_t n = len / kChunk;
    const __m128i kStep = kvec(kStepK);
    const __m128i kJump = kvec(kJumpK);
    __m128i x[kLanes];
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; i++)
        x[i] = load128(p + 16 * i);
    x[0] = with_crc(x[0], crc);
    uint32_t t = 0;
    for (size_t c = 0;;) {
        const uint8_t* a = p + kLanes * 16;
        const uint8_t* b = p + kChunkA;
        t = 0;
        for (size_t it = 1; it < kIters; it++, a += kLanes * 16, b += kSlices * 4) {
#pragma GCC unroll 16
            for (int i = 0; i < kLanes; i++)
                x[i] = fold(x[i], kStep, load128(a + 16 * i));
#pragma GCC unroll 16
            for (int s = 0; s < kSlices; s++)
                t = slice4(t, b + 4 * s);
        }
#pragma GCC unroll 16
        for (int s = 0; s < kSlices; s++)
            t = slice4(t, b + 4 * s);
        p += kChunk;
        if (++c == n)
            break;
        x[0] = fold(x[0], kJump, with_crc(load128(p), t));
#pragma GCC unroll 16
        for (int i = 1; i < kLanes; i++)
            x[i] = fold(x[i], kJump, load128(p + 16 * i));
    }
    len -= n * kChunk;
    // Lanes to the last one's position, in parallel, then over region B.
    static constexpr std::array<FoldK, kLanes> kToLast = to_last_lane();
    __m128i r = x[kLanes - 1];
#pragma GCC unroll 16
    for (int i = 0; i < kLanes - 1; i++)
        r = _mm_xor_si128(r, fold(x[i], kvec(kToLast[i]), _mm_setzero_si128()));
    r = fold(r, kvec(kOverB), _mm_setzero_si128());
    return lane_crc(r) ^ t;
}

#else // !__PCLMUL__

// Without PCLMULQDQ. On Intel cores one crc32 instruction has a latency of 3
// cycles and a throughput of 1, so a single chain (what rte_hash_crc does)
// leaves two thirds of the unit idle. Large buffers run three independent
// chains over adjacent blocks and join them with "append N zero bytes"
// operators, as in Mark Adler's crc32c.c and Intel's crc_pcl:
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
inline const uint8_t* three_way(uint64_t& crc0, const uint8_t* p, size_t& len, const ShiftTable& t) {
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

#endif // __PCLMUL__

} // namespace

#if defined(__PCLMUL__)

uint32_t crc32c_update(uint32_t state, std::span<const uint8_t> bytes) {
    const uint8_t* p = bytes.data();
    size_t len = bytes.size();
    uint64_t crc = state;
    // A chunk is only worth its set-up and final reduction with a fair tail
    // of plain folding behind it.
    if (len >= kChunk + 256)
        crc = chunks(static_cast<uint32_t>(crc), p, len);
    if (len >= kFoldMin)
        crc = lane_crc(fold4(static_cast<uint32_t>(crc), p, len));
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

uint32_t crc32c_copy(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    const uint8_t* p = src.data();
    size_t len = src.size();
    if (len >= kChunk + 256 || len < kFoldMin) { // jumbo or tiny: two passes, the second from L1
        memcpy(dst, p, len);
        return crc32c_update(state, src);
    }
    uint64_t crc = lane_crc(fold4<true>(state, p, len, &dst));
    memcpy(dst, p, len); // the tail (< 64 bytes)
    return crc32c_update(static_cast<uint32_t>(crc), {p, len});
}

#else

uint32_t crc32c_copy(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    memcpy(dst, src.data(), src.size());
    return crc32c_update(state, src);
}

uint32_t crc32c_update(uint32_t state, std::span<const uint8_t> bytes) {
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

#endif

} // namespace tailmark
