// Port planning: from what a run asks for (its ports, how many tx and rx
// lcores, the MTU, whether it loops back to itself) to the ports and mbuf
// pools it runs on. It picks the flow steering (tx queue to rx queue on a
// net_ring loopback, RSS where the port's hash can be computed, else
// hand-off between rx lcores), the queue counts of each port, one pool per
// NUMA socket in use with every frame in one segment, and checks what the
// ports cannot do (queues, MTU, af_packet's frame size) before anything is
// opened. Lives with the drivers, not the daemon: it is about ports, and
// any application that runs the engine needs it. Its messages name
// tailmarkd's options (--tx-port, --rx-lcores, --mtu), as its users know
// them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_mempool.h>

#include "drivers/mempool.h"
#include "drivers/port.h"

namespace tailmark::drivers {

// What the run asks of its ports.
struct PortNeeds {
    uint16_t tx_port = 0, rx_port = 0;
    uint16_t tx_lcores = 1, rx_lcores = 1; // one tx queue per tx lcore, one rx queue per rx lcore
    uint32_t mtu = 1500;
    bool loopback = false;    // it sends to itself: with no port at all, net_ring0 is made for it
    bool send_only = false;   // it receives no data (no steering between rx lcores)
    bool l4_checksum = false; // UDP checksums (in the NIC where it offers them)
    bool local_loop = false;  // an in-memory loopback port too (net_ring, one queue per rx lcore)
    // Rails beyond tx_port (== rx_port): ports opened like it, with as many
    // queues (--rails; the engine's EngineHost::rail_ports).
    std::vector<uint16_t> rails;
};

// The ports and pools, and how flows are steered. Owned by the caller, who
// closes the ports before freeing the pools.
struct PortSet {
    std::vector<std::unique_ptr<Mempool>> pools; // one per NUMA socket in use
    rte_mempool* tx_pool = nullptr;
    rte_mempool* rx_pool = nullptr;
    std::unique_ptr<Port> tx_port;
    std::unique_ptr<Port> rx_port_owned; // when rx_port != tx_port
    Port* rx_port = nullptr;
    // The in-memory loopback (local_loop): tx queue r arrives on rx queue r;
    // null without one (or without the vdev bus).
    std::unique_ptr<Port> local_port;
    std::vector<std::unique_ptr<Port>> rails; // PortNeeds::rails, opened
    int tx_socket = 0, rx_socket = 0;
    uint16_t tx_nq = 1;          // tx queues on tx_port
    bool steer_by_queue = false; // net_ring loopback: tx queue q arrives on rx queue q
    bool rss = false;            // rx queues picked by the port's RSS, computed here (Port::rss_queue_of)
    bool handoff = false;        // several rx lcores, no computable hash: they pass each other data
};

struct PortError {
    int exit_code = 0; // 2: the configuration cannot work on these ports; 1: a run-time failure
    std::string message;
};

// Plans and opens. False with `e` filled on failure; whatever was opened
// is in `out`, for the caller to close.
bool open_ports(const PortNeeds& n, PortSet& out, PortError& e);

} // namespace tailmark::drivers
