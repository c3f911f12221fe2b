// The benchmark's own requests to its lcores (engine::Request's
// application ops), applied between two rounds: a flow's verifying
// consumer added to or taken from a consumer lcore, a flow's ready-made
// packets (--replay) added to a tx lcore. Nothing allocates: the vectors
// were reserved at set-up.
#include "bench/roles.h"

namespace tailmark::app {

void apply_bench_op(Request& r) {
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

} // namespace tailmark::app
