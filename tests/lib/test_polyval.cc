#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cpuid.h>
#include <x86intrin.h>

#include "fixtures.h"
#include "guarded.h"
#include "tailmark/crc32c.h"
#include "tailmark/polyval.h"

using namespace tailmark;
using tmtest::Guarded;

namespace {

std::vector<uint8_t> unhex(const std::string& s) {
    std::vector<uint8_t> v;
    for (size_t i = 0; i + 1 < s.size(); i += 2)
        v.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
    return v;
}

std::string hex(const uint8_t* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; i++) {
        s += d[p[i] >> 4];
        s += d[p[i] & 15];
    }
    return s;
}

// ---------------------------------------------------------------------------
// A bit-at-a-time reference, independent of the library's arithmetic:
// multiply by shift-and-add modulo P, then divide by x 128 times.
struct R {
    uint64_t lo = 0, hi = 0;
    bool operator==(const R&) const = default;
};

R ref_load(const uint8_t* p) {
    R r;
    for (int i = 7; i >= 0; i--) {
        r.lo = (r.lo << 8) | p[i];
        r.hi = (r.hi << 8) | p[8 + i];
    }
    return r;
}

// a * x mod P: x^128 = x^127 + x^126 + x^121 + 1.
R ref_mulx(R a) {
    const bool carry = a.hi >> 63;
    a.hi = (a.hi << 1) | (a.lo >> 63);
    a.lo <<= 1;
    if (carry) {
        a.lo ^= 1;
        a.hi ^= 0xC200000000000000ull;
    }
    return a;
}

// a / x mod P: add P when x^0 is set (that clears it and sets x^128), shift down.
R ref_divx(R a) {
    const bool odd = a.lo & 1;
    if (odd) {
        a.lo ^= 1;
        a.hi ^= 0xC200000000000000ull;
    }
    a.lo = (a.lo >> 1) | (a.hi << 63);
    a.hi = (a.hi >> 1) | (odd ? 1ull << 63 : 0);
    return a;
}

R ref_dot(R a, R b) {
    R r;
    for (int i = 127; i >= 0; i--) {
        r = ref_mulx(r);
        const uint64_t bit = i >= 64 ? (b.hi >> (i - 64)) & 1 : (b.lo >> i) & 1;
        if (bit) {
            r.lo ^= a.lo;
            r.hi ^= a.hi;
        }
    }
    for (int i = 0; i < 128; i++)
        r = ref_divx(r);
    return r;
}

// POLYVAL over whole blocks from `s`.
R ref_blocks(R s, R h, const uint8_t* p, size_t nblocks) {
    for (size_t j = 0; j < nblocks; j++) {
        const R x = ref_load(p + 16 * j);
        s = ref_dot({s.lo ^ x.lo, s.hi ^ x.hi}, h);
    }
    return s;
}

// The MAC by its definition: zero-pad, then the bit length block.
R ref_mac(const uint8_t h[16], const uint8_t* p, size_t len) {
    std::vector<uint8_t> m(p, p + len);
    m.resize((len + 15) / 16 * 16 + 16, 0);
    const uint64_t bits = len * 8;
    memcpy(m.data() + m.size() - 16, &bits, 8);
    return ref_blocks({}, ref_load(h), m.data(), m.size() / 16);
}

// ---------------------------------------------------------------------------

std::vector<int> supported_kernels() {
    std::vector<int> v;
    for (int k = 0; k < detail::kPolyvalKernels; k++)
        if (detail::polyval_kernel_supported(k))
            v.push_back(k);
    return v;
}

// Forces a kernel for its scope, back to the CPU's pick after (a failed
// REQUIRE leaves by an exception).
struct ForceKernel {
    explicit ForceKernel(int k) { REQUIRE(detail::polyval_force_kernel(k)); }
    ~ForceKernel() { detail::polyval_force_kernel(-1); }
    ForceKernel(const ForceKernel&) = delete;
    ForceKernel& operator=(const ForceKernel&) = delete;
};

