// The benchmark modes (loopback, send, recv): the run's own sessions, their
// flows and the run's end, on Runtime's public API as the service's are
// (service/).
//
// The run's configuration is the contract: the connector proposes it to
// --dst-ip (loopback: to itself), and its flows carry the generator's
// messages or --replay's ready-made packets once the session is up; the
// listener takes a session whose settings are this run's and refuses any
// other, the setting named. --flow-control off has no session at all: the
// flows are installed before the lcores start. Compiled into tailmarkd, not
// into the harness library (meson.build) that tailmark-consumer links.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_mbuf.h>

#include "drivers/replay_pool.h"
#include "tailmark/completion_ring.h"
#include "tailmark/sender.h"
#include "tailmark/session.h"
#include "tailmark/tx_marker.h"
#include "tailmark/engine/sessions.h"

namespace tailmark::app {

class Runtime;
struct AppSession;
struct FlowCtx;
struct GenFlow;
struct Options;
struct SetupError;
struct TxCtx;
struct ConsCtx;
class SlowTrace;

class Bench {
public:
    explicit Bench(Runtime& rt);
    // The generator's state, the replay's packets and their pools: after
    // the lcores, the flows and the tx contexts that referenced them.
    ~Bench();
    Bench(const Bench&) = delete;
    Bench& operator=(const Bench&) = delete;

    // The tx side, at set-up (bench_tx.cc): tx role c's completion sink,
    // the port's Sender q's message source, the generator's buffers.
    void attach_tx(TxCtx& c);
    void attach_sender(uint32_t q, Sender& s, TxCtx& c);
    bool make_gen_bufs(SetupError& e);
    // The flows the run configures itself (loopback, send), after the
    // engine: the shell's and the summary's flows 0..N-1, filled in when
    // the session is up. recv's come with its sessions.
    bool make_flows(SetupError& e);
    // --flow-control off: the flows, installed before launch (false: `e` says why).
    bool make_unconnected(SetupError& e);
    // The run's sessions: listen (loopback, recv), connect (loopback, send).
    void start(uint64_t now);
    // The session table's news for them (Runtime::on_session).
    void on_session(Session& s, uint64_t now);
    // The run's end (bench_end.cc): recv's sessions whose every flow
    // consumed --messages, counted (each control round); every message of
    // the run done; nothing it sent in flight (the Senders' part aside).
    void count_complete();
    bool done() const;
    bool drained() const;
    uint32_t sessions_complete() const { return sessions_complete_; }
    // The verifying consumers (bench_consumers.cc): a role per
    // --consumer-lcores lcore (and its --trace-slow-ns trace), made at
    // set-up; flow f's state on one of them, with its receive side (false:
    // `err` says why; none without consumers).
    bool make_consumers(const std::vector<unsigned>& lcores, SetupError& e);
    bool attach_consumer(FlowCtx& f, const Session& s, std::string& err);
    // Their part of each receive half (bench_consumers.cc): made, posted,
    // taken back and freed with it. Wraps h's recv_made.
    void consumer_hooks(engine::SessionHooks& h);
    const std::vector<ConsCtx*>& consumers() const { return conss_; }
    const std::vector<std::unique_ptr<SlowTrace>>& traces() const { return traces_; }

private:
    FlowParams proposal() const;
    AcceptDecision decide(Session& s, const FlowParams& proposed);
    void say_why(const Session& s, uint64_t now); // a connector that never came up
    void install_send(AppSession& a, Session& s);
    void install_replay(AppSession& a, Session& s);
    bool make_replay(FlowCtx& f, const TxFlow& tx, const CompletionRing* ring, uint32_t si, AppSession& a);
    GenFlow* gen_flow(FlowCtx& f, TxCtx* c);

    Runtime& rt_;
    const Options& opt_;
    std::vector<void*> allocs_;           // rte_malloc'ed: the generator's buffers, its and the replay's per-flow state
    std::vector<rte_mbuf**> replay_pkts_; // --replay: each flow's ready-made packets (ring_size sets)
    std::vector<std::unique_ptr<drivers::ReplayPool>> replay_pools_; // and the pools they are of
    uint32_t sessions_complete_ = 0; // recv: of --sessions
    std::vector<ConsCtx*> conss_;
    std::vector<std::unique_ptr<SlowTrace>> traces_; // --trace-slow-ns: one per consumer lcore
};

} // namespace tailmark::app
