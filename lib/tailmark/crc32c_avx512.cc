// The 512-bit VPCLMULQDQ folding kernel: the 128-bit kernel's lane folding
// (crc32c_kernels.h has the arithmetic) on four 16-byte lanes per zmm
// register, kAcc registers over kAcc*64-byte strides.
//
// No head or tail loop: a run of zero bytes in front of a message does not
// change its raw CRC once the register holding them is 0, so the data is
// taken as if zero-padded in front to a whole number of strides, its end on a
// stride's end. The first stride is read with masked loads (the pad's bytes
// are neither read nor, in the copy, written), the caller's register is
// XORed in where the data starts, and every later load is a whole zmm.
#include "tailmark/crc32c_kernels.h"

#include <immintrin.h>

namespace tailmark::crc32c_detail {

namespace {

// Bounds, measured on an AMD EPYC (Zen 5) in bytes per TSC cycle, for calls
// back to back (throughput) and calls chained through the state (latency),
// update and copy alike:
// - below kFold512Min one crc32 chain (after a memcpy, for a copy) does as
//   well: the zmm reduction costs the same at any length. At 128 B one zmm
//   accumulator gives 13.1 vs 9.2 throughput, 5.1 vs 4.7 latency. fold128's
//   four xmm lanes lose to the chain at 64..127 on both counts, so the
//   chain, not fold128, is the short path;
// - from kWide, four accumulators: 1.6x one's latency-bound rate at 512 B
//   (15.8 vs 9.9) for 11% less throughput (the padded first stride and the
//   16-lane reduction), 1.9x at 1456 B for 2% less; at 4 KiB and up they
//   are throughput-bound at ~27, one at ~14 either way.
constexpr size_t kFold512Min = 128;
constexpr size_t kWide = 512;

struct alignas(64) Zmm {
    uint64_t q[8];
};

// A stride's constants: step moves each lane one stride on; to_end[j] moves
// every lane of accumulator j to the stride's last 16 bytes (the last lane of
// the last accumulator is there already: zero constants, added as is).
// Not templates: clang 14 rejects consteval calls inside consteval templates.
struct StrideK {
    Zmm step;
    std::array<Zmm, 4> to_end;
};
consteval StrideK stride_k(size_t acc) {
    StrideK k{};
    const FoldK s = fold_k(acc * 64 * 8);
    for (size_t l = 0; l < 4; l++) {
        k.step.q[2 * l] = s.lo;
        k.step.q[2 * l + 1] = s.hi;
    }
    for (size_t j = 0; j < acc; j++)
        for (size_t l = 0; l < 4; l++) {
            const size_t lanes = 4 * (acc - j) - l - 1;
            const FoldK f = lanes ? fold_k(lanes * 16 * 8) : FoldK{0, 0};
            k.to_end[j].q[2 * l] = f.lo;
            k.to_end[j].q[2 * l + 1] = f.hi;
        }
    return k;
}
constexpr StrideK kStrideK[] = {stride_k(1), stride_k(4)}; // by kAcc / 4

TM_TARGET_FOLD512 inline __m512i zload(const Zmm& k) { return _mm512_load_si512(k.q); }

// x moved forward by the distance k was made for, plus data.
TM_TARGET_FOLD512 inline __m512i fold(__m512i x, __m512i k, __m512i data) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                     data, 0x96);
}

TM_TARGET_FOLD512 inline uint32_t lane_crc(__m128i r) {
    const uint64_t crc = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(r)));
    return static_cast<uint32_t>(_mm_crc32_u64(crc, static_cast<uint64_t>(_mm_extract_epi64(r, 1))));
}

// One whole zmm at p + off; with a copy, stored at d + off (offsets apart
// from the pointers: without a copy d is null).
template <bool kCopy>
TM_TARGET_FOLD512 inline __m512i take(const uint8_t* p, uint8_t* d, size_t off) {
    const __m512i v = _mm512_loadu_si512(p + off);
    if constexpr (kCopy)
        _mm512_storeu_si512(d + off, v);
    return v;
}

