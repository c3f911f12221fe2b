#include "channel.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

using namespace tailmark::client;
namespace ch = tailmark::channel;

namespace {

constexpr int kRequestMs = 10000;     // HELLO, LISTEN, CLOSE: the daemon answers at once
constexpr int kConnectSlackMs = 10000; // CONNECT: the daemon's own timeout, plus this
constexpr int kConnectDefaultMs = 60000; // CONNECT with the daemon's timeout, which we do not know
constexpr int kEndedMs = 10000;       // tm_close: ENDED after OK
constexpr uint64_t kDefaultArena = 64ull << 20;
constexpr uint32_t kDefaultRing = 64;
constexpr uint32_t kDefaultMaxMsg = 1u << 20;

const char* default_socket() {
    const char* e = getenv("TAILMARK_SOCKET");
    return e != nullptr && *e != '\0' ? e : TM_DEFAULT_SOCKET;
}

void fmt_ip(uint32_t ip, char* out, size_t n) {
    const uint32_t be = htonl(ip);
    if (inet_ntop(AF_INET, &be, out, static_cast<socklen_t>(n)) == nullptr)
        snprintf(out, n, "?"); // set-up only (control path)
}

} // namespace

// --- attach ----------------------------------------------------------------

int tm_channel::not_attached() {
    return err.set(ENOTCONN, "not attached: %s", attach_msg_[0] != '\0' ? attach_msg_ : "tm_attach failed");
}

int tm_channel::attach(const tm_attach_opts* opts) {
    const char* path = opts != nullptr && opts->socket_path != nullptr ? opts->socket_path : default_socket();
    int rc = sock_.connect(path, err);
    if (rc == 0)
        rc = hello(opts);
    if (rc < 0)
        snprintf(attach_msg_, sizeof(attach_msg_), "%s", err.get()); // set-up only (control path)
    return rc;
}

int tm_channel::attach_fd(Fd sock, const tm_attach_opts* opts) {
    sock_.adopt(std::move(sock));
    const int rc = hello(opts);
    if (rc < 0)
        snprintf(attach_msg_, sizeof(attach_msg_), "%s", err.get()); // set-up only (control path)
    return rc;
}

int tm_channel::hello(const tm_attach_opts* opts) {
    const uint64_t bytes = opts != nullptr && opts->arena_bytes != 0 ? opts->arena_bytes : kDefaultArena;
    const char* no_huge = getenv("TAILMARK_NO_HUGETLB");
    const bool allow_huge = no_huge == nullptr || *no_huge == '\0' || strcmp(no_huge, "0") == 0;
    if (int rc = arena.create(bytes, allow_huge, err); rc < 0)
        return rc;

    ch::tm_msg_hello h{};
    h.h.type = ch::TM_MSG_HELLO;
    h.abi = ch::kChannelAbi;
    h.pid = static_cast<uint32_t>(getpid());
    h.arena_bytes = arena.size();
    h.page_size = arena.page_size();
    const char* name = opts != nullptr && opts->name != nullptr ? opts->name : program_invocation_short_name;
    snprintf(h.name, sizeof(h.name), "%s", name != nullptr ? name : ""); // set-up only (control path)
    const int fds[1] = {arena.fd()};
    SocketMessage r;
    if (int rc = sock_.request(&h, sizeof(h), fds, r, kRequestMs, "HELLO", err); rc < 0)
        return rc;
    ch::tm_msg_welcome w{};
    if (r.header().type != ch::TM_MSG_WELCOME || !r.read(w) || r.nfds != 2)
        return sock_.fail_broken(EPROTO, err,
                                 "HELLO: the daemon answered %s (%u bytes, %d fds), not WELCOME with its control "
                                 "memfd and wake fd",
                                 msg_type_name(r.header().type), r.len, r.nfds);
    if (int rc = bell_.map_control(std::move(r.fds[0]), w.control_bytes, std::move(r.fds[1]), err); rc < 0)
        return sock_.fail_broken(-rc, err, "%s", err.get());
    app_id = w.app_id;
    max_flows = w.max_flows;
    mtu = w.mtu;
    local_ip = w.local_ip;
    attached_ = true;
    return handle_events();
}

