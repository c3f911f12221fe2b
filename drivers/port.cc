#include "drivers/port.h"

#include <cerrno>
#include <cstring>

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_thash.h>

#include "drivers/rx_timestamp.h"
#include "tailmark/log.h"

namespace tailmark::drivers {

namespace {
std::string fail(uint16_t port, const char* step, int rc) {
    return "port " + std::to_string(port) + ": " + step + ": " + rte_strerror(rc < 0 ? -rc : rc);
}

// What was asked against what the port has: its queues, and a pool for
// its rx buffers.
bool check_setup(uint16_t pid, const std::string& driver, const rte_eth_dev_info& info, const PortSetup& s,
                 std::string& err) {
    if (s.nb_rxq == 0 || s.nb_rxq > info.max_rx_queues || s.nb_txq == 0 ||
        s.nb_txq > info.max_tx_queues) {
        err = "port " + std::to_string(pid) + " (" + driver + "): " + std::to_string(s.nb_rxq) +
              " rx / " + std::to_string(s.nb_txq) + " tx queues requested, it has at most " +
              std::to_string(info.max_rx_queues) + " / " + std::to_string(info.max_tx_queues);
        return false;
    }
    if (s.pool == nullptr) {
        err = "port " + std::to_string(pid) + ": no mbuf pool";
        return false;
    }
    return true;
}

} // namespace

int port_socket(uint16_t port_id) {
    int s = rte_eth_dev_socket_id(port_id);
    if (s == SOCKET_ID_ANY || s < 0)
        s = static_cast<int>(rte_socket_id());
    if (s == SOCKET_ID_ANY || s < 0)
        s = 0;
    return s;
}

bool Port::info(uint16_t port_id, rte_eth_dev_info& out, std::string& err) {
    if (!rte_eth_dev_is_valid_port(port_id)) {
        err = "port " + std::to_string(port_id) + " does not exist (" +
              std::to_string(rte_eth_dev_count_avail()) + " ports; add one with e.g. --vdev=net_ring0)";
        return false;
    }
    int rc = rte_eth_dev_info_get(port_id, &out);
    if (rc != 0) {
        err = fail(port_id, "rte_eth_dev_info_get", rc);
        return false;
    }
    return true;
}

std::unique_ptr<Port> Port::open(uint16_t pid, const PortSetup& s, std::string& err) {
    // 1. dev_info_get
    rte_eth_dev_info info;
    if (!Port::info(pid, info, err))
        return nullptr;
    std::unique_ptr<Port> p(new Port(pid));
    p->driver_ = info.driver_name ? info.driver_name : "?";
    p->socket_ = port_socket(pid);
    rte_eth_conf conf{};
    if (!check_setup(pid, p->driver_, info, s, err) || !p->make_conf(info, s, conf, err))
        return nullptr;
    // 2. dev_configure, 3. adjust_nb_rx_tx_desc, 4. queue set-up (and rx
    // callbacks), 5. dev_start. On failure the destructor undoes what was
    // done so far (started_, rx_cbs_, configured_).
    uint16_t nrxd = s.nb_rxd, ntxd = s.nb_txd;
    if (!p->configure(s, conf, err) || !p->setup_queues(info, conf, s, nrxd, ntxd, err) ||
        (s.stamp_rx_tsc && !p->stamp_rx(s, err)) || !p->start(info, conf, s, err))
        return nullptr;

    char mac[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(mac, sizeof(mac), &p->mac_);
    TM_LOG(INFO, port, "port %u (%s) up: %u rxq x %u desc, %u txq x %u desc, MTU %u, socket %d, %s%s",
           pid, p->driver_.c_str(), s.nb_rxq, nrxd, s.nb_txq, ntxd, p->mtu_, p->socket_, mac,
           p->rss_active() ? ", RSS" : "");
    return p;
}

// The port's configuration: the MTU, RSS and the offloads it offers.
bool Port::make_conf(const rte_eth_dev_info& info, const PortSetup& s, rte_eth_conf& conf, std::string& err) {
    const uint16_t pid = id_;
    if (s.mtu != 0 && s.ethdev_mtu) {
        if (s.mtu < info.min_mtu || s.mtu > info.max_mtu) {
            err = "port " + std::to_string(pid) + " (" + driver_ + "): MTU " + std::to_string(s.mtu) +
                  " outside [" + std::to_string(info.min_mtu) + ", " + std::to_string(info.max_mtu) + "]";
            return false;
        }
        conf.rxmode.mtu = s.mtu;
    }
    if (s.rss && s.nb_rxq > 1) {
        const uint64_t want = RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4;
        if ((info.flow_type_rss_offloads & want) == 0) {
            err = "port " + std::to_string(pid) + " (" + driver_ + "): no RSS on UDP/IPv4";
            return false;
        }
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_key = nullptr; // the port's default key
        conf.rx_adv_conf.rss_conf.rss_hf = want & info.flow_type_rss_offloads;
    }
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
        conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
    if (s.l4_checksum && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM)) {
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
        tx_udp_cksum_ = true;
    }
    if (s.l4_checksum && (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)) {
        conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
        rx_udp_cksum_ = true;
    }
    return true;
}

// 2. dev_configure, then the MTU where the PMD can set it.
bool Port::configure(const PortSetup& s, const rte_eth_conf& conf, std::string& err) {
    const uint16_t pid = id_;
    int rc = rte_eth_dev_configure(pid, s.nb_rxq, s.nb_txq, &conf);
    if (rc != 0) {
        err = fail(pid, "rte_eth_dev_configure", rc);
        return false;
    }
    configured_ = true;
    nb_rxq_ = s.nb_rxq;
    nb_txq_ = s.nb_txq;
    // MTU, where the PMD can set it (a kernel-backed port changes its netdev).
    if (s.mtu != 0 && s.ethdev_mtu) {
        rc = rte_eth_dev_set_mtu(pid, static_cast<uint16_t>(s.mtu));
        if (rc != 0 && rc != -ENOTSUP) {
            err = fail(pid, "rte_eth_dev_set_mtu", rc);
            return false;
        }
    }
    uint16_t mtu = 0;
    mtu_ = rte_eth_dev_get_mtu(pid, &mtu) == 0 ? mtu : s.mtu;
    return true;
}

// 3. adjust_nb_rx_tx_desc (nrxd, ntxd: asked for in, granted out), then 4.
// the rx and tx queues on the port's socket.
bool Port::setup_queues(const rte_eth_dev_info& info, const rte_eth_conf& conf, const PortSetup& s, uint16_t& nrxd,
                        uint16_t& ntxd, std::string& err) {
    const uint16_t pid = id_;
    // 3. adjust_nb_rx_tx_desc
    int rc = rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrxd, &ntxd);
    if (rc != 0) {
        err = fail(pid, "rte_eth_dev_adjust_nb_rx_tx_desc", rc);
        return false;
    }

