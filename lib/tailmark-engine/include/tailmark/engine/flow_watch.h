// The control thread's look at every flow of the registry, for an
// application that runs sessions (the daemon's benchmark and service alike):
//   - a flow that failed is logged once;
//   - a session held at congestion control's floor for a second, while it
//     has work, is warned about once, with what that may mean;
//   - where another process releases the completion rings (a consumer
//     process, the service's applications), a flow whose oldest message is
//     complete while its cursor has not moved for `stall_us` is stalled:
//     reported, never overwritten (the placer's window ends at released +
//     ring size);
//   - each flow's messages per second over the last second, sent and done
//     (send: delivered; otherwise released), for status views: a starved
//     flow shows as a zero beside its peers. Kept here by slot, not in the
//     flow records, whose lines the lcores read per message (in a flow
//     record they cost the tx-only benchmark 7%: a changed layout).
// Each look reads the flows' Sender state, lines their tx lcores write per
// message, which then come back to those lcores as misses: failures and the
// floor every 10 ms, rates once a second (64 flows of 64 B messages in
// loopback lost 7% of the rate when it was every 100 us).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tailmark/engine/flow_registry.h"
#include "tailmark/engine/sessions.h"

namespace tailmark::engine {

struct FlowWatchConfig {
    uint64_t hz = 1;                // TSC cycles per second
    bool send_side = true;          // its flows send (false: a receiver; only flows with a send half are looked at)
    bool consumer_process = false;  // another process releases the rings: watch for stalls
    uint64_t cc_max_mbps = 0;       // congestion control's ceiling (0: none): no floor warning when it is the cause
    uint64_t cc_target_us = 0;      // named in the floor warning
    uint64_t stall_us = 1000000;    // a consumer that released nothing for this long is stalled
};

class FlowWatch {
public:
    // Room for `max_flows` slots (the registry's capacity): other threads
    // read stalled(i) for any of them.
    explicit FlowWatch(size_t max_flows);
    void configure(const FlowWatchConfig& c) { cfg_ = c; }

    // The control round. `released(f, cursor)`: with consumer_process, each
    // flow's released cursor as this round read it (null: not wanted).
    using Released = std::function<void(SessionFlow& f, uint32_t cursor)>;
    void tick(const FlowRegistry<SessionFlow>& reg, uint64_t now, const Released& released = {});
    // Slot i serves a new flow (SessionHooks::slot_taken): what was kept
    // for the old one starts over.
    void slot_taken(uint32_t i);

    // Any thread.
    bool stalled(uint32_t i) const { return i < cap_ && stalled_[i].load(std::memory_order_relaxed); }
    double rate_sent(uint32_t i) const { return i < cap_ ? rates_[i].sent.load(std::memory_order_relaxed) : 0; }
    double rate_done(uint32_t i) const { return i < cap_ ? rates_[i].done.load(std::memory_order_relaxed) : 0; }
    uint32_t stalled_count() const { return nstalled_.load(std::memory_order_relaxed); }

private:
    void scan(const FlowRegistry<SessionFlow>& reg, uint64_t now);          // failures, the floor
    void watch_consumers(const FlowRegistry<SessionFlow>& reg, uint64_t now, const Released& released);
    void rates(const FlowRegistry<SessionFlow>& reg, uint64_t now);

    FlowWatchConfig cfg_;
    size_t cap_;
    uint64_t next_scan_ = 0, next_rates_ = 0, rates_tsc_ = 0;
    // Per slot (control thread).
    std::vector<bool> failed_logged_;
    std::vector<uint64_t> floor_since_; // its controller at the floor since (0: not)
    std::vector<uint32_t> seen_released_;
    std::vector<uint64_t> moved_tsc_;
    std::vector<uint32_t> sent_seen_, done_seen_; // the cursors a second ago
    // Per slot, made once: other threads read it.
    std::unique_ptr<std::atomic<bool>[]> stalled_;
    std::atomic<uint32_t> nstalled_{0};
    struct Rates {
        std::atomic<double> sent{0}, done{0};
    };
    std::unique_ptr<Rates[]> rates_;
};

} // namespace tailmark::engine