void tm_channel::bye() {
    if (!attached_ || sock_.broken())
        return;
    ch::tm_msg_header h{};
    h.type = ch::TM_MSG_BYE;
    LastError ignored;
    (void)sock_.post(&h, sizeof(h), ignored);
}

// --- events ----------------------------------------------------------------

int tm_channel::pump() {
    if (int rc = sock_.pump(err); rc < 0)
        return rc;
    return handle_events();
}

int tm_channel::handle_events() {
    auto& q = sock_.queue();
    while (!q.empty()) {
        SocketMessage m = std::move(q.front());
        q.pop_front();
        const ch::tm_msg_header h = m.header();
        if (h.req_id != 0) {
            // A reply we stopped waiting for. A session it opened is closed
            // again: nobody here knows it.
            ch::tm_msg_connected c{};
            if (h.type == ch::TM_MSG_CONNECTED && m.read(c))
                close_quietly(c.session);
            continue;
        }
        if (h.type == ch::TM_MSG_ACCEPTED) {
            ch::tm_msg_accepted a{};
            if (!m.read(a) || m.nfds != 1)
                return sock_.fail_broken(EPROTO, err, "the daemon sent an ACCEPTED of %u bytes with %d fds",
                                         m.len, m.nfds);
            accepts_.push_back(PendingAccept{a, std::move(m.fds[0]), 0});
        } else if (h.type == ch::TM_MSG_ENDED) {
            ch::tm_msg_ended e{};
            if (!m.read(e))
                return sock_.fail_broken(EPROTO, err, "the daemon sent an ENDED of %u bytes", m.len);
            const int reason = e.reason != 0 ? static_cast<int>(e.reason) : TM_END_OTHER;
            if (Session* s = find(e.session); s != nullptr && s->end_reason == 0)
                s->end_reason = reason;
            for (PendingAccept& p : accepts_)
                if (p.msg.session == e.session && p.end_reason == 0)
                    p.end_reason = reason;
            news_ = true;
        } else {
            return sock_.fail_broken(EPROTO, err, "the daemon sent %s as an event", msg_type_name(h.type));
        }
    }
    return 0;
}

void tm_channel::close_quietly(uint32_t session) {
    ch::tm_msg_close c{};
    c.h.type = ch::TM_MSG_CLOSE;
    c.session = session;
    LastError ignored;
    (void)sock_.post(&c, sizeof(c), ignored);
}

// --- sessions --------------------------------------------------------------

tm_channel::Session* tm_channel::find(tm_session s) {
    if (last_ != nullptr && last_->id() == s)
        return last_;
    for (auto& p : sessions_)
        if (p->id() == s)
            return last_ = p.get();
    return nullptr;
}

void tm_channel::add(std::unique_ptr<Session> s) {
    sessions_.push_back(std::move(s));
    rebuild_orders();
}

void tm_channel::erase(Session* s) {
    if (last_ == s)
        last_ = nullptr;
    if (s->closed && s->kind == Session::Kind::Connected)
        --closing_;
    std::erase_if(sessions_, [s](const std::unique_ptr<Session>& p) { return p.get() == s; });
    rebuild_orders();
}

void tm_channel::rebuild_orders() {
    send_order_.clear();
    recv_order_.clear();
    for (auto& p : sessions_) {
        for (uint16_t i = 0; i < p->send.size(); ++i)
            send_order_.push_back({p.get(), i});
        for (uint16_t i = 0; i < p->recv.size(); ++i)
            recv_order_.push_back({p.get(), i});
    }
    send_rr_ = send_order_.empty() ? 0 : send_rr_ % send_order_.size();
    recv_rr_ = recv_order_.empty() ? 0 : recv_rr_ % recv_order_.size();
}

