// Applications: HELLO (the arena mapped and registered), CONNECT, LISTEN,
// UNLISTEN and CLOSE, and an application going away (its sessions closed,
// its memory let go once nothing holds it), and its wake-ups.
#include "internal.h"

namespace tailmark::app {

// HELLO: refused (and counted) for the reasons below, else the arena is
// mapped and the app welcomed with its doorbell and wake pipe.
void Service::on_hello(SvcApp& app, const tm_msg_hello& m, const int* fds, int nfds) {
    if (app.pid == 0) // the kernel's (SO_PEERCRED) when it told us
        app.pid = m.pid;
    app.name.assign(m.name, strnlen(m.name, sizeof(m.name)));
    for (char& c : app.name)
        if (c < 32 || c > 126)
            c = '?';
    const int arena_fd = nfds > 0 ? fds[0] : -1;
    if (admit(app, m, nfds, arena_fd) && map_arena(app, m, arena_fd))
        welcome(app, m);
}

// A refused HELLO: answered, counted, logged (at most once a second), and
// the arena's fd closed.
void Service::refuse_hello(SvcApp& app, uint64_t req, int err, const std::string& text, int arena_fd) {
    bump(ctl_.refused_hello);
    reply_error(app, req, err, text);
    if (log_refusal(rte_rdtsc()))
        TM_LOG(WARNING, app, "service: %s: HELLO refused: %s", app.label().c_str(), text.c_str());
    if (arena_fd >= 0)
        close(arena_fd);
}

// The ABI, --max-apps, and the arena as declared: its fd, page size, size
// and seals. False: refused (arena_fd closed).
bool Service::admit(SvcApp& app, const tm_msg_hello& m, int nfds, int arena_fd) {
    const uint64_t req = m.h.req_id;
    const Options& o = options();
    auto fail = [&](int err, const std::string& text) {
        refuse_hello(app, req, err, text, arena_fd);
        return false;
    };
    if (m.abi != kChannelAbi)
        return fail(EPROTO, "channel ABI " + std::to_string(m.abi) + " is not the daemon's " +
                                std::to_string(kChannelAbi) + " (a library from another build)");
    uint32_t attached = 0;
    for (const auto& a : apps_)
        attached += a->hello && !a->dead;
    if (attached >= o.svc_max_apps) {
        bump(ctl_.refused_apps);
        reply_error(app, req, EBUSY, "the daemon serves --max-apps " + std::to_string(o.svc_max_apps) +
                                         " applications already");
        if (log_refusal(rte_rdtsc()))
            TM_LOG(WARNING, app, "service: %s: HELLO refused: --max-apps %u applications attached",
                   app.label().c_str(), o.svc_max_apps);
        if (arena_fd >= 0)
            close(arena_fd);
        return false;
    }
    if (nfds != 1)
        return fail(EINVAL, "HELLO carries one fd, the arena memfd (it carried " + std::to_string(nfds) +
                                "; the wake fd is the daemon's, in WELCOME)");
    if (m.page_size != 4096 && m.page_size != kHuge && m.page_size != (1u << 30))
        return fail(EINVAL, "arena page size " + std::to_string(m.page_size) + " is not 4 KiB, 2 MiB or 1 GiB");
    if (m.arena_bytes > o.svc_max_arena)
        return fail(EFBIG, "an arena of " + std::to_string(m.arena_bytes) + " bytes is over the daemon's --max-arena " +
                               std::to_string(o.svc_max_arena));
    struct stat st{};
    if (m.arena_bytes == 0 || m.arena_bytes % m.page_size != 0 || fstat(arena_fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) < m.arena_bytes)
        return fail(EINVAL, "arena of " + std::to_string(m.arena_bytes) +
                                " bytes: not a whole number of pages, or larger than its memfd");
    // Mapped by us and written by the app: its size must not shrink under
    // our mapping (a page past the end of the file is SIGBUS on the tx lcore).
    const int seals = fcntl(arena_fd, F_GET_SEALS);
    if (seals < 0 || (seals & F_SEAL_SHRINK) == 0)
        return fail(EINVAL, std::string("the arena memfd is not sealed against shrinking (F_SEAL_SHRINK") +
                                (seals < 0 ? ": not a memfd made with MFD_ALLOW_SEALING" : "") +
                                "): the daemon maps only arenas whose size cannot change under it");
    return true;
}

// The arena, mapped (and for zero copy registered with DPDK and DMA-mapped).
// False: refused (arena_fd closed).
bool Service::map_arena(SvcApp& app, const tm_msg_hello& m, int arena_fd) {
    const uint64_t req = m.h.req_id;
    const Options& o = options();
    // Read only, and nothing prefaulted: the size is the app's to declare,
    // so the control loop touches none of it (the tx lcore faults in what
    // it sends).
    void* a = mmap(nullptr, m.arena_bytes, PROT_READ, MAP_SHARED, arena_fd, 0);
    if (a == MAP_FAILED) {
        refuse_hello(app, req, errno, std::string("arena mmap: ") + strerror(errno), arena_fd);
        return false;
    }
    close(arena_fd);
    app.arena.addr = a;
    app.arena.len = m.arena_bytes;
    app.page_size = m.page_size;
    app.zero_copy = zero_copy_;
    // Zero copy: registered with DPDK (one memseg per page: the loop's
    // longest step, bounded by --max-arena) and DMA-mapped for the ports at
    // IOVA = this process's address (what svc_source gives the extbufs).
    // Virtual devices need no DMA map (ENOTSUP). Copies need neither.
    if (!app.zero_copy)
        return true;
    if (rte_extmem_register(a, m.arena_bytes, nullptr, 0, m.page_size) != 0) {
        app.arena.reset();
        bump(ctl_.refused_hello);
        reply_error(app, req, rte_errno, std::string("rte_extmem_register: ") + rte_strerror(rte_errno));
        return false;
    }
    app.registered = true;
    for (uint16_t port : {o.tx_port, o.rx_port}) {
        rte_eth_dev_info info;
        if (rte_eth_dev_info_get(port, &info) != 0 || info.device == nullptr)
            continue;
        bool have = false;
        for (rte_device* d : app.dma)
            have = have || d == info.device;
        if (have)
            continue;
        if (rte_dev_dma_map(info.device, a, reinterpret_cast<uint64_t>(a), m.arena_bytes) == 0)
            app.dma.push_back(info.device);
    }
    return true;
}

// WELCOME, with the app's doorbell (a control memfd) and the read end of
// its wake pipe.
void Service::welcome(SvcApp& app, const tm_msg_hello& m) {
    const uint64_t req = m.h.req_id;
    const Options& o = options();
    // The wake-ups: a pipe, its write end ours alone (O_NONBLOCK on our own
    // open file description: nothing the app does to its end makes our
    // write block), its read end the app's.
    int wake[2];
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        bump(ctl_.refused_hello);
        reply_error(app, req, errno, std::string("wake pipe: ") + strerror(errno));
        return;
    }
    uint64_t clen = sizeof(tm_doorbell);
    void* cmap = nullptr;
    const int cfd = make_memfd("tailmark-control", clen, cmap, false);
    if (cfd < 0) {
        const int err = errno;
        close(wake[0]);
        close(wake[1]);
        bump(ctl_.refused_hello);
        reply_error(app, req, err, std::string("control memfd: ") + strerror(err));
        return;
    }
    app.control.addr = cmap;
    app.control.len = clen;
    app.bell = static_cast<tm_doorbell*>(cmap);
    app.wake_fd = wake[1];
    app.hello = true;
    bump(ctl_.attached);
    tm_msg_welcome w{};
    w.h = {TM_MSG_WELCOME, sizeof(w), req};
    w.app_id = app.id;
    w.max_flows = kMaxFlowsPerSession;
    w.control_bytes = clen;
    w.mtu = o.mtu;
    w.local_ip = o.src_ip;
    send_msg(app, &w, sizeof(w), cfd, wake[0]);
    close(cfd);
    close(wake[0]);
    TM_LOG(INFO, app, "service: %s (uid %u) attached: arena %" PRIu64 " MiB (%s pages)%s%s", app.label().c_str(),
           app.uid, m.arena_bytes >> 20, m.page_size == 4096 ? "4 KiB" : "huge", app.dma.empty() ? "" : ", DMA-mapped",
           app.zero_copy ? "" : ", copied");
}

