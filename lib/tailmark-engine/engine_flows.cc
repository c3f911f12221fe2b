// Engine, the control thread's side: flows opened and closed by requests to
// their lcores, the answers taken in tick(), removals asked again, moves
// between rx lcores, deferred free; and the counters any thread may sum.
#include <algorithm>

#include <rte_lcore.h>
#include <rte_ring_elem.h>

#include "drivers/port.h"
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

Request Engine::request(Request::Op op, const SendRec& rec, uint16_t id, FailReason why) const {
    return {op, false, why, id, rec.tag.index, senders_[rec.sender], nullptr, rec.tag.session};
}

Request Engine::request(Request::Op op, const RecvRec& rec, uint16_t id) const {
    return {op, false, FailReason::Closed, id, rec.tag.index, rec.p->receiver, nullptr, rec.tag.session};
}

bool Engine::post_app(unsigned lcore, const Request& r) {
    Request q = r;
    return lcore < lcores_.size() && lcores_[lcore] != nullptr && r.op >= Request::Op::AppFirst &&
           rte_ring_sp_enqueue_elem(lcores_[lcore]->req, &q, sizeof(q)) == 0;
}

bool Engine::open_send(const SendFlowSpec& spec, uint32_t si, const FlowTag& tag) {
    if (si >= senders_.size())
        return false;
    SendFlow* f = Sender::make_flow(spec, host_.socket);
    if (f == nullptr)
        return false;
    if (!install_send(f, spec.id, si, tag)) {
        Sender::free_flow(f);
        return false;
    }
    return true;
}

bool Engine::install_send(SendFlow* f, uint16_t id, uint32_t si, const FlowTag& tag) {
    if (f == nullptr || si >= senders_.size())
        return false;
    if (auto it = sends_.find(id); it != sends_.end() && live(it->second.state))
        return false;
    SendRec& rec = sends_[id];
    rec = SendRec{f, si, sender_lcore_[si], FlowState::Opening, {}, tag};
    __atomic_store_n(&sender_of_[id], static_cast<uint8_t>(si), __ATOMIC_RELEASE); // its ACKs find it
    Request r = request(Request::Op::AddSend, rec, id);
    r.obj = f;
    if (!post(rec.lcore, r)) {
        __atomic_store_n(&sender_of_[id], kNoSender, __ATOMIC_RELEASE);
        sends_.erase(id);
        return false;
    }
    return true;
}

bool Engine::open_recv(const RecvFlowSpec& spec, uint32_t ri, const FlowTag& tag) {
    if (ri >= receivers_.size() || spec.ring == nullptr)
        return false;
    RecvFlow* f = Receiver::make_flow(spec, host_.socket);
    if (f == nullptr)
        return false;
    if (!install_recv(f, spec.id, spec.auth, ri, nullptr, tag)) {
        Receiver::free_flow(f);
        return false;
    }
    return true;
}

bool Engine::install_recv(RecvFlow* f, uint16_t id, const FlowAuth& auth, uint32_t ri, RecvPlace* place,
                          const FlowTag& tag) {
    if (f == nullptr || ri >= receivers_.size())
        return false;
    if (auto it = recvs_.find(id); it != recvs_.end() && live(it->second.state))
        return false;
    RecvRec& rec = recvs_[id];
    rec = RecvRec{};
    rec.p = place != nullptr ? place : &rec.own;
    rec.tag = tag;
    RecvPlace& p = *rec.p;
    p.receiver = receivers_[ri];
    p.recv = f;
    p.recv_id = id;
    p.recv_lcore = rxs_[ri]->lcore;
    p.moving = false;
    rec.state = FlowState::Opening;
    if (moves_.on()) // before the flow exists anywhere: no data of it is placed yet
        moves_.place(p, id, static_cast<uint8_t>(ri), auth);
    Request r = request(Request::Op::AddRecv, rec, id);
    r.obj = f;
    hold(rec, ri); // before the post: before launch it is answered at once
    if (!post(p.recv_lcore, r)) {
        if (moves_.on())
            moves_.removed(p);
        p.recv = nullptr;
        unhold(rec);
        recvs_.erase(id);
        return false;
    }
    return true;
}

