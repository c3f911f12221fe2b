// Everything between rte_eal_init and rte_eal_cleanup: ports, pools, flows,
// completion rings, lcore contexts, the control loop on the main lcore, and
// the teardown in the conventions' order (lcores joined, ports stopped and
// closed, memzones and rings freed; the caller then calls rte_eal_cleanup).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <rte_lcore.h>

#include "context.h"
#include "drivers/mempool.h"
#include "drivers/port.h"
#include "options.h"
#include "summary.h"

namespace tailmark::app {

struct SetupError {
    int exit_code = 0; // 2: bad configuration, 1: run-time failure
    std::string message;
};

class Runtime {
public:
    explicit Runtime(const Options& opt) : opt_(opt) {}
    ~Runtime(); // teardown()
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    // False with `e` filled on failure; whatever was built is torn down by teardown().
    bool setup(SetupError& e);
    // Launches the lcores, runs the control loop on the main lcore until
    // Phase::Stop, and joins the lcores (rte_eal_mp_wait_lcore).
    void run();
    Results results() const;
    // Idempotent. Lcores must be joined (run() returned, or never launched).
    void teardown();

    // --stats-period at run time (the shell's `set stats-period`; 0 = off). Any thread.
    void set_stats_period(double s) { stats_period_.store(s, std::memory_order_relaxed); }
    double stats_period() const { return stats_period_.load(std::memory_order_relaxed); }

    // The completion mode now (the shell can switch it; see set_completion).
    CompletionMode completion() const { return dp_completion(); }
    // Switches message <-> packet completion. The caller (the shell) makes
    // sure nothing is in flight. False, with the reason, where it cannot.
    bool set_completion(CompletionMode m, std::string& why);
    bool switchable() const { return opt_.interactive && !opt_.external_consumer && opt_.mode != Mode::Send; }

    // The fault shim (--fault, or any -i run): a new spec for every rx queue,
    // taken at each queue's next burst. False when no shim is attached.
    bool set_fault(const drivers::FaultSpec& spec);
    bool has_fault_shim() const { return !shims_.empty(); }
    drivers::FaultSpec fault_spec() const { return fault_spec_; }
    drivers::FaultCounters fault_counters() const;

private:
    friend struct TelemetryAccess; // telemetry.cc: read-only views for the telemetry thread
    friend struct ShellAccess;     // shell.cc: the interactive shell's views and controls
    bool plan_lcores(SetupError& e);
    bool open_ports(SetupError& e);
    bool make_flows(SetupError& e);
    bool make_contexts(SetupError& e);
    bool make_replay(SetupError& e);
    void control(uint64_t now);
    bool done() const;
    bool drained() const;
    void begin_drain(uint64_t now, const char* reason);
    void stop(uint64_t now, const char* reason);
    void print_stats(uint64_t now);
    void watch_flows(uint64_t now); // --consumer-lcores none: cursors in, stalls out

    struct Totals {
        uint64_t sent = 0, completed = 0, verified = 0, verify_errors = 0, bytes = 0;
        uint64_t pkts_tx = 0, pkts_rx = 0, tx_dropped = 0, drops = 0, completion_writes = 0;
        uint64_t acked = 0;
        uint64_t retx = 0; // packets retransmitted
    };
    Totals totals() const;

    Options opt_;
    // ports and pools
    std::vector<std::unique_ptr<drivers::Mempool>> pools_;
    rte_mempool* tx_pool_ = nullptr;
    rte_mempool* rx_pool_ = nullptr;
    std::unique_ptr<drivers::Port> tx_port_;
    std::unique_ptr<drivers::Port> rx_port_owned_; // when --rx-port != --tx-port
    drivers::Port* rx_port_ = nullptr;
    int tx_socket_ = 0, rx_socket_ = 0;
    bool steer_by_queue_ = false; // net_ring loopback: tx queue q arrives on rx queue q
    bool rss_ = false;
    uint16_t tx_nq_ = 1;          // tx queues used for data/ACKs
    // lcores
    std::vector<unsigned> tx_lcores_, rx_lcores_, cons_lcores_;
    std::vector<LcoreRoles> roles_ = std::vector<LcoreRoles>(RTE_MAX_LCORE);
    // flows and contexts
    FlowCtx* flows_ = nullptr;
    std::vector<std::unique_ptr<CompletionRing>> rings_;
    std::vector<rte_ring*> cqs_;
    std::vector<drivers::FaultShim*> shims_;                 // one per rx queue
    std::vector<const rte_eth_rxtx_callback*> shim_cbs_;
    drivers::FaultSpec fault_spec_;
    std::vector<TxCtx*> txs_;
    std::vector<RxCtx*> rxs_;
    std::vector<ConsCtx*> conss_;
    std::vector<RxPlacer*> placers_;
    std::vector<void*> allocs_; // rte_malloc'ed arrays and buffers
    // run
    bool launched_ = false;
    bool timers_ = false;
    std::vector<TxFlowState*> replays_; // --replay: flows with ready-made packets
    std::vector<bool> failed_logged_; // control loop: flow failures reported once // rte_timer subsystem initialised by setup()
    uint64_t tsc_hz_ = 1;
    uint64_t start_tsc_ = 0, end_tsc_ = 0, deadline_tsc_ = 0, drain_deadline_ = 0, drain_start_ = 0;
    uint64_t next_stats_ = 0, last_stats_tsc_ = 0;
    Totals last_stats_{};
    std::string exit_reason_;
    std::atomic<double> stats_period_{opt_.stats_period}; // shell: `set stats-period` (seconds, 0 = off)
    bool lingering_ = false; // --linger: done, waiting for a signal
    // --consumer-lcores none: per flow, the released cursor last seen, when it
    // last moved, and whether the flow is stalled (completed messages wait,
    // the external consumer releases none for kConsumerStallUs).
    std::vector<uint32_t> seen_released_;
    std::vector<uint64_t> moved_tsc_;
    std::unique_ptr<std::atomic<bool>[]> stalled_;
    std::atomic<uint32_t> nstalled_{0};
};

} // namespace tailmark::app