void Service::on_connect(SvcApp& app, const tm_msg_connect& m, uint64_t now) {
    const uint64_t req = m.h.req_id;
    const Options& o = options();
    if (m.nflows == 0 || m.nflows > kMaxFlowsPerSession)
        return reply_error(app, req, EINVAL, "nflows " + std::to_string(m.nflows) + " is outside 1.." +
                                                 std::to_string(kMaxFlowsPerSession));
    if (m.ring_size < 2 || m.ring_size > kMaxRing || (m.ring_size & (m.ring_size - 1)) != 0)
        return reply_error(app, req, EINVAL, "ring_size " + std::to_string(m.ring_size) +
                                                 " is not a power of two in 2.." + std::to_string(kMaxRing));
    if (!plan_group(m.max_msg, stride_for_mtu(o.mtu, kVersion2)).ok()) // the smaller stride: either version fits
        return reply_error(app, req, EINVAL, "max_msg " + std::to_string(m.max_msg) + " needs more than " +
                                                 std::to_string(kMaxPktsPerMessage) + " packets at MTU " +
                                                 std::to_string(o.mtu));
    if (m.ip == 0 || m.service == 0)
        return reply_error(app, req, EINVAL, "no peer address or port");
    const int base = flows().send_ids().alloc(m.nflows, now);
    if (base < 0)
        return reply_error(app, req, ENOSPC, "no flow ids left for " + std::to_string(m.nflows) + " flows");
    auto ss = std::make_unique<SvcSession>();
    ss->app = &app;
    ss->connector = true;
    ss->req = req;
    ss->port = m.service;
    // A loopback address is this daemon's own: another of its applications.
    ss->peer = {(m.ip >> 24) == 127 ? o.src_ip : m.ip, o.udp_port};
    ss->nflows = m.nflows;
    ss->ring_size = m.ring_size;
    ss->max_msg = m.max_msg;
    FlowParams p;
    p.nflows = m.nflows;
    // To another application of this daemon: the in-memory loopback's MTU.
    p.mtu = ss->peer.ip == o.src_ip ? local_mtu() : o.mtu;
    p.ring_size = m.ring_size;
    p.max_msg = m.max_msg;
    p.key = static_cast<uint32_t>(rte_rand());
    p.keys_given = false; // the acceptor chooses
    p.version = static_cast<uint8_t>(o.data_version);
    p.data_auth = o.data_auth;
    SipKey key = h_.secret;
    if (m.has_secret)
        memcpy(&key, m.secret, sizeof(key));
    Session* s = table().connect(ss->peer, m.service, key, p, static_cast<uint16_t>(base), nullptr, now, ss.get());
    if (s == nullptr) {
        flows().send_ids().unuse(static_cast<uint32_t>(base), m.nflows); // no CONNECT named them
        return reply_error(app, req, ENOSPC, "the session table is full");
    }
    ss->s = s;
    ss->sid = s->id;
    app.sessions.push_back(ss.get());
    TM_LOG(INFO, app, "service: %s connecting to %s:%u (session %u, %u flows, ring %u, max %u B)", app.label().c_str(),
           ip_to_string(ss->peer.ip).c_str(), m.service, s->id, m.nflows, m.ring_size, m.max_msg);
    std::lock_guard<std::mutex> lk(counters_mu_);
    sessions_.push_back(std::move(ss));
}

