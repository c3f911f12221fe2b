// POLYVAL (RFC 8452, the GF(2^128) polynomial hash of AES-GCM-SIV) as a
// keyed universal hash for data packets (--data-auth). The caller makes the
// tag by feeding the result, with the header and trailer, to a PRF (SipHash,
// data_tag.h): hash, then PRF. This file is only the hash, and the hash alone
// is no MAC (it is linear in the data).
//
// The field is GF(2)[x] / (x^128 + x^127 + x^126 + x^121 + 1), a 16-byte block
// read little-endian (byte 0 bit 0 is x^0), and RFC 8452's product
// dot(a, b) = a * b * x^-128. POLYVAL(H, X_1..X_s) = S_s with S_0 = 0,
// S_j = dot(S_(j-1) + X_j, H): polyval_raw computes exactly that.
//
// The MAC form (Polyval, polyval_mac) zero-pads the last partial block and
// then absorbs one more block holding the message's length in bits (64-bit
// little endian in the low half, zero in the high half), so that messages
// that differ only in trailing zero bytes hash differently. For two distinct
// messages of at most n blocks (after padding) and any 128-bit d, the
// results differ by d with probability at most (n + 1) / 2^128 over a
// uniformly random secret H (XOR-universal, as a Carter-Wegman MAC needs;
// a tag truncated to 64 bits makes that (n + 1) / 2^64).
//
// Three kernels, the fastest the CPU has picked once at the first use
// (crc32c.cc's pattern): 256-bit VPCLMULQDQ (AVX2), 128-bit PCLMULQDQ, and
// portable C++. The SIMD ones multiply 8 blocks at a time by the powers of H
// in PolyvalKey and reduce once per 8; the portable one runs Horner's rule
// with H alone. No
// heap, no exceptions, no table lookups indexed by key or data (the portable
// multiply is branch- and table-free too).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tailmark {

inline constexpr size_t kPolyvalBlock = 16;
inline constexpr size_t kPolyvalPowers = 8; // blocks aggregated per reduction

// H and its powers, precomputed once per session key by polyval_key.
// pow[i] is H^(8-i) in the dot sense (H^1 = H, H^(k+1) = dot(H^k, H)), low
// 64 bits first: pow[0] = H^8 multiplies the first block of an 8-block
// group, pow[7] = H the last, and pow[0..1] is one 256-bit load (H^8 | H^7).
// kar[i] holds pow[i][0] ^ pow[i][1], the Karatsuba middle operand, twice,
// so that kar[i..i+1] is one 256-bit load beside pow[i..i+1].
struct PolyvalKey {
    alignas(32) uint64_t pow[kPolyvalPowers][2];
    alignas(32) uint64_t kar[kPolyvalPowers][2];
};
void polyval_key(PolyvalKey& k, const uint8_t h[kPolyvalBlock]);

// A running hash, for data arriving in pieces (mbuf segments split
// anywhere): init, any number of update (any lengths, 0 included, any split:
// the same result as one update over the concatenation), final.
struct Polyval {
    alignas(16) uint64_t acc[2]; // the POLYVAL state after the whole blocks so far
    uint8_t part[kPolyvalBlock]; // the bytes of a partial block, npart of them
    uint32_t npart;
    uint64_t bytes; // bytes fed so far

    void init();
    void update(const PolyvalKey& k, const void* data, size_t len);
    // Pads the partial block with zeros, absorbs the length block, and
    // returns the result, low 64 bits in out[0]. The state is left as it
    // was (a common prefix can be hashed once and finished many ways).
    void final(const PolyvalKey& k, uint64_t out[2]) const;
};

// One shot: init, update, final.
void polyval_mac(const PolyvalKey& k, const void* data, size_t len, uint64_t out[2]);

// RFC 8452 POLYVAL itself, no length block, for the test vectors: data is a
// whole number of 16-byte blocks (a partial last block is zero-padded); out
// is the 16-byte result.
void polyval_raw(const uint8_t h[kPolyvalBlock], const void* data, size_t len, uint8_t out[kPolyvalBlock]);

// The kernel in use: "vpclmulqdq", "pclmulqdq" or "portable".
const char* polyval_kernel_name();

// Test and bench hooks.
namespace detail {
enum : int { kPolyvalPortable = 0, kPolyvalPclmul = 1, kPolyvalVpclmul = 2, kPolyvalKernels = 3 };
bool polyval_kernel_supported(int kernel); // by this CPU (and its OS: ymm state for the 256-bit one)
const char* polyval_kernel_name(int kernel);
int polyval_best_kernel(); // the one the CPU gets when nothing is forced
// Every following call runs `kernel`; -1 goes back to polyval_best_kernel().
// False, and nothing changed, for a kernel the CPU lacks. Not for use while
// other threads hash.
bool polyval_force_kernel(int kernel);
} // namespace detail

} // namespace tailmark
