// Sessions as the control loop sees them: their news handed to the service
// or the benchmark (whose flows engine::Sessions opens and takes back), and
// the daemon's own ops to its lcores.
#include "runtime.h"

#include <rte_cycles.h>
#include <rte_ring_elem.h>

#include "bench/bench.h"
#include "service/service.h"
#include "tailmark/log.h"

namespace tailmark::app {

bool Runtime::serve_before_launch() {
    for (LcoreCtx* l : lcores_)
        if (l != nullptr)
            serve_requests(*l);
    bool ok = true;
    for (LcoreCtx* l : lcores_) {
        Request r;
        while (l != nullptr && rte_ring_sc_dequeue_elem(l->resp, &r, sizeof(r)) == 0)
            ok = ok && r.ok;
    }
    return ok;
}

void Runtime::post(unsigned lcore, const Request& r) {
    // Sized for every flow of several sessions at once; a full ring is a
    // bug of ours, not a condition to wait out on the control thread.
    if (!eng().post_app(lcore, r))
        TM_LOG(ERR, app, "lcore %u: request ring full; request %d for flow %u lost", lcore, static_cast<int>(r.op),
               r.index);
}

// The session table's news: a session is up, or it ended; the
// application's (service/) or the benchmark's (bench/). Never forget()
// here: the table is still using the session.
void Runtime::on_session(Session& s) {
    const uint64_t now = rte_rdtsc();
    if (service_) // every session is an application's
        service_->on_session(s, now);
    else if (bench_)
        bench_->on_session(s, now);
}

} // namespace tailmark::app
