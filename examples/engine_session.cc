// engine_session: two engines and an authenticated session between them,
// without tailmarkd. Two ports over a crossed pair of rte_rings (what A's
// port sends, B's receives, and back) stand for two hosts. Each end has an
// Engine and a SessionTable: B listens, A connects; B opens its receive
// flow before it ACCEPTs (the flow is in place before any data can come),
// A opens its send flow once the session is up. A sends N messages of
// varied sizes as data version 2 (a keyed tag on every packet, covering the
// payload), B's main thread checks every byte and releases each message,
// and A hears each delivered through B's authenticated ACKs. Then A closes
// the session, B sees it ended by the peer, and both flows are taken out.
// Prints one line; exits 0 only if all N came back right, nothing was
// dropped and both flows closed.
//
// Each end is an engine::Node, as tailmarkd is: its port, the Engine on it,
// the SessionTable and the sessions' flows (engine::Sessions), wired by the
// node. The flows are made from what the two ends agreed, installed, taken
// back when the session ends (an acceptor's ACCEPT sent once its flows are
// in); the session packets go through Engine::control_sender and come back
// through its control ring. The engine library alone, no daemon.
//
//   engine_session --no-huge -m 512 --no-pci -l 0-1 -- [--messages N] [--size BYTES]
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "example_messages.h"
#include "one_flow_end.h"
#include "tailmark/completion_ring.h"
#include "tailmark/engine/node.h"
#include "tailmark/session.h"

using namespace tailmark;

namespace {

constexpr uint16_t kService = 47474;
constexpr uint32_t kRing = 64; // the receiver's slots: the send window
constexpr uint32_t kMtu = 1500;
constexpr uint64_t kTimeoutS = 30;
const SipKey kSecret{0x7A11'3A7C'0000'0001, 0x5E55'1011'0000'0002}; // both ends hold it; it never travels

// One end: a node (its port, its engine with roles on `lcore`, its
// session table and its sessions' flows), its flow records, and what it
// does with its one flow (example::OneFlowEnd).
struct End : example::OneFlowEnd {
    const char* name;

    End(const char* n, uint32_t addr, rte_ether_addr m) : OneFlowEnd(addr, m), name(n) {}

