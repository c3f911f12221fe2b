// The lcore loop: run to completion. One iteration runs each role this lcore
// holds once (tx, then rx, then consume), so one lcore may hold them all;
// dedicated lcores scale on bigger machines. Every iteration checks the
// phase, so Phase::Stop ends every loop within one burst.
#include <rte_pause.h>

#include "context.h"
#include "signals.h"

namespace tailmark::app {

std::atomic<int> g_phase{static_cast<int>(Phase::Run)};
DataPlaneConfig g_dp;

int lcore_main(void* arg) {
    const LcoreRoles& r = *static_cast<const LcoreRoles*>(arg);
    block_async_signals_on_lcore();
    LcoreCycles& cy = g_lcore_cycles[rte_lcore_id()];
    uint64_t prev = rte_rdtsc();
    while (phase() != Phase::Stop)
        run_roles_timed(r, cy, prev);
    return 0;
}

} // namespace tailmark::app
