// POLYVAL kernels and their dispatch (polyval.h).
//
// Arithmetic (Gueron, "AES-GCM-SIV: specification and analysis", and his
// AES-GCM-SIV POLYVAL code): a 128 x 128 carry-less product by Karatsuba
// (three 64 x 64 multiplies: lo*lo, hi*hi, (lo^hi)*(lo^hi)) is a 256-bit
// T = T_hi * x^128 + T_lo, and dot = T * x^-128 = T_hi + T_lo * x^-128.
// T_lo * x^-128 is two Montgomery steps of 64 bits: with P = 1 mod x^64,
// (L1 * x^64 + L0 + L0 * P) / x^64 = L1 + L0 * x^64 + L0 * (x^63 + x^62 + x^57),
// i.e. swap L's halves and XOR in L0 carry-less times 0xc200000000000000.
// dot is bilinear and the reduction linear, so 8 blocks are multiplied by
// H^8..H^1, their unreduced products summed, and reduced once.
//
// Each SIMD kernel carries its own target attribute (crc32c_kernels.h says
// why), so a baseline build still has them all and the CPU picks.
#include "tailmark/polyval.h"

#include <atomic>
#include <bit>
#include <cstring>

#include <immintrin.h>

#define TM_PV_CLMUL __attribute__((target("sse4.1,pclmul")))
#define TM_PV_VCLMUL __attribute__((target("sse4.1,pclmul,avx2,vpclmulqdq")))
#define TM_PV_CLMUL_INLINE __attribute__((target("sse4.1,pclmul"), always_inline)) inline
#define TM_PV_VCLMUL_INLINE __attribute__((target("sse4.1,pclmul,avx2,vpclmulqdq"), always_inline)) inline

