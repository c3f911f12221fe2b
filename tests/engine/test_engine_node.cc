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
#include "one_flow_end.h"
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

    // The end of the work: the session this end opened is closed, its one
    // CLOSE out of the port and back, which ends the acceptor's end too;
    // then closing every session left sends nothing (none is left).
    CHECK(node.closes_out());
    node.close_sessions(rte_rdtsc(), false);
    for (const uint64_t settle = rte_rdtsc() + rte_get_tsc_hz() / 20; rte_rdtsc() < settle;)
        node.tick(rte_rdtsc());
    CHECK(node.table().counters().tx == 6);
    CHECK(node.table().counters().rx == 6);
    size_t alive = 0; // ended sessions are reaped from the table by the tick
    for (Session* s : node.table().sessions())
        alive += s->state != SessionState::Ended;
    CHECK(alive == 0);
    node.close_sessions(rte_rdtsc(), true);
    for (const uint64_t settle = rte_rdtsc() + rte_get_tsc_hz() / 50; rte_rdtsc() < settle;)
        node.tick(rte_rdtsc());
    CHECK(node.table().counters().tx == 6);
    CHECK(node.closes_out());

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

namespace {

constexpr uint64_t kMsg = 65536; // 45 packets at MTU 1500: the burst of 4 leaves it unfinished
const SipKey kSecret{0x5E55'0001, 0x5E55'0002};

// Two ports over a crossed pair of rings: what a's sends, b's receives, and back.
struct Crossed {
    std::string name = tmtest::unique_name("nodex");
    rte_ring* r[2]{};
    int id[2]{-1, -1};
    Crossed() {
        for (int i = 0; i < 2; i++) {
            r[i] = rte_ring_create((name + "r" + std::to_string(i)).c_str(), 1024, SOCKET_ID_ANY,
                                   RING_F_SP_ENQ | RING_F_SC_DEQ);
            REQUIRE(r[i] != nullptr);
        }
        id[0] = rte_eth_from_rings((name + "a").c_str(), &r[1], 1, &r[0], 1, rte_socket_id());
        id[1] = rte_eth_from_rings((name + "b").c_str(), &r[0], 1, &r[1], 1, rte_socket_id());
        REQUIRE(id[0] >= 0);
        REQUIRE(id[1] >= 0);
    }
    ~Crossed() {
        rte_vdev_uninit(("net_ring_" + name + "a").c_str());
        rte_vdev_uninit(("net_ring_" + name + "b").c_str());
        for (rte_ring* q : r) {
            rte_mbuf* m;
            while (rte_ring_dequeue(q, reinterpret_cast<void**>(&m)) == 0)
                rte_pktmbuf_free(m);
            rte_ring_free(q);
        }
    }
};

// One end of the session (examples/one_flow_end.h, as engine_session's):
// a node whose roles all run on the main lcore, in its tick(), so the test
// says when each end moves. A burst of 4 packets a turn; no
// retransmission, NACK or keep-alive within the test.
struct End : example::OneFlowEnd {
    End(int port, rte_mempool* mp, uint32_t addr, uint8_t last) : OneFlowEnd(addr, {{2, 0, 0, 0, 0, last}}) {
        std::string err;
        const bool ok = adopt(static_cast<uint16_t>(port), mp, err);
        INFO(err);
        REQUIRE(ok);
        engine::EngineConfig cfg;
        cfg.cc.enabled = false;
        cfg.burst = 4;
        cfg.rto_us = cfg.rto_max_us = 10000000;
        cfg.retry_limit = 8;
        cfg.nack_delay_us = 10000000;
        engine::EngineHost h;
        h.tx_lcores = h.rx_lcores = {rte_get_main_lcore()};
        engine::NodeError ne;
        REQUIRE(node.make_engine(cfg, h, ne));
    }
    void wire(SessionTable::Notify notify) {
        SessionTable::Config tc;
        tc.keepalive_us = 10000000;
        OneFlowEnd::wire(tc, kService, std::move(notify));
    }
};

struct OneMessage {
    std::vector<uint8_t> bytes = std::vector<uint8_t>(kMsg, 0x5A);
    bool go = false;
};
bool one_message(void* ctx, void*, uint32_t msg_id, Message& m, uint64_t& cookie) {
    auto& o = *static_cast<OneMessage*>(ctx);
    if (!o.go || msg_id != 0)
        return false;
    m.bytes = {o.bytes.data(), o.bytes.size()};
    m.shinfo = nullptr;
    cookie = 0;
    return true;
}
struct Told {
    uint32_t delivered = 0, failed = 0, closed = 0;
};
void told(void* ctx, const SendCompletion* d, uint32_t n) {
    auto& t = *static_cast<Told*>(ctx);
    for (uint32_t i = 0; i < n; i++) {
        (d[i].status == SendStatus::Delivered ? t.delivered : t.failed)++;
        t.closed += d[i].reason == FailReason::Closed;
    }
}

} // namespace

