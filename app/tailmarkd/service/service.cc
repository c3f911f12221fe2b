// The service's life: made on the engine (ServiceHost), the control socket opened, the
// control loop's tick (poll), and everything let go at the end.
#include "internal.h"

namespace tailmark::app {

Service::Service(const ServiceHost& host) : h_(host) {}

void Service::later(uint64_t now, std::function<void()> fn) {
    if (h_.node.has_engine())
        h_.node.engine().later(now, std::move(fn));
}

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
    const Options& o = options();
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

void Service::poll(uint64_t now) {
    wake(now);
    if (!closing_.empty())
        finish_closes(now);
    if (now < next_socket_tsc_)
        return;
    next_socket_tsc_ = now + h_.tsc_hz * kSocketUs / 1000000;
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

void Service::shutdown(uint64_t now) {
    for (auto& a : apps_)
        drop_app(*a, now, "disconnected: the daemon stops");
}

} // namespace tailmark::app
