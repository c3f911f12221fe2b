// What the service's files share (service.cc, socket.cc, apps.cc,
// sessions.cc, data_path.cc, ctl_status.cc), and nothing outside them
// includes: the limits, small helpers, and the control thread's records of
// applications (SvcApp) and their sessions (SvcSession).
#pragma once

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

#include "run/flow_ctx.h"
#include "service.h"
#include "service/status.h"
#include "tailmark/log.h"
#include "tailmark/ring_layout.h"

namespace tailmark::app {

using namespace channel;

constexpr uint64_t kSocketUs = 1000;           // the socket is polled this often
constexpr uint32_t kMaxFlowsPerSession = 1024;
constexpr uint32_t kMaxRing = 32768;
constexpr size_t kMaxOutq = 256;               // events an app has not read: then it is dropped
constexpr uint64_t kHuge = 2ull << 20;
constexpr int kMaxFds = 4;
constexpr uint64_t kCloseFlushUs = 50000;      // a closing receiver's last ACK: waited for at most this

inline uint32_t pow2_at_least(uint64_t n) {
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
inline int make_memfd(const char* name, uint64_t& len, void*& map, bool huge) {
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

inline uint32_t end_reason(SessionEnd e) {
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

inline uint8_t fail_code(FailReason r) {
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
// Its free_cb (data_path.cc).
void svc_shinfo_free(void*, void* opaque);

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

} // namespace tailmark::app
