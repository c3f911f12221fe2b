// An ethdev over two rte_rings (rte_eth_from_rings): a Sender's tx queue
// enqueues on `tx`, which the test reads. Shared by the Sender's unit tests
// and the control-path fuzz target (tests/fuzz/fuzz_ctl.cc); both link
// librte_net_ring and librte_bus_vdev.
#pragma once

#include <stdexcept>
#include <string>

#include <rte_bus_vdev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "fixtures.h"

namespace tmtest {

struct RingPort {
    std::string name;
    rte_ring* tx = nullptr;
    rte_ring* rx = nullptr;
    uint16_t id = RTE_MAX_ETHPORTS;

    RingPort(rte_mempool* mp, unsigned tx_size) : name(unique_name("sp")) {
        tx = rte_ring_create((name + "t").c_str(), tx_size, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        rx = rte_ring_create((name + "r").c_str(), 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (tx == nullptr || rx == nullptr)
            throw std::runtime_error("rte_ring_create");
        const int p = rte_eth_from_rings(name.c_str(), &rx, 1, &tx, 1, rte_socket_id());
        if (p < 0)
            throw std::runtime_error("rte_eth_from_rings");
        id = static_cast<uint16_t>(p);
        rte_eth_conf conf{};
        if (rte_eth_dev_configure(id, 1, 1, &conf) != 0 ||
            rte_eth_rx_queue_setup(id, 0, 64, rte_socket_id(), nullptr, mp) != 0 ||
            rte_eth_tx_queue_setup(id, 0, 64, rte_socket_id(), nullptr) != 0 || rte_eth_dev_start(id) != 0)
            throw std::runtime_error("port set-up");
    }
    ~RingPort() {
        if (id != RTE_MAX_ETHPORTS) {
            rte_eth_dev_stop(id);
            rte_vdev_uninit(("net_ring_" + name).c_str());
        }
        rte_mbuf* m;
        while (rte_ring_dequeue(tx, reinterpret_cast<void**>(&m)) == 0)
            rte_pktmbuf_free(m);
        rte_ring_free(tx);
        rte_ring_free(rx);
    }
    RingPort(const RingPort&) = delete;
    RingPort& operator=(const RingPort&) = delete;
};

} // namespace tmtest
