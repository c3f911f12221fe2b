// rx role: rx burst (the port's queue, and the in-memory loopback's when it
// has one), then Receiver::rx_burst, which validates, places, completes and
// frees data, and routes ACK/NACK, SESSION and ARP frames to their owners;
// Receiver::poll NACKs what is missing and ACKs what moved.
//
// The burst's rx TSC comes from the rx callback's dynamic field (the same
// value for every packet of a burst), so completion latency starts when the
// packet left the PMD, not when the placer got to it.
//
// Fast path: no heap allocation, no lock, no log.
#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "drivers/rx_timestamp.h"
#include "tailmark/engine/lcore.h"

namespace tailmark::engine {

bool rx_step(RxCtx& c, uint64_t now) {
    rte_mbuf* pkts[kMaxBurst];
    const auto burst = static_cast<uint16_t>(c.plane->burst_now());
    uint16_t n = rte_eth_rx_burst(c.port, c.queue, pkts, burst);
    if (n != 0) {
        bump(c.pkts_rx, n);
        now = drivers::rx_tsc(pkts[0]);
        c.receiver->rx_burst(pkts, n, now); // frees or routes the burst
    }
    // Sessions between applications of this process: their frames come over
    // the in-memory loopback, placed by the same Receiver as the wire's.
    if (c.local_port != kNoPort) {
        const uint16_t k = rte_eth_rx_burst(c.local_port, c.local_queue, pkts, burst);
        if (k != 0) {
            bump(c.pkts_rx, k);
            now = drivers::rx_tsc(pkts[0]);
            c.receiver->rx_burst(pkts, k, now);
            n += k;
        }
    }
    c.receiver->poll(now);
    return n != 0;
}

} // namespace tailmark::engine