// The register after p[0, len), len >= 4; with a copy, p stored to d.
template <size_t kAcc, bool kCopy>
TM_TARGET_FOLD512 uint32_t fold512(uint32_t state, const uint8_t* p, uint8_t* d, size_t len) {
    constexpr size_t kStride = kAcc * 64;
    // The register goes in on a 4-byte boundary of the padded stride, so the
    // first len % 4 bytes go through crc32 first.
    uint64_t crc = state;
    size_t off = 0;
    if (len & 1) {
        crc = _mm_crc32_u8(static_cast<uint32_t>(crc), p[0]);
        if constexpr (kCopy)
            d[0] = p[0];
        off = 1;
    }
    if (len & 2) {
        uint16_t v;
        memcpy(&v, p + off, 2);
        crc = _mm_crc32_u16(static_cast<uint32_t>(crc), v);
        if constexpr (kCopy)
            memcpy(d + off, &v, 2);
        off += 2;
    }
    len -= off;

    // The first stride: bytes [off - pad, off + kStride - pad) of p, the
    // first pad of them not the data's. Addresses before p are formed as
    // integers (a pointer before its array is undefined behaviour); the
    // masked loads and stores do not touch those bytes.
    const size_t pad = (kStride - len % kStride) % kStride;
    const uintptr_t src0 = reinterpret_cast<uintptr_t>(p) + off - pad;
    const uintptr_t dst0 = kCopy ? reinterpret_cast<uintptr_t>(d) + off - pad : 0;
    // The register goes into the data's first dword (pad % 4 == 0), by a
    // masked XOR into every accumulator: an index picking one would keep x
    // in memory.
    const uint64_t at = uint64_t{1} << (pad / 4);
    const __m512i c = _mm512_set1_epi32(static_cast<int>(crc));
    __m512i x[kAcc];
#pragma GCC unroll 8
    for (size_t j = 0; j < kAcc; j++) {
        const size_t skip = pad > 64 * j ? pad - 64 * j : 0;
        const __mmask64 m = skip >= 64 ? 0 : ~__mmask64{0} << skip;
        x[j] = _mm512_maskz_loadu_epi8(m, reinterpret_cast<const void*>(src0 + 64 * j));
        if constexpr (kCopy)
            _mm512_mask_storeu_epi8(reinterpret_cast<void*>(dst0 + 64 * j), m, x[j]);
        x[j] = _mm512_mask_xor_epi32(x[j], static_cast<__mmask16>(at >> (16 * j)), x[j], c);
    }
    off += kStride - pad;
    len -= kStride - pad;

    static_assert(kAcc == 1 || kAcc == 4);
    constexpr const StrideK& k = kStrideK[kAcc / 4];
    const __m512i step = zload(k.step);
    for (; len; off += kStride, len -= kStride) {
#pragma GCC unroll 8
        for (size_t j = 0; j < kAcc; j++)
            x[j] = fold(x[j], step, take<kCopy>(p, d, off + 64 * j));
    }

    // All lanes to the last one's position in parallel, then the four lanes
    // of the sum XORed into one. Lanes by shuffle: GCC 12's own casts and
    // extracts from zmm trip -Wmaybe-uninitialized in its headers.
    __m512i t = _mm512_maskz_mov_epi64(0xC0, x[kAcc - 1]);
#pragma GCC unroll 8
    for (size_t j = 0; j < kAcc; j++)
        t = fold(x[j], zload(k.to_end[j]), t);
    const __m128i l0 = __builtin_shufflevector(t, t, 0, 1), l1 = __builtin_shufflevector(t, t, 2, 3),
                  l2 = __builtin_shufflevector(t, t, 4, 5), l3 = __builtin_shufflevector(t, t, 6, 7);
    return lane_crc(_mm_ternarylogic_epi64(l0, l1, _mm_xor_si128(l2, l3), 0x96));
}

} // namespace

uint32_t update_fold512(uint32_t state, std::span<const uint8_t> bytes) {
    const size_t len = bytes.size();
    if (len < kFold512Min)
        return crc32_bytes(state, bytes.data(), len);
    if (len < kWide)
        return fold512<1, false>(state, bytes.data(), nullptr, len);
    return fold512<4, false>(state, bytes.data(), nullptr, len);
}

uint32_t copy_fold512(uint32_t state, uint8_t* dst, std::span<const uint8_t> src) {
    const size_t len = src.size();
    if (len < kFold512Min) {
        memcpy(dst, src.data(), len);
        return crc32_bytes(state, src.data(), len);
    }
    if (len < kWide)
        return fold512<1, true>(state, src.data(), dst, len);
    return fold512<4, true>(state, src.data(), dst, len);
}

} // namespace tailmark::crc32c_detail
