#include "socket_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

namespace tailmark::client {

namespace {

int64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

} // namespace

const char* msg_type_name(uint32_t type) {
    using namespace channel;
    switch (type) {
    case TM_MSG_HELLO: return "HELLO";
    case TM_MSG_WELCOME: return "WELCOME";
    case TM_MSG_CONNECT: return "CONNECT";
    case TM_MSG_CONNECTED: return "CONNECTED";
    case TM_MSG_LISTEN: return "LISTEN";
    case TM_MSG_UNLISTEN: return "UNLISTEN";
    case TM_MSG_ACCEPTED: return "ACCEPTED";
    case TM_MSG_CLOSE: return "CLOSE";
    case TM_MSG_ENDED: return "ENDED";
    case TM_MSG_OK: return "OK";
    case TM_MSG_ERROR: return "ERROR";
    case TM_MSG_BYE: return "BYE";
    default: return "an unknown type";
    }
}

int SocketChannel::connect(const char* path, LastError& err) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    const size_t n = strlen(path);
    if (n == 0 || n >= sizeof(sa.sun_path))
        return err.set(ENAMETOOLONG, "socket path '%s': %s", path,
                       n == 0 ? "empty" : "longer than a Unix socket address takes (107 bytes)");
    memcpy(sa.sun_path, path, n);
    memcpy(path_, path, n + 1);
    Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!fd)
        return err.set(errno, "socket(AF_UNIX, SOCK_SEQPACKET): %s", strerror(errno));
    int rc;
    do
        rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        const int e = errno;
        const char* hint = e == ENOENT ? " (is tailmarkd --mode service running? TAILMARK_SOCKET names another path)"
                           : e == ECONNREFUSED ? " (nobody listens on it: a daemon that died?)"
                                               : "";
        return err.set(e, "connect to %s: %s%s", path, strerror(e), hint);
    }
    // A daemon that stops reading must not hang us in sendmsg for ever.
    timeval tv{5, 0};
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    fd_ = std::move(fd);
    return 0;
}

int SocketChannel::fail_broken(int e, LastError& err, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(broken_msg_, sizeof(broken_msg_), fmt, ap); // set-up only (control path)
    va_end(ap);
    broken_err_ = e;
    return err.set(e, "%s", broken_msg_);
}

int SocketChannel::send(const void* msg, size_t len, std::span<const int> fds, LastError& err) {
    if (broken())
        return broken_error(err);
    if (!fd_)
        return err.set(ENOTCONN, "not connected to a daemon");
    iovec iov{const_cast<void*>(msg), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * SocketMessage::kMaxFds)] = {};
    if (!fds.empty()) {
        if (fds.size() > SocketMessage::kMaxFds)
            return err.set(EINVAL, "internal: %zu fds in one message", fds.size());
        mh.msg_control = ctl;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n;
    do
        n = ::sendmsg(fd_.get(), &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        const int e = errno;
        if (e == EPIPE || e == ECONNRESET || e == ENOTCONN)
            return fail_broken(ECONNRESET, err, "the daemon closed the connection (%s): %s", path_, strerror(e));
        if (e == EAGAIN || e == EWOULDBLOCK)
            return err.set(ETIMEDOUT, "the daemon (%s) does not read its socket", path_);
        return err.set(e, "sendmsg to the daemon: %s", strerror(e));
    }
    return 0;
}

