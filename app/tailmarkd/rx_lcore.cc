// rx role. Loopback and recv mode: rx burst, then RxPlacer::rx_burst, which
// validates, places, completes and frees; the placer's gap scan NACKs what is
// missing. Send mode: the receiver's ACKs and NACKs (tailmark/control.h).
//
// The burst's rx TSC comes from the rx callback's dynamic field (the same
// value for every packet of a burst), so completion latency starts when the
// packet left the PMD, not when the placer got to it.
#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "context.h"
#include "drivers/rx_timestamp.h"

namespace tailmark::app {

namespace {

bool rx_place(RxCtx& c) {
    rte_mbuf* pkts[kMaxBurst];
    const uint16_t n = rte_eth_rx_burst(c.port, c.queue, pkts, static_cast<uint16_t>(dp_burst()));
    if (n == 0) {
        c.placer->poll(rte_rdtsc());
        return false;
    }
    bump(c.pkts_rx, n);
    const uint64_t tsc = drivers::rx_tsc(pkts[0]);
    c.placer->rx_burst(pkts, n, tsc); // frees the burst
    c.placer->poll(tsc);
    return true;
}

// Moves an atomic cursor forward only (serial arithmetic); several rx lcores
// may update one flow.
inline void advance_to(std::atomic<uint32_t>& a, uint32_t v) {
    uint32_t cur = a.load(std::memory_order_relaxed);
    while (static_cast<int32_t>(v - cur) > 0 &&
           !a.compare_exchange_weak(cur, v, std::memory_order_release, std::memory_order_relaxed)) {
    }
}

// Send mode: one control packet of flow f. The body's CRC was checked.
DropReason on_control(RxCtx& c, FlowCtx& f, const Control& ctl, uint64_t now) {
    if (failed(f))
        return DropReason::FlowFailed;
    uint32_t ep = f.epoch.load(std::memory_order_acquire);
    if (ep == 0 && f.epoch.compare_exchange_strong(ep, ctl.epoch, std::memory_order_acq_rel))
        ep = ctl.epoch;
    if (ep != ctl.epoch) {
        // A new receiver: what the old one had not released is gone with it.
        fail(f, FlowFailure::ReceiverRestarted);
        return DropReason::FlowFailed;
    }
    // Nothing beyond what was sent can be acknowledged, released beyond
    // completed: such a packet is no receiver's of ours.
    const uint32_t sent = f.sent.load(std::memory_order_acquire);
    if (static_cast<int32_t>(ctl.acked_upto - sent) > 0 ||
        static_cast<int32_t>(ctl.released_upto - ctl.acked_upto) > 0)
        return DropReason::ControlMalformed;
    advance_to(f.credit, ctl.released_upto);
    advance_to(f.acked, ctl.acked_upto);
    f.last_ctl.store(now, std::memory_order_relaxed);
    if (f.peer_seen.load(std::memory_order_relaxed) == 0)
        f.peer_seen.store(1, std::memory_order_release);
    if (ctl.nack) {
        Nack n = ctl.n;
        if (rte_ring_enqueue_elem(f.nack_q, &n, sizeof(Nack)) != 0)
            return DropReason::NackQueueFull;
        bump(c.nacks_rx);
    } else {
        bump(c.acks_rx);
    }
    return DropReason::None;
}

bool rx_control(RxCtx& c) {
    rte_mbuf* pkts[kMaxBurst];
    const uint16_t n = rte_eth_rx_burst(c.port, c.queue, pkts, static_cast<uint16_t>(dp_burst()));
    if (n == 0)
        return false;
    bump(c.pkts_rx, n);
    const uint64_t now = rte_rdtsc();
    for (uint16_t i = 0; i < n; i++) {
        ParsedPacket p;
        DropReason r = parse_packet(pkts[i], c.pcfg, p);
        if (likely(r == DropReason::None)) {
            if (!p.is_control() || p.hdr.flow >= g_dp.nflows) {
                r = DropReason::UnknownFlow; // a data packet at a sender has no receive context
            } else {
                Control ctl;
                r = parse_control(pkts[i], p, ctl);
                if (r == DropReason::None)
                    r = on_control(c, g_dp.flows[p.hdr.flow], ctl, now);
            }
        }
        if (r != DropReason::None)
            bump(c.drops[index(r)]);
    }
    rte_pktmbuf_free_bulk(pkts, n);
    return true;
}

} // namespace

bool rx_step(RxCtx& c) {
    return g_dp.mode == Mode::Send ? rx_control(c) : rx_place(c);
}

} // namespace tailmark::app
