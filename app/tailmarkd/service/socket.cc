// The control socket: connections accepted (and refused), messages read and
// dispatched, replies and events sent.
#include "internal.h"

namespace tailmark::app {

bool Service::send_msg(SvcApp& app, const void* msg, size_t len, int fd, int fd2) {
    if (app.fd < 0)
        return false;
    if (!app.outq.empty() && fd < 0) { // keep the order
        if (app.outq.size() >= kMaxOutq)
            return false;
        const auto* b = static_cast<const uint8_t*>(msg);
        app.outq.emplace_back(b, b + len);
        return true;
    }
    iovec iov{const_cast<void*>(msg), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(2 * sizeof(int))];
    if (fd >= 0) {
        const int fds[2] = {fd, fd2};
        const size_t n = fd2 >= 0 ? 2 : 1;
        mh.msg_control = cbuf;
        mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    }
    // A message with a descriptor is never queued: an app that does not
    // read its socket while it waits for the answer to its own request is
    // broken, and is dropped.
    const ssize_t n = sendmsg(app.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(len))
        return true;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && fd < 0) {
        const auto* b = static_cast<const uint8_t*>(msg);
        app.outq.emplace_back(b, b + len);
        return true;
    }
    return false;
}

void Service::reply_ok(SvcApp& app, uint64_t req) {
    tm_msg_header h{TM_MSG_OK, sizeof(h), req};
    send_msg(app, &h, sizeof(h));
}

void Service::reply_error(SvcApp& app, uint64_t req, int err, const std::string& text) {
    tm_msg_error m{};
    m.h = {TM_MSG_ERROR, sizeof(m), req};
    m.err = err;
    snprintf(m.text, sizeof(m.text), "%s", text.c_str());
    send_msg(app, &m, sizeof(m));
}

// A refusal's WARNING, at most one a second: a local client that connects
// (or says a bad HELLO) in a loop must not make the control thread a log
// writer. The refusals
// not logged are counted and said with the next.
bool Service::log_refusal(uint64_t now) {
    if (now < refusal_log_tsc_) {
        refusals_unlogged_++;
        return false;
    }
    refusal_log_tsc_ = now + h_.tsc_hz;
    if (refusals_unlogged_ != 0)
        TM_LOG(WARNING, app, "service: %" PRIu64 " more connection(s) refused in the last second", refusals_unlogged_);
    refusals_unlogged_ = 0;
    return true;
}

// The peer's uid and groups, as the kernel saw them at connect (SO_PEERCRED,
// SO_PEERGROUPS): allowed when its uid is an --allow-uid or its primary or
// a supplementary group an --allow-group (defaults: ours).
bool Service::peer_allowed(int fd, std::string& who) {
    const Options& o = options();
    ucred cr{};
    socklen_t cl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
        who = std::string("SO_PEERCRED: ") + strerror(errno);
        return false;
    }
    who = "uid " + std::to_string(cr.uid) + " gid " + std::to_string(cr.gid) + " pid " + std::to_string(cr.pid);
    auto uid_ok = [&](uint32_t u) {
        return o.svc_allow_uids_set ? std::find(o.svc_allow_uids.begin(), o.svc_allow_uids.end(), u) != o.svc_allow_uids.end()
                                    : u == geteuid();
    };
    auto gid_ok = [&](uint32_t g) {
        return o.svc_allow_gids_set ? std::find(o.svc_allow_gids.begin(), o.svc_allow_gids.end(), g) != o.svc_allow_gids.end()
                                    : g == getegid();
    };
    if (uid_ok(cr.uid) || gid_ok(cr.gid))
        return true;
    gid_t groups[256];
    socklen_t gl = sizeof(groups);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) == 0)
        for (size_t i = 0; i < gl / sizeof(gid_t); i++)
            if (gid_ok(groups[i]))
                return true;
    return false;
}

void Service::accept_apps() {
    const Options& o = options();
    const uint64_t now = rte_rdtsc();
    for (;;) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        auto app = std::make_unique<SvcApp>();
        app->id = next_app_++;
        app->fd = fd;
        app->name.assign(1, '?'); // (a literal here trips GCC 12's -Wrestrict false positive)
        std::string who;
        if (!peer_allowed(fd, who)) {
            bump(ctl_.refused_peer);
            reply_error(*app, 0, EACCES, who + " may not attach to this daemon (--allow-uid, --allow-group)");
            if (log_refusal(now))
                TM_LOG(WARNING, app, "service: a connection of %s refused: not an allowed user or group", who.c_str());
            close(fd);
            continue;
        }
        uint32_t pending = 0;
        for (const auto& a : apps_)
            pending += !a->hello && !a->dead;
        if (pending >= o.svc_max_pending) {
            bump(ctl_.refused_pending);
            reply_error(*app, 0, EBUSY, std::to_string(pending) + " connections have not said HELLO yet (--max-pending " +
                                            std::to_string(o.svc_max_pending) + "); try again");
            if (log_refusal(now))
                TM_LOG(WARNING, app, "service: a connection of %s refused: --max-pending %u connections wait for "
                       "their HELLO", who.c_str(), o.svc_max_pending);
            close(fd);
            continue;
        }
        ucred cr{};
        socklen_t cl = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
            app->uid = cr.uid;
            app->gid = cr.gid;
            app->pid = static_cast<uint32_t>(cr.pid);
        }
        app->hello_by = now + h_.tsc_hz * kHelloTimeoutMs / 1000;
        apps_.push_back(std::move(app));
    }
}

