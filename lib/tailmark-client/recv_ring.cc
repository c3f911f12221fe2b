#include "recv_ring.h"

#include <atomic>
#include <cerrno>

namespace tailmark::client {

namespace {
bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }
} // namespace

int RecvRing::open(uint8_t* base, uint64_t avail, uint32_t ring_size, uint64_t max_msg, RecvRing& out,
                   LastError& err) {
    using ull = unsigned long long;
    if (!is_pow2(ring_size) || ring_size > (1u << 24) || max_msg == 0 || max_msg > UINT32_MAX)
        return err.set(EPROTO, "ACCEPTED: ring size %u / max_msg %llu out of range", ring_size,
                       static_cast<ull>(max_msg));
    const RingLayout l = ring_layout(ring_size, max_msg);
    if (avail < l.total)
        return err.set(EPROTO, "ACCEPTED: a ring of %u x %llu B takes %llu bytes, %llu mapped for it", ring_size,
                       static_cast<ull>(max_msg), static_cast<ull>(l.total), static_cast<ull>(avail));
    auto* h = reinterpret_cast<RingHeader*>(base);
    const uint32_t magic = std::atomic_ref<uint32_t>(h->magic).load(std::memory_order_acquire);
    if (magic != kRingMagic)
        return err.set(EPROTO, "receive ring: magic %#x, not %#x", magic, kRingMagic);
    if (h->version != kRingVersion)
        return err.set(EPROTO, "receive ring: layout version %u, this library reads %u", h->version, kRingVersion);
    if (h->ring_size != ring_size || h->region_size != max_msg)
        return err.set(EPROTO, "receive ring: %u slots of %llu B, but ACCEPTED said %u of %llu B", h->ring_size,
                       static_cast<ull>(h->region_size), ring_size, static_cast<ull>(max_msg));
    if (h->slots_offset != l.slots || h->regions_offset != l.regions || h->region_stride != l.stride)
        return err.set(EPROTO, "receive ring: offsets (slots %llu, regions %llu, stride %llu) are not the layout's "
                       "(%llu, %llu, %llu)", static_cast<ull>(h->slots_offset), static_cast<ull>(h->regions_offset),
                       static_cast<ull>(h->region_stride), static_cast<ull>(l.slots), static_cast<ull>(l.regions),
                       static_cast<ull>(l.stride));
    RecvRing r;
    r.cursor_ = reinterpret_cast<ConsumerCursor*>(base + l.cursor);
    r.slots_ = reinterpret_cast<CompletionSlot*>(base + l.slots);
    r.regions_ = base + l.regions;
    r.mask_ = ring_size - 1;
    r.stride_ = l.stride;
    r.region_size_ = max_msg;
    // Normally 0: a fresh ring. Whatever it is, it is where we start.
    r.released_ = std::atomic_ref<uint32_t>(r.cursor_->released).load(std::memory_order_acquire);
    r.next_ = r.released_;
    out = r;
    return 0;
}

int RecvRing::next(RecvView* v, LastError& err) {
    const CompletionSlot* s = &slots_[next_ & mask_];
    if (__atomic_load_n(&s->flag, __ATOMIC_ACQUIRE) != static_cast<uint64_t>(next_) + 1)
        return 0;
    const uint32_t len = __atomic_load_n(&s->msg_len, __ATOMIC_RELAXED); // read once: then checked, then used
    if (len > region_size_)
        return err.set(EPROTO, "receive ring: message %u claims %u bytes, past its %llu-byte region", next_, len,
                       static_cast<unsigned long long>(region_size_));
    v->data = regions_ + static_cast<uint64_t>(next_ & mask_) * stride_;
    v->len = len;
    v->msg_id = next_;
    ++next_;
    return 1;
}

int RecvRing::release(uint32_t msg_id, LastError& err) {
    if (msg_id != released_ || released_ == next_) {
        if (released_ == next_)
            return err.set(EINVAL, "tm_release: message %u was not received (nothing of this flow is held)", msg_id);
        return err.set(EINVAL, "tm_release: message %u out of order (the next to release on this flow is %u)",
                       msg_id, released_);
    }
    ++released_;
    std::atomic_ref<uint32_t>(cursor_->released).store(released_, std::memory_order_release);
    return 0;
}

} // namespace tailmark::client
