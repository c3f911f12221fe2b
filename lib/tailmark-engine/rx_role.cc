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
    // What this burst returns came after the last poll that left the queue
    // empty. When that was longer ago than the lcore's turns take (it was
    // descheduled, or asleep past its nap), the frames may have waited here
    // all that while: that poll is the floor of their arrival (the PMD gives
    // no rx timestamp), for the ACKs' hold and the Sender's reading of them
    // (Receiver::rx_burst). Not on every turn: a floor is the wait's upper
    // bound, and on both ends at every turn (50 us naps) it hid a 100 Mbit/s
    // queue (tests/integration/congestion.sh case 1a: 20-32% goodput).
    const uint64_t since = c.drained != 0 && now - c.drained > c.away ? c.drained : 0;
    uint16_t n = rte_eth_rx_burst(c.port, c.queue, pkts, burst);
    if (n < burst)
        c.drained = now;
    if (n != 0) {
        bump(c.pkts_rx, n);
        if (c.rx_tsc_field >= 0)
            now = drivers::rx_tsc(pkts[0], c.rx_tsc_field);
        c.receiver->rx_burst(pkts, n, now, since); // frees or routes the burst
    }
    // The other rails: a session's packets come by any of them.
    for (uint32_t r = 0; r < c.rails; r++) {
        const uint16_t k = rte_eth_rx_burst(c.rail_ports[r], c.queue, pkts, burst);
        if (k != 0) {
            bump(c.pkts_rx, k);
            c.receiver->rx_burst(pkts, k, c.rx_tsc_field >= 0 ? drivers::rx_tsc(pkts[0], c.rx_tsc_field) : now);
            n += k;
        }
    }
    // Sessions between applications of this process: their frames come over
    // the in-memory loopback, placed by the same Receiver as the wire's.
    if (c.local_port != kNoPort) {
        const uint16_t k = rte_eth_rx_burst(c.local_port, c.local_queue, pkts, burst);
        if (k != 0) {
            bump(c.pkts_rx, k);
            if (c.rx_tsc_field >= 0)
                now = drivers::rx_tsc(pkts[0], c.rx_tsc_field);
            c.receiver->rx_loopback_burst(pkts, k, now);
            n += k;
        }
    }
    c.receiver->poll(now);
    return n != 0;
}

} // namespace tailmark::engine