void Service::on_listen(SvcApp& app, const tm_msg_listen& m) {
    const uint64_t req = m.h.req_id;
    if (m.service == 0)
        return reply_error(app, req, EINVAL, "port 0");
    auto it = listeners_.find(m.service);
    if (it != listeners_.end())
        return reply_error(app, req, EBUSY, "port " + std::to_string(m.service) + " has a listener: " +
                                                it->second->label());
    SipKey key = h_.secret;
    if (m.has_secret)
        memcpy(&key, m.secret, sizeof(key));
    struct Limits {
        uint16_t flows;
        uint32_t ring, msg;
    } lim{m.max_flows, m.max_ring, m.max_msg};
    const uint16_t port = m.service;
    if (!table().listen(port, key, [this, port, lim](Session& s, const FlowParams& p) {
            AcceptDecision d;
            auto refuse = [&](RefuseReason r, uint64_t ours, uint64_t theirs) {
                d.reason = r;
                d.expected = ours;
                d.got = theirs;
                TM_LOG(WARNING, app, "service: session from %s to port %u refused: %s (ours %" PRIu64
                       ", theirs %" PRIu64 ")", to_string(s.peer).c_str(), port, to_string(r), ours, theirs);
                return d;
            };
            if (lim.flows != 0 && p.nflows > lim.flows)
                return refuse(RefuseReason::Flows, lim.flows, p.nflows);
            if (lim.ring != 0 && p.ring_size > lim.ring)
                return refuse(RefuseReason::RingSize, lim.ring, p.ring_size);
            if (lim.msg != 0 && p.max_msg > lim.msg)
                return refuse(RefuseReason::MsgSize, lim.msg, p.max_msg);
            return decide(port, s, p);
        })) {
        return reply_error(app, req, ENOSPC, "cannot listen on port " + std::to_string(port));
    }
    listeners_[port] = &app;
    reply_ok(app, req);
    TM_LOG(INFO, app, "service: %s listens on port %u", app.label().c_str(), port);
}

