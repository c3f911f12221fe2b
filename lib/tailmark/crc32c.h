// CRC32C (Castagnoli), as carried in the trailer. Every CRC in tailmark goes
// through these functions so a faster kernel can replace them in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tailmark {

// Running form: start from crc32c_init(), feed pieces in offset order, finish.
inline constexpr uint32_t kCrc32cInit = 0xFFFFFFFFu;
uint32_t crc32c_update(uint32_t state, std::span<const uint8_t> bytes);
inline uint32_t crc32c_finish(uint32_t state) { return ~state; }

// Copies src to dst (which must not overlap it) and returns the CRC state
// updated over src, in one pass where the kernel allows: the receiver
// checksums a payload as it places it instead of reading it again later.
uint32_t crc32c_copy(uint32_t state, uint8_t* dst, std::span<const uint8_t> src);

// crc32c_update, with a short buffer (a small message, under
// kCrc32cShortMax bytes) done by the crc32 instruction inline when the build
// targets SSE4.2 (-march): no call through the kernel pointer, which costs
// as much as a 64-byte CRC. Longer buffers, or another target, go through
// crc32c_update. The same value either way.
inline constexpr size_t kCrc32cShortMax = 256;
inline uint32_t crc32c_inline(uint32_t state, std::span<const uint8_t> bytes) {
#if defined(__SSE4_2__) && defined(__x86_64__)
    if (bytes.size() >= kCrc32cShortMax)
        return crc32c_update(state, bytes);
    const uint8_t* p = bytes.data();
    size_t len = bytes.size();
    uint64_t crc = state;
    // 32 bytes a turn: at 64 B the 8-byte loop's own instructions cost more
    // than its crc32s (txfixed64 1.04x; 64 bytes a turn measured 0.98x).
    for (; len >= 32; len -= 32, p += 32) {
        uint64_t v[4];
        __builtin_memcpy(v, p, 32);
        crc = __builtin_ia32_crc32di(crc, v[0]);
        crc = __builtin_ia32_crc32di(crc, v[1]);
        crc = __builtin_ia32_crc32di(crc, v[2]);
        crc = __builtin_ia32_crc32di(crc, v[3]);
    }
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t v;
        __builtin_memcpy(&v, p, 8);
        crc = __builtin_ia32_crc32di(crc, v);
    }
    uint32_t c = static_cast<uint32_t>(crc);
    for (; len > 0; len--, p++)
        c = __builtin_ia32_crc32qi(c, *p);
    return c;
#else
    return crc32c_update(state, bytes);
#endif
}

inline uint32_t crc32c(std::span<const uint8_t> bytes) {
    return crc32c_finish(crc32c_update(kCrc32cInit, bytes));
}

// The kernels behind crc32c_update and crc32c_copy, slowest first. The
// fastest one the CPU supports is picked at the first call, whatever -march
// the build used; tests and the bench name and force them.
enum class Crc32cKernel : uint8_t {
    Table,   // slicing-by-8 tables: any x86-64
    Chains,  // three interleaved crc32 instruction chains: SSE4.2
    Fold128, // 128-bit PCLMULQDQ folding
    Fold512, // 512-bit VPCLMULQDQ folding: AVX-512F/BW/VL (under 128 bytes, one crc32 chain)
};
Crc32cKernel crc32c_kernel(); // the one crc32c_update and crc32c_copy use
const char* crc32c_kernel_name(Crc32cKernel k);
bool crc32c_kernel_supported(Crc32cKernel k);
// One kernel by name; one the CPU does not support runs crc32c_kernel()
// instead, not an illegal instruction.
uint32_t crc32c_update_with(Crc32cKernel k, uint32_t state, std::span<const uint8_t> bytes);
uint32_t crc32c_copy_with(Crc32cKernel k, uint32_t state, uint8_t* dst, std::span<const uint8_t> src);

} // namespace tailmark