    // The port is ours (one of the crossed pair), handed to the node.
    bool open(uint16_t port_id, rte_mempool* pool, unsigned lcore) {
        std::string err;
        if (!adopt(port_id, pool, err)) {
            fprintf(stderr, "engine_session: %s: %s\n", name, err.c_str());
            return false;
        }
        engine::EngineConfig cfg;
        cfg.rto_us = 50000;
        cfg.rto_max_us = 1000000;
        cfg.retry_limit = 8;
        cfg.cc.enabled = false; // nothing to share: two rings in memory
        engine::EngineHost h; // the lcores; the port side is the node's
        h.tx_lcores = h.rx_lcores = {lcore};
        engine::NodeError ne;
        if (!node.make_engine(cfg, h, ne)) {
            fprintf(stderr, "engine_session: %s: %s\n", name, ne.message.c_str());
            return false;
        }
        return true;
    }
    // The table and the sessions' flows, wired by the node: the table sends
    // through the engine and takes what its rx lcores route to the control
    // ring; the engine's answers go to the sessions' flows.
    void make_table(SessionTable::Notify notify) {
        SessionTable::Config tc;
        tc.data_auth = true; // version 2's tag covers the payload too
        wire(tc, kService, std::move(notify));
    }
    uint64_t drops() const {
        uint64_t d = 0;
        for (uint64_t x : node.engine().drops())
            d += x;
        for (uint64_t x : node.table().counters().drops)
            d += x;
        return d;
    }
};

// Two ethdevs over a crossed pair of rings: a's tx is b's rx, and back.
bool crossed_ports(rte_ring* (&r)[2], uint16_t& a, uint16_t& b) {
    for (int i = 0; i < 2; i++) {
        r[i] = rte_ring_create(i == 0 ? "es_ab" : "es_ba", 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (r[i] == nullptr)
            return false;
    }
    const int pa = rte_eth_from_rings("es_a", &r[1], 1, &r[0], 1, rte_socket_id());
    const int pb = rte_eth_from_rings("es_b", &r[0], 1, &r[1], 1, rte_socket_id());
    a = static_cast<uint16_t>(pa);
    b = static_cast<uint16_t>(pb);
    return pa >= 0 && pb >= 0;
}

int run(uint32_t messages, uint64_t size) {
    rte_mempool* pool = rte_pktmbuf_pool_create("es_pool", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                                static_cast<int>(rte_socket_id()));
    rte_ring* rings[2]{};
    uint16_t pa = 0, pb = 0;
    if (pool == nullptr || !crossed_ports(rings, pa, pb)) {
        fprintf(stderr, "engine_session: no memory for the pool or the rings\n");
        return 1;
    }
    // A's roles on the first worker lcore; B's on the main lcore, run by its tick().
    const unsigned worker = rte_get_next_lcore(static_cast<unsigned>(-1), 1, 0);
    if (worker >= RTE_MAX_LCORE) {
        fprintf(stderr, "engine_session: two lcores are needed (-l 0-1)\n");
        return 2;
    }
    example::Source src(messages, size, kRing);
    example::Outcome out;
    End a("A", RTE_IPV4(198, 18, 0, 1), {{2, 0, 0, 0, 0, 0xA}});
    End b("B", RTE_IPV4(198, 18, 0, 2), {{2, 0, 0, 0, 0, 0xB}});
    if (!a.open(pa, pool, worker) || !b.open(pb, pool, rte_get_main_lcore()))
        return 1;
    a.e().sender(0).set_source(example::source, &src);
    a.e().tx_role(0).set_sink(example::sink, &out);

    // A: once the session is up, its send flow, to B's flow; each
    // message's outcome to the tx role's sink.
    Session* sa = nullptr;
    a.make_table([&](Session& s) {
        const uint64_t now = rte_rdtsc();
        if (s.state == SessionState::Established && a.rec == nullptr)
            a.open_send(s, true, now);
        else if (s.state == SessionState::Ended)
            a.ended(s, now);
    });
    // B: a session like the proposal, its receive flow made and installed
    // before the ACCEPT (which engine::Sessions sends once it is in).
    uint8_t version = 0;
    bool tagged = false;
    b.make_table([&](Session& s) {
        if (s.state == SessionState::Ended)
            b.ended(s, rte_rdtsc());
    });
    b.table().listen(kService, kSecret, [&](Session& s, const FlowParams& p) {
        std::string err;
        const AcceptDecision d = b.accept(s, p, p.ring_size == kRing && p.max_msg >= size, rte_rdtsc(), err);
        if (d.reason == RefuseReason::NoRoom)
            fprintf(stderr, "engine_session: B: %s\n", err.c_str());
        if (d.reason == RefuseReason::None) {
            version = s.link->data_version;
            tagged = s.link->data_auth;
        }
        return d;
    });
    if (!a.e().launch() || !b.e().launch()) {
        fprintf(stderr, "engine_session: lcore launch failed\n");
        return 1;
    }

    const uint64_t hz = rte_get_tsc_hz();
    const uint64_t t0 = rte_rdtsc();
    const uint64_t deadline = t0 + kTimeoutS * hz;
    FlowParams proposal;
    proposal.nflows = 1;
    proposal.mtu = kMtu;
    proposal.ring_size = kRing;
    proposal.max_msg = static_cast<uint32_t>(size);
    proposal.key = 0xE5E5;
    proposal.data_auth = true;
    const int abase = a.flows().send_ids().alloc(1, t0);
    sa = abase < 0 ? nullptr
                   : a.table().connect({b.ip, kService}, kService, kSecret, proposal, static_cast<uint16_t>(abase), &b.mac, t0);
    bool closing = false;
    uint32_t next = 0;
    uint64_t good = 0, bad = 0;
    // The control threads of both ends, and B's consumer, in turn.
    auto round = [&](uint64_t now) {
        a.node.tick(now); // its answers to its sessions' flows, its table's timers
        b.node.tick(now); // and B's roles (the main lcore's)
        CompletionRing* ring = b.flow != nullptr ? b.flow->ring.get() : nullptr; // null once its session ended
        for (const CompletionSlot* s; ring != nullptr && next < messages && (s = ring->poll(next)) != nullptr; next++) {
            const std::span<const uint8_t> got = ring->message(s);
            const bool ok = example::intact(next, size, got);
            (ok ? good : bad)++;
            ring->release(next); // the sender's credit, in B's next ACK
        }
        const bool done = next == messages && out.delivered.load() + out.failed.load() == messages;
        if (done && !closing && sa != nullptr) {
            closing = true;
            a.table().close(sa, now); // A's flows taken back (a.ended), a CLOSE to B
        }
    };
    // Both sessions over, their flows out and freed (Gone), the tables
    // done with them.
    auto over = [&] {
        return closing && a.rec != nullptr && b.rec != nullptr && a.rec->stage == engine::SessionRec::Stage::Gone &&
               b.rec->stage == engine::SessionRec::Stage::Gone && a.rec->s == nullptr && b.rec->s == nullptr;
    };
    while (!over() && rte_rdtsc() < deadline)
        round(rte_rdtsc());
    const double secs = double(rte_rdtsc() - t0) / double(hz);
    a.e().stop();
    b.e().stop();
    const SessionEnd b_end = b.rec != nullptr ? b.rec->end : SessionEnd::None;
    const uint64_t drops = a.drops() + b.drops();
    const engine::Engine::Stats sta = a.e().stats(), stb = b.e().stats();
    const bool pass = over() && good == messages && bad == 0 && out.delivered.load() == messages &&
                      out.failed.load() == 0 && drops == 0 && version == kVersion2 && tagged &&
                      b_end == SessionEnd::PeerClosed;
    printf("engine_session: %s: %" PRIu64 "/%u messages intact (up to %" PRIu64
           " B each) over an authenticated session (data v%u%s) in %.3f s; delivered %" PRIu64 ", failed %" PRIu64
           ", corrupt %" PRIu64 "; A packets %" PRIu64 " tx / %" PRIu64 " rx, B %" PRIu64 " tx / %" PRIu64
           " rx, ACKs %" PRIu64 ", retransmitted %" PRIu64 "; session packets A %" PRIu64 "/%" PRIu64 " B %" PRIu64
           "/%" PRIu64 " (tx/rx); B's end %s; drops %" PRIu64 "\n",
           pass ? "PASS" : "FAIL", good, messages, size, version, tagged ? ", tags over the payload" : "", secs,
           out.delivered.load(), out.failed.load(), bad, sta.pkts_tx, sta.pkts_rx, stb.pkts_tx, stb.pkts_rx, stb.acks_tx,
           sta.retx_pkts, a.table().counters().tx, a.table().counters().rx, b.table().counters().tx,
           b.table().counters().rx, to_string(b_end), drops);
    a.close();
    b.close();
    rte_vdev_uninit("net_ring_es_a");
    rte_vdev_uninit("net_ring_es_b");
    for (rte_ring* r : rings)
        rte_ring_free(r);
    rte_mempool_free(pool);
    return pass ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) { return tailmark::example::main_of("engine_session", argc, argv, run); }
