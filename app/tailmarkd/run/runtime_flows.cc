// The daemon's part of each session's flow (engine::Sessions' hooks): its
// consumed count from the ring; the benchmark's verifying consumer
// (Bench::consumer_hooks); the flow records, the daemon's type; the
// registry's slots and the forgotten flows' counts (registry.cc); each
// session's stage as its answers come in.
#include "runtime.h"

#include "bench/bench.h"
#include "service/service.h"

namespace tailmark::app {

engine::SessionHooks Runtime::hooks() {
    engine::SessionHooks h;
    h.recv_made = [](engine::SessionFlow& sf, engine::SessionRec&, const Session&, std::string&) {
        FlowCtx& f = ctx_of(sf);
        f.consumed.store(f.ring->released(), std::memory_order_relaxed);
        return true;
    };
    if (bench_) // the verifying consumer's part of each receive half
        bench_->consumer_hooks(h);
    h.settled = [this](engine::SessionRec& a, bool installed, uint64_t now) {
        if (installed && start_tsc_ == 0 && (a.connector || opt_.mode == Mode::Recv))
            start_tsc_ = now; // the work starts with the first session up
        if (service_ && a.user != nullptr)
            service_->on_stage(app_of(a), now);
    };
    h.free_flow = [](engine::SessionFlow* f) { socket_delete(static_cast<FlowCtx*>(f)); };
    h.slot_taken = [this](uint32_t i) { watch_.slot_taken(i); }; // what FlowWatch kept for the slot starts over
    h.forgetting = [this](engine::SessionFlow& f) { forgetting(ctx_of(f)); };
    return h;
}

} // namespace tailmark::app
