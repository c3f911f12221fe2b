// The lcore loop: run to completion. One iteration applies the control
// plane's requests (rarely any), then runs each role this lcore holds once
// (tx, then rx, then consume), so one lcore may hold them all; dedicated
// lcores scale on bigger machines. Every iteration checks the phase, so
// Phase::Stop ends every loop within one burst.
#include <rte_branch_prediction.h>
#include <rte_pause.h>
#include <rte_ring_elem.h>

#include "context.h"
#include "signals.h"

namespace tailmark::app {

namespace {

void apply(LcoreCtx& l, Request& r) {
    switch (r.op) {
    case Request::Op::AddSend:
        r.ok = static_cast<Sender*>(r.engine)->install(static_cast<SendFlow*>(r.obj));
        break;
    case Request::Op::RemoveSend: {
        SendFlow* f = static_cast<Sender*>(r.engine)->remove(r.id);
        r.ok = f != nullptr;
        r.obj = f;
        break;
    }
    case Request::Op::FailSend: // what the peer said before it ended is heard first
        static_cast<Sender*>(r.engine)->hear_all(rte_rdtsc());
        static_cast<Sender*>(r.engine)->fail(r.id, r.why);
        r.ok = true;
        break;
    case Request::Op::FailLink:
        static_cast<Sender*>(r.engine)->hear_all(rte_rdtsc());
        static_cast<Sender*>(r.engine)->fail_link(static_cast<const SessionLink*>(r.obj), r.why);
        r.ok = true;
        break;
    case Request::Op::AddRecv:
    case Request::Op::MoveRecvIn:
        r.ok = static_cast<Receiver*>(r.engine)->install(static_cast<RecvFlow*>(r.obj));
        break;
    case Request::Op::RemoveRecv:
    case Request::Op::MoveRecvOut: {
        RecvFlow* f = static_cast<Receiver*>(r.engine)->remove(r.id);
        r.ok = f != nullptr;
        r.obj = f;
        break;
    }
    case Request::Op::AddCons: {
        auto* c = static_cast<ConsCtx*>(r.engine);
        r.ok = c->flows.size() < c->flows.capacity();
        if (r.ok)
            c->flows.push_back(static_cast<ConsFlow*>(r.obj)); // reserved: no allocation
        break;
    }
    case Request::Op::RemoveCons: {
        auto* c = static_cast<ConsCtx*>(r.engine);
        r.ok = false;
        for (size_t i = 0; i < c->flows.size(); i++)
            if (c->flows[i] == r.obj) {
                c->flows[i] = c->flows.back();
                c->flows.pop_back();
                r.ok = true;
                break;
            }
        break;
    }
    case Request::Op::AddReplay: {
        auto* t = static_cast<TxCtx*>(r.engine);
        r.ok = r.id < t->replay.size() && t->replay[r.id].flows.size() < t->replay[r.id].flows.capacity();
        if (r.ok)
            t->replay[r.id].flows.push_back(*static_cast<ReplayFlow*>(r.obj)); // reserved
        break;
    }
    }
    (void)l;
}

} // namespace

bool serve_requests(LcoreCtx& l) {
    if (likely(rte_ring_empty(l.req)))
        return false;
    Request r;
    while (rte_ring_sc_dequeue_elem(l.req, &r, sizeof(r)) == 0) {
        apply(l, r);
        // The response ring holds as many as the request ring: never full.
        rte_ring_sp_enqueue_elem(l.resp, &r, sizeof(r));
    }
    return true;
}

int lcore_main(void* arg) {
    LcoreCtx& l = *static_cast<LcoreCtx*>(arg);
    block_async_signals_on_lcore();
    uint64_t prev = rte_rdtsc();
    while (l.plane->phase_now() != Phase::Stop) {
        serve_requests(l);
        run_roles_timed(l, prev);
    }
    return 0;
}

} // namespace tailmark::app
