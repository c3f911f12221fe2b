// The 128-bit PCLMULQDQ folding kernel (crc32c_kernels.h has the arithmetic).
//
// On this project's first reference machine (AMD Zen 1) one crc32
// instruction retires every ~3 cycles however many chains run (the
// three-chain kernel peaked at 6 GB/s), while PCLMULQDQ retires every 2
// cycles, and the two share the same resource. Folding 16-byte lanes with
// carry-less multiplies costs one PCLMULQDQ per 8 bytes (~4 B/cycle), the
// ceiling; the integer units are left idle by it, so large buffers also run a
// small table-driven chain over an interleaved slice of each chunk (another
// ~5%).
#include "tailmark/crc32c_kernels.h"

#include <smmintrin.h>
#include <wmmintrin.h>

namespace tailmark::crc32c_detail {

namespace {

TM_TARGET_FOLD128 inline __m128i kvec(FoldK k) {
    return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}
TM_TARGET_FOLD128 inline __m128i load128(const uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
TM_TARGET_FOLD128 inline __m128i with_crc(__m128i v, uint32_t crc) {
    return _mm_xor_si128(v, _mm_cvtsi32_si128(static_cast<int>(crc)));
}
// x moved forward by the distance k was made for, plus data (the lane there).
TM_TARGET_FOLD128 inline __m128i fold(__m128i x, __m128i k, __m128i data) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)),
                         data);
}
TM_TARGET_FOLD128 inline uint32_t lane_crc(__m128i r) {
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
TM_TARGET_FOLD128 inline __m128i take(const uint8_t* p, uint8_t* d, size_t off) {
    const __m128i v = load128(p + off);
    if constexpr (kCopy)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + off), v);
    return v;
}

// Four lanes over 64-byte strides, then one 16-byte lane value.
template <bool kCopy = false>
TM_TARGET_FOLD128 inline __m128i fold4(uint32_t crc, const uint8_t*& p, size_t& len, uint8_t** dst = nullptr) {
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
TM_TARGET_FOLD128 inline uint32_t chunks(uint32_t crc, const uint8_t*& p, size_t& len) {
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

} // namespace

uint32_t update_fold128(uint32_t state, std::span<const uint8_t> bytes) {
    const uint8_t* p = bytes.data();
    size_t len = bytes.size();
    uint64_t crc = state;
    // A chunk is only worth its set-up and final reduction with a fair tail
    // of plain folding behind it.
    if (len >= kChunk + 256)
        crc = chunks(static_cast<uint32_t>(crc), p, len);
    if (len >= kFoldMin)
        crc = lane_crc(fold4(static_cast<uint32_t>(crc), p, len));
    return crc32_bytes(static_cast<uint32_t>(crc), p, len);
}

uint32_t copy_fold128(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    const uint8_t* p = src.data();
    size_t len = src.size();
    if (len >= kChunk + 256 || len < kFoldMin) { // jumbo or tiny: two passes, the second from L1
        memcpy(dst, p, len);
        return update_fold128(state, src);
    }
    uint64_t crc = lane_crc(fold4<true>(state, p, len, &dst));
    memcpy(dst, p, len); // the tail (< 64 bytes)
    return update_fold128(static_cast<uint32_t>(crc), {p, len});
}

} // namespace tailmark::crc32c_detail