void Service::on_unlisten(SvcApp& app, uint64_t req, uint16_t port) {
    auto it = listeners_.find(port);
    if (it == listeners_.end() || it->second != &app)
        return reply_error(app, req, ENOENT, "not listening on port " + std::to_string(port));
    table().unlisten(port);
    listeners_.erase(it);
    reply_ok(app, req);
}

void Service::on_close(SvcApp& app, uint64_t req, uint32_t session, uint64_t now) {
    for (SvcSession* ss : app.sessions)
        if (ss->sid == session) {
            close_session(*ss, now);
            reply_ok(app, req); // ENDED follows once its flows are out
            return;
        }
    reply_error(app, req, ENOENT, "no session " + std::to_string(session) + " of this application");
}

// --- applications going away --------------------------------------------------------

void Service::drop_app(SvcApp& app, uint64_t now, const char* why) {
    if (app.dead)
        return;
    app.dead = true;
    TM_LOG(INFO, app, "service: %s %s; closing its %zu session(s)", app.label().c_str(), why, app.sessions.size());
    // Its arena stays mapped while any message's shared info is out: the
    // Sender holds it for retransmission, and packets in a port's tx queue,
    // the fault shim or a local peer's rx path point into it. reap() unmaps
    // it once every one came back (before closing: the holds are still there).
    uint32_t held = 0;
    for (const SvcSession* ss : app.sessions)
        for (const SvcSendFlow* f : ss->send)
            held += f->shinfo_out();
    if (held > 0 && app.arena.addr != nullptr) {
        bump(ctl_.arenas_deferred);
        TM_LOG(INFO, app, "service: %s: its arena stays mapped until %u message(s) in flight are let go",
               app.label().c_str(), held);
    }
    for (auto it = listeners_.begin(); it != listeners_.end();)
        if (it->second == &app) {
            table().unlisten(it->first);
            it = listeners_.erase(it);
        } else {
            ++it;
        }
    for (SvcSession* ss : app.sessions)
        close_session(*ss, now); // Ended: its flows are failed and taken out
    if (app.fd >= 0)
        close(app.fd);
    app.fd = -1;
    app.outq.clear();
}

