// The daemon's lcores: the engine's loop (lib/tailmark-engine,
// engine::run_lcore) over the daemon's roles (LcoreCtx: tx with the
// generator and --replay, the engine's rx, the verifying consumer), and the
// daemon's own requests (its consumer's and the replay's flows).
#include <rte_branch_prediction.h>
#include <rte_pause.h>

#include "context.h"
#include "signals.h"

namespace tailmark::app {

namespace {

// The daemon's own requests: its consumer's flows, the replay's.
void apply_app(Request& r) {
    if (r.op == kAddCons) {
        auto* c = static_cast<ConsCtx*>(r.engine);
        r.ok = c->flows.size() < c->flows.capacity();
        if (r.ok)
            c->flows.push_back(static_cast<ConsFlow*>(r.obj)); // reserved: no allocation
    } else if (r.op == kRemoveCons) {
        auto* c = static_cast<ConsCtx*>(r.engine);
        r.ok = false;
        for (size_t i = 0; i < c->flows.size(); i++)
            if (c->flows[i] == r.obj) {
                c->flows[i] = c->flows.back();
                c->flows.pop_back();
                r.ok = true;
                break;
            }
    } else if (r.op == kAddReplay) {
        auto* t = static_cast<TxCtx*>(r.engine);
        r.ok = r.id < t->replay.size() && t->replay[r.id].flows.size() < t->replay[r.id].flows.capacity();
        if (r.ok)
            t->replay[r.id].flows.push_back(*static_cast<ReplayFlow*>(r.obj)); // reserved
    } else {
        r.ok = false;
    }
}

} // namespace

bool serve_requests(LcoreCtx& l) {
    return engine::serve_requests(l.req, l.resp, apply_app);
}

int lcore_main(void* arg) {
    LcoreCtx& l = *static_cast<LcoreCtx*>(arg);
    block_async_signals_on_lcore();
    return engine::run_lcore(l, apply_app);
}

} // namespace tailmark::app
