// Everything between rte_eal_init and rte_eal_cleanup: ports, pools, the
// protocol engines (a Sender per tx queue, a Receiver per rx queue), the
// session table, the lcore contexts, the control loop on the main lcore, and
// the teardown in the conventions' order (lcores joined, ports stopped and
// closed, memzones and rings freed; the caller then calls rte_eal_cleanup).
//
// Sessions are agreed at run time (lib/tailmark/session.h): loopback
// connects to itself over the port, send connects to --dst-ip, recv listens.
// When a session is up, its flows are made here and handed to the lcores on
// their request rings; when it ends, they are taken back and freed.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <ranges>
#include <string>
#include <vector>

#include <rte_lcore.h>

#include "bench/summary.h"
#include "context.h"
#include "drivers/fault_shim.h"
#include "drivers/mempool.h"
#include "drivers/port.h"
#include "drivers/port_plan.h"
#include "drivers/replay_pool.h"
#include "options/options.h"
#include "shell/results_mailbox.h"
#include "stop_request.h"
#include "tailmark/engine/config.h"
#include "tailmark/engine/deferred_free.h"
#include "tailmark/engine/engine.h"
#include "tailmark/engine/flow_registry.h"
#include "tailmark/engine/flow_watch.h"
#include "tailmark/engine/node.h"
#include "tailmark/engine/rx_moves.h"
#include "tailmark/flow_ids.h"

namespace tailmark::app {

class Bench;
class Service;
class StatsLine;

inline constexpr size_t kMaxRegistry = 65536; // flows one run tracks

// The engine's settings (lib/tailmark-engine), from the daemon's options.
engine::EngineConfig engine_config(const Options& o);

class Runtime {
public:
    // `stop`: where signals and the shell ask the run to end (main's).
    Runtime(const Options& opt, StopRequest& stop);
    ~Runtime(); // teardown()
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    // False with `e` filled on failure; whatever was built is torn down by teardown().
    bool setup(SetupError& e);
    // Launches the lcores, runs the control loop on the main lcore until
    // Phase::Stop, and joins the lcores (rte_eal_mp_wait_lcore).
    void run();
    Results results() const;
    // results() for another thread (the shell's): the control thread, which
    // alone adds and forgets sessions and flows, computes them between its
    // rounds; before its loop starts the caller waits, after it ends they
    // are computed here (nothing changes the tables then). False: the
    // control loop did not answer within timeout_s.
    bool results_from_shell(Results& out, double timeout_s = 2.0);
    std::vector<Results::RxLane> rx_lanes() const;
    // The exit code the run ends with besides the summary's verdict: 2 when
    // the peer refused the session (a configuration mismatch), else 0.
    int refused_exit() const { return refused_ ? 2 : 0; }
    // Idempotent. Lcores must be joined (run() returned, or never launched).
    void teardown();

    void set_stats_period(double s) { stats_period_.store(s, std::memory_order_relaxed); }
    double stats_period() const { return stats_period_.load(std::memory_order_relaxed); }

    CompletionMode completion() const { return plane_.completion_now(); }
    bool set_completion(CompletionMode m, std::string& why);
    bool switchable() const { return opt_.interactive && !opt_.external_consumer && opt_.mode != Mode::Send; }

    bool set_fault(const drivers::FaultSpec& spec) { return node_.set_faults(spec); }
    bool has_fault_shim() const { return node_.has_faults(); }
    drivers::FaultSpec fault_spec() const { return node_.faults(); }
    drivers::FaultCounters fault_counters() const { return node_.fault_counters(); }

    // The registry's flows so far (engine::FlowRegistry): other threads
    // read flow_at(i) for i < flow_count(); the control thread may give the
    // slot to a new flow (run/registry.cc), the old one freed a second later.
    uint32_t flow_count() const { return reg_.count(); }
    FlowCtx& flow_at(uint32_t i) const { return ctx_of(reg_.at(i)); }