// A session whose flows are out, a second ago, whose every shared info is
// back (no mbuf references the arena through it): its memory goes. An app
// that is gone, with no session left: its arena goes.
void Service::reap(uint64_t now) {
    (void)now;
    for (size_t i = 0; i < sessions_.size();) {
        SvcSession* ss = sessions_[i].get();
        bool free = ss->gone && ss->quiet;
        if (!ss->connector && ss->local_peer != nullptr) // its cursors are read by the local connector's flows
            free = free && ss->local_peer->gone && ss->local_peer->quiet;
        for (SvcSendFlow* f : ss->send)
            free = free && f->shinfo_out() == 0;
        if (!free) {
            i++;
            continue;
        }
        free_send_memory(*ss);
        if (ss->a != nullptr)
            ss->a->user = nullptr;
        if (ss->local_peer != nullptr)
            ss->local_peer->local_peer = nullptr;
        if (ss->app != nullptr) {
            auto& v = ss->app->sessions;
            v.erase(std::remove(v.begin(), v.end(), ss), v.end());
        }
        std::lock_guard<std::mutex> lk(counters_mu_);
        sessions_.erase(sessions_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    for (size_t i = 0; i < apps_.size();) {
        SvcApp& a = *apps_[i];
        if (!a.dead || !a.sessions.empty()) {
            i++;
            continue;
        }
        for (rte_device* d : a.dma)
            rte_dev_dma_unmap(d, a.arena.addr, reinterpret_cast<uint64_t>(a.arena.addr), a.arena.len);
        if (a.registered && rte_extmem_unregister(a.arena.addr, a.arena.len) != 0)
            TM_LOG(WARNING, app, "service: %s: rte_extmem_unregister: %s", a.label().c_str(), rte_strerror(rte_errno));
        a.registered = false;
        if (a.arena.addr != nullptr) { // every session's shared infos are back: no mbuf points into it
            a.arena.reset();
            bump(ctl_.arenas_released);
        }
        if (a.wake_fd >= 0)
            close(a.wake_fd);
        a.wake_fd = -1;
        if (a.hello) // (not for tailmark-ctl's connections)
            TM_LOG(INFO, app, "service: %s: memory released", a.label().c_str());
        apps_.erase(apps_.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

namespace {
// What a sleeping app may be woken for: a completion on any of its send
// flows; a message on any of its receive flows; the next message of one.
bool has_completion(const SvcApp& a) {
    for (const SvcSession* ss : a.sessions)
        for (const SvcSendFlow* f : ss->send)
            if (__atomic_load_n(&f->cq->head, __ATOMIC_ACQUIRE) != __atomic_load_n(&f->cq->tail, __ATOMIC_ACQUIRE))
                return true;
    return false;
}

bool has_message(const SvcApp& a) {
    for (const SvcSession* ss : a.sessions)
        if (!ss->gone)
            for (CompletionRing* r : ss->recv)
                if (r->poll(r->released()) != nullptr)
                    return true;
    return false;
}

// A flow we cannot find (the app's word is bounds-checked) wakes it, as
// anything would.
bool flow_ready(const SvcApp& a, uint32_t sid, uint16_t flow) {
    for (const SvcSession* ss : a.sessions)
        if (ss->sid == sid && !ss->connector)
            return ss->gone || flow >= ss->recv.size() || ss->recv[flow]->poll(ss->recv[flow]->released()) != nullptr;
    return true;
}
} // namespace

// Sleeping applications with something to take are woken, once per sleep:
// for anything (want 0), or for what their word names (channel_abi.h).
void Service::wake(uint64_t now) {
    (void)now;
    for (auto& ap : apps_) {
        SvcApp& a = *ap;
        if (a.dead || a.bell == nullptr || __atomic_load_n(&a.bell->sleeping, __ATOMIC_SEQ_CST) == 0)
            continue;
        const uint64_t want = __atomic_load_n(&a.bell->want, __ATOMIC_RELAXED);
        bool ready;
        if ((want & (channel::kWantFlow | channel::kWantSent)) == 0) {
            ready = has_completion(a) || has_message(a);
        } else {
            ready = (want & channel::kWantSent) != 0 && has_completion(a);
            if (!ready && (want & channel::kWantFlow) != 0)
                ready = flow_ready(a, static_cast<uint32_t>((want & ~(channel::kWantFlow | channel::kWantSent)) >> 16),
                                   static_cast<uint16_t>(want & 0xffff));
        }
        if (ready && __atomic_exchange_n(&a.bell->sleeping, 0u, __ATOMIC_SEQ_CST) != 0) {
            // Our own non-blocking end: a full pipe (the app never drains it,
            // or wrote into it) is EAGAIN, and it has a byte to wake on anyway.
            const uint8_t one = 1;
            if (write(a.wake_fd, &one, 1) == 1)
                __atomic_store_n(&a.bell->wakes, a.bell->wakes + 1, __ATOMIC_RELAXED);
            else if (errno == EPIPE) // its reader is gone (SIGPIPE is ignored: signals.cc)
                bump(ctl_.wake_closed);
            else
                bump(ctl_.wake_full);
        }
    }
}

} // namespace tailmark::app
