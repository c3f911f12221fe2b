// --trace-slow-ns: the per-iteration records and their rendering.
#include "slow_trace.h"

#include <cinttypes>
#include <cstdio>

#include "run/context.h"

namespace tailmark::app {

void trace_iteration(LcoreCtx& l, const IterRecord& r) {
    uint64_t gen = 0, tx = 0, rx = 0, done = 0, acks = 0;
    if (l.tx != nullptr) {
        gen = l.tx->gen_msgs;
        for (const Sender* s : l.tx->senders)
            tx += s->pkts_tx();
        for (const ReplayQueue& q : l.tx->replay)
            if (q.q)
                tx += q.q->pkts_tx();
    }
    if (l.rx != nullptr) {
        rx = l.rx->pkts_rx;
        const ReceiverCounters& c = l.rx->receiver->counters();
        acks = c.acks_tx + c.nacks_tx;
    }
    if (l.cons != nullptr)
        done = l.cons->completed;
    l.trace->end_iter(r, gen, tx, rx, done, acks);
}

const char* SlowTrace::classify(const SlowMessage& m, uint64_t tsc_hz, uint32_t pkts_per_msg) {
    if (m.niters == 0)
        return "other";
    const uint64_t us5 = tsc_hz / 200000;
    // Only the iterations that can have delayed it: from the one its burst
    // arrived in (whose rx step began before rx_tsc... or the one before).
    for (unsigned i = 0; i < m.niters; i++) {
        const IterRecord& r = m.iters[i];
        if (r.end < m.rx_tsc)
            continue;
        const uint64_t len = r.end - r.start;
        if (len > us5 && r.rx_pkts <= pkts_per_msg && r.tx_pkts <= pkts_per_msg + 1 && r.cons_msgs <= 1)
            return "stall";
    }
    const IterRecord& last = m.iters[m.niters - 1];
    if (last.rx_pkts > pkts_per_msg)
        return "burst";
    if (m.nth > 0)
        return "queued";
    const uint64_t bound = m.seen_tsc > m.rx_tsc ? m.seen_tsc - m.rx_tsc : 0;
    if (last.tx_end - last.start > bound || last.rx_end - last.tx_end > bound || last.end - last.rx_end > bound)
        return "long_step";
    return "other";
}

std::string SlowTrace::to_json(const std::vector<const SlowTrace*>& traces, uint64_t tsc_hz, uint64_t bound_ns,
                               uint32_t pkts_per_msg) {
    const double ns = 1e9 / double(tsc_hz);
    auto rel = [&](uint64_t t, uint64_t base) { return (double(t) - double(base)) * ns; };
    uint64_t seen = 0;
    size_t kept = 0;
    for (const SlowTrace* t : traces) {
        seen += t->seen();
        kept += t->events().size();
    }
    std::string out;
    char buf[512];
    snprintf(buf, sizeof(buf), "{\"bound_ns\": %" PRIu64 ", \"seen\": %" PRIu64 ", \"kept\": %zu, \"messages\": [",
             bound_ns, seen, kept);
    out += buf;
    bool first = true;
    for (const SlowTrace* t : traces)
        for (const SlowMessage& m : t->events()) {
            snprintf(buf, sizeof(buf),
                     "%s\n    {\"flow\": %u, \"msg_id\": %u, \"latency_ns\": %.0f, \"nth\": %u, \"cause\": \"%s\", "
                     "\"iters\": [",
                     first ? "" : ",", m.flow, m.msg_id, rel(m.seen_tsc, m.rx_tsc), m.nth,
                     classify(m, tsc_hz, pkts_per_msg));
            out += buf;
            first = false;
            // Times in ns from the message's rx burst: when each iteration
            // began and how long each role's step took, and what it did.
            for (unsigned i = 0; i < m.niters; i++) {
                const IterRecord& r = m.iters[i];
                snprintf(buf, sizeof(buf),
                         "%s{\"start_ns\": %.0f, \"tx_ns\": %.0f, \"rx_ns\": %.0f, \"cons_ns\": %.0f, "
                         "\"tx_msgs\": %u, \"tx_pkts\": %u, \"rx_pkts\": %u, \"acks\": %u, \"cons_msgs\": %u}",
                         i ? ", " : "", rel(r.start, m.rx_tsc), double(r.tx_end - r.start) * ns,
                         double(r.rx_end - r.tx_end) * ns, double(r.end - r.rx_end) * ns, r.tx_msgs, r.tx_pkts,
                         r.rx_pkts, r.acks, r.cons_msgs);
                out += buf;
            }
            out += "]}";
        }
    out += "]}";
    return out;
}

} // namespace tailmark::app
