// A session's flows (sessions.h): each half made and installed on the
// engine, the session's end (its flows taken back), the engine's answers
// about them, and the cursors they leave.
#include <cstdio>

#include <rte_errno.h>
#include <rte_ring_elem.h>

#include "tailmark/engine/session_flows.h"
#include "tailmark/engine/sessions.h"
#include "tailmark/log.h"

namespace tailmark::engine {

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

// A receive half: its completion ring (a memzone, unless the application
// laid one out in its own memory first), its per-packet ring, its Receiver
// by the engine's steering, its receive state; the application's part.
bool Sessions::make_recv(SessionFlow& f, SessionRec& a, const Session& s, uint16_t id, uint16_t i, std::string& err) {
    const uint32_t stride = stride_for_mtu(s.params.mtu, s.params.version);
    f.recv_id = id;
    if (!f.ring)
        f.ring = CompletionRing::create(id, s.params.ring_size, s.params.max_msg, cfg_.rx_socket);
    if (!f.ring) {
        const double mib =
            double(s.params.ring_size) * double(RTE_ALIGN_CEIL(s.params.max_msg ? s.params.max_msg : 1, 4096)) / (1 << 20);
        err = "--ring-size/--msg-size: the completion ring of flow " + std::to_string(f.index) + " needs " +
              std::to_string(static_cast<uint64_t>(mib + 0.5)) + " MiB (" + rte_strerror(rte_errno) +
              "); lower them, or raise EAL -m";
        return false;
    }
    if (cfg_.pkt_cq) {
        // Room for every packet of a full window: the placer never finds it full.
        const uint64_t cap = uint64_t(s.params.ring_size) * plan_group(s.params.max_msg, stride).pkt_count + kMaxBurst;
        char name[RTE_RING_NAMESIZE];
        snprintf(name, sizeof(name), "tm_cq_%u", id); // set-up only: a receive half, control thread
        f.pkt_cq = rte_ring_create_elem(name, sizeof(PacketCompletion), static_cast<unsigned>(cap), cfg_.rx_socket,
                                        RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
        if (f.pkt_cq == nullptr) {
            err = "--completion packet: per-packet completion ring of flow " + std::to_string(f.index) + " (" +
                  std::to_string(cap) + " entries): " + rte_strerror(rte_errno) + "; lower --ring-size, or raise EAL -m";
            return false;
        }
    }
    const int owner = e_.receiver_for(id, s.peer.ip, cfg_.src_ip, cfg_.udp_port);
    if (owner < 0) {
        err = "flow " + std::to_string(f.index) + ": RSS queue unknown";
        return false;
    }
    RecvFlowSpec rs = recv_spec(s, i, id, f.ring.get(), f.pkt_cq, cfg_.acknowledge);
    // Between two ends of this process, by the in-memory loopback: its
    // frames never leave it, and come by no port (FlowAuth::loopback).
    rs.auth.loopback = s.local_peer && e_.has_loopback();
    f.receiver = &e_.receiver(static_cast<uint32_t>(owner)); // where post_recv installs it
    f.recv_lcore = e_.rx_ctxs()[static_cast<uint32_t>(owner)]->lcore;
    f.recv_auth = rs.auth;
    f.recv = Receiver::make_flow(rs, cfg_.rx_socket);
    if (f.recv == nullptr) {
        err = "out of memory: receive state of flow " + std::to_string(f.index);
        return false;
    }
    return !h_.recv_made || h_.recv_made(f, a, s, err);
}

// The receive half to its Receiver through the engine (which keeps f as
// the flow's place), then the application's ops; a.pending counts them.
void Sessions::post_recv(SessionFlow& f, SessionRec& a) {
    a.pending++; // before: the engine answers at once before launch
    const int ri = e_.receiver_index(f.receiver); // make_recv's choice
    if (ri < 0 || !e_.install_recv(f.recv, f.recv_id, f.recv_auth, static_cast<uint32_t>(ri), &f, {f.index, &a})) {
        a.pending--;
        TM_LOG(ERR, app, "flow %u: its receive side was not installed (request ring full)", f.index);
        return;
    }
    if (h_.recv_posted)
        a.pending += h_.recv_posted(f, a);
}

// What make_recv made, for a flow the lcores never had (or gave back).
void Sessions::free_recv(SessionFlow& f) {
    Receiver::free_flow(f.recv);
    f.recv = nullptr;
    if (h_.recv_freed)
        h_.recv_freed(f);
    rte_ring_free(f.pkt_cq);
    f.pkt_cq = nullptr;
    f.ring.reset(); // the memzone
}

uint32_t Sessions::send_queue_for(const Session& s, uint16_t i) {
    const auto wire = static_cast<uint16_t>(s.peer_base + i);
    const SessionFlow* peer = local_peer_flow(s, i);
    return peer != nullptr ? e_.local_sender(peer->receiver, wire, i) : e_.sender_for(wire, i);
}

// The one place a session's send half is opened: its SendFlow for the
// peer's flow (the ACKs come back under ours), installed on Sender si by
// the engine (which routes its ACKs). A peer in this process credits it
// through its Receiver's words, not ACKs. False: out of memory.
bool Sessions::open_send(SessionFlow& f, SessionRec& a, const Session& s, uint16_t i, uint32_t si, const SendOpen& o) {
    SendFlowSpec sp;
    send_spec(s, i, o.ring_size, address_to(s), cfg_.paths, sp); // the session's MTU fits
    sp.tx.loopback = s.local_peer && e_.has_loopback(); // no CRC32C: as make_recv's
    f.send_id = sp.id;
    sp.report = o.report;
    sp.payload = o.payload;
    if (const SessionFlow* peer = local_peer_flow(s, i); peer != nullptr && peer->recv != nullptr) {
        sp.local_acked = Receiver::acked_word(peer->recv);
        sp.local_released = peer->ring->released_word();
    }
    sp.user = o.user;
    return install_send(f, a, sp, si);
}

bool Sessions::install_send(SessionFlow& f, SessionRec& a, const SendFlowSpec& sp, uint32_t si) {
    f.sender = &e_.sender(si);
    f.send_lcore = e_.sender_lcore(si);
    f.send = Sender::make_flow(sp, cfg_.tx_socket); // other threads read its view (send_view)
    if (f.send == nullptr)
        return false;
    a.pending++; // before: the engine answers at once before launch
    if (!e_.install_send(f.send, f.send_id, si, {f.index, &a})) {
        a.pending--;
        Sender::free_flow(f.send);
        f.send = nullptr;
        return false;
    }
    return true;
}

// A send half is failed first (what it owed is reported), then removed; a
// receive half removed once a move under way is over, with the
// application's part. Each freed as its answers come.
void Sessions::detach(SessionRec& a, uint64_t now) {
    if (a.stage == SessionRec::Stage::Detaching || a.stage == SessionRec::Stage::Gone)
        return;
    a.stage = SessionRec::Stage::Detaching;
    const FailReason why = fail_reason(a.end);
    for (SessionFlow* f : a.flows) {
        if (a.connector && f->send_session == &a && f->send != nullptr && e_.close_send(f->send_id, why))
            a.pending += 2; // FailSend, RemoveSend
        // A receive half its Receiver refused at install has no recv, but
        // its ring (and the application's part) are let go all the same.
        if (a.connector || f->recv_session != &a || (f->recv == nullptr && !f->ring))
            continue;
        if (f->recv != nullptr && e_.close_recv(f->recv_id)) {
            f->detach_pending++;
            a.pending++;
        }
        if (h_.recv_closing) {
            const uint32_t n = h_.recv_closing(*f, a, why);
            f->detach_pending += n;
            a.pending += n;
        }
        if (f->detach_pending == 0)
            release_recv(*f, now);
    }
    if (a.pending == 0)
        a.stage = SessionRec::Stage::Gone;
}

// Nothing holds a receive half's ring any more: its last cursors kept, the
// ring and its per-packet ring freed a second later (other threads may
// still read them), its id back with them.
void Sessions::release_recv(SessionFlow& f, uint64_t now) {
    f.last_released = f.ring ? f.ring->released() : f.last_released;
    f.last_gave_up = f.ring ? f.ring->gave_up() : f.last_gave_up;
    if (h_.recv_released)
        h_.recv_released(f, e_.deferred(), now);
    rte_ring* cq = f.pkt_cq;
    f.pkt_cq = nullptr;
    CompletionRing* ring = f.ring.release();
    f.ring_gone = true;
    f.detached = true;
    const uint16_t id = f.recv_id;
    e_.later(now, [this, cq, ring, id] {
        rte_ring_free(cq);
        delete ring;
        recv_ids_.release(id, 1, rte_rdtsc());
    });
}

void Sessions::on_answer(const Request& r, uint64_t now) {
    SessionFlow* f = r.index < reg_.size() ? reg_[r.index] : nullptr;
    auto* a = static_cast<SessionRec*>(r.session);
    bool ends_recv = false;
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
        e_.later(now, [this, id] { send_ids_.release(id, 1, rte_rdtsc()); });
        break;
    }
    case Request::Op::AddRecv:
        if (!r.ok) // a Receiver full or the id taken: no data of it is placed
            TM_LOG(ERR, app, "flow %u: rx lcore %u refused it; its data is dropped (unknown flow)", r.index,
                   f != nullptr ? f->recv_lcore : 0);
        break;
    case Request::Op::RemoveRecv: // out; r.obj freed a second later
        if (!r.ok)
            TM_LOG(ERR, app, "flow %u: not in the Receiver of rx lcore %u at removal", r.index, f->recv_lcore);
        if (r.obj != nullptr)
            f->last_acked = *Receiver::acked_word(static_cast<const RecvFlow*>(r.obj));
        f->last_released = f->ring ? f->ring->released() : 0;
        ends_recv = true;
        break;
    default:
        ends_recv = h_.ends_recv && h_.ends_recv(r);
        if (!r.ok && !ends_recv)
            TM_LOG(ERR, app, "lcore refused request %d for flow %u", static_cast<int>(r.op), r.index);
        break;
    }
    if (f != nullptr && ends_recv && --f->detach_pending == 0)
        release_recv(*f, now);
    if (a == nullptr || a->pending == 0 || --a->pending != 0)
        return;
    const bool installed = a->stage == SessionRec::Stage::Installing;
    if (installed) {
        if (!a->connector)
            t_.accept_ready(a->s, now); // the ACCEPT: the flows are in place
        else
            a->stage = SessionRec::Stage::Live;
    } else if (a->stage == SessionRec::Stage::Detaching) {
        a->stage = SessionRec::Stage::Gone;
    }
    if (h_.settled)
        h_.settled(*a, installed, now);
}

uint32_t Sessions::released_of(const SessionFlow& f) {
    if (f.ring)
        return f.ring->released();
    // A receive half whose session ended keeps its ring's last cursor; the
    // sender's view is only a send half's (as in acked_of).
    if (f.send != nullptr || (f.detached && send_only(f)))
        return send_view(f).released;
    return f.last_released;
}

uint32_t Sessions::acked_of(const SessionFlow& f) {
    if (f.recv != nullptr)
        return *Receiver::acked_word(f.recv);
    if (f.send != nullptr || (f.detached && send_only(f)))
        return send_view(f).acked;
    return f.last_acked;
}

} // namespace tailmark::engine