namespace tailmark {

static_assert(std::endian::native == std::endian::little, "blocks are loaded as little-endian words");

namespace {

// The reduction constant: x^63 + x^62 + x^57, the terms of P below x^128
// (other than 1), moved down by 64.
constexpr uint64_t kPolyC = 0xc200000000000000ull;

// A kernel absorbs n whole blocks at p and then ntail at tail into acc
// (POLYVAL's S), block by block: acc = dot(acc ^ X, H) for each X. The tail
// is the message's last blocks (the padded partial one, the length block),
// which live in a buffer of their own: one call, and one reduction, takes
// them with the data's last group.
using BlocksFn = void (*)(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n, const uint8_t* tail,
                          size_t ntail);

// ---------------------------------------------------------------------------
// Portable: 64 x 64 carry-less multiplies out of integer multiplies with
// holes (every fourth bit; BearSSL's bmul64), no tables and no branches on
// key or data. One block at a time by Horner's rule with H = pow[7].

inline uint64_t load64(const uint8_t* p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

// The low 64 bits of the carry-less product x * y. The integer products of
// bits four apart add at most 16 ones in a 4-bit column, and 16 only in the
// column at bit 60, whose carry leaves the low 64 bits: every column's
// parity is right.
inline uint64_t bmul64_lo(uint64_t x, uint64_t y) {
    constexpr uint64_t m0 = 0x1111111111111111ull, m1 = m0 << 1, m2 = m0 << 2, m3 = m0 << 3;
    const uint64_t x0 = x & m0, x1 = x & m1, x2 = x & m2, x3 = x & m3;
    const uint64_t y0 = y & m0, y1 = y & m1, y2 = y & m2, y3 = y & m3;
    uint64_t z0 = (x0 * y0) ^ (x1 * y3) ^ (x2 * y2) ^ (x3 * y1);
    uint64_t z1 = (x0 * y1) ^ (x1 * y0) ^ (x2 * y3) ^ (x3 * y2);
    uint64_t z2 = (x0 * y2) ^ (x1 * y1) ^ (x2 * y0) ^ (x3 * y3);
    uint64_t z3 = (x0 * y3) ^ (x1 * y2) ^ (x2 * y1) ^ (x3 * y0);
    return (z0 & m0) | (z1 & m1) | (z2 & m2) | (z3 & m3);
}

inline uint64_t rev64(uint64_t x) {
    x = ((x >> 1) & 0x5555555555555555ull) | ((x & 0x5555555555555555ull) << 1);
    x = ((x >> 2) & 0x3333333333333333ull) | ((x & 0x3333333333333333ull) << 2);
    x = ((x >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((x & 0x0F0F0F0F0F0F0F0Full) << 4);
    return __builtin_bswap64(x);
}

struct U128 {
    uint64_t lo, hi;
};

// The 127-bit carry-less product: the high half from the low half of the
// bit-reversed operands' product (its bit j is the product's bit 126 - j).
inline U128 clmul64(uint64_t x, uint64_t y) {
    return {bmul64_lo(x, y), rev64(bmul64_lo(rev64(x), rev64(y))) >> 1};
}

// dot(a, b) = a * b * x^-128 mod P.
inline U128 dot_portable(U128 a, U128 b) {
    const U128 l = clmul64(a.lo, b.lo), h = clmul64(a.hi, b.hi), m = clmul64(a.lo ^ a.hi, b.lo ^ b.hi);
    const uint64_t m0 = m.lo ^ l.lo ^ h.lo, m1 = m.hi ^ l.hi ^ h.hi;
    uint64_t t0 = l.lo, t1 = l.hi ^ m0;
    const uint64_t t2 = h.lo ^ m1, t3 = h.hi;
    for (int i = 0; i < 2; i++) { // (t1:t0) = (t0:t1) ^ t0 * kPolyC, by shifts
        const uint64_t lo = t1 ^ (t0 << 63) ^ (t0 << 62) ^ (t0 << 57);
        const uint64_t hi = t0 ^ (t0 >> 1) ^ (t0 >> 2) ^ (t0 >> 7);
        t0 = lo;
        t1 = hi;
    }
    return {t0 ^ t2, t1 ^ t3};
}

inline U128 horner(U128 a, U128 h, const uint8_t* p, size_t n) {
    for (; n > 0; n--, p += kPolyvalBlock)
        a = dot_portable({a.lo ^ load64(p), a.hi ^ load64(p + 8)}, h);
    return a;
}

void blocks_portable(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n, const uint8_t* tail,
                     size_t ntail) {
    const U128 h{k.pow[kPolyvalPowers - 1][0], k.pow[kPolyvalPowers - 1][1]};
    const U128 a = horner(horner({acc[0], acc[1]}, h, p, n), h, tail, ntail);
    acc[0] = a.lo;
    acc[1] = a.hi;
}

// ---------------------------------------------------------------------------
// PCLMULQDQ, 128 bits: 8 blocks per reduction.
//
// On the Zen 3 guest of the bench in test_polyval.cc (2 vCPUs under KVM) the
// carry-less multiply measured 4 cycles of latency but only one per ~2.3
// cycles of throughput, xmm or ymm alike: these kernels are bound by the
// multiplies' count, not by the accumulator's dependency chain, so they spend
// as few as they can: Karatsuba's three per block (per two blocks in the
// 256-bit kernel) and a group's two for the reduction. (A variant that took
// the reduction off the chain, multiplying the unreduced state by H^8 and by
// H^8 * x^-128 in the next group, spent eight more per group and was no
// faster.)

// Unreduced sums of products: lo*lo, hi*hi and Karatsuba's (lo^hi)*(lo^hi).
struct Sums {
    __m128i lo, hi, mid;
};

TM_PV_CLMUL_INLINE __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
TM_PV_CLMUL_INLINE __m128i key_pow(const PolyvalKey& k, size_t i) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.pow[i]));
}
TM_PV_CLMUL_INLINE __m128i key_kar(const PolyvalKey& k, size_t i) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.kar[i]));
}

// s += x * h, with hk = h.lo ^ h.hi in hk's low half.
TM_PV_CLMUL_INLINE void mul_add(Sums& s, __m128i x, __m128i h, __m128i hk) {
    s.lo = _mm_xor_si128(s.lo, _mm_clmulepi64_si128(x, h, 0x00));
    s.hi = _mm_xor_si128(s.hi, _mm_clmulepi64_si128(x, h, 0x11));
    const __m128i xk = _mm_xor_si128(x, _mm_shuffle_epi32(x, 0x4E));
    s.mid = _mm_xor_si128(s.mid, _mm_clmulepi64_si128(xk, hk, 0x00));
}