// Connections that have not said HELLO in time are closed: their slot
// (--max-pending) is free again, and no application waits behind them.
void Service::expire_hellos(uint64_t now) {
    for (auto& ap : apps_) {
        SvcApp& a = *ap;
        if (a.hello || a.dead || now < a.hello_by)
            continue;
        bump(ctl_.hello_timeouts);
        reply_error(a, 0, ETIMEDOUT, "no HELLO within " + std::to_string(kHelloTimeoutMs) + " ms");
        drop_app(a, now, ("said no HELLO within " + std::to_string(kHelloTimeoutMs) + " ms").c_str());
    }
}

void Service::read_app(SvcApp& app, uint64_t now) {
    while (!app.outq.empty()) { // events it could not take before
        const std::vector<uint8_t>& b = app.outq.front();
        const ssize_t n = send(app.fd, b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n != static_cast<ssize_t>(b.size())) {
            drop_app(app, now, "its socket failed");
            return;
        }
        app.outq.pop_front();
    }
    for (int round = 0; round < 64 && !app.dead; round++) {
        alignas(8) uint8_t buf[kMaxMsg];
        alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
        iovec iov{buf, sizeof(buf)};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof(cbuf);
        const ssize_t n = recvmsg(app.fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n <= 0) {
            drop_app(app, now, n == 0 ? "detached (socket closed)" : "its socket failed");
            return;
        }
        int fds[kMaxFds];
        int nfds = 0;
        for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                const int k = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                for (int i = 0; i < k; i++) {
                    int fd;
                    memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                    if (nfds < kMaxFds)
                        fds[nfds++] = fd;
                    else
                        close(fd);
                }
            }
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
            for (int i = 0; i < nfds; i++)
                close(fds[i]);
            reply_error(app, 0, EPROTO, "a message larger than the channel allows");
            drop_app(app, now, "protocol error (message too large)");
            return;
        }
        handle(app, buf, static_cast<size_t>(n), fds, nfds, now);
        for (int i = 0; i < nfds; i++) // whatever was not kept
            if (fds[i] >= 0)
                close(fds[i]);
    }
}

void Service::handle(SvcApp& app, const uint8_t* msg, size_t len, const int* fds_in, int nfds, uint64_t now) {
    int* fds = const_cast<int*>(fds_in);
    tm_msg_header h;
    if (len < sizeof(h)) {
        drop_app(app, now, "protocol error (short message)");
        return;
    }
    memcpy(&h, msg, sizeof(h));
    auto need = [&](size_t n) {
        if (len >= n && h.len == len)
            return true;
        reply_error(app, h.req_id, EPROTO, "message type " + std::to_string(h.type) + ": wrong length");
        drop_app(app, now, "protocol error (wrong length)");
        return false;
    };
    if (!app.hello && h.type == TM_MSG_STATUS) { // tailmark-ctl: instead of HELLO
        tm_msg_status m;
        if (!need(sizeof(m)))
            return;
        memcpy(&m, msg, sizeof(m));
        on_status(app, m, now);
        return;
    }
    if (!app.hello && h.type != TM_MSG_HELLO) {
        reply_error(app, h.req_id, EPROTO, "HELLO first");
        drop_app(app, now, "protocol error (no HELLO)");
        return;
    }
    switch (h.type) {
    case TM_MSG_HELLO: {
        tm_msg_hello m;
        if (!need(sizeof(m)))
            return;
        memcpy(&m, msg, sizeof(m));
        if (app.hello) {
            reply_error(app, h.req_id, EPROTO, "HELLO twice");
            return;
        }
        on_hello(app, m, fds, nfds);
        if (nfds > 0)
            fds[0] = -1; // the arena: kept (or closed) by on_hello; any other is closed below
        return;
    }
    case TM_MSG_CONNECT: {
        tm_msg_connect m;
        if (!need(sizeof(m)))
            return;
        memcpy(&m, msg, sizeof(m));
        on_connect(app, m, now);
        return;
    }
    case TM_MSG_LISTEN: {
        tm_msg_listen m;
        if (!need(sizeof(m)))
            return;
        memcpy(&m, msg, sizeof(m));
        on_listen(app, m);
        return;
    }
    case TM_MSG_UNLISTEN: {
        tm_msg_listen m; // the port in the same place
        if (!need(sizeof(m)))
            return;
        memcpy(&m, msg, sizeof(m));
        on_unlisten(app, h.req_id, m.service);
        return;
    }
    case TM_MSG_CLOSE: {
        tm_msg_close m;
        if (!need(sizeof(m)))
            return;
        memcpy(&m, msg, sizeof(m));
        on_close(app, h.req_id, m.session, now);
        return;
    }
    case TM_MSG_BYE:
        reply_ok(app, h.req_id);
        drop_app(app, now, "detached (BYE)");
        return;
    default:
        reply_error(app, h.req_id, EPROTO, "unknown message type " + std::to_string(h.type));
        drop_app(app, now, "protocol error (unknown message)");
        return;
    }
}

} // namespace tailmark::app
