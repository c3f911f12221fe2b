// tx role: the engine's (lib/tailmark-engine, engine::poll_senders): each
// Sender this lcore owns (one per tx queue) polls: control intake, timers,
// retransmissions, others' control packets, new data, and hands its
// completions to the sink the application installed (TxRole::set_sink).
// The generator is the Senders' message source, an application like any
// other (bench/source.cc). --replay bypasses the Sender
// for data: ready-made packet groups, re-stamped and sent again once freed
// (bench/replay.h).
//
// Fast path: no heap allocation, no lock, no log.
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ring_elem.h>

#include "bench/replay.h"
#include "run/context.h"

namespace tailmark::app {

bool tx_step(TxCtx& c, uint64_t now) {
    uint64_t paced = 0;
    bool work = engine::poll_senders(c, now, paced); // inline: the engine's tx role
    for (ReplayQueue& rq : c.replay)
        work |= replay_queue(c, rq, now);
    c.paced_until = work ? 0 : paced;
    return work;
}

} // namespace tailmark::app
