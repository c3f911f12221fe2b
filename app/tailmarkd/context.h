// What the daemon's lcores share, and what each owns.
//
// The protocol lives in lib/ (Sender, Receiver, SessionTable); this is the
// wiring. Every lcore gets its context (LcoreCtx) as its argument: no
// mutable globals on the data path. The control loop (main lcore) changes
// the data plane only through single atomic stores (Plane) and requests on
// each lcore's ring (install or remove a flow), which the lcore applies
// between two rounds (ip_pipeline's request/response pattern).
//
// Ownership: each per-lcore context is cache-aligned and written by its
// lcore only; the control loop reads its counters with relaxed loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include "drivers/replay_pool.h"
#include "tailmark/engine/lcore.h"
#include "tailmark/engine/lcore_loop.h"
#include "tailmark/engine/rx_moves.h"
#include "latency_hist.h"
#include "slow_trace.h"
#include "options/options.h"
#include "tailmark/completion_ring.h"
#include "tailmark/receiver.h"
#include "tailmark/sender.h"
#include "tailmark/session.h"
#include "tailmark/tx_burst.h"

namespace tailmark::app {

// The engine's pieces the daemon's lcores are made of (lib/tailmark-engine).
using engine::bump;
using engine::CompletionSink;
using engine::kMaxBurst;
using engine::kNoPort;
using engine::LcoreCycles;
using engine::peek;
using engine::Phase;
using engine::Request;
using engine::rx_step;
using engine::RxCtx;
using engine::socket_delete;
using engine::socket_new;

// Read-only after set-up.
struct DataPlaneConfig {
    Mode mode = Mode::Loopback;
    uint64_t msg_size = 0;
    uint64_t messages = 0;           // per flow, generator
    uint32_t ring_size = 0;
    uint32_t flows = 0;              // per session
    const uint64_t* sizes = nullptr; // --msg-size list: message i of a flow has sizes[i % nsizes]
    uint32_t nsizes = 0;
    uint64_t pace_cycles = 0;        // --rate: cycles between two generator messages of one flow (0: no pacing)
    uint64_t late_cycles = 0;        // --rate: a message this late (1 us) waits for a tx step of its own
    bool replay = false;             // --replay: tx resends ready-made packets (rx benchmarks)
    bool fixed_payload = false;      // --payload fixed: message 0's bytes in every message (tx benchmarks)
    bool verify = true;              // the consumer compares every byte with the generator's

    // The generator's length of message msg_id (every flow alike).
    uint64_t generator_length(uint32_t msg_id) const { return nsizes ? sizes[msg_id % nsizes] : msg_size; }
};

// Shared by every lcore of the run: the configuration and the control
// plane's switches, each a single atomic store.
// The engine's switches (phase, rx burst) and the daemon's own.
struct Plane : engine::Switches {
    DataPlaneConfig cfg;
    std::atomic<int> gen_on{1};        // generator messages may start; 0 with -i until `start`
    std::atomic<int> tx_paused{0};     // no new message at all (generator or `send`)
    std::atomic<uint8_t> completion{static_cast<uint8_t>(CompletionMode::Message)};

