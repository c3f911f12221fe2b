// RAII owner of one ethdev port, initialised in the skeleton's order:
//   dev_info_get, dev_configure, (set_mtu), adjust_nb_rx_tx_desc, rx/tx queue
//   set-up on the port's NUMA socket, (rx callbacks), dev_start, promiscuous.
// The destructor stops the port, removes and frees its rx callbacks, and
// closes it. PMD-agnostic: nothing here knows a driver by name; callers may
// look at driver() to pick a flow-steering policy.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mempool.h>

namespace tailmark::drivers {

// NUMA socket of a port; the calling lcore's socket when the port does not
// know (virtual devices report SOCKET_ID_ANY).
int port_socket(uint16_t port_id);

struct PortSetup {
    uint16_t nb_rxq = 1;
    uint16_t nb_txq = 1;
    uint16_t nb_rxd = 1024;
    uint16_t nb_txd = 1024;
    uint32_t mtu = 0;          // 0: the port's default
    // false: ethdev is not told the MTU (a kernel-backed port whose frames
    // are bounded by its interface and its socket ring, where the PMD
    // reports a smaller maximum than it moves; the caller checked).
    bool ethdev_mtu = true;
    bool rss = false;          // spread UDP/IPv4 over the rx queues by RSS (nb_rxq > 1)
    bool promiscuous = true;
    bool stamp_rx_tsc = true;  // rx_tsc_stamp_cb on every rx queue
    bool l4_checksum = false;  // UDP checksums in the NIC where it offers them (tx fill, rx verify)
    rte_mempool* pool = nullptr; // rx buffers
};

// The rx queue a NIC's RSS picks for a UDP/IPv4 tuple (host order): the
// Toeplitz hash of source address, destination address, source port and
// destination port under `key` (rte_softrss), its low bits indexing `reta`.
// -1 when reta is empty.
int rss_queue(std::span<const uint8_t> key, std::span<const uint16_t> reta, uint32_t src_ip, uint32_t dst_ip,
              uint16_t src_port, uint16_t dst_port);

class Port {
public:
    // nullptr and `err` filled (naming the port and the failing step) on failure.
    static std::unique_ptr<Port> open(uint16_t port_id, const PortSetup& setup, std::string& err);
    ~Port();
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;

    uint16_t id() const { return id_; }
    int socket() const { return socket_; }
    const rte_ether_addr& mac() const { return mac_; }
    const std::string& driver() const { return driver_; }
    uint16_t nb_rxq() const { return nb_rxq_; }
    uint16_t nb_txq() const { return nb_txq_; }
    uint32_t mtu() const { return mtu_; }
    bool rss_active() const { return !reta_.empty(); }
    // l4_checksum asked for, and the port fills UDP checksums (RTE_ETH_TX_OFFLOAD_UDP_CKSUM) /
    // verifies them (RTE_ETH_RX_OFFLOAD_UDP_CKSUM: the rx checksum flags).
    bool tx_udp_checksum() const { return tx_udp_cksum_; }
    bool rx_udp_checksum() const { return rx_udp_cksum_; }

    // RSS: the rx queue the NIC picks for this UDP/IPv4 tuple (host order),
    // computed in software (rss_queue) from the port's key and RETA.
    // -1 when RSS is off or the port would not tell its key or RETA.
    int rss_queue_of(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port) const;

    // Static facts, before a port is opened.
    static bool info(uint16_t port_id, rte_eth_dev_info& out, std::string& err);

private:
    explicit Port(uint16_t id) : id_(id) {}
    // open's steps, in the order above; false with `err` filled on failure
    // (the destructor undoes what was done).
    bool make_conf(const rte_eth_dev_info& info, const PortSetup& s, rte_eth_conf& conf, std::string& err);
    bool configure(const PortSetup& s, const rte_eth_conf& conf, std::string& err);
    bool setup_queues(const rte_eth_dev_info& info, const rte_eth_conf& conf, const PortSetup& s, uint16_t& nrxd,
                      uint16_t& ntxd, std::string& err);
    bool stamp_rx(const PortSetup& s, std::string& err);
    bool start(const rte_eth_dev_info& info, const rte_eth_conf& conf, const PortSetup& s, std::string& err);
    void query_rss(const rte_eth_dev_info& info);

    uint16_t id_;
    int socket_ = 0;
    uint16_t nb_rxq_ = 0;
    uint16_t nb_txq_ = 0;
    uint32_t mtu_ = 0;
    bool configured_ = false;
    bool started_ = false;
    bool tx_udp_cksum_ = false, rx_udp_cksum_ = false;
    rte_ether_addr mac_{};
    std::string driver_;
    std::vector<const rte_eth_rxtx_callback*> rx_cbs_; // index = queue
    std::vector<uint8_t> rss_key_;
    std::vector<uint16_t> reta_;
};

} // namespace tailmark::drivers