// The Karatsuba sums to the 256-bit product T, then dot's T * x^-128.
TM_PV_CLMUL_INLINE __m128i reduce(const Sums& s) {
    const __m128i mid = _mm_xor_si128(s.mid, _mm_xor_si128(s.lo, s.hi));
    __m128i lo = _mm_xor_si128(s.lo, _mm_slli_si128(mid, 8));
    const __m128i hi = _mm_xor_si128(s.hi, _mm_srli_si128(mid, 8));
    const __m128i poly = _mm_set_epi64x(static_cast<long long>(kPolyC), 1);
    // Two Montgomery steps: lo.lo * kPolyC (imm 0x10: lo's low half, poly's
    // high half), plus lo with its halves swapped.
    lo = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4E), _mm_clmulepi64_si128(lo, poly, 0x10));
    lo = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4E), _mm_clmulepi64_si128(lo, poly, 0x10));
    return _mm_xor_si128(lo, hi);
}

// A run of blocks in two places: r at p, then the tail's.
struct Src {
    const uint8_t* p;
    size_t r;
    const uint8_t* tail;
    const uint8_t* at(size_t i) const { return i < r ? p + kPolyvalBlock * i : tail + kPolyvalBlock * (i - r); }
};

// Blocks base..base+n-1 (n = 1..8) of src, aggregated: block base+i times
// H^(n-i) = pow[8-n+i], the accumulator added to the first, whose product is
// taken last: only it waits for the previous group's reduction.
TM_PV_CLMUL_INLINE __m128i group(__m128i acc, const PolyvalKey& k, const Src& src, size_t base, size_t n) {
    const size_t off = kPolyvalPowers - n;
    Sums s{_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
    for (size_t i = 1; i < n; i++)
        mul_add(s, load128(src.at(base + i)), key_pow(k, off + i), key_kar(k, off + i));
    mul_add(s, _mm_xor_si128(load128(src.at(base)), acc), key_pow(k, off), key_kar(k, off));
    return reduce(s);
}

TM_PV_CLMUL void blocks_pclmul(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n, const uint8_t* tail,
                               size_t ntail) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(acc));
    for (; n >= kPolyvalPowers; n -= kPolyvalPowers, p += kPolyvalPowers * kPolyvalBlock)
        a = group(a, k, {p, kPolyvalPowers, nullptr}, 0, kPolyvalPowers);
    // The data's last 0..7 blocks and the tail, 8 at a time.
    const Src src{p, n, tail};
    for (size_t base = 0, m = n + ntail; base < m; base += kPolyvalPowers)
        a = group(a, k, src, base, m - base < kPolyvalPowers ? m - base : kPolyvalPowers);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(acc), a);
}

// ---------------------------------------------------------------------------
// VPCLMULQDQ, 256 bits (AVX2, no AVX-512): two blocks per multiply, 8 blocks
// per reduction; a group's odd last block by the 128-bit multiply.

TM_PV_VCLMUL_INLINE __m256i load256(const void* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

struct Sums256 {
    __m256i lo, hi, mid;
};

// s += x * h lane by lane, hk's lanes each holding its h's Karatsuba key.
TM_PV_VCLMUL_INLINE void mul_add256(Sums256& s, __m256i x, __m256i h, __m256i hk) {
    s.lo = _mm256_xor_si256(s.lo, _mm256_clmulepi64_epi128(x, h, 0x00));
    s.hi = _mm256_xor_si256(s.hi, _mm256_clmulepi64_epi128(x, h, 0x11));
    const __m256i xk = _mm256_xor_si256(x, _mm256_shuffle_epi32(x, 0x4E));
    s.mid = _mm256_xor_si256(s.mid, _mm256_clmulepi64_epi128(xk, hk, 0x00));
}

TM_PV_VCLMUL_INLINE __m128i fold_lanes(__m256i v) {
    return _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// Blocks i and i + 1 of src in one register (two loads where they straddle).
TM_PV_VCLMUL_INLINE __m256i load_pair(const Src& src, size_t i) {
    if (i + 1 < src.r)
        return load256(src.p + kPolyvalBlock * i);
    if (i >= src.r)
        return load256(src.tail + kPolyvalBlock * (i - src.r));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(src.p + kPolyvalBlock * i)), load128(src.tail), 1);
}

