// Read-only views of the run for any thread: per-flow cursors, counters
// summed over the engines, and the stats line. The summary is made of them
// (bench/results.cc).
#include "runtime.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include "bench/bench.h"
#include "bench/results.h"
#include "service/service.h"

namespace tailmark::app {

// A flow's cursors, live or as last seen (engine::Sessions' views).
Sender::FlowView Runtime::send_view(const FlowCtx& f) const { return engine::Sessions::send_view(f); }
uint32_t Runtime::released_of(const FlowCtx& f) const { return engine::Sessions::released_of(f); }
uint32_t Runtime::acked_of(const FlowCtx& f) const { return engine::Sessions::acked_of(f); }
bool Runtime::send_only(const FlowCtx& f) const { return engine::Sessions::send_only(f); }

DropCounters Runtime::drops() const {
    DropCounters d = node_.has_engine() ? engine().drops() : DropCounters{}; // the Senders' and Receivers'
    if (node_.has_sessions())
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(node_.table().counters().drops[i]);
    return d;
}

Runtime::Stats Runtime::stats() const {
    Stats t;
    if (node_.has_engine()) { // the Senders', the rx roles' and the Receivers' counters
        const engine::Engine::Stats e = engine().stats();
        t.sent = e.msgs_sent;
        t.pkts_tx = e.pkts_tx;
        t.pkts_local = e.pkts_local;
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
                t.bytes += bytes_released(rel);
        }
    }
    return t;
}

// Message i of a flow has the i-th size of the list, in turn (not the
// largest times the count).
uint64_t Runtime::bytes_released(uint32_t rel) const {
    if (plane_.cfg.nsizes == 0)
        return uint64_t(rel) * opt_.msg_size;
    uint64_t cycle = 0, b = 0;
    for (uint32_t k = 0; k < plane_.cfg.nsizes; k++)
        cycle += plane_.cfg.sizes[k];
    b += uint64_t(rel / plane_.cfg.nsizes) * cycle;
    for (uint32_t k = 0; k < rel % plane_.cfg.nsizes; k++)
        b += plane_.cfg.sizes[k];
    return b;
}

void Runtime::print_stats(uint64_t now) {
    const Stats t = stats();
    const double dt = double(now - last_stats_tsc_) / double(tsc_hz_);
    const double el = double(now - launch_tsc_) / double(tsc_hz_);
    // Service mode's totals are its live flows': a session that ended takes
    // its counts with it, and a period's difference would wrap (a line read
    // msgs_per_s=18445782852671762432). Such a period counts nothing.
    auto since = [](uint64_t now_v, uint64_t then_v) { return now_v > then_v ? now_v - then_v : 0; };
    const uint64_t dmsg = opt_.mode == Mode::Send ? since(t.sent, last_stats_.sent) : since(t.completed, last_stats_.completed);
    const uint64_t dpkt = opt_.mode == Mode::Recv ? since(t.pkts_rx, last_stats_.pkts_rx) : since(t.pkts_tx, last_stats_.pkts_tx);
    const double gbps = double(since(t.bytes, last_stats_.bytes)) * 8 / dt / 1e9;
    printf("stats t=%.2f", el);
    // The service verifies nothing (its applications' bytes are theirs),
    // and it counts its attached applications.
    if (service_ != nullptr)
        printf(" apps=%u sent=%" PRIu64 " completed=%" PRIu64, service_->apps(), t.sent, t.completed);
    else
        printf(" sent=%" PRIu64 " completed=%" PRIu64 " verified=%" PRIu64 " verify_errors=%" PRIu64, t.sent,
               t.completed, t.verified, t.verify_errors);
    printf(" msgs_per_s=%.0f gbps=%.3f mpps=%.3f packets_tx=%" PRIu64 " packets_rx=%" PRIu64 " drops=%" PRIu64
           " tx_dropped=%" PRIu64,
           double(dmsg) / dt, gbps, double(dpkt) / dt / 1e6, t.pkts_tx, t.pkts_rx, t.drops, t.tx_dropped);
    const uint64_t base = opt_.mode == Mode::Recv ? t.completion_writes : t.sent;
    const uint64_t in_flight = base > t.completed ? base - t.completed : 0;
    uint32_t up = 0;
    for (const auto& a : app_sessions())
        up += a->stage == AppSession::Stage::Live;
    printf(" in_flight=%" PRIu64 " retransmits=%" PRIu64 " stalled=%u", in_flight, t.retx,
           nstalled_.load(std::memory_order_relaxed));
    if (opt_.exit_when_done && opt_.messages != 0)
        printf(" done_pct=%.1f", 100.0 * double(t.completed) /
                                     double(opt_.messages * opt_.flows * (opt_.mode == Mode::Recv ? opt_.sessions : 1)));
    printf(" sessions=%u", up);
    // The fastest session's congestion controller: what paces the sender now.
    double cc_bps = 0, srtt_us = 0;
    for (const FlowCtx* f : ctxs()) {
        if (f->forgotten || (f->send == nullptr && !f->detached && opt_.mode == Mode::Recv))
            continue;
        const Sender::FlowView v = send_view(*f);
        if (v.cc_rate_bps > cc_bps) {
            cc_bps = v.cc_rate_bps;
            srtt_us = double(v.cc_srtt) * 1e6 / double(tsc_hz_);
        }
    }
    if (cc_bps > 0)
        printf(" cc_mbps=%.1f srtt_us=%.0f", cc_bps / 1e6, srtt_us);
    printf("\n");
    fflush(stdout);
    last_stats_ = t;
    last_stats_tsc_ = now;
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
