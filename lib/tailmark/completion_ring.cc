#include "tailmark/completion_ring.h"

#include <cstdio>
#include <cstring>

#include <rte_common.h>
#include <rte_errno.h>

namespace tailmark {

std::string ring_name(uint16_t flow) {
    char buf[RTE_MEMZONE_NAMESIZE];
    snprintf(buf, sizeof(buf), "tailmark_ring_%u", flow); // set-up only
    return buf;
}

std::unique_ptr<CompletionRing> CompletionRing::create(uint16_t flow, uint32_t ring_size,
                                                       uint64_t region_size, int socket_id) {
    if (ring_size == 0 || !rte_is_power_of_2(ring_size) || region_size > UINT32_MAX) {
        rte_errno = EINVAL;
        return nullptr;
    }
    const RingLayout l = ring_layout(ring_size, region_size);
    const rte_memzone* mz = rte_memzone_reserve_aligned(ring_name(flow).c_str(), l.total, socket_id,
                                                        RTE_MEMZONE_SIZE_HINT_ONLY, 4096);
    if (mz == nullptr)
        return nullptr;
    lay_out(mz->addr, l, flow, ring_size, region_size, mz->socket_id);
    return std::unique_ptr<CompletionRing>(new CompletionRing(mz, mz->addr, mz->len, true)); // set-up only
}

void CompletionRing::lay_out(void* mem, const RingLayout& l, uint16_t flow, uint32_t ring_size,
                             uint64_t region_size, int socket_id) {
    // Slots and header start zeroed: flag 0 is "never completed" (flags are never 0).
    memset(mem, 0, l.regions);
    auto* h = static_cast<RingHeader*>(mem);
    h->flow = flow;
    h->ring_size = ring_size;
    h->region_size = region_size;
    h->slots_offset = l.slots;
    h->regions_offset = l.regions;
    h->region_stride = l.stride;
    h->socket_id = socket_id;
    h->version = kRingVersion;
    std::atomic_ref<uint32_t>(h->magic).store(kRingMagic, std::memory_order_release);
}

uint64_t CompletionRing::bytes_for(uint32_t ring_size, uint64_t region_size) {
    return ring_layout(ring_size, region_size).total;
}

std::unique_ptr<CompletionRing> CompletionRing::create_at(void* mem, uint64_t len, uint16_t flow, uint32_t ring_size,
                                                          uint64_t region_size) {
    if (mem == nullptr || ring_size == 0 || !rte_is_power_of_2(ring_size) || region_size > UINT32_MAX ||
        (reinterpret_cast<uintptr_t>(mem) & 4095) != 0 || len < bytes_for(ring_size, region_size)) {
        rte_errno = EINVAL;
        return nullptr;
    }
    lay_out(mem, ring_layout(ring_size, region_size), flow, ring_size, region_size, SOCKET_ID_ANY);
    return std::unique_ptr<CompletionRing>(new CompletionRing(nullptr, mem, len, false)); // set-up only
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
    return std::unique_ptr<CompletionRing>(new CompletionRing(mz, mz->addr, mz->len, false)); // set-up only
}

CompletionRing::CompletionRing(const rte_memzone* mz, void* base_addr, uint64_t len, bool owner)
    : mz_(mz), owner_(owner), len_(len), hdr_(static_cast<RingHeader*>(base_addr)) {
    auto* base = static_cast<uint8_t*>(base_addr);
    cursor_ = reinterpret_cast<ConsumerCursor*>(base + RTE_ALIGN_CEIL(sizeof(RingHeader), 64));
    slots_ = reinterpret_cast<CompletionSlot*>(base + hdr_->slots_offset);
    regions_ = base + hdr_->regions_offset;
    mask_ = hdr_->ring_size - 1;
    stride_ = hdr_->region_stride;
}

CompletionRing::~CompletionRing() {
    if (owner_ && mz_ != nullptr)
        rte_memzone_free(mz_);
}

} // namespace tailmark
