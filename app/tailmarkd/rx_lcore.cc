// rx role: rx burst, then Receiver::rx_burst, which validates, places,
// completes and frees data, and routes ACK/NACK, SESSION and ARP frames to
// their owners; Receiver::poll NACKs what is missing and ACKs what moved.
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

bool rx_step(RxCtx& c, uint64_t now) {
    rte_mbuf* pkts[kMaxBurst];
    const uint16_t n = rte_eth_rx_burst(c.port, c.queue, pkts, static_cast<uint16_t>(c.plane->burst_now()));
    if (n == 0) {
        c.receiver->poll(now);
        return false;
    }
    bump(c.pkts_rx, n);
    const uint64_t tsc = drivers::rx_tsc(pkts[0]);
    c.receiver->rx_burst(pkts, n, tsc); // frees or routes the burst
    c.receiver->poll(tsc);
    return true;
}

} // namespace tailmark::app
