// The lcore loop: run to completion. One iteration applies the control
// thread's requests (rarely any), then runs each role the lcore holds once
// (tx, then rx, then consume), so one lcore may hold them all; dedicated
// lcores scale on bigger machines. Every iteration checks the phase, so
// Phase::Stop ends every loop within one burst.
//
// An application's lcore context L has:
//   plane                  a pointer to the Switches (or a type derived from it)
//   req, resp              its request and response rings
//   tx, rx, cons           pointers to its roles (null: not this lcore's);
//                          tx derives from TxRole (paced_until)
//   cycles                 LcoreCycles
//   idle_after, idle_sleep_us, idle_since   idle sleep (0 us: poll only)
//   trace                  a pointer, null when the iteration is not traced
// and these, found by argument-dependent lookup (the roles' namespaces):
//   bool tx_step(Tx&, uint64_t now), bool rx_step(Rx&, uint64_t now)
//   (engine::RxCtx's is the engine's), bool consume_step(Cons&),
//   void trace_iteration(L&, uint64_t start, uint64_t tx_end, uint64_t rx_end, uint64_t end).
// Templates, so the roles are called directly (inlined where they can be):
// no indirection per iteration.
#pragma once

#include <algorithm>
#include <cstdint>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_pause.h>

#include "tailmark/engine/lcore.h"

namespace tailmark::engine {

// How long an idle lcore naps: idle_sleep_us, and once it has been idle
// for longer, an eighth of that time, up to kMaxIdleNapUs, and never past
// half of what a pacer still holds its tx role for (pace_cycles, 0: none).
// Each wake-up takes a CPU from whatever runs there (on 2 vCPUs shared with
// 4 training ranks, naps of 50 us cost gloo's own run 5-14% of its
// tokens/s, naps of 250 us next to nothing), while the delay a nap adds to
// the next message stays under an eighth of the quiet before it; the cap
// keeps a burst that comes after a long quiet within the rx ring (250 us at
// 10 Gbit/s of 1500-byte frames: 208 of them).
inline constexpr uint32_t kMaxIdleNapUs = 250;
inline uint32_t idle_nap_us(uint32_t idle_sleep_us, uint64_t idle_cycles, uint64_t cycles_per_ms,
                            uint64_t pace_cycles = 0) {
    if (idle_sleep_us >= kMaxIdleNapUs || cycles_per_ms == 0)
        return idle_sleep_us;
    uint64_t us = std::min<uint64_t>(idle_cycles * 1000 / cycles_per_ms / 8, kMaxIdleNapUs);
    if (pace_cycles != 0)
        us = std::min<uint64_t>(us, pace_cycles * 500 / cycles_per_ms);
    return static_cast<uint32_t>(std::max<uint64_t>(us, idle_sleep_us));
}

// Whether an lcore idle for `idle` cycles naps now: once idle longer than
// `spin` (--idle-spin-us), or while a pacer holds its tx role for longer
// than two naps (`paced_wait`): nothing is waiting on this lcore.
inline bool nap_due(uint64_t idle, uint64_t spin, uint64_t paced_wait, uint64_t nap) {
    return idle > spin || paced_wait > 2 * nap;
}

// One timed iteration: prev is the TSC the previous iteration ended at.
// The clock is read after a role that worked, not after an idle one: an
// idle role's poll counts in the next working role's cycles (tens of
// cycles). rdtsc takes about 20 cycles here, and an lcore holding all
// three roles read it six times an iteration, where it now reads it twice
// while only tx works: ready-made packets on net_null 1.11x.
template <class L>
inline void run_roles_timed(L& l, uint64_t& prev) {
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
        trace_iteration(l, prev, tx_end, rx_end, now);
    if (!work) {
        rte_pause();
        if (l.idle_sleep_us != 0) {
            // Idle for a while, or a pacer holds the tx role for longer than
            // a sleep: nothing is waiting on this lcore (a paced session at
            // 100 Mbit/s leaves a CPU mostly free for its neighbours).
            const uint64_t nap = l.idle_after / 1000 * l.idle_sleep_us; // idle_after is 1 ms
            if (l.idle_since == 0)
                l.idle_since = now;
            const uint64_t idle = now - l.idle_since;
            const uint64_t pace = l.tx && l.tx->paced_until > now ? l.tx->paced_until - now : 0;
            if (nap_due(idle, l.idle_spin, pace, nap)) {
                rte_delay_us_sleep(idle_nap_us(l.idle_sleep_us, idle, l.idle_after, pace));
                now = rte_rdtsc(); // the next iteration's steps take it as their `now`
            }
        }
    } else {
        l.idle_since = 0;
    }
    bump(work ? cy.busy : cy.idle, now - prev);
    prev = now;
}

// Runs l's roles until Phase::Stop, applying the requests between rounds
// (the application's ops to app(Request&)).
template <class L, class AppOps>
inline int run_lcore(L& l, AppOps&& app) {
    uint64_t prev = rte_rdtsc();
    while (l.plane->phase_now() != Phase::Stop) {
        serve_requests(l.req, l.resp, app);
        run_roles_timed(l, prev);
    }
    return 0;
}

// The main lcore: its own roles where it holds any, the requests between
// rounds, and the application's control round `control(now)` every
// `period` cycles, until Phase::Stop. Without roles it sleeps `idle_us`
// between rounds: the control thread then needs no CPU of its own.
template <class L, class AppOps, class Control>
inline void run_main_lcore(L& l, AppOps&& app, uint64_t period, uint32_t idle_us, Control&& control) {
    uint64_t next = 0;
    uint64_t prev = rte_rdtsc();
    while (l.plane->phase_now() != Phase::Stop) {
        serve_requests(l.req, l.resp, app);
        const bool roles = l.tx || l.rx || l.cons;
        if (roles)
            run_roles_timed(l, prev); // prev: the TSC it ended at
        else
            rte_delay_us_sleep(idle_us);
        const uint64_t now = roles ? prev : rte_rdtsc();
        if (now >= next) {
            control(now);
            next = now + period;
        }
    }
}

} // namespace tailmark::engine