    CompletionMode completion_now() const {
        return static_cast<CompletionMode>(completion.load(std::memory_order_relaxed));
    }
};

struct AppSession;
struct ConsFlow;
struct GenFlow;

// One flow of a session, as the daemon tracks it: the shell's and the
// summary's flow number is its index. Either side or both (loopback).
// The engine's part (RecvPlace: its Receiver, its receive state, a move
// between rx lcores under way; the engine keeps it from install_recv to the
// removal) and the daemon's.
struct FlowCtx : engine::RecvPlace {
    uint32_t index = 0;       // in the registry: `show flow F`, per_flow[F]
    uint16_t gen_id = 0;      // the generator's flow number (its content): the index in its session
    AppSession* send_session = nullptr; // the session its send side belongs to (loopback: both)
    AppSession* recv_session = nullptr;
    AppSession* session = nullptr;      // the one it is shown under (recv: its receiving session)
    uint32_t ring_size = 0;
    uint32_t pkts_per_msg = 0; // the group plan of --msg-size
    uint64_t fixed_len = 0;    // recv: a session of smaller messages (its largest, < --msg-size): every message that size
    // Send side (loopback, send).
    Sender* sender = nullptr;
    SendFlow* send = nullptr;
    uint16_t send_id = 0;
    unsigned send_lcore = 0;
    GenFlow* gen = nullptr;    // the tx lcore's generator state for it
    // Receive side (loopback, recv): receiver, recv, recv_id, recv_lcore (RecvPlace), and
    struct ConsCtx* cons_ctx = nullptr;
    std::unique_ptr<CompletionRing> ring;
    bool ring_gone = false;      // its session ended: the ring went with it
    rte_ring* pkt_cq = nullptr;  // packet mode: per-packet completions
    ConsFlow* cons = nullptr;    // the consumer lcore's state for it
    // Interactive shell (shell.cc), null/0 without it. send_q: `send F SIZE
    // COUNT` requests (SendReq) from the shell thread to the tx lcore (SP/SC);
    // sizes[msg_id mod ring_size]: msg_id << 32 | length of every message the
    // tx lcore started, for the consumer's length check (release/acquire).
    rte_ring* send_q = nullptr;
    uint64_t* sizes = nullptr;
    alignas(64) std::atomic<uint32_t> consumed{0};     // the consumer (or the external one's cursor)
    alignas(64) std::atomic<uint64_t> sends_sent{0};   // tx lcore: shell messages started
    std::atomic<uint64_t> sends_requested{0};          // shell thread: messages asked for with `send`
    // What the data plane reported when it let go of the flow (an ended session).
    uint32_t detach_pending = 0; // removals the lcores have not answered
    FlowAuth recv_auth{{}, kVersion}; // its data's version and tag key (the engine's hand-off table)
    uint64_t cons_completed = 0, cons_verified = 0, cons_errors = 0; // the consumer's, once it let go
    bool detached = false;
    bool forgotten = false; // its session was forgotten: the slot is free (registry.cc)
    Sender::FlowView last_send{};
    uint32_t last_acked = 0, last_released = 0, last_gave_up = 0;
    // Messages per second over the last second, for the shell and telemetry
    // (the control loop's, once a second): sent, and done (send: delivered;
    // otherwise consumed). A starved flow shows as a zero beside its peers.
    std::atomic<double> rate_sent{0}, rate_done{0};
    uint32_t rate_sent_seen = 0, rate_done_seen = 0; // the cursors a second ago (control loop)
    // Its latency samples: the consumer's completion latency, or in send
    // mode the delivery latency (submit to the peer's release). One writer
    // (that lcore), read once the lcores stopped.
    alignas(64) FlowLatency lat;
};

// One `send` request: COUNT messages of SIZE bytes (shell -> tx lcore).
inline uint64_t send_req(uint32_t size, uint32_t count) { return uint64_t(size) << 32 | count; }

// The length the consumer expects for msg_id of flow f.
inline uint64_t expected_length(const FlowCtx& f, uint32_t msg_id, uint64_t def) {
    if (f.fixed_len != 0)
        return f.fixed_len;
    if (f.sizes == nullptr)
        return def;
    const uint64_t e = __atomic_load_n(&f.sizes[msg_id & (f.ring_size - 1)], __ATOMIC_ACQUIRE);
    return static_cast<uint32_t>(e >> 32) == msg_id ? (e & 0xFFFFFFFFu) : ~uint64_t(0);
}

// --- tx role ------------------------------------------------------------------

struct TxCtx;

// The generator's message buffers on one tx lcore: a LIFO stack, so the
// buffer a message takes is the one the last delivered message left, still
// in cache. Each carries an rte_mbuf_ext_shared_info whose only reference is
// the Sender's hold (copy mode): when the message is done, its free_cb runs
// on this lcore and puts the buffer back.
struct GenBuf {
    rte_mbuf_ext_shared_info shinfo;
    uint8_t* data;
    GenBuf* next;
    TxCtx* owner;
};

// The generator's state for one flow (the Sender's per-flow user pointer).
struct GenFlow {
    FlowCtx* f = nullptr;
    TxCtx* c = nullptr;
    uint8_t* fixed = nullptr;  // --payload fixed: message 0's bytes, written once
    uint8_t* scratch = nullptr; // --flow-control off: the one buffer each message is generated into
    uint32_t gen_sent = 0;     // generator messages started (the --messages quota)
    uint64_t next_start = 0;   // --rate: TSC before which no generator message starts
    uint32_t send_left = 0;    // of the current `send` request
    uint32_t send_size = 0;
};

// Where a ready-made packet's per-message fields are: found once at set-up,
// for replay_run's loop, which reads no mbuf field.
struct ReplayStamp {
    uint8_t* msg_id = nullptr;  // its Header::msg_id
    uint8_t* trailer = nullptr; // the group's LAST: its trailer; null in the others
};

// --replay: ring_size ready-made packet groups of one message per flow (set
// k for msg_id mod ring_size), resent with the header's msg_id and the
// trailer's flag and slot rewritten, once the receiver freed them. Loopback
// only: the credits are the local ring's cursor.
struct ReplayFlow {
    rte_mbuf** pkts = nullptr;            // ring_size sets of plan.pkt_count, the pool's packets in its order
    const ReplayStamp* stamps = nullptr;  // each one's, in the same order
    drivers::ReplayPool* pool = nullptr;  // whose counts say which are free
    GroupPlan plan{};
    const CompletionRing* ring = nullptr; // the receiving side's (this process); null: no credits (--flow-control off)
    uint32_t next_msg = 0;
    uint32_t next_pkt = 0;
    bool active = false;
    // No other lcore of this process receives its packets (every rx lcore
    // is its tx lcore): one-packet messages may be stamped back to back.
    bool own_lcore = false;
};

struct ReplayQueue {
    std::unique_ptr<TxBurst> q;
    std::vector<ReplayFlow> flows;
    uint32_t rr = 0;
};

// The engine's tx role (its Senders, the completion sink; TxRole) and the
// benchmark's parts of a tx lcore: the generator's buffers, --replay.
struct alignas(64) TxCtx : engine::TxRole {
    Plane* plane = nullptr;
    std::vector<ReplayQueue> replay;  // --replay: one per sender's queue
    GenBuf* free_bufs = nullptr;                  // the generator's buffer stack
    uint64_t buf_size = 0;
    // counters
    alignas(64) uint64_t gen_msgs = 0;  // generator messages handed to the Sender
    uint64_t buf_waits = 0;             // a message waited for a buffer
    uint64_t replay_pkts = 0;           // --replay: packets queued
    uint64_t replay_msgs = 0;           // --replay: messages whose every packet was queued
    uint64_t replay_opened = 0;         // --replay: messages begun (bumped before replay_msgs)
    uint64_t late_turn = 0;             // --rate: the step a late message last started in
    // --mode send: each generator message's cookie is its submit TSC, and its
    // delivery (the peer's release, heard in an ACK) a latency sample (the
    // sink gen_delivered, bench/source.h).
    bool delivery_latency = false;
    LatencyHist hist;                   // TSC cycles, submit to delivered
};

// --- consumer role ----------------------------------------------------------------

struct PktSlot { // packet mode: per-packet completions seen for one slot
    uint32_t msg_id;
    uint32_t got;
    uint32_t total; // pkt_count, from the LAST packet's record
    uint32_t bytes;
    uint32_t valid;
    uint64_t rx_tsc; // latest arrival among the message's packets
};

// One flow on a consumer lcore. Its counters are its own (per session sums).
struct ConsFlow {
    FlowCtx* f = nullptr;
    CompletionRing* ring = nullptr;
    rte_ring* pkt_cq = nullptr;
    uint32_t next = 0;        // next msg_id to consume
    PktSlot* slots = nullptr; // packet mode
    // --replay, --payload fixed: every message is message 0's bytes, which
    // the first expect_len of are kept here and compared (generating them
    // again cost the consumer 44 cycles of a 64 B message; see verify()).
    static constexpr uint32_t kExpectMax = 4096; // longer messages are generated again
    uint8_t* expect = nullptr;
    uint32_t expect_len = 0;
    uint64_t completed = 0, verified = 0, verify_errors = 0, bytes = 0;

