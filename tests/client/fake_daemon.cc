#include "fake_daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace tmtest {

Memfd Memfd::make(size_t len) {
    Memfd m;
    m.fd.reset(memfd_create("tmtest", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!m.fd || ftruncate(m.fd.get(), static_cast<off_t>(len)) != 0 ||
        fcntl(m.fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        Mapping::map(m.fd.get(), len, m.map) != 0)
        throw std::runtime_error("memfd");
    return m;
}

void lay_out_ring(uint8_t* base, uint32_t ring_size, uint64_t region_size, uint16_t flow) {
    const tailmark::RingLayout l = tailmark::ring_layout(ring_size, region_size);
    memset(base, 0, l.regions);
    auto* h = reinterpret_cast<tailmark::RingHeader*>(base);
    h->flow = flow;
    h->ring_size = ring_size;
    h->region_size = region_size;
    h->slots_offset = l.slots;
    h->regions_offset = l.regions;
    h->region_stride = l.stride;
    h->socket_id = -1;
    h->version = tailmark::kRingVersion;
    std::atomic_ref<uint32_t>(h->magic).store(tailmark::kRingMagic, std::memory_order_release);
}

void complete(uint8_t* base, uint32_t msg_id, std::span<const uint8_t> bytes) {
    const auto* h = reinterpret_cast<const tailmark::RingHeader*>(base);
    const uint32_t i = msg_id & (h->ring_size - 1);
    if (!bytes.empty())
        memcpy(base + h->regions_offset + i * h->region_stride, bytes.data(), bytes.size());
    auto* s = reinterpret_cast<tailmark::CompletionSlot*>(base + h->slots_offset) + i;
    s->msg_id = msg_id;
    s->msg_len = static_cast<uint32_t>(bytes.size());
    s->flow = static_cast<uint16_t>(h->flow);
    std::atomic_ref<uint64_t>(s->flag).store(static_cast<uint64_t>(msg_id) + 1, std::memory_order_release);
}

uint32_t released(const uint8_t* base) {
    const auto* c = reinterpret_cast<const tailmark::ConsumerCursor*>(base + tailmark::ring_layout(1, 1).cursor);
    return __atomic_load_n(&c->released, __ATOMIC_ACQUIRE);
}

SendSide SendSide::make(uint16_t nflows, uint32_t sq_size, uint32_t cq_size) {
    SendSide s;
    s.nflows = nflows;
    s.sq_size = sq_size;
    s.cq_size = cq_size;
    s.l = abi::tm_send_rings(sq_size, cq_size);
    s.stride = s.l.total;
    s.mem = Memfd::make(nflows * s.stride);
    for (uint16_t f = 0; f < nflows; ++f) {
        s.sq(f)->size = sq_size;
        s.sq(f)->entry_bytes = sizeof(abi::tm_sqe);
        s.cq(f)->size = cq_size;
        s.cq(f)->entry_bytes = sizeof(abi::tm_cqe);
    }
    return s;
}

bool SendSide::pop_sqe(uint16_t f, abi::tm_sqe& out) const {
    abi::tm_spsc* r = sq(f);
    const uint32_t tail = std::atomic_ref<uint32_t>(r->tail).load(std::memory_order_relaxed);
    if (std::atomic_ref<uint32_t>(r->head).load(std::memory_order_acquire) == tail)
        return false;
    const auto* e = reinterpret_cast<const abi::tm_sqe*>(mem.data() + f * stride + l.sqe);
    out = e[tail & (sq_size - 1)];
    std::atomic_ref<uint32_t>(r->tail).store(tail + 1, std::memory_order_release);
    return true;
}

bool SendSide::push_cqe(uint16_t f, const abi::tm_cqe& c) const {
    abi::tm_spsc* r = cq(f);
    const uint32_t head = std::atomic_ref<uint32_t>(r->head).load(std::memory_order_relaxed);
    if (head - std::atomic_ref<uint32_t>(r->tail).load(std::memory_order_acquire) >= cq_size)
        return false;
    auto* e = reinterpret_cast<abi::tm_cqe*>(mem.data() + f * stride + l.cqe);
    e[head & (cq_size - 1)] = c;
    std::atomic_ref<uint32_t>(r->head).store(head + 1, std::memory_order_release);
    return true;
}

abi::tm_msg_header Msg::header() const {
    abi::tm_msg_header h{}; // type 0 for an empty Msg (none came)
    if (!bytes.empty())
        memcpy(&h, bytes.data(), std::min(sizeof(h), bytes.size()));
    return h;
}

Msg DaemonEnd::recv(int timeout_ms) {
    Msg m;
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0)
        return m;
    uint8_t buf[abi::kMaxMsg];
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{buf, sizeof(buf)};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof(ctl);
    const ssize_t n = recvmsg(fd.get(), &mh, MSG_CMSG_CLOEXEC);
    if (n <= 0)
        return m;
    m.bytes.assign(buf, buf + n);
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
                int f;
                memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                m.fds.emplace_back(f);
            }
    return m;
}

