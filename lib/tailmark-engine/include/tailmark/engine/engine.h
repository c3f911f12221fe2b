// The engine as one object: the Senders (one per tx queue), the Receivers
// (one per rx queue), the lcores' contexts and their request rings, the ACK
// routes, deferred free and the moves between rx lcores, built from a plain
// EngineConfig and the ports the application already opened (EngineHost).
//
//   auto e = Engine::create(cfg, host, err);  // nothing runs yet (err: EngineError)
//   e->sender(q).set_source(...);             // the application's messages
//   e->open_recv(spec, rx); e->open_send(spec, q);
//   e->launch();                              // run_lcore on every lcore but the main one
//   while (...) e->tick(rte_rdtsc());         // control thread: answers, frees, moves
//   e->close_send(id); e->close_recv(id);     // answered in a later tick
//   e->stop();                                // Phase::Stop, lcores joined
//
// An application with its own flow records makes the flows itself and
// installs them (install_send, install_recv with its RecvPlace and a
// FlowTag), and hears every answer with its tag (set_answers); one that
// runs sessions (tailmarkd, examples/engine_session.cc) does so through
// Sessions (sessions.h).
//
// The data path is the engine's lcore loop (lcore_loop.h) over plain
// structs: no virtual call, no allocation, no lock. Everything else here is
// the control thread's only (one thread: no lock either), except stats()
// and drops(), which any thread may read (relaxed loads).
// The session table is the application's: it sends through
// control_sender() and takes the SESSION and ARP frames
// (set_control_taker); the flows' specs come from session_flows.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tailmark/drop_reason.h"
#include "tailmark/engine/config.h"
#include "tailmark/engine/deferred_free.h"
#include "tailmark/engine/lcore.h"
#include "tailmark/engine/rx_moves.h"
#include "tailmark/receiver.h"
#include "tailmark/sender.h"

namespace tailmark::drivers {
class Port;
}

