// SipHash-2-4 with a 64-bit output (Aumasson and Bernstein, 2012): the MAC of
// every control packet, keyed by the session's 128-bit secret. A CRC only
// catches accidents; a MAC also stops a third party on the path from forging
// an ACK or NACK (SipHash is a PRF, so a forged 64-bit tag succeeds with
// probability 2^-64 per try). It is short-input friendly: a 36-byte ACK costs
// a few dozen nanoseconds, no tables, no SIMD.
//
// The hash itself is inline (control packets are built and checked on the
// lcores); key parsing and formatting, run once at set-up, are in siphash.cc.
// Output: the reference implementation returns the tag as the little-endian
// bytes of this uint64_t; how it is laid out on the wire is the caller's choice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include <rte_byteorder.h>

namespace tailmark {

struct SipKey {
    uint64_t k0 = 0, k1 = 0;
    bool operator==(const SipKey&) const = default;
};

inline constexpr size_t kSipKeyBytes = 16;

// The reference key load: k0 = bytes 0..7, k1 = bytes 8..15, each little-endian.
SipKey sip_key_from_bytes(const uint8_t bytes[kSipKeyBytes]);
void sip_key_to_bytes(const SipKey& key, uint8_t bytes[kSipKeyBytes]);

// "--secret": exactly 32 hex digits, the 16 key bytes in order (byte 0
// first), optionally after "0x"/"0X"; either case. Anything else (spaces,
// 31 or 33 digits, a non-hex character) is refused with a message in `err`
// and `key` left untouched.
bool parse_secret_hex(std::string_view hex, SipKey& key, std::string& err);
// 32 lower-case hex digits, no prefix: parse_secret_hex(format_secret_hex(k)) == k.
std::string format_secret_hex(const SipKey& key);

namespace sip_detail {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

inline uint64_t load_le64(const uint8_t* p) {
    uint64_t v;
    memcpy(&v, p, 8); // unaligned-safe; one mov on x86
    return rte_le_to_cpu_64(v);
}

struct V {
    uint64_t v0, v1, v2, v3;

    void round() {
        v0 += v1;
        v1 = rotl(v1, 13);
        v1 ^= v0;
        v0 = rotl(v0, 32);
        v2 += v3;
        v3 = rotl(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = rotl(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = rotl(v1, 17);
        v1 ^= v2;
        v2 = rotl(v2, 32);
    }
    void init(const SipKey& k) {
        v0 = k.k0 ^ 0x736f6d6570736575ULL; // "somepseudorandomlygeneratedbytes"
        v1 = k.k1 ^ 0x646f72616e646f6dULL;
        v2 = k.k0 ^ 0x6c7967656e657261ULL;
        v3 = k.k1 ^ 0x7465646279746573ULL;
    }
    void compress(uint64_t m) { // c = 2 rounds per message word
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }
    uint64_t finish(uint64_t last) { // last word: tail bytes | (length mod 256) << 56; d = 4
        compress(last);
        v2 ^= 0xff;
        round();
        round();
        round();
        round();
        return v0 ^ v1 ^ v2 ^ v3;
    }
};

// The 0..7 bytes after the last whole word, little-endian, in the low bytes.
inline uint64_t load_tail(const uint8_t* p, size_t n) {
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++)
        t |= static_cast<uint64_t>(p[i]) << (8 * i);
    return t;
}

} // namespace sip_detail

inline uint64_t siphash24(const SipKey& key, std::span<const uint8_t> in) {
    sip_detail::V v;
    v.init(key);
    const uint8_t* p = in.data();
    const size_t n = in.size();
    const size_t whole = n & ~size_t{7};
    for (size_t i = 0; i < whole; i += 8)
        v.compress(sip_detail::load_le64(p + i));
    return v.finish(sip_detail::load_tail(p + whole, n & 7) | (static_cast<uint64_t>(n) << 56));
}

// Incremental form: a MAC over pieces that are not contiguous (a header in
// one place, a body in another). sip_init, any number of sip_update (any
// lengths, including 0), sip_final: equal to siphash24 over the concatenation.
struct SipState {
    sip_detail::V v;
    uint64_t buf; // the pending bytes of a partial word, little-endian
    uint64_t len; // bytes fed so far
};

inline void sip_init(SipState& s, const SipKey& key) {
    s.v.init(key);
    s.buf = 0;
    s.len = 0;
}

inline void sip_update(SipState& s, std::span<const uint8_t> in) {
    const uint8_t* p = in.data();
    size_t n = in.size();
    unsigned have = static_cast<unsigned>(s.len & 7);
    s.len += n;
    if (have != 0) { // finish the partial word first
        while (n != 0 && have < 8) {
            s.buf |= static_cast<uint64_t>(*p++) << (8 * have++);
            n--;
        }
        if (have < 8)
            return;
        s.v.compress(s.buf);
        s.buf = 0;
    }
    for (; n >= 8; p += 8, n -= 8)
        s.v.compress(sip_detail::load_le64(p));
    s.buf = sip_detail::load_tail(p, n);
}

inline uint64_t sip_final(const SipState& s) {
    sip_detail::V v = s.v; // the state stays usable (e.g. a common prefix hashed once)
    return v.finish(s.buf | (s.len << 56));
}

// Constant-time tag check. A byte-wise, early-exit compare (memcmp) would
// leak how many leading bytes of a forged tag were right, so a forger could
// find the tag a byte at a time (8 x 256 tries instead of 2^64). One 64-bit
// compare of the xor has no data-dependent timing: there is nothing to leak.
// Trivial for a 64-bit tag, but it is the one way tags are compared, so a
// future memcmp over tag bytes does not creep in.
inline bool mac_equal(uint64_t a, uint64_t b) { return (a ^ b) == 0; }

} // namespace tailmark