int tm_channel::connect(const char* ipv4, uint16_t port, const tm_connect_opts* opts, tm_session* out) {
    in_addr a{};
    if (ipv4 == nullptr || inet_pton(AF_INET, ipv4, &a) != 1)
        return err.set(EINVAL, "tm_connect: '%s' is not an IPv4 address", ipv4 != nullptr ? ipv4 : "(null)");
    tm_connect_opts o{};
    if (opts != nullptr)
        o = *opts;
    if (o.nflows == 0)
        o.nflows = 1;
    if (o.ring_size == 0)
        o.ring_size = kDefaultRing;
    if (o.max_msg == 0)
        o.max_msg = kDefaultMaxMsg;
    if (!is_pow2(o.ring_size))
        return err.set(EINVAL, "tm_connect: ring_size %u is not a power of two", o.ring_size);
    if (max_flows != 0 && o.nflows > max_flows)
        return err.set(EINVAL, "tm_connect: %u flows, the daemon allows %u per session", o.nflows, max_flows);

    ch::tm_msg_connect m{};
    m.h.type = ch::TM_MSG_CONNECT;
    m.ip = ntohl(a.s_addr);
    m.service = port;
    m.nflows = o.nflows;
    m.ring_size = o.ring_size;
    m.max_msg = o.max_msg;
    m.timeout_ms = o.timeout_ms;
    if (o.secret != nullptr) {
        m.has_secret = 1;
        memcpy(m.secret, o.secret, sizeof(m.secret));
    }
    char what[48];
    snprintf(what, sizeof(what), "CONNECT %s:%u", ipv4, port); // set-up only (control path)
    const int wait_ms = o.timeout_ms != 0 ? static_cast<int>(std::min<uint32_t>(o.timeout_ms, 1u << 30)) + kConnectSlackMs
                                          : kConnectDefaultMs;
    SocketMessage r;
    int rc = sock_.request(&m, sizeof(m), {}, r, wait_ms, what, err);
    if (rc < 0) {
        if (!sock_.broken())
            (void)handle_events();
        return rc;
    }
    ch::tm_msg_connected c{};
    if (r.header().type != ch::TM_MSG_CONNECTED || !r.read(c) || r.nfds != 1)
        return sock_.fail_broken(EPROTO, err, "%s: the daemon answered %s (%u bytes, %d fds), not CONNECTED", what,
                                 msg_type_name(r.header().type), r.len, r.nfds);
    auto s = std::make_unique<Session>();
    s->kind = Session::Kind::Connected;
    if (find(c.session) != nullptr)
        rc = err.set(EPROTO, "%s: the daemon's session id %u is one we hold already", what, c.session);
    else if (c.max_msg == 0 || c.ring_size == 0)
        rc = err.set(EPROTO, "%s: CONNECTED with ring_size %u, max_msg %u", what, c.ring_size, c.max_msg);
    else
        rc = map_send_rings(c, r.fds[0].get(), s->mem, s->send, err);
    if (rc < 0) {
        close_quietly(c.session);
        return rc;
    }
    s->info.session = c.session;
    s->info.port = port;
    s->info.nflows = c.nflows;
    s->info.peer_ip = m.ip;
    s->info.peer_port = port;
    s->info.ring_size = c.ring_size;
    s->info.max_msg = c.max_msg;
    add(std::move(s));
    *out = c.session;
    return handle_events();
}

int tm_channel::listen(uint16_t port, const tm_listen_opts* opts) {
    ch::tm_msg_listen m{};
    m.h.type = ch::TM_MSG_LISTEN;
    m.service = port;
    if (opts != nullptr) {
        m.max_flows = opts->max_flows;
        m.max_ring = opts->max_ring;
        m.max_msg = opts->max_msg;
        if (opts->secret != nullptr) {
            m.has_secret = 1;
            memcpy(m.secret, opts->secret, sizeof(m.secret));
        }
    }
    char what[32];
    snprintf(what, sizeof(what), "LISTEN %u", port); // set-up only (control path)
    return request_ok(&m, sizeof(m), what);
}

