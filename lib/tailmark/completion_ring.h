// A flow's completion ring: one rte_memzone on the rx port's NUMA socket,
// found by name from a secondary process.
//
//   [RingHeader][ConsumerCursor][slot 0 .. slot N-1, 64 B each][region 0 .. region N-1]
//
// Slot i lives at slots_base + i * 64 (the completion base address) and owns
// region i, where the payload of message msg_id (i == msg_id mod N) is placed.
// The receiver writes a slot's metadata, then its flag with a release store.
// The consumer polls the flag with acquire, reads the region in place, then
// releases the message; only then may the receiver reuse that slot.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <rte_memzone.h>

#include "tailmark/ring_layout.h"

namespace tailmark {

std::string ring_name(uint16_t flow);

class CompletionRing {
public:
    // Primary: reserve and initialise the memzone. Returns nullptr (rte_errno
    // set) when ring_size is not a power of two or memory is short.
    static std::unique_ptr<CompletionRing> create(uint16_t flow, uint32_t ring_size,
                                                  uint64_t region_size, int socket_id);
    // Secondary (or anyone): look a running flow's ring up by name. Not owning.
    // nullptr with rte_errno ENOENT (none), EAGAIN (not initialised yet) or
    // EPROTO (another layout version: a daemon from another build).
    static std::unique_ptr<CompletionRing> attach(uint16_t flow);
    // In memory the caller owns (page aligned; e.g. a memfd an application
    // maps too): laid out there, header, cursor and slots zeroed. The memory
    // outlives the ring object. nullptr (rte_errno EINVAL) when it does not fit.
    static std::unique_ptr<CompletionRing> create_at(void* mem, uint64_t len, uint16_t flow, uint32_t ring_size,
                                                     uint64_t region_size);
    // The bytes a ring of this geometry takes.
    static uint64_t bytes_for(uint32_t ring_size, uint64_t region_size);

    ~CompletionRing();
    CompletionRing(const CompletionRing&) = delete;
    CompletionRing& operator=(const CompletionRing&) = delete;

    uint16_t flow() const { return static_cast<uint16_t>(hdr_->flow); }
    uint32_t size() const { return mask_ + 1; }
    uint32_t mask() const { return mask_; }
    uint64_t region_size() const { return hdr_->region_size; }
    const rte_memzone* memzone() const { return mz_; } // nullptr for create_at()'s
    uint64_t bytes() const { return len_; }
    const void* base() const { return hdr_; }

    CompletionSlot* slot(uint32_t idx) const { return &slots_[idx & mask()]; }
    uint8_t* region(uint32_t idx) const {
        return regions_ + static_cast<uint64_t>(idx & mask_) * stride_;
    }
    // [begin, end) of everything the receiver may ever write for this flow.
    std::span<uint8_t> writable_span() const {
        return {reinterpret_cast<uint8_t*>(slots_), static_cast<size_t>(
            reinterpret_cast<uint8_t*>(hdr_) + len_ - reinterpret_cast<uint8_t*>(slots_))};
    }

    // --- consumer API ---
    // The completed slot of msg_id, or nullptr while it has not completed.
    const CompletionSlot* poll(uint32_t msg_id) const {
        const CompletionSlot* s = slot(msg_id);
        const uint64_t f = __atomic_load_n(&s->flag, __ATOMIC_ACQUIRE);
        return f == static_cast<uint64_t>(msg_id) + 1 ? s : nullptr;
    }
    std::span<const uint8_t> message(const CompletionSlot* s) const {
        return {region(s->msg_id), s->msg_len};
    }
    // Release msg_id, the oldest unreleased message. False if it is not.
    // Releasing a message that has not completed gives it up: the receiver
    // will not complete it any more.
    bool release(uint32_t msg_id) {
        std::atomic_ref<uint32_t> r(cursor_->released);
        if (r.load(std::memory_order_relaxed) != msg_id)
            return false;
        const bool completed = poll(msg_id) != nullptr;
        r.store(msg_id + 1, std::memory_order_release);
        if (!completed) { // after the cursor: a receiver that sees the count sees the cursor
            std::atomic_ref<uint32_t> g(cursor_->gave_up);
            g.store(g.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        }
        return true;
    }
    // Packet mode: the message was consumed from its per-packet completions
    // (no flag is written in that mode), so its release is not a give-up.
    bool release_seen(uint32_t msg_id) {
        std::atomic_ref<uint32_t> r(cursor_->released);
        if (r.load(std::memory_order_relaxed) != msg_id)
            return false;
        r.store(msg_id + 1, std::memory_order_release);
        return true;
    }
    uint32_t released() const {
        return __atomic_load_n(&cursor_->released, __ATOMIC_ACQUIRE);
    }
    uint32_t gave_up() const { return __atomic_load_n(&cursor_->gave_up, __ATOMIC_ACQUIRE); }
    // --- receiver side ---
    const uint32_t* released_word() const { return &cursor_->released; }
    const uint32_t* gave_up_word() const { return &cursor_->gave_up; }

private:
    CompletionRing(const rte_memzone* mz, void* base, uint64_t len, bool owner);
    static void lay_out(void* mem, const RingLayout& l, uint16_t flow, uint32_t ring_size, uint64_t region_size,
                        int socket_id);
    const rte_memzone* mz_; // nullptr: memory the caller owns
    bool owner_;
    uint64_t len_;
    RingHeader* hdr_;
    ConsumerCursor* cursor_;
    CompletionSlot* slots_;
    uint8_t* regions_;
    // Copies of the header's fixed geometry: every poll and placement uses
    // them, and reading them through hdr_ was one more dependent load each.
    uint32_t mask_;
    uint64_t stride_;
};

} // namespace tailmark
