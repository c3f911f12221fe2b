// The summary's parts, in make()'s order (results.h).
#include "results.h"

#include <cstring>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>

#include "bench.h"
#include "drivers/port_stats.h"
#include "run/runtime.h"
#include "service/service.h"

namespace tailmark::app {

Results::Flow RunSummary::flow_row(const FlowCtx& f) const {
    const Options& o = rt_.options();
    const double hz = double(rt_.tsc_hz());
    Results::Flow x;
    x.index = f.index;
    if (f.send != nullptr || f.detached || o.mode != Mode::Recv) {
        const Sender::FlowView v = rt_.send_view(f);
        x.sent = v.sent;
        if (o.mode == Mode::Send) {
            x.acked = v.acked;
            x.released = v.released;
        } else {
            x.acked = rt_.acked_of(f);
            x.released = rt_.released_of(f);
        }
        if (v.failed != FailReason::None && o.mode != Mode::Recv) {
            x.state = to_string(v.failed);
            // What it still owed: its messages not released, the ones
            // never sent included (--messages 0: those it had taken).
            // The service's flows carry the applications' messages, not --messages.
            const uint64_t quota = o.messages + f.sends_requested.load(std::memory_order_relaxed);
            x.failed = o.messages && o.mode != Mode::Service ? (quota > x.released ? quota - x.released : 0)
                                                             : v.failed_msgs;
        }
    } else {
        x.acked = rt_.acked_of(f);
        x.released = rt_.released_of(f);
    }
    if (o.mode == Mode::Recv) {
        x.sent = 0;
        x.session = f.session ? f.session->index : 0;
    }
    x.gave_up = f.ring ? f.ring->gave_up() : f.last_gave_up;
    x.latency_samples = f.lat.samples();
    x.lat_p50_ns = double(f.lat.quantile(0.50)) * 1e9 / hz;
    x.lat_p99_ns = double(f.lat.quantile(0.99)) * 1e9 / hz;
    if (rt_.handoff()) {
        const engine::RxMoves& m = rt_.engine().moves();
        const uint8_t own = f.recv != nullptr ? m.owner_of(f.recv_id) : f.last_owner;
        const uint8_t at = f.recv != nullptr ? m.arrived_of(f.recv_id) : f.last_arrived;
        x.rx_owner = own == RxPlacer::kNoOwner ? -1 : own;
        x.rx_arrived = at == RxPlacer::kNoOwner ? -1 : at;
    }
    return x;
}

Results RunSummary::make() const {
    const Options& o = rt_.options();
    Results r;
    const Runtime::Stats t = rt_.stats();
    r.mode = o.mode;
    r.completion = rt_.completion();
    const auto& reg = rt_.registry();
    // Service: the flows the applications' sessions opened; their sizes are theirs.
    r.flows = o.mode == Mode::Service ? static_cast<uint32_t>(reg.made()) : o.flows;
    r.registry = {reg.made(), reg.size(), reg.reused(), rt_.sessions_forgotten()};
    r.msg_size = o.mode == Mode::Service ? 0 : o.msg_size;
    r.messages_per_flow = o.messages;
    r.messages_sent = t.sent;
    r.messages_completed = t.completed;
    r.messages_acked = t.acked;
    r.messages_verified = t.verified;
    r.verify_errors = t.verify_errors;
    r.completion_writes = t.completion_writes;
    r.packets_tx = t.pkts_tx;
    r.packets_rx = t.pkts_rx;
    ports(r);
    r.bytes_payload = t.bytes;
    r.bytes_local = t.bytes_local;
    r.tx_dropped = t.tx_dropped;
    r.fault_shim = rt_.has_fault_shim();
    r.fault = rt_.fault_counters();
    r.steering = rt_.steering_name();
    r.rx_moves = rt_.engine().moves().moves();
    if (rt_.bench() != nullptr && !rt_.bench()->traces().empty()) {
        std::vector<const SlowTrace*> tr;
        for (const auto& p : rt_.bench()->traces())
            tr.push_back(p.get());
        r.slow_json = SlowTrace::to_json(tr, rt_.tsc_hz(), o.trace_slow_ns,
                                         plan_group(o.msg_size, stride_for_mtu(o.mtu)).pkt_count);
    }
    r.rx_lanes = rt_.rx_lanes();
    for (uint32_t i = 0; i < rt_.senders().size(); i++) {
        PathView pv[64];
        const uint32_t k = rt_.senders()[i]->path_views(pv, 64);
        for (uint32_t j = 0; j < k; j++)
            r.paths.push_back({i, pv[j]});
    }
    sum_engine_counters(r);
    sum_cycles(r, t.completed);
    merge_latency(r);
    // Rates over the time work was in flight: from the first session up (the
    // start, without sessions) to when the work was done, or the stop.
    const Runtime::Times w = rt_.times();
    const uint64_t begin = w.start ? w.start : w.launch;
    uint64_t end = w.end ? w.end : rte_rdtsc();
    if (w.work_end != 0 && w.work_end < end)
        end = w.work_end;
    r.elapsed_s = begin && end > begin ? double(end - begin) / double(rt_.tsc_hz()) : 0;
    if (r.elapsed_s > 0) {
        r.msgs_per_s = double(o.mode == Mode::Send ? r.messages_sent : r.messages_completed) / r.elapsed_s;
        r.mpps = double(o.mode == Mode::Recv ? r.packets_rx : r.packets_tx) / r.elapsed_s / 1e6;
        r.gbps = double(r.bytes_payload) * 8 / r.elapsed_s / 1e9;
    }
    r.exit_reason = rt_.exit_reason().empty() ? "stopped" : rt_.exit_reason();

    uint64_t sends = 0;
    for (const engine::SessionFlow* f : reg)
        sends += ctx_of(*f).sends_requested.load(std::memory_order_relaxed);
    add_flow_rows(r);
    add_session_rows(r);
    verdict(r, sends);
    return r;
}

// The ports' counts: the in-memory loopback's, the data ports together
// (--tx-port, then each rail; with rails each one's own too), the rx
// port's when it is another, and the checksums' offloads.
void RunSummary::ports(Results& r) const {
    rte_eth_stats st;
    if (rt_.local_port_id() >= 0 && rte_eth_stats_get(rt_.local_port_id(), &st) == 0)
        r.packets_local = st.opackets;
    const auto& rails = rt_.rails();
    for (size_t k = 0; rt_.tx_port() != nullptr && k <= rails.size(); k++) {
        const drivers::Port& p = k == 0 ? *rt_.tx_port() : *rails[k - 1];
        Results::Rail x;
        x.port = p.id();
        if (drivers::port_stats(p.id(), &st) == 0) {
            r.port_tx += st.opackets;
            r.port_rx += st.ipackets;
            r.port_missed += st.imissed;
            x.port_tx = st.opackets;
            x.port_rx = st.ipackets;
        }
        if (!rails.empty())
            r.rails.push_back(x);
    }
    for (const Sender* s : rt_.senders())
        r.rail_dropped += s->rail_dropped();
    if (rt_.rx_port() != nullptr && rt_.rx_port() != rt_.tx_port() && drivers::port_stats(rt_.rx_port()->id(), &st) == 0) {
        r.port_rx = st.ipackets;
        r.port_missed = st.imissed;
    }
    if (rt_.options().udp_checksum) {
        r.udp_checksum_tx = rt_.tx_port()->tx_udp_checksum() ? "offload" : "software";
        r.udp_checksum_rx = rt_.rx_port()->rx_udp_checksum() ? "offload" : "software";
    }
}

// The engines' counters, summed: the Senders', drops by reason, the
// generator's waits, the Receivers', the session table's, the service's,
// and the control packets.
void RunSummary::sum_engine_counters(Results& r) const {
    for (const Sender* s : rt_.senders()) {
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
    r.drops = rt_.drops();
    for (uint32_t i = 0; i < rt_.ntx(); i++)
        r.gen_buf_waits += peek(rt_.tx_for(i)->buf_waits);
    for (const Receiver* rc : rt_.receivers()) {
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
    if (const SessionTable* t = rt_.session_table(); t != nullptr) {
        const SessionCounters& sc = t->counters();
        r.sess.tx = sc.tx;
        r.sess.rx = sc.rx;
        r.sess.arp_tx = sc.arp_tx;
        r.sess.arp_rx = sc.arp_rx;
        r.sess.established = sc.established;
        r.sess.ended = sc.ended;
        r.sess.refused = sc.refused;
    }
    r.sess.ids_reused = rt_.ids_reused();
    if (rt_.service() != nullptr)
        r.svc = rt_.service()->counters();
    uint64_t ctl_tx = 0, ctl_rx = 0; // ACK/NACK packets (a local peer's go in memory)
    for (const Receiver* rc : rt_.receivers())
        ctl_tx += rc->counters().ctl_packets;
    for (const Sender* s : rt_.senders())
        ctl_rx += s->counters().ctl_packets;
    r.control_tx = ctl_tx + r.sess.tx + r.sess.arp_tx;
    r.control_rx = ctl_rx + r.sess.rx + r.sess.arp_rx;
    for (uint64_t d : r.drops)
        r.drops_total += d;
}

// Cycles per packet (tx, rx) and per message (consumer), and the DPDK
// heap in use.
void RunSummary::sum_cycles(Results& r, uint64_t completed) const {
    uint64_t cy_tx = 0, cy_rx = 0, cy_cons = 0;
    for (const LcoreCtx* l : rt_.lcores()) {
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
    if (completed)
        r.consumer_cycles_per_message = double(cy_cons) / double(completed);
    for (int sock = 0; sock < RTE_MAX_NUMA_NODES; sock++) {
        rte_malloc_socket_stats ms;
        if (rte_malloc_get_socket_stats(sock, &ms) == 0)
            r.memory_bytes += ms.heap_allocsz_bytes;
    }
}

// The run's latency: the consumers' histograms (send mode: the tx lcores'
// delivery latency) merged.
void RunSummary::merge_latency(Results& r) const {
    auto* h = static_cast<LatencyHist*>(rte_zmalloc("tm_hist", sizeof(LatencyHist), 64));
    if (h == nullptr)
        return;
    for (const ConsCtx* c : rt_.conss())
        h->merge(c->hist);
    for (uint32_t i = 0; i < rt_.ntx(); i++) // send mode: delivery latency
        h->merge(rt_.tx_for(i)->hist);
    const double ns = 1e9 / double(rt_.tsc_hz());
    r.latency_samples = h->samples();
    r.lat_p50_ns = double(h->quantile(0.50)) * ns;
    r.lat_p99_ns = double(h->quantile(0.99)) * ns;
    r.lat_p999_ns = double(h->quantile(0.999)) * ns;
    r.lat_max_ns = double(h->max()) * ns;
    rte_free(h);
}

// Each flow's row, the forgotten flows' failures, and the fastest
// session's congestion controller.
void RunSummary::add_flow_rows(Results& r) const {
    const double hz = double(rt_.tsc_hz());
    r.flows_failed = static_cast<uint32_t>(rt_.forgotten().flows_failed);
    r.messages_failed = rt_.forgotten().messages_failed;
    for (const engine::SessionFlow* sf : rt_.registry()) {
        const FlowCtx* f = &ctx_of(*sf);
        if (f->forgotten)
            continue;
        if (f->send != nullptr || f->detached || rt_.options().mode != Mode::Recv) {
            const Sender::FlowView v = rt_.send_view(*f);
            if (v.cc_rate_bps / 1e6 > r.cc.rate_mbps) { // the fastest session's controller
                r.cc.rate_mbps = v.cc_rate_bps / 1e6;
                r.cc.srtt_us = static_cast<double>(v.cc_srtt) * 1e6 / hz;
                r.cc.base_rtt_us = static_cast<double>(v.cc_base_rtt) * 1e6 / hz;
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
void RunSummary::add_session_rows(Results& r) const {
    for (const auto& a : rt_.app_sessions()) {
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
        ss.complete = app_of(*a).complete;
        for (const FlowCtx* f : app_of(*a).ctxs()) {
            ss.released += rt_.released_of(*f);
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
void RunSummary::verdict(Results& r, uint64_t sends) const {
    const Options& o = rt_.options();
    switch (o.mode) {
    case Mode::Loopback: // -i: the shell's `send` adds messages; every message sent is requested
        r.requested = o.messages && !o.interactive ? o.messages * o.flows + sends : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.messages_completed == r.requested &&
               (o.external_consumer || !o.verify || r.messages_verified == r.requested) && r.verify_errors == 0;
        break;
    case Mode::Recv:
        r.requested = o.messages * o.flows * o.sessions + sends;
        r.ok = r.verify_errors == 0 && (o.messages == 0 || rt_.bench()->sessions_complete() >= o.sessions);
        break;
    case Mode::Send:
        r.requested = o.messages && !o.interactive ? o.messages * o.flows + sends : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.tx_dropped == 0 && r.flows_failed == 0 &&
               (!o.flow_control || r.messages_acked == r.requested) && !rt_.refused_exit();
        break;
    case Mode::Service: // the applications' messages: each learnt its own outcome
        r.requested = r.messages_sent;
        r.ok = r.tx_dropped == 0;
        break;
    }
}

} // namespace tailmark::app
