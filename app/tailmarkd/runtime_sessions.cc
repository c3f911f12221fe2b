// Sessions as the control loop sees them: connecting, accepting, their end,
// and the lcores' answers to the requests that install and remove flows.
#include "runtime.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <rte_cycles.h>
#include <rte_random.h>
#include <rte_ring_elem.h>

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

FlowParams Runtime::proposal() const {
    FlowParams p;
    p.nflows = static_cast<uint16_t>(opt_.flows);
    p.mtu = opt_.mtu;
    p.ring_size = opt_.ring_size;
    p.max_msg = static_cast<uint32_t>(opt_.msg_size);
    p.key = opt_.key;
    // Keys configured (--key, [flow.N] key=): both ends must hold the same, a
    // difference is a mismatch, said so. Otherwise the acceptor draws them.
    p.keys_given = opt_.key_set || !opt_.flow_keys.empty();
    p.version = static_cast<uint8_t>(opt_.data_version);
    p.data_auth = opt_.data_auth;
    for (const auto& [i, k] : opt_.flow_keys)
        p.overrides.push_back({i, k});
    return p;
}

AppSession* Runtime::app_session(uint16_t sid) {
    for (auto& a : app_sessions_)
        if (a->s != nullptr && a->id == sid)
            return a.get();
    return nullptr;
}

void Runtime::post(unsigned lcore, const Request& r) {
    // Sized for every flow of several sessions at once; a full ring is a
    // bug of ours, not a condition to wait out on the control thread.
    if (!engine_->post_app(lcore, r))
        TM_LOG(ERR, app, "lcore %u: request ring full; request %d for flow %u lost", lcore, static_cast<int>(r.op),
               r.index);
}

void Runtime::start_sessions(uint64_t now) {
    if (!opt_.flow_control || opt_.mode == Mode::Service) // service: the applications open them
        return;
    const uint16_t service = opt_.service;
    if (opt_.mode != Mode::Send)
        sessions_->listen(service, secret_, [this](Session& s, const FlowParams& p) { return decide(s, p); });
    if (opt_.mode == Mode::Recv)
        return;
    const int base = send_ids_.alloc(opt_.flows, now);
    const Endpoint peer = opt_.mode == Mode::Loopback ? Endpoint{opt_.src_ip, opt_.udp_port}
                                                      : Endpoint{opt_.dst_ip, opt_.udp_port};
    Session* s = base < 0 ? nullptr
                          : sessions_->connect(peer, service, secret_, proposal(), static_cast<uint16_t>(base),
                                               opt_.dst_mac_set ? &opt_.dst_mac : nullptr, now);
    if (s == nullptr) {
        TM_LOG(ERR, app, "cannot start a session (no flow ids or session slots)");
        stop(now, "session_failed");
        return;
    }
    TM_LOG(INFO, app, "connecting to %s (service %u)%s", to_string(peer).c_str(), service,
           s->state == SessionState::Resolving ? ", resolving its MAC by ARP" : "");
}

