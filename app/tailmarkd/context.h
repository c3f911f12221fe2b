// Run-time state shared by the lcore roles and the control loop.
//
// Ownership: every per-lcore context (TxCtx, RxCtx, ConsCtx) is cache-aligned
// and written by its lcore only; the control loop (main lcore) reads its
// counters with relaxed atomic loads. Cross-lcore values of a flow live in
// FlowCtx, each on its own cache line, written by exactly one role:
//   sent       - the flow's tx lcore        (messages fully handed to tx)
//   consumed   - the flow's consumer lcore  (== the ring's released cursor)
//   credit     - send mode: the rx lcores   (released_upto from ACKs)
//   final_acks - recv mode: the tx lcore    (ACKs carrying the final cursor)
//   acked, epoch, last_ctl - send mode: the rx lcores (control packets)
//   failed     - the tx lcore (retry limit) or an rx lcore (receiver restart)
#pragma once

#include <atomic>
#include <cstdint>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_timer.h>

#include "latency_hist.h"
#include "options.h"
#include "tailmark/completion_ring.h"
#include "tailmark/control.h"
#include "tailmark/drop_reason.h"
#include "tailmark/packet_parser.h"
#include "tailmark/rx_placer.h"
#include "tailmark/tx_marker.h"

namespace tailmark::app {

// Life cycle of the data plane. Only the control loop moves it forward; the
// signal handler only counts quit requests (see signals.h).
enum class Phase : int {
    Run = 0,   // traffic
    Drain = 1, // no new messages; finish what is in flight
    Stop = 2,  // every loop returns
};
extern std::atomic<int> g_phase;
inline Phase phase() { return static_cast<Phase>(g_phase.load(std::memory_order_relaxed)); }

// Counters written by one lcore and read by the control loop.
inline void bump(uint64_t& c, uint64_t n = 1) { __atomic_store_n(&c, c + n, __ATOMIC_RELAXED); }
inline uint64_t peek(const uint64_t& c) { return __atomic_load_n(&c, __ATOMIC_RELAXED); }

inline constexpr uint32_t kMaxBurst = TxMarker::kMaxBurst; // 64

// Why a flow was given up. Its messages not released by then are reported
// failed: never a hang, never a silent drop.
enum class FlowFailure : uint32_t {
    None = 0,
    RetryLimit = 1,        // --retry-limit retransmission timeouts without progress
    ReceiverRestarted = 2, // a control packet with a new epoch
};
const char* to_string(FlowFailure f);

struct TxFlowState;

struct FlowCtx {
    uint16_t id = 0;
    uint32_t key = 0;
    uint32_t ring_size = 0;
    uint32_t pkts_per_msg = 0;  // the group plan's pkt_count for --msg-size
    uint16_t rx_owner = 0;      // index of the rx lcore that places this flow
    uint16_t txq = 0;           // tx queue this flow is sent on
    TxFlow tx{};                // L2-L4 template: data (loopback, send) or ACKs (recv)
    CompletionRing* ring = nullptr;   // loopback, recv
    rte_ring* pkt_cq = nullptr;       // packet mode: per-packet completions
    RxPlacer* placer = nullptr;       // loopback, recv: the placer that owns the flow
    rte_ring* nack_q = nullptr;       // retransmission requests (Nack) to the flow's tx lcore
    TxFlowState* txs = nullptr;       // the flow's sender state (loopback, send)