struct Mac {
    uint64_t v[2] = {0, 0};
    bool operator==(const Mac& o) const { return v[0] == o.v[0] && v[1] == o.v[1]; }
};
std::ostream& operator<<(std::ostream& os, const Mac& m) {
    char b[40];
    snprintf(b, sizeof b, "%016llx:%016llx", static_cast<unsigned long long>(m.v[1]),
             static_cast<unsigned long long>(m.v[0]));
    return os << b;
}

Mac mac(const PolyvalKey& k, const uint8_t* p, size_t n) {
    Mac m;
    polyval_mac(k, p, n, m.v);
    return m;
}

Mac mac_of(R r) {
    Mac m;
    m.v[0] = r.lo;
    m.v[1] = r.hi;
    return m;
}

struct TestKey {
    uint8_t h[16];
    PolyvalKey k;
};

std::vector<TestKey> random_keys(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<TestKey> v(n);
    for (auto& t : v) {
        const uint64_t a = rng(), b = rng();
        memcpy(t.h, &a, 8);
        memcpy(t.h + 8, &b, 8);
        polyval_key(t.k, t.h);
    }
    return v;
}

// The kernel the CPU should get, read from CPUID and XCR0 here rather than
// through __builtin_cpu_supports as the library does.
int expected_kernel() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return detail::kPolyvalPortable;
    const bool clmul = (c & bit_PCLMUL) && (c & bit_SSE4_1);
    if (!clmul)
        return detail::kPolyvalPortable;
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX) || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return detail::kPolyvalPclmul;
    unsigned xlo, xhi;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    const bool ymm_state = (xlo & 6) == 6;
    return ymm_state && (b & bit_AVX2) && (c & bit_VPCLMULQDQ) ? detail::kPolyvalVpclmul : detail::kPolyvalPclmul;
}

struct Vector {
    const char* h;
    const char* input;
    const char* result;
};
// RFC 8452 Appendix A, and the "POLYVAL input" / "POLYVAL result" pairs of
// Appendix C.1 (record authentication key d9b3...7377), 1 to 6 blocks.
const Vector kVectors[] = {
    {"25629347589242761d31f826ba4b757b", "4f4f95668c83dfb6401762bb2d01a262d1a24ddd2721d006bbe45f20d3c9f362",
     "f7a3b47b846119fae5b7866cf5e5b77e"},
    {"d9b360279694941ac5dbc6987ada7377", "00000000000000000000000000000000", "00000000000000000000000000000000"},
    {"d9b360279694941ac5dbc6987ada7377", "0100000000000000000000000000000000000000000000004000000000000000",
     "eb93b7740962c5e49d2a90a7dc5cec74"},
    {"d9b360279694941ac5dbc6987ada7377", "0100000000000000000000000000000000000000000000006000000000000000",
     "48eb6c6c5a2dbe4a1dde508fee06361b"},
    {"d9b360279694941ac5dbc6987ada7377",
     "01000000000000000000000000000000"
     "02000000000000000000000000000000"
     "00000000000000000001000000000000",
     "ce6edc9a50b36d9a98986bbf6a261c3b"},
    {"d9b360279694941ac5dbc6987ada7377",
     "01000000000000000000000000000000"
     "02000000000000000000000000000000"
     "03000000000000000000000000000000"
     "00000000000000008001000000000000",
     "81388746bc22d26b2abc3dcb15754222"},
    {"d9b360279694941ac5dbc6987ada7377",
     "01000000000000000000000000000000"
     "02000000000000000000000000000000"
     "03000000000000000000000000000000"
     "04000000000000000000000000000000"
     "00000000000000000002000000000000",
     "1e39b6d3344d348f6044f89935d1cf78"},
    {"d9b360279694941ac5dbc6987ada7377",
     "01000000000000000000000000000000"
     "02000000000000000000000000000000"
     "03000000000000000000000000000000"
     "04000000000000000000000000000000"
     "05000000000000000000000000000000"
     "08000000000000000002000000000000",
     "ffcd05d5770f34ad9267f0a59994b15a"},
};

} // namespace