void DaemonEnd::send_raw(const void* m, size_t len, int f, int f2) {
    iovec iov{const_cast<void*>(m), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(2 * sizeof(int))] = {};
    if (f >= 0) {
        const int fds[2] = {f, f2};
        const size_t n = f2 >= 0 ? 2 : 1;
        mh.msg_control = ctl;
        mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    }
    if (sendmsg(fd.get(), &mh, MSG_NOSIGNAL) != static_cast<ssize_t>(len))
        throw std::runtime_error("fake daemon: sendmsg");
}

void DaemonEnd::welcome(uint64_t req_id, const abi::tm_msg_welcome& w, const Memfd& control, Fd* wake_w) {
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        throw std::runtime_error("pipe2");
    Fd r(p[0]);
    Fd wr(p[1]);
    send(w, abi::TM_MSG_WELCOME, req_id, control.fd.get(), r.get());
    if (wake_w != nullptr)
        *wake_w = std::move(wr);
}

void DaemonEnd::ok(uint64_t req_id) {
    struct {
        abi::tm_msg_header h;
    } m{};
    send(m, abi::TM_MSG_OK, req_id);
}

void DaemonEnd::error(uint64_t req_id, int err, const char* text) {
    abi::tm_msg_error e{};
    e.err = err;
    snprintf(e.text, sizeof(e.text), "%s", text);
    send(e, abi::TM_MSG_ERROR, req_id);
}

void DaemonEnd::ended(uint32_t session, uint32_t reason) {
    abi::tm_msg_ended e{};
    e.session = session;
    e.reason = reason;
    send(e, abi::TM_MSG_ENDED, 0);
}

void DaemonEnd::connected(uint64_t req_id, uint32_t session, const SendSide& s, uint32_t ring_size,
                          uint32_t max_msg) {
    abi::tm_msg_connected c{};
    c.session = session;
    c.nflows = s.nflows;
    c.ring_size = ring_size;
    c.max_msg = max_msg;
    c.sq_size = s.sq_size;
    c.cq_size = s.cq_size;
    c.send_bytes = s.nflows * s.stride;
    c.flow_stride = s.stride;
    send(c, abi::TM_MSG_CONNECTED, req_id, s.mem.fd.get());
}

void DaemonEnd::accepted(uint32_t session, uint16_t port, uint16_t nflows, uint32_t ring_size, uint32_t max_msg,
                         uint64_t stride, const Memfd& recv, uint64_t recv_bytes) {
    abi::tm_msg_accepted a{};
    a.session = session;
    a.service = port;
    a.nflows = nflows;
    a.peer_ip = 0x0a000002; // 10.0.0.2
    a.peer_port = 4242;
    a.ring_size = ring_size;
    a.max_msg = max_msg;
    a.recv_bytes = recv_bytes;
    a.flow_stride = stride;
    send(a, abi::TM_MSG_ACCEPTED, 0, recv.fd.get());
}

Memfd make_recv(uint16_t nflows, uint32_t ring_size, uint32_t max_msg, uint64_t& stride, uint64_t& bytes) {
    stride = (tailmark::ring_layout(ring_size, max_msg).total + 4095) / 4096 * 4096;
    bytes = stride * nflows;
    Memfd m = Memfd::make(bytes);
    for (uint16_t f = 0; f < nflows; ++f)
        lay_out_ring(m.data() + f * stride, ring_size, max_msg, f);
    return m;
}

Attached attach_fake(size_t arena_bytes) {
    Attached a;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        throw std::runtime_error("socketpair");
    a.d.fd.reset(sv[1]);
    a.control = Memfd::make(4096);
    abi::tm_msg_welcome w{};
    w.app_id = 7;
    w.max_flows = 8;
    w.control_bytes = 4096;
    w.mtu = 1500;
    w.local_ip = 0xC6120002;
    a.d.welcome(1, w, a.control, &a.wake_w); // HELLO is request 1
    a.ch = new tm_channel;
    tm_attach_opts o{};
    o.arena_bytes = arena_bytes;
    o.name = "tmtest";
    a.rc = a.ch->attach_fd(Fd(sv[0]), &o);
    a.hello = a.d.recv();
    return a;
}

TempDir::TempDir() {
    char t[] = "/tmp/tm_client_XXXXXX";
    if (mkdtemp(t) == nullptr)
        throw std::runtime_error("mkdtemp");
    dir = t;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

} // namespace tmtest
