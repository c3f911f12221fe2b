#include "service.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_random.h>
#include <rte_ring_elem.h>

#include "runtime.h"
#include "status.h"
#include "tailmark/log.h"
#include "tailmark/ring_layout.h"

namespace tailmark::app {

using namespace channel;

namespace {

constexpr uint64_t kSocketUs = 1000;           // the socket is polled this often
constexpr uint32_t kMaxFlowsPerSession = 1024;
constexpr uint32_t kMaxRing = 32768;
constexpr size_t kMaxOutq = 256;               // events an app has not read: then it is dropped
constexpr uint64_t kHuge = 2ull << 20;
constexpr int kMaxFds = 4;
constexpr uint64_t kCloseFlushUs = 50000;      // a closing receiver's last ACK: waited for at most this

uint32_t pow2_at_least(uint64_t n) {
    uint32_t p = 1;
    while (p < n && p < (1u << 31))
        p <<= 1;
    return p;
}

// A memfd of `len` bytes, mapped shared read-write: hugetlb where it can be had
// (the receive regions are what every placed byte touches), normal pages
// otherwise. Sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL before anyone
// else holds it: an application's ftruncate() fails (EPERM), so no page of
// our mapping ever lies past the end of its file (SIGBUS). Returns the fd
// (-1: errno) and fills map/len.
int make_memfd(const char* name, uint64_t& len, void*& map, bool huge) {
    constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    int fd = -1;
    if (huge) {
        const uint64_t hl = (len + kHuge - 1) / kHuge * kHuge;
        fd = memfd_create(name, MFD_CLOEXEC | MFD_HUGETLB | MFD_ALLOW_SEALING);
        if (fd >= 0 && ftruncate(fd, static_cast<off_t>(hl)) == 0 && fcntl(fd, F_ADD_SEALS, kSeals) == 0) {
            void* m = mmap(nullptr, hl, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
            if (m != MAP_FAILED) {
                len = hl;
                map = m;
                return fd;
            }
        }
        if (fd >= 0)
            close(fd);
    }
    len = (len + 4095) / 4096 * 4096;
    fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, static_cast<off_t>(len)) != 0 || fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    map = m;
    return fd;
}

uint32_t end_reason(SessionEnd e) {
    switch (e) {
    case SessionEnd::Closed: return TM_END_CLOSED;
    case SessionEnd::PeerClosed: return TM_END_PEER_CLOSED;
    case SessionEnd::PeerTimeout: return TM_END_PEER_TIMEOUT;
    case SessionEnd::PeerReset: return TM_END_PEER_RESET;
    case SessionEnd::Refused:
    case SessionEnd::BadAccept: return TM_END_REFUSED;
    case SessionEnd::NoAnswer:
    case SessionEnd::ArpFailed: return TM_END_NO_ANSWER;
    default: return TM_END_OTHER;
    }
}

uint8_t fail_code(FailReason r) {
    switch (r) {
    case FailReason::None: return TM_FAIL_NONE;
    case FailReason::RetryLimit: return TM_FAIL_RETRY_LIMIT;
    case FailReason::ReceiverRestarted: return TM_FAIL_RECEIVER_RESTARTED;
    case FailReason::PeerTimeout: return TM_FAIL_PEER_TIMEOUT;
    case FailReason::Closed: return TM_FAIL_CLOSED;
    case FailReason::Refused: return TM_FAIL_REFUSED;
    }
    return TM_FAIL_CLOSED;
}

// One shared info per message slot of a send flow. Its free_cb runs on
// whichever lcore drops the last reference (the tx lcore, or in loopback
// the rx lcore freeing the received extbuf): the free list is MP.
struct SvcHold {
    rte_mbuf_ext_shared_info sh;
    SvcSendFlow* owner;
    uint32_t index;
};

void svc_shinfo_free(void*, void* opaque) {
    SvcHold* h = static_cast<SvcHold*>(opaque);
    // Sized for every hold: never full.
    rte_ring_mp_enqueue_elem(h->owner->free_shinfo, &h->index, sizeof(uint32_t));
}

} // namespace

// --- the data path (tx lcore) ---------------------------------------------------

// The Sender's source for an application's flow: its next submission, as
// an extbuf over its arena. Taken only when the completion ring has room for
// the completion of everything held plus this one, so svc_complete() never
// finds it full. A submission outside the arena is completed at once as
// invalid (msg_id ~0): the app's mistake, never the daemon's crash.
bool svc_source(void* ctx, void* user, uint32_t msg_id, Message& m, uint64_t& cookie) {
    (void)msg_id;
    const TxCtx& c = *static_cast<const TxCtx*>(ctx);
    SvcSendFlow& f = *static_cast<SvcSendFlow*>(user);
    if (c.plane->phase_now() != Phase::Run)
        return false;
    for (;;) {
        if (f.sq_head_seen == f.sq_tail) {
            f.sq_head_seen = __atomic_load_n(&f.sq->head, __ATOMIC_ACQUIRE);
            if (f.sq_head_seen == f.sq_tail)
                return false;
        }
        if (f.sq_head_seen - f.sq_tail > f.sq_mask + 1) { // no producer writes that: the app's own flow waits
            bump(f.ctr.bad_head);
            f.sq_head_seen = f.sq_tail; // looked at again next time
            return false;
        }
        if (f.cq_head - f.cq_tail_seen + f.inflight >= f.cq_mask + 1) {
            f.cq_tail_seen = __atomic_load_n(&f.cq->tail, __ATOMIC_ACQUIRE);
            if (f.cq_head - f.cq_tail_seen + f.inflight >= f.cq_mask + 1) {
                bump(f.ctr.cq_waits);
                return false; // the app has not taken its completions: wait
            }
        }
        const tm_sqe e = f.sqe[f.sq_tail & f.sq_mask];
        if (e.len > f.max_msg || e.offset > f.arena_len || e.len > f.arena_len - e.offset) {
            tm_cqe& q = f.cqe[f.cq_head & f.cq_mask];
            q.cookie = e.cookie;
            q.msg_id = UINT32_MAX;
            q.status = TM_FAILED;
            q.reason = TM_FAIL_INVALID;
            q.reserved = 0;
            f.cq_head++;
            __atomic_store_n(&f.cq->head, f.cq_head, __ATOMIC_RELEASE);
            f.sq_tail++;
            __atomic_store_n(&f.sq->tail, f.sq_tail, __ATOMIC_RELEASE);
            bump(f.ctr.invalid);
            continue;
        }
        // A message the Sender copies into its packets needs no shared
        // info: only its record reads the arena, and the arena outlives the
        // flow (reap). The others' packets may outlive their completion.
        rte_mbuf_ext_shared_info* sh = nullptr;
        if (!f.zero_copy) {
            bump(f.ctr.copied);
        } else if (e.len > Sender::kCopyBreak) {
            uint32_t k;
            if (rte_ring_sc_dequeue_elem(f.free_shinfo, &k, sizeof(k)) != 0) {
                bump(f.ctr.shinfo_waits);
                return false; // the port still holds earlier messages' packets
            }
            sh = &reinterpret_cast<SvcHold*>(f.shinfo)[k].sh;
            rte_mbuf_ext_refcnt_set(sh, 0); // the Sender's hold is the first reference
        }
        m.bytes = {f.arena + e.offset, static_cast<size_t>(e.len)};
        m.shinfo = sh;
        m.iova = f.arena_iova + e.offset;
        cookie = e.cookie;
        f.sq_tail++;
        __atomic_store_n(&f.sq->tail, f.sq_tail, __ATOMIC_RELEASE);
        f.inflight++;
        bump(f.ctr.taken);
        return true;
    }
}

void svc_complete(const SendCompletion& c) {
    SvcSendFlow& f = *static_cast<SvcSendFlow*>(c.user);
    tm_cqe& q = f.cqe[f.cq_head & f.cq_mask];
    q.cookie = c.cookie;
    q.msg_id = c.msg_id;
    q.status = c.status == SendStatus::Delivered ? TM_DELIVERED : TM_FAILED;
    q.reason = c.status == SendStatus::Delivered ? uint8_t{TM_FAIL_NONE} : fail_code(c.reason);
    q.reserved = 0;
    f.cq_head++;
    f.inflight--;
    bump(c.status == SendStatus::Delivered ? f.ctr.delivered : f.ctr.failed);
}

void svc_publish(const SendCompletion& c) {
    SvcSendFlow& f = *static_cast<SvcSendFlow*>(c.user);
    __atomic_store_n(&f.cq->head, f.cq_head, __ATOMIC_RELEASE);
}

// --- the control plane -------------------------------------------------------------

struct Mapping {
    void* addr = nullptr;
    uint64_t len = 0;
    Mapping() = default;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping() { reset(); }
    void reset() {
        if (addr != nullptr)
            munmap(addr, len);
        addr = nullptr;
        len = 0;
    }
};

struct SvcApp {
    uint32_t id = 0;
    int fd = -1;
    uint32_t pid = 0;
    uint32_t uid = 0, gid = 0;   // SO_PEERCRED, at accept
    uint64_t hello_by = 0;       // TSC: closed unless it has said HELLO by then
    std::string name;
    bool hello = false;
    bool dead = false;
    Mapping arena;
    uint32_t page_size = 0;
    bool registered = false;
    bool zero_copy = false;       // its sends reference the arena (registered with DPDK)
    std::vector<rte_device*> dma; // devices the arena is DMA-mapped for
    Mapping control;
    tm_doorbell* bell = nullptr;
    int wake_fd = -1;             // our end of its wake pipe (O_NONBLOCK, ours alone)
    std::vector<SvcSession*> sessions;
    std::deque<std::vector<uint8_t>> outq;
    std::string label() const { return "app " + std::to_string(id) + " '" + name + "' (pid " + std::to_string(pid) + ")"; }
};

struct SvcSession {
    SvcApp* app = nullptr;
    uint16_t sid = 0;          // the session table's id: the app's handle
    bool connector = false;
    uint64_t req = 0;          // connector: the CONNECT to answer
    uint16_t port = 0;         // the service
    Endpoint peer;
    Session* s = nullptr;      // the table's, until it is forgotten
    AppSession* a = nullptr;
    uint16_t nflows = 0;
    uint32_t ring_size = 0, max_msg = 0;
    Mapping mem;               // send rings (connector) or receive rings (acceptor)
    int memfd = -1;            // until handed to the app
    uint64_t flow_stride = 0;
    uint32_t sq_size = 0, cq_size = 0;
    std::vector<SvcSendFlow*> send;
    std::vector<CompletionRing*> recv; // the receive rings (owned by the flows), for wake-ups
    bool told_up = false, told_end = false, answered = false;
    bool gone = false;         // the flows are out of the data plane
    bool quiet = false;        // ... and a second has passed (readers of the registry let go)
    // Both ends in this daemon: the connector's Senders read the acceptor's
    // cursors in its receive memory, which stays mapped until they are gone.
    SvcSession* local_peer = nullptr;
    SessionEnd end = SessionEnd::None;

