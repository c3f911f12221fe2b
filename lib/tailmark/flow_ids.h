// Flow ids of one end: each end names its own flows (a packet carries the id
// its destination gave), and a session's flows are a contiguous block, so a
// handshake says a base and a count. First fit over the 16-bit id space; the
// control plane's, not the data path's.
//
// A released id comes back only after a quarantine (the owner sets it to at
// least the peer timeout): the old session's peer, if it missed our CLOSE,
// sends on that id until its own timeout. Version 2's per-session tag key
// refuses those packets (data_bad_tag) on a new owner, but version 1's data
// is unauthenticated and its msg_ids start at 0 each session: a late packet
// would be placed into the new owner's flow. Time is the caller's (TSC).
#pragma once

#include <bitset>
#include <cstdint>
#include <deque>
#include <memory>

namespace tailmark {

class FlowIds {
public:
    static constexpr uint32_t kIds = 65536;

    FlowIds() : used_(std::make_unique<std::bitset<kIds>>()), ever_(std::make_unique<std::bitset<kIds>>()) {}
    // How long a released id waits before it is handed out again (ticks).
    void set_quarantine(uint64_t ticks) { quarantine_ = ticks; }

    // The base of n free ids in a row (quarantines over by `now` ended first), or -1.
    int alloc(uint32_t n, uint64_t now) {
        if (n == 0 || n > kIds)
            return -1;
        expire(now);
        uint32_t run = 0;
        for (uint32_t i = 0; i < kIds; i++) {
            run = (*used_)[i] ? 0 : run + 1;
            if (run == n) {
                const uint32_t base = i + 1 - n;
                for (uint32_t j = base; j <= i; j++) {
                    if ((*ever_)[j]) // read by the summary: one writer, relaxed
                        __atomic_store_n(&reused_, reused_ + 1, __ATOMIC_RELAXED);
                    used_->set(j);
                    ever_->set(j);
                }
                return static_cast<int>(base);
            }
        }
        return -1;
    }
    // Ids whose packets may still arrive: free again once the quarantine is over.
    void release(uint32_t base, uint32_t n, uint64_t now) {
        if (base >= kIds || n == 0)
            return;
        if (n > kIds - base)
            n = kIds - base;
        held_.push_back({now + quarantine_, base, n}); // the same quarantine for all: in expiry order
        quarantined_ += n;
    }
    // Ids no packet ever carried (a session refused before it began): free at once.
    void unuse(uint32_t base, uint32_t n) {
        for (uint32_t j = base; j < base + n && j < kIds; j++)
            used_->reset(j);
    }
    bool used(uint32_t id) const { return id < kIds && (*used_)[id]; } // in use or in quarantine
    uint32_t quarantined() const { return quarantined_; }
    uint64_t reused() const { return __atomic_load_n(&reused_, __ATOMIC_RELAXED); } // ids handed out again

private:
    struct Held {
        uint64_t until;
        uint32_t base, n;
    };
    void expire(uint64_t now) {
        while (!held_.empty() && held_.front().until <= now) {
            unuse(held_.front().base, held_.front().n);
            quarantined_ -= held_.front().n;
            held_.pop_front();
        }
    }
    std::unique_ptr<std::bitset<kIds>> used_, ever_;
    std::deque<Held> held_;
    uint64_t quarantine_ = 0;
    uint32_t quarantined_ = 0;
    uint64_t reused_ = 0;
};

} // namespace tailmark
