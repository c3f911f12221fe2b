// engine_echo: the engine without tailmarkd. One Engine on a net_ring port
// (--vdev=net_ring0 loops its tx queue back to its rx queue) sends N
// messages of varied sizes on a send flow to a receive flow of its own, and
// the main thread consumes the receive flow's completion ring, checking
// every byte. Reliable without a session: the send flow takes its credits
// from the receive flow's cursors in memory (SendFlowSpec::local_acked,
// local_released), as tailmarkd's loopback does, so no handshake and no ACK
// packet is needed. Prints one line; exits 0 only if all N came back right.
//
//   engine_echo --no-huge -m 512 --vdev=net_ring0 -l 0-1 -- [--messages N] [--size BYTES]
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_lcore.h>

#include "example_messages.h"
#include "tailmark/completion_ring.h"
#include "tailmark/engine/node.h"

using namespace tailmark;

namespace {

constexpr uint16_t kFlow = 1;     // both ends' id (one process: the same flow)
constexpr uint32_t kRing = 64;    // the receiver's slots: the send window
constexpr uint32_t kMtu = 1500;
constexpr uint64_t kTimeoutS = 20;

// Ticks the engine until done() or the deadline; false on the deadline.
template <class Done>
bool run_until(engine::Engine& e, uint64_t deadline, Done&& done) {
    while (!done()) {
        const uint64_t now = rte_rdtsc();
        if (now > deadline)
            return false;
        e.tick(now);
    }
    return true;
}

int echo(uint32_t messages, uint64_t size) {
    // What the engine's lcores use: declared before the node, so they
    // outlive its engine.
    example::Source src(messages, size, kRing);
    example::Outcome out;
    std::unique_ptr<CompletionRing> ring;
    // The port: net_ring0 (made if none was given), planned and opened by
    // the node (drivers/port_plan.h).
    engine::Node node;
    drivers::PortNeeds need;
    need.loopback = true;
    need.mtu = kMtu;
    engine::NodeError ne;
    if (!node.open_ports(need, ne)) {
        fprintf(stderr, "engine_echo: %s\n", ne.message.c_str());
        return 1;
    }
    const drivers::PortSet& ports = node.ports();
    // The roles on the first worker lcore (or, with one lcore, on the main
    // one, run by tick()).
    unsigned worker = rte_get_next_lcore(static_cast<unsigned>(-1), 1, 0);
    if (worker >= RTE_MAX_LCORE)
        worker = rte_get_main_lcore();
    ring = CompletionRing::create(kFlow, kRing, size, ports.rx_socket);
    if (ring == nullptr) {
        fprintf(stderr, "engine_echo: no memory for the completion ring\n");
        return 1;
    }
    engine::EngineConfig cfg;
    cfg.rto_us = 50000;
    cfg.rto_max_us = 1000000;
    cfg.retry_limit = 8;
    cfg.cc.enabled = false;
    engine::EngineHost host; // the lcores; the port side is the node's
    host.tx_lcores = {worker};
    host.rx_lcores = {worker};
    if (!node.make_engine(cfg, host, ne)) {
        fprintf(stderr, "engine_echo: %s\n", ne.message.c_str());
        return 1;
    }
    engine::Engine& e = node.engine();
    e.sender(0).set_source(example::source, &src);
    e.tx_role(0).set_sink(example::sink, &out);

    // The receive flow, then the send flow that credits itself from it.
    RecvFlowSpec rs;
    rs.id = kFlow;
    rs.ring = ring.get();
    rs.key = 0xEC40;
    rs.stride = stride_for_mtu(kMtu);
    rs.peer_flow = kFlow;
    Addressing addr;
    addr.src_mac = addr.dst_mac = ports.tx_port->mac();
    addr.src_ip = addr.dst_ip = RTE_IPV4(198, 18, 0, 1);
    addr.udp_port = cfg.udp_port;
    SendFlowSpec ss;
    ss.id = kFlow;
    if (!e.open_recv(rs, 0) || !TxFlow::make(ss.tx, kFlow, rs.key, kRing, kMtu, addr)) {
        fprintf(stderr, "engine_echo: cannot open the receive flow\n");
        return 1;
    }
    ss.ring_size = kRing;
    ss.max_msg = size;
    ss.reliable = true;
    ss.report = true;
    ss.local_acked = e.recv_acked_word(kFlow);
    ss.local_released = ring->released_word();
    if (!e.open_send(ss, 0)) {
        fprintf(stderr, "engine_echo: cannot open the send flow\n");
        return 1;
    }

    if (!e.launch()) {
        fprintf(stderr, "engine_echo: lcore launch failed\n");
        return 1;
    }
    const uint64_t hz = rte_get_tsc_hz();
    const uint64_t t0 = rte_rdtsc();
    const uint64_t deadline = t0 + kTimeoutS * hz;
    uint32_t next = 0;
    uint64_t good = 0, bad = 0, bytes = 0;
    // Consume in order: check, release (the release is the sender's credit).
    const bool all = run_until(e, deadline, [&] {
        for (const CompletionSlot* s; next < messages && (s = ring->poll(next)) != nullptr; next++) {
            const std::span<const uint8_t> got = ring->message(s);
            const bool ok = example::intact(next, size, got);
            (ok ? good : bad)++;
            bytes += got.size();
            ring->release(next);
        }
        return next == messages && out.delivered.load() + out.failed.load() == messages;
    });
    const double secs = double(rte_rdtsc() - t0) / double(hz);
    // Closed, and the lcores' answers taken.
    e.close_send(kFlow);
    e.close_recv(kFlow);
    const bool closed = run_until(e, rte_rdtsc() + hz, [&] {
        return e.send_state(kFlow) == engine::FlowState::Closed && e.recv_state(kFlow) == engine::FlowState::Closed;
    });
    e.stop();
    const engine::Engine::Stats st = e.stats();
    const bool pass = all && closed && good == messages && bad == 0 && out.delivered.load() == messages &&
                      out.failed.load() == 0;
    printf("engine_echo: %s: %" PRIu64 "/%u messages echoed intact (%" PRIu64 " B, up to %" PRIu64
           " B each) in %.3f s; delivered %" PRIu64 ", failed %" PRIu64 ", corrupt %" PRIu64 ", packets %" PRIu64
           " tx / %" PRIu64 " rx, retransmitted %" PRIu64 ", drops %" PRIu64 ", flows %s\n",
           pass ? "PASS" : "FAIL", good, messages, bytes, size, secs, out.delivered.load(), out.failed.load(), bad,
           st.pkts_tx, st.pkts_rx, st.retx_pkts, st.drops, closed ? "closed" : "NOT closed");
    return pass ? 0 : 1; // ~Node: the ports closed, the engine freed, then the pools
}

} // namespace

int main(int argc, char** argv) { return tailmark::example::main_of("engine_echo", argc, argv, echo); }