TEST_CASE("polyval: the bitwise reference gives the RFC 8452 vectors", "[polyval]") {
    for (const Vector& v : kVectors) {
        const auto h = unhex(v.h), in = unhex(v.input);
        const R r = ref_blocks({}, ref_load(h.data()), in.data(), in.size() / 16);
        uint8_t out[16];
        memcpy(out, &r.lo, 8);
        memcpy(out + 8, &r.hi, 8);
        INFO("H " << v.h << " input " << v.input);
        CHECK(hex(out, 16) == v.result);
    }
}

TEST_CASE("polyval: RFC 8452 vectors through polyval_raw on every kernel", "[polyval]") {
    const auto kernels = supported_kernels();
    REQUIRE(kernels.front() == detail::kPolyvalPortable);
    for (int k : kernels) {
        ForceKernel force(k);
        CHECK(std::string(polyval_kernel_name()) == detail::polyval_kernel_name(k));
        for (const Vector& v : kVectors) {
            const auto h = unhex(v.h), in = unhex(v.input);
            uint8_t out[16];
            polyval_raw(h.data(), in.data(), in.size(), out);
            INFO(detail::polyval_kernel_name(k) << " H " << v.h << " input " << v.input);
            CHECK(hex(out, 16) == v.result);
        }
        // Appendix A, a block at a time through the running form's state
        // (no length block there, so straight from acc).
        const auto h = unhex(kVectors[0].h), in = unhex(kVectors[0].input);
        PolyvalKey key;
        polyval_key(key, h.data());
        Polyval st;
        st.init();
        st.update(key, in.data(), 16);
        st.update(key, in.data() + 16, 16);
        uint8_t out[16];
        memcpy(out, st.acc, 16);
        INFO(detail::polyval_kernel_name(k));
        CHECK(hex(out, 16) == kVectors[0].result);
    }
}

TEST_CASE("polyval: dispatch picks the fastest kernel the CPU has", "[polyval]") {
    const int want = expected_kernel();
    INFO("picked " << polyval_kernel_name() << ", expected " << detail::polyval_kernel_name(want));
    CHECK(detail::polyval_best_kernel() == want);
    CHECK(std::string(polyval_kernel_name()) == detail::polyval_kernel_name(want));
    CHECK(detail::polyval_kernel_supported(detail::kPolyvalPortable));
    CHECK(detail::polyval_kernel_supported(detail::kPolyvalPclmul) == (want >= detail::kPolyvalPclmul));
    CHECK(detail::polyval_kernel_supported(detail::kPolyvalVpclmul) == (want >= detail::kPolyvalVpclmul));
    CHECK_FALSE(detail::polyval_kernel_supported(detail::kPolyvalKernels));
    CHECK_FALSE(detail::polyval_force_kernel(7));
    CHECK(std::string(polyval_kernel_name()) == detail::polyval_kernel_name(want)); // unchanged
}

TEST_CASE("polyval: the MAC is POLYVAL over the zero-padded data and the length block", "[polyval]") {
    auto keys = random_keys(2, 1);
    auto data = tmtest::pattern(300, 5);
    for (int k : supported_kernels()) {
        ForceKernel force(k);
        for (const auto& t : keys) {
            for (size_t len : {0, 1, 15, 16, 17, 31, 32, 100, 127, 128, 129, 143, 144, 145, 300}) {
                INFO(detail::polyval_kernel_name(k) << " len " << len);
                REQUIRE(mac(t.k, data.data(), len) == mac_of(ref_mac(t.h, data.data(), len)));
                // And the same through polyval_raw over the message built by hand.
                std::vector<uint8_t> m(data.begin(), data.begin() + static_cast<long>(len));
                m.resize((len + 15) / 16 * 16 + 16, 0);
                const uint64_t bits = len * 8;
                memcpy(m.data() + m.size() - 16, &bits, 8);
                uint8_t raw[16];
                polyval_raw(t.h, m.data(), m.size(), raw);
                Mac r;
                memcpy(r.v, raw, 16);
                REQUIRE(mac(t.k, data.data(), len) == r);
            }
        }
    }
}

