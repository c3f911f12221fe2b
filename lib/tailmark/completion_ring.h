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

    ~CompletionRing();
    CompletionRing(const CompletionRing&) = delete;
    CompletionRing& operator=(const CompletionRing&) = delete;

    uint16_t flow() const { return static_cast<uint16_t>(hdr_->flow); }
    uint32_t size() const { return mask_ + 1; }
    uint32_t mask() const { return mask_; }
    uint64_t region_size() const { return hdr_->region_size; }
    const rte_memzone* memzone() const { return mz_; }
    uint64_t bytes() const { return mz_->len; }

    CompletionSlot* slot(uint32_t idx) const { return &slots_[idx & mask()]; }
    uint8_t* region(uint32_t idx) const {
        return regions_ + static_cast<uint64_t>(idx & mask_) * stride_;
    }
    // [begin, end) of everything the receiver may ever write for this flow.
    std::span<uint8_t> writable_span() const {
        return {reinterpret_cast<uint8_t*>(slots_), static_cast<size_t>(
            reinterpret_cast<uint8_t*>(mz_->addr) + mz_->len - reinterpret_cast<uint8_t*>(slots_))};
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
    CompletionRing(const rte_memzone* mz, bool owner);
    const rte_memzone* mz_;
    bool owner_;
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
