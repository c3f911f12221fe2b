// struct tm_channel: one application's attachment to a daemon, everything
// the C API (client_api.cc) works on. A channel is single-threaded: one
// thread at a time calls into it, nothing in it is locked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "arena.h"
#include "tailmark/channel_abi.h"
#include "doorbell.h"
#include "fd.h"
#include "last_error.h"
#include "session.h"
#include "socket_channel.h"
#include "tailmark/client.h"

// (client.h declares the type in its default-visibility block: exports.map
// is what keeps its members out of the library's exports.)
struct tm_channel {
    using Session = tailmark::client::Session;

    // The steps of tm_attach; on failure the channel stays, failed, for its message.
    int attach(const tm_attach_opts* opts);
    // For the tests: attach over a socket already connected to a (fake) daemon.
    int attach_fd(tailmark::client::Fd sock, const tm_attach_opts* opts);

    int connect(const char* ipv4, uint16_t port, const tm_connect_opts* opts, tm_session* out);
    int listen(uint16_t port, const tm_listen_opts* opts);
    int unlisten(uint16_t port);
    int accept(int timeout_ms, tm_session_info* info);
    int session_state(tm_session s);
    int session_info(tm_session s, tm_session_info* info);
    int close(tm_session s);
    int send(tm_session s, uint16_t flow, const void* buf, size_t len, uint64_t cookie);
    int poll_completions(tm_completion* out, int max);
    int recv(tm_session s, uint16_t flow, tm_message* msg);
    int recv_any(tm_message* msg);
    int release(const tm_message* msg);
    int wait(int timeout_ms);
    int wait_flow(tm_session s, uint16_t flow, int timeout_ms);
    int wait_sent(tm_session s, uint16_t flow, int timeout_ms);
    void bye();

    // 0 while the channel works; else the error every call answers with:
    // a failed tm_attach (-ENOTCONN), a lost daemon (-ECONNRESET), a daemon
    // that broke the protocol (-EPROTO).
    int check() {
        if (!attached_)
            return not_attached();
        if (sock_.broken())
            return sock_.broken_error(err);
        return 0;
    }

    tailmark::client::LastError err;
    tailmark::client::Arena arena;
    uint32_t mtu = 0;
    uint32_t local_ip = 0; // the daemon's address, host order
    uint32_t max_flows = 0;
    uint32_t app_id = 0;

private:
    struct PendingAccept {
        tailmark::channel::tm_msg_accepted msg;
        tailmark::client::Fd fd;
        int end_reason;
    };
    struct FlowRef {
        Session* s;
        uint16_t flow;
    };

    int not_attached();
    int hello(const tm_attach_opts* opts);
    // Reads what the socket has (non-blocking) and handles it.
    int pump();
    // Every idle return (-EAGAIN, nothing received, no completion) counts;
    // every 1024th looks at the socket, so a loop that never calls tm_wait
    // still learns that the daemon is gone or a session ended.
    int idle_pump() { return (++idle_ & 1023) == 0 ? pump() : 0; }
    int handle_events();
    int request_ok(void* m, size_t len, const char* what);
    bool ready();
    bool completions_ready() const; // a send completion waits in some flow's ring
    Session* find(tm_session s);
    // The accepted session s, if it has receive flow `flow`; else nullptr,
    // with *rc the error (ENOENT: no such session; EINVAL: not accepted, or
    // no such flow), its message naming `call`.
    Session* recv_session(tm_session s, uint16_t flow, const char* call, int* rc);
    int open_accepted(PendingAccept& p, tm_session_info* info);
    void add(std::unique_ptr<Session> s);
    void erase(Session* s);
    void rebuild_orders();
    void close_quietly(uint32_t session); // CLOSE without waiting for the reply
    void reap_closed();

    tailmark::client::SocketChannel sock_;
    tailmark::client::Doorbell bell_;
    bool attached_ = false;
    char attach_msg_[256] = {};

    std::vector<std::unique_ptr<Session>> sessions_;
    std::deque<PendingAccept> accepts_;
    std::vector<FlowRef> send_order_, recv_order_; // every flow, for the round-robins
    size_t send_rr_ = 0, recv_rr_ = 0;
    Session* last_ = nullptr;  // the session the last lookup found
    uint32_t closing_ = 0;     // closed connected sessions still draining
    bool news_ = false;        // a session ended since tm_wait last returned
    uint32_t idle_ = 0;
};
