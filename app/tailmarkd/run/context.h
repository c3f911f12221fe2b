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

#include <cstdint>

#include <rte_lcore.h>
#include <rte_ring.h>

#include "bench/roles.h"
#include "bench/slow_trace.h"
#include "flow_ctx.h"
#include "tailmark/engine/lcore.h"
#include "tailmark/engine/lcore_loop.h"

namespace tailmark::app {

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
    // --idle-sleep-us: after idle_spin cycles with nothing to do
    // (--idle-spin-us), sleep idle_sleep_us per idle iteration (0: poll
    // only, the default). Lets a daemon share a CPU with the applications
    // it serves. idle_after: 1 ms of cycles.
    uint64_t idle_after = 0;
    uint64_t idle_spin = 0;
    uint32_t idle_sleep_us = 0;
    uint64_t idle_since = 0;
    SlowTrace* trace = nullptr; // --trace-slow-ns (null: off)
    bool any() const { return tx || rx || cons; }
};

// One iteration of each role. Each returns whether it did any work, so an
// idle lcore can rte_pause(). `now` is the lcore's latest TSC reading.
bool tx_step(TxCtx& c, uint64_t now);
bool consume_step(ConsCtx& c);
// Applies the control plane's requests (the engine's, and the benchmark's
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
