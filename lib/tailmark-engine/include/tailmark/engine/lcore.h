// The engine's lcores: the pieces of a poll-mode lcore that every
// application of the protocol library needs, whatever it sends: the data
// plane's switches, the tx role (a tx lcore's Senders), the rx role (a
// queue and its Receiver), and the requests by which the control thread
// installs, removes and moves flows between two rounds of an lcore
// (ip_pipeline's request/response pattern).
//
// Fast path: plain structs and inline functions; no heap allocation, no
// lock, no log, no virtual call. Each per-lcore context is cache-aligned
// and written by its lcore only; the control thread reads its counters with
// relaxed loads (peek).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include <rte_malloc.h>
#include <rte_ring.h>

#include "tailmark/receiver.h"
#include "tailmark/sender.h"
#include "tailmark/tx_burst.h"

namespace tailmark::engine {

// Objects on a NUMA socket (rte_zmalloc_socket + placement new); set-up only.
template <class T, class... A>
T* socket_new(int socket, A&&... a) {
    void* p = rte_zmalloc_socket("tailmark", sizeof(T), alignof(T) < 64 ? 64 : alignof(T), socket);
    return p ? new (p) T(std::forward<A>(a)...) : nullptr;
}
template <class T>
void socket_delete(T* p) {
    if (p) {
        p->~T();
        rte_free(p);
    }
}

// Counters written by one lcore and read by the control thread.
inline void bump(uint64_t& c, uint64_t n = 1) { __atomic_store_n(&c, c + n, __ATOMIC_RELAXED); }
inline uint64_t peek(const uint64_t& c) { return __atomic_load_n(&c, __ATOMIC_RELAXED); }

inline constexpr uint32_t kMaxBurst = TxMarker::kMaxBurst; // 64
inline constexpr uint16_t kNoPort = UINT16_MAX;

// Life cycle of the data plane. Only the control thread moves it forward.
enum class Phase : int {
    Run = 0,   // traffic
    Drain = 1, // no new messages; finish what is in flight
    Stop = 2,  // every loop returns
};

// The switches every lcore reads, each a single atomic store of the
// control thread. An application adds its own by deriving.
struct Switches {
    std::atomic<int> phase{static_cast<int>(Phase::Run)};
    std::atomic<uint32_t> burst{32}; // rx burst (the shell's `set burst`)

