// The daemon's half of channel_abi.h, just enough of it for the library's
// tests to drive it without tailmarkd: the daemon's end of a socketpair
// (read a request, queue a reply or an event), the memfds the daemon hands
// over (control block, send rings, receive rings) laid out as the ABI says,
// and the daemon's side of those rings. Not a mock of DPDK: the library's
// own protocol handling, exercised from the other end.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "channel.h"
#include "tailmark/channel_abi.h"
#include "fd.h"
#include "mapping.h"
#include "tailmark/ring_layout.h"

namespace tmtest {

namespace abi = tailmark::channel;
using tailmark::client::Fd;
using tailmark::client::Mapping;

// A memfd of len bytes, mapped, zeroed; sealed against shrinking and
// growing, as the daemon's are.
struct Memfd {
    Fd fd;
    Mapping map;
    static Memfd make(size_t len);
    uint8_t* data() const { return map.data(); }
};

// --- receive rings (CompletionRing layout), as the daemon's receiver writes them.

// The ring's header, cursor and slots, laid out by hand from ring_layout().
void lay_out_ring(uint8_t* base, uint32_t ring_size, uint64_t region_size, uint16_t flow = 0);
// Completes msg_id: bytes into its region, the slot's metadata, then its flag (release).
void complete(uint8_t* base, uint32_t msg_id, std::span<const uint8_t> bytes);
// The consumer cursor's `released`, as the daemon reads it.
uint32_t released(const uint8_t* base);

// --- send rings, the daemon's side.

struct SendSide {
    Memfd mem;
    uint16_t nflows = 0;
    uint32_t sq_size = 0, cq_size = 0;
    uint64_t stride = 0;
    abi::tm_send_layout l{};

    static SendSide make(uint16_t nflows, uint32_t sq_size, uint32_t cq_size);
    abi::tm_spsc* sq(uint16_t f) const { return reinterpret_cast<abi::tm_spsc*>(mem.data() + f * stride + l.sq); }
    abi::tm_spsc* cq(uint16_t f) const { return reinterpret_cast<abi::tm_spsc*>(mem.data() + f * stride + l.cq); }
    // The daemon takes a submission / writes a completion.
    bool pop_sqe(uint16_t f, abi::tm_sqe& out) const;
    bool push_cqe(uint16_t f, const abi::tm_cqe& c) const;
};

// --- the socket.

struct Msg {
    std::vector<uint8_t> bytes;
    std::vector<Fd> fds;
    abi::tm_msg_header header() const;
    uint32_t type() const { return header().type; }
    template <class T>
    T as() const {
        T t{};
        if (!bytes.empty())
            memcpy(&t, bytes.data(), std::min(sizeof(T), bytes.size()));
        return t;
    }
};

struct DaemonEnd {
    Fd fd;
    // The next message from the app, waiting at most timeout_ms; type 0 when
    // none came (or the app's end closed).
    Msg recv(int timeout_ms = 5000);
    void send_raw(const void* m, size_t len, int fd = -1, int fd2 = -1);
    template <class T>
    void send(T m, uint32_t type, uint64_t req_id, int fd = -1, int fd2 = -1) {
        m.h.type = type;
        m.h.len = sizeof(T);
        m.h.req_id = req_id;
        send_raw(&m, sizeof(T), fd, fd2);
    }
    // WELCOME as the daemon sends it: the control memfd and the read end of
    // a wake pipe, whose write end goes to *wake_w.
    void welcome(uint64_t req_id, const abi::tm_msg_welcome& w, const Memfd& control, Fd* wake_w);
    void ok(uint64_t req_id);
    void error(uint64_t req_id, int err, const char* text);
    void ended(uint32_t session, uint32_t reason);
    void connected(uint64_t req_id, uint32_t session, const SendSide& s, uint32_t ring_size, uint32_t max_msg);
    // ACCEPTED for a receive memfd with nflows rings at `stride`.
    void accepted(uint32_t session, uint16_t port, uint16_t nflows, uint32_t ring_size, uint32_t max_msg,
                  uint64_t stride, const Memfd& recv, uint64_t recv_bytes);
};

// A receive memfd of nflows rings, laid out; stride: 4 KiB multiple.
Memfd make_recv(uint16_t nflows, uint32_t ring_size, uint32_t max_msg, uint64_t& stride, uint64_t& bytes);

// A channel attached over a socketpair: WELCOME was queued before tm_attach
// ran, so no thread is needed; `hello` is what the library sent.
struct Attached {
    tm_channel* ch = nullptr;
    DaemonEnd d;
    Memfd control;
    Fd wake_w; // the daemon's end of the wake pipe
    Msg hello;
    int rc = 0;
    uint64_t req = 2; // the req_id of the library's next request (HELLO was 1)
    Attached() = default;
    Attached(Attached&&) = default;
    ~Attached() { tm_detach(ch); }
    abi::tm_doorbell* doorbell() const { return reinterpret_cast<abi::tm_doorbell*>(control.data()); }
};
Attached attach_fake(size_t arena_bytes = 4u << 20);

// A path for a Unix socket in a fresh temporary directory (removed by the destructor).
struct TempDir {
    std::string dir;
    TempDir();
    ~TempDir();
    std::string path(const char* name) const { return dir + "/" + name; }
};

} // namespace tmtest