    SvcSession() = default;
    SvcSession(const SvcSession&) = delete;
    SvcSession& operator=(const SvcSession&) = delete;
    ~SvcSession() { // a session refused after its memory was made, or never handed over
        if (memfd >= 0)
            close(memfd);
    }
};

Service::Service(Runtime& rt) : rt_(rt) {}

namespace {
void add_counters(SvcCounters& to, const SvcCounters& c) {
    for (const auto& [name, field] : kSvcCounterFields)
        to.*field += peek(c.*field);
}
} // namespace

SvcCounters Service::counters(uint32_t* sessions) const {
    std::lock_guard<std::mutex> lk(counters_mu_);
    SvcCounters t = gone_;
    add_counters(t, ctl_);
    for (const auto& ss : sessions_)
        for (const SvcSendFlow* f : ss->send)
            add_counters(t, f->ctr);
    if (sessions != nullptr)
        *sessions = static_cast<uint32_t>(sessions_.size());
    return t;
}

// A session's send flows (their shared infos and return rings; their
// counters kept) and the memfd it has not handed over yet. Only once nothing
// references them.
void Service::free_send_memory(SvcSession& ss) {
    std::lock_guard<std::mutex> lk(counters_mu_);
    for (SvcSendFlow* f : ss.send) {
        add_counters(gone_, f->ctr);
        rte_ring_free(f->free_shinfo);
        rte_free(f->shinfo);
        rte_free(f);
    }
    ss.send.clear();
    if (ss.memfd >= 0)
        close(ss.memfd);
    ss.memfd = -1;
}

Service::~Service() {
    // The lcores are joined, the ports closed and the Senders gone (every
    // hold on the arenas dropped): everything is let go.
    for (auto& ss : sessions_)
        free_send_memory(*ss);
    {
        std::lock_guard<std::mutex> lk(counters_mu_);
        sessions_.clear();
    }
    auto free_app = [](SvcApp& a) {
        if (a.registered)
            rte_extmem_unregister(a.arena.addr, a.arena.len); // the ports are closed: no DMA unmap needed
        if (a.fd >= 0)
            close(a.fd);
        if (a.wake_fd >= 0)
            close(a.wake_fd);
    };
    for (auto& a : apps_)
        free_app(*a);
    if (listen_fd_ >= 0) {
        close(listen_fd_);
        unlink(path_.c_str());
    }
}

bool Service::open(SetupError& e) {
    const Options& o = rt_.opt_;
    path_ = o.control_socket;
    // The socket and the directories made for it belong to the first
    // --allow-group (default: ours): only its members (and ours) reach it.
    const gid_t group = o.svc_allow_gids_set && !o.svc_allow_gids.empty() ? o.svc_allow_gids[0] : getegid();
    // Its directory (e.g. /run/tailmark) is made if missing: 0750.
    for (size_t at = 1; (at = path_.find('/', at)) != std::string::npos; at++) {
        const std::string dir = path_.substr(0, at);
        if (mkdir(dir.c_str(), 0700) == 0) { // then opened to its group (never wider than 0750 on the way)
            if (chown(dir.c_str(), static_cast<uid_t>(-1), group) != 0 || chmod(dir.c_str(), 0750) != 0) {
                e = {2, "--control-socket: cannot give " + dir + " to group " + std::to_string(group) + " (0750): " +
                            strerror(errno)};
                return false;
            }
        } else if (errno != EEXIST) {
            e = {2, "--control-socket: cannot make " + dir + ": " + strerror(errno)};
            return false;
        }
    }
    const std::string parent = path_.rfind('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
    struct stat pst{};
    if (stat(parent.c_str(), &pst) == 0 && (pst.st_mode & S_IWOTH) != 0 && (pst.st_mode & S_ISVTX) == 0)
        TM_LOG(WARNING, app, "service: %s is writable by every user: any of them can replace the socket",
               parent.c_str());
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path_.c_str(), path_.size() + 1);
    // A socket file left by a daemon that died is replaced; one a live
    // daemon answers on is not.
    int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        const bool live = connect(probe, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
        close(probe);
        if (live) {
            e = {2, "--control-socket: " + path_ + " is in use by a running daemon"};
            return false;
        }
    }
    unlink(path_.c_str());
    listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    // Born 0660 (the umask around bind): the socket never exists wider than
    // it ends. (The umask is the process's: nothing else makes files now.)
    const mode_t old_mask = umask(0117);
    const bool bound = listen_fd_ >= 0 && bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    const int bind_errno = errno;
    umask(old_mask);
    if (!bound || listen(listen_fd_, 64) != 0) {
        e = {2, "--control-socket: " + path_ + ": " + strerror(bound ? errno : bind_errno)};
        if (listen_fd_ >= 0)
            close(listen_fd_);
        listen_fd_ = -1;
        return false;
    }
    if ((group != getegid() && chown(path_.c_str(), static_cast<uid_t>(-1), group) != 0) ||
        chmod(path_.c_str(), 0660) != 0) {
        e = {2, "--control-socket: cannot give " + path_ + " to group " + std::to_string(group) + ": " +
                    strerror(errno)};
        close(listen_fd_);
        listen_fd_ = -1;
        unlink(path_.c_str());
        return false;
    }
    std::string uids, gids;
    auto list = [](const std::vector<uint32_t>& v) {
        std::string r;
        for (uint32_t x : v) {
            if (!r.empty())
                r.push_back(',');
            r.append(std::to_string(x));
        }
        return r.empty() ? std::string("none") : r;
    };
    uids = list(o.svc_allow_uids_set ? o.svc_allow_uids : std::vector<uint32_t>{static_cast<uint32_t>(geteuid())});
    gids = list(o.svc_allow_gids_set ? o.svc_allow_gids : std::vector<uint32_t>{static_cast<uint32_t>(getegid())});
    TM_LOG(INFO, app, "service: applications attach on %s (mode 0660, group %u): uid %s or group %s", path_.c_str(),
           static_cast<unsigned>(group), uids.c_str(), gids.c_str());

    // Zero copy hands the ports extbufs at IOVA = our virtual address of the
    // arena: right where IOVA is VA, and where no port DMAs at all (virtual
    // devices read mbufs at their virtual address). Else every message is
    // copied into mbufs; said once, here.
    opened_tsc_ = rte_rdtsc();
    zero_copy_ = o.svc_zero_copy != Options::ZeroCopy::Off;
    std::string why = "--zero-copy off";
    if (zero_copy_ && rte_eal_iova_mode() != RTE_IOVA_VA) {
        for (uint16_t port : {o.tx_port, o.rx_port}) {
            rte_eth_dev_info info;
            const rte_bus* bus = nullptr;
            if (rte_eth_dev_info_get(port, &info) == 0 && info.device != nullptr)
                bus = rte_dev_bus(info.device);
            const char* name = bus != nullptr ? rte_bus_name(bus) : nullptr;
            if (name == nullptr || strcmp(name, "vdev") != 0) {
                zero_copy_ = false;
                why = "IOVA as " + std::string(rte_eal_iova_mode() == RTE_IOVA_PA ? "PA" : "DC") + " and port " +
                      std::to_string(port) + " on bus " + (name ? name : "?") + " (zero copy needs IOVA as VA: --iova-mode=va with an IOMMU)";
            }
        }
    }
    // A zero-copy message is a header mbuf chained to an extbuf over the
    // arena: a port that cannot send chained mbufs (net_af_xdp in 22.11
    // copies only the first segment) gets copies.
    for (uint16_t port : {o.tx_port, o.rx_port}) {
        rte_eth_dev_info info;
        if (zero_copy_ && rte_eth_dev_info_get(port, &info) == 0 &&
            (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) == 0) {
            zero_copy_ = false;
            why = "port " + std::to_string(port) + " (" + (info.driver_name ? info.driver_name : "?") +
                  ") cannot send multi-segment mbufs";
        }
    }
    if (zero_copy_)
        TM_LOG(INFO, app, "service: zero copy from the applications' arenas (%s)",
               rte_eal_iova_mode() == RTE_IOVA_VA ? "IOVA as VA" : "IOVA as PA, but virtual devices only: no DMA");
    else
        TM_LOG(NOTICE, app, "service: the applications' messages are copied into mbufs: %s", why.c_str());
    return true;
}

// --- the socket ------------------------------------------------------------------

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
    refusal_log_tsc_ = now + rt_.tsc_hz_;
    if (refusals_unlogged_ != 0)
        TM_LOG(WARNING, app, "service: %" PRIu64 " more connection(s) refused in the last second", refusals_unlogged_);
    refusals_unlogged_ = 0;
    return true;
}