// group() two blocks at a time: blocks i and i + 1 times pow[off+i] and
// pow[off+i+1], one 32-byte load each of data, powers and Karatsuba keys;
// an odd last block by the 128-bit multiply.
TM_PV_VCLMUL_INLINE __m128i group256(__m128i acc, const PolyvalKey& k, const Src& src, size_t base, size_t n) {
    if (n == 1)
        return group(acc, k, src, base, 1);
    const size_t off = kPolyvalPowers - n;
    Sums256 s{_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    size_t i = 2;
    for (; i + 1 < n; i += 2)
        mul_add256(s, load_pair(src, base + i), load256(k.pow[off + i]), load256(k.kar[off + i]));
    Sums t{_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
    if (i < n)
        mul_add(t, load128(src.at(base + i)), key_pow(k, off + i), key_kar(k, off + i));
    mul_add256(s, _mm256_xor_si256(load_pair(src, base), _mm256_zextsi128_si256(acc)), load256(k.pow[off]),
               load256(k.kar[off]));
    return reduce({_mm_xor_si128(fold_lanes(s.lo), t.lo), _mm_xor_si128(fold_lanes(s.hi), t.hi),
                   _mm_xor_si128(fold_lanes(s.mid), t.mid)});
}

TM_PV_VCLMUL void blocks_vpclmul(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n,
                                 const uint8_t* tail, size_t ntail) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(acc));
    for (; n >= kPolyvalPowers; n -= kPolyvalPowers, p += kPolyvalPowers * kPolyvalBlock)
        a = group256(a, k, {p, kPolyvalPowers, nullptr}, 0, kPolyvalPowers);
    const Src src{p, n, tail};
    for (size_t base = 0, m = n + ntail; base < m; base += kPolyvalPowers)
        a = group256(a, k, src, base, m - base < kPolyvalPowers ? m - base : kPolyvalPowers);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(acc), a);
}

// ---------------------------------------------------------------------------
// Dispatch: crc32c.cc's pattern, a pointer that starts at a resolver and is
// replaced by the kernel on the first call.

struct Kernel {
    const char* name;
    BlocksFn blocks;
};
// Indexed by detail::kPolyval*.
constexpr Kernel kKernels[] = {
    {"portable", blocks_portable},
    {"pclmulqdq", blocks_pclmul},
    {"vpclmulqdq", blocks_vpclmul},
};
static_assert(std::size(kKernels) == detail::kPolyvalKernels);

bool cpu_has(int kernel) {
    __builtin_cpu_init(); // see crc32c.cc's cpu_has
    switch (kernel) {
    case detail::kPolyvalPortable:
        return true;
    case detail::kPolyvalPclmul:
        return __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("pclmul");
    case detail::kPolyvalVpclmul: // avx2 is only reported where the OS saves the ymm state
        return cpu_has(detail::kPolyvalPclmul) && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("vpclmulqdq");
    }
    return false;
}

void resolve_blocks(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n, const uint8_t* tail,
                    size_t ntail);
constinit std::atomic<BlocksFn> g_blocks{resolve_blocks};
constinit std::atomic<int> g_current{-1}; // the kernel g_blocks runs, once resolved

void install(int kernel) {
    g_current.store(kernel, std::memory_order_relaxed);
    g_blocks.store(kKernels[kernel].blocks, std::memory_order_relaxed);
}
void resolve_blocks(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n, const uint8_t* tail,
                    size_t ntail) {
    install(detail::polyval_best_kernel());
    kKernels[g_current.load(std::memory_order_relaxed)].blocks(acc, k, p, n, tail, ntail);
}

inline void absorb(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n, const uint8_t* tail = nullptr,
                   size_t ntail = 0) {
    g_blocks.load(std::memory_order_relaxed)(acc, k, p, n, tail, ntail);
}

// The n whole blocks at p, then the zero-padded partial block (npart bytes
// at part, if any) and the length block, in one call.
void finish(uint64_t acc[2], const PolyvalKey& k, const uint8_t* p, size_t n, const uint8_t* part, size_t npart,
            uint64_t bytes) {
    alignas(32) uint8_t tail[2 * kPolyvalBlock] = {};
    if (npart != 0) // part may be null then
        memcpy(tail, part, npart);
    uint8_t* len_block = npart != 0 ? tail + kPolyvalBlock : tail;
    const uint64_t bits = bytes * 8;
    memcpy(len_block, &bits, 8);
    absorb(acc, k, p, n, tail, npart != 0 ? 2 : 1);
}

} // namespace