// A request the daemon answers with OK (anything else breaks the channel),
// then whatever events came with the answer.
int tm_channel::request_ok(void* m, size_t len, const char* what) {
    SocketMessage r;
    int rc = sock_.request(m, len, {}, r, kRequestMs, what, err);
    if (rc == 0 && r.header().type != ch::TM_MSG_OK)
        rc = sock_.fail_broken(EPROTO, err, "%s: the daemon answered %s, not OK", what, msg_type_name(r.header().type));
    if (!sock_.broken())
        (void)handle_events();
    return rc;
}

// UNLISTEN has no message of its own in channel_abi.h: it is a tm_msg_listen
// with only `service` set (the daemon reads the port from there).
int tm_channel::unlisten(uint16_t port) {
    ch::tm_msg_listen m{};
    m.h.type = ch::TM_MSG_UNLISTEN;
    m.service = port;
    char what[32];
    snprintf(what, sizeof(what), "UNLISTEN %u", port); // set-up only (control path)
    return request_ok(&m, sizeof(m), what);
}

int tm_channel::accept(int timeout_ms, tm_session_info* info) {
    const int64_t deadline = timeout_ms > 0 ? monotonic_ns() + static_cast<int64_t>(timeout_ms) * 1000000 : 0;
    for (;;) {
        if (int rc = pump(); rc < 0)
            return rc;
        if (!accepts_.empty()) {
            PendingAccept p = std::move(accepts_.front());
            accepts_.pop_front();
            return open_accepted(p, info);
        }
        if (timeout_ms == 0)
            return 0;
        int wait = -1;
        if (timeout_ms > 0) {
            const int64_t left = deadline - monotonic_ns();
            if (left <= 0)
                return 0;
            wait = static_cast<int>((left + 999999) / 1000000);
        }
        SocketMessage m;
        const int rc = sock_.receive(m, wait, err);
        if (rc < 0)
            return rc;
        if (rc > 0)
            sock_.queue().push_back(std::move(m));
    }
}

int tm_channel::open_accepted(PendingAccept& p, tm_session_info* info) {
    using ull = unsigned long long;
    const ch::tm_msg_accepted& a = p.msg;
    char peer[INET_ADDRSTRLEN];
    fmt_ip(a.peer_ip, peer, sizeof(peer));
    auto s = std::make_unique<Session>();
    s->kind = Session::Kind::Accepted;
    int rc = 0;
    const bool geometry_ok = a.nflows != 0 && is_pow2(a.ring_size) && a.ring_size <= (1u << 24) && a.max_msg != 0;
    const uint64_t need = geometry_ok ? tailmark::ring_layout(a.ring_size, a.max_msg).total : 0;
    if (find(a.session) != nullptr)
        rc = err.set(EPROTO, "ACCEPTED: session id %u is one we hold already", a.session);
    else if (!geometry_ok)
        rc = err.set(EPROTO, "ACCEPTED: session %u from %s: %u flows, ring %u, max_msg %u", a.session, peer, a.nflows,
                     a.ring_size, a.max_msg);
    else if (a.flow_stride % 4096 != 0 || a.flow_stride < need || a.recv_bytes / a.flow_stride < a.nflows)
        rc = err.set(EPROTO, "ACCEPTED: %u flows at stride %llu (a ring takes %llu) in %llu bytes", a.nflows,
                     static_cast<ull>(a.flow_stride), static_cast<ull>(need), static_cast<ull>(a.recv_bytes));
    else if (const int64_t have = fd_size(p.fd.get()); have < 0 || static_cast<uint64_t>(have) < a.recv_bytes)
        rc = err.set(EPROTO, "ACCEPTED: the receive memfd holds %lld bytes, not the %llu announced",
                     static_cast<long long>(have), static_cast<ull>(a.recv_bytes));
    else if (rc = Mapping::map(p.fd.get(), a.recv_bytes, s->mem); rc < 0)
        rc = err.set(-rc, "ACCEPTED: mmap of the receive rings (%llu bytes): %s", static_cast<ull>(a.recv_bytes),
                     strerror(-rc));
    if (rc == 0) {
        s->recv.resize(a.nflows);
        for (uint16_t i = 0; i < a.nflows && rc == 0; ++i) {
            rc = RecvRing::open(s->mem.data() + i * a.flow_stride, a.flow_stride, a.ring_size, a.max_msg,
                                s->recv[i], err);
            if (rc < 0)
                rc = err.set(-rc, "ACCEPTED: session %u flow %u: %s", a.session, i, err.get());
        }
    }
    if (rc < 0) {
        close_quietly(a.session); // the daemon keeps nothing we cannot read
        return rc;
    }
    s->info.session = a.session;
    s->info.port = a.service;
    s->info.nflows = a.nflows;
    s->info.peer_ip = a.peer_ip;
    s->info.peer_port = a.peer_port;
    s->info.ring_size = a.ring_size;
    s->info.max_msg = a.max_msg;
    s->end_reason = p.end_reason;
    if (info != nullptr)
        *info = s->info;
    add(std::move(s));
    return 1;
}

