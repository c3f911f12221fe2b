#include "tailmark/completion_ring.h"

#include <cstdio>
#include <cstring>

#include <rte_common.h>
#include <rte_errno.h>

namespace tailmark {

std::string ring_name(uint16_t flow) {
    char buf[RTE_MEMZONE_NAMESIZE];
    snprintf(buf, sizeof(buf), "tailmark_ring_%u", flow);
    return buf;
}

namespace {
// Regions start on cache lines, and never a whole number of pages apart:
// region starts 4 KiB apart all fall in one L1 set (and 64 KiB apart in one L2
// set), so the first lines of 64 slots, which every small message touches,
// would evict each other.
uint64_t region_stride(uint64_t region_size) {
    uint64_t s = RTE_ALIGN_CEIL(region_size == 0 ? 1 : region_size, kRegionAlign);
    return s % 4096 == 0 ? s + kRegionAlign : s;
}

struct Layout {
    uint64_t cursor, slots, regions, stride, total;
};
Layout layout(uint32_t ring_size, uint64_t region_size) {
    Layout l;
    l.cursor = RTE_ALIGN_CEIL(sizeof(RingHeader), 64);
    l.slots = l.cursor + RTE_ALIGN_CEIL(sizeof(ConsumerCursor), 64);
    l.regions = RTE_ALIGN_CEIL(l.slots + static_cast<uint64_t>(ring_size) * kSlotSize, 4096);
    l.stride = region_stride(region_size);
    l.total = l.regions + l.stride * ring_size;
    return l;
}
} // namespace

std::unique_ptr<CompletionRing> CompletionRing::create(uint16_t flow, uint32_t ring_size,
                                                       uint64_t region_size, int socket_id) {
    if (ring_size == 0 || !rte_is_power_of_2(ring_size) || region_size > UINT32_MAX) {
        rte_errno = EINVAL;
        return nullptr;
    }
    Layout l = layout(ring_size, region_size);
    const rte_memzone* mz = rte_memzone_reserve_aligned(ring_name(flow).c_str(), l.total, socket_id,
                                                        RTE_MEMZONE_SIZE_HINT_ONLY, 4096);
    if (mz == nullptr)
        return nullptr;
    // Slots and header start zeroed: flag 0 is "never completed" (flags are never 0).
    memset(mz->addr, 0, l.regions);
    auto* h = static_cast<RingHeader*>(mz->addr);
    h->flow = flow;
    h->ring_size = ring_size;
    h->region_size = region_size;
    h->slots_offset = l.slots;
    h->regions_offset = l.regions;
    h->region_stride = l.stride;
    h->socket_id = mz->socket_id;
    h->version = kRingVersion;
    std::atomic_ref<uint32_t>(h->magic).store(kRingMagic, std::memory_order_release);
    return std::unique_ptr<CompletionRing>(new CompletionRing(mz, true));
}

std::unique_ptr<CompletionRing> CompletionRing::attach(uint16_t flow) {
    const rte_memzone* mz = rte_memzone_lookup(ring_name(flow).c_str());
    if (mz == nullptr) {
        rte_errno = ENOENT;
        return nullptr;
    }
    auto* h = static_cast<RingHeader*>(mz->addr);
    if (std::atomic_ref<uint32_t>(h->magic).load(std::memory_order_acquire) != kRingMagic) {
        rte_errno = EAGAIN;
        return nullptr;
    }
    if (h->version != kRingVersion) {
        rte_errno = EPROTO;
        return nullptr;
    }
    return std::unique_ptr<CompletionRing>(new CompletionRing(mz, false));
}

CompletionRing::CompletionRing(const rte_memzone* mz, bool owner)
    : mz_(mz), owner_(owner), hdr_(static_cast<RingHeader*>(mz->addr)) {
    auto* base = static_cast<uint8_t*>(mz->addr);
    cursor_ = reinterpret_cast<ConsumerCursor*>(base + RTE_ALIGN_CEIL(sizeof(RingHeader), 64));
    slots_ = reinterpret_cast<CompletionSlot*>(base + hdr_->slots_offset);
    regions_ = base + hdr_->regions_offset;
    mask_ = hdr_->ring_size - 1;
    stride_ = hdr_->region_stride;
}

CompletionRing::~CompletionRing() {
    if (owner_)
        rte_memzone_free(mz_);
}

} // namespace tailmark