// The peer's uid and groups, as the kernel saw them at connect (SO_PEERCRED,
// SO_PEERGROUPS): allowed when its uid is an --allow-uid or its primary or
// a supplementary group an --allow-group (defaults: ours).
bool Service::peer_allowed(int fd, std::string& who) {
    const Options& o = rt_.opt_;
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
    const Options& o = rt_.opt_;
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
        app->hello_by = now + rt_.tsc_hz_ * kHelloTimeoutMs / 1000;
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

void Service::on_hello(SvcApp& app, const tm_msg_hello& m, const int* fds, int nfds) {
    const uint64_t req = m.h.req_id;
    const Options& o = rt_.opt_;
    const int arena_fd = nfds > 0 ? fds[0] : -1;
    auto fail = [&](int err, const std::string& text) {
        bump(ctl_.refused_hello);
        reply_error(app, req, err, text);
        if (log_refusal(rte_rdtsc()))
            TM_LOG(WARNING, app, "service: %s: HELLO refused: %s", app.label().c_str(), text.c_str());
        if (arena_fd >= 0)
            close(arena_fd);
    };
    if (app.pid == 0) // the kernel's (SO_PEERCRED) when it told us
        app.pid = m.pid;
    app.name.assign(m.name, strnlen(m.name, sizeof(m.name)));
    for (char& c : app.name)
        if (c < 32 || c > 126)
            c = '?';
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
        return;
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
    // Read only, and nothing prefaulted: the size is the app's to declare,
    // so the control loop touches none of it (the tx lcore faults in what
    // it sends).
    void* a = mmap(nullptr, m.arena_bytes, PROT_READ, MAP_SHARED, arena_fd, 0);
    if (a == MAP_FAILED)
        return fail(errno, std::string("arena mmap: ") + strerror(errno));
    close(arena_fd);
    app.arena.addr = a;
    app.arena.len = m.arena_bytes;
    app.page_size = m.page_size;
    app.zero_copy = zero_copy_;
    // Zero copy: registered with DPDK (one memseg per page: the loop's
    // longest step, bounded by --max-arena) and DMA-mapped for the ports at
    // IOVA = this process's address (what svc_source gives the extbufs).
    // Virtual devices need no DMA map (ENOTSUP). Copies need neither.
    if (app.zero_copy) {
        if (rte_extmem_register(a, m.arena_bytes, nullptr, 0, m.page_size) != 0) {
            app.arena.reset();
            bump(ctl_.refused_hello);
            reply_error(app, req, rte_errno, std::string("rte_extmem_register: ") + rte_strerror(rte_errno));
            return;
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
    }
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
    const Options& o = rt_.opt_;
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
    const int base = rt_.send_ids_.alloc(m.nflows, now);
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
    p.mtu = o.mtu;
    p.ring_size = m.ring_size;
    p.max_msg = m.max_msg;
    p.key = static_cast<uint32_t>(rte_rand());
    p.keys_given = false; // the acceptor chooses
    p.version = static_cast<uint8_t>(o.data_version);
    p.data_auth = o.data_auth;
    SipKey key = rt_.secret_;
    if (m.has_secret)
        memcpy(&key, m.secret, sizeof(key));
    Session* s = rt_.sessions_->connect(ss->peer, m.service, key, p, static_cast<uint16_t>(base), nullptr, now, ss.get());
    if (s == nullptr) {
        rt_.send_ids_.unuse(static_cast<uint32_t>(base), m.nflows); // no CONNECT named them
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
    SipKey key = rt_.secret_;
    if (m.has_secret)
        memcpy(&key, m.secret, sizeof(key));
    struct Limits {
        uint16_t flows;
        uint32_t ring, msg;
    } lim{m.max_flows, m.max_ring, m.max_msg};
    const uint16_t port = m.service;
    if (!rt_.sessions_->listen(port, key, [this, port, lim](Session& s, const FlowParams& p) {
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
    rt_.sessions_->unlisten(port);
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

// --- sessions --------------------------------------------------------------------

// A listener's acceptance: the receive rings in a memfd the app will map,
// one CompletionRing per flow, installed before the ACCEPT goes out.
AcceptDecision Service::decide(uint16_t port, Session& s, const FlowParams& p) {
    AcceptDecision d;
    const Options& o = rt_.opt_;
    auto it = listeners_.find(port);
    auto refuse = [&](RefuseReason r, uint64_t ours, uint64_t theirs) {
        d = AcceptDecision{};
        d.reason = r;
        d.expected = ours;
        d.got = theirs;
        TM_LOG(WARNING, app, "service: session from %s to port %u refused: %s (ours %" PRIu64 ", theirs %" PRIu64 ")",
               to_string(s.peer).c_str(), port, to_string(r), ours, theirs);
        return d;
    };
    if (it == listeners_.end() || it->second->dead)
        return refuse(RefuseReason::NoListener, 0, port);
    SvcApp& app = *it->second;
    if (p.nflows == 0 || p.nflows > kMaxFlowsPerSession)
        return refuse(RefuseReason::Flows, kMaxFlowsPerSession, p.nflows);
    if (p.ring_size < 2 || p.ring_size > kMaxRing || (p.ring_size & (p.ring_size - 1)) != 0)
        return refuse(RefuseReason::RingSize, kMaxRing, p.ring_size);
    const uint32_t mtu = std::min(p.mtu, o.mtu);
    const uint32_t stride = stride_for_mtu(mtu, p.version);
    const GroupPlan plan = plan_group(p.max_msg, stride);
    if (!plan.ok())
        return refuse(RefuseReason::Mtu, o.mtu, p.mtu);
    const uint64_t flow_stride = (ring_layout(p.ring_size, p.max_msg).total + 4095) / 4096 * 4096;
    const uint64_t total = flow_stride * p.nflows;
    if (total > (o.svc_max_session_mb << 20))
        return refuse(RefuseReason::NoRoom, o.svc_max_session_mb << 20, total);
    if (p.nflows > rt_.registry_room())
        return refuse(RefuseReason::NoRoom, rt_.registry_room(), p.nflows);
    const int base = rt_.recv_ids_.alloc(p.nflows, rte_rdtsc());
    if (base < 0)
        return refuse(RefuseReason::NoRoom, 65536, p.nflows);

    auto ss = std::make_unique<SvcSession>();
    ss->app = &app;
    ss->connector = false;
    ss->port = port;
    ss->peer = s.peer;
    ss->s = &s;
    ss->sid = s.id;
    ss->nflows = p.nflows;
    ss->ring_size = p.ring_size;
    ss->max_msg = p.max_msg;
    ss->flow_stride = flow_stride;
    uint64_t len = total;
    void* map = nullptr;
    ss->memfd = make_memfd("tailmark-recv", len, map, true);
    if (ss->memfd < 0) {
        rt_.recv_ids_.unuse(static_cast<uint32_t>(base), p.nflows); // refused: no packet carried them
        return refuse(RefuseReason::NoRoom, 0, total);
    }
    ss->mem.addr = map;
    ss->mem.len = len;

    d.agreed = p;
    d.agreed.mtu = mtu;
    d.agreed.keys_given = false;
    d.agreed.key = static_cast<uint32_t>(rte_rand());
    d.agreed.overrides.clear();
    d.local_base = static_cast<uint16_t>(base);
    d.defer = true; // ACCEPT once the lcores hold the flows
    s.params = d.agreed;
    s.local_base = d.local_base;
    s.user = ss.get();

    auto a = std::make_unique<AppSession>();
    a->id = s.id;
    a->s = &s;
    a->connector = false;
    a->data_version = s.params.version;
    a->data_auth = s.params.data_auth;
    a->peer = s.peer;
    a->svc = ss.get();
    ss->a = a.get();
    std::string err;
    bool ok = true;
    for (uint16_t i = 0; i < p.nflows && ok; i++) {
        FlowCtx* f = socket_new<FlowCtx>(rt_.rx_socket_);
        if (f == nullptr || !rt_.add_flow(f, rte_rdtsc())) {
            socket_delete(f);
            ok = false;
            break;
        }
        f->gen_id = i;
        f->ring_size = p.ring_size;
        f->pkts_per_msg = plan.pkt_count;
        f->recv_session = f->session = a.get();
        a->flows.push_back(f);
        f->ring = CompletionRing::create_at(static_cast<uint8_t*>(map) + i * flow_stride, flow_stride,
                                            static_cast<uint16_t>(base + i), p.ring_size, p.max_msg);
        ok = f->ring != nullptr && rt_.make_recv_flow(*f, *a, s, static_cast<uint16_t>(base + i), i, err);
        if (ok)
            ss->recv.push_back(f->ring.get());
    }
    if (!ok) { // nothing reached an lcore
        TM_LOG(ERR, app, "service: session from %s: %s", to_string(s.peer).c_str(),
               err.empty() ? "out of memory" : err.c_str());
        for (FlowCtx* f : a->flows) {
            rt_.free_recv(*f);
            rt_.abandon_flow(*f);
        }
        rt_.publish_flows();
        rt_.recv_ids_.unuse(static_cast<uint32_t>(base), p.nflows); // refused: no packet carried them
        s.user = nullptr;
        d = AcceptDecision{};
        d.reason = RefuseReason::NoRoom;
        return d;
    }
    for (FlowCtx* f : a->flows)
        rt_.post_recv(*f, *a);
    rt_.publish_flows();
    TM_LOG(INFO, app, "service: session %u from %s to port %u (%s): %u flows, ring %u, max %u B, data v%u%s", s.id,
           to_string(s.peer).c_str(), port, app.label().c_str(), p.nflows, p.ring_size, p.max_msg,
           unsigned(s.params.version), s.params.data_auth ? " with --data-auth" : "");
    app.sessions.push_back(ss.get());
    rt_.add_session(std::move(a));
    std::lock_guard<std::mutex> lk(counters_mu_);
    sessions_.push_back(std::move(ss));
    return d;
}

void Service::install_send(SvcSession& ss, Session& s, uint64_t now) {
    (void)now;
    SvcApp& app = *ss.app;
    AppSession& a = *ss.a;
    AppSession* peer_side = s.local_peer ? rt_.app_session(s.peer_id) : nullptr;
    const uint32_t ring = s.params.ring_size;
    ss.sq_size = pow2_at_least(uint64_t(ring) * 2);
    ss.cq_size = ss.sq_size;
    const tm_send_layout l = tm_send_rings(ss.sq_size, ss.cq_size);
    ss.flow_stride = l.total;
    uint64_t len = l.total * s.params.nflows;
    void* map = nullptr;
    ss.memfd = make_memfd("tailmark-send", len, map, false);
    if (ss.memfd < 0) {
        TM_LOG(ERR, app, "service: session %u: send rings: %s", s.id, strerror(errno));
        rt_.sessions_->close(&s, now); // ends it: the CONNECT is answered then
        return;
    }
    ss.mem.addr = map;
    ss.mem.len = len;
    const GroupPlan plan = plan_group(s.params.max_msg, stride_for_mtu(s.params.mtu, s.params.version));
    for (uint16_t i = 0; i < s.params.nflows; i++) {
        uint8_t* base = static_cast<uint8_t*>(map) + i * l.total;
        auto* q = reinterpret_cast<tm_spsc*>(base + l.sq);
        auto* c = reinterpret_cast<tm_spsc*>(base + l.cq);
        q->size = ss.sq_size;
        q->entry_bytes = sizeof(tm_sqe);
        c->size = ss.cq_size;
        c->entry_bytes = sizeof(tm_cqe);

        FlowCtx* f = socket_new<FlowCtx>(rt_.tx_socket_);
        auto* sf = static_cast<SvcSendFlow*>(rte_zmalloc_socket("tm_svc_flow", sizeof(SvcSendFlow), 64, rt_.tx_socket_));
        if (f == nullptr || sf == nullptr || !rt_.add_flow(f, now)) {
            socket_delete(f);
            rte_free(sf);
            TM_LOG(ERR, app, "service: session %u: out of memory (flow %u)", s.id, i);
            rt_.sessions_->close(&s, now);
            return;
        }
        new (sf) SvcSendFlow();
        sf->sq = q;
        sf->sqe = reinterpret_cast<const tm_sqe*>(base + l.sqe);
        sf->cq = c;
        sf->cqe = reinterpret_cast<tm_cqe*>(base + l.cqe);
        sf->sq_mask = ss.sq_size - 1;
        sf->cq_mask = ss.cq_size - 1;
        sf->arena = static_cast<const uint8_t*>(app.arena.addr);
        sf->arena_len = app.arena.len;
        sf->arena_iova = reinterpret_cast<rte_iova_t>(app.arena.addr);
        sf->zero_copy = app.zero_copy;
        sf->max_msg = s.params.max_msg;
        sf->nshinfo = ring * 2;
        char name[RTE_RING_NAMESIZE];
        snprintf(name, sizeof(name), "tm_svh_%u", ring_names_++); // names are process-wide
        sf->free_shinfo = rte_ring_create_elem(name, sizeof(uint32_t), sf->nshinfo, rt_.tx_socket_,
                                               RING_F_SC_DEQ | RING_F_EXACT_SZ);
        auto* holds = static_cast<SvcHold*>(rte_zmalloc_socket("tm_svc_holds", sizeof(SvcHold) * sf->nshinfo, 64,
                                                                rt_.tx_socket_));
        {
            std::lock_guard<std::mutex> lk(counters_mu_);
            ss.send.push_back(sf);
        }
        f->gen_id = i;
        f->ring_size = ring;
        f->pkts_per_msg = plan.pkt_count;
        f->session = f->send_session = &a;
        a.flows.push_back(f);
        if (sf->free_shinfo == nullptr || holds == nullptr) {
            rte_free(holds);
            TM_LOG(ERR, app, "service: session %u: out of memory (flow %u)", s.id, i);
            rt_.sessions_->close(&s, now);
            return;
        }
        sf->shinfo = reinterpret_cast<rte_mbuf_ext_shared_info*>(holds);
        for (uint32_t k = 0; k < sf->nshinfo; k++) {
            holds[k].sh.free_cb = svc_shinfo_free;
            holds[k].sh.fcb_opaque = &holds[k];
            holds[k].owner = sf;
            holds[k].index = k;
            rte_ring_sp_enqueue_elem(sf->free_shinfo, &k, sizeof(k));
        }
        f->send_id = static_cast<uint16_t>(s.local_base + i);
        const uint16_t wire = static_cast<uint16_t>(s.peer_base + i);
        SendFlowSpec sp;
        sp.id = f->send_id;
        TxFlow::make(sp.tx, wire, s.params.key_of(i), ring, s.params.mtu, rt_.address_to(s), s.link->data_version,
                     s.link->tx_data_key, s.link->data_auth ? s.link->tx_auth_h : nullptr);
        sp.ring_size = ring;
        sp.max_msg = s.params.max_msg;
        sp.reliable = true;
        sp.report = true;
        sp.payload = app.zero_copy ? PayloadMode::ZeroCopy : PayloadMode::Copy; // extbufs over the arena, or copies
        sp.link = s.link;
        if (peer_side != nullptr && i < peer_side->flows.size() && peer_side->flows[i]->recv != nullptr) {
            sp.local_acked = Receiver::acked_word(peer_side->flows[i]->recv);
            sp.local_released = peer_side->flows[i]->ring->released_word();
            if (auto* ps = static_cast<SvcSession*>(peer_side->svc); ps != nullptr) {
                ss.local_peer = ps;
                ps->local_peer = &ss;
            }
        }
        sp.user = sf;
        // A peer in this daemon: over the in-memory loopback, to its flow's rx lcore.
        const uint32_t si = peer_side != nullptr && i < peer_side->flows.size()
                                ? rt_.local_sender_for(*peer_side->flows[i], wire, i)
                                : rt_.sender_for(wire, i);
        f->sender = rt_.senders_[si];
        f->send_lcore = rt_.sender_lcore_[si];
        f->send = Sender::make_flow(sp, rt_.tx_socket_);
        if (f->send == nullptr) {
            TM_LOG(ERR, app, "service: session %u: out of memory (send state of flow %u)", s.id, i);
            rt_.sessions_->close(&s, now);
            return;
        }
        __atomic_store_n(&rt_.sender_of_[f->send_id], static_cast<uint8_t>(si), __ATOMIC_RELEASE);
        rt_.post(f->send_lcore,
                 {Request::Op::AddSend, false, FailReason::None, f->send_id, f->index, f->sender, f->send, &a});
        a.pending++;
    }
    rt_.publish_flows();
}

void Service::on_session(Session& s, uint64_t now) {
    auto* ss = static_cast<SvcSession*>(s.user);
    if (ss == nullptr)
        return; // refused before any of ours was made
    if (s.state == SessionState::Established) {
        if (!ss->connector) {
            if (ss->a != nullptr && ss->a->stage == AppSession::Stage::Installing) {
                ss->a->stage = AppSession::Stage::Live;
                ss->a->up_tsc = now;
            }
            accepted(*ss, now);
            return;
        }
        if (ss->a != nullptr)
            return;
        auto a = std::make_unique<AppSession>();
        a->id = s.id;
        a->s = &s;
        a->connector = true;
        a->data_version = s.params.version;
        a->data_auth = s.params.data_auth;
        a->peer = s.peer;
        a->svc = ss;
        a->up_tsc = now; // (tailmark-ctl's up_s)
        ss->a = &rt_.add_session(std::move(a));
        TM_LOG(INFO, app, "service: session %u to %s up: %u flows, MTU %u, ring %u, data v%u%s%s", s.id, to_string(s.peer).c_str(),
               s.params.nflows, s.params.mtu, s.params.ring_size, unsigned(s.params.version),
               s.params.data_auth ? " with --data-auth" : "", s.local_peer ? " (this daemon)" : "");
        install_send(*ss, s, now);
        if (ss->a->pending == 0 && s.state == SessionState::Established) {
            ss->a->stage = AppSession::Stage::Live;
            connected(*ss);
        }
        return;
    }
    if (s.state != SessionState::Ended)
        return;
    if (ss->end == SessionEnd::None)
        ss->end = s.end;
    ss->s = nullptr; // forgotten by the control loop once its flows are out
    if (ss->a == nullptr) { // never came up
        if (ss->connector && !ss->answered) {
            ss->answered = true;
            int err = ECONNRESET;
            std::string why = to_string(s.end);
            switch (s.end) {
            case SessionEnd::Refused:
            case SessionEnd::BadAccept:
                err = ECONNREFUSED;
                why = std::string("refused by ") + to_string(s.peer) + ": " + to_string(s.refuse) + " (theirs " +
                      std::to_string(s.refuse_expected) + ", ours " + std::to_string(s.refuse_got) + ")";
                break;
            case SessionEnd::NoAnswer:
                err = ETIMEDOUT;
                why = "no answer from " + ip_to_string(s.peer.ip) + " port " + std::to_string(ss->port) +
                      " (is an application listening there, with the same secret?)";
                break;
            case SessionEnd::ArpFailed:
                err = EHOSTUNREACH;
                if (const uint32_t hop = rt_.sessions_->next_hop(s.peer.ip); hop != s.peer.ip)
                    why = "the gateway " + ip_to_string(hop) + " did not answer ARP";
                else
                    why = ip_to_string(s.peer.ip) + " did not answer ARP (on another subnet? the daemon needs --gateway)";
                break;
            default:
                break;
            }
            if (ss->app != nullptr)
                reply_error(*ss->app, ss->req, err, why);
        }
        ss->gone = ss->quiet = true; // nothing reached the data plane
        return;
    }
    // Both ends here: the other end goes too, at once (its Senders read
    // this end's cursors, which are let go a second after its flows).
    if (ss->local_peer != nullptr && ss->local_peer->s != nullptr && ss->local_peer->s->state != SessionState::Ended) {
        ss->local_peer->end = SessionEnd::PeerClosed; // what its application is told
        rt_.sessions_->close(ss->local_peer->s, now);
    }
    AppSession& a = *ss->a;
    a.end = s.end;
    a.down_tsc = now;
    TM_LOG(INFO, app, "service: session %u %s %s ended: %s", s.id, ss->connector ? "to" : "from",
           to_string(s.peer).c_str(), to_string(ss->end));
    rt_.detach(a, now);
    if (a.stage == AppSession::Stage::Gone)
        on_stage(a, now);
}

void Service::on_stage(AppSession& a, uint64_t now) {
    auto* ss = static_cast<SvcSession*>(a.svc);
    if (ss == nullptr)
        return;
    if (ss->connector && a.stage == AppSession::Stage::Live && !ss->told_up && ss->s != nullptr &&
        ss->s->state == SessionState::Established) {
        connected(*ss);
        return;
    }
    if (a.stage != AppSession::Stage::Gone || ss->gone)
        return;
    ss->gone = true;
    if (ss->connector && !ss->answered && ss->app != nullptr) { // failed while installing
        ss->answered = true;
        reply_error(*ss->app, ss->req, ECONNRESET, std::string("session ended while opening: ") + to_string(ss->end));
    }
    ended(*ss);
    rt_.later(now, [ss] { ss->quiet = true; });
}

void Service::connected(SvcSession& ss) {
    ss.told_up = true;
    ss.answered = true;
    if (ss.app == nullptr || ss.app->dead)
        return;
    tm_msg_connected m{};
    m.h = {TM_MSG_CONNECTED, sizeof(m), ss.req};
    m.session = ss.sid;
    m.nflows = ss.nflows;
    m.ring_size = ss.s ? ss.s->params.ring_size : ss.ring_size;
    m.max_msg = ss.s ? ss.s->params.max_msg : ss.max_msg;
    m.sq_size = ss.sq_size;
    m.cq_size = ss.cq_size;
    m.send_bytes = ss.mem.len;
    m.flow_stride = ss.flow_stride;
    hand_over(ss, &m, sizeof(m), "CONNECTED");
}

// Sends m with the session's memfd; the daemon's copy of the fd goes (the
// mapping stays), so the memory is the application's and ours alone.
void Service::hand_over(SvcSession& ss, const void* m, size_t len, const char* what) {
    if (!send_msg(*ss.app, m, len, ss.memfd))
        TM_LOG(WARNING, app, "service: %s: %s not delivered", ss.app->label().c_str(), what);
    close(ss.memfd);
    ss.memfd = -1;
}

void Service::accepted(SvcSession& ss, uint64_t now) {
    (void)now;
    if (ss.told_up || ss.app == nullptr || ss.app->dead)
        return;
    ss.told_up = true;
    tm_msg_accepted m{};
    m.h = {TM_MSG_ACCEPTED, sizeof(m), 0};
    m.session = ss.sid;
    m.service = ss.port;
    m.nflows = ss.nflows;
    m.peer_ip = ss.peer.ip;
    m.peer_port = ss.peer.port;
    m.ring_size = ss.ring_size;
    m.max_msg = ss.max_msg;
    m.recv_bytes = ss.mem.len;
    m.flow_stride = ss.flow_stride;
    hand_over(ss, &m, sizeof(m), "ACCEPTED");
}

void Service::ended(SvcSession& ss) {
    if (ss.told_end || !ss.told_up || ss.app == nullptr || ss.app->dead)
        return;
    ss.told_end = true;
    tm_msg_ended m{};
    m.h = {TM_MSG_ENDED, sizeof(m), 0};
    m.session = ss.sid;
    m.reason = end_reason(ss.end);
    send_msg(*ss.app, &m, sizeof(m));
}

// Closes an application's session. A receiving one waits, a little, until
// its last ACK carries every release its application made: those messages
// were consumed, and the sender must hear "delivered", not the CLOSE first
// and "closed" for them (the ACK and the CLOSE leave on one ring, in order).
void Service::close_session(SvcSession& ss, uint64_t now) {
    if (ss.s == nullptr || ss.s->state == SessionState::Ended)
        return;
    if (ss.connector || ss.a == nullptr || ss.s->local_peer) {
        rt_.sessions_->close(ss.s, now);
        return;
    }
    for (const auto& c : closing_)
        if (c.first == &ss)
            return;
    closing_.emplace_back(&ss, now + rt_.tsc_hz_ * kCloseFlushUs / 1000000);
}

void Service::finish_closes(uint64_t now) {
    for (size_t i = 0; i < closing_.size();) {
        SvcSession& ss = *closing_[i].first;
        bool flushed = true;
        if (ss.a != nullptr)
            for (const FlowCtx* f : ss.a->flows)
                if (f->recv != nullptr && f->ring && Receiver::released_sent(f->recv) != f->ring->released())
                    flushed = false;
        if (!flushed && now < closing_[i].second) {
            i++;
            continue;
        }
        if (ss.s != nullptr && ss.s->state != SessionState::Ended)
            rt_.sessions_->close(ss.s, now);
        closing_.erase(closing_.begin() + static_cast<std::ptrdiff_t>(i));
    }
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
            rt_.sessions_->unlisten(it->first);
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
            ss->a->svc = nullptr;
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

// Sleeping applications with something to take are woken, once per sleep.
void Service::wake(uint64_t now) {
    (void)now;
    for (auto& ap : apps_) {
        SvcApp& a = *ap;
        if (a.dead || a.bell == nullptr || __atomic_load_n(&a.bell->sleeping, __ATOMIC_SEQ_CST) == 0)
            continue;
        bool ready = false;
        for (SvcSession* ss : a.sessions) {
            for (SvcSendFlow* f : ss->send)
                ready = ready || __atomic_load_n(&f->cq->head, __ATOMIC_ACQUIRE) !=
                                     __atomic_load_n(&f->cq->tail, __ATOMIC_ACQUIRE);
            if (!ss->gone)
                for (CompletionRing* r : ss->recv)
                    ready = ready || r->poll(r->released()) != nullptr;
            if (ready)
                break;
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

void Service::poll(uint64_t now) {
    wake(now);
    if (!closing_.empty())
        finish_closes(now);
    if (now < next_socket_tsc_)
        return;
    next_socket_tsc_ = now + rt_.tsc_hz_ * kSocketUs / 1000000;
    expire_hellos(now);
    std::vector<pollfd> pf;
    pf.reserve(apps_.size() + 1);
    pf.push_back({listen_fd_, POLLIN, 0});
    for (auto& a : apps_)
        pf.push_back({a->dead ? -1 : a->fd, static_cast<short>(POLLIN | (a->outq.empty() ? 0 : POLLOUT)), 0});
    if (::poll(pf.data(), pf.size(), 0) > 0) {
        for (size_t i = 1; i < pf.size(); i++)
            if (pf[i].revents != 0 && i - 1 < apps_.size())
                read_app(*apps_[i - 1], now);
        if (pf[0].revents & POLLIN)
            accept_apps();
    }
    reap(now);
}

// --- status (tailmark-ctl) -------------------------------------------------------

// The daemon as operators see it (status.h). On the control loop: reads the
// flows as update_rates() does, and the counters as the summary does.
StatusSnapshot Service::status_snapshot(uint64_t now) const {
    const Options& o = rt_.opt_;
    const double hz = static_cast<double>(rt_.tsc_hz_);
    StatusSnapshot st;
    st.pid = static_cast<uint32_t>(getpid());
    st.version = TAILMARK_VERSION;
    st.abi = kChannelAbi;
    st.abi_minor = kChannelAbiMinor;
    st.mode = to_string(o.mode);
    st.control_socket = path_;
    st.local_ip = ip_to_string(o.src_ip);
    st.udp_port = o.udp_port;
    st.mtu = o.mtu;
    st.zero_copy = zero_copy_;
    st.uptime_s = double(now - opened_tsc_) / hz;
    auto port = [&](uint16_t id, const char* role) {
        StatusPort p;
        p.id = id;
        p.role = role;
        char name[RTE_ETH_NAME_MAX_LEN] = "?";
        rte_eth_dev_get_name_by_port(id, name);
        p.name = name;
        rte_eth_dev_info info;
        if (rte_eth_dev_info_get(id, &info) == 0 && info.driver_name != nullptr)
            p.driver = info.driver_name;
        rte_eth_link link{};
        if (rte_eth_link_get_nowait(id, &link) == 0) {
            p.link_up = link.link_status == RTE_ETH_LINK_UP;
            p.speed_mbps = link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : link.link_speed;
        }
        rte_eth_stats es{};
        if (rte_eth_stats_get(id, &es) == 0) {
            p.rx_packets = es.ipackets;
            p.tx_packets = es.opackets;
            p.rx_bytes = es.ibytes;
            p.tx_bytes = es.obytes;
            p.rx_missed = es.imissed;
            p.rx_errors = es.ierrors;
            p.tx_errors = es.oerrors;
            p.rx_nombuf = es.rx_nombuf;
        }
        st.ports.push_back(p);
    };
    port(o.tx_port, "data");
    if (o.rx_port != o.tx_port)
        port(o.rx_port, "data");
    if (rt_.local_port_)
        port(rt_.local_port_->id(), "local");
    for (const auto& ap : apps_) {
        const SvcApp& a = *ap;
        if (!a.hello || a.dead)
            continue;
        StatusApp x;
        x.id = a.id;
        x.name = a.name;
        x.pid = a.pid;
        x.uid = a.uid;
        x.gid = a.gid;
        x.sessions = static_cast<uint32_t>(a.sessions.size());
        for (const auto& [svc, who] : listeners_)
            if (who == &a)
                x.listening.push_back(svc);
        x.zero_copy = a.zero_copy;
        x.arena_bytes = a.arena.len;
        x.wakes = a.bell != nullptr ? __atomic_load_n(&a.bell->wakes, __ATOMIC_RELAXED) : 0;
        st.apps.push_back(std::move(x));
    }
    for (const auto& sp : sessions_) {
        const SvcSession& ss = *sp;
        StatusSession x;
        x.id = ss.sid;
        x.app = ss.app != nullptr ? ss.app->id : 0;
        x.role = ss.connector ? "connector" : "acceptor";
        x.peer = to_string(ss.peer);
        x.service = ss.port;
        x.state = ss.s != nullptr ? to_string(ss.s->state) : ss.gone ? "ended" : "closing";
        x.end = to_string(ss.end);
        x.flows = ss.nflows;
        x.ring_size = ss.s != nullptr ? ss.s->params.ring_size : ss.ring_size;
        x.max_msg = ss.s != nullptr ? ss.s->params.max_msg : ss.max_msg;
        if (ss.a != nullptr) {
            if (ss.a->up_tsc != 0)
                x.up_s = double((ss.a->down_tsc ? ss.a->down_tsc : now) - ss.a->up_tsc) / hz;
            for (const FlowCtx* f : ss.a->flows) {
                if (ss.connector) {
                    const Sender::FlowView v = rt_.send_view(*f);
                    x.sent += v.sent;
                    x.acked += v.acked;
                    x.released += v.released;
                    x.retransmitted += v.retx_pkts;
                    x.rate_mbps = std::max(x.rate_mbps, v.cc_rate_bps / 1e6);
                    x.srtt_us = std::max(x.srtt_us, double(v.cc_srtt) * 1e6 / hz);
                    x.base_rtt_us = std::max(x.base_rtt_us, double(v.cc_base_rtt) * 1e6 / hz);
                    x.msgs_per_s += f->rate_sent.load(std::memory_order_relaxed);
                } else {
                    x.released += rt_.released_of(*f);
                    x.acked += rt_.acked_of(*f);
                    x.msgs_per_s += f->rate_done.load(std::memory_order_relaxed);
                }
            }
        }
        for (const SvcSendFlow* f : ss.send) {
            x.delivered += peek(f->ctr.delivered);
            x.failed += peek(f->ctr.failed);
        }
        st.sessions.push_back(std::move(x));
    }
    const DropCounters d = rt_.drop_totals();
    for (size_t i = 0; i < kDropReasonCount; i++) {
        st.drops.emplace_back(std::string(kDropReasonNames[i]), d[i]);
        st.drops_total += d[i];
    }
    st.tx_dropped = rt_.totals().tx_dropped;
    const SvcCounters c = counters();
    for (const auto& [name, field] : kSvcCounterFields)
        st.service.emplace_back(name, c.*field);
    return st;
}

// STATUS: the snapshot's JSON (at most 50 ms old: a client asking in a loop
// costs the control loop one snapshot per 50 ms) in a sealed memfd, then the
// connection is closed quietly: it said no HELLO and holds nothing.
void Service::on_status(SvcApp& app, const tm_msg_status& m, uint64_t now) {
    if (status_cache_.empty() || now - status_tsc_ > rt_.tsc_hz_ / 20) {
        status_cache_ = status_json(status_snapshot(now));
        status_tsc_ = now;
    }
    const int fd = memfd_create("tailmark-status", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    size_t done = 0;
    while (fd >= 0 && done < status_cache_.size()) {
        const ssize_t n = write(fd, status_cache_.data() + done, status_cache_.size() - done);
        if (n <= 0)
            break;
        done += static_cast<size_t>(n);
    }
    if (fd < 0 || done != status_cache_.size() ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        reply_error(app, m.h.req_id, errno ? errno : EIO, std::string("status memfd: ") + strerror(errno));
    } else {
        tm_msg_status_reply r{};
        r.h = {TM_MSG_STATUS_REPLY, sizeof(r), m.h.req_id};
        r.abi = kChannelAbi;
        r.minor = kChannelAbiMinor;
        r.json_bytes = done;
        send_msg(app, &r, sizeof(r), fd);
    }
    if (fd >= 0)
        close(fd);
    app.dead = true; // one STATUS per connection; reap() lets it go
    close(app.fd);
    app.fd = -1;
    app.outq.clear();
}

void Service::shutdown(uint64_t now) {
    for (auto& a : apps_)
        drop_app(*a, now, "disconnected: the daemon stops");
}

} // namespace tailmark::app
