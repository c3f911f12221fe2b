// The rx TSC stamp: an rx callback (rte_eth_add_rx_callback) writes the TSC of
// the rx burst into an mbuf dynamic field of every packet it returns.
// Completion latency = TSC when the consumer sees the flag minus the rx TSC of
// the packet that completed the message.
#pragma once

#include <cstdint>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

namespace tailmark::drivers {

inline constexpr const char* kRxTscDynfieldName = "tailmark_rx_tsc";

// Offset of the dynamic field; -1 until rx_tsc_register() succeeded.
extern int g_rx_tsc_offset;

// Registers the field (idempotent; after rte_eal_init, before traffic).
// Returns the offset, or -1 with rte_errno set.
int rx_tsc_register();

inline uint64_t rx_tsc(const rte_mbuf* m) {
    return *RTE_MBUF_DYNFIELD(m, g_rx_tsc_offset, const uint64_t*);
}
inline void set_rx_tsc(rte_mbuf* m, uint64_t tsc) {
    *RTE_MBUF_DYNFIELD(m, g_rx_tsc_offset, uint64_t*) = tsc;
}

// The callback itself (user_param unused): one rte_rdtsc() per non-empty burst.
uint16_t rx_tsc_stamp_cb(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t nb_pkts,
                         uint16_t max_pkts, void* user_param);

} // namespace tailmark::drivers
