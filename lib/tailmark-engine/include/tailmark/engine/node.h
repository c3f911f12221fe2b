// One end of sessions, wired: its ports and pools (drivers/port_plan.h),
// the Engine on them, the SessionTable the engine carries, and the
// sessions' flows on it (Sessions). What every application that runs
// sessions builds the same way (tailmarkd, examples/engine_session.cc), so
// it is built once, here; the application brings its lcores, its settings,
// its own roles and its flow records.
//
//   engine::Node n;
//   n.open_ports(needs, err);              // or adopt_ports(): ports the application opened
//   n.make_engine(cfg, host, err);         // host: the lcores (and roles); the port side is filled here
//   n.make_sessions(tc, sc, reg, notify);  // the table sends through the engine, takes its control frames
//   n.engine().launch(); while (...) n.tick(rte_rdtsc());
//   n.stop(); n.close_ports(); n.free_engine();
//   ...the application frees its flow records (Sessions::free_recv)...
//   n.free_sessions(); n.free_pools();     // (~Node runs what is left)
//
// Teardown is in stages because the application's own state sits between
// them: the lcores joined before the fault shims come off; the ports closed
// (their mbufs back in the pools) before the engine goes; the engine gone
// (every installed flow let go) before the application frees its flows;
// the sessions' records before the table; the pools last. Each stage is
// idempotent, and ~Node runs whichever are left.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_ethdev.h>

#include "drivers/fault_shim.h"
#include "drivers/port_plan.h"
#include "tailmark/engine/engine.h"
#include "tailmark/engine/flow_registry.h"
#include "tailmark/engine/sessions.h"
#include "tailmark/session.h"

namespace tailmark::engine {

struct NodeError {
    int exit_code = 0; // 2: the configuration cannot work here; 1: a run-time failure (memory, a port)
    std::string message;
};

class Node {
public:
    Node() = default;
    ~Node();
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    // --- set-up, in this order ---
    // 1. The ports and pools, planned and opened (drivers::open_ports).
    //    False with `e` filled; whatever was opened is kept, to be closed.
    bool open_ports(const drivers::PortNeeds& n, NodeError& e);
    //    Or ports the application opened itself (started, with the rx TSC
    //    stamp: drivers::Port::open).
    void adopt_ports(drivers::PortSet ps) { ports_ = std::move(ps); }
    // 2. The engine on them. `h` brings the lcores, the application's roles
    //    and switches; its port side (ports, queues, rails, pool, sockets,
    //    checksum offload, steering, the in-memory loopback) is filled from
    //    the ports. cfg.cc.max_mbps 0: the tx port's link speed.
    bool make_engine(EngineConfig cfg, EngineHost h, NodeError& e);
    //    A fault shim (drivers/fault_shim.h) in front of every rx queue the
    //    engine polls: tests, and the shell's `set fault`.
    bool attach_faults(const drivers::FaultSpec& spec, NodeError& e);
    // 3. The session table and the sessions' flows. The table's pool and
    //    clock are the node's where tc leaves them unset, and its rails'
    //    MACs are the rail ports' (the addresses are the application's); sc's
    //    sockets are the ports'. The table sends through
    //    Engine::control_sender(tc.self.ip) and takes the control frames;
    //    the engine's answers go to Sessions::on_answer. `reg` must outlive
    //    free_sessions().
    void make_sessions(SessionTable::Config tc, SessionsConfig sc, FlowRegistry<SessionFlow>& reg,
                       SessionTable::Notify notify, SessionHooks hooks = {});

    // The control thread's round: the engine's (answers, control frames,
    // moves, deferred free), the table's timers, ended sessions whose flows
    // are out forgotten by the table.
    void tick(uint64_t now);
    // The end of the work: the sessions this end opened and established
    // closed (all: every session not ended yet, whoever opened it), each
    // with a CLOSE to its peer, sent through the engine.
    void close_sessions(uint64_t now, bool all);
    // Every CLOSE (and every control packet) is out: no Sender holds one,
    // nor a message. Then the lcores may stop.
    bool closes_out() const;

    // --- teardown, in this order (see above) ---
    void stop();          // Phase::Stop, the engine's lcores joined
    void close_ports();   // the fault shims taken off, the ports stopped and closed
    void free_engine();   // Senders, Receivers, rings; every flow still installed let go
    void free_sessions(); // the sessions' records, then the table
    void free_pools();    // last: the closed ports gave their mbufs back

    // --- what it holds ---
    const drivers::PortSet& ports() const { return ports_; }
    bool has_engine() const { return engine_ != nullptr; }
    Engine& engine() { return *engine_; }
    const Engine& engine() const { return *engine_; }
    bool has_sessions() const { return sessions_ != nullptr; }
    SessionTable& table() { return *table_; }
    const SessionTable& table() const { return *table_; }
    Sessions& sessions() { return *sessions_; }
    const Sessions& sessions() const { return *sessions_; }
    // The tx port's link speed in Mbit/s (100000 when the port does not say).
    uint64_t link_mbps() const;
    // Every drop so far, by reason: the engine's Senders and Receivers and
    // the session table's control frames (relaxed loads, any thread).
    DropCounters drops() const;
    // The in-memory loopback's port (-1: none).
    int local_port_id() const { return ports_.local_port ? ports_.local_port->id() : -1; }
    // The fault shims' (none: false, and zero counts).
    bool has_faults() const { return !shims_.empty(); }
    bool set_faults(const drivers::FaultSpec& spec);
    drivers::FaultSpec faults() const { return fault_spec_; }
    drivers::FaultCounters fault_counters() const;

private:
    struct Shim {
        std::unique_ptr<drivers::FaultShim> shim;
        uint16_t port = 0, queue = 0;
        const rte_eth_rxtx_callback* cb = nullptr;
    };
    drivers::PortSet ports_;
    std::vector<Shim> shims_;
    drivers::FaultSpec fault_spec_;
    std::unique_ptr<Engine> engine_;
    std::unique_ptr<SessionTable> table_;
    std::unique_ptr<Sessions> sessions_;
};

} // namespace tailmark::engine
