#include "drivers/rx_timestamp.h"

#include <rte_cycles.h>
#include <rte_errno.h>

namespace tailmark::drivers {

int rx_tsc_register() {
    rte_mbuf_dynfield desc{};
    snprintf(desc.name, sizeof(desc.name), "%s", kRxTscDynfieldName); // set-up only
    desc.size = sizeof(uint64_t);
    desc.align = alignof(uint64_t);
    desc.flags = 0;
    return rte_mbuf_dynfield_register(&desc); // the same offset again once registered
}

uint16_t rx_tsc_stamp_cb(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t nb_pkts, uint16_t, void* user_param) {
    if (nb_pkts == 0)
        return 0;
    const int offset = static_cast<int>(reinterpret_cast<intptr_t>(user_param));
    const uint64_t now = rte_rdtsc();
    for (uint16_t i = 0; i < nb_pkts; i++)
        set_rx_tsc(pkts[i], offset, now);
    return nb_pkts;
}

} // namespace tailmark::drivers