int tm_channel::session_state(tm_session s) {
    if (int rc = pump(); rc < 0)
        return rc;
    const Session* p = find(s);
    if (p == nullptr)
        return err.set(ENOENT, "no session %u on this channel", s);
    return p->end_reason;
}

int tm_channel::session_info(tm_session s, tm_session_info* info) {
    const Session* p = find(s);
    if (p == nullptr)
        return err.set(ENOENT, "no session %u on this channel", s);
    *info = p->info;
    return 0;
}

int tm_channel::close(tm_session s) {
    Session* p = find(s);
    if (p == nullptr)
        return err.set(ENOENT, "tm_close: no session %u on this channel", s);
    if (p->closed)
        return 0;
    int result = 0;
    if (p->end_reason == 0) {
        ch::tm_msg_close c{};
        c.h.type = ch::TM_MSG_CLOSE;
        c.session = s;
        char what[32];
        snprintf(what, sizeof(what), "CLOSE %u", s); // set-up only (control path)
        SocketMessage r;
        int rc = sock_.request(&c, sizeof(c), {}, r, kRequestMs, what, err);
        if (rc == -ENOENT) { // the daemon has let it go already: its ENDED is on its way or gone
            p->end_reason = TM_END_CLOSED;
            rc = 0;
        } else if (rc == 0 && r.header().type != ch::TM_MSG_OK) {
            rc = sock_.fail_broken(EPROTO, err, "%s: the daemon answered %s, not OK", what,
                                   msg_type_name(r.header().type));
        }
        if (rc < 0)
            return rc;
        if (int e = handle_events(); e < 0)
            return e;
        // ENDED says every completion is in the rings (or, receiving, that
        // nothing more is written): only then are the rings ours to drop.
        const int64_t deadline = monotonic_ns() + static_cast<int64_t>(kEndedMs) * 1000000;
        while (p->end_reason == 0) {
            const int64_t left = deadline - monotonic_ns();
            if (left <= 0) {
                p->end_reason = TM_END_CLOSED;
                result = err.set(ETIMEDOUT, "tm_close: the daemon sent no ENDED for session %u within %d ms "
                                 "(closed here anyway)", s, kEndedMs);
                break;
            }
            SocketMessage m;
            rc = sock_.receive(m, static_cast<int>((left + 999999) / 1000000), err);
            if (rc < 0)
                return rc;
            if (rc > 0) {
                sock_.queue().push_back(std::move(m));
                if (int e = handle_events(); e < 0)
                    return e;
            }
        }
    }
    if (p->kind == Session::Kind::Accepted || p->drained()) {
        erase(p);
    } else {
        p->closed = true;
        ++closing_;
    }
    return result;
}