    // 4. queue set-up on the port's socket
    rte_eth_rxconf rxq = info.default_rxconf;
    rxq.offloads = conf.rxmode.offloads;
    for (uint16_t q = 0; q < s.nb_rxq; q++) {
        rc = rte_eth_rx_queue_setup(pid, q, nrxd, static_cast<unsigned>(socket_), &rxq, s.pool);
        if (rc != 0) {
            err = fail(pid, ("rte_eth_rx_queue_setup " + std::to_string(q)).c_str(), rc);
            return false;
        }
    }
    rte_eth_txconf txq = info.default_txconf;
    txq.offloads = conf.txmode.offloads;
    for (uint16_t q = 0; q < s.nb_txq; q++) {
        rc = rte_eth_tx_queue_setup(pid, q, ntxd, static_cast<unsigned>(socket_), &txq);
        if (rc != 0) {
            err = fail(pid, ("rte_eth_tx_queue_setup " + std::to_string(q)).c_str(), rc);
            return false;
        }
    }
    return true;
}

// rx_tsc_stamp_cb on every rx queue (PortSetup::stamp_rx_tsc), each kept
// for the destructor to remove.
bool Port::stamp_rx(const PortSetup& s, std::string& err) {
    const uint16_t pid = id_;
    const int field = rx_tsc_register();
    if (field < 0) {
        err = std::string("mbuf dynfield ") + kRxTscDynfieldName + ": " + rte_strerror(rte_errno);
        return false;
    }
    rx_cbs_.assign(s.nb_rxq, nullptr);
    for (uint16_t q = 0; q < s.nb_rxq; q++) {
        rx_cbs_[q] = rte_eth_add_rx_callback(pid, q, rx_tsc_stamp_cb, rx_tsc_cb_param(field));
        if (rx_cbs_[q] == nullptr) {
            err = fail(pid, "rte_eth_add_rx_callback", rte_errno);
            return false;
        }
    }
    return true;
}

