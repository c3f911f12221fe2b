// Read-only views of the run for any thread: per-flow cursors, counters
// summed over the engines, the stats line, and the summary's results.
#include "runtime.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include "bench/bench.h"
#include "service/service.h"

namespace tailmark::app {

Sender::FlowView Runtime::send_view(const FlowCtx& f) const {
    if (f.send != nullptr)
        return Sender::view(f.send);
    return f.last_send;
}

uint32_t Runtime::released_of(const FlowCtx& f) const {
    if (f.ring)
        return f.ring->released();
    // A receive side whose session ended keeps its ring's last cursor; the
    // sender's view is only a sender's (as in acked_of).
    if (f.send != nullptr || (f.detached && send_only(f)))
        return send_view(f).released;
    return f.last_released;
}

uint32_t Runtime::acked_of(const FlowCtx& f) const {
    if (f.recv != nullptr)
        return *Receiver::acked_word(f.recv);
    if (f.send != nullptr || (f.detached && send_only(f)))
        return send_view(f).acked;
    return f.last_acked;
}

// A flow with a send side and no receive side (send mode's, and a service
// connector's): once its session ended, its cursors are its last send view.
// (Service mode's send flows showed 0 acknowledged and released there.)
bool Runtime::send_only(const FlowCtx& f) const { return f.send_session != nullptr && f.recv_session == nullptr; }

DropCounters Runtime::drops() const {
    DropCounters d = engine_ ? engine_->drops() : DropCounters{}; // the Senders' and Receivers'
    if (sessions_)
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(sessions_->counters().drops[i]);
    return d;
}

Runtime::Stats Runtime::stats() const {
    Stats t;
    for (uint32_t i = 0; i < senders().size(); i++) {
        const Sender* s = senders()[i];
        const SenderCounters& c = s->counters();
        t.sent += peek(c.msgs_sent);
        t.pkts_tx += s->pkts_tx();
        if (i >= engine_->port_senders())
            t.pkts_local += s->pkts_tx();
        t.tx_dropped += s->tx_dropped();
        t.retx += peek(c.retx_pkts);
        if (opt_.mode == Mode::Send || opt_.mode == Mode::Service) // service: the applications' payload sent
            t.bytes += peek(c.bytes_sent);
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
    for (const RxCtx* c : rxs())
        t.pkts_rx += peek(c->pkts_rx);
    for (const Receiver* r : receivers()) {
        const RxCounters& rc = r->placer().counters();
        // One of the two is 0 unless the shell switched modes mid-run.
        t.completion_writes += peek(rc.packet_completions) + peek(rc.completions);
    }
    for (const ConsCtx* c : conss_) {
        t.completed += peek(c->completed);
        t.verified += peek(c->verified);
        t.verify_errors += peek(c->verify_errors);
        t.bytes += peek(c->bytes);
    }
    if (opt_.mode == Mode::Send && opt_.flow_control)
        for (const FlowCtx* f : flows_)
            t.acked += send_view(*f).released;
    if (opt_.mode == Mode::Send) {
        t.completed = t.acked;
    } else if (opt_.external_consumer) { // released by the consumer process (which verifies)
        const bool sizes_known = opt_.mode != Mode::Service; // the applications' messages have their own
        t.completed += forgotten_.completed;
        if (sizes_known)
            t.bytes = forgotten_.bytes;
        for (const FlowCtx* f : flows_) {
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
    for (const auto& a : app_sessions_)
        up += a->stage == AppSession::Stage::Live;
    printf(" in_flight=%" PRIu64 " retransmits=%" PRIu64 " stalled=%u", in_flight, t.retx,
           nstalled_.load(std::memory_order_relaxed));
    if (opt_.exit_when_done && opt_.messages != 0)
        printf(" done_pct=%.1f", 100.0 * double(t.completed) /
                                     double(opt_.messages * opt_.flows * (opt_.mode == Mode::Recv ? opt_.sessions : 1)));
    printf(" sessions=%u", up);
    // The fastest session's congestion controller: what paces the sender now.
    double cc_bps = 0, srtt_us = 0;
    for (const FlowCtx* f : flows_) {
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

Results::Flow Runtime::flow_row(const FlowCtx& f) const {
    Results::Flow x;
    x.index = f.index;
    if (f.send != nullptr || f.detached || opt_.mode != Mode::Recv) {
        const Sender::FlowView v = send_view(f);
        x.sent = v.sent;
        if (opt_.mode == Mode::Send) {
            x.acked = v.acked;
            x.released = v.released;
        } else {
            x.acked = acked_of(f);
            x.released = released_of(f);
        }
        if (v.failed != FailReason::None && opt_.mode != Mode::Recv) {
            x.state = to_string(v.failed);
            // What it still owed: its messages not released, the ones
            // never sent included (--messages 0: those it had taken).
            // The service's flows carry the applications' messages, not --messages.
            const uint64_t quota = opt_.messages + f.sends_requested.load(std::memory_order_relaxed);
            x.failed = opt_.messages && opt_.mode != Mode::Service ? (quota > x.released ? quota - x.released : 0)
                                                                   : v.failed_msgs;
        }
    } else {
        x.acked = acked_of(f);
        x.released = released_of(f);
    }
    if (opt_.mode == Mode::Recv) {
        x.sent = 0;
        x.session = f.session ? f.session->index : 0;
    }
    x.gave_up = f.ring ? f.ring->gave_up() : f.last_gave_up;
    x.latency_samples = f.lat.samples();
    x.lat_p50_ns = double(f.lat.quantile(0.50)) * 1e9 / double(tsc_hz_);
    x.lat_p99_ns = double(f.lat.quantile(0.99)) * 1e9 / double(tsc_hz_);
    if (handoff_) {
        const uint8_t o = f.recv != nullptr ? engine_->moves().owner_of(f.recv_id) : f.last_owner;
        const uint8_t at = f.recv != nullptr ? engine_->moves().arrived_of(f.recv_id) : f.last_arrived;
        x.rx_owner = o == RxPlacer::kNoOwner ? -1 : o;
        x.rx_arrived = at == RxPlacer::kNoOwner ? -1 : at;
    }
    return x;
}

Results Runtime::results() const {
    Results r;
    const Stats t = stats();
    r.mode = opt_.mode;
    r.completion = completion();
    // Service: the flows the applications' sessions opened; their sizes are theirs.
    r.flows = opt_.mode == Mode::Service ? static_cast<uint32_t>(flows_made_) : opt_.flows;
    r.registry = {flows_made_, flows_.size(), slots_reused_, forgotten_.sessions};
    r.msg_size = opt_.mode == Mode::Service ? 0 : opt_.msg_size;
    r.messages_per_flow = opt_.messages;
    r.messages_sent = t.sent;
    r.messages_completed = t.completed;
    r.messages_acked = t.acked;
    r.messages_verified = t.verified;
    r.verify_errors = t.verify_errors;
    r.completion_writes = t.completion_writes;
    r.packets_tx = t.pkts_tx;
    r.packets_rx = t.pkts_rx;
    rte_eth_stats st;
    if (local_port_ && rte_eth_stats_get(local_port_->id(), &st) == 0)
        r.packets_local = st.opackets;
    // The data ports together (--tx-port, then each rail), and with rails
    // each one's own counts too.
    for (size_t k = 0; tx_port_ && k <= rails_.size(); k++) {
        const drivers::Port& p = k == 0 ? *tx_port_ : *rails_[k - 1];
        Results::Rail x;
        x.port = p.id();
        if (rte_eth_stats_get(p.id(), &st) == 0) {
            r.port_tx += st.opackets;
            r.port_rx += st.ipackets;
            r.port_missed += st.imissed;
            x.port_tx = st.opackets;
            x.port_rx = st.ipackets;
        }
        if (!rails_.empty())
            r.rails.push_back(x);
    }
    for (Sender* s : senders())
        r.rail_dropped += s->rail_dropped();
    if (rx_port_owned_ && rte_eth_stats_get(rx_port_owned_->id(), &st) == 0) {
        r.port_rx = st.ipackets;
        r.port_missed = st.imissed;
    }
    r.bytes_payload = t.bytes;
    r.tx_dropped = t.tx_dropped;
    r.fault_shim = !shims_.empty();
    if (opt_.udp_checksum) {
        r.udp_checksum_tx = tx_port_->tx_udp_checksum() ? "offload" : "software";
        r.udp_checksum_rx = rx_port_->rx_udp_checksum() ? "offload" : "software";
    }
    r.fault = fault_counters();
    r.steering = steering_name();
    r.rx_moves = engine_->moves().moves();
    if (!traces_.empty()) {
        std::vector<const SlowTrace*> t;
        for (const auto& p : traces_)
            t.push_back(p.get());
        r.slow_json = SlowTrace::to_json(t, tsc_hz_, opt_.trace_slow_ns,
                                         plan_group(opt_.msg_size, stride_for_mtu(opt_.mtu)).pkt_count);
    }
    r.rx_lanes = rx_lanes();
    for (uint32_t i = 0; i < senders().size(); i++) {
        PathView pv[64];
        const uint32_t k = senders()[i]->path_views(pv, 64);
        for (uint32_t j = 0; j < k; j++)
            r.paths.push_back({i, pv[j]});
    }
    sum_engine_counters(r);
    sum_cycles(r, t);
    merge_latency(r);
    // Rates over the time work was in flight: from the first session up (the
    // start, without sessions) to when the work was done, or the stop.
    const uint64_t begin = start_tsc_ ? start_tsc_ : launch_tsc_;
    uint64_t end = end_tsc_ ? end_tsc_ : rte_rdtsc();
    if (work_end_tsc_ != 0 && work_end_tsc_ < end)
        end = work_end_tsc_;
    r.elapsed_s = begin && end > begin ? double(end - begin) / double(tsc_hz_) : 0;
    if (r.elapsed_s > 0) {
        r.msgs_per_s = double(opt_.mode == Mode::Send ? r.messages_sent : r.messages_completed) / r.elapsed_s;
        r.mpps = double(opt_.mode == Mode::Recv ? r.packets_rx : r.packets_tx) / r.elapsed_s / 1e6;
        r.gbps = double(r.bytes_payload) * 8 / r.elapsed_s / 1e9;
    }
    r.exit_reason = exit_reason_.empty() ? "stopped" : exit_reason_;

    uint64_t sends = 0;
    for (const FlowCtx* f : flows_)
        sends += f->sends_requested.load(std::memory_order_relaxed);
    add_flow_rows(r);
    add_session_rows(r);
    verdict(r, sends);
    return r;
}

// The engines' counters, summed: the Senders', drops by reason, the
// generator's waits, the Receivers', the session table's, the service's,
// and the control packets.
void Runtime::sum_engine_counters(Results& r) const {
    for (const Sender* s : senders()) {
        const SenderCounters& c = s->counters();
        r.acks_rx += c.acks_rx;
        r.tx_alloc_fail += c.alloc_fail;
        r.packets_zero_copy += c.zero_copy_pkts;
        r.rel.retx_pkts += c.retx_pkts;
        r.rel.retx_reqs += c.retx_reqs;
        r.rel.probes += c.probes;
        r.rel.rto_expired += c.rto_expired;
        r.rel.stale_reqs += c.stale_reqs;
        r.rel.nacks_rx += c.nacks_rx;
        r.rel.nacks_early += c.nacks_early;
        r.cc.samples += c.cc_samples;
        r.cc.increases += c.cc_increases;
        r.cc.decreases += c.cc_decreases;
        r.cc.loss_decreases += c.cc_loss_decreases;
        r.cc.timeouts += c.cc_timeouts;
        r.cc.paced += c.cc_paced;
    }
    r.drops = drops();
    for (const TxCtx* c : txs_)
        r.gen_buf_waits += peek(c->buf_waits);
    for (const Receiver* rc : receivers()) {
        const RxCounters& pc = rc->placer().counters();
        const ReceiverCounters& c = rc->counters();
        r.packets_placed += pc.placed;
        r.packets_streamed += pc.streamed;
        r.rel.retx_rx += pc.retx;
        r.rel.nack_reqs += pc.nacks;
        r.discarded += pc.discarded;
        r.acks_tx += c.acks_tx;
        r.rel.nacks_tx += c.nacks_tx;
        r.control_lost += c.ctl_lost;
    }
    if (sessions_) {
        const SessionCounters& sc = sessions_->counters();
        r.sess.tx = sc.tx;
        r.sess.rx = sc.rx;
        r.sess.arp_tx = sc.arp_tx;
        r.sess.arp_rx = sc.arp_rx;
        r.sess.established = sc.established;
        r.sess.ended = sc.ended;
        r.sess.refused = sc.refused;
    }
    r.sess.ids_reused = send_ids_.reused() + recv_ids_.reused();
    if (service_) {
        r.svc = service_->counters();
    }
    uint64_t ctl_tx = 0, ctl_rx = 0; // ACK/NACK packets (a local peer's go in memory)
    for (const Receiver* rc : receivers())
        ctl_tx += rc->counters().ctl_packets;
    for (const Sender* s : senders())
        ctl_rx += s->counters().ctl_packets;
    r.control_tx = ctl_tx + r.sess.tx + r.sess.arp_tx;
    r.control_rx = ctl_rx + r.sess.rx + r.sess.arp_rx;
    for (uint64_t d : r.drops)
        r.drops_total += d;
}

// Cycles per packet (tx, rx) and per message (consumer), and the DPDK
// heap in use.
void Runtime::sum_cycles(Results& r, const Stats& t) const {
    uint64_t cy_tx = 0, cy_rx = 0, cy_cons = 0;
    for (const LcoreCtx* l : lcores_) {
        if (l == nullptr)
            continue;
        cy_tx += peek(l->cycles.tx);
        cy_rx += peek(l->cycles.rx);
        cy_cons += peek(l->cycles.cons);
    }
    if (r.packets_tx)
        r.tx_cycles_per_packet = double(cy_tx) / double(r.packets_tx);
    if (r.packets_rx)
        r.rx_cycles_per_packet = double(cy_rx) / double(r.packets_rx);
    if (t.completed)
        r.consumer_cycles_per_message = double(cy_cons) / double(t.completed);
    for (int sock = 0; sock < RTE_MAX_NUMA_NODES; sock++) {
        rte_malloc_socket_stats ms;
        if (rte_malloc_get_socket_stats(sock, &ms) == 0)
            r.memory_bytes += ms.heap_allocsz_bytes;
    }
}

// The run's latency: the consumers' histograms (send mode: the tx lcores'
// delivery latency) merged.
void Runtime::merge_latency(Results& r) const {
    LatencyHist* h = static_cast<LatencyHist*>(rte_zmalloc("tm_hist", sizeof(LatencyHist), 64));
    if (h) {
        for (const ConsCtx* c : conss_)
            h->merge(c->hist);
        for (const TxCtx* c : txs_) // send mode: delivery latency
            h->merge(c->hist);
        const double ns = 1e9 / double(tsc_hz_);
        r.latency_samples = h->samples();
        r.lat_p50_ns = double(h->quantile(0.50)) * ns;
        r.lat_p99_ns = double(h->quantile(0.99)) * ns;
        r.lat_p999_ns = double(h->quantile(0.999)) * ns;
        r.lat_max_ns = double(h->max()) * ns;
        rte_free(h);
    }
}

// Each flow's row, the forgotten flows' failures, and the fastest
// session's congestion controller.
void Runtime::add_flow_rows(Results& r) const {
    r.flows_failed = static_cast<uint32_t>(forgotten_.flows_failed);
    r.messages_failed = forgotten_.messages_failed;
    for (const FlowCtx* f : flows_) {
        if (f->forgotten)
            continue;
        if (f->send != nullptr || f->detached || opt_.mode != Mode::Recv) {
            const Sender::FlowView v = send_view(*f);
            if (v.cc_rate_bps / 1e6 > r.cc.rate_mbps) { // the fastest session's controller
                r.cc.rate_mbps = v.cc_rate_bps / 1e6;
                r.cc.srtt_us = static_cast<double>(v.cc_srtt) * 1e6 / static_cast<double>(tsc_hz_);
                r.cc.base_rtt_us = static_cast<double>(v.cc_base_rtt) * 1e6 / static_cast<double>(tsc_hz_);
            }
        }
        const Results::Flow x = flow_row(*f);
        if (std::strcmp(x.state, "ok") != 0) {
            r.flows_failed++;
            r.messages_failed += x.failed;
        }
        r.per_flow.push_back(x);
    }
}

// Each session's row: its role, state, end, and its flows' counts.
void Runtime::add_session_rows(Results& r) const {
    for (const auto& a : app_sessions_) {
        Results::SessionSummary ss;
        ss.index = a->index;
        ss.id = a->id;
        ss.peer = to_string(a->peer);
        ss.role = a->connector ? "connector" : "acceptor";
        ss.state = a->stage == AppSession::Stage::Live ? "up" : a->stage == AppSession::Stage::Installing ? "installing"
                                                                                                            : "ended";
        ss.end = to_string(a->end);
        ss.flows = static_cast<uint32_t>(a->flows.size());
        ss.data_version = a->data_version;
        ss.data_auth = a->data_auth;
        ss.complete = a->complete;
        for (const FlowCtx* f : a->flows) {
            ss.released += released_of(*f);
            if (f->cons != nullptr) {
                ss.completed += peek(f->cons->completed);
                ss.verified += peek(f->cons->verified);
                ss.verify_errors += peek(f->cons->verify_errors);
            } else {
                ss.completed += f->cons_completed;
                ss.verified += f->cons_verified;
                ss.verify_errors += f->cons_errors;
            }
        }
        r.sessions.push_back(ss);
    }
}

// What was requested (`sends`: the shell's `send` messages besides
// --messages), and whether the run did it.
void Runtime::verdict(Results& r, uint64_t sends) const {
    switch (opt_.mode) {
    case Mode::Loopback: // -i: the shell's `send` adds messages; every message sent is requested
        r.requested = opt_.messages && !opt_.interactive ? opt_.messages * opt_.flows + sends : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.messages_completed == r.requested &&
               (opt_.external_consumer || !opt_.verify || r.messages_verified == r.requested) && r.verify_errors == 0;
        break;
    case Mode::Recv:
        r.requested = opt_.messages * opt_.flows * opt_.sessions + sends;
        r.ok = r.verify_errors == 0 && (opt_.messages == 0 || bench_->sessions_complete() >= opt_.sessions);
        break;
    case Mode::Send:
        r.requested = opt_.messages && !opt_.interactive ? opt_.messages * opt_.flows + sends : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.tx_dropped == 0 && r.flows_failed == 0 &&
               (!opt_.flow_control || r.messages_acked == r.requested) && !refused_;
        break;
    case Mode::Service: // the applications' messages: each learnt its own outcome
        r.requested = r.messages_sent;
        r.ok = r.tx_dropped == 0;
        break;
    }
}

drivers::FaultCounters Runtime::fault_counters() const {
    drivers::FaultCounters t;
    for (const drivers::FaultShim* s : shims_) {
        const drivers::FaultCounters c = s->counters();
        t.seen += c.seen;
        t.dropped += c.dropped;
        t.duplicated += c.duplicated;
        t.reordered += c.reordered;
        t.corrupted += c.corrupted;
        t.arrived_retx += c.arrived_retx;
        t.arrived_nack += c.arrived_nack;
        t.passed += c.passed;
    }
    return t;
}

} // namespace tailmark::app