void tm_channel::reap_closed() {
    for (size_t i = 0; i < sessions_.size() && closing_ > 0;) {
        Session* p = sessions_[i].get();
        if (p->closed && p->drained())
            erase(p);
        else
            ++i;
    }
}

// --- data path -------------------------------------------------------------

int tm_channel::send(tm_session s, uint16_t flow, const void* buf, size_t len, uint64_t cookie) {
    Session* p = find(s);
    if (p == nullptr)
        return err.set(ENOENT, "tm_send: no session %u on this channel", s);
    if (p->kind != Session::Kind::Connected)
        return err.set(EINVAL, "tm_send: session %u was accepted, not connected: it only receives", s);
    if (p->end_reason != 0 || p->closed)
        return err.set(EPIPE, "tm_send: session %u has ended (%s)", s, tm_end_reason_name(p->end_reason));
    if (flow >= p->send.size())
        return err.set(EINVAL, "tm_send: flow %u, session %u has %zu", flow, s, p->send.size());
    if (len > p->info.max_msg)
        return err.set(EMSGSIZE, "tm_send: %zu bytes, the session's max_msg is %u", len, p->info.max_msg);
    if (buf == nullptr || !arena.contains(buf, len))
        return err.set(EINVAL, "tm_send: the buffer (%p, %zu bytes) is not inside the channel's arena", buf, len);
    ch::tm_sqe e{};
    e.offset = arena.offset_of(buf);
    e.len = static_cast<uint32_t>(len);
    e.cookie = cookie;
    if (!p->send[flow].sq.push(e)) {
        if (int rc = idle_pump(); rc < 0)
            return rc;
        return err.set_static(EAGAIN, "tm_send: the flow's submission ring is full (poll completions, tm_wait)");
    }
    return 0;
}

int tm_channel::poll_completions(tm_completion* out, int max) {
    if (out == nullptr || max <= 0)
        return err.set(EINVAL, "tm_poll_completions: no room given (max %d)", max);
    int n = 0;
    const size_t count = send_order_.size();
    for (size_t k = 0; k < count && n < max; ++k) {
        const FlowRef f = send_order_[(send_rr_ + k) % count];
        for (ch::tm_cqe c; n < max;) {
            const int rc = f.s->send[f.flow].cq.pop(&c);
            if (rc == 0)
                break;
            if (rc < 0)
                return sock_.fail_broken(EPROTO, err, "session %u flow %u: the completion ring's head is past "
                                         "its size (the daemon broke it)", f.s->id(), f.flow);
            out[n++] = tm_completion{c.cookie, f.s->id(), f.flow, c.status, c.reason, c.msg_id};
        }
    }
    if (count != 0)
        send_rr_ = (send_rr_ + 1) % count; // the next call starts at the next flow
    if (closing_ > 0)
        reap_closed();
    if (n == 0)
        if (int rc = idle_pump(); rc < 0)
            return rc;
    return n;
}

int tm_channel::recv(tm_session s, uint16_t flow, tm_message* msg) {
    Session* p = find(s);
    if (p == nullptr)
        return err.set(ENOENT, "tm_recv: no session %u on this channel", s);
    if (p->kind != Session::Kind::Accepted)
        return err.set(EINVAL, "tm_recv: session %u was connected, not accepted: it only sends", s);
    if (flow >= p->recv.size())
        return err.set(EINVAL, "tm_recv: flow %u, session %u has %zu", flow, s, p->recv.size());
    RecvView v;
    const int rc = p->recv[flow].next(&v, err);
    if (rc == 1) {
        *msg = tm_message{v.data, v.len, s, flow, v.msg_id};
        return 1;
    }
    if (rc == 0)
        if (int e = idle_pump(); e < 0)
            return e;
    return rc;
}