    Phase phase_now() const { return static_cast<Phase>(phase.load(std::memory_order_relaxed)); }
    uint32_t burst_now() const { return burst.load(std::memory_order_relaxed); }
};

// --- tx role ------------------------------------------------------------------

// Where a tx lcore's Senders' completions go: called on that lcore once
// per burst a Sender hands over (n >= 1, at most kCompletionBurst), in its
// order, the flows' own user pointers in each. The application installs it,
// as it installs its message source (Sender::set_source). None: they are
// only counted. Fast path: no allocation, lock or log in it either.
using CompletionSink = void (*)(void* ctx, const SendCompletion* done, uint32_t n);
inline constexpr uint32_t kCompletionBurst = 32;

// The Senders a tx lcore owns (one per tx queue), and where their
// completions go. An application's tx context derives from it.
struct TxRole {
    unsigned lcore = 0;
    std::vector<Sender*> senders;  // one per tx queue this lcore owns
    CompletionSink sink = nullptr; // the Senders' completions (null: counted only)
    void* sink_ctx = nullptr;
    void set_sink(CompletionSink fn, void* ctx) {
        sink = fn;
        sink_ctx = ctx;
    }
    alignas(64) uint64_t completions = 0; // Sender completions taken
    uint64_t paced_until = 0; // the last step sent nothing: its senders' pacers hold them until then (0: none)
    uint64_t turn = 0;        // the current tx step's TSC
};

// One round of every Sender of the role: control intake, timers,
// retransmissions, others' control packets, new data; then its completions,
// into the sink. `paced`: the earliest TSC a pacer holds one of them until
// (0: none). True when any worked.
inline bool poll_senders(TxRole& c, uint64_t now, uint64_t& paced) {
    c.turn = now;
    bool work = false;
    paced = 0;
    for (Sender* s : c.senders) {
        work |= s->poll(now);
        const uint64_t p = s->paced_until();
        paced = p != 0 && (paced == 0 || p < paced) ? p : paced;
        SendCompletion done[kCompletionBurst];
        const uint32_t k = s->take_completions(done, kCompletionBurst);
        if (k) {
            bump(c.completions, k);
            if (c.sink != nullptr) // once per burst
                c.sink(c.sink_ctx, done, k);
        }
    }
    return work;
}

// The tx role alone (an application with no tx work of its own): its
// Senders' round, and how long their pacers hold them when none worked.
inline bool tx_step(TxRole& c, uint64_t now) {
    uint64_t paced = 0;
    const bool work = poll_senders(c, now, paced);
    c.paced_until = work ? 0 : paced;
    return work;
}

// --- rx role ------------------------------------------------------------------

// One rx queue and its Receiver, and optionally a second queue the same
// Receiver places from (the in-memory loopback between applications of one
// process; kNoPort: none).
struct alignas(64) RxCtx {
    const Switches* plane = nullptr;
    unsigned lcore = 0;
    uint16_t port = 0;
    uint16_t queue = 0;
    uint16_t local_port = kNoPort;
    uint16_t local_queue = 0;
    // Rails beyond the first (session_link.h): their ports' queue `queue`,
    // placed by the same Receiver (a session's packets come by any rail).
    uint16_t rail_ports[kMaxRails - 1]{};
    uint8_t rails = 0;
    Receiver* receiver = nullptr;
    uint64_t drained = 0; // the TSC of the last port rx burst that left the queue empty
    uint64_t away = 0;    // cycles between such bursts that mean the lcore was away (kAwayUs)
    int rx_tsc_field = -1; // the rx callback's stamp (drivers/rx_timestamp.h); -1: none, the poll's TSC
    alignas(64) uint64_t pkts_rx = 0;
};

// rx burst, Receiver::rx_burst (validates, places, completes, frees data;
// routes ACK/NACK, SESSION and ARP frames), then Receiver::poll (NACKs what
// is missing, ACKs what moved). True when any frame came. (rx_role.cc)
bool rx_step(RxCtx& c, uint64_t now);

// --- requests: control thread -> lcore ----------------------------------------

// Applied by the lcore between rounds, answered on its response ring.
// Remove requests that cannot be done yet (a flow with messages still owed)
// answer with ok = false; the control thread asks again. Ops from AppFirst
// up are the application's own (its roles'), applied by its handler.
struct Request {
    enum class Op : uint8_t {
        AddSend, RemoveSend, FailSend, FailLink,
        AddRecv, RemoveRecv,
        MoveRecvOut, MoveRecvIn, // a flow to the Receiver its frames reach
        AppFirst = 32, // the application's: AppFirst + 0..7
        App1, App2, App3, App4, App5, App6, App7,
    } op;
    bool ok = false;
    FailReason why = FailReason::None;
    uint16_t id = 0;
    uint32_t index = 0;     // the application's flow (or role queue)
    void* engine = nullptr; // Sender*, Receiver*, or the application role's
    void* obj = nullptr;    // SendFlow*, RecvFlow*, SessionLink*, or the application's
    void* session = nullptr; // whose request it is (the control thread's bookkeeping)
};
static_assert(sizeof(Request) % 4 == 0);

// An engine op (below AppFirst) applied: r.ok and r.obj set. (requests.cc)
void apply_engine_request(Request& r);

// The requests waiting on `req`, each applied and answered on `resp`
// (which holds as many: never full); the application's ops go to app(r).
// Out of line: the lcore loop keeps only the emptiness check.
template <class AppOps>
[[gnu::noinline, gnu::cold]] bool serve_waiting_requests(rte_ring* req, rte_ring* resp, AppOps& app) {
    Request r;
    while (rte_ring_sc_dequeue_elem(req, &r, sizeof(r)) == 0) {
        if (r.op < Request::Op::AppFirst)
            apply_engine_request(r);
        else
            app(r);
        rte_ring_sp_enqueue_elem(resp, &r, sizeof(r));
    }
    return true;
}

// Applies the control thread's requests on `req`, if any (rarely). True
// when it took any.
template <class AppOps>
inline bool serve_requests(rte_ring* req, rte_ring* resp, AppOps&& app) {
    if (__builtin_expect(rte_ring_empty(req), 1))
        return false;
    return serve_waiting_requests(req, resp, app);
}

// Busy/idle TSC cycles of one lcore's role loop.
struct alignas(64) LcoreCycles {
    uint64_t busy = 0;
    uint64_t idle = 0;
    // Per role, the iterations it did work in (the benchmark's cycles per
    // packet / per message: each role measured where it is the cost).
    uint64_t tx = 0, rx = 0, cons = 0;
};

} // namespace tailmark::engine