TEST_CASE("polyval: the portable kernel agrees with the bitwise reference", "[polyval]") {
    ForceKernel force(detail::kPolyvalPortable);
    auto keys = random_keys(3, 2);
    auto data = tmtest::pattern(1200, 6);
    // Keys with extreme bit patterns too: every carry and reduction path.
    TestKey ones, top, one;
    memset(ones.h, 0xFF, 16);
    memset(top.h, 0, 16);
    top.h[15] = 0x80;
    memset(one.h, 0, 16);
    one.h[0] = 1;
    for (TestKey* t : {&ones, &top, &one}) {
        polyval_key(t->k, t->h);
        keys.push_back(*t);
    }
    std::vector<uint8_t> ff(300, 0xFF);
    for (const auto& t : keys) {
        for (size_t len = 0; len <= 1200; len += (len < 300 ? 1 : 37)) {
            INFO("H " << hex(t.h, 16) << " len " << len);
            REQUIRE(mac(t.k, data.data(), len) == mac_of(ref_mac(t.h, data.data(), len)));
        }
        INFO("H " << hex(t.h, 16) << " all ones");
        REQUIRE(mac(t.k, ff.data(), ff.size()) == mac_of(ref_mac(t.h, ff.data(), ff.size())));
    }
}

// The SIMD kernels go 8 blocks at a time and do the last 1..7 apart, the
// 256-bit one 2 blocks per register: every length to 600 crosses each bound
// at every residue; 9000 and 65536 are a jumbo payload and a long run.
TEST_CASE("polyval: every kernel agrees with the portable one at every length and alignment", "[polyval]") {
    auto keys = random_keys(3, 3);
    constexpr size_t kMax = 65536;
    auto data = tmtest::pattern(kMax + 16, 7);
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 600; n++)
        lens.push_back(n);
    for (size_t n : {1448, 1456, 4095, 4096, 9000, 9001, 65535, 65536})
        lens.push_back(n);
    for (const auto& t : keys) {
        for (size_t align = 0; align < 16; align++) {
            std::vector<Mac> want(lens.size());
            {
                ForceKernel force(detail::kPolyvalPortable);
                for (size_t i = 0; i < lens.size(); i++)
                    want[i] = mac(t.k, data.data() + align, lens[i]);
            }
            for (int k : supported_kernels()) {
                ForceKernel force(k);
                for (size_t i = 0; i < lens.size(); i++) {
                    INFO(detail::polyval_kernel_name(k) << " H " << hex(t.h, 16) << " align " << align << " len "
                                                        << lens[i]);
                    REQUIRE(mac(t.k, data.data() + align, lens[i]) == want[i]);
                }
            }
        }
    }
    // All-ones data and a key of all ones: no lane or carry may lose a bit.
    TestKey ones;
    memset(ones.h, 0xFF, 16);
    polyval_key(ones.k, ones.h);
    std::vector<uint8_t> ff(9000, 0xFF);
    const Mac want = mac_of(ref_mac(ones.h, ff.data(), ff.size()));
    for (int k : supported_kernels()) {
        ForceKernel force(k);
        INFO(detail::polyval_kernel_name(k));
        CHECK(mac(ones.k, ff.data(), ff.size()) == want);
    }
}