int tm_channel::recv_any(tm_message* msg) {
    const size_t count = recv_order_.size();
    for (size_t k = 0; k < count; ++k) {
        const size_t i = (recv_rr_ + k) % count;
        const FlowRef f = recv_order_[i];
        RecvView v;
        const int rc = f.s->recv[f.flow].next(&v, err);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            recv_rr_ = (i + 1) % count; // fair: the next call starts after this flow
            *msg = tm_message{v.data, v.len, f.s->id(), f.flow, v.msg_id};
            return 1;
        }
    }
    if (int rc = idle_pump(); rc < 0)
        return rc;
    return 0;
}

tm_channel::Session* tm_channel::recv_session(tm_session s, uint16_t flow, const char* call, int* rc) {
    Session* p = find(s);
    if (p == nullptr)
        *rc = err.set(ENOENT, "%s: no session %u on this channel", call, s);
    else if (p->kind != Session::Kind::Accepted || flow >= p->recv.size())
        *rc = err.set(EINVAL, "%s: session %u has no receive flow %u", call, s, flow);
    else
        return p;
    return nullptr;
}

int tm_channel::release(const tm_message* msg) {
    int rc = 0;
    Session* p = recv_session(msg->session, msg->flow, "tm_release", &rc);
    return p == nullptr ? rc : p->recv[msg->flow].release(msg->msg_id, err);
}

// --- waiting ---------------------------------------------------------------

bool tm_channel::ready() {
    if (news_ || !accepts_.empty())
        return true;
    for (const FlowRef& f : recv_order_)
        if (f.s->recv[f.flow].ready())
            return true;
    return completions_ready();
}

bool tm_channel::completions_ready() const {
    for (const FlowRef& f : send_order_)
        if (!f.s->send[f.flow].cq.empty())
            return true;
    return false;
}

int tm_channel::wait(int timeout_ms) {
    if (int rc = pump(); rc < 0)
        return rc;
    const int rc = bell_.wait(sock_.fd(), timeout_ms, [this] { return ready(); }, [this] { return pump(); }, err);
    if (rc == 1)
        news_ = false;
    return rc;
}

// A send completion of any flow, or (s != 0) one receive flow's next
// message, or a session's end (which comes through the socket: news_, as
// tm_wait takes it). Other flows' messages neither return nor wake us
// (kWantSent): a message this app will take only later leaves it asleep.
int tm_channel::wait_sent(tm_session s, uint16_t flow, int timeout_ms) {
    const tailmark::client::RecvRing* ring = nullptr;
    uint64_t want = tailmark::channel::kWantSent;
    if (s != 0) {
        int rc = 0;
        Session* p = recv_session(s, flow, "tm_wait_sent", &rc);
        if (p == nullptr)
            return rc;
        ring = &p->recv[flow];
        want |= tailmark::channel::tm_want_flow(s, flow);
    }
    if (int rc = pump(); rc < 0)
        return rc;
    const int rc = bell_.wait(sock_.fd(), timeout_ms,
                              [&] { return news_ || completions_ready() || (ring != nullptr && ring->ready()); },
                              [this] { return pump(); }, err, want);
    if (rc == 1)
        news_ = false;
    return rc;
}

// One receive flow: its next message, or its session's end. Other flows'
// messages neither return nor wake us (tm_doorbell.want); news_ stays for
// tm_wait.
int tm_channel::wait_flow(tm_session s, uint16_t flow, int timeout_ms) {
    int rc = 0;
    Session* p = recv_session(s, flow, "tm_wait_flow", &rc);
    if (p == nullptr)
        return rc;
    if ((rc = pump()) < 0)
        return rc;
    // pump() may end the session, never drop it: p stays valid until tm_close.
    const tailmark::client::RecvRing& ring = p->recv[flow];
    return bell_.wait(sock_.fd(), timeout_ms, [&] { return ring.ready() || p->end_reason != 0; },
                      [this] { return pump(); }, err, tailmark::channel::tm_want_flow(s, flow));
}
