// The benchmark's verifying consumers (bench.h): a role per
// --consumer-lcores lcore, which polls its flows' completion rings and
// checks every byte against the generator (consumer.cc), and each receive
// flow's state on one of them. The daemon posts it with the flow's receive
// side, and takes it back at the flow's end (Runtime::post_recv, detach).
#include "bench/bench.h"

#include <string>

#include <rte_malloc.h>

#include "bench/generator.h"
#include "run/runtime.h"

namespace tailmark::app {

bool Bench::make_consumers(const std::vector<unsigned>& lcores, SetupError& e) {
    for (unsigned lcore : lcores) {
        auto* c = socket_new<ConsCtx>(rt_.rx_socket());
        LcoreCtx* l = c != nullptr ? rt_.lcore_ctx(lcore) : nullptr;
        if (l == nullptr) {
            socket_delete(c);
            e = {1, "out of memory: consumer context (raise EAL -m)"};
            return false;
        }
        conss_.push_back(c);
        c->plane = &rt_.plane();
        c->lcore = lcore;
        c->hist.clear();
        c->flows.reserve(16384); // adding a flow on the lcore never allocates
        l->cons = c;
        if (opt_.trace_slow_ns != 0) { // the consumer's lcore records its iterations
            traces_.push_back(std::make_unique<SlowTrace>(opt_.trace_slow_ns * rt_.tsc_hz() / 1000000000, 4096));
            c->trace = l->trace = traces_.back().get();
        }
    }
    return true;
}

// Flow f's consumer state, on the consumers in turn: where it starts, its
// per-packet slots (packet mode), and with --replay or --payload fixed the
// bytes every message carries, compared in place.
bool Bench::attach_consumer(FlowCtx& f, const Session& s, std::string& err) {
    if (conss_.empty())
        return true; // --consumer-lcores none, or send mode
    ConsCtx* c = conss_[f.index % conss_.size()];
    auto* cf = socket_new<ConsFlow>(rt_.rx_socket());
    if (cf == nullptr) {
        err = "out of memory: consumer state";
        return false;
    }
    cf->f = &f;
    cf->ring = f.ring.get();
    cf->pkt_cq = f.pkt_cq;
    cf->next = f.ring->released();
    if (f.pkt_cq != nullptr) {
        cf->slots = static_cast<PktSlot*>(
            rte_zmalloc_socket("tm_pkt_slots", sizeof(PktSlot) * s.params.ring_size, 64, rt_.rx_socket()));
        if (cf->slots == nullptr) {
            socket_delete(cf);
            err = "out of memory: packet mode slots";
            return false;
        }
    }
    if (opt_.replay || opt_.fixed_payload) {
        cf->expect_len = ConsFlow::kExpectMax;
        cf->expect = static_cast<uint8_t*>(rte_malloc_socket("tm_expect", cf->expect_len, 64, rt_.rx_socket()));
        if (cf->expect == nullptr) {
            socket_delete(cf);
            err = "out of memory: consumer state";
            return false;
        }
        generate(f.gen_id, 0, cf->expect, cf->expect_len);
    }
    f.cons_ctx = c;
    f.cons = cf;
    return true;
}

// The consumer's part of each receive half (engine::SessionHooks): made
// with it, posted to its lcore with it as the daemon's own op (kAddCons),
// taken back at its end (kRemoveCons) and freed with it.
void Bench::consumer_hooks(engine::SessionHooks& h) {
    h.recv_made = [this, made = std::move(h.recv_made)](engine::SessionFlow& sf, engine::SessionRec& a,
                                                         const Session& s, std::string& err) {
        return (!made || made(sf, a, s, err)) && attach_consumer(ctx_of(sf), s, err);
    };
    h.recv_posted = [this](engine::SessionFlow& sf, engine::SessionRec& a) -> uint32_t {
        FlowCtx& f = ctx_of(sf);
        if (f.cons == nullptr)
            return 0;
        rt_.post(f.cons_ctx->lcore, {kAddCons, false, FailReason::None, f.recv_id, f.index, f.cons_ctx, f.cons, &a});
        return 1;
    };
    h.recv_closing = [this](engine::SessionFlow& sf, engine::SessionRec& a, FailReason why) -> uint32_t {
        FlowCtx& f = ctx_of(sf);
        if (f.cons == nullptr)
            return 0;
        rt_.post(f.cons_ctx->lcore, {kRemoveCons, false, why, f.recv_id, f.index, f.cons_ctx, f.cons, &a});
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
}

} // namespace tailmark::app
