// The control thread's look at every flow (flow_watch.h).
#include "tailmark/engine/flow_watch.h"

#include <cinttypes>

#include "tailmark/congestion.h"
#include "tailmark/log.h"

namespace tailmark::engine {

FlowWatch::FlowWatch(size_t max_flows)
    : cap_(max_flows), stalled_(std::make_unique<std::atomic<bool>[]>(max_flows)),
      rates_(std::make_unique<Rates[]>(max_flows)) {}

void FlowWatch::tick(const FlowRegistry<SessionFlow>& reg, uint64_t now, const Released& released) {
    if (failed_logged_.size() < reg.size()) {
        failed_logged_.resize(reg.size(), false);
        floor_since_.resize(reg.size(), 0);
        seen_released_.resize(reg.size(), 0);
        moved_tsc_.resize(reg.size(), 0);
        sent_seen_.resize(reg.size(), 0);
        done_seen_.resize(reg.size(), 0);
    }
    if (cfg_.consumer_process)
        watch_consumers(reg, now, released);
    if (now >= next_scan_) {
        next_scan_ = now + cfg_.hz / 100;
        scan(reg, now);
    }
    if (now >= next_rates_)
        rates(reg, now);
}

void FlowWatch::slot_taken(uint32_t i) {
    if (i < failed_logged_.size()) {
        failed_logged_[i] = false;
        floor_since_[i] = 0;
        seen_released_[i] = 0;
        moved_tsc_[i] = 0;
        sent_seen_[i] = 0;
        done_seen_[i] = 0;
    }
    if (i < cap_) {
        stalled_[i].store(false, std::memory_order_relaxed);
        rates_[i].sent.store(0, std::memory_order_relaxed);
        rates_[i].done.store(0, std::memory_order_relaxed);
    }
}

// A failed flow, logged once; a session held at the congestion floor for a
// second while it has work (and not by its ceiling), warned about once: a
// delay-based controller cannot tell a queue from a receiver waiting for a CPU.
void FlowWatch::scan(const FlowRegistry<SessionFlow>& reg, uint64_t now) {
    if (!cfg_.send_side)
        return;
    const double floor_bps = CongestionConfig{}.min_bps * 1.05;
    const bool ceiling_above = cfg_.cc_max_mbps == 0 || double(cfg_.cc_max_mbps) * 1e6 > floor_bps;
    for (size_t i = 0; i < reg.size(); i++) {
        const Sender::FlowView v = Sessions::send_view(*reg[i]);
        if (v.failed != FailReason::None && !failed_logged_[i]) {
            failed_logged_[i] = true;
            TM_LOG(WARNING, app, "flow %zu failed (%s): messages from %u on are not confirmed", i, to_string(v.failed),
                   v.released);
        }
        SessionRec* a = reg[i]->send_session;
        const bool floor = v.cc_rate_bps > 0 && v.cc_rate_bps <= floor_bps && v.submitted != v.released &&
                           ceiling_above && a != nullptr && !a->floor_said;
        if (!floor) {
            floor_since_[i] = 0;
        } else if (floor_since_[i] == 0) {
            floor_since_[i] = now;
        } else if (now - floor_since_[i] > cfg_.hz) {
            a->floor_said = true;
            TM_LOG(WARNING, app,
                   "session %u to %s: congestion control has held it at the 1 Mbit/s floor for 1 s (smoothed RTT %.1f "
                   "ms, base %.1f ms, --cc-target-us %" PRIu64 "): a queue on the path, or busy threads sharing the "
                   "peers' CPUs with their lcores, whose scheduling delay reads as queueing; give the lcores cores of "
                   "their own or raise --cc-target-us above that delay",
                   a->index, to_string(a->peer).c_str(), double(v.cc_srtt) * 1e3 / double(cfg_.hz),
                   double(v.cc_base_rtt) * 1e3 / double(cfg_.hz), cfg_.cc_target_us);
        }
    }
}

void FlowWatch::watch_consumers(const FlowRegistry<SessionFlow>& reg, uint64_t now, const Released& released) {
    const uint64_t limit = cfg_.hz * cfg_.stall_us / 1000000;
    uint32_t n = 0;
    for (size_t i = 0; i < reg.size() && i < cap_; i++) {
        SessionFlow& f = *reg[i];
        if (!f.ring)
            continue;
        const uint32_t rel = f.ring->released();
        if (released)
            released(f, rel);
        if (rel != seen_released_[i] || moved_tsc_[i] == 0) {
            seen_released_[i] = rel;
            moved_tsc_[i] = now;
        }
        const bool waiting = f.ring->poll(rel) != nullptr;
        const bool st = waiting && now - moved_tsc_[i] >= limit;
        if (!waiting)
            moved_tsc_[i] = now;
        if (st != stalled_[i].load(std::memory_order_relaxed)) {
            stalled_[i].store(st, std::memory_order_relaxed);
            if (st)
                TM_LOG(WARNING, app, "flow %zu stalled: message %u is complete, the consumer released nothing for %" PRIu64
                       " ms", i, rel, cfg_.stall_us / 1000);
            else
                TM_LOG(NOTICE, app, "flow %zu resumed at message %u", i, rel);
        }
        n += st;
    }
    nstalled_.store(n, std::memory_order_relaxed);
}

// Sent: what its Sender started (a flow with no send half on a receiver: 0);
// done: delivered (send), else released.
void FlowWatch::rates(const FlowRegistry<SessionFlow>& reg, uint64_t now) {
    const double dt = rates_tsc_ != 0 ? double(now - rates_tsc_) / double(cfg_.hz) : 0;
    for (size_t i = 0; i < reg.size() && i < cap_; i++) {
        const SessionFlow* f = reg[i];
        const uint32_t sent = f->send != nullptr || f->detached || cfg_.send_side ? Sessions::send_view(*f).sent : 0;
        const uint32_t done = Sessions::released_of(*f);
        if (dt > 0) {
            rates_[i].sent.store(double(sent - sent_seen_[i]) / dt, std::memory_order_relaxed);
            rates_[i].done.store(double(done - done_seen_[i]) / dt, std::memory_order_relaxed);
        }
        sent_seen_[i] = sent;
        done_seen_[i] = done;
    }
    rates_tsc_ = now;
    next_rates_ = now + cfg_.hz;
}

} // namespace tailmark::engine