// A listener's decision on a CONNECT: this process's configuration is the
// contract (the generator's messages and the verification depend on it), so
// a sender configured otherwise is refused, the setting named.
AcceptDecision Runtime::decide(Session& s, const FlowParams& p) {
    AcceptDecision d;
    auto refuse = [&](RefuseReason r, uint64_t ours, uint64_t theirs, uint16_t index = 0) {
        d.reason = r;
        d.expected = ours;
        d.got = theirs;
        d.index = index;
        TM_LOG(WARNING, app, "session from %s refused: %s (ours %" PRIu64 ", theirs %" PRIu64 "%s)",
               to_string(s.peer).c_str(), to_string(r), ours, theirs,
               r == RefuseReason::Key ? (", flow " + std::to_string(index)).c_str() : "");
        return d;
    };
    if (p.nflows != opt_.flows)
        return refuse(RefuseReason::Flows, opt_.flows, p.nflows);
    // recv takes a sender whose messages are smaller (the 64 B session next to
    // a bulk one, into one receiver); its messages are all that size.
    if (p.max_msg > opt_.msg_size || (p.max_msg != opt_.msg_size && opt_.mode != Mode::Recv))
        return refuse(RefuseReason::MsgSize, opt_.msg_size, p.max_msg);
    if (p.ring_size != opt_.ring_size)
        return refuse(RefuseReason::RingSize, opt_.ring_size, p.ring_size);
    const uint32_t mtu = std::min(p.mtu, opt_.mtu);
    if (!plan_group(p.max_msg, stride_for_mtu(mtu, p.version)).ok())
        return refuse(RefuseReason::Mtu, opt_.mtu, p.mtu);
    const bool keys_here = opt_.key_set || !opt_.flow_keys.empty();
    if (p.keys_given && keys_here)
        for (uint16_t i = 0; i < p.nflows; i++)
            if (p.key_of(i) != opt_.key_of(i))
                return refuse(RefuseReason::Key, opt_.key_of(i), p.key_of(i), i);
    const int base = recv_ids_.alloc(p.nflows, rte_rdtsc());
    if (base < 0)
        return refuse(RefuseReason::NoRoom, 65536, p.nflows);
    d.agreed = proposal();
    d.agreed.version = p.version; // the session table's choice (1 with a peer in this process)
    d.agreed.mtu = mtu;
    d.agreed.max_msg = p.max_msg;
    d.agreed.keys_given = false;
    if (p.keys_given && !keys_here) { // the connector's configured keys
        d.agreed.key = p.key;
        d.agreed.overrides = p.overrides;
    } else if (!keys_here) { // nobody chose: drawn, never 0
        d.agreed.key = static_cast<uint32_t>(rte_rand()) | 1u;
        d.agreed.overrides.clear();
    }
    d.local_base = static_cast<uint16_t>(base);
    d.defer = true; // ACCEPT once the lcores hold the flows: nothing that follows it is dropped
    s.params = d.agreed;
    s.local_base = d.local_base;

    auto a = AppSession::of(s, false);
    std::string err;
    bool ok = true;
    const GroupPlan plan = plan_group(p.max_msg, stride_for_mtu(mtu, p.version));
    for (uint16_t i = 0; i < p.nflows && ok; i++) {
        FlowCtx* f;
        if (opt_.mode == Mode::Loopback) {
            f = flows_[i];
        } else {
            f = socket_new<FlowCtx>(rx_socket_);
            if (f == nullptr || !add_flow(f, rte_rdtsc())) {
                socket_delete(f);
                ok = false;
                break;
            }
            f->gen_id = i;
            f->ring_size = opt_.ring_size;
            f->pkts_per_msg = plan.pkt_count;
            f->fixed_len = p.max_msg < opt_.msg_size ? p.max_msg : 0;
        }
        f->recv_session = a.get();
        if (opt_.mode == Mode::Recv)
            f->session = a.get();
        a->flows.push_back(f);
        ok = make_recv_flow(*f, *a, s, static_cast<uint16_t>(base + i), i, err);
    }
    if (!ok) { // undo: nothing reached an lcore
        for (FlowCtx* f : a->flows) {
            free_recv(*f);
            if (opt_.mode != Mode::Loopback) // loopback's flows are its own, made once
                abandon_flow(*f);
        }
        publish_flows();
        recv_ids_.unuse(static_cast<uint32_t>(base), p.nflows); // refused: no packet carried them
        TM_LOG(ERR, app, "session from %s: %s", to_string(s.peer).c_str(), err.empty() ? "out of memory" : err.c_str());
        d = AcceptDecision{};
        d.reason = RefuseReason::NoRoom;
        return d;
    }
    for (FlowCtx* f : a->flows)
        post_recv(*f, *a);
    publish_flows();
    TM_LOG(INFO, app, "session %u from %s (service %u): %u flows, ids %u..%u, MTU %u, data v%u%s%s", s.id,
           to_string(s.peer).c_str(), s.service, p.nflows, base, base + p.nflows - 1, mtu, unsigned(s.params.version),
           s.params.data_auth ? " with --data-auth" : "", s.local_peer ? " (this process: cursors in memory)" : "");
    add_session(std::move(a));
    return d;
}

