// C++20 over tailmark/client.h, header-only: RAII for the channel, its
// sessions and its arena buffers, spans and string_views for the bytes.
// Nothing here throws; calls return what the C API returns (0 or a count,
// else a negative errno) and Channel::error() says why.
//
//   tailmark::Channel ch;
//   if (ch.attach() < 0) { fprintf(stderr, "%s\n", ch.error().data()); ... } (an example; set-up only)
//   tailmark::Session s;
//   ch.connect("10.0.0.2", 7000, {}, s);
//   tailmark::Buffer b = ch.alloc(4096);
//   s.send(0, b.bytes().first(n), cookie);
//
// Like the channel itself, these objects are for one thread at a time.
// Sessions and buffers refer to their channel: let them go before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <tailmark/client.h>

namespace tailmark {

// One received message, in place in its receive ring until released.
class Message {
public:
    std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(m_.data), m_.len}; }
    std::string_view text() const { return {static_cast<const char*>(m_.data), m_.len}; }
    size_t size() const { return m_.len; }
    tm_session session() const { return m_.session; }
    uint16_t flow() const { return m_.flow; }
    uint32_t id() const { return m_.msg_id; }
    tm_message* native() { return &m_; }
    const tm_message* native() const { return &m_; }

private:
    tm_message m_{};
};