    Plane& plane() { return plane_; }
    const Plane& plane() const { return plane_; }
    StopRequest& stop_request() { return stop_; }
    const Options& options() const { return opt_; }

    // --- Read-only views, for any thread (the shell, telemetry, status) ---
    // Counters summed over every engine and flow, with relaxed loads.
    struct Stats {
        uint64_t sent = 0, completed = 0, verified = 0, verify_errors = 0, bytes = 0;
        uint64_t pkts_tx = 0, pkts_rx = 0, tx_dropped = 0, drops = 0, completion_writes = 0;
        uint64_t acked = 0;
        uint64_t retx = 0; // packets retransmitted
        uint64_t pkts_local = 0; // of pkts_tx, through the in-memory loopback
        uint64_t bytes_local = 0; // of the payload sent, through the in-memory loopback
    };
    Stats stats() const;
    DropCounters drops() const; // every engine's, by reason
    // A flow's sender-side cursors, live or as last seen.
    Sender::FlowView send_view(const FlowCtx& f) const;
    uint32_t released_of(const FlowCtx& f) const;
    uint32_t acked_of(const FlowCtx& f) const;
    // --consumer-lcores none: flow i (< flow_count()) has not moved its
    // cursor for a while; how many such flows there are.
    bool stalled(uint32_t i) const { return watch_.stalled(i); }
    uint32_t flows_stalled() const { return watch_.stalled_count(); }
    // Flow i's messages per second over the last second: sent, and done
    // (send: delivered; otherwise consumed).
    double rate_sent(uint32_t i) const { return watch_.rate_sent(i); }
    double rate_done(uint32_t i) const { return watch_.rate_done(i); }
    const char* steering_name() const {
        return ports().steer_by_queue ? "queue" : ports().rss ? "rss" : ports().handoff ? "handoff" : "single";
    }
    // The engines and the lcores' contexts, made at set-up and fixed after
    // it: their counters are read with relaxed loads. lcores() is indexed
    // by lcore id (null: not one of the run's).
    const std::vector<Sender*>& senders() const { return node_.has_engine() ? engine().senders() : no_senders_; }
    const std::vector<RxCtx*>& rxs() const { return node_.has_engine() ? engine().rx_ctxs() : no_rxs_; }
    const std::vector<Receiver*>& receivers() const {
        return node_.has_engine() ? engine().receivers() : no_receivers_;
    }
    const std::vector<ConsCtx*>& conss() const; // the benchmark's consumers (none in --mode service)
    const std::vector<LcoreCtx*>& lcores() const { return lcores_; }
    bool senders_busy() const; // any Sender holds a message
    int tx_port_id() const { return ports().tx_port ? ports().tx_port->id() : -1; }
    // Port p's rail (--rails: 1, 2, ...), 0 when it is none.
    int rail_of(uint16_t p) const {
        for (size_t i = 0; i < rails().size(); i++)
            if (rails()[i]->id() == p)
                return static_cast<int>(i + 1);
        return 0;
    }
    int rx_port_id() const { return ports().rx_port ? ports().rx_port->id() : -1; }
    int tx_socket() const { return ports().tx_socket; }
    const Service* service() const { return service_.get(); } // --mode service, else null

