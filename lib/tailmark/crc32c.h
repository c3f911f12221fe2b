// CRC32C (Castagnoli), as carried in the trailer. Every CRC in tailmark goes
// through these functions so a faster kernel can replace them in one place.
#pragma once

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

inline uint32_t crc32c(std::span<const uint8_t> bytes) {
    return crc32c_finish(crc32c_update(kCrc32cInit, bytes));
}

} // namespace tailmark
