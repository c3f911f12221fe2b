// Sessions opened and accepted for applications: the decision on a peer's
// proposal, their flows installed on the engine, and the news handed to
// the application (CONNECTED, ACCEPTED, ENDED).
#include "internal.h"

namespace tailmark::app {

// A copied packet takes at most TxMarker::kMaxSegs mbufs: only zero copy
// (one extbuf segment a packet) takes the loopback's 60 KiB.
uint32_t Service::local_mtu() const {
    return zero_copy_ && h_.node.engine().has_loopback() ? engine::kLoopbackMtu : options().mtu;
}

// A listener's acceptance: the receive rings in a memfd the app will map,
// one CompletionRing per flow, installed before the ACCEPT goes out.
AcceptDecision Service::decide(uint16_t port, Session& s, const FlowParams& p) {
    AcceptDecision d;
    const Options& o = options();
    auto it = listeners_.find(port);
    auto refuse = [&](RefuseReason r, uint64_t ours, uint64_t theirs) {
        d = AcceptDecision{};
        d.reason = r;
        d.expected = ours;
        d.got = theirs;
        TM_LOG(WARNING, app, "service: session from %s to port %u refused: %s (ours %" PRIu64 ", theirs %" PRIu64 ")",
               to_string(s.peer).c_str(), port, to_string(r), ours, theirs);
        return d;
    };
    if (it == listeners_.end() || it->second->dead)
        return refuse(RefuseReason::NoListener, 0, port);
    SvcApp& app = *it->second;
    if (p.nflows == 0 || p.nflows > kMaxFlowsPerSession)
        return refuse(RefuseReason::Flows, kMaxFlowsPerSession, p.nflows);
    if (p.ring_size < 2 || p.ring_size > kMaxRing || (p.ring_size & (p.ring_size - 1)) != 0)
        return refuse(RefuseReason::RingSize, kMaxRing, p.ring_size);
    // Between two applications of this daemon, local_mtu() (the connector
    // proposed it, apps.cc), else the port's.
    const uint32_t mtu = std::min(p.mtu, s.local_peer ? local_mtu() : o.mtu);
    const uint32_t stride = stride_for_mtu(mtu, p.version);
    const GroupPlan plan = plan_group(p.max_msg, stride);
    if (!plan.ok())
        return refuse(RefuseReason::Mtu, o.mtu, p.mtu);
    const uint64_t flow_stride = (ring_layout(p.ring_size, p.max_msg).total + 4095) / 4096 * 4096;
    const uint64_t total = flow_stride * p.nflows;
    if (total > (o.svc_max_session_mb << 20))
        return refuse(RefuseReason::NoRoom, o.svc_max_session_mb << 20, total);
    if (p.nflows > flows().room())
        return refuse(RefuseReason::NoRoom, flows().room(), p.nflows);
    if (p.nflows > h_.node.engine().min_recv_room()) // some would be refused by a full Receiver: their data dropped
        return refuse(RefuseReason::NoRoom, h_.node.engine().min_recv_room(), p.nflows);
    const int base = flows().recv_ids().alloc(p.nflows, rte_rdtsc());
    if (base < 0)
        return refuse(RefuseReason::NoRoom, 65536, p.nflows);

    auto ss = std::make_unique<SvcSession>();
    ss->app = &app;
    ss->connector = false;
    ss->port = port;
    ss->peer = s.peer;
    ss->s = &s;
    ss->sid = s.id;
    ss->nflows = p.nflows;
    ss->ring_size = p.ring_size;
    ss->max_msg = p.max_msg;
    ss->flow_stride = flow_stride;
    uint64_t len = total;
    void* map = nullptr;
    ss->memfd = make_memfd("tailmark-recv", len, map, true);
    if (ss->memfd < 0) {
        flows().recv_ids().unuse(static_cast<uint32_t>(base), p.nflows); // refused: no packet carried them
        return refuse(RefuseReason::NoRoom, 0, total);
    }
    ss->mem.addr = map;
    ss->mem.len = len;

    d.agreed = p;
    d.agreed.mtu = mtu;
    d.agreed.keys_given = false;
    d.agreed.key = static_cast<uint32_t>(rte_rand());
    d.agreed.overrides.clear();
    d.local_base = static_cast<uint16_t>(base);
    d.defer = true; // ACCEPT once the lcores hold the flows
    s.params = d.agreed;
    s.local_base = d.local_base;
    s.user = ss.get();

    auto a = AppSession::of(s, false);
    a->user = ss.get();
    ss->a = a.get();
    std::string err;
    bool ok = true;
    for (uint16_t i = 0; i < p.nflows && ok; i++) {
        FlowCtx* f = socket_new<FlowCtx>(rx_socket());
        if (f == nullptr || !flows().add_flow(f, rte_rdtsc())) {
            socket_delete(f);
            ok = false;
            break;
        }
        f->gen_id = i;
        f->ring_size = p.ring_size;
        f->pkts_per_msg = plan.pkt_count;
        f->recv_session = f->session = a.get();
        a->flows.push_back(f);
        f->ring = CompletionRing::create_at(static_cast<uint8_t*>(map) + i * flow_stride, flow_stride,
                                            static_cast<uint16_t>(base + i), p.ring_size, p.max_msg);
        ok = f->ring != nullptr && flows().make_recv(*f, *a, s, static_cast<uint16_t>(base + i), i, err);
        if (ok)
            ss->recv.push_back(f->ring.get());
    }
    if (!ok) { // nothing reached an lcore
        TM_LOG(ERR, app, "service: session from %s: %s", to_string(s.peer).c_str(),
               err.empty() ? "out of memory" : err.c_str());
        for (FlowCtx* f : a->ctxs()) {
            flows().free_recv(*f);
            flows().abandon(*f);
        }
        flows().publish();
        flows().recv_ids().unuse(static_cast<uint32_t>(base), p.nflows); // refused: no packet carried them
        s.user = nullptr;
        d = AcceptDecision{};
        d.reason = RefuseReason::NoRoom;
        return d;
    }
    for (FlowCtx* f : a->ctxs())
        flows().post_recv(*f, *a);
    flows().publish();
    TM_LOG(INFO, app, "service: session %u from %s to port %u (%s): %u flows, ring %u, max %u B, data v%u%s", s.id,
           to_string(s.peer).c_str(), port, app.label().c_str(), p.nflows, p.ring_size, p.max_msg,
           unsigned(s.params.version), s.params.data_auth ? " with --data-auth" : "");
    app.sessions.push_back(ss.get());
    flows().add_session(std::move(a));
    std::lock_guard<std::mutex> lk(counters_mu_);
    sessions_.push_back(std::move(ss));
    return d;
}

void Service::install_send(SvcSession& ss, Session& s, uint64_t now) {
    (void)now;
    SvcApp& app = *ss.app;
    AppSession& a = *ss.a;
    AppSession* peer_side = static_cast<AppSession*>(flows().local_peer(s));
    const uint32_t ring = s.params.ring_size;
    ss.sq_size = pow2_at_least(uint64_t(ring) * 2);
    ss.cq_size = ss.sq_size;
    const tm_send_layout l = tm_send_rings(ss.sq_size, ss.cq_size);
    ss.flow_stride = l.total;
    uint64_t len = l.total * s.params.nflows;
    void* map = nullptr;
    ss.memfd = make_memfd("tailmark-send", len, map, false);
    if (ss.memfd < 0) {
        TM_LOG(ERR, app, "service: session %u: send rings: %s", s.id, strerror(errno));
        table().close(&s, now); // ends it: the CONNECT is answered then
        return;
    }
    ss.mem.addr = map;
    ss.mem.len = len;
    const GroupPlan plan = plan_group(s.params.max_msg, stride_for_mtu(s.params.mtu, s.params.version));
    for (uint16_t i = 0; i < s.params.nflows; i++) {
        uint8_t* base = static_cast<uint8_t*>(map) + i * l.total;
        auto* q = reinterpret_cast<tm_spsc*>(base + l.sq);
        auto* c = reinterpret_cast<tm_spsc*>(base + l.cq);
        q->size = ss.sq_size;
        q->entry_bytes = sizeof(tm_sqe);
        c->size = ss.cq_size;
        c->entry_bytes = sizeof(tm_cqe);

        FlowCtx* f = socket_new<FlowCtx>(tx_socket());
        auto* sf = static_cast<SvcSendFlow*>(rte_zmalloc_socket("tm_svc_flow", sizeof(SvcSendFlow), 64, tx_socket()));
        if (f == nullptr || sf == nullptr || !flows().add_flow(f, now)) {
            socket_delete(f);
            rte_free(sf);
            TM_LOG(ERR, app, "service: session %u: out of memory (flow %u)", s.id, i);
            table().close(&s, now);
            return;
        }
        new (sf) SvcSendFlow();
        sf->sq = q;
        sf->sqe = reinterpret_cast<const tm_sqe*>(base + l.sqe);
        sf->cq = c;
        sf->cqe = reinterpret_cast<tm_cqe*>(base + l.cqe);
        sf->sq_mask = ss.sq_size - 1;
        sf->cq_mask = ss.cq_size - 1;
        sf->arena = static_cast<const uint8_t*>(app.arena.addr);
        sf->arena_len = app.arena.len;
        sf->arena_iova = reinterpret_cast<rte_iova_t>(app.arena.addr);
        sf->zero_copy = app.zero_copy;
        sf->max_msg = s.params.max_msg;
        sf->nshinfo = ring * 2;
        char name[RTE_RING_NAMESIZE];
        snprintf(name, sizeof(name), "tm_svh_%u", ring_names_++); // names are process-wide
        sf->free_shinfo = rte_ring_create_elem(name, sizeof(uint32_t), sf->nshinfo, tx_socket(),
                                               RING_F_SC_DEQ | RING_F_EXACT_SZ);
        auto* holds = static_cast<SvcHold*>(rte_zmalloc_socket("tm_svc_holds", sizeof(SvcHold) * sf->nshinfo, 64,
                                                                tx_socket()));
        {
            std::lock_guard<std::mutex> lk(counters_mu_);
            ss.send.push_back(sf);
        }
        f->gen_id = i;
        f->ring_size = ring;
        f->pkts_per_msg = plan.pkt_count;
        f->session = f->send_session = &a;
        a.flows.push_back(f);
        if (sf->free_shinfo == nullptr || holds == nullptr) {
            rte_free(holds);
            TM_LOG(ERR, app, "service: session %u: out of memory (flow %u)", s.id, i);
            table().close(&s, now);
            return;
        }
        sf->shinfo = reinterpret_cast<rte_mbuf_ext_shared_info*>(holds);
        for (uint32_t k = 0; k < sf->nshinfo; k++) {
            holds[k].sh.free_cb = svc_shinfo_free;
            holds[k].sh.fcb_opaque = &holds[k];
            holds[k].owner = sf;
            holds[k].index = k;
            rte_ring_sp_enqueue_elem(sf->free_shinfo, &k, sizeof(k));
        }
        if (peer_side != nullptr && i < peer_side->flows.size() && peer_side->flows[i]->recv != nullptr)
            if (auto* ps = static_cast<SvcSession*>(peer_side->user); ps != nullptr) {
                ss.local_peer = ps;
                ps->local_peer = &ss;
            }
        engine::Sessions::SendOpen o;
        o.ring_size = ring;
        o.report = true;
        o.payload = app.zero_copy ? PayloadMode::ZeroCopy : PayloadMode::Copy; // extbufs over the arena, or copies
        o.user = sf;
        if (!flows().open_send(*f, a, s, i, flows().send_queue_for(s, i), o)) {
            TM_LOG(ERR, app, "service: session %u: out of memory (send state of flow %u)", s.id, i);
            table().close(&s, now);
            return;
        }
    }
    flows().publish();
}

void Service::on_session(Session& s, uint64_t now) {
    auto* ss = static_cast<SvcSession*>(s.user);
    if (ss == nullptr)
        return; // refused before any of ours was made
    if (s.state == SessionState::Established) {
        if (!ss->connector) {
            if (ss->a != nullptr && ss->a->stage == AppSession::Stage::Installing) {
                ss->a->stage = AppSession::Stage::Live;
                ss->a->up_tsc = now;
            }
            accepted(*ss, now);
            return;
        }
        if (ss->a != nullptr)
            return;
        auto a = AppSession::of(s, true);
        a->user = ss;
        a->up_tsc = now; // (tailmark-ctl's up_s)
        ss->a = &app_of(flows().add_session(std::move(a)));
        TM_LOG(INFO, app, "service: session %u to %s up: %u flows, MTU %u, ring %u, data v%u%s%s", s.id, to_string(s.peer).c_str(),
               s.params.nflows, s.params.mtu, s.params.ring_size, unsigned(s.params.version),
               s.params.data_auth ? " with --data-auth" : "", s.local_peer ? " (this daemon)" : "");
        install_send(*ss, s, now);
        if (ss->a->pending == 0 && s.state == SessionState::Established) {
            ss->a->stage = AppSession::Stage::Live;
            connected(*ss);
        }
        return;
    }
    if (s.state != SessionState::Ended)
        return;
    if (ss->end == SessionEnd::None)
        ss->end = s.end;
    ss->s = nullptr; // forgotten by the control loop once its flows are out
    if (ss->a == nullptr) { // never came up
        if (ss->connector && !ss->answered) {
            ss->answered = true;
            int err = ECONNRESET;
            std::string why = to_string(s.end);
            switch (s.end) {
            case SessionEnd::Refused:
            case SessionEnd::BadAccept:
                err = ECONNREFUSED;
                why = std::string("refused by ") + to_string(s.peer) + ": " + to_string(s.refuse) + " (theirs " +
                      std::to_string(s.refuse_expected) + ", ours " + std::to_string(s.refuse_got) + ")";
                break;
            case SessionEnd::NoAnswer:
                err = ETIMEDOUT;
                why = "no answer from " + ip_to_string(s.peer.ip) + " port " + std::to_string(ss->port) +
                      " (is an application listening there, with the same secret?)";
                break;
            case SessionEnd::ArpFailed:
                err = EHOSTUNREACH;
                if (const uint32_t hop = table().next_hop(s.peer.ip); hop != s.peer.ip)
                    why = "the gateway " + ip_to_string(hop) + " did not answer ARP";
                else
                    why = ip_to_string(s.peer.ip) + " did not answer ARP (on another subnet? the daemon needs --gateway)";
                break;
            default:
                break;
            }
            if (ss->app != nullptr)
                reply_error(*ss->app, ss->req, err, why);
        }
        ss->gone = ss->quiet = true; // nothing reached the data plane
        return;
    }
    // Both ends here: the other end goes too, at once (its Senders read
    // this end's cursors, which are let go a second after its flows).
    if (ss->local_peer != nullptr && ss->local_peer->s != nullptr && ss->local_peer->s->state != SessionState::Ended) {
        ss->local_peer->end = SessionEnd::PeerClosed; // what its application is told
        table().close(ss->local_peer->s, now);
    }
    AppSession& a = *ss->a;
    a.end = s.end;
    a.down_tsc = now;
    TM_LOG(INFO, app, "service: session %u %s %s ended: %s", s.id, ss->connector ? "to" : "from",
           to_string(s.peer).c_str(), to_string(ss->end));
    flows().detach(a, now);
    if (a.stage == AppSession::Stage::Gone)
        on_stage(a, now);
}

void Service::on_stage(AppSession& a, uint64_t now) {
    auto* ss = static_cast<SvcSession*>(a.user);
    if (ss == nullptr)
        return;
    if (ss->connector && a.stage == AppSession::Stage::Live && !ss->told_up && ss->s != nullptr &&
        ss->s->state == SessionState::Established) {
        connected(*ss);
        return;
    }
    if (a.stage != AppSession::Stage::Gone || ss->gone)
        return;
    ss->gone = true;
    if (ss->connector && !ss->answered && ss->app != nullptr) { // failed while installing
        ss->answered = true;
        reply_error(*ss->app, ss->req, ECONNRESET, std::string("session ended while opening: ") + to_string(ss->end));
    }
    ended(*ss);
    later(now, [ss] { ss->quiet = true; });
}

void Service::connected(SvcSession& ss) {
    ss.told_up = true;
    ss.answered = true;
    if (ss.app == nullptr || ss.app->dead)
        return;
    tm_msg_connected m{};
    m.h = {TM_MSG_CONNECTED, sizeof(m), ss.req};
    m.session = ss.sid;
    m.nflows = ss.nflows;
    m.ring_size = ss.s ? ss.s->params.ring_size : ss.ring_size;
    m.max_msg = ss.s ? ss.s->params.max_msg : ss.max_msg;
    m.sq_size = ss.sq_size;
    m.cq_size = ss.cq_size;
    m.send_bytes = ss.mem.len;
    m.flow_stride = ss.flow_stride;
    hand_over(ss, &m, sizeof(m), "CONNECTED");
}

// Sends m with the session's memfd; the daemon's copy of the fd goes (the
// mapping stays), so the memory is the application's and ours alone.
void Service::hand_over(SvcSession& ss, const void* m, size_t len, const char* what) {
    if (!send_msg(*ss.app, m, len, ss.memfd))
        TM_LOG(WARNING, app, "service: %s: %s not delivered", ss.app->label().c_str(), what);
    close(ss.memfd);
    ss.memfd = -1;
}

void Service::accepted(SvcSession& ss, uint64_t now) {
    (void)now;
    if (ss.told_up || ss.app == nullptr || ss.app->dead)
        return;
    ss.told_up = true;
    tm_msg_accepted m{};
    m.h = {TM_MSG_ACCEPTED, sizeof(m), 0};
    m.session = ss.sid;
    m.service = ss.port;
    m.nflows = ss.nflows;
    m.peer_ip = ss.peer.ip;
    m.peer_port = ss.peer.port;
    m.ring_size = ss.ring_size;
    m.max_msg = ss.max_msg;
    m.recv_bytes = ss.mem.len;
    m.flow_stride = ss.flow_stride;
    hand_over(ss, &m, sizeof(m), "ACCEPTED");
}

void Service::ended(SvcSession& ss) {
    if (ss.told_end || !ss.told_up || ss.app == nullptr || ss.app->dead)
        return;
    ss.told_end = true;
    tm_msg_ended m{};
    m.h = {TM_MSG_ENDED, sizeof(m), 0};
    m.session = ss.sid;
    m.reason = end_reason(ss.end);
    send_msg(*ss.app, &m, sizeof(m));
}

// Closes an application's session. A receiving one waits, a little, until
// its last ACK carries every release its application made: those messages
// were consumed, and the sender must hear "delivered", not the CLOSE first
// and "closed" for them (the ACK and the CLOSE leave on one ring, in order).
void Service::close_session(SvcSession& ss, uint64_t now) {
    if (ss.s == nullptr || ss.s->state == SessionState::Ended)
        return;
    if (ss.connector || ss.a == nullptr || ss.s->local_peer) {
        table().close(ss.s, now);
        return;
    }
    for (const auto& c : closing_)
        if (c.first == &ss)
            return;
    closing_.emplace_back(&ss, now + h_.tsc_hz * kCloseFlushUs / 1000000);
}

void Service::finish_closes(uint64_t now) {
    for (size_t i = 0; i < closing_.size();) {
        SvcSession& ss = *closing_[i].first;
        bool flushed = true;
        if (ss.a != nullptr)
            for (const FlowCtx* f : ss.a->ctxs())
                if (f->recv != nullptr && f->ring && Receiver::released_sent(f->recv) != f->ring->released())
                    flushed = false;
        if (!flushed && now < closing_[i].second) {
            i++;
            continue;
        }
        if (ss.s != nullptr && ss.s->state != SessionState::Ended)
            table().close(ss.s, now);
        closing_.erase(closing_.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

} // namespace tailmark::app