TEST_CASE("polyval: update gives one shot's result at every split", "[polyval]") {
    auto keys = random_keys(2, 4);
    auto data = tmtest::pattern(1500, 8);
    for (const auto& t : keys) {
        for (int k : supported_kernels()) {
            ForceKernel force(k);
            for (size_t len : {1, 15, 16, 17, 127, 128, 129, 143, 255, 256, 257, 600, 1448}) {
                const Mac whole = mac(t.k, data.data(), len);
                // Two pieces, a cut at every offset.
                for (size_t cut = 0; cut <= len; cut++) {
                    Polyval st;
                    st.init();
                    st.update(t.k, data.data(), cut);
                    st.update(t.k, data.data() + cut, len - cut);
                    Mac m;
                    st.final(t.k, m.v);
                    INFO(detail::polyval_kernel_name(k) << " len " << len << " cut " << cut);
                    REQUIRE(m == whole);
                    REQUIRE(st.bytes == len);
                }
                // Three pieces, the middle one every size from one offset.
                for (size_t a = 0; a <= std::min<size_t>(len, 40); a += 7)
                    for (size_t b = a; b <= len; b++) {
                        Polyval st;
                        st.init();
                        st.update(t.k, data.data(), a);
                        st.update(t.k, data.data() + a, b - a);
                        st.update(t.k, data.data() + b, len - b);
                        Mac m;
                        st.final(t.k, m.v);
                        INFO(detail::polyval_kernel_name(k) << " len " << len << " cuts " << a << ", " << b);
                        REQUIRE(m == whole);
                    }
                // One byte at a time, with empty updates between.
                Polyval st;
                st.init();
                for (size_t i = 0; i < len; i++) {
                    st.update(t.k, data.data() + i, 1);
                    st.update(t.k, nullptr, 0);
                }
                Mac m;
                st.final(t.k, m.v);
                INFO(detail::polyval_kernel_name(k) << " len " << len << " bytewise");
                REQUIRE(m == whole);
            }
            // Pieces of pseudo-random sizes (mbuf segments) over 64 KiB.
            auto big = tmtest::pattern(65536 + 5, 9);
            const Mac whole = mac(t.k, big.data(), big.size());
            uint32_t x = 99;
            Polyval st;
            st.init();
            for (size_t off = 0; off < big.size();) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                const size_t n = std::min<size_t>(x % 2100, big.size() - off);
                st.update(t.k, big.data() + off, n);
                off += n;
            }
            Mac m;
            st.final(t.k, m.v);
            INFO(detail::polyval_kernel_name(k) << " random pieces");
            REQUIRE(m == whole);
        }
    }
}

TEST_CASE("polyval: final leaves the state usable", "[polyval]") {
    auto keys = random_keys(1, 10);
    auto data = tmtest::pattern(200, 11);
    const PolyvalKey& k = keys[0].k;
    Polyval st;
    st.init();
    st.update(k, data.data(), 37);
    Mac a, b;
    st.final(k, a.v);
    st.final(k, b.v);
    CHECK(a == b);
    CHECK(a == mac(k, data.data(), 37));
    st.update(k, data.data() + 37, 163);
    st.final(k, a.v);
    CHECK(a == mac(k, data.data(), 200));
    // init resets.
    st.init();
    st.final(k, a.v);
    CHECK(a == mac(k, nullptr, 0));
}

// Input that ends right before a page nobody may touch: a kernel that read a
// whole 16 or 32 bytes past a partial block's end would fault.
TEST_CASE("polyval: every kernel reads only the bytes it is given", "[polyval]") {
    auto keys = random_keys(1, 12);
    const TestKey& t = keys[0];
    Guarded g(4096);
    auto data = tmtest::pattern(4096, 13);
    memcpy(g.begin(), data.data(), data.size());
    for (int k : supported_kernels()) {
        ForceKernel force(k);
        for (size_t n = 0; n <= 100; n++) {
            INFO(detail::polyval_kernel_name(k) << " len " << n);
            const uint8_t* tail = g.end() - n;
            const uint8_t* head = g.begin();
            const Mac want_tail = mac_of(ref_mac(t.h, tail, n));
            REQUIRE(mac(t.k, tail, n) == want_tail);
            REQUIRE(mac(t.k, head, n) == mac_of(ref_mac(t.h, head, n)));
            // Through the running form, in two pieces.
            Polyval st;
            st.init();
            st.update(t.k, tail, n / 3);
            st.update(t.k, tail + n / 3, n - n / 3);
            Mac m;
            st.final(t.k, m.v);
            REQUIRE(m == want_tail);
            if (n % 16 == 0) {
                uint8_t raw[16];
                polyval_raw(t.h, tail, n, raw); // whole blocks up to the guard page
                const R r = ref_blocks({}, ref_load(t.h), tail, n / 16);
                Mac rm;
                memcpy(rm.v, raw, 16);
                REQUIRE(rm == mac_of(r));
            }
        }
    }
}

