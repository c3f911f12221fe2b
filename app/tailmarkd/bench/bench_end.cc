// The benchmark's end (bench.h): when the run's messages are done, and
// when nothing it sent is in flight any more (Runtime::check_done).
#include "bench/bench.h"

#include "run/runtime.h"

namespace tailmark::app {

// recv: a session is complete once every flow consumed --messages.
void Bench::count_complete() {
    if (opt_.messages == 0)
        return;
    for (const auto& p : rt_.app_sessions()) {
        AppSession& a = app_of(*p);
        if (a.connector || a.complete || a.flows.empty())
            continue;
        bool all = true;
        for (const FlowCtx* f : a.ctxs())
            all = all && f->consumed.load(std::memory_order_acquire) >= opt_.messages;
        if (all) {
            a.complete = true;
            sessions_complete_++;
        }
    }
}

bool Bench::done() const {
    if (opt_.messages == 0)
        return false;
    const uint32_t m = static_cast<uint32_t>(opt_.messages);
    if (opt_.mode == Mode::Recv) {
        if (sessions_complete_ < opt_.sessions)
            return false;
        // The senders confirm they heard the last release with a CLOSE.
        for (const auto& a : rt_.app_sessions())
            if (app_of(*a).complete && a->stage == AppSession::Stage::Live)
                return false;
        return true;
    }
    const uint32_t n = rt_.flow_count();
    if (n == 0)
        return false;
    if (opt_.replay) { // no Sender flows: the ready-made packets' messages, consumed
        for (uint32_t i = 0; i < n; i++)
            if (rt_.flow_at(i).consumed.load(std::memory_order_acquire) != m)
                return false;
        return true;
    }
    for (uint32_t i = 0; i < n; i++) {
        const FlowCtx& f = rt_.flow_at(i);
        const Sender::FlowView v = rt_.send_view(f);
        if (f.send == nullptr && !f.detached && opt_.flow_control)
            return false; // not up yet
        if (v.failed != FailReason::None)
            continue; // given up: reported, nothing more to wait for
        const uint32_t want = m + static_cast<uint32_t>(f.sends_requested.load(std::memory_order_acquire));
        if (opt_.mode == Mode::Loopback ? f.consumed.load(std::memory_order_acquire) != want
                                        : (opt_.flow_control ? v.released : v.sent) != want)
            return false;
    }
    return !rt_.senders_busy();
}

// Its Senders hold nothing any more (Runtime::drained looked), and: every
// message --replay queued was consumed; or each flow's sent messages were
// consumed (loopback) or released by the peer (send).
bool Bench::drained() const {
    const uint32_t n = rt_.flow_count();
    if (opt_.replay) {
        uint64_t queued = 0, consumed = 0;
        for (uint32_t t = 0; t < rt_.ntx(); t++) {
            const TxCtx* c = rt_.tx_for(t);
            if (peek(c->replay_opened) != peek(c->replay_msgs))
                return false; // a message partly queued
            queued += peek(c->replay_msgs);
        }
        for (uint32_t i = 0; i < n; i++)
            consumed += rt_.flow_at(i).consumed.load(std::memory_order_acquire);
        return consumed == queued;
    }
    for (uint32_t i = 0; i < n; i++) {
        const FlowCtx& f = rt_.flow_at(i);
        const Sender::FlowView v = rt_.send_view(f);
        if (v.failed != FailReason::None)
            continue;
        if (opt_.mode == Mode::Loopback && f.consumed.load(std::memory_order_acquire) != v.sent)
            return false;
        if (opt_.mode == Mode::Send && opt_.flow_control && v.released != v.sent)
            return false;
    }
    return true;
}

} // namespace tailmark::app
