// engine::Node (node.h): the engine's port side filled from the ports it
// was given, the session table wired to the engine both ways (a session
// agreed with itself over a looped-back net_ring port, every packet out of
// the port and back through the rx lcore's control ring), and its teardown
// in stages, each idempotent, with every mbuf back in the pool.
#include <catch2/catch.hpp>

#include <string>

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ring.h>

#include "drivers/port.h"
#include "fixtures.h"
#include "tailmark/engine/node.h"

using namespace tailmark;

namespace {

constexpr uint16_t kService = 47474;
constexpr uint32_t kIp = RTE_IPV4(198, 18, 0, 9);
const SipKey kKey{0x0DE0'0001, 0x0DE0'0002};

// A ring both the port's rx and tx queue, so what it sends it receives;
// the port itself is the node's once adopted (it closes it).
struct LoopRing {
    std::string name = tmtest::unique_name("nodelp");
    rte_ring* r = nullptr;
    int id = -1;
    LoopRing() {
        r = rte_ring_create(name.c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        REQUIRE(r != nullptr);
        id = rte_eth_from_rings(name.c_str(), &r, 1, &r, 1, rte_socket_id());
        REQUIRE(id >= 0);
    }
    ~LoopRing() {
        rte_vdev_uninit(("net_ring_" + name).c_str());
        rte_mbuf* m;
        while (rte_ring_dequeue(r, reinterpret_cast<void**>(&m)) == 0)
            rte_pktmbuf_free(m);
        rte_ring_free(r);
    }
};

drivers::PortSet ports_of(const LoopRing& lr, rte_mempool* mp) {
    drivers::PortSetup s;
    s.pool = mp;
    std::string err;
    drivers::PortSet ps;
    ps.tx_port = drivers::Port::open(static_cast<uint16_t>(lr.id), s, err);
    INFO(err);
    REQUIRE(ps.tx_port != nullptr);
    ps.rx_port = ps.tx_port.get();
    ps.tx_pool = ps.rx_pool = mp;
    ps.tx_socket = ps.rx_socket = SOCKET_ID_ANY;
    return ps;
}

} // namespace

TEST_CASE("engine: Node wires ports, engine and session table, and tears down in stages", "[engine]") {
    REQUIRE(rte_lcore_is_enabled(1));
    tmtest::Pool pool;
    const unsigned all = pool.avail();
    LoopRing lr;
    engine::Node node;
    engine::EngineConfig cfg;
    cfg.cc.enabled = false;
    engine::EngineHost h;
    h.tx_lcores = {1};
    h.rx_lcores = {1};
    engine::NodeError ne;

    // No ports yet: said, and nothing made.
    CHECK_FALSE(node.make_engine(cfg, h, ne));
    CHECK(ne.exit_code == 1);
    CHECK(ne.message.find("no ports") != std::string::npos);
    CHECK_FALSE(node.has_engine());

    node.adopt_ports(ports_of(lr, pool.mp));
    // The port side is the node's: the port, its one tx queue, the pool;
    // the ceiling, left at 0, is the port's link speed (net_ring: 10G).
    REQUIRE(node.make_engine(cfg, h, ne));
    INFO(ne.message);
    CHECK(node.link_mbps() == 10000);
    CHECK(node.engine().config().cc.max_mbps == 10000);
    CHECK(node.engine().nsenders() == 1);
    CHECK(node.engine().port_senders() == 1);
    CHECK(node.engine().nreceivers() == 1);
    CHECK(node.engine().rx_ctxs()[0]->port == static_cast<uint16_t>(lr.id));

    // The table: a session with itself, out of the port and back.
    engine::FlowRegistry<engine::SessionFlow> reg{4};
    bool up = false;
    SessionTable::Config tc;
    const rte_ether_addr mac = node.ports().tx_port->mac();
    tc.mac = tc.rx_mac = mac;
    tc.self = {kIp, kService};
    engine::SessionsConfig sc;
    sc.src_ip = kIp;
    sc.mac = mac;
    node.make_sessions(tc, sc, reg, [&](Session& s) {
        if (s.connector && s.state == SessionState::Established)
            up = true;
    });
    REQUIRE(node.has_sessions());
    node.table().listen(kService, kKey, [](Session&, const FlowParams& p) {
        AcceptDecision d;
        d.agreed = p;
        return d;
    });
    REQUIRE(node.engine().launch());
    FlowParams proposal;
    proposal.nflows = 1;
    proposal.ring_size = 8;
    proposal.max_msg = 1024;
    proposal.key = 0x77;
    const uint64_t t0 = rte_rdtsc();
    REQUIRE(node.table().connect({kIp, kService}, kService, kKey, proposal, 0, &mac, t0) != nullptr);
    const uint64_t end = t0 + 5 * rte_get_tsc_hz();
    while (!up && rte_rdtsc() < end)
        node.tick(rte_rdtsc());
    CHECK(up);
    // 50 ms more: whatever the handshake sent has come back.
    for (const uint64_t settle = rte_rdtsc() + rte_get_tsc_hz() / 20; rte_rdtsc() < settle;)
        node.tick(rte_rdtsc());
    // CONNECT, RETRY (the acceptor's cookie), CONNECT, ACCEPT and the
    // connector's confirmation: each sent once by the table, out of the
    // port, and taken once by the table from the engine's control ring.
    const SessionCounters c = node.table().counters();
    CHECK(c.established == 2);
    CHECK(c.retries == 1);
    CHECK(c.tx == 5);
    CHECK(c.rx == 5);
    CHECK(c.tx_fail == 0);
    CHECK(node.engine().stats().pkts_tx == 5);
    CHECK(node.engine().stats().pkts_rx == 5);

    // Teardown in stages; each again changes nothing.
    node.stop();
    CHECK_FALSE(node.engine().launched());
    node.close_ports();
    node.close_ports();
    CHECK(node.ports().tx_port == nullptr);
    CHECK(node.ports().rx_port == nullptr);
    node.free_engine();
    node.free_engine();
    CHECK_FALSE(node.has_engine());
    node.free_sessions();
    node.free_sessions();
    CHECK_FALSE(node.has_sessions());
    node.free_pools(); // none of its own: the adopted pool is the caller's
    // Every mbuf is back: the port's, the engine's, the table's.
    CHECK(pool.avail() == all);
}
