// The benchmark's parts of the daemon's lcores: the generator's buffers and
// per-flow state, --replay's ready-made packets, the tx role that carries
// them (TxCtx, the engine's TxRole with the benchmark's counters), and the
// verifying consumer's role (ConsCtx). The service's lcores use TxCtx as a
// plain TxRole. The code that runs them: source.cc, replay.h, consumer.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "bench/latency_hist.h"
#include "bench/slow_trace.h"
#include "drivers/replay_pool.h"
#include "run/flow_ctx.h"
#include "tailmark/tx_burst.h"

namespace tailmark::app {

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

// --- the benchmark's requests to its lcores (lcore_ops.cc) ------------------------

// engine::Request's application ops: a flow's consumer added or taken
// back, a flow's ready-made packets added; anything else refused.
inline constexpr Request::Op kAddCons = Request::Op::AppFirst;
inline constexpr Request::Op kRemoveCons = Request::Op::App1;
inline constexpr Request::Op kAddReplay = Request::Op::App2;
void apply_bench_op(Request& r);

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

} // namespace tailmark::app