void polyval_key(PolyvalKey& k, const uint8_t h[kPolyvalBlock]) {
    const U128 h1{load64(h), load64(h + 8)};
    U128 v = h1;
    for (size_t i = kPolyvalPowers; i-- > 0;) {
        k.pow[i][0] = v.lo;
        k.pow[i][1] = v.hi;
        k.kar[i][0] = k.kar[i][1] = v.lo ^ v.hi;
        v = dot_portable(v, h1);
    }
}

void Polyval::init() {
    acc[0] = acc[1] = 0;
    memset(part, 0, sizeof part);
    npart = 0;
    bytes = 0;
}

void Polyval::update(const PolyvalKey& k, const void* data, size_t len) {
    if (len == 0)
        return;
    const uint8_t* p = static_cast<const uint8_t*>(data);
    bytes += len;
    if (npart != 0) {
        const size_t take = len < kPolyvalBlock - npart ? len : kPolyvalBlock - npart;
        memcpy(part + npart, p, take);
        npart += static_cast<uint32_t>(take);
        p += take;
        len -= take;
        if (npart < kPolyvalBlock)
            return;
        absorb(acc, k, part, 1);
        npart = 0;
    }
    const size_t whole = len / kPolyvalBlock;
    if (whole != 0)
        absorb(acc, k, p, whole);
    len -= whole * kPolyvalBlock;
    if (len != 0) {
        memcpy(part, p + whole * kPolyvalBlock, len);
        npart = static_cast<uint32_t>(len);
    }
}

void Polyval::final(const PolyvalKey& k, uint64_t out[2]) const {
    alignas(16) uint64_t a[2] = {acc[0], acc[1]};
    finish(a, k, nullptr, 0, part, npart, bytes);
    out[0] = a[0];
    out[1] = a[1];
}

void polyval_mac(const PolyvalKey& k, const void* data, size_t len, uint64_t out[2]) {
    alignas(16) uint64_t a[2] = {0, 0};
    const size_t whole = len / kPolyvalBlock;
    const uint8_t* p = static_cast<const uint8_t*>(data);
    finish(a, k, p, whole, p + whole * kPolyvalBlock, len % kPolyvalBlock, len);
    out[0] = a[0];
    out[1] = a[1];
}

void polyval_raw(const uint8_t h[kPolyvalBlock], const void* data, size_t len, uint8_t out[kPolyvalBlock]) {
    PolyvalKey k;
    polyval_key(k, h);
    alignas(16) uint64_t a[2] = {0, 0};
    const size_t whole = len / kPolyvalBlock, rest = len % kPolyvalBlock;
    const uint8_t* p = static_cast<const uint8_t*>(data);
    uint8_t last[kPolyvalBlock] = {};
    if (rest != 0)
        memcpy(last, p + whole * kPolyvalBlock, rest);
    if (whole + (rest != 0) != 0)
        absorb(a, k, p, whole, last, rest != 0 ? 1 : 0);
    memcpy(out, a, kPolyvalBlock);
}

const char* polyval_kernel_name() {
    const int cur = g_current.load(std::memory_order_relaxed);
    return kKernels[cur >= 0 ? cur : detail::polyval_best_kernel()].name;
}

namespace detail {

bool polyval_kernel_supported(int kernel) {
    static const bool s[kPolyvalKernels] = {cpu_has(0), cpu_has(1), cpu_has(2)}; // CPUID once
    return kernel >= 0 && kernel < kPolyvalKernels && s[kernel];
}

const char* polyval_kernel_name(int kernel) {
    return kernel >= 0 && kernel < kPolyvalKernels ? kKernels[kernel].name : "unknown";
}

int polyval_best_kernel() {
    static const int best = [] {
        for (int k : {kPolyvalVpclmul, kPolyvalPclmul})
            if (polyval_kernel_supported(k))
                return k;
        return static_cast<int>(kPolyvalPortable);
    }();
    return best;
}

bool polyval_force_kernel(int kernel) {
    if (kernel == -1)
        kernel = polyval_best_kernel();
    if (!polyval_kernel_supported(kernel))
        return false;
    install(kernel);
    return true;
}

} // namespace detail

} // namespace tailmark