namespace tailmark::engine {

// What the engine runs on: ports and queues the application opened and
// started (drivers::open_ports, or its own, with the rx TSC stamp on every
// rx queue), the lcores that poll them, and the pool packets come from.
struct EngineHost {
    uint16_t tx_port = 0;
    uint16_t rx_port = 0;
    uint16_t tx_queues = 1;          // one Sender each; queue q on tx_lcores[q % T]
    // Rails beyond the first (session_link.h): ports that send and receive
    // like tx_port (== rx_port), with as many queues; at most kMaxRails - 1.
    std::vector<uint16_t> rail_ports;
    std::vector<unsigned> tx_lcores; // one tx role each
    std::vector<unsigned> rx_lcores; // rx queue r polled by rx_lcores[r], a Receiver each
    rte_mempool* pool = nullptr;     // headers, copies, ACKs and NACKs
    int socket = 0;                  // where the engine's state lives
    bool tx_udp_checksum_offload = false; // the tx queues fill UDP checksums
    bool handoff = false;            // several rx queues whose hash nobody here computes (rx_moves.h)
    // How the other rx queues are reached (drivers::open_ports' plan): by
    // the flow's id, r = id % rx queues (net_ring loopback: tx queue q
    // arrives on rx queue q); or by the port's RSS over the data's UDP/IPv4
    // tuple, computed here (rss_port, which must outlive the engine). With
    // neither (nor handoff) everything arrives on rx queue 0.
    bool steer_by_id = false;
    const drivers::Port* rss_port = nullptr;
    uint64_t tsc_hz = 0;             // 0: rte_get_tsc_hz()
    // --- optional: an application that brings roles of its own ---
    int rx_socket = -1;              // where the rx state lives (-1: socket)
    // The in-memory loopback between applications of this process (a
    // net_ring port whose tx queue r arrives on rx queue r): one more
    // Sender per queue after the port's (nothing to pace or checksum), and
    // rx queue r's Receiver places from its rx queue r too. -1: none.
    int local_port = -1;
    uint16_t local_queues = 0;
    // The application's switches (a type derived from Switches, which its
    // roles read), null: the engine's own.
    Switches* plane = nullptr;
    // The application's tx roles (derived from TxRole), one per tx lcore,
    // in tx_lcores' order; it owns them (the engine fills lcore and
    // senders). Empty: the engine makes its own.
    std::vector<TxRole*> tx_roles;
    // Lcores with the application's roles only (a consumer): request rings.
    std::vector<unsigned> app_lcores;
};

// An lcore's context as the engine's loop wants it (lcore_loop.h): the tx
// and rx roles, no consumer (the application consumes its rings itself).
struct NoRole {};
inline bool consume_step(NoRole&) { return false; }
struct alignas(64) Lcore {
    const Switches* plane = nullptr;
    unsigned lcore = 0;
    TxRole* tx = nullptr;
    RxCtx* rx = nullptr;
    NoRole* cons = nullptr;
    rte_ring* req = nullptr;  // control thread -> lcore (SP/SC)
    rte_ring* resp = nullptr; // lcore -> control thread (SP/SC)
    LcoreCycles cycles;
    uint64_t idle_after = 0;  // 1 ms of cycles
    uint64_t idle_spin = 0;   // cycles idle before the first nap (EngineConfig::idle_spin_us)
    uint32_t idle_sleep_us = 0;
    uint64_t idle_since = 0;
    NoRole* trace = nullptr;
    bool any() const { return tx != nullptr || rx != nullptr; }
};
inline void trace_iteration(Lcore&, uint64_t, uint64_t, uint64_t, uint64_t) {}

// Where a flow is in its life, as the control thread knows it.
enum class FlowState : uint8_t {
    None,    // never opened (or forgotten)
    Opening, // posted to its lcore, not answered yet
    Open,    // installed
    Closing, // its removal posted (a send flow: failed first), not answered yet
    Closed,  // taken out; its state freed a little later (DeferredFree)
    Refused, // the lcore refused the install (id taken, table full); freed
};
const char* to_string(FlowState s);

// Who a flow is to the application: carried in every request about it
// (Request::index, Request::session) and so in every answer (set_answers).
struct FlowTag {
    uint32_t index = 0;
    void* session = nullptr;
};

// Why Engine::create failed: an allocation (what: of which; more EAL
// memory helps) or a host it cannot run on (what: the reason).
struct EngineError {
    bool out_of_memory = false;
    std::string what;
    std::string message() const { return out_of_memory ? "engine: out of memory (" + what + ")" : "engine: " + what; }
};

class Engine {
public:
    static constexpr unsigned kControlBurst = 32;
    // Everything made, nothing running; nullptr with `err` on failure.
    static std::unique_ptr<Engine> create(const EngineConfig& cfg, const EngineHost& host, EngineError& err);
    ~Engine(); // stop(), then everything freed (the ports are the application's)
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Starts run_lcore on every lcore with a role but the main one (whose
    // roles, if any, tick() runs). False: a launch failed (all stopped).
    bool launch();
    // The same with the application's lcore loop: entry(args[l]) on every
    // lcore l but the main one whose args[l] is not null (args: RTE_MAX_LCORE
    // long); it runs engine::run_lcore over its own context, which takes its
    // rings from lcore(l) and its roles from tx_role()/rx_ctx(). The main
    // lcore's roles are then the application's to run, between its ticks.
    bool launch(int (*entry)(void*), void* const* args);
    // Phase::Stop, and the launched lcores joined. Idempotent.
    void stop();
    // No new messages; what is in flight goes on (stop() after).
    void drain() { plane_->phase.store(static_cast<int>(Phase::Drain), std::memory_order_relaxed); }
    bool launched() const { return launched_; }

    // The control thread's round (every ~100 us): the main lcore's roles if
    // it has any (not when the application's loop runs them: launch(entry)),
    // the lcores' answers, removals asked again, the control frames (at most
    // kControlBurst a round), the moves between rx lcores, deferred free.
    // Returns the answers taken.
    uint32_t tick(uint64_t now);

    // --- flows (control thread). Before launch() they go in at once. ---
    // A send flow on Sender `sender` (its ACKs routed to it by id). The
    // spec's user pointer is handed to the Sender's source. False: out of
    // memory, a bad queue, or the id open already.
    bool open_send(const SendFlowSpec& spec, uint32_t sender, const FlowTag& tag = {});
    // The same with a flow the application made (Sender::make_flow), whose
    // view it reads itself: the engine owns it from here (freed a little
    // after its removal, or when refused). False: nothing taken.
    bool install_send(SendFlow* f, uint16_t id, uint32_t sender, const FlowTag& tag = {});
    // A receive flow on Receiver `receiver` (the rx queue its frames reach);
    // the ring is the application's and must outlive the flow's removal.
    bool open_recv(const RecvFlowSpec& spec, uint32_t receiver, const FlowTag& tag = {});
    // The same with a flow the application made (Receiver::make_flow from a
    // spec of this id and auth). `place`: the application's record of where
    // the flow is, which the engine keeps (its Receiver, a move, its last
    // owner at removal; `recv` null once it is out), and which must outlive
    // the engine; null: the engine's own. False: nothing taken.
    bool install_recv(RecvFlow* f, uint16_t id, const FlowAuth& auth, uint32_t receiver, RecvPlace* place = nullptr,
                      const FlowTag& tag = {});
    // Fails what it still owes (why), then takes it out. False: not open.
    bool close_send(uint16_t id, FailReason why = FailReason::Closed);
    bool close_recv(uint16_t id);
    // Every answer an lcore gives about a flow, once the engine has done its
    // part (state, routes, moves; a flow let go is freed a little later, so
    // r.obj may be read now), with the flow's tag in r.index and r.session;
    // and the answers to the application's own ops (post_app). Not called for
    // a removal refused and asked again, nor for the moves' steps.
    void set_answers(std::function<void(const Request& r, uint64_t now)> fn) { answers_ = std::move(fn); }
    // One of the application's ops (from Request::Op::AppFirst) to lcore
    // `lcore`'s ring, served by its handler; answered through set_answers.
    // Before launch it waits for the lcore. False: the ring is full.
    bool post_app(unsigned lcore, const Request& r);
    // An open receive flow's cumulative ACK, for a send flow of this
    // process to it (SendFlowSpec::local_acked); null: not open.
    const uint32_t* recv_acked_word(uint16_t id) const;
    // Where a flow goes, as the host steers (EngineHost): the Receiver whose
    // rx queue receive flow `id`'s data from peer_ip reaches (-1: RSS cannot
    // say), and the port's Sender that send flow i to the peer's flow `wire`
    // goes by (by id: the one whose queue the peer's Receiver polls). A flow
    // to a Receiver of this process goes by the in-memory loopback's Sender
    // of that Receiver's queue (local_sender; the port's without one).
    int receiver_for(uint16_t id, uint32_t peer_ip, uint32_t self_ip, uint16_t udp_port) const;
    uint32_t sender_for(uint16_t wire, uint16_t i) const;
    uint32_t local_sender(const Receiver* to, uint16_t wire, uint16_t i) const;
    int receiver_index(const Receiver* r) const; // in receivers() (-1: none)
    FlowState send_state(uint16_t id) const;
    FlowState recv_state(uint16_t id) const;
    // How many more receive flows Receiver r can take (RxPlacer::kMaxFlows
    // at once), counting those posted and not yet answered; and the least
    // of that over every Receiver. An application refuses a session whose
    // flows would not fit, where the Receiver would refuse them one by one
    // and their data would be dropped as an unknown flow's.
    uint32_t recv_room(uint32_t r) const;
    uint32_t min_recv_room() const;

    // --- counters, any thread (relaxed loads) ---
    struct Stats {
        uint64_t msgs_sent = 0, bytes_sent = 0; // Senders: messages whose every packet was queued
        uint64_t delivered = 0, failed = 0;     // Senders: messages reported
        uint64_t completions = 0;               // tx roles: Sender completions taken (to the sink)
        uint64_t retx_pkts = 0;
        uint64_t pkts_tx = 0, tx_dropped = 0, pkts_rx = 0;
        uint64_t pkts_local = 0;                // of pkts_tx, the in-memory loopback's Senders'
        uint64_t bytes_local = 0;               // of bytes_sent, theirs (their packets carry 60 KiB)
        uint64_t placed = 0, completed = 0;     // Receivers: packets placed, messages completed
        uint64_t packet_completions = 0;        // Receivers: per-packet completions (CompletionMode::Packet)
        uint64_t acks_tx = 0, nacks_tx = 0;
        uint64_t drops = 0;                     // every reason (drops())
    };
    Stats stats() const;
    DropCounters drops() const; // Senders' and Receivers', by reason
    // A send flow's cursors (control thread): live while installed, as last
    // seen once closed. False: never opened.
    bool send_view(uint16_t id, Sender::FlowView& out) const;

    // --- the pieces, for the application's own wiring ---
    const EngineConfig& config() const { return cfg_; }
    Switches& switches() { return *plane_; }
    uint32_t nsenders() const { return static_cast<uint32_t>(senders_.size()); }
    // The port's Senders come first, then the in-memory loopback's.
    uint32_t port_senders() const { return port_senders_; }
    // Sessions between applications of this process go by the in-memory
    // loopback (EngineHost::local_port; local_sender), not out of the port.
    bool has_loopback() const { return host_.local_port >= 0; }
    const std::vector<Sender*>& senders() const { return senders_; }
    const std::vector<Receiver*>& receivers() const { return receivers_; }
    unsigned sender_lcore(uint32_t q) const { return sender_lcore_[q]; }
    // Rx queue r's role (its lcore, queue, Receiver, counters).
    const std::vector<RxCtx*>& rx_ctxs() const { return rxs_; }
    // ACK routing for send flows the application installs itself: flow id's
    // ACKs go to Sender q (kNoSender: nowhere).
    void route_acks(uint16_t id, uint8_t q) { __atomic_store_n(&sender_of_[id], q, __ATOMIC_RELEASE); }
    // The moves between rx lcores (handoff), for flows the application
    // installs itself.
    RxMoves& moves() { return moves_; }
    const RxMoves& moves() const { return moves_; }
    DeferredFree& deferred() { return deferred_; }
    uint32_t nreceivers() const { return static_cast<uint32_t>(receivers_.size()); }
    Sender& sender(uint32_t q) { return *senders_[q]; }
    Receiver& receiver(uint32_t r) { return *receivers_[r]; }
    // Tx lcore t's role: where its Senders' completions go (set_sink).
    TxRole& tx_role(uint32_t t) { return *txs_[t]; }
    uint32_t ntx_roles() const { return static_cast<uint32_t>(txs_.size()); }
    const Lcore* lcore(unsigned l) const { return lcores_[l]; }
    // SESSION and ARP frames the rx lcores route to the control plane (a
    // SessionTable's). Nobody's (the default): tick() frees them.
    rte_ring* control_in() const { return control_in_; }
    void set_control_taker(std::function<void(rte_mbuf*, uint64_t now)> fn) { take_control_ = std::move(fn); }
    // Where a SessionTable's packets go (its send function): out of the
    // port through Sender 0's control queue; with the in-memory loopback,
    // one to this process's own address (self_ip, host order) straight back
    // to control_in(), as if received. False: the ring was full (freed).
    std::function<bool(rte_mbuf*)> control_sender(uint32_t self_ip) const;
    // Frees fn's objects once other threads can no longer read them.
    void later(uint64_t now, std::function<void()> fn) { deferred_.later(now, std::move(fn)); }
    uint64_t tsc_hz() const { return tsc_hz_; }

private:
    Engine(const EngineConfig& cfg, const EngineHost& host);
    bool make(EngineError& err);
    std::string name(const char* what, unsigned i) const;
    bool make_senders(EngineError& err);
    bool add_sender(TxRole& c, uint16_t port, uint16_t q, bool local, EngineError& err);
    bool make_receivers(EngineError& err);
    uint32_t rails_from(uint16_t first, uint16_t (&out)[kMaxRails]) const;
    Lcore* lcore_ctx(unsigned l);
    bool post(unsigned lcore, const Request& r);
    void on_response(const Request& r, uint64_t now);
    void look_for_moves(uint64_t now);

    struct SendRec {
        SendFlow* flow = nullptr;
        uint32_t sender = 0;
        unsigned lcore = 0;
        FlowState state = FlowState::None;
        Sender::FlowView last{};
        FlowTag tag;
    };
    struct RecvRec {
        RecvPlace own;
        RecvPlace* p = nullptr; // &own, or the application's
        FlowState state = FlowState::None;
        bool close_after_move = false;
        bool held = false; // counted in held_[at] (recv_room)
        uint32_t at = 0;
        FlowTag tag;
    };
    void hold(RecvRec& rec, uint32_t at);
    void unhold(RecvRec& rec);
    Request request(Request::Op op, const SendRec& rec, uint16_t id, FailReason why = FailReason::None) const;
    Request request(Request::Op op, const RecvRec& rec, uint16_t id) const;
    void end_move(RecvRec& rec, uint16_t id, bool ok);
    void answer(const Request& r, uint64_t now) {
        if (answers_)
            answers_(r, now);
    }

    EngineConfig cfg_;
    EngineHost host_;
    uint64_t tsc_hz_ = 0;
    Switches own_plane_;
    Switches* plane_ = &own_plane_;
    bool own_txs_ = true;
    uint32_t port_senders_ = 0;
    std::vector<Sender*> senders_;
    std::vector<unsigned> sender_lcore_;
    std::vector<Receiver*> receivers_;
    std::vector<TxRole*> txs_;
    int rx_tsc_field_ = -1; // drivers::rx_tsc_register()
    std::vector<RxCtx*> rxs_;
    std::vector<Lcore*> lcores_; // by lcore id (null: not the engine's)
    std::vector<Lcore*> ctxs_;   // the same, those made only: tick() reads their answers
    std::vector<rte_ring*> wire_in_, local_in_;
    uint8_t* sender_of_ = nullptr; // 65536: a send flow id's Sender (ACK routing)
    rte_ring* control_in_ = nullptr;
    std::function<void(rte_mbuf*, uint64_t)> take_control_;
    std::function<void(const Request&, uint64_t)> answers_;
    bool app_loop_ = false; // launch(entry): the application runs the main lcore's roles
    RxMoves moves_;
    DeferredFree deferred_;
    std::unordered_map<uint16_t, SendRec> sends_;
    std::unordered_map<uint16_t, RecvRec> recvs_;
    std::vector<uint32_t> held_; // per Receiver: receive flows installed there, or posted
    std::vector<Request> retry_; // removals an lcore could not do yet
    bool launched_ = false;
    std::vector<unsigned> running_; // the lcores launch() started
};

} // namespace tailmark::engine