// A send buffer from the channel's arena, freed when it goes.
class Buffer {
public:
    Buffer() = default;
    Buffer(tm_channel* ch, void* p, size_t size) : ch_(ch), p_(static_cast<std::byte*>(p)), size_(size) {}
    Buffer(Buffer&& o) noexcept
        : ch_(std::exchange(o.ch_, nullptr)), p_(std::exchange(o.p_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    Buffer& operator=(Buffer&& o) noexcept {
        if (this != &o) {
            reset();
            ch_ = std::exchange(o.ch_, nullptr);
            p_ = std::exchange(o.p_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { reset(); }

    explicit operator bool() const { return p_ != nullptr; }
    std::byte* data() const { return p_; }
    size_t size() const { return size_; }
    std::span<std::byte> bytes() const { return {p_, size_}; }
    void reset() {
        if (p_ != nullptr)
            tm_buf_free(ch_, p_);
        p_ = nullptr;
        size_ = 0;
    }

private:
    tm_channel* ch_ = nullptr;
    std::byte* p_ = nullptr;
    size_t size_ = 0;
};

// A session of the channel, closed (tm_close) when it goes unless released.
class Session {
public:
    Session() = default;
    Session(tm_channel* ch, tm_session id) : ch_(ch), id_(id) {}
    Session(Session&& o) noexcept : ch_(std::exchange(o.ch_, nullptr)), id_(o.id_) {}
    Session& operator=(Session&& o) noexcept {
        if (this != &o) {
            close();
            ch_ = std::exchange(o.ch_, nullptr);
            id_ = o.id_;
        }
        return *this;
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    ~Session() { close(); }

    explicit operator bool() const { return ch_ != nullptr; }
    tm_session id() const { return id_; }

    // tm_send: bytes must lie inside the channel's arena (a Buffer's).
    int send(uint16_t flow, std::span<const std::byte> bytes, uint64_t cookie) {
        return tm_send(ch_, id_, flow, bytes.data(), bytes.size(), cookie);
    }
    // 1 (a message), 0 (none yet), or a negative errno.
    int recv(uint16_t flow, Message& m) { return tm_recv(ch_, id_, flow, m.native()); }
    int release(const Message& m) { return tm_release(ch_, m.native()); }
    // tm_wait_flow: 1 once the flow's next message is ready or the session
    // ended, 0 after timeout_ms, or a negative errno.
    int wait(uint16_t flow, int timeout_ms) { return tm_wait_flow(ch_, id_, flow, timeout_ms); }
    // 0 while it lives, TM_END_* once ended, or a negative errno.
    int state() const { return tm_session_state(ch_, id_); }
    int info(tm_session_info& out) const { return tm_session_get_info(ch_, id_, &out); }

    int close() {
        if (ch_ == nullptr)
            return 0;
        const int rc = tm_close(std::exchange(ch_, nullptr), id_);
        return rc;
    }
    // Forget it without closing (tm_detach closes what is left).
    tm_session release() {
        ch_ = nullptr;
        return id_;
    }

private:
    tm_channel* ch_ = nullptr;
    tm_session id_ = 0;
};

struct AttachOptions {
    std::string socket_path; // empty: $TAILMARK_SOCKET, else TM_DEFAULT_SOCKET
    size_t arena_bytes = 0;  // 0: 64 MiB
    std::string name;        // empty: the program's
};

struct ConnectOptions {
    uint16_t nflows = 0;     // 0: 1
    uint32_t ring_size = 0;  // 0: 64
    uint32_t max_msg = 0;    // 0: 1 MiB
    uint32_t timeout_ms = 0; // 0: the daemon's
    const uint8_t* secret = nullptr;
};

struct ListenOptions {
    uint16_t max_flows = 0;
    uint32_t max_ring = 0;
    uint32_t max_msg = 0;
    const uint8_t* secret = nullptr;
};

// The channel to a daemon, detached (tm_detach) when it goes.
class Channel {
public:
    Channel() = default;
    Channel(Channel&& o) noexcept : ch_(std::exchange(o.ch_, nullptr)) {}
    Channel& operator=(Channel&& o) noexcept {
        if (this != &o) {
            reset();
            ch_ = std::exchange(o.ch_, nullptr);
        }
        return *this;
    }
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;
    ~Channel() { reset(); }

    // 0, or a negative errno with error() saying why.
    int attach(const AttachOptions& o = {}) {
        reset();
        tm_attach_opts c{};
        c.socket_path = o.socket_path.empty() ? nullptr : o.socket_path.c_str();
        c.arena_bytes = o.arena_bytes;
        c.name = o.name.empty() ? nullptr : o.name.c_str();
        return tm_attach(&c, &ch_);
    }
    void reset() {
        if (ch_ != nullptr)
            tm_detach(std::exchange(ch_, nullptr));
    }

    tm_channel* get() const { return ch_; }
    std::string_view error() const { return tm_last_error(ch_); }
    uint32_t mtu() const { return tm_mtu(ch_); }
    uint32_t local_ipv4() const { return tm_local_ipv4(ch_); }
    uint32_t max_flows() const { return tm_max_flows(ch_); }

    int connect(std::string_view ipv4, uint16_t port, const ConnectOptions& o, Session& out) {
        const std::string ip(ipv4);
        tm_connect_opts c{o.nflows, o.ring_size, o.max_msg, o.timeout_ms, o.secret};
        tm_session id = 0;
        const int rc = tm_connect(ch_, ip.c_str(), port, &c, &id);
        if (rc == 0)
            out = Session(ch_, id);
        return rc;
    }
    int listen(uint16_t port, const ListenOptions& o = {}) {
        tm_listen_opts c{o.max_flows, o.max_ring, o.max_msg, o.secret};
        return tm_listen(ch_, port, &c);
    }
    int unlisten(uint16_t port) { return tm_unlisten(ch_, port); }
    // 1 with out (and *info) set, 0 when none came within timeout_ms, or a negative errno.
    int accept(int timeout_ms, Session& out, tm_session_info* info = nullptr) {
        tm_session_info i{};
        const int rc = tm_accept(ch_, timeout_ms, &i);
        if (rc == 1) {
            out = Session(ch_, i.session);
            if (info != nullptr)
                *info = i;
        }
        return rc;
    }

    // An empty Buffer (error() says why) when the arena has no room.
    Buffer alloc(size_t len) {
        void* p = tm_buf_alloc(ch_, len);
        return p != nullptr ? Buffer(ch_, p, len) : Buffer();
    }

    int poll_completions(std::span<tm_completion> out) {
        return tm_poll_completions(ch_, out.data(), static_cast<int>(out.size()));
    }
    int recv_any(Message& m) { return tm_recv_any(ch_, m.native()); }
    int release(const Message& m) { return tm_release(ch_, m.native()); }
    int wait(int timeout_ms) { return tm_wait(ch_, timeout_ms); }
    // tm_wait_sent: a send completion, or (s != 0) that receive flow's next
    // message, or a session's end; other flows' messages do not wake it.
    int wait_sent(int timeout_ms, tm_session s = 0, uint16_t flow = 0) {
        return tm_wait_sent(ch_, s, flow, timeout_ms);
    }

private:
    tm_channel* ch_ = nullptr;
};

} // namespace tailmark