int SocketChannel::read_one(SocketMessage& out, LastError& err) {
    iovec iov{out.bytes.data(), out.bytes.size()};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * SocketMessage::kMaxFds)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof(ctl);
    ssize_t n;
    do
        n = ::recvmsg(fd_.get(), &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        const int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return 0;
        if (e == ECONNRESET || e == ENOTCONN)
            return fail_broken(ECONNRESET, err, "the daemon closed the connection (%s): %s", path_, strerror(e));
        return err.set(e, "recvmsg from the daemon: %s", strerror(e));
    }
    // Take ownership of every descriptor first, so none leaks on an error.
    out.nfds = 0;
    for (auto& f : out.fds)
        f.reset();
    int extra = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (out.nfds < SocketMessage::kMaxFds)
                out.fds[out.nfds++].reset(fd);
            else {
                ::close(fd);
                ++extra;
            }
        }
    }
    if (n == 0)
        return fail_broken(ECONNRESET, err, "the daemon closed the connection (%s)", path_);
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || extra != 0)
        return fail_broken(EPROTO, err, "the daemon sent a message over %u bytes or with too many descriptors",
                           channel::kMaxMsg);
    out.len = static_cast<uint32_t>(n);
    if (out.len < sizeof(channel::tm_msg_header))
        return fail_broken(EPROTO, err, "the daemon sent a %u-byte message, shorter than a header", out.len);
    const channel::tm_msg_header h = out.header();
    if (h.len != out.len)
        return fail_broken(EPROTO, err, "the daemon sent a message of %u bytes whose header says %u", out.len, h.len);
    if (h.type < channel::TM_MSG_HELLO || h.type > channel::TM_MSG_BYE)
        return fail_broken(EPROTO, err, "the daemon sent a message of unknown type %u", h.type);
    return 1;
}

int SocketChannel::receive(SocketMessage& out, int timeout_ms, LastError& err) {
    if (broken())
        return broken_error(err);
    if (!fd_)
        return err.set(ENOTCONN, "not connected to a daemon");
    const int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    for (;;) {
        const int rc = read_one(out, err);
        if (rc != 0 || timeout_ms == 0)
            return rc;
        int wait = -1;
        if (timeout_ms > 0) {
            const int64_t left = deadline - now_ms();
            if (left <= 0)
                return 0;
            wait = static_cast<int>(left);
        }
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, wait) < 0 && errno != EINTR)
            return err.set(errno, "poll on the daemon socket: %s", strerror(errno));
    }
}

int SocketChannel::pump(LastError& err) {
    if (broken())
        return broken_error(err);
    for (;;) {
        SocketMessage m;
        const int rc = receive(m, 0, err);
        if (rc <= 0)
            return rc;
        queue_.push_back(std::move(m));
    }
}

int SocketChannel::post(void* msg, size_t len, LastError& err) {
    auto* h = static_cast<channel::tm_msg_header*>(msg);
    h->len = static_cast<uint32_t>(len);
    h->req_id = next_req_++;
    return send(msg, len, {}, err);
}

int SocketChannel::request(void* msg, size_t len, std::span<const int> fds, SocketMessage& reply, int timeout_ms,
                           const char* what, LastError& err) {
    auto* h = static_cast<channel::tm_msg_header*>(msg);
    h->len = static_cast<uint32_t>(len);
    const uint64_t id = h->req_id = next_req_++;
    if (int rc = send(msg, len, fds, err); rc < 0)
        return rc;
    const int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
    for (;;) {
        int wait = -1;
        if (timeout_ms >= 0) {
            const int64_t left = deadline - now_ms();
            if (left <= 0)
                return err.set(ETIMEDOUT, "%s: no answer from the daemon within %d ms", what, timeout_ms);
            wait = static_cast<int>(left);
        }
        SocketMessage m;
        const int rc = receive(m, wait, err);
        if (rc < 0)
            return rc;
        if (rc == 0)
            continue;
        const channel::tm_msg_header mh = m.header();
        if (mh.req_id != id) {
            // An event, or the reply to a request we gave up on: the channel's to handle.
            if (mh.req_id > id)
                return fail_broken(EPROTO, err, "the daemon answered request %llu, which was never sent",
                                   static_cast<unsigned long long>(mh.req_id));
            queue_.push_back(std::move(m));
            continue;
        }
        if (mh.type == channel::TM_MSG_ERROR) {
            channel::tm_msg_error e{};
            if (!m.read(e) || e.err <= 0)
                return fail_broken(EPROTO, err, "%s: the daemon sent a malformed ERROR", what);
            e.text[sizeof(e.text) - 1] = '\0';
            return err.set(e.err, "%s: %s", what, e.text[0] != '\0' ? e.text : strerror(e.err));
        }
        reply = std::move(m);
        return 0;
    }
}

} // namespace tailmark::client