TEST_CASE("polyval: zero bytes of different lengths give different MACs", "[polyval]") {
    auto keys = random_keys(2, 14);
    std::vector<uint8_t> zeros(4096 + 64, 0);
    for (int k : supported_kernels()) {
        ForceKernel force(k);
        for (const auto& t : keys) {
            std::vector<Mac> seen;
            for (size_t len = 0; len <= 300; len++)
                seen.push_back(mac(t.k, zeros.data(), len));
            for (size_t len : {1447, 1448, 1449, 4096, 4096 + 64})
                seen.push_back(mac(t.k, zeros.data(), len));
            // The empty message hashes to 0 (the PRF mask makes the tag).
            INFO(detail::polyval_kernel_name(k));
            CHECK(seen[0] == Mac{});
            auto sorted = seen;
            std::sort(sorted.begin(), sorted.end(), [](const Mac& a, const Mac& b) {
                return a.v[1] != b.v[1] ? a.v[1] < b.v[1] : a.v[0] < b.v[0];
            });
            CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
            // A 16-byte message of zeros differs from the empty one and from 15 zero bytes.
            CHECK_FALSE(seen[16] == seen[0]);
            CHECK_FALSE(seen[16] == seen[15]);
        }
    }
}

// ---------------------------------------------------------------------------
// Micro-benchmark (hidden): rdtsc ticks per byte, the best of 200 short
// runs (a shared machine: the best run is the one nothing preempted).
//   TAILMARK_EAL="--no-huge -m 512" build/tests/unit_tests "[.polyval-bench]"

namespace {

template <typename F>
double ticks_per_byte(size_t len, F&& f) {
    const size_t reps = std::max<size_t>(32, (size_t(256) << 10) / std::max<size_t>(len, 1));
    double best = 1e30;
    for (int run = 0; run < 200; run++) {
        const uint64_t t0 = __rdtsc();
        for (size_t i = 0; i < reps; i++)
            f();
        const uint64_t t1 = __rdtsc();
        best = std::min(best, static_cast<double>(t1 - t0) / static_cast<double>(reps * len));
    }
    return best;
}

} // namespace

TEST_CASE("polyval micro-benchmark", "[.polyval-bench]") {
    auto keys = random_keys(1, 15);
    const PolyvalKey& key = keys[0].k;
    const size_t lens[] = {64, 1448, 65536};
    auto data = tmtest::pattern(65536 + 64, 16);
    volatile uint64_t sink = 0;
    printf("%-22s %10s %10s %10s   (rdtsc ticks per byte)\n", "", "64 B", "1448 B", "64 KiB");
    for (int k : supported_kernels()) {
        ForceKernel force(k);
        printf("polyval %-14s", detail::polyval_kernel_name(k));
        for (size_t len : lens) {
            const double c = ticks_per_byte(len, [&] {
                uint64_t out[2];
                polyval_mac(key, data.data(), len, out);
                sink = sink + out[0];
            });
            printf(" %10.3f", c);
        }
        printf("\n");
    }
    for (Crc32cKernel k : {Crc32cKernel::Table, Crc32cKernel::Chains, Crc32cKernel::Fold128, Crc32cKernel::Fold512}) {
        if (!crc32c_kernel_supported(k))
            continue;
        printf("crc32c %-7s%-8s", crc32c_kernel_name(k), k == crc32c_kernel() ? " (used)" : "");
        for (size_t len : lens) {
            const double c = ticks_per_byte(len, [&] {
                sink = sink + crc32c_update_with(k, kCrc32cInit, {data.data(), len});
            });
            printf(" %10.3f", c);
        }
        printf("\n");
    }
    (void)sink;
    SUCCEED();
}
