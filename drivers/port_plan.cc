// Port planning (port_plan.h). Its lines are logged as tailmark.app, as
// they were when the daemon planned its ports.
#include "drivers/port_plan.h"

#include <algorithm>
#include <cstring>

#ifdef TAILMARK_HAVE_VDEV_INIT
#include <rte_bus_vdev.h>
#endif
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include "tailmark/log.h"
#include "tailmark/wire.h"

namespace tailmark::drivers {

namespace {

// net_af_packet's socket ring frame size (its framesz devarg; 2048 by
// default), 0 for other drivers. The PMD copies whole frames of up to that
// size into one mbuf, and refuses a pool whose mbufs cannot hold one. DPDK
// 22.11's af_packet reports a 1518-byte maximum frame whatever framesz is,
// and ethdev then refuses a larger MTU, yet its rx and tx move frames up to
// framesz: jumbo frames over a veth (ip link set ... mtu 9000) take
// framesz=9216 and --mtu 9000, with ethdev left at its default.
uint32_t af_packet_frame(const rte_eth_dev_info& i) {
    if (i.driver_name == nullptr || strcmp(i.driver_name, "net_af_packet") != 0)
        return 0;
    const rte_devargs* da = i.device != nullptr ? rte_dev_devargs(i.device) : nullptr;
    const char* f = da != nullptr && da->args != nullptr ? strstr(da->args, "framesz=") : nullptr;
    return f != nullptr ? static_cast<uint32_t>(strtoul(f + 8, nullptr, 10)) : 2048;
}

uint32_t round_pow2_minus1(uint64_t n) {
    uint64_t p = 1;
    while (p - 1 < n)
        p <<= 1;
    return static_cast<uint32_t>(p - 1);
}

bool open_local_loop(const PortNeeds& n, PortSet& out, PortError& e);

// What open_ports learns of its ports and decides for them, step to step.
struct Plan {
    rte_eth_dev_info txi, rxi;
    bool same = false; // one port sends and receives
    // Queue counts: rx and tx on the rx port, rx on the tx port (its tx
    // queues are PortSet::tx_nq).
    uint16_t rx_nrxq = 1, rx_ntxq = 1, tx_nrxq = 1;
    uint32_t tx_ring = 0, rx_ring = 0; // af_packet_frame of each port: 0 when not af_packet
};

// The embedded default: loopback on net_ring0 when no port was given.
bool make_default_port(const PortNeeds& n, PortError& e) {
#ifdef TAILMARK_HAVE_VDEV_INIT
    if (rte_eth_dev_count_avail() == 0 && n.loopback) {
        TM_LOG(NOTICE, app, "no ports: creating net_ring0 (loopback)");
        if (rte_vdev_init("net_ring0", nullptr) != 0) {
            e = {1, "no ports, and net_ring0 could not be created: pass --vdev=..."};
            return false;
        }
    }
#else
    (void)n;
    (void)e;
#endif
    return true;
}

// Both ports' static facts: what the rest of the plan is checked against.
bool read_infos(const PortNeeds& n, Plan& p, PortError& e) {
    std::string err;
    if (!Port::info(n.tx_port, p.txi, err)) {
        e = {2, "--tx-port: " + err};
        return false;
    }
    if (!Port::info(n.rx_port, p.rxi, err)) {
        e = {2, "--rx-port: " + err};
        return false;
    }
    p.same = n.tx_port == n.rx_port;
    return true;
}

// Flow steering. net_ring loops tx queue q back to rx queue q, so in
// loopback each flow is sent on the queue of the rx lcore that owns it.
// Elsewhere, with several rx lcores: RSS where the port's hash can be
// computed here (a flow is then placed where the hash sends it), else
// hand-off (flows dealt to rx lcores; one that gets another's data
// passes it on through a ring: af_packet's fanout, a tap's queues).
void plan_steering(const PortNeeds& n, Plan& p, PortSet& out) {
    const std::string rx_driver = p.rxi.driver_name ? p.rxi.driver_name : "";
    const auto R = n.rx_lcores;
    const auto T = n.tx_lcores;
    out.steer_by_queue = n.loopback && p.same && rx_driver == "net_ring";
    p.rx_nrxq = R;
    if (out.steer_by_queue) {
        out.tx_nq = R;
        p.rx_ntxq = R;
        if (T > R)
            TM_LOG(WARNING, app, "net_ring loopback uses one tx queue per rx lcore: %u of the %u tx lcores idle",
                   T - R, T);
    } else {
        out.tx_nq = T;
        if (R > 1 && !n.send_only) {
            const uint64_t want = RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4;
            if ((p.rxi.flow_type_rss_offloads & want) == 0 || p.rxi.reta_size == 0)
                out.handoff = true;
            else
                out.rss = true;
        }
    }
    if (p.same)
        p.rx_ntxq = out.tx_nq;
}

// One port's queues and MTU against what it has.
bool queues_fit(const PortNeeds& n, const rte_eth_dev_info& i, uint16_t port, uint16_t nrx, uint16_t ntx,
                PortError& e) {
    if (nrx > i.max_rx_queues) {
        e = {2, "--rx-lcores: port " + std::to_string(port) + " (" + i.driver_name + ") has " +
                    std::to_string(i.max_rx_queues) + " rx queue(s), " + std::to_string(nrx) + " needed"};
        return false;
    }
    if (ntx > i.max_tx_queues) {
        e = {2, "--tx-lcores: port " + std::to_string(port) + " (" + i.driver_name + ") has " +
                    std::to_string(i.max_tx_queues) + " tx queue(s), " + std::to_string(ntx) + " needed"};
        return false;
    }
    if (n.mtu < i.min_mtu || n.mtu > i.max_mtu) {
        e = {2, "--mtu: " + std::to_string(n.mtu) + " is outside port " + std::to_string(port) + "'s [" +
                    std::to_string(i.min_mtu) + ", " + std::to_string(i.max_mtu) + "]"};
        return false;
    }
    return true;
}

// What the ports cannot do is a configuration error (exit 2), caught
// before anything is opened.
bool check_ports(const PortNeeds& n, const Plan& p, const PortSet& out, PortError& e) {
    return p.same ? queues_fit(n, p.rxi, n.rx_port, p.rx_nrxq, p.rx_ntxq, e)
                  : queues_fit(n, p.txi, n.tx_port, p.tx_nrxq, out.tx_nq, e) &&
                        queues_fit(n, p.rxi, n.rx_port, p.rx_nrxq, p.rx_ntxq, e);
}

// Pools: one per NUMA socket in use, every frame in one segment.
bool make_pools(const PortNeeds& n, Plan& p, PortSet& out, PortError& e) {
    out.tx_socket = port_socket(n.tx_port);
    out.rx_socket = port_socket(n.rx_port);
    p.tx_ring = af_packet_frame(p.txi);
    p.rx_ring = af_packet_frame(p.rxi);
    const uint32_t room = std::max({uint32_t(RTE_MBUF_DEFAULT_DATAROOM), RTE_ALIGN_CEIL(n.mtu + kEthLen + 4, 64u),
                                    p.tx_ring, p.rx_ring});
    const uint64_t queues = (p.same ? uint64_t(p.rx_nrxq) + p.rx_ntxq
                                    : uint64_t(p.tx_nrxq) + out.tx_nq + p.rx_nrxq + p.rx_ntxq) +
                            n.rails.size() * (uint64_t(p.rx_nrxq) + p.rx_ntxq);
    const uint64_t want = queues * 1024 * 2 + uint64_t(rte_lcore_count()) * 512 + 8192;
    std::string err;
    for (int sock : {out.tx_socket, out.rx_socket}) {
        bool have = false;
        for (auto& pl : out.pools)
            have = have || pl->socket() == sock;
        if (have)
            continue;
        auto pool = Mempool::create("tm_pool_s" + std::to_string(sock), round_pow2_minus1(want),
                                             room, sock, err);
        if (!pool) {
            e = {1, err + " (raise EAL -m)"};
            return false;
        }
        out.pools.push_back(std::move(pool));
    }
    for (auto& pl : out.pools) {
        if (pl->socket() == out.tx_socket && out.tx_pool == nullptr)
            out.tx_pool = pl->get();
        if (pl->socket() == out.rx_socket && out.rx_pool == nullptr)
            out.rx_pool = pl->get();
    }
    if (out.tx_pool == nullptr)
        out.tx_pool = out.pools.front()->get();
    if (out.rx_pool == nullptr)
        out.rx_pool = out.pools.front()->get();
    return true;
}

// What both ports are opened with: the MTU (and af_packet's frames past
// its reported maximum), checksums, RSS.
bool port_setup(const PortNeeds& n, const Plan& p, const PortSet& out, PortSetup& ps, PortError& e) {
    ps.mtu = n.mtu;
    // af_packet past its reported maximum: frames up to its ring's frame
    // size move (af_packet_frame); the interface's MTU is the user's to set.
    const uint32_t frame = n.mtu + kEthLen;
    if (frame > p.txi.max_rx_pktlen && frame > p.rxi.max_rx_pktlen && p.tx_ring != 0 && p.rx_ring != 0) {
        const uint32_t ring = std::min(p.tx_ring, p.rx_ring);
        // The ring frame also holds the tpacket header and the sockaddr (80
        // B before the frame). Measured over veths: frames arrive whole only
        // with framesz a multiple of 512 (9014-byte frames: 9216 and 9728
        // carry them, 9104-9200 cut every one short; 4014-byte: 4096 and
        // 4608, not 4352).
        if (ring < frame + 80 || ring % 512 != 0) {
            e = {2, "--mtu: " + std::to_string(n.mtu) + " needs net_af_packet's framesz >= " +
                        std::to_string(RTE_ALIGN_CEIL(frame + 80, 512u)) + ", in steps of 512 (it is " +
                        std::to_string(ring) + ")"};
            return false;
        }
        ps.ethdev_mtu = false;
        TM_LOG(NOTICE, app, "--mtu %u: net_af_packet reports a %u-byte maximum frame, its socket ring takes "
               "%u; ethdev left at its MTU, the interface's MTU bounds what arrives", n.mtu,
               p.rxi.max_rx_pktlen, ring);
    }
    ps.l4_checksum = n.l4_checksum;
    ps.rss = out.rss;
    return true;
}

// Opens the port (one that sends and receives), or the tx port then the
// rx port, each with its own queues and pool.
bool open_data_ports(const PortNeeds& n, const Plan& p, PortSetup ps, PortSet& out, PortError& e) {
    std::string err;
    if (p.same) {
        ps.nb_rxq = p.rx_nrxq;
        ps.nb_txq = p.rx_ntxq;
        ps.pool = out.rx_pool;
        out.tx_port = Port::open(n.tx_port, ps, err);
        if (!out.tx_port) {
            e = {1, err};
            return false;
        }
        out.rx_port = out.tx_port.get();
    } else {
        ps.nb_rxq = p.tx_nrxq;
        ps.nb_txq = out.tx_nq;
        ps.rss = false;
        ps.pool = out.tx_pool;
        out.tx_port = Port::open(n.tx_port, ps, err);
        if (!out.tx_port) {
            e = {1, err};
            return false;
        }
        ps.nb_rxq = p.rx_nrxq;
        ps.nb_txq = p.rx_ntxq;
        ps.rss = out.rss;
        ps.pool = out.rx_pool;
        out.rx_port_owned = Port::open(n.rx_port, ps, err);
        if (!out.rx_port_owned) {
            e = {1, err};
            return false;
        }
        out.rx_port = out.rx_port_owned.get();
    }
    return true;
}

// The rails beyond the port: each opened as the port is (its queues, MTU,
// checksums, pool), after the same checks.
bool open_rails(const PortNeeds& n, const Plan& p, PortSetup ps, PortSet& out, PortError& e) {
    if (!n.rails.empty() && !p.same) {
        e = {2, "--rails: each rail sends and receives on its port, so --rx-port must be --tx-port"};
        return false;
    }
    ps.nb_rxq = p.rx_nrxq;
    ps.nb_txq = p.rx_ntxq;
    ps.pool = out.rx_pool;
    for (uint16_t id : n.rails) {
        rte_eth_dev_info i;
        std::string err;
        if (!Port::info(id, i, err)) {
            e = {2, "--rails: " + err};
            return false;
        }
        if (!queues_fit(n, i, id, p.rx_nrxq, p.rx_ntxq, e))
            return false;
        if (af_packet_frame(i) != 0 && af_packet_frame(i) < std::min(p.tx_ring, p.rx_ring)) {
            e = {2, "--rails: port " + std::to_string(id) + "'s net_af_packet framesz is below the port's"};
            return false;
        }
        auto port = Port::open(id, ps, err);
        if (!port) {
            e = {1, "rail port " + std::to_string(id) + ": " + err};
            return false;
        }
        out.rails.push_back(std::move(port));
    }
    return true;
}

} // namespace

// Planned and checked before any port is opened; each step fills `e` where
// it fails, leaving what it made in `out` for the caller to close.
bool open_ports(const PortNeeds& n, PortSet& out, PortError& e) {
    Plan p;
    if (!make_default_port(n, e) || !read_infos(n, p, e))
        return false;
    plan_steering(n, p, out);
    if (!check_ports(n, p, out, e) || !make_pools(n, p, out, e))
        return false;
    PortSetup ps;
    if (!port_setup(n, p, out, ps, e) || !open_data_ports(n, p, ps, out, e) || !open_rails(n, p, ps, out, e))
        return false;
    if (out.rss && !out.rx_port->rss_active()) {
        // The port hashes, but where to cannot be computed here.
        TM_LOG(NOTICE, app, "port %u: RSS key or RETA unreadable; rx lcores hand each other their flows' data",
               n.rx_port);
        out.rss = false;
        out.handoff = true;
    }
    return !n.local_loop || open_local_loop(n, out, e);
}

namespace {

// --mode service: applications of this daemon that connect to each other
// (by its address, or a loopback one) exchange their messages through
// memory, never the wire. An in-process loopback ethdev carries them:
// net_ring, whose tx queue r arrives on rx queue r, one queue per rx lcore,
// which that lcore polls beside its port queue. The protocol is the same
// (placement, completion) but for what only a wire needs: the cursors are
// read in memory instead of ACKs, no CRC32C, packets of 60 KiB (the
// engine's kLoopbackMtu). Without the vdev bus (no rte_vdev_init), they go
// out of the port as before, which only a port that loops back carries.
bool open_local_loop(const PortNeeds& n, PortSet& out, PortError& e) {
#ifdef TAILMARK_HAVE_VDEV_INIT
    static constexpr const char* kName = "net_ring_tmlocal";
    static constexpr uint16_t kQueues = 16; // net_ring's queues when it makes its own rings
    const auto R = n.rx_lcores;
    if (R > kQueues) {
        TM_LOG(WARNING, app, "%u rx lcores: the in-memory loopback has %u queues; sessions between applications of "
               "this daemon go out of the port", R, kQueues);
        return true;
    }
    uint16_t id = 0;
    if (rte_vdev_init(kName, nullptr) != 0 || rte_eth_dev_get_port_by_name(kName, &id) != 0) {
        e = {1, std::string("cannot create the in-memory loopback ") + kName + ": " + rte_strerror(rte_errno)};
        return false;
    }
    PortSetup ps;
    ps.nb_rxq = ps.nb_txq = R;
    ps.mtu = n.mtu;
    ps.pool = out.rx_pool; // never drawn from: the rings hand over the senders' mbufs
    std::string err;
    out.local_port = Port::open(id, ps, err);
    if (!out.local_port) {
        e = {1, "the in-memory loopback: " + err};
        return false;
    }
    TM_LOG(INFO, app, "sessions between applications of this daemon: in memory (port %u, %u queues)", id, R);
#else
    (void)n;
    (void)out;
    (void)e;
    TM_LOG(WARNING, app, "no vdev bus: sessions between applications of this daemon go out of the port");
#endif
    return true;
}

} // namespace

} // namespace tailmark::drivers
