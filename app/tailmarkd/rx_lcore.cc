// rx role. Loopback and recv mode: rx burst, then RxPlacer::rx_burst, which
// validates, places, completes and frees. Send mode: the credit ACKs coming
// back from the receiver.
//
// The burst's rx TSC comes from the rx callback's dynamic field (the same
// value for every packet of a burst), so completion latency starts when the
// packet left the PMD, not when the placer got to it.
#include <rte_branch_prediction.h>
#include <rte_ethdev.h>

#include "ack.h"
#include "context.h"
#include "drivers/rx_timestamp.h"

namespace tailmark::app {

namespace {

bool rx_place(RxCtx& c) {
    rte_mbuf* pkts[kMaxBurst];
    const uint16_t n = rte_eth_rx_burst(c.port, c.queue, pkts, static_cast<uint16_t>(dp_burst()));
    if (n == 0)
        return false;
    bump(c.pkts_rx, n);
    const uint64_t tsc = drivers::rx_tsc(pkts[0]);
    c.placer->rx_burst(pkts, n, tsc); // frees the burst
    return true;
}

// Send mode: credits. released_upto only moves forward (serial arithmetic);
// several rx lcores may update one flow, hence the CAS.
bool rx_acks(RxCtx& c) {
    rte_mbuf* pkts[kMaxBurst];
    const uint16_t n = rte_eth_rx_burst(c.port, c.queue, pkts, static_cast<uint16_t>(dp_burst()));
    if (n == 0)
        return false;
    bump(c.pkts_rx, n);
    for (uint16_t i = 0; i < n; i++) {
        ParsedPacket p;
        DropReason r = parse_packet(pkts[i], c.pcfg, p);
        if (likely(r == DropReason::None)) {
            uint32_t upto;
            if (p.is_control() && p.hdr.flow < g_dp.nflows && read_ack(pkts[i], p, upto)) {
                FlowCtx& f = g_dp.flows[p.hdr.flow];
                uint32_t cur = f.credit.load(std::memory_order_relaxed);
                while (static_cast<int32_t>(upto - cur) > 0 &&
                       !f.credit.compare_exchange_weak(cur, upto, std::memory_order_release,
                                                       std::memory_order_relaxed)) {
                }
                if (f.peer_seen.load(std::memory_order_relaxed) == 0)
                    f.peer_seen.store(1, std::memory_order_release);
                bump(c.acks_rx);
                continue;
            }
            // A data packet at a sender has no receive context; an unknown
            // control packet has no handler yet.
            r = p.is_control() ? DropReason::Control : DropReason::UnknownFlow;
        }
        bump(c.drops[index(r)]);
    }
    rte_pktmbuf_free_bulk(pkts, n);
    return true;
}

} // namespace

bool rx_step(RxCtx& c) {
    return g_dp.mode == Mode::Send ? rx_acks(c) : rx_place(c);
}

} // namespace tailmark::app
