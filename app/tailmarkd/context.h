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
#include "latency_hist.h"
#include "slow_trace.h"
#include "options.h"
#include "tailmark/completion_ring.h"
#include "tailmark/receiver.h"
#include "tailmark/sender.h"
#include "tailmark/session.h"
#include "tailmark/tx_burst.h"

namespace tailmark::app {

// Objects on a NUMA socket (rte_zmalloc_socket + placement new); set-up only.
template <class T, class... A>
T* socket_new(int socket, A&&... a) {
    void* p = rte_zmalloc_socket("tailmarkd", sizeof(T), alignof(T) < 64 ? 64 : alignof(T), socket);
    return p ? new (p) T(std::forward<A>(a)...) : nullptr;
}
template <class T>
void socket_delete(T* p) {
    if (p) {
        p->~T();
        rte_free(p);
    }
}

// Life cycle of the data plane. Only the control loop moves it forward.
enum class Phase : int {
    Run = 0,   // traffic
    Drain = 1, // no new messages; finish what is in flight
    Stop = 2,  // every loop returns
};

// Counters written by one lcore and read by the control loop.
inline void bump(uint64_t& c, uint64_t n = 1) { __atomic_store_n(&c, c + n, __ATOMIC_RELAXED); }
inline uint64_t peek(const uint64_t& c) { return __atomic_load_n(&c, __ATOMIC_RELAXED); }

inline constexpr uint32_t kMaxBurst = TxMarker::kMaxBurst; // 64

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
struct Plane {
    DataPlaneConfig cfg;
    std::atomic<int> phase{static_cast<int>(Phase::Run)};
    std::atomic<int> gen_on{1};        // generator messages may start; 0 with -i until `start`
    std::atomic<int> tx_paused{0};     // no new message at all (generator or `send`)
    std::atomic<uint32_t> burst{32};   // the shell's `set burst`
    std::atomic<uint8_t> completion{static_cast<uint8_t>(CompletionMode::Message)};