// The session table's news: a session is up, or it ended. Never forget()
// here: the table is still using the session.
void Runtime::on_session(Session& s) {
    const uint64_t now = rte_rdtsc();
    if (service_) { // every session is an application's
        service_->on_session(s, now);
        return;
    }
    AppSession* a = app_session(s.id);
    if (s.state == SessionState::Established) {
        if (!s.connector) {
            if (a != nullptr && a->stage == AppSession::Stage::Installing) {
                a->stage = AppSession::Stage::Live;
                a->up_tsc = now;
            }
            return;
        }
        if (a != nullptr)
            return;
        a = &add_session(AppSession::of(s, true));
        TM_LOG(INFO, app, "session %u to %s up: %u flows, peer's ids %u.., MTU %u, ring %u, data v%u%s%s", s.id,
               to_string(s.peer).c_str(), s.params.nflows, s.peer_base, s.params.mtu, s.params.ring_size,
               unsigned(s.params.version), s.params.data_auth ? " with --data-auth" : "",
               s.local_peer ? " (this process)" : "");
        if (opt_.replay)
            install_replay(*a, s);
        else
            install_send(*a, s);
        if (a->pending == 0)
            a->stage = AppSession::Stage::Live;
        return;
    }
    if (s.state != SessionState::Ended)
        return;
    if (a == nullptr) {
        if (!s.connector)
            return; // refused, or never installed
        // A connector that never came up: say why, and end the run.
        std::string why;
        const std::string peer = to_string(s.peer);
        switch (s.end) {
        case SessionEnd::Refused:
        case SessionEnd::BadAccept: {
            refused_ = true;
            const uint64_t theirs = s.refuse_expected, ours = s.refuse_got;
            switch (s.refuse) {
            case RefuseReason::MsgSize:
                why = "--msg-size " + std::to_string(ours) + " is not the receiver's " + std::to_string(theirs);
                break;
            case RefuseReason::RingSize:
                why = "--ring-size " + std::to_string(ours) + " is not the receiver's " + std::to_string(theirs);
                break;
            case RefuseReason::Flows:
                why = "--flows " + std::to_string(ours) + " is not the receiver's " + std::to_string(theirs);
                break;
            case RefuseReason::Mtu:
                why = "--mtu " + std::to_string(ours) + " leaves no room for a packet at the receiver's " +
                      std::to_string(theirs);
                break;
            case RefuseReason::Key: {
                char b[128];
                snprintf(b, sizeof(b), "--key of flow %u: 0x%" PRIx64 " is not the receiver's 0x%" PRIx64, s.refuse_index,
                         ours, theirs);
                why = b;
                break;
            }
            default:
                why = std::string(to_string(s.refuse));
                break;
            }
            fprintf(stderr, "tailmarkd: %s refused the session: %s\n", peer.c_str(), why.c_str());
            exit_reason_ = "refused";
            break;
        }
        case SessionEnd::NoAnswer:
            fprintf(stderr,
                    "tailmarkd: no answer from %s within %" PRIu64 " ms (is a receiver listening on service %u, "
                    "with the same --secret?)\n",
                    peer.c_str(), opt_.connect_timeout_ms, s.service);
            exit_reason_ = "no_answer";
            break;
        case SessionEnd::ArpFailed:
            if (const uint32_t hop = sessions_->next_hop(s.peer.ip); hop != s.peer.ip)
                fprintf(stderr, "tailmarkd: the gateway %s (towards %s) did not answer ARP (check --gateway, or the link)\n",
                        ip_to_string(hop).c_str(), peer.c_str());
            else
                fprintf(stderr,
                        "tailmarkd: %s did not answer ARP (check the link; a peer on another subnet needs --src-ip "
                        "IP/LEN and --gateway, or --dst-mac)\n",
                        peer.c_str());
            exit_reason_ = "arp_failed";
            break;
        default:
            fprintf(stderr, "tailmarkd: session to %s ended: %s\n", peer.c_str(), to_string(s.end));
            exit_reason_ = to_string(s.end);
            break;
        }
        fflush(stderr);
        stop(now, exit_reason_.c_str());
        return;
    }
    a->end = s.end;
    a->down_tsc = now;
    if (s.end == SessionEnd::PeerClosed || s.end == SessionEnd::Closed || s.end == SessionEnd::Replaced)
        TM_LOG(INFO, app, "session %u %s %s ended: %s", s.id, s.connector ? "to" : "from", to_string(s.peer).c_str(),
               to_string(s.end));
    else
        TM_LOG(WARNING, app, "session %u %s %s ended: %s", s.id, s.connector ? "to" : "from",
               to_string(s.peer).c_str(), to_string(s.end));
    detach(*a, now);
}

// Takes a session's flows back from the lcores: a sender's are failed first
// (whatever they still owed is reported failed), then removed; a receiver's
// removed from the Receiver and the consumer. Freed as the answers come.
void Runtime::detach(AppSession& a, uint64_t now) {
    (void)now;
    if (a.stage == AppSession::Stage::Detaching || a.stage == AppSession::Stage::Gone)
        return;
    a.stage = AppSession::Stage::Detaching;
    const FailReason why = fail_reason(a.end);
    for (FlowCtx* f : a.flows) {
        // The engine fails a send flow first (what it owed is reported),
        // and removes a receive flow once a move under way is over.
        if (a.connector && f->send_session == &a && f->send != nullptr && engine_->close_send(f->send_id, why))
            a.pending += 2; // FailSend, RemoveSend
        if (!a.connector && f->recv_session == &a && f->recv != nullptr && engine_->close_recv(f->recv_id)) {
            f->detach_pending++;
            a.pending++;
            if (f->cons != nullptr) {
                post(f->cons_ctx->lcore,
                     {kRemoveCons, false, why, f->recv_id, f->index, f->cons_ctx, f->cons, &a});
                f->detach_pending++;
                a.pending++;
            }
        }
    }
    if (a.pending == 0)
        a.stage = AppSession::Stage::Gone;
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
    if (f != nullptr && (r.op == Request::Op::RemoveRecv || r.op == kRemoveCons) && --f->detach_pending == 0) {
        // Neither the Receiver nor the consumer holds the ring any more.
        f->last_released = f->ring ? f->ring->released() : f->last_released;
        f->last_gave_up = f->ring ? f->ring->gave_up() : f->last_gave_up;
        ConsFlow* cf = f->cons;
        if (cf != nullptr) {
            f->cons_completed = cf->completed;
            f->cons_verified = cf->verified;
            f->cons_errors = cf->verify_errors;
            f->cons = nullptr;
        }
        rte_ring* cq = f->pkt_cq;
        f->pkt_cq = nullptr;
        CompletionRing* ring = f->ring.release();
        f->ring_gone = true;
        f->detached = true;
        const uint16_t id = f->recv_id;
        // Other threads (the shell, telemetry) may still be reading these:
        // freed a second later. The id goes back with its memzone's name.
        later(now, [this, cf, cq, ring, id] {
            socket_delete(cf);
            rte_ring_free(cq);
            delete ring;
            recv_ids_.release(id, 1, rte_rdtsc());
        });
    }
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