void Engine::hold(RecvRec& rec, uint32_t at) {
    unhold(rec);
    rec.held = true;
    rec.at = at;
    held_[at]++;
}

void Engine::unhold(RecvRec& rec) {
    if (rec.held)
        held_[rec.at]--;
    rec.held = false;
}

int Engine::receiver_for(uint16_t id, uint32_t peer_ip, uint32_t self_ip, uint16_t udp_port) const {
    const auto R = static_cast<uint32_t>(receivers_.size());
    if (host_.steer_by_id || host_.handoff) // hand-off deals flows out by id; the rx lcores pass each other the rest
        return static_cast<int>(id % R);
    if (R > 1 && host_.rss_port != nullptr) {
        const int q = host_.rss_port->rss_queue_of(peer_ip, self_ip, TxFlow::source_port(id), udp_port);
        return q >= 0 && static_cast<uint32_t>(q) < R ? q : -1;
    }
    return 0;
}

uint32_t Engine::sender_for(uint16_t wire, uint16_t i) const {
    return host_.steer_by_id ? wire % static_cast<uint32_t>(receivers_.size()) : i % port_senders_;
}

uint32_t Engine::local_sender(const Receiver* to, uint16_t wire, uint16_t i) const {
    if (host_.local_port < 0)
        return sender_for(wire, i);
    const int r = receiver_index(to);
    return port_senders_ + (r >= 0 ? static_cast<uint32_t>(r) : wire % static_cast<uint32_t>(receivers_.size()));
}

int Engine::receiver_index(const Receiver* r) const {
    for (uint32_t i = 0; i < receivers_.size(); i++)
        if (receivers_[i] == r)
            return static_cast<int>(i);
    return -1;
}

uint32_t Engine::recv_room(uint32_t r) const {
    const auto cap = static_cast<uint32_t>(RxPlacer::kMaxFlows);
    return r < held_.size() && held_[r] < cap ? cap - held_[r] : 0;
}

uint32_t Engine::min_recv_room() const {
    uint32_t m = static_cast<uint32_t>(RxPlacer::kMaxFlows);
    for (uint32_t r = 0; r < held_.size(); r++)
        m = std::min(m, recv_room(r));
    return m;
}

// Failed first (what it owes is reported, and its Sender lets it go), then
// removed; a removal refused while completions are still owed is asked
// again at the next tick.
bool Engine::close_send(uint16_t id, FailReason why) {
    auto it = sends_.find(id);
    if (it == sends_.end() || (it->second.state != FlowState::Opening && it->second.state != FlowState::Open))
        return false;
    SendRec& rec = it->second;
    rec.state = FlowState::Closing;
    return post(rec.lcore, request(Request::Op::FailSend, rec, id, why)) &&
           post(rec.lcore, request(Request::Op::RemoveSend, rec, id, why));
}

bool Engine::close_recv(uint16_t id) {
    auto it = recvs_.find(id);
    if (it == recvs_.end() || (it->second.state != FlowState::Opening && it->second.state != FlowState::Open))
        return false;
    RecvRec& rec = it->second;
    rec.state = FlowState::Closing;
    if (rec.p->moving) { // between two Receivers: removed once it is in the new one
        rec.close_after_move = true;
        return true;
    }
    return post(rec.p->recv_lcore, request(Request::Op::RemoveRecv, rec, id));
}