// A session that ends while its one message is half across: the sender
// reports it failed, once; the receiver never completes it; both ends' flows
// are taken back, their records reach Gone, and every mbuf comes home.
TEST_CASE("engine: a session ended mid-message, on two Nodes", "[engine]") {
    tmtest::Pool pool;
    const unsigned all = pool.avail();
    Crossed x;
    OneMessage msg;
    Told out;
    {
        End a(x.id[0], pool.mp, RTE_IPV4(198, 18, 1, 1), 0xA);
        End b(x.id[1], pool.mp, RTE_IPV4(198, 18, 1, 2), 0xB);
        a.node.engine().sender(0).set_source(one_message, &msg);
        a.node.engine().tx_role(0).set_sink(told, &out);
        Session* sa = nullptr;
        a.wire([&](Session& s) {
            const uint64_t now = rte_rdtsc();
            if (s.state == SessionState::Established && a.rec == nullptr)
                a.open_send(s, true, now);
            else if (s.state == SessionState::Ended)
                a.ended(s, now);
        });
        b.wire([&](Session& s) {
            if (s.state == SessionState::Ended)
                b.ended(s, rte_rdtsc());
        });
        b.node.table().listen(kService, kSecret, [&](Session& s, const FlowParams& p) {
            std::string err;
            return b.accept(s, p, true, rte_rdtsc(), err);
        });
        REQUIRE(a.node.engine().launch()); // nothing to start: every role is the main lcore's, run by tick()
        REQUIRE(b.node.engine().launch());
        auto round = [&] {
            const uint64_t now = rte_rdtsc();
            a.node.tick(now);
            b.node.tick(now);
        };
        auto until = [&](auto&& done) {
            const uint64_t end = rte_rdtsc() + 5 * rte_get_tsc_hz();
            while (!done() && rte_rdtsc() < end)
                round();
            return done();
        };
        FlowParams proposal;
        proposal.nflows = 1;
        proposal.mtu = 1500;
        proposal.ring_size = 8;
        proposal.max_msg = static_cast<uint32_t>(kMsg);
        proposal.key = 0xE11D;
        const uint64_t t0 = rte_rdtsc();
        const int base = a.flows().send_ids().alloc(1, t0);
        REQUIRE(base >= 0);
        sa = a.node.table().connect({b.ip, kService}, kService, kSecret, proposal, static_cast<uint16_t>(base), &b.mac, t0);
        REQUIRE(sa != nullptr);
        REQUIRE(until([&] {
            return a.flow != nullptr && b.flow != nullptr &&
                   a.node.engine().send_state(a.flow->send_id) == engine::FlowState::Open &&
                   b.node.engine().recv_state(b.flow->recv_id) == engine::FlowState::Open;
        }));
        const uint64_t placed0 = b.node.engine().stats().placed;

        // One turn of A's tx role (4 packets of the message's 45), one of B's rx.
        msg.go = true;
        a.node.tick(rte_rdtsc());
        b.node.tick(rte_rdtsc());
        CHECK(b.node.engine().stats().placed - placed0 == 4);
        CHECK(b.node.engine().stats().completed == 0);

        // A closes: its flow fails what it owed, B hears the CLOSE.
        a.node.table().close(sa, rte_rdtsc());
        REQUIRE(until([&] {
            return a.rec->stage == engine::SessionRec::Stage::Gone && b.rec->stage == engine::SessionRec::Stage::Gone;
        }));
        CHECK(out.delivered == 0);
        CHECK(out.failed == 1);
        CHECK(out.closed == 1);
        CHECK(b.node.engine().stats().placed - placed0 == 4); // nothing after the close
        CHECK(b.node.engine().stats().completed == 0);
        CHECK(a.rec->end == SessionEnd::Closed);
        CHECK(b.rec->end == SessionEnd::PeerClosed);
        CHECK(b.flow->recv == nullptr); // taken back out of its Receiver
        uint64_t drops = 0;
        for (const engine::Node* n : {&a.node, &b.node})
            for (uint64_t d : n->engine().drops())
                drops += d;
        CHECK(drops == 0);
        a.close();
        b.close();
    }
    CHECK(pool.avail() == all);
}