    alignas(64) std::atomic<uint32_t> credit{0};
    std::atomic<uint32_t> peer_seen{0};
    std::atomic<uint32_t> acked{0};      // send: cumulative ACK from the receiver
    std::atomic<uint32_t> epoch{0};      // send: the receiver's incarnation
    std::atomic<uint64_t> last_ctl{0};   // send: TSC of its latest valid control packet
    std::atomic<uint32_t> failed{0};     // FlowFailure
    alignas(64) std::atomic<uint32_t> sent{0};
    alignas(64) std::atomic<uint32_t> consumed{0};
    alignas(64) std::atomic<uint32_t> final_acks{0};
    // Interactive shell (shell.cc), null/0 without it. send_q: `send F SIZE
    // COUNT` requests (SendReq) from the shell thread to the tx lcore (SP/SC);
    // sizes[msg_id mod ring_size]: msg_id << 32 | length of every message the
    // tx lcore started, for the consumer's length check (release/acquire).
    rte_ring* send_q = nullptr;
    uint64_t* sizes = nullptr;
    alignas(64) std::atomic<uint64_t> sends_sent{0}; // tx lcore: shell messages fully sent
    std::atomic<uint64_t> sends_requested{0};        // shell thread: messages asked for with `send`
};

// One `send` request: COUNT messages of SIZE bytes (shell -> tx lcore).
inline uint64_t send_req(uint32_t size, uint32_t count) { return uint64_t(size) << 32 | count; }

// Generator control (the shell's start/stop; single atomic stores, read by the tx lcores).
//   g_gen_on:    generator messages (--messages per flow) may start; 0 with -i until `start`
//   g_tx_paused: no new message at all (generator or `send`); in-flight ones finish
inline std::atomic<int> g_gen_on{1};
inline std::atomic<int> g_tx_paused{0};

// The length the consumer expects for msg_id of flow f.
inline uint64_t expected_length(const FlowCtx& f, uint32_t msg_id, uint64_t def) {
    if (f.sizes == nullptr)
        return def;
    const uint64_t e = __atomic_load_n(&f.sizes[msg_id & (f.ring_size - 1)], __ATOMIC_ACQUIRE);
    return static_cast<uint32_t>(e >> 32) == msg_id ? (e & 0xFFFFFFFFu) : ~uint64_t(0);
}

// --- tx role -----------------------------------------------------------------

// What the sender keeps of a message until the receiver acknowledged it: the
// bytes are the generator's (regenerated for a retransmission), the rest is
// what the LAST packet's trailer needs.
struct OutMsg {
    uint32_t msg_id;
    uint32_t len;
    uint32_t crc32c;
    uint32_t pkt_count;
    uint64_t sent_tsc; // its last packet was built
};

struct TxCtx;
struct TxQueueCtx;

struct TxFlowState {
    FlowCtx* f = nullptr;
    TxCtx* c = nullptr;
    TxQueueCtx* q = nullptr;
    OutMsg* out = nullptr;  // ring_size records, msg_id mod ring_size
    // Retransmission timer (rte_timer, on the tx lcore): armed while a sent
    // message is not acknowledged (or not released, send mode). Lazy: it is
    // not reset per ACK; when it fires it first checks for progress.
    rte_timer timer;
    bool timer_on = false;
    uint32_t seen_acked = 0;    // acked / released when the timer was (re)armed
    uint32_t seen_released = 0;
    uint64_t rto = 0;           // current timeout, cycles (doubles per expiry)
    uint64_t deadline = 0;      // when the timer is due
    uint32_t retries = 0;       // expiries in a row without progress
    uint64_t retx_pkts = 0;     // this flow's packets retransmitted (the shell's `show flow`)
    // --replay: ring_size ready-made packet groups of one message (set k for
    // msg_id mod ring_size), resent with the header's msg_id and the trailer's
    // flag and slot rewritten; reused once the receiver freed them.
    rte_mbuf** replay = nullptr;
    GroupPlan replay_plan{};
    uint8_t* buf = nullptr; // the message being sent (data modes)
    uint32_t next_msg = 0;
    uint32_t next_pkt = 0;
    bool active = false;
    TxMessage msg;
    uint32_t gen_sent = 0;  // generator messages started (the --messages quota)
    uint64_t next_start = 0; // --rate: TSC before which no generator message starts
    uint32_t send_left = 0; // of the current `send` request
    uint32_t send_size = 0;
    bool cur_send = false;  // the active message came from `send`
    uint32_t acked = 0;   // recv mode: released_upto of the last ACK sent
    uint32_t ack_cum = 0; // recv mode: acked_upto of the last ACK sent
    uint64_t ack_tsc = 0; // recv mode: when it was sent
};

struct TxQueueCtx {
    uint16_t queue = 0;
    uint32_t nflows = 0;
    TxFlowState* flows = nullptr;
    uint32_t rr = 0;
    uint64_t turn_bytes = 0; // payload the flow at rr sent in its current turn
    // Built but not yet accepted by the PMD: retried on later iterations
    // (an lcore that also polls rx drains a loopback ring in between),
    // dropped after kTxStallUs without progress.
    rte_mbuf* pend[kMaxBurst];
    uint32_t npend = 0;
    uint32_t pos = 0;
    uint64_t stall_since = 0;
    // Retransmission requests for this queue's flows (MP/SC): data modes
    // retransmit them, recv mode sends them as NACKs.
    rte_ring* nack_q = nullptr;
    Nack job{};          // the request being served
    bool job_on = false;
    uint32_t job_r = 0;  // its current range
    uint32_t job_pos = 0, job_end = 0; // packets [job_pos, job_end) of that range still to send
    TxMessage job_msg;
    // A retransmission needs the message's bytes again: the generator
    // rewrites them here (one message of the largest size).
    uint8_t* scratch = nullptr;
    uint16_t scratch_flow = 0;
    uint32_t scratch_msg = 0;
    uint32_t scratch_len = UINT32_MAX; // nothing in it
    // Messages up to --tx-quantum go out whole within their flow's turn, so
    // one buffer serves every flow of the queue: it stays in cache, where
    // per-flow buffers would be as many cold lines as flows.
    uint8_t* turn_buf = nullptr;
};

struct alignas(64) TxCtx {
    unsigned lcore = 0;
    uint16_t port = 0;
    rte_mempool* pool = nullptr;
    TxMarker marker;
    uint32_t nqueues = 0;
    TxQueueCtx* queues = nullptr;
    uint32_t active = 0; // messages in progress
    // counters
    alignas(64) uint64_t msgs_sent = 0;
    uint64_t pkts_tx = 0;
    uint64_t bytes_tx = 0;    // message payload bytes of the messages sent
    uint64_t tx_dropped = 0;  // packets freed after a stalled partial burst
    uint64_t alloc_fail = 0;  // bursts postponed: mbuf pool empty
    uint64_t acks_tx = 0;
    uint64_t nacks_tx = 0;    // recv: NACK packets built
    uint64_t retx_pkts = 0;   // data packets retransmitted (flag RETX)
    uint64_t retx_reqs = 0;   // retransmission requests served (NACKs and probes)
    uint64_t probes = 0;      // LAST packets re-sent by the timer
    uint64_t rto_expired = 0; // timer expiries without progress
    uint64_t stale_reqs = 0;  // requests for a message no longer owed (ignored)
    uint32_t busy = 0;        // messages in progress or packets pending (control reads)

