// The daemon's control socket: AF_UNIX SOCK_SEQPACKET, one tm_msg_* per
// message, memfds and the wake pipe passed with SCM_RIGHTS. Requests carry a
// req_id and block (poll() with a timeout) until the reply with that id;
// events (req_id 0) that arrive meanwhile, and replies nobody waits for any
// more, are queued for the channel to handle.
//
// Once the daemon is gone (EOF, a reset) or spoke something that is not the
// protocol, the socket is broken for good: every later call returns that
// error again (-ECONNRESET, -EPROTO) with its message.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <span>

#include "tailmark/channel_abi.h"
#include "fd.h"
#include "last_error.h"

namespace tailmark::client {

// One message off the socket, with the descriptors it carried.
struct SocketMessage {
    static constexpr int kMaxFds = 4;
    alignas(8) std::array<uint8_t, channel::kMaxMsg> bytes{};
    uint32_t len = 0;
    std::array<Fd, kMaxFds> fds;
    int nfds = 0;

    channel::tm_msg_header header() const {
        channel::tm_msg_header h;
        memcpy(&h, bytes.data(), sizeof(h));
        return h;
    }
    // The message as a T (copied: no aliasing games), false when shorter.
    template <class T>
    bool read(T& out) const {
        if (len < sizeof(T))
            return false;
        memcpy(&out, bytes.data(), sizeof(T));
        return true;
    }
};

const char* msg_type_name(uint32_t type);

class SocketChannel {
public:
    // 0, or a negative errno with err naming the path (-ENOENT: no such
    // socket, -ECONNREFUSED: nobody listens on it).
    int connect(const char* path, LastError& err);
    // For the tests: a socket someone else connected (one end of a socketpair).
    void adopt(Fd fd) { fd_ = std::move(fd); }

    // Sends one message (its header's len set) with fds attached.
    int send(const void* msg, size_t len, std::span<const int> fds, LastError& err);
    // One message within timeout_ms (-1: no limit; 0: only one already
    // there): 1, 0 (none came), or a negative errno.
    int receive(SocketMessage& out, int timeout_ms, LastError& err);
    // Reads every message already there into the queue (non-blocking).
    int pump(LastError& err);

    // msg (its header's type set; len and req_id are filled in) to the
    // daemon, then its reply within timeout_ms. 0 with *reply, or a negative
    // errno (-ETIMEDOUT: no reply in time). A reply of TM_MSG_ERROR is
    // returned as -its errno with its text (prefixed with `what`).
    int request(void* msg, size_t len, std::span<const int> fds, SocketMessage& reply, int timeout_ms,
                const char* what, LastError& err);
    // msg without waiting for its reply (dropped as stale when it comes).
    int post(void* msg, size_t len, LastError& err);

    std::deque<SocketMessage>& queue() { return queue_; }
    int fd() const { return fd_.get(); }
    bool broken() const { return broken_err_ != 0; }
    // The error that broke the socket, its message set again in err.
    int broken_error(LastError& err) const { return err.set(broken_err_, "%s", broken_msg_); }
    void close() { fd_.reset(); }
    // Breaks the socket for good (a daemon that does not speak the
    // protocol): every later call returns -e with this message.
    int fail_broken(int e, LastError& err, const char* fmt, ...) __attribute__((format(printf, 4, 5))); // set-up only

private:
    int read_one(SocketMessage& out, LastError& err);

    Fd fd_;
    char path_[108] = {};
    uint64_t next_req_ = 1;
    std::deque<SocketMessage> queue_;
    int broken_err_ = 0;
    char broken_msg_[200] = {};
};

} // namespace tailmark::client
