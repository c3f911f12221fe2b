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

// Registers the field (idempotent: DPDK keeps one field per name; after
// rte_eal_init, before traffic). Returns its offset, or -1 with rte_errno
// set. Set-up only: the offset is then held by whoever reads or writes the
// field (the callback's user_param, RxCtx, the Sender's and Receiver's
// configs), so no process-wide variable is read on the data path.
int rx_tsc_register();

inline uint64_t rx_tsc(const rte_mbuf* m, int offset) {
    return *RTE_MBUF_DYNFIELD(m, offset, const uint64_t*);
}
inline void set_rx_tsc(rte_mbuf* m, int offset, uint64_t tsc) {
    *RTE_MBUF_DYNFIELD(m, offset, uint64_t*) = tsc;
}

// The callback itself (user_param: the field's offset, as an intptr_t):
// one rte_rdtsc() per non-empty burst.
uint16_t rx_tsc_stamp_cb(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t nb_pkts,
                         uint16_t max_pkts, void* user_param);
inline void* rx_tsc_cb_param(int offset) { return reinterpret_cast<void*>(static_cast<intptr_t>(offset)); }

} // namespace tailmark::drivers
