// --trace-slow-ns: a timeline of the messages whose completion latency
// passed a bound (issue 17: what delays the 1% of messages at 10% load).
// Each lcore keeps its last kHistory iterations (when each role ended, what
// each did); when its consumer sees a completion later than the bound, the
// iterations up to the one it was seen in are copied next to the message.
// Diagnostic only: off by default. When on it costs one record per
// iteration from the TSC reads the loop takes anyway, and nothing is
// allocated on the lcore (the event array is sized at set-up; what does not
// fit is counted, not kept).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tailmark::app {

struct IterRecord {
    uint64_t start = 0;  // TSC the iteration began (the previous one's end)
    uint64_t tx_end = 0; // after the tx step (= start when the lcore has no tx role)
    uint64_t rx_end = 0; // after the rx step
    uint64_t end = 0;    // after the consumer step
    uint32_t tx_msgs = 0;   // generator messages the tx step started
    uint32_t tx_pkts = 0;   // packets it handed to the PMD (data, ACKs, retransmissions)
    uint16_t rx_pkts = 0;   // the rx burst
    uint16_t cons_msgs = 0; // completions the consumer took
    uint32_t acks = 0;      // ACKs and NACKs the receiver sent
};

struct SlowMessage {
    static constexpr unsigned kIters = 6;
    uint32_t flow = 0, msg_id = 0;
    uint64_t rx_tsc = 0, seen_tsc = 0;
    uint32_t nth = 0; // completions the consumer took before it in the same step
    uint32_t niters = 0;
    std::array<IterRecord, kIters> iters{}; // oldest first; the last is the one it was seen in
};

class SlowTrace {
public:
    static constexpr unsigned kHistory = 8; // power of two, >= SlowMessage::kIters
    SlowTrace(uint64_t bound_cycles, uint32_t capacity) : bound_(bound_cycles) { events_.reserve(capacity); }

    uint64_t bound() const { return bound_; }

    // The consumer, for a completion seen later than the bound; completed is
    // its running count before this one (so nth = those of this iteration).
    void slow(uint32_t flow, uint32_t msg_id, uint64_t rx_tsc, uint64_t seen_tsc, uint64_t completed) {
        seen_++;
        if (events_.size() == events_.capacity())
            return; // counted, not kept
        SlowMessage m;
        m.flow = flow;
        m.msg_id = msg_id;
        m.rx_tsc = rx_tsc;
        m.seen_tsc = seen_tsc;
        m.nth = static_cast<uint32_t>(completed - last_[3]);
        events_.push_back(m); // reserved: no allocation
        pending_++;
    }

    // The lcore loop, at the end of each iteration. The counters are the
    // roles' running totals; the record keeps their change.
    void end_iter(IterRecord r, uint64_t gen_msgs, uint64_t pkts_tx, uint64_t pkts_rx, uint64_t completed,
                  uint64_t acks) {
        r.tx_msgs = static_cast<uint32_t>(gen_msgs - last_[0]);
        r.tx_pkts = static_cast<uint32_t>(pkts_tx - last_[1]);
        r.rx_pkts = static_cast<uint16_t>(pkts_rx - last_[2]);
        r.cons_msgs = static_cast<uint16_t>(completed - last_[3]);
        r.acks = static_cast<uint32_t>(acks - last_[4]);
        last_ = {gen_msgs, pkts_tx, pkts_rx, completed, acks};
        hist_[iter_++ & (kHistory - 1)] = r;
        if (pending_ == 0)
            return;
        const unsigned n = iter_ < SlowMessage::kIters ? static_cast<unsigned>(iter_) : SlowMessage::kIters;
        for (size_t e = events_.size() - pending_; e < events_.size(); e++) {
            SlowMessage& m = events_[e];
            m.niters = n;
            for (unsigned i = 0; i < n; i++)
                m.iters[i] = hist_[(iter_ - n + i) & (kHistory - 1)];
        }
        pending_ = 0;
    }

    uint64_t seen() const { return seen_; }
    const std::vector<SlowMessage>& events() const { return events_; }

    // The "slow_messages" object of the summary JSON: each kept message with
    // its iterations in ns relative to its rx TSC, and what the timeline
    // shows (see classify()).
    static std::string to_json(const std::vector<const SlowTrace*>& traces, uint64_t tsc_hz, uint64_t bound_ns,
                               uint32_t pkts_per_msg);

    // What made a slow message slow, from its timeline; first match wins:
    //   "stall"      an iteration in the window took > 5 us with at most one
    //                packet's work in it (the lcore was away: the VM, an
    //                interrupt, a page fault);
    //   "burst"      its rx burst brought more packets than its message has
    //                (several messages arrived together: a late tx step sent
    //                them at once), so it waited for the others' placement
    //                and verification;
    //   "queued"     the consumer took other completions first;
    //   "long_step"  one role's step in its iteration took > the bound;
    //   "other".
    static const char* classify(const SlowMessage& m, uint64_t tsc_hz, uint32_t pkts_per_msg);

private:
    uint64_t bound_;
    uint64_t seen_ = 0;
    uint64_t iter_ = 0;
    uint32_t pending_ = 0;
    std::array<uint64_t, 5> last_{};
    std::array<IterRecord, kHistory> hist_{};
    std::vector<SlowMessage> events_;
};

} // namespace tailmark::app