    // --- Sessions' flows (control thread) ---
    // The sessions and their flows on the engine (engine::Sessions): made
    // with the session table; the service and the benchmark open and close
    // their flows through it. The daemon's part of each flow (the consumer)
    // is added through its hooks (runtime_flows.cc).
    engine::Sessions& flows() { return node_.sessions(); }
    const engine::Sessions& flows() const { return node_.sessions(); }
    using SendOpen = engine::Sessions::SendOpen;
    // The daemon's own ops (kAddCons, kRemoveCons, kAddReplay) to an lcore.
    void post(unsigned lcore, const Request& r);
    // Before launch: the daemon's own ops applied on this thread, and their
    // answers taken. False: an lcore's role refused one.
    bool serve_before_launch();
    // A session of the table's, by id, as the daemon's record (null: none).
    AppSession* app_session(uint16_t sid) { return static_cast<AppSession*>(flows().session(sid)); }
    // Every session the daemon tracks, in the order they came up (control
    // thread); app_of() gives the daemon's record.
    const std::vector<std::unique_ptr<engine::SessionRec>>& app_sessions() const {
        return node_.has_sessions() ? flows().sessions() : no_sessions_;
    }
    // Receive flows every Receiver can still take (engine::recv_room): a
    // session's flows may all land on one, so each needs room for all.
    uint32_t recv_room() const { return node_.has_engine() ? engine().min_recv_room() : 0; }
    // What sessions are made with: the table, the secret every MAC is keyed
    // with, where flow state is allocated, the TSC rate, and the in-memory
    // loopback's port (-1: none).
    SessionTable& sessions() { return node_.table(); }
    const SipKey& secret() const { return secret_; }
    int rx_socket() const { return ports().rx_socket; }
    uint64_t tsc_hz() const { return tsc_hz_; }
    int local_port_id() const { return node_.local_port_id(); }
    // The run's end: `reason` is the summary's exit reason (stop_run); the
    // peer refused the session (set_refused: exit code 2).
    void stop_run(uint64_t now, const char* reason);
    void set_refused() { refused_ = true; }
    // What the benchmark's flows are made with (bench/): the tx role of
    // Sender si and how many there are, the packets' pool, the rx lcores,
    // this end's MAC and the rx port's.
    TxCtx* tx_for(uint32_t si) const { return txs_[si % txs_.size()]; }
    const engine::EngineConfig& ecfg() const { return ecfg_; }
    uint32_t ntx() const { return static_cast<uint32_t>(txs_.size()); }
    rte_mempool* tx_pool() const { return ports().tx_pool; }
    const std::vector<unsigned>& rx_lcores() const { return rx_lcores_; }
    const rte_ether_addr& mac() const { return mac_; }
    // At set-up: lcore l's context, made on first use (null: not one of
    // the engine's lcores, or out of memory); the bench adds its consumers.
    LcoreCtx* lcore_ctx(unsigned lcore);
    rte_ether_addr rx_mac() const { return ports().rx_port->mac(); }

    // --- What the summary is made of (bench/results.cc), besides the above ---
    const engine::FlowRegistry<engine::SessionFlow>& registry() const { return reg_; }
    // What the forgotten sessions' flows add to the summary's totals.
    struct Forgotten {
        uint64_t flows_failed = 0, messages_failed = 0, completed = 0, bytes = 0;
    };
    const Forgotten& forgotten() const { return forgotten_; }
    uint64_t sessions_forgotten() const { return node_.has_sessions() ? flows().forgotten() : 0; }
    // The run's moments (TSC): the lcores launched, the work started (the
    // first session up), the loop ended, the work done (0: not yet).
    struct Times {
        uint64_t launch = 0, start = 0, end = 0, work_end = 0;
    };
    Times times() const { return {launch_tsc_, start_tsc_, end_tsc_, work_end_tsc_}; }
    const std::string& exit_reason() const { return exit_reason_; }
    const drivers::Port* tx_port() const { return ports().tx_port.get(); }
    const drivers::Port* rx_port() const { return ports().rx_port; }
    const std::vector<std::unique_ptr<drivers::Port>>& rails() const { return ports().rails; }
    const engine::Engine& engine() const { return node_.engine(); }
    const SessionTable* session_table() const { return node_.has_sessions() ? &node_.table() : nullptr; }
    uint64_t ids_reused() const { return node_.has_sessions() ? flows().ids_reused() : 0; }
    bool handoff() const { return ports().handoff; }
    const Bench* bench() const { return bench_.get(); }

private:
    const drivers::PortSet& ports() const { return node_.ports(); }
    engine::Engine& eng() { return node_.engine(); }
    bool plan_lcores(SetupError& e);
    bool open_ports(SetupError& e);
    bool make_engines(SetupError& e);
    // make_engines' steps, in its order (false: `e` says why).
    bool make_senders(SetupError& e);
    bool make_receivers(SetupError& e);
    void make_session_table();

