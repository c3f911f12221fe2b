// The daemon's records and the switches its lcores read: what the control
// loop, the shell, telemetry, the service and the benchmark share about a
// flow (FlowCtx) and a session (AppSession), the run's configuration and
// switches (Plane), each a single atomic store from the control plane, and
// how a set-up step says it failed (SetupError).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <ranges>
#include <string>

#include "bench/latency_hist.h"
#include "options/options.h"
#include "tailmark/completion_ring.h"
#include "tailmark/engine/lcore.h"
#include "tailmark/engine/rx_moves.h"
#include "tailmark/engine/sessions.h"
#include "tailmark/receiver.h"
#include "tailmark/sender.h"
#include "tailmark/session.h"

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
    // The payload of a flow's first n messages: message i has the i-th size
    // of the list, in turn (not the largest times the count).
    uint64_t bytes_of(uint32_t n) const {
        if (nsizes == 0)
            return uint64_t(n) * msg_size;
        uint64_t cycle = 0;
        for (uint32_t k = 0; k < nsizes; k++)
            cycle += sizes[k];
        uint64_t b = uint64_t(n / nsizes) * cycle;
        for (uint32_t k = 0; k < n % nsizes; k++)
            b += sizes[k];
        return b;
    }
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

struct ConsFlow;
struct GenFlow;

// One flow of a session, as the daemon tracks it: the shell's and the
// summary's flow number is its index. The library's part (SessionFlow: its
// halves, where the engine keeps its receive half, its end) and the
// daemon's: the generator's and the consumer's state, the shell's, its
// rates and latency.
struct FlowCtx : engine::SessionFlow {
    uint16_t gen_id = 0;      // the generator's flow number (its content): the index in its session
    uint32_t pkts_per_msg = 0; // the group plan of --msg-size
    uint64_t fixed_len = 0;    // recv: a session of smaller messages (its largest, < --msg-size): every message that size
    GenFlow* gen = nullptr;    // the tx lcore's generator state for it
    struct ConsCtx* cons_ctx = nullptr;
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
    uint64_t cons_completed = 0, cons_verified = 0, cons_errors = 0; // the consumer's, once it let go
    // Its latency samples: the consumer's completion latency, or in send
    // mode the delivery latency (submit to the peer's release). One writer
    // (that lcore), read once the lcores stopped.
    alignas(64) FlowLatency lat;
};

struct SetupError {
    int exit_code = 0; // 2: bad configuration, 1: run-time failure
    std::string message;
};

// A session as the daemon tracks it (the control loop's only): the
// library's record (SessionRec; `user` is the service's session) and the
// daemon's. Its flows are FlowCtx.
struct AppSession : engine::SessionRec {
    bool complete = false;       // recv: every flow consumed --messages

    // The daemon's record of a session of the table, as it comes up.
    static std::unique_ptr<AppSession> of(Session& s, bool connector) {
        auto a = std::make_unique<AppSession>();
        a->take(s, connector);
        return a;
    }
    FlowCtx& flow(size_t i) const { return *static_cast<FlowCtx*>(flows[i]); }
    // Its flows as the daemon's records.
    auto ctxs() const {
        return std::views::transform(flows, [](engine::SessionFlow* f) { return static_cast<FlowCtx*>(f); });
    }
};

inline AppSession& app_of(engine::SessionRec& a) { return static_cast<AppSession&>(a); }
inline const AppSession& app_of(const engine::SessionRec& a) { return static_cast<const AppSession&>(a); }
inline FlowCtx& ctx_of(engine::SessionFlow& f) { return static_cast<FlowCtx&>(f); }
inline const FlowCtx& ctx_of(const engine::SessionFlow& f) { return static_cast<const FlowCtx&>(f); }

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

} // namespace tailmark::app
