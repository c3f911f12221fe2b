// The built-in message generator: deterministic content per (flow, msg_id),
// so the consumer can regenerate it and compare every byte. Four interleaved
// xorshift64 lanes seeded by splitmix64(flow, msg_id): every 8-byte word
// depends on its position, so a misplaced, stale or foreign chunk shows up.
// No allocation, no state outside the call: usable on the fast path.
// DPDK-free: tailmark-consumer links it (from bench/) to verify what it reads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tailmark::app {

void generate(uint16_t flow, uint32_t msg_id, uint8_t* dst, size_t len);

// True when src[0..len) is exactly what generate() writes.
bool verify(uint16_t flow, uint32_t msg_id, const uint8_t* src, size_t len);

} // namespace tailmark::app