const uint32_t* Engine::recv_acked_word(uint16_t id) const {
    auto it = recvs_.find(id);
    return it == recvs_.end() || !live(it->second.state) || it->second.p->recv == nullptr
               ? nullptr
               : Receiver::acked_word(it->second.p->recv);
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
    if (r.op >= Request::Op::AppFirst) { // the application's own
        answer(r, now);
        return;
    }
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
            return;
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
        if (moves_.on())
            moves_.removed(*rec.p);
        unhold(rec);
        rec.state = FlowState::Refused;
        Receiver::free_flow(rec.p->recv);
        rec.p->recv = nullptr;
        break;
    }
    case Request::Op::RemoveRecv: {
        // Not found there (ok false: a move that could not finish left it in
        // no Receiver): the flow it was installed with is let go all the same.
        RecvRec& rec = recvs_[r.id];
        auto* f = r.obj != nullptr ? static_cast<RecvFlow*>(r.obj) : rec.p->recv;
        if (moves_.on())
            moves_.removed(*rec.p);
        unhold(rec);
        rec.p->recv = nullptr;
        rec.state = FlowState::Closed;
        deferred_.later(now, [f] { Receiver::free_flow(f); });
        Request a = r;
        a.obj = f;
        answer(a, now);
        return;
    }
    case Request::Op::MoveRecvOut: {
        RecvRec& rec = recvs_[r.id];
        Request in{};
        if (r.ok) {
            moves_.moved_out(*rec.p, r, in);
            hold(rec, rec.p->move_to); // out of the old Receiver, about to be in the new
        }
        if (!r.ok || !post(rec.p->recv_lcore, in))
            end_move(rec, r.id, false);
        return;
    }
    case Request::Op::MoveRecvIn:
        end_move(recvs_[r.id], r.id, r.ok);
        return;
    default: // FailSend, FailLink: nothing to follow up
        break;
    }
    answer(r, now);
}

// A move between Receivers is over (done or not): the removal its close
// left waiting, if any, goes now.
void Engine::end_move(RecvRec& rec, uint16_t id, bool ok) {
    moves_.moved_in(*rec.p, ok);
    if (rec.close_after_move) {
        rec.close_after_move = false;
        post(rec.p->recv_lcore, request(Request::Op::RemoveRecv, rec, id));
    }
}

// Flows whose frames arrive on another rx lcore, moved there (rx_moves.h).
void Engine::look_for_moves(uint64_t now) {
    if (!moves_.on() || !moves_.due(now))
        return;
    for (auto& [id, rec] : recvs_) {
        if (rec.state != FlowState::Open) // an application's place may be gone once closed
            continue;
        RecvPlace& p = *rec.p;
        if (p.moving || p.recv == nullptr)
            continue;
        Request out{};
        if (moves_.look(p, rec.tag.index, out)) {
            out.id = id;
            out.session = rec.tag.session;
            if (!post(p.recv_lcore, out))
                moves_.moved_in(p, false);
        }
    }
}

uint32_t Engine::tick(uint64_t now) {
    // The main lcore's roles, if it holds any (launch() started the others).
    if (Lcore* mine = lcores_[rte_get_main_lcore()]; launched_ && !app_loop_ && mine != nullptr && mine->any()) {
        serve_requests(mine->req, mine->resp, [](Request& r) { r.ok = false; });
        uint64_t prev = now;
        run_roles_timed(*mine, prev);
        now = prev;
    }
    uint32_t n = 0;
    Request r;
    for (Lcore* l : ctxs_) {
        while (rte_ring_sc_dequeue_elem(l->resp, &r, sizeof(r)) == 0) {
            on_response(r, now);
            n++;
        }
    }
    if (!retry_.empty()) {
        std::vector<Request> again;
        again.swap(retry_);
        for (const Request& r : again) {
            if (!post(sends_[r.id].lcore, r)) // RemoveSend: the only one asked again
                retry_.push_back(r);
        }
    }
    // The control frames, a burst a round: a flood of them waits on the
    // ring (and is dropped at its end), not on this thread.
    rte_mbuf* frames[kControlBurst];
    const unsigned nf = rte_ring_sc_dequeue_burst(control_in_, reinterpret_cast<void**>(frames), kControlBurst, nullptr);
    for (unsigned i = 0; i < nf; i++) {
        if (take_control_)
            take_control_(frames[i], now);
        else
            rte_pktmbuf_free(frames[i]); // no session table: nobody's
    }
    look_for_moves(now);
    deferred_.run(now);
    return n;
}

Engine::Stats Engine::stats() const {
    Stats t;
    for (uint32_t q = 0; q < senders_.size(); q++) {
        const Sender* s = senders_[q];
        const SenderCounters& c = s->counters();
        if (q >= port_senders_) {
            t.pkts_local += s->pkts_tx();
            t.bytes_local += peek(c.bytes_sent);
        }
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
        t.packet_completions += peek(c.packet_completions);
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