    Phase phase_now() const { return static_cast<Phase>(phase.load(std::memory_order_relaxed)); }
    uint32_t burst_now() const { return burst.load(std::memory_order_relaxed); }
    CompletionMode completion_now() const {
        return static_cast<CompletionMode>(completion.load(std::memory_order_relaxed));
    }
};

struct AppSession;
struct ConsFlow;
struct GenFlow;

// One flow of a session, as the daemon tracks it: the shell's and the
// summary's flow number is its index. Either side or both (loopback).
struct FlowCtx {
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
    // Receive side (loopback, recv).
    Receiver* receiver = nullptr;
    RecvFlow* recv = nullptr;
    uint16_t recv_id = 0;
    unsigned recv_lcore = 0;
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
    // Hand-off steering: a move to another Receiver in progress (to: its
    // index), the arrival lcore seen at the last look, and a removal that
    // waits for the move to end.
    bool moving = false;
    uint8_t move_to = 0;
    uint8_t arrival_seen = 0xFF;
    AppSession* remove_after_move = nullptr;
    uint8_t last_owner = 0xFF, last_arrived = 0xFF; // at removal, for the summary
    FailReason remove_why = FailReason::None;
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

struct alignas(64) TxCtx {
    Plane* plane = nullptr;
    unsigned lcore = 0;
    std::vector<Sender*> senders;     // one per tx queue this lcore owns
    std::vector<ReplayQueue> replay;  // --replay: one per sender's queue
    bool service = false;             // --mode service: completions go to the applications' rings
    GenBuf* free_bufs = nullptr;                  // the generator's buffer stack
    uint64_t buf_size = 0;
    // counters
    alignas(64) uint64_t gen_msgs = 0;  // generator messages handed to the Sender
    uint64_t buf_waits = 0;             // a message waited for a buffer
    uint64_t replay_pkts = 0;           // --replay: packets queued
    uint64_t replay_msgs = 0;           // --replay: messages whose every packet was queued
    uint64_t replay_opened = 0;         // --replay: messages begun (bumped before replay_msgs)
    uint64_t completions = 0;           // Sender completions taken
    uint64_t paced_until = 0;           // the last step sent nothing: its senders' pacers hold them until then (0: none)
    uint64_t turn = 0;                  // the current tx step's TSC
    uint64_t late_turn = 0;             // --rate: the step a late message last started in
    // --mode send: each generator message's cookie is its submit TSC, and its
    // delivery (the peer's release, heard in an ACK) a latency sample.
    bool delivery_latency = false;
    LatencyHist hist;                   // TSC cycles, submit to delivered
};

// --- rx role ------------------------------------------------------------------

inline constexpr uint16_t kNoPort = UINT16_MAX;

struct alignas(64) RxCtx {
    Plane* plane = nullptr;
    unsigned lcore = 0;
    uint16_t port = 0;
    uint16_t queue = 0;
    // --mode service: the in-memory loopback's queue this lcore also polls
    // (sessions between applications of this daemon; kNoPort: none).
    uint16_t local_port = kNoPort;
    uint16_t local_queue = 0;
    Receiver* receiver = nullptr;
    alignas(64) uint64_t pkts_rx = 0;
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

// Applied by the lcore between rounds, answered on its response ring. Remove
// requests that cannot be done yet (a flow with messages still owed) answer
// with ok = false; the control loop asks again.
struct Request {
    enum class Op : uint8_t {
        AddSend, RemoveSend, FailSend, FailLink,
        AddRecv, RemoveRecv,
        MoveRecvOut, MoveRecvIn, // hand-off steering: a flow to the Receiver its frames reach
        AddCons, RemoveCons,
        AddReplay,
    } op;
    bool ok = false;
    FailReason why = FailReason::None;
    uint16_t id = 0;
    uint32_t index = 0;      // the FlowCtx (or replay queue)
    void* engine = nullptr;  // Sender*, Receiver*, ConsCtx*, TxCtx*
    void* obj = nullptr;     // SendFlow*, RecvFlow*, ConsFlow*, SessionLink*, ReplayFlow*
    AppSession* session = nullptr; // whose request it is (the control loop's bookkeeping)
};

// Busy/idle TSC cycles of one lcore's role loop (/tailmark/lcores).
struct alignas(64) LcoreCycles {
    uint64_t busy = 0;
    uint64_t idle = 0;
    // Per role, the iterations it did work in (the benchmark's cycles per
    // packet / per message: each role measured where it is the cost).
    uint64_t tx = 0, rx = 0, cons = 0;
};

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
bool rx_step(RxCtx& c, uint64_t now);
bool consume_step(ConsCtx& c);
// Applies the control plane's requests. True when it took any.
bool serve_requests(LcoreCtx& l);
// Runs the roles until Phase::Stop (rte_eal_remote_launch entry point).
int lcore_main(void* ctx);

// --trace-slow-ns: the iteration's record, with what each role did in it.
void trace_iteration(LcoreCtx& l, const IterRecord& r);

// One timed iteration: prev is the TSC the previous iteration ended at.
// The clock is read after a role that worked, not after an idle one: an
// idle role's poll counts in the next working role's cycles (tens of
// cycles). rdtsc takes about 20 cycles here, and an lcore holding all
// three roles read it six times an iteration, where it now reads it twice
// while only tx works: ready-made packets on net_null 1.11x.
inline void run_roles_timed(LcoreCtx& l, uint64_t& prev) {
    bool work = false;
    bool fresh = false; // t is the TSC as of now: read after the last role, which worked
    uint64_t t = prev;
    LcoreCycles& cy = l.cycles;
    auto timed = [&](bool did, uint64_t& role) {
        fresh = did;
        if (!did)
            return;
        const uint64_t n = rte_rdtsc();
        bump(role, n - t);
        work = true;
        t = n;
    };
    if (l.tx)
        timed(tx_step(*l.tx, t), cy.tx);
    const uint64_t tx_end = t;
    if (l.rx)
        timed(rx_step(*l.rx, t), cy.rx);
    const uint64_t rx_end = t;
    if (l.cons)
        timed(consume_step(*l.cons), cy.cons);
    uint64_t now = fresh ? t : rte_rdtsc();
    if (unlikely(l.trace != nullptr))
        trace_iteration(l, IterRecord{prev, tx_end, rx_end, now});
    if (!work) {
        rte_pause();
        if (l.idle_sleep_us != 0) {
            // Idle for a while, or a pacer holds the tx role for longer than
            // a sleep: nothing is waiting on this lcore (a paced session at
            // 100 Mbit/s leaves a CPU mostly free for its neighbours).
            const uint64_t nap = l.idle_after / 1000 * l.idle_sleep_us; // idle_after is 1 ms
            if (l.idle_since == 0)
                l.idle_since = now;
            if (now - l.idle_since > l.idle_after || (l.tx && l.tx->paced_until > now + 2 * nap)) {
                rte_delay_us_sleep(l.idle_sleep_us);
                now = rte_rdtsc(); // the next iteration's steps take it as their `now`
            }
        }
    } else {
        l.idle_since = 0;
    }
    bump(work ? cy.busy : cy.idle, now - prev);
    prev = now;
}

} // namespace tailmark::app
