// fake_tailmarkd: the daemon's side of channel_abi.h with a loopback for a
// data plane, so that tailmark-cat (and anything else on libtailmark-client)
// can be driven end to end without DPDK or a network: a CONNECT to a port
// some attached application listens on becomes an ACCEPTED session there,
// each submission is copied into that session's receive ring, and its
// release there is its DELIVERED completion. The doorbell is honoured as
// the real daemon's control loop does it.
//
//   fake_tailmarkd SOCKET_PATH
//   FAKE_FAIL_AFTER=N: after N deliveries a session fails: its messages in
//   flight complete FAILED (retry limit), both ends get ENDED (peer timeout).
//
// It prints one line per event on stdout ("listen 7000", "connected 1 ...",
// "ended ...") for a test script to wait on. Test code: one process, one
// thread, every application trusted to be the library.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "fake_daemon.h"

using namespace tmtest;

namespace {

struct App {
    DaemonEnd d;
    uint32_t id = 0;
    Mapping arena;
    uint64_t arena_len = 0;
    Fd wake;
    Memfd control;
    bool hello = false;
    bool gone = false;
    abi::tm_doorbell* db() const { return reinterpret_cast<abi::tm_doorbell*>(control.data()); }
};

struct Flow {
    // the sender's rings
    abi::tm_spsc *sq = nullptr, *cq = nullptr;
    abi::tm_sqe* sqe = nullptr;
    abi::tm_cqe* cqe = nullptr;
    uint32_t sq_size = 0, cq_size = 0;
    // the receiver's ring
    uint8_t* ring = nullptr;
    uint32_t next_id = 0;
    std::deque<std::pair<uint32_t, uint64_t>> inflight; // msg_id, cookie
};

struct Link {
    uint32_t send_session = 0, recv_session = 0;
    App* sender = nullptr;
    App* receiver = nullptr;
    SendSide send;
    Memfd recv;
    uint64_t recv_stride = 0;
    uint32_t ring = 0, max_msg = 0;
    std::vector<Flow> flows;
    bool ended = false;
    uint64_t delivered = 0;
};

struct Listener {
    App* app;
    abi::tm_msg_listen limits;
};

class Service {
public:
    explicit Service(const char* path) {
        const char* f = getenv("FAKE_FAIL_AFTER");
        fail_after_ = f != nullptr ? strtoull(f, nullptr, 10) : 0;
        lfd_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        unlink(path);
        if (bind(lfd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(lfd_.get(), 16) != 0) {
            perror("fake_tailmarkd: bind");
            exit(1);
        }
        say("ready %s", path);
    }

    void run(const std::atomic<bool>& stop) {
        while (!stop) {
            std::vector<pollfd> p{{lfd_.get(), POLLIN, 0}};
            for (auto& a : apps_)
                p.push_back({a->d.fd.get(), POLLIN, 0});
            // A tick every millisecond while sessions live, as the real control loop.
            poll(p.data(), p.size(), links_.empty() ? 100 : 1);
            try { // an application that went away while we wrote to it: noticed on its next read
                if (p[0].revents & POLLIN)
                    accept_app();
                for (size_t i = 1; i < p.size(); ++i)
                    if (p[i].revents != 0)
                        read_app(*apps_[i - 1]);
                std::erase_if(apps_, [](const std::unique_ptr<App>& a) { return a->gone; });
                tick();
            } catch (const std::exception& e) {
                say("error %s", e.what());
            }
        }
    }

private:
    static void say(const char* fmt, ...) __attribute__((format(printf, 1, 2))) {
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
    }

    void accept_app() {
        const int fd = accept4(lfd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        auto a = std::make_unique<App>();
        a->d.fd.reset(fd);
        a->id = next_app_++;
        apps_.push_back(std::move(a));
    }

    void read_app(App& a) {
        Msg m = a.d.recv(0);
        if (m.bytes.empty() || m.type() == abi::TM_MSG_BYE) {
            drop_app(a);
            return;
        }
        const uint64_t req = m.header().req_id;
        switch (m.type()) {
        case abi::TM_MSG_HELLO: {
            const auto h = m.as<abi::tm_msg_hello>();
            if (h.abi != abi::kChannelAbi || m.fds.size() != 2) {
                a.d.error(req, EPROTO, "bad HELLO");
                drop_app(a);
                return;
            }
            a.arena_len = h.arena_bytes;
            if (Mapping::map(m.fds[0].get(), h.arena_bytes, a.arena) != 0) {
                a.d.error(req, ENOMEM, "cannot map the arena");
                return;
            }
            a.wake = std::move(m.fds[1]);
            a.control = Memfd::make(4096);
            abi::tm_msg_welcome w{};
            w.app_id = a.id;
            w.max_flows = 64;
            w.control_bytes = 4096;
            w.mtu = 1500;
            a.d.send(w, abi::TM_MSG_WELCOME, req, a.control.fd.get());
            a.hello = true;
            say("hello %u %s page %u", a.id, h.name, h.page_size);
            break;
        }
        case abi::TM_MSG_LISTEN: {
            const auto l = m.as<abi::tm_msg_listen>();
            if (listeners_.count(l.service) != 0) {
                a.d.error(req, EBUSY, "port has a listener");
                return;
            }
            listeners_[l.service] = Listener{&a, l};
            a.d.ok(req);
            say("listen %u", l.service);
            break;
        }
        case abi::TM_MSG_UNLISTEN: {
            const auto l = m.as<abi::tm_msg_listen>();
            auto it = listeners_.find(l.service);
            if (it == listeners_.end() || it->second.app != &a) {
                a.d.error(req, ENOENT, "not listening there");
                return;
            }
            listeners_.erase(it);
            a.d.ok(req);
            say("unlisten %u", l.service);
            break;
        }
        case abi::TM_MSG_CONNECT:
            connect(a, req, m.as<abi::tm_msg_connect>());
            break;
        case abi::TM_MSG_CLOSE: {
            const uint32_t s = m.as<abi::tm_msg_close>().session;
            for (auto& l : links_)
                if (!l->ended && ((l->sender == &a && l->send_session == s) ||
                                  (l->receiver == &a && l->recv_session == s))) {
                    a.d.ok(req);
                    end(*l, l->sender == &a ? abi::TM_END_CLOSED : abi::TM_END_PEER_CLOSED,
                        l->receiver == &a ? abi::TM_END_CLOSED : abi::TM_END_PEER_CLOSED, abi::TM_FAIL_CLOSED);
                    return;
                }
            a.d.error(req, ENOENT, "no such session");
            break;
        }
        default:
            a.d.error(req, EPROTO, "unexpected message");
        }
    }

    void connect(App& a, uint64_t req, const abi::tm_msg_connect& c) {
        auto it = listeners_.find(c.service);
        if (it == listeners_.end()) {
            a.d.error(req, ECONNREFUSED, "nobody listens on that port");
            return;
        }
        const abi::tm_msg_listen& lim = it->second.limits;
        if ((lim.max_flows != 0 && c.nflows > lim.max_flows) || (lim.max_ring != 0 && c.ring_size > lim.max_ring) ||
            (lim.max_msg != 0 && c.max_msg > lim.max_msg)) {
            char t[200];
            snprintf(t, sizeof(t), "the peer refused: flows %u ring %u max_msg %u over its limits %u %u %u",
                     c.nflows, c.ring_size, c.max_msg, lim.max_flows, lim.max_ring, lim.max_msg);
            a.d.error(req, ECONNREFUSED, t);
            return;
        }
        auto l = std::make_unique<Link>();
        l->sender = &a;
        l->receiver = it->second.app;
        l->send_session = next_session_++;
        l->recv_session = next_session_++;
        l->ring = c.ring_size;
        l->max_msg = c.max_msg;
        l->send = SendSide::make(c.nflows, c.ring_size, 2 * c.ring_size);
        uint64_t recv_bytes = 0;
        l->recv = make_recv(c.nflows, c.ring_size, c.max_msg, l->recv_stride, recv_bytes);
        l->flows.resize(c.nflows);
        for (uint16_t f = 0; f < c.nflows; ++f) {
            Flow& fl = l->flows[f];
            uint8_t* base = l->send.mem.data() + f * l->send.stride;
            fl.sq = l->send.sq(f);
            fl.cq = l->send.cq(f);
            fl.sqe = reinterpret_cast<abi::tm_sqe*>(base + l->send.l.sqe);
            fl.cqe = reinterpret_cast<abi::tm_cqe*>(base + l->send.l.cqe);
            fl.sq_size = l->send.sq_size;
            fl.cq_size = l->send.cq_size;
            fl.ring = l->recv.data() + f * l->recv_stride;
        }
        // The listener hears of it first, as the real daemon's handshake would have it.
        l->receiver->d.accepted(l->recv_session, c.service, c.nflows, c.ring_size, c.max_msg, l->recv_stride, l->recv,
                                recv_bytes);
        a.d.connected(req, l->send_session, l->send, c.ring_size, c.max_msg);
        say("connected %u->%u flows %u ring %u max_msg %u", l->send_session, l->recv_session, c.nflows, c.ring_size,
            c.max_msg);
        links_.push_back(std::move(l));
    }

    // The send side's messages in flight fail with `fail`, every completion
    // before its ENDED; the receive side gets its ENDED with nothing more written.
    void end(Link& l, uint32_t send_reason, uint32_t recv_reason, uint8_t fail) {
        if (l.ended)
            return;
        l.ended = true;
        for (Flow& f : l.flows) {
            for (auto& [id, cookie] : f.inflight)
                push_cqe(f, abi::tm_cqe{cookie, id, abi::TM_FAILED, fail, 0});
            f.inflight.clear();
        }
        if (!l.sender->gone)
            l.sender->d.ended(l.send_session, send_reason);
        if (!l.receiver->gone)
            l.receiver->d.ended(l.recv_session, recv_reason);
        say("ended %u (%u) %u (%u) after %llu", l.send_session, send_reason, l.recv_session, recv_reason,
            static_cast<unsigned long long>(l.delivered));
    }

    void drop_app(App& a) {
        a.gone = true;
        for (auto& l : links_)
            if (l->sender == &a || l->receiver == &a)
                end(*l, abi::TM_END_PEER_CLOSED, abi::TM_END_PEER_CLOSED, abi::TM_FAIL_CLOSED);
        std::erase_if(listeners_, [&a](const auto& kv) { return kv.second.app == &a; });
        std::erase_if(links_, [&a](const std::unique_ptr<Link>& l) { return l->sender == &a || l->receiver == &a; });
        say("bye %u", a.id);
    }

    static bool push_cqe(Flow& f, const abi::tm_cqe& c) {
        std::atomic_ref<uint32_t> head(f.cq->head), tail(f.cq->tail);
        const uint32_t h = head.load(std::memory_order_relaxed);
        if (h - tail.load(std::memory_order_acquire) >= f.cq_size)
            return false; // never: taking a submission reserved its room
        f.cqe[h & (f.cq_size - 1)] = c;
        head.store(h + 1, std::memory_order_release);
        return true;
    }

    void tick() {
        for (auto& lp : links_) {
            Link& l = *lp;
            if (l.ended)
                continue;
            for (Flow& f : l.flows) {
                auto* cur = reinterpret_cast<tailmark::ConsumerCursor*>(f.ring + tailmark::ring_layout(1, 1).cursor);
                const uint32_t rel = std::atomic_ref<uint32_t>(cur->released).load(std::memory_order_acquire);
                while (!f.inflight.empty() && static_cast<int32_t>(rel - f.inflight.front().first) > 0) {
                    if (fail_after_ != 0 && l.delivered >= fail_after_)
                        break;
                    push_cqe(f, abi::tm_cqe{f.inflight.front().second, f.inflight.front().first, abi::TM_DELIVERED,
                                            0, 0});
                    f.inflight.pop_front();
                    ++l.delivered;
                }
                for (;;) {
                    std::atomic_ref<uint32_t> sq_head(f.sq->head), sq_tail(f.sq->tail);
                    const uint32_t cq_used = std::atomic_ref<uint32_t>(f.cq->head).load(std::memory_order_relaxed) -
                                             std::atomic_ref<uint32_t>(f.cq->tail).load(std::memory_order_acquire);
                    if (cq_used + f.inflight.size() + 1 > f.cq_size || f.next_id - rel >= l.ring)
                        break;
                    const uint32_t t = sq_tail.load(std::memory_order_relaxed);
                    if (t == sq_head.load(std::memory_order_acquire))
                        break;
                    const abi::tm_sqe e = f.sqe[t & (f.sq_size - 1)];
                    sq_tail.store(t + 1, std::memory_order_release);
                    if (e.len > l.max_msg || e.offset > l.sender->arena_len || e.len > l.sender->arena_len - e.offset) {
                        push_cqe(f, abi::tm_cqe{e.cookie, ~0u, abi::TM_FAILED, abi::TM_FAIL_INVALID, 0});
                        continue;
                    }
                    complete(f.ring, f.next_id, {l.sender->arena.data() + e.offset, e.len});
                    f.inflight.emplace_back(f.next_id, e.cookie);
                    ++f.next_id;
                }
            }
            if (fail_after_ != 0 && l.delivered >= fail_after_)
                end(l, abi::TM_END_PEER_TIMEOUT, abi::TM_END_PEER_TIMEOUT, abi::TM_FAIL_RETRY_LIMIT);
        }
        ring_doorbells();
    }

    bool has_work(const App& a) const {
        for (auto& l : links_) {
            for (const Flow& f : l->flows) {
                if (l->sender == &a && std::atomic_ref<uint32_t>(f.cq->head).load(std::memory_order_acquire) !=
                                           std::atomic_ref<uint32_t>(f.cq->tail).load(std::memory_order_acquire))
                    return true;
                auto* cur = reinterpret_cast<tailmark::ConsumerCursor*>(f.ring + tailmark::ring_layout(1, 1).cursor);
                if (l->receiver == &a && !l->ended &&
                    std::atomic_ref<uint32_t>(cur->released).load(std::memory_order_acquire) != f.next_id)
                    return true;
            }
        }
        return false;
    }

    void ring_doorbells() {
        for (auto& a : apps_) {
            if (!a->hello)
                continue;
            std::atomic_ref<uint32_t> sleeping(a->db()->sleeping);
            if (sleeping.load() == 0 || !has_work(*a))
                continue;
            if (sleeping.exchange(0) == 1) {
                const uint64_t one = 1;
                (void)!write(a->wake.get(), &one, sizeof(one));
                ++a->db()->wakes;
            }
        }
    }

    Fd lfd_;
    std::vector<std::unique_ptr<App>> apps_;
    std::vector<std::unique_ptr<Link>> links_;
    std::map<uint16_t, Listener> listeners_;
    uint32_t next_app_ = 1, next_session_ = 1;
    uint64_t fail_after_ = 0;
};

std::atomic<bool> g_stop{false}; // the signal handler's flag: the one global

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fake_tailmarkd SOCKET_PATH\n");
        return 2;
    }
    struct sigaction sa{};
    sa.sa_handler = [](int) { g_stop = true; };
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    Service s(argv[1]);
    s.run(g_stop);
    unlink(argv[1]);
    return 0;
}
