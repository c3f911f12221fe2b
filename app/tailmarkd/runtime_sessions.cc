// Sessions as the control loop sees them: their news handed to the service
// or the benchmark, their flows taken back at their end, and the daemon's
// part of the engine's answers.
#include "runtime.h"

#include <rte_cycles.h>
#include <rte_ring_elem.h>

#include "bench/bench.h"
#include "service/service.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

FailReason fail_reason(SessionEnd e) {
    switch (e) {
    case SessionEnd::PeerReset: return FailReason::ReceiverRestarted;
    case SessionEnd::PeerTimeout: return FailReason::PeerTimeout;
    case SessionEnd::Refused:
    case SessionEnd::BadAccept: return FailReason::Refused;
    default: return FailReason::Closed;
    }
}

} // namespace

// --- sessions -------------------------------------------------------------------

AppSession* Runtime::app_session(uint16_t sid) {
    for (auto& a : app_sessions_)
        if (a->s != nullptr && a->id == sid)
            return a.get();
    return nullptr;
}

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
    if (!engine_->post_app(lcore, r))
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

// Takes a session's flows back from the lcores: a sender's are failed first
// (whatever they still owed is reported failed), then removed; a receiver's
// removed from the Receiver and the consumer. Freed as the answers come.
void Runtime::detach(AppSession& a, uint64_t now) {
    if (a.stage == AppSession::Stage::Detaching || a.stage == AppSession::Stage::Gone)
        return;
    a.stage = AppSession::Stage::Detaching;
    const FailReason why = fail_reason(a.end);
    for (FlowCtx* f : a.flows) {
        // The engine fails a send flow first (what it owed is reported),
        // and removes a receive flow once a move under way is over.
        if (a.connector && f->send_session == &a && f->send != nullptr && engine_->close_send(f->send_id, why))
            a.pending += 2; // FailSend, RemoveSend
        // A receive side its Receiver refused at install has no recv, but
        // its ring (and consumer) are let go all the same.
        if (a.connector || f->recv_session != &a || (f->recv == nullptr && !f->ring))
            continue;
        if (f->recv != nullptr && engine_->close_recv(f->recv_id)) {
            f->detach_pending++;
            a.pending++;
        }
        if (f->cons != nullptr) {
            post(f->cons_ctx->lcore, {kRemoveCons, false, why, f->recv_id, f->index, f->cons_ctx, f->cons, &a});
            f->detach_pending++;
            a.pending++;
        }
        if (f->detach_pending == 0)
            release_recv(*f, now);
    }
    if (a.pending == 0)
        a.stage = AppSession::Stage::Gone;
}

// Neither the Receiver nor the consumer holds a flow's ring any more: its
// last cursors kept for the summary, the ring, its per-packet ring and the
// consumer's state freed a second later, its id back with them.
void Runtime::release_recv(FlowCtx& f, uint64_t now) {
    f.last_released = f.ring ? f.ring->released() : f.last_released;
    f.last_gave_up = f.ring ? f.ring->gave_up() : f.last_gave_up;
    ConsFlow* cf = f.cons;
    if (cf != nullptr) {
        f.cons_completed = cf->completed;
        f.cons_verified = cf->verified;
        f.cons_errors = cf->verify_errors;
        f.cons = nullptr;
    }
    rte_ring* cq = f.pkt_cq;
    f.pkt_cq = nullptr;
    CompletionRing* ring = f.ring.release();
    f.ring_gone = true;
    f.detached = true;
    const uint16_t id = f.recv_id;
    // Other threads (the shell, telemetry) may still be reading these:
    // freed a second later. The id goes back with its memzone's name.
    later(now, [this, cf, cq, ring, id] {
        socket_delete(cf);
        rte_ring_free(cq);
        delete ring;
        recv_ids_.release(id, 1, rte_rdtsc());
    });
}

void Runtime::on_answer(const Request& r, uint64_t now) {
    FlowCtx* f = r.index < flows_.size() ? flows_[r.index] : nullptr;
    auto* a = static_cast<AppSession*>(r.session);
    switch (r.op) {
    case Request::Op::AddSend:
        if (!r.ok && f != nullptr) { // refused (the id taken, the table full): the engine freed it
            TM_LOG(ERR, app, "flow %u: its Sender refused it", r.index);
            f->send = nullptr;
        }
        break;
    case Request::Op::RemoveSend: { // out (the engine frees it a second later)
        f->last_send = Sender::view(static_cast<const SendFlow*>(r.obj));
        f->detached = true;
        f->send = nullptr;
        const uint16_t id = f->send_id;
        later(now, [this, id] { send_ids_.release(id, 1, rte_rdtsc()); });
        break;
    }
    case Request::Op::AddRecv:
        if (!r.ok) // a Receiver full (RxPlacer::kMaxFlows) or the id taken: no data of it is placed
            TM_LOG(ERR, app, "flow %u: rx lcore %u refused it; its data is dropped (unknown flow)", r.index,
                   f != nullptr ? f->recv_lcore : 0);
        break;
    case Request::Op::RemoveRecv: { // out; r.obj freed a second later
        if (!r.ok)
            TM_LOG(ERR, app, "flow %u: not in the Receiver of rx lcore %u at removal", r.index, f->recv_lcore);
        if (r.obj != nullptr)
            f->last_acked = *Receiver::acked_word(static_cast<const RecvFlow*>(r.obj));
        f->last_released = f->ring ? f->ring->released() : 0;
        break;
    }
    case kRemoveCons:
        break;
    default:
        if (!r.ok)
            TM_LOG(ERR, app, "lcore refused request %d for flow %u", static_cast<int>(r.op), r.index);
        break;
    }
    if (f != nullptr && (r.op == Request::Op::RemoveRecv || r.op == kRemoveCons) && --f->detach_pending == 0)
        release_recv(*f, now);
    if (a == nullptr || a->pending == 0)
        return;
    if (--a->pending != 0)
        return;
    if (a->stage == AppSession::Stage::Installing) {
        if (!a->connector)
            sessions_->accept_ready(a->s, now); // the ACCEPT: the flows are in place
        else
            a->stage = AppSession::Stage::Live;
        if (start_tsc_ == 0 && a->connector)
            start_tsc_ = now;
        if (start_tsc_ == 0 && opt_.mode == Mode::Recv)
            start_tsc_ = now;
    } else if (a->stage == AppSession::Stage::Detaching) {
        a->stage = AppSession::Stage::Gone;
    }
    if (service_ && a->svc != nullptr)
        service_->on_stage(*a, now);
}

void Runtime::later(uint64_t now, std::function<void()> fn) {
    if (engine_ != nullptr) // torn down: nothing frees it any more (as before the engine)
        engine_->later(now, std::move(fn));
}

} // namespace tailmark::app