    // Sessions (control loop).
    void on_session(Session& s);
    void forget_ended(uint64_t now); // beyond --keep-ended, the oldest ended sessions go
    void forgetting(const FlowCtx& f);     // a forgotten session's flow: into the totals

    void control(uint64_t now);
    void check_done(uint64_t now); // control(): done, drained, closed: what comes next
    bool done() const;
    bool drained() const;
    void begin_drain(uint64_t now, const char* reason);
    void stop(uint64_t now, const char* reason);
    void close_and_stop(uint64_t now, const char* reason);
    void close_sessions(uint64_t now);


    Options opt_;
    engine::EngineConfig ecfg_; // what the Senders and Receivers are made with (make_engines)
    StopRequest& stop_;
    Plane plane_;
    SipKey secret_;
    // The ports and pools (--mode service: with the in-memory loopback for
    // sessions between applications of this daemon), the engine on them,
    // the session table and the sessions' flows (engine::Node); the fault
    // shims in front of the rx queues (--fault, -i).
    engine::Node node_;
    uint64_t next_forget_ = 0; // forget_ended: once a second
    rte_ether_addr mac_{};
    // lcores and engines
    std::vector<unsigned> tx_lcores_, rx_lcores_, cons_lcores_;
    std::vector<LcoreCtx*> lcores_ = std::vector<LcoreCtx*>(RTE_MAX_LCORE, nullptr);
    // The daemon's tx roles and consumers are its own; the engine's
    // Senders, Receivers and rx roles run them (lcore_main).
    inline static const std::vector<Sender*> no_senders_{};
    inline static const std::vector<RxCtx*> no_rxs_{};
    inline static const std::vector<Receiver*> no_receivers_{};
    std::vector<TxCtx*> txs_;
    inline static const std::vector<ConsCtx*> no_conss_{};
    inline static const std::vector<std::unique_ptr<engine::SessionRec>> no_sessions_{};
    // sessions and flows
    std::unique_ptr<Service> service_; // --mode service
    std::unique_ptr<Bench> bench_;     // the other modes: the benchmark's sessions and flows
    // The flows by number (other threads read it from set-up to teardown).
    engine::FlowRegistry<engine::SessionFlow> reg_{kMaxRegistry};
    engine::SessionHooks hooks(); // the daemon's part of each flow (runtime_flows.cc)
    // The registry's flows as the daemon's records (control thread).
    auto ctxs() const {
        return std::views::transform(reg_, [](engine::SessionFlow* f) { return static_cast<FlowCtx*>(f); });
    }
    Forgotten forgotten_;
    bool refused_ = false;
    // run
    bool launched_ = false;
    ResultsMailbox<Results> results_mail_; // results_from_shell's
    uint64_t tsc_hz_ = 1;
    uint64_t cc_max_mbps() const;
    uint64_t launch_tsc_ = 0, start_tsc_ = 0, end_tsc_ = 0, work_end_tsc_ = 0;
    uint64_t deadline_tsc_ = 0, drain_deadline_ = 0, drain_start_ = 0, close_deadline_ = 0;
    uint64_t next_stats_ = 0;
    std::unique_ptr<StatsLine> stats_line_; // --stats-period's (telemetry/stats_line.h)
    std::string exit_reason_;
    std::atomic<double> stats_period_{opt_.stats_period};
    bool lingering_ = false;
    bool closing_ = false;
    // Failed flows and the congestion floor logged, a consumer process's
    // stalls, each flow's rates (lib/tailmark-engine/flow_watch.h).
    engine::FlowWatch watch_{kMaxRegistry};
};

} // namespace tailmark::app
