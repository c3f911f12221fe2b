// Engine, the control thread's side: flows opened and closed by requests to
// their lcores, the answers taken in tick(), removals asked again, moves
// between rx lcores, deferred free; and the counters any thread may sum.
#include <rte_lcore.h>
#include <rte_ring_elem.h>

#include "tailmark/engine/engine.h"
#include "tailmark/engine/lcore_loop.h"

namespace tailmark::engine {

namespace {

bool live(FlowState s) { return s == FlowState::Opening || s == FlowState::Open || s == FlowState::Closing; }

} // namespace

// To its lcore's ring; before launch (or after stop) no lcore runs, so the
// request is applied here and answered at once.
bool Engine::post(unsigned lcore, const Request& r) {
    if (!launched_) {
        Request a = r;
        apply_engine_request(a);
        on_response(a, 0);
        return true;
    }
    Request q = r;
    return rte_ring_sp_enqueue_elem(lcores_[lcore]->req, &q, sizeof(q)) == 0;
}

bool Engine::open_send(const SendFlowSpec& spec, uint32_t si) {
    if (si >= senders_.size())
        return false;
    if (auto it = sends_.find(spec.id); it != sends_.end() && live(it->second.state))
        return false;
    SendFlow* f = Sender::make_flow(spec, host_.socket);
    if (f == nullptr)
        return false;
    SendRec& rec = sends_[spec.id];
    rec = SendRec{f, si, sender_lcore_[si], FlowState::Opening, {}};
    __atomic_store_n(&sender_of_[spec.id], static_cast<uint8_t>(si), __ATOMIC_RELEASE); // its ACKs find it
    if (!post(rec.lcore, {Request::Op::AddSend, false, FailReason::None, spec.id, spec.id, senders_[si], f, nullptr})) {
        __atomic_store_n(&sender_of_[spec.id], kNoSender, __ATOMIC_RELEASE);
        Sender::free_flow(f);
        sends_.erase(spec.id);
        return false;
    }
    return true;
}

bool Engine::open_recv(const RecvFlowSpec& spec, uint32_t ri) {
    if (ri >= receivers_.size() || spec.ring == nullptr)
        return false;
    if (auto it = recvs_.find(spec.id); it != recvs_.end() && live(it->second.state))
        return false;
    RecvFlow* f = Receiver::make_flow(spec, host_.socket);
    if (f == nullptr)
        return false;
    RecvRec& rec = recvs_[spec.id];
    rec = RecvRec{};
    rec.receiver = receivers_[ri];
    rec.recv = f;
    rec.recv_id = spec.id;
    rec.recv_lcore = rxs_[ri]->lcore;
    rec.state = FlowState::Opening;
    if (moves_.on()) // before the flow exists anywhere: no data of it is placed yet
        moves_.place(rec, spec.id, static_cast<uint8_t>(ri), spec.auth);
    if (!post(rec.recv_lcore, {Request::Op::AddRecv, false, FailReason::None, spec.id, spec.id, rec.receiver, f, nullptr})) {
        Receiver::free_flow(f);
        recvs_.erase(spec.id);
        return false;
    }
    return true;
}

// Failed first (what it owes is reported, and its Sender lets it go), then
// removed; a removal refused while completions are still owed is asked
// again at the next tick.
bool Engine::close_send(uint16_t id, FailReason why) {
    auto it = sends_.find(id);
    if (it == sends_.end() || (it->second.state != FlowState::Opening && it->second.state != FlowState::Open))
        return false;
    SendRec& rec = it->second;
    Sender* s = senders_[rec.sender];
    rec.state = FlowState::Closing;
    return post(rec.lcore, {Request::Op::FailSend, false, why, id, id, s, nullptr, nullptr}) &&
           post(rec.lcore, {Request::Op::RemoveSend, false, why, id, id, s, nullptr, nullptr});
}

bool Engine::close_recv(uint16_t id) {
    auto it = recvs_.find(id);
    if (it == recvs_.end() || (it->second.state != FlowState::Opening && it->second.state != FlowState::Open))
        return false;
    RecvRec& rec = it->second;
    rec.state = FlowState::Closing;
    if (rec.moving) { // between two Receivers: removed once it is in the new one
        rec.close_after_move = true;
        return true;
    }
    return post(rec.recv_lcore, {Request::Op::RemoveRecv, false, FailReason::Closed, id, id, rec.receiver, nullptr, nullptr});
}

const uint32_t* Engine::recv_acked_word(uint16_t id) const {
    auto it = recvs_.find(id);
    return it == recvs_.end() || it->second.recv == nullptr ? nullptr : Receiver::acked_word(it->second.recv);
}

FlowState Engine::send_state(uint16_t id) const {
    auto it = sends_.find(id);
    return it == sends_.end() ? FlowState::None : it->second.state;
}

FlowState Engine::recv_state(uint16_t id) const {
    auto it = recvs_.find(id);
    return it == recvs_.end() ? FlowState::None : it->second.state;
}

bool Engine::send_view(uint16_t id, Sender::FlowView& out) const {
    auto it = sends_.find(id);
    if (it == sends_.end())
        return false;
    out = it->second.flow != nullptr ? Sender::view(it->second.flow) : it->second.last;
    return true;
}

void Engine::on_response(const Request& r, uint64_t now) {
    switch (r.op) {
    case Request::Op::AddSend: {
        SendRec& rec = sends_[r.id];
        if (r.ok) {
            if (rec.state == FlowState::Opening)
                rec.state = FlowState::Open;
            break;
        }
        rec.state = FlowState::Refused; // never in a Sender: nobody else reads it
        __atomic_store_n(&sender_of_[r.id], kNoSender, __ATOMIC_RELEASE);
        Sender::free_flow(rec.flow);
        rec.flow = nullptr;
        break;
    }
    case Request::Op::RemoveSend: {
        if (!r.ok) {
            retry_.push_back(r); // completions still owed: the lcore reports them first
            break;
        }
        SendRec& rec = sends_[r.id];
        auto* f = static_cast<SendFlow*>(r.obj);
        rec.last = Sender::view(f);
        rec.flow = nullptr;
        rec.state = FlowState::Closed;
        __atomic_store_n(&sender_of_[r.id], kNoSender, __ATOMIC_RELEASE);
        deferred_.later(now, [f] { Sender::free_flow(f); }); // a late ACK's reader, the shell's view
        break;
    }
    case Request::Op::AddRecv: {
        RecvRec& rec = recvs_[r.id];
        if (r.ok) {
            if (rec.state == FlowState::Opening)
                rec.state = FlowState::Open;
            break;
        }
        uint8_t owner = 0, arrived = 0;
        if (moves_.on())
            moves_.removed(rec, owner, arrived);
        rec.state = FlowState::Refused;
        Receiver::free_flow(rec.recv);
        rec.recv = nullptr;
        break;
    }
    case Request::Op::RemoveRecv: {
        if (!r.ok) {
            retry_.push_back(r);
            break;
        }
        RecvRec& rec = recvs_[r.id];
        uint8_t owner = 0, arrived = 0;
        if (moves_.on())
            moves_.removed(rec, owner, arrived);
        auto* f = static_cast<RecvFlow*>(r.obj);
        rec.recv = nullptr;
        rec.state = FlowState::Closed;
        deferred_.later(now, [f] { Receiver::free_flow(f); });
        break;
    }
    case Request::Op::MoveRecvOut: {
        RecvRec& rec = recvs_[r.id];
        if (!r.ok) {
            moves_.moved_in(rec, false);
            break;
        }
        Request in{};
        moves_.moved_out(rec, r, in);
        if (!post(rec.recv_lcore, in))
            moves_.moved_in(rec, false);
        break;
    }
    case Request::Op::MoveRecvIn: {
        RecvRec& rec = recvs_[r.id];
        moves_.moved_in(rec, r.ok);
        if (rec.close_after_move) {
            rec.close_after_move = false;
            post(rec.recv_lcore,
                 {Request::Op::RemoveRecv, false, FailReason::Closed, r.id, r.id, rec.receiver, nullptr, nullptr});
        }
        break;
    }
    default: // FailSend, FailLink: nothing to follow up
        break;
    }
}

// Flows whose frames arrive on another rx lcore, moved there (rx_moves.h).
void Engine::look_for_moves(uint64_t now) {
    if (!moves_.on() || !moves_.due(now))
        return;
    for (auto& [id, rec] : recvs_) {
        if (rec.state != FlowState::Open || rec.moving || rec.recv == nullptr)
            continue;
        Request out{};
        if (moves_.look(rec, id, out) && !post(rec.recv_lcore, out))
            moves_.moved_in(rec, false);
    }
}

uint32_t Engine::tick(uint64_t now) {
    // The main lcore's roles, if it holds any (launch() started the others).
    if (Lcore* mine = lcores_[rte_get_main_lcore()]; launched_ && mine != nullptr && mine->any()) {
        serve_requests(mine->req, mine->resp, [](Request& r) { r.ok = false; });
        uint64_t prev = now;
        run_roles_timed(*mine, prev);
        now = prev;
    }
    uint32_t n = 0;
    for (Lcore* l : lcores_) {
        Request r;
        while (l != nullptr && rte_ring_sc_dequeue_elem(l->resp, &r, sizeof(r)) == 0) {
            on_response(r, now);
            n++;
        }
    }
    if (!retry_.empty()) {
        std::vector<Request> again;
        again.swap(retry_);
        for (const Request& r : again) {
            const unsigned l = r.op == Request::Op::RemoveSend ? sends_[r.id].lcore : recvs_[r.id].recv_lcore;
            if (!post(l, r))
                retry_.push_back(r);
        }
    }
    rte_mbuf* m;
    while (rte_ring_sc_dequeue(control_in_, reinterpret_cast<void**>(&m)) == 0) {
        if (take_control_)
            take_control_(m);
        else
            rte_pktmbuf_free(m); // no session table: nobody's
    }
    look_for_moves(now);
    deferred_.run(now);
    return n;
}

Engine::Stats Engine::stats() const {
    Stats t;
    for (const Sender* s : senders_) {
        const SenderCounters& c = s->counters();
        t.msgs_sent += peek(c.msgs_sent);
        t.bytes_sent += peek(c.bytes_sent);
        t.delivered += peek(c.delivered);
        t.failed += peek(c.failed);
        t.retx_pkts += peek(c.retx_pkts);
        t.pkts_tx += s->pkts_tx();
        t.tx_dropped += s->tx_dropped();
    }
    for (const TxRole* c : txs_)
        t.completions += peek(c->completions);
    for (const RxCtx* c : rxs_)
        t.pkts_rx += peek(c->pkts_rx);
    for (const Receiver* r : receivers_) {
        const RxCounters& c = r->placer().counters();
        t.placed += peek(c.placed);
        t.completed += peek(c.completions);
        t.acks_tx += peek(r->counters().acks_tx);
        t.nacks_tx += peek(r->counters().nacks_tx);
    }
    for (uint64_t d : drops())
        t.drops += d;
    return t;
}

DropCounters Engine::drops() const {
    DropCounters d{};
    for (const Sender* s : senders_)
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(s->counters().drops[i]);
    for (const Receiver* r : receivers_)
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(r->placer().counters().drops[i]) + peek(r->counters().drops[i]);
    return d;
}

} // namespace tailmark::engine
