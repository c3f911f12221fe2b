// The daemon's part of each session's flow (engine::Sessions' hooks): the
// benchmark's verifying consumer, made with the receive half, posted with
// it as the daemon's own op (kAddCons), taken back at its end (kRemoveCons)
// and freed with it; the flow records, the daemon's type; the registry's
// slots and the forgotten flows' counts (registry.cc); each session's
// stage as its answers come in.
#include "runtime.h"

#include "bench/bench.h"
#include "service/service.h"

namespace tailmark::app {

engine::SessionHooks Runtime::hooks() {
    engine::SessionHooks h;
    h.recv_made = [this](engine::SessionFlow& sf, engine::SessionRec&, const Session& s, std::string& err) {
        FlowCtx& f = ctx_of(sf);
        f.consumed.store(f.ring->released(), std::memory_order_relaxed);
        return bench_ == nullptr || bench_->attach_consumer(f, s, err); // the verifying consumer's part
    };
    h.recv_posted = [this](engine::SessionFlow& sf, engine::SessionRec& a) -> uint32_t {
        FlowCtx& f = ctx_of(sf);
        if (f.cons == nullptr)
            return 0;
        post(f.cons_ctx->lcore, {kAddCons, false, FailReason::None, f.recv_id, f.index, f.cons_ctx, f.cons, &a});
        return 1;
    };
    h.recv_closing = [this](engine::SessionFlow& sf, engine::SessionRec& a, FailReason why) -> uint32_t {
        FlowCtx& f = ctx_of(sf);
        if (f.cons == nullptr)
            return 0;
        post(f.cons_ctx->lcore, {kRemoveCons, false, why, f.recv_id, f.index, f.cons_ctx, f.cons, &a});
        return 1;
    };
    h.ends_recv = [](const Request& r) { return r.op == kRemoveCons; };
    // The consumer let go: its counts kept for the summary, its state freed
    // a second later (the shell and telemetry may be reading it).
    h.recv_released = [](engine::SessionFlow& sf, engine::DeferredFree& later, uint64_t now) {
        FlowCtx& f = ctx_of(sf);
        ConsFlow* cf = f.cons;
        if (cf == nullptr)
            return;
        f.cons_completed = cf->completed;
        f.cons_verified = cf->verified;
        f.cons_errors = cf->verify_errors;
        f.cons = nullptr;
        later.later(now, [cf] { socket_delete(cf); });
    };
    h.recv_freed = [](engine::SessionFlow& sf) {
        FlowCtx& f = ctx_of(sf);
        socket_delete(f.cons);
        f.cons = nullptr;
    };
    h.holds = [](const engine::SessionFlow& f) { return ctx_of(f).cons != nullptr; };
    h.settled = [this](engine::SessionRec& a, bool installed, uint64_t now) {
        if (installed && start_tsc_ == 0 && (a.connector || opt_.mode == Mode::Recv))
            start_tsc_ = now; // the work starts with the first session up
        if (service_ && a.user != nullptr)
            service_->on_stage(app_of(a), now);
    };
    h.free_flow = [](engine::SessionFlow* f) { socket_delete(static_cast<FlowCtx*>(f)); };
    h.slot_taken = [this](uint32_t i) { slot_taken(i); };
    h.forgetting = [this](engine::SessionFlow& f) { forgetting(ctx_of(f)); };
    return h;
}

} // namespace tailmark::app
