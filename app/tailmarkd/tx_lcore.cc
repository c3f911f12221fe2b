// tx role: each Sender this lcore owns (one per tx queue) polls: control
// intake, timers, retransmissions, others' control packets, new data, and
// hands its completions on. The generator is the Senders' message source, an
// application like any other (bench/source.cc). --replay bypasses the Sender
// for data: ready-made packet groups, re-stamped and sent again once freed
// (bench/replay.h).
//
// Fast path: no heap allocation, no lock, no log.
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ring_elem.h>

#include "bench/replay.h"
#include "context.h"
#include "service/service.h"

namespace tailmark::app {

bool tx_step(TxCtx& c, uint64_t now) {
    c.turn = now;
    bool work = false;
    uint64_t paced = 0;
    for (Sender* s : c.senders) {
        work |= s->poll(now);
        const uint64_t p = s->paced_until();
        paced = p != 0 && (paced == 0 || p < paced) ? p : paced;
        SendCompletion done[32]; // the generator's flows report none; others' are counted
        const uint32_t k = s->take_completions(done, 32);
        if (k) {
            bump(c.completions, k);
            if (c.service) { // an application's: into its completion ring
                for (uint32_t i = 0; i < k; i++) {
                    svc_complete(done[i]);
                    if (i + 1 == k || done[i + 1].user != done[i].user) // the flow's last of the batch
                        svc_publish(done[i]);
                }
            } else if (c.delivery_latency) {
                const uint64_t t = rte_rdtsc();
                for (uint32_t i = 0; i < k; i++)
                    if (done[i].status == SendStatus::Delivered) {
                        const uint64_t lat = t > done[i].cookie ? t - done[i].cookie : 0;
                        c.hist.add(lat);
                        static_cast<GenFlow*>(done[i].user)->f->lat.add(lat);
                    }
            }
        }
    }
    for (ReplayQueue& rq : c.replay)
        work |= replay_queue(c, rq, now);
    c.paced_until = work ? 0 : paced;
    return work;
}

} // namespace tailmark::app