    ConsFlow() = default;
    ConsFlow(const ConsFlow&) = delete;
    ConsFlow& operator=(const ConsFlow&) = delete;
    ~ConsFlow() {
        rte_free(slots);
        rte_free(expect);
    }
};

struct alignas(64) ConsCtx {
    Plane* plane = nullptr;
    unsigned lcore = 0;
    std::vector<ConsFlow*> flows; // reserved: adding one on the lcore never allocates
    alignas(64) uint64_t completed = 0;
    uint64_t verified = 0;
    uint64_t verify_errors = 0;
    uint64_t bytes = 0;
    LatencyHist hist; // TSC cycles, completion latency
    SlowTrace* trace = nullptr; // --trace-slow-ns: this lcore's (null: off)
};

// --- requests: control plane -> lcore ---------------------------------------------

// The daemon's own requests (engine::Request's application ops): its
// consumer's flows and the replay's.
inline constexpr Request::Op kAddCons = Request::Op::AppFirst;
inline constexpr Request::Op kRemoveCons = Request::Op::App1;
inline constexpr Request::Op kAddReplay = Request::Op::App2;

// Everything one lcore runs: its roles, its request rings, its cycles.
struct alignas(64) LcoreCtx {
    Plane* plane = nullptr;
    unsigned lcore = 0;
    TxCtx* tx = nullptr;
    RxCtx* rx = nullptr;
    ConsCtx* cons = nullptr;
    rte_ring* req = nullptr;  // control plane -> lcore (SP/SC)
    rte_ring* resp = nullptr; // lcore -> control plane (SP/SC)
    LcoreCycles cycles;
    // --idle-sleep-us: after idle_after cycles with nothing to do, sleep
    // idle_sleep_us per idle iteration (0: poll only, the default). Lets a
    // daemon share a CPU with the applications it serves.
    uint64_t idle_after = 0;
    uint32_t idle_sleep_us = 0;
    uint64_t idle_since = 0;
    SlowTrace* trace = nullptr; // --trace-slow-ns (null: off)
    bool any() const { return tx || rx || cons; }
};

// One iteration of each role. Each returns whether it did any work, so an
// idle lcore can rte_pause(). `now` is the lcore's latest TSC reading.
bool tx_step(TxCtx& c, uint64_t now);
bool consume_step(ConsCtx& c);
// Applies the control plane's requests (the engine's, and the daemon's
// own: kAddCons, kRemoveCons, kAddReplay). True when it took any.
bool serve_requests(LcoreCtx& l);
// Runs the roles until Phase::Stop (rte_eal_remote_launch entry point;
// engine::run_lcore).
int lcore_main(void* ctx);

// --trace-slow-ns: the iteration's record, with what each role did in it.
void trace_iteration(LcoreCtx& l, const IterRecord& r);

// One timed iteration of the roles (the engine's loop, lcore_loop.h).
using engine::run_roles_timed;
inline void trace_iteration(LcoreCtx& l, uint64_t start, uint64_t tx_end, uint64_t rx_end, uint64_t end) {
    trace_iteration(l, IterRecord{start, tx_end, rx_end, end});
}

} // namespace tailmark::app