    TxCtx(rte_mempool* p) : pool(p), marker(p, PayloadMode::Copy) {}
};

// --- rx role -----------------------------------------------------------------

struct alignas(64) RxCtx {
    unsigned lcore = 0;
    uint16_t port = 0;
    uint16_t queue = 0;
    uint16_t index = 0;      // rx lcore index == rx queue
    RxPlacer* placer = nullptr; // loopback, recv
    ParserConfig pcfg{};        // send mode (ACK reception)
    alignas(64) uint64_t pkts_rx = 0;
    uint64_t acks_rx = 0;
    uint64_t nacks_rx = 0;     // send: NACK packets accepted
    DropCounters drops{};       // send mode; the placer counts its own
};

// --- consumer role -----------------------------------------------------------

struct PktSlot { // packet mode: per-packet completions seen for one slot
    uint32_t msg_id;
    uint32_t got;
    uint32_t total; // pkt_count, from the LAST packet's record
    uint32_t bytes;
    uint32_t valid;
    uint64_t rx_tsc; // latest arrival among the message's packets
};

struct ConsFlowState {
    FlowCtx* f = nullptr;
    uint32_t next = 0;        // next msg_id to consume
    PktSlot* slots = nullptr; // packet mode
};

struct alignas(64) ConsCtx {
    unsigned lcore = 0;
    uint32_t nflows = 0;
    ConsFlowState* flows = nullptr;
    alignas(64) uint64_t completed = 0;
    uint64_t verified = 0;
    uint64_t verify_errors = 0;
    uint64_t bytes = 0;
    LatencyHist hist; // TSC cycles, completion latency
};

// Roles of one lcore (run to completion: tx, then rx, then consume).
struct LcoreRoles {
    TxCtx* tx = nullptr;
    RxCtx* rx = nullptr;
    ConsCtx* cons = nullptr;
    bool any() const { return tx || rx || cons; }
};

// Read-only after set-up; the role steps read it.
struct DataPlaneConfig {
    Mode mode = Mode::Loopback;
    CompletionMode completion = CompletionMode::Message;
    uint64_t msg_size = 0;
    uint64_t messages = 0;
    uint32_t ring_size = 0;
    uint32_t burst = 32;
    uint64_t tx_quantum = 0;         // --tx-quantum: payload bytes per flow per round-robin turn
    bool flow_control = true;
    FlowCtx* flows = nullptr;
    uint32_t nflows = 0;
    uint64_t stall_cycles = 0;       // tx: give up a stalled partial burst
    uint64_t ack_min_cycles = 0;     // recv: ACK an advanced cursor at least this often
    uint64_t ack_keepalive_cycles = 0;
    uint32_t ack_batch = 1;          // recv: ACK at once after this many releases
    uint32_t epoch = 1;              // recv: this receiver's incarnation (ACK body)
    uint64_t rto_cycles = 0;         // first retransmission timeout
    uint64_t rto_max_cycles = 0;     // back-off cap
    uint32_t retry_limit = 0;        // expiries without progress before a flow fails
    const uint64_t* sizes = nullptr; // --msg-size list: message i of a flow has sizes[i % nsizes]
    uint32_t nsizes = 0;
    uint64_t pace_cycles = 0;        // --rate: cycles between two generator messages of one flow (0: no pacing)
    bool replay = false;             // --replay: tx resends ready-made packets (rx benchmarks)
    bool fixed_payload = false;      // --payload fixed: message 0's bytes in every message (tx benchmarks)
    bool verify = true;              // the consumer compares every byte with the generator's
};
extern DataPlaneConfig g_dp;

// The receiver's cumulative ACK and consumer cursor as this process knows
// them: its own placer and ring (loopback, recv), or the last ACK (send).
inline uint32_t acked_of(const FlowCtx& f) {
    if (g_dp.mode == Mode::Send)
        return f.acked.load(std::memory_order_acquire);
    return f.placer ? f.placer->acked_upto(f.id) : 0;
}
inline uint32_t released_of(const FlowCtx& f) {
    if (g_dp.mode == Mode::Send)
        return f.credit.load(std::memory_order_acquire);
    return f.ring ? f.ring->released() : 0;
}
inline bool failed(const FlowCtx& f) { return f.failed.load(std::memory_order_acquire) != 0; }
// Gives the flow up; the first reason stays. What its receiver had not
// released is reported failed (control loop, summary), nothing more is sent.
inline void fail(FlowCtx& f, FlowFailure why) {
    uint32_t none = 0;
    f.failed.compare_exchange_strong(none, static_cast<uint32_t>(why), std::memory_order_acq_rel);
}
// The generator's length of message msg_id (every flow alike).
inline uint64_t generator_length(uint32_t msg_id) {
    return g_dp.nsizes ? g_dp.sizes[msg_id % g_dp.nsizes] : g_dp.msg_size;
}
// Burst size: the shell's `set burst` changes it at run time (relaxed atomic).
inline uint32_t dp_burst() { return __atomic_load_n(&g_dp.burst, __ATOMIC_RELAXED); }
// Completion mode: the shell's `set completion` changes it with nothing in flight.
inline CompletionMode dp_completion() {
    return static_cast<CompletionMode>(
        __atomic_load_n(reinterpret_cast<const uint8_t*>(&g_dp.completion), __ATOMIC_RELAXED));
}

// One iteration of each role. Each returns whether it did any work, so an
// idle lcore can rte_pause() and leave its sibling hyperthread the core.
bool tx_step(TxCtx& c);
bool rx_step(RxCtx& c);
bool consume_step(ConsCtx& c);
// All roles of one lcore, once.
inline bool run_roles(const LcoreRoles& r) {
    bool work = false;
    if (r.tx)
        work |= tx_step(*r.tx);
    if (r.rx)
        work |= rx_step(*r.rx);
    if (r.cons)
        work |= consume_step(*r.cons);
    return work;
}
// Runs the roles until Phase::Stop (rte_eal_remote_launch entry point).
int lcore_main(void* roles);

// Busy/idle TSC cycles of one lcore's role loop (/tailmark/lcores): one rdtsc
// per iteration, the delta charged to busy when the roles did work, else to
// idle (the rte_pause included). Written by that lcore only.
struct alignas(64) LcoreCycles {
    uint64_t busy = 0;
    uint64_t idle = 0;
    // Per role, the iterations it did work in (the benchmark's cycles per
    // packet / per message: each role measured where it is the cost).
    uint64_t tx = 0, rx = 0, cons = 0;
};
extern LcoreCycles g_lcore_cycles[RTE_MAX_LCORE]; // telemetry.cc
// One timed iteration: prev is the TSC the previous iteration ended at.
inline void run_roles_timed(const LcoreRoles& r, LcoreCycles& cy, uint64_t& prev) {
    bool work = false;
    uint64_t t = prev;
    auto timed = [&](bool did, uint64_t& role) {
        const uint64_t n = rte_rdtsc();
        if (did)
            bump(role, n - t);
        work |= did;
        t = n;
    };
    if (r.tx)
        timed(tx_step(*r.tx), cy.tx);
    if (r.rx)
        timed(rx_step(*r.rx), cy.rx);
    if (r.cons)
        timed(consume_step(*r.cons), cy.cons);
    if (!work)
        rte_pause();
    const uint64_t now = rte_rdtsc();
    bump(work ? cy.busy : cy.idle, now - prev);
    prev = now;
}

} // namespace tailmark::app
