// The completion ring's memory layout, without DPDK: the receiver lays it
// out (completion_ring.h), and a consumer in another process reads it, a
// DPDK secondary or an application through libtailmark-client, which maps
// the same memory and links no DPDK.
//
//   [RingHeader][ConsumerCursor][slot 0 .. slot N-1, 64 B each][region 0 .. region N-1]
#pragma once

#include <cstdint>

namespace tailmark {

inline constexpr uint32_t kRingMagic = 0x544D5247; // "TMRG"
// The memzone's layout. 2: the consumer cursor's give-up count on a line of
// its own, regions 64-byte aligned at a stride that is never whole pages.
inline constexpr uint32_t kRingVersion = 2;
inline constexpr uint32_t kSlotSize = 64;
inline constexpr uint32_t kRegionAlign = 64; // regions: cache-line aligned, see region_stride()

struct alignas(64) CompletionSlot {
    uint64_t flag;         // trailer flag of the completed message; stored last, release
    uint32_t msg_id;
    uint32_t msg_len;
    uint32_t crc32c;
    uint16_t pkt_count;
    uint16_t flow;
    uint64_t rx_tsc;       // TSC when the packet that completed the message arrived
    uint8_t reserved[32];
};
static_assert(sizeof(CompletionSlot) == kSlotSize);

struct alignas(64) RingHeader {
    uint32_t magic;
    uint32_t version;
    uint32_t flow;
    uint32_t ring_size;     // power of two
    uint64_t region_size;   // bytes per slot region (the flow's maximum message size)
    uint64_t slots_offset;  // from the start of the memzone
    uint64_t regions_offset;
    uint64_t region_stride; // region_size rounded up to 64, plus 64 if that is a multiple of 4 KiB
    int32_t socket_id;
};

// Written only by the consumer: the next msg_id it has not yet released.
// Every message before it is consumed; the receiver's window ends at
// released + ring_size. `gave_up` counts releases of messages that had not
// completed; it sits on its own line, which nobody writes in normal running,
// so the receiver can check it on every packet for the price of an L1 hit and
// read the busy `released` line only when its cached copy no longer answers.
struct ConsumerCursor {
    alignas(64) uint32_t released;
    alignas(64) uint32_t gave_up;
};

// Where the parts of a ring of `ring_size` slots and `region_size`-byte
// regions sit, from its start.
struct RingLayout {
    uint64_t cursor, slots, regions, stride, total;
};
// Regions start on cache lines, and never a whole number of pages apart:
// region starts 4 KiB apart all fall in one L1 set (and 64 KiB apart in one L2
// set), so the first lines of 64 slots, which every small message touches,
// would evict each other.
constexpr uint64_t region_stride(uint64_t region_size) {
    const uint64_t s = ((region_size == 0 ? 1 : region_size) + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
    return s % 4096 == 0 ? s + kRegionAlign : s;
}
constexpr RingLayout ring_layout(uint32_t ring_size, uint64_t region_size) {
    RingLayout l{};
    l.cursor = (sizeof(RingHeader) + 63) / 64 * 64;
    l.slots = l.cursor + (sizeof(ConsumerCursor) + 63) / 64 * 64;
    l.regions = (l.slots + static_cast<uint64_t>(ring_size) * kSlotSize + 4095) / 4096 * 4096;
    l.stride = region_stride(region_size);
    l.total = l.regions + l.stride * ring_size;
    return l;
}

} // namespace tailmark