// 5. dev_start, promiscuous mode, then what the started port tells: its
// MAC, and its RSS key and RETA.
bool Port::start(const rte_eth_dev_info& info, const rte_eth_conf& conf, const PortSetup& s, std::string& err) {
    const uint16_t pid = id_;
    int rc = rte_eth_dev_start(pid);
    if (rc != 0) {
        err = fail(pid, "rte_eth_dev_start", rc);
        return false;
    }
    started_ = true;
    if (s.promiscuous) {
        rc = rte_eth_promiscuous_enable(pid);
        if (rc != 0 && rc != -ENOTSUP)
            TM_LOG(WARNING, port, "port %u: promiscuous mode: %s", pid, rte_strerror(-rc));
    }
    rc = rte_eth_macaddr_get(pid, &mac_);
    if (rc != 0) {
        err = fail(pid, "rte_eth_macaddr_get", rc);
        return false;
    }
    if (conf.rxmode.mq_mode == RTE_ETH_MQ_RX_RSS)
        query_rss(info);
    return true;
}

void Port::query_rss(const rte_eth_dev_info& info) {
    if (info.reta_size == 0)
        return;
    std::vector<uint8_t> key(info.hash_key_size ? info.hash_key_size : 40);
    rte_eth_rss_conf rc{};
    rc.rss_key = key.data();
    rc.rss_key_len = static_cast<uint8_t>(key.size());
    if (rte_eth_dev_rss_hash_conf_get(id_, &rc) != 0)
        return;
    const uint16_t n = info.reta_size;
    std::vector<rte_eth_rss_reta_entry64> groups((n + RTE_ETH_RETA_GROUP_SIZE - 1) /
                                                 RTE_ETH_RETA_GROUP_SIZE);
    for (auto& g : groups)
        g.mask = ~0ull;
    if (rte_eth_dev_rss_reta_query(id_, groups.data(), n) != 0)
        return;
    std::vector<uint16_t> reta(n);
    for (uint16_t i = 0; i < n; i++)
        reta[i] = groups[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];
    rss_key_ = std::move(key);
    reta_ = std::move(reta);
}

int rss_queue(std::span<const uint8_t> key, std::span<const uint16_t> reta, uint32_t src_ip, uint32_t dst_ip,
              uint16_t src_port, uint16_t dst_port) {
    if (reta.empty())
        return -1;
    rte_ipv4_tuple t{};
    t.src_addr = src_ip;
    t.dst_addr = dst_ip;
    t.sport = src_port;
    t.dport = dst_port;
    const uint32_t h = rte_softrss(reinterpret_cast<uint32_t*>(&t), RTE_THASH_V4_L4_LEN, key.data());
    return reta[h % reta.size()]; // RETA sizes are powers of two: the hash's low bits
}

int Port::rss_queue_of(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port) const {
    return rss_queue(rss_key_, reta_, src_ip, dst_ip, src_port, dst_port);
}

Port::~Port() {
    if (started_) {
        int rc = rte_eth_dev_stop(id_);
        if (rc != 0)
            TM_LOG(WARNING, port, "port %u: stop: %s", id_, rte_strerror(-rc));
    }
    // Stopped, and the lcores are joined: no callback is in flight.
    for (uint16_t q = 0; q < rx_cbs_.size(); q++) {
        if (rx_cbs_[q] == nullptr)
            continue;
        if (rte_eth_remove_rx_callback(id_, q, rx_cbs_[q]) == 0)
            rte_free(const_cast<void*>(static_cast<const void*>(rx_cbs_[q])));
    }
    if (configured_) {
        int rc = rte_eth_dev_close(id_);
        if (rc != 0)
            TM_LOG(WARNING, port, "port %u: close: %s", id_, rte_strerror(-rc));
        else
            TM_LOG(INFO, port, "port %u closed", id_);
    }
}

} // namespace tailmark::drivers
