// Read-only views of the run for any thread: per-flow cursors and counters
// summed over the engines. The summary (bench/results.cc), the stats line
// and telemetry (telemetry/) are made of them.
#include "runtime.h"

#include "bench/bench.h"
#include "bench/results.h"

namespace tailmark::app {

// A flow's cursors, live or as last seen (engine::Sessions' views).
Sender::FlowView Runtime::send_view(const FlowCtx& f) const { return engine::Sessions::send_view(f); }
uint32_t Runtime::released_of(const FlowCtx& f) const { return engine::Sessions::released_of(f); }
uint32_t Runtime::acked_of(const FlowCtx& f) const { return engine::Sessions::acked_of(f); }

DropCounters Runtime::drops() const { return node_.drops(); }

Runtime::Stats Runtime::stats() const {
    Stats t;
    if (node_.has_engine()) { // the Senders', the rx roles' and the Receivers' counters
        const engine::Engine::Stats e = engine().stats();
        t.sent = e.msgs_sent;
        t.pkts_tx = e.pkts_tx;
        t.pkts_local = e.pkts_local;
        t.bytes_local = e.bytes_local;
        t.tx_dropped = e.tx_dropped;
        t.retx = e.retx_pkts;
        if (opt_.mode == Mode::Send || opt_.mode == Mode::Service) // service: the applications' payload sent
            t.bytes = e.bytes_sent;
        t.pkts_rx = e.pkts_rx;
        // One of the two is 0 unless the shell switched modes mid-run.
        t.completion_writes = e.completed + e.packet_completions;
    }
    for (uint64_t d : drops())
        t.drops += d;
    for (const TxCtx* c : txs_) {
        t.sent += peek(c->replay_msgs);
        for (const ReplayQueue& rq : c->replay) {
            t.pkts_tx += rq.q->pkts_tx();
            t.tx_dropped += rq.q->dropped();
        }
    }
    for (const ConsCtx* c : conss()) {
        t.completed += peek(c->completed);
        t.verified += peek(c->verified);
        t.verify_errors += peek(c->verify_errors);
        t.bytes += peek(c->bytes);
    }
    if (opt_.mode == Mode::Send && opt_.flow_control)
        for (const FlowCtx* f : ctxs())
            t.acked += send_view(*f).released;
    if (opt_.mode == Mode::Send) {
        t.completed = t.acked;
    } else if (opt_.external_consumer) { // released by the consumer process (which verifies)
        const bool sizes_known = opt_.mode != Mode::Service; // the applications' messages have their own
        t.completed += forgotten_.completed;
        if (sizes_known)
            t.bytes = forgotten_.bytes;
        for (const FlowCtx* f : ctxs()) {
            if (f->forgotten)
                continue;
            const uint32_t rel = released_of(*f);
            t.completed += rel;
            if (sizes_known)
                t.bytes += plane_.cfg.bytes_of(rel);
        }
    }
    return t;
}

// --- results ----------------------------------------------------------------

// Per rx lcore: its queue, what the queue brought, what it placed, what it
// passed to other rx lcores (hand-off) and took from them. Relaxed reads of
// the lcores' counters (the summary, telemetry).
std::vector<Results::RxLane> Runtime::rx_lanes() const {
    std::vector<Results::RxLane> v;
    for (size_t i = 0; i < rxs().size() && i < receivers().size(); i++) {
        const ReceiverCounters& c = receivers()[i]->counters();
        v.push_back({rxs()[i]->lcore, rxs()[i]->queue, peek(rxs()[i]->pkts_rx),
                     peek(receivers()[i]->placer().counters().placed), peek(c.handed_out), peek(c.handed_in),
                     peek(c.held)});
    }
    return v;
}

const std::vector<ConsCtx*>& Runtime::conss() const { return bench_ ? bench_->consumers() : no_conss_; }

Results Runtime::results() const { return RunSummary(*this).make(); }

} // namespace tailmark::app
