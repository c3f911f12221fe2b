// engine::Node: the ports, the engine, the session table and the sessions'
// flows, made and wired in one order and taken apart in the other.
#include "tailmark/engine/node.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_ring.h>

namespace tailmark::engine {

Node::~Node() {
    stop();
    close_ports();
    free_engine();
    free_sessions();
    free_pools();
}

bool Node::open_ports(const drivers::PortNeeds& n, NodeError& e) {
    drivers::PortError pe;
    const bool ok = drivers::open_ports(n, ports_, pe); // kept, opened or not: close_ports() closes them
    if (!ok)
        e = {pe.exit_code, pe.message};
    return ok;
}

uint64_t Node::link_mbps() const {
    rte_eth_link link{};
    if (ports_.tx_port != nullptr && rte_eth_link_get_nowait(ports_.tx_port->id(), &link) == 0 &&
        link.link_speed != RTE_ETH_SPEED_NUM_NONE && link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
        return link.link_speed;
    return 100000;
}

DropCounters Node::drops() const {
    DropCounters d = has_engine() ? engine().drops() : DropCounters{};
    if (has_sessions())
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(table_->counters().drops[i]);
    return d;
}

bool Node::make_engine(EngineConfig cfg, EngineHost h, NodeError& e) {
    const drivers::PortSet& p = ports_;
    if (p.tx_port == nullptr || p.rx_port == nullptr) {
        e = {1, "engine: no ports (open_ports or adopt_ports first)"};
        return false;
    }
    if (cfg.cc.max_mbps == 0)
        cfg.cc.max_mbps = link_mbps();
    h.tx_port = p.tx_port->id();
    h.rx_port = p.rx_port->id();
    h.tx_queues = p.tx_nq;
    h.pool = p.tx_pool;
    h.socket = p.tx_socket;
    h.rx_socket = p.rx_socket;
    // The rails' packets are built by the same Senders: the UDP checksum in
    // the NIC only where every rail's port fills it.
    h.tx_udp_checksum_offload = p.tx_port->tx_udp_checksum();
    h.rail_ports.clear();
    for (const auto& r : p.rails) {
        h.rail_ports.push_back(r->id());
        h.tx_udp_checksum_offload = h.tx_udp_checksum_offload && r->tx_udp_checksum();
    }
    h.handoff = p.handoff;
    h.steer_by_id = p.steer_by_queue;
    h.rss_port = p.rss ? p.rx_port : nullptr;
    if (p.local_port != nullptr) {
        h.local_port = p.local_port->id();
        h.local_queues = p.local_port->nb_txq();
    }
    EngineError err;
    engine_ = Engine::create(cfg, h, err);
    if (engine_ == nullptr) {
        e = {1, err.out_of_memory ? "out of memory: " + err.what + " (raise EAL -m)" : err.message()};
        return false;
    }
    return true;
}

bool Node::attach_faults(const drivers::FaultSpec& spec, NodeError& e) {
    for (const RxCtx* c : engine_->rx_ctxs()) {
        static std::atomic<unsigned> made{0}; // ring names are process-wide: one per shim ever made
        char name[RTE_RING_NAMESIZE];
        snprintf(name, sizeof(name), "tm_fault_%u", made.fetch_add(1));
        Shim s;
        s.shim.reset(new (std::nothrow) drivers::FaultShim(spec, name));
        if (s.shim == nullptr) {
            e = {1, "out of memory: fault shim (raise EAL -m)"};
            return false;
        }
        s.port = c->port;
        s.queue = c->queue;
        s.cb = s.shim->attach_rx(c->port, c->queue);
        if (s.cb == nullptr) {
            e = {1, "--fault: cannot attach the fault shim to port " + std::to_string(c->port) + " rx queue " +
                        std::to_string(c->queue) + ": " + rte_strerror(rte_errno)};
            return false;
        }
        shims_.push_back(std::move(s));
    }
    fault_spec_ = spec;
    return true;
}

void Node::make_sessions(SessionTable::Config tc, SessionsConfig sc, FlowRegistry<SessionFlow>& reg,
                         SessionTable::Notify notify, SessionHooks hooks) {
    if (tc.pool == nullptr)
        tc.pool = ports_.tx_pool;
    if (tc.hz == 0)
        tc.hz = engine_->tsc_hz();
    tc.nrails = static_cast<uint8_t>(ports_.rails.size());
    for (size_t i = 0; i < ports_.rails.size(); i++) {
        const rte_ether_addr mac = ports_.rails[i]->mac();
        memcpy(tc.rails[i].mac, mac.addr_bytes, 6);
    }
    sc.tx_socket = ports_.tx_socket;
    sc.rx_socket = ports_.rx_socket;
    // With the in-memory loopback, a session packet to this end's own
    // address goes straight back to the control ring, as if received.
    table_ = std::make_unique<SessionTable>(tc, engine_->control_sender(tc.self.ip), std::move(notify));
    engine_->set_control_taker([this](rte_mbuf* m, uint64_t now) { table_->on_frame(m, now); });
    sessions_ = std::make_unique<Sessions>(*engine_, *table_, reg, sc, std::move(hooks));
    engine_->set_answers([this](const Request& r, uint64_t now) { sessions_->on_answer(r, now); });
}

void Node::tick(uint64_t now) {
    engine_->tick(now);
    if (table_ == nullptr)
        return;
    table_->poll(now);
    sessions_->reap(now);
}

void Node::close_sessions(uint64_t now, bool all) {
    if (table_ == nullptr)
        return;
    for (Session* s : table_->sessions())
        if (all ? s->state != SessionState::Ended : s->connector && s->state == SessionState::Established)
            table_->close(s, now);
}

bool Node::closes_out() const {
    if (engine_ == nullptr)
        return true;
    for (const Sender* s : engine_->senders())
        if (!rte_ring_empty(s->ctl_out()) || s->busy() != 0)
            return false;
    return true;
}

void Node::stop() {
    if (engine_ != nullptr)
        engine_->stop();
}

void Node::close_ports() {
    // The lcores are joined: no callback is in flight.
    for (Shim& s : shims_)
        if (rte_eth_remove_rx_callback(s.port, s.queue, s.cb) == 0)
            rte_free(const_cast<void*>(static_cast<const void*>(s.cb)));
    shims_.clear();
    // Stopped and closed (their own rx callbacks go with them); the pools stay.
    ports_.local_port.reset();
    ports_.rails.clear();
    ports_.rx_port_owned.reset();
    ports_.tx_port.reset();
    ports_.rx_port = nullptr;
}

void Node::free_engine() {
    // Its Senders and Receivers first (a Receiver's placer walks its
    // installed flows as it goes: they are still there), then its rings,
    // routes, moves and rx roles. The answers and control frames go
    // nowhere from here.
    engine_.reset();
}

void Node::free_pools() {
    ports_.pools.clear();
    ports_.tx_pool = ports_.rx_pool = nullptr;
}

void Node::free_sessions() {
    sessions_.reset(); // the sessions' records
    table_.reset();    // the session links, and the packets they hold
}

bool Node::set_faults(const drivers::FaultSpec& spec) {
    if (shims_.empty())
        return false;
    bool ok = true;
    for (Shim& s : shims_)
        ok &= s.shim->set(spec);
    if (ok)
        fault_spec_ = spec;
    return ok;
}

drivers::FaultCounters Node::fault_counters() const {
    drivers::FaultCounters t;
    for (const Shim& s : shims_) {
        const drivers::FaultCounters c = s.shim->counters();
        t.seen += c.seen;
        t.dropped += c.dropped;
        t.duplicated += c.duplicated;
        t.reordered += c.reordered;
        t.corrupted += c.corrupted;
        t.arrived_retx += c.arrived_retx;
        t.arrived_nack += c.arrived_nack;
        t.passed += c.passed;
    }
    return t;
}

} // namespace tailmark::engine
