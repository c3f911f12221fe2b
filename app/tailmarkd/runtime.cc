// The control loop on the main lcore: launching the lcores, each control
// round's work, and how a run ends (done, drained, closed, stopped).
#include "runtime.h"

#include <cinttypes>
#include <cstdio>

#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_ring.h>

#include "bench/bench.h"
#include "service/service.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

constexpr uint64_t kDrainUs = 500000;       // after a stop request, finish in-flight messages for 0.5 s
constexpr uint64_t kControlUs = 100;        // control loop period
constexpr uint64_t kCloseUs = 20000;        // CLOSE packets leave within this before the lcores stop
constexpr uint64_t kConsumerStallUs = 1000000; // --consumer-lcores none: a flow is stalled after 1 s without a release

} // namespace

Runtime::Runtime(const Options& opt, StopRequest& stop) : opt_(opt), stop_(stop) {}

Runtime::~Runtime() {
    teardown();
}

// --- run and control ----------------------------------------------------------

void Runtime::run() {
    loop_state_.store(1, std::memory_order_release); // from here on the shell's results() come from control()
    const unsigned main_lcore = rte_get_main_lcore();
    launch_tsc_ = rte_rdtsc();
    deadline_tsc_ = opt_.duration > 0 ? launch_tsc_ + static_cast<uint64_t>(opt_.duration * double(tsc_hz_)) : 0;
    last_stats_tsc_ = launch_tsc_;
    const uint64_t period = static_cast<uint64_t>(stats_period_.load() * double(tsc_hz_));
    next_stats_ = period ? launch_tsc_ + period : 0;
    launched_ = true;
    // The engine launches the daemon's lcore loop over the daemon's contexts.
    std::vector<void*> args(RTE_MAX_LCORE, nullptr);
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++)
        if (lcores_[l] != nullptr && lcores_[l]->any())
            args[l] = lcores_[l];
    if (!eng().launch(lcore_main, args.data())) {
        TM_LOG(ERR, app, "an lcore's launch failed");
        plane_.phase.store(static_cast<int>(Phase::Stop));
        exit_reason_ = "launch_failed";
    }
    if (!opt_.flow_control)
        start_tsc_ = launch_tsc_;
    if (bench_)
        bench_->start(rte_rdtsc()); // the service's applications open theirs
    LcoreCtx& mine = *lcores_[main_lcore];
    const uint64_t ctrl = tsc_hz_ * kControlUs / 1000000;
    uint64_t next_ctrl = 0;
    uint64_t prev = rte_rdtsc();
    while (plane_.phase_now() != Phase::Stop) {
        serve_requests(mine);
        if (mine.any())
            run_roles_timed(mine, prev); // prev: the TSC it ended at
        else
            rte_delay_us_sleep(kControlUs);
        const uint64_t now = mine.any() ? prev : rte_rdtsc();
        if (now >= next_ctrl) {
            control(now);
            next_ctrl = now + ctrl;
        }
    }
    node_.stop(); // the lcores joined
    if (end_tsc_ == 0)
        end_tsc_ = rte_rdtsc();
    loop_state_.store(2, std::memory_order_release);
    answer_results(); // one asked while the loop ended
}

void Runtime::answer_results() {
    if (results_asked_.load(std::memory_order_acquire) != 1)
        return;
    results_box_ = results();
    results_asked_.store(2, std::memory_order_release);
}

// The shell's thread: never blocks the control thread (which only looks at
// an atomic each round); the caller polls its answer.
bool Runtime::results_from_shell(Results& out, double timeout_s) {
    const uint64_t end = rte_rdtsc() + static_cast<uint64_t>(timeout_s * double(tsc_hz_));
    results_asked_.store(1, std::memory_order_release);
    for (;;) {
        if (results_asked_.load(std::memory_order_acquire) == 2) {
            out = results_box_;
            results_asked_.store(0, std::memory_order_release);
            return true;
        }
        if (loop_state_.load(std::memory_order_acquire) == 2) { // no control loop any more: nothing changes
            results_asked_.store(0, std::memory_order_release);
            out = results();
            return true;
        }
        if (rte_rdtsc() >= end) {
            // Withdrawn; an answer written meanwhile is overwritten by the next ask.
            int asked = 1;
            results_asked_.compare_exchange_strong(asked, 0, std::memory_order_acq_rel);
            return false;
        }
        rte_delay_us_sleep(1000);
    }
}

void Runtime::begin_drain(uint64_t now, const char* reason) {
    if (exit_reason_.empty())
        exit_reason_ = reason;
    if (opt_.mode == Mode::Recv) { // a receiver cannot know what is still in flight
        stop(now, reason);
        return;
    }
    TM_LOG(INFO, app, "%s: draining (no new messages; up to %" PRIu64 " ms for those in flight)", reason,
           kDrainUs / 1000);
    drain_start_ = now;
    drain_deadline_ = now + tsc_hz_ * kDrainUs / 1000000;
    plane_.phase.store(static_cast<int>(Phase::Drain), std::memory_order_relaxed);
}

void Runtime::stop_run(uint64_t now, const char* reason) {
    exit_reason_ = reason;
    stop(now, reason);
}

void Runtime::stop(uint64_t now, const char* reason) {
    if (exit_reason_.empty())
        exit_reason_ = reason;
    if (end_tsc_ == 0)
        end_tsc_ = work_end_tsc_ ? work_end_tsc_ : now;
    plane_.phase.store(static_cast<int>(Phase::Stop), std::memory_order_relaxed);
}

// The work is over: the sessions this process opened are closed (a CLOSE
// to each peer, sent before the lcores stop), then everything stops.
void Runtime::close_and_stop(uint64_t now, const char* reason) {
    if (exit_reason_.empty())
        exit_reason_ = reason;
    if (closing_)
        return;
    closing_ = true;
    if (end_tsc_ == 0)
        end_tsc_ = work_end_tsc_ ? work_end_tsc_ : now;
    plane_.phase.store(static_cast<int>(Phase::Drain), std::memory_order_relaxed);
    close_sessions(now);
    close_deadline_ = now + tsc_hz_ * kCloseUs / 1000000;
}

void Runtime::close_sessions(uint64_t now) {
    if (service_) { // the applications are told, and every session is closed
        service_->shutdown(now);
        for (Session* s : sessions().sessions())
            if (s->state != SessionState::Ended)
                sessions().close(s, now);
        return;
    }
    for (Session* s : sessions().sessions())
        if (s->connector && s->state == SessionState::Established)
            sessions().close(s, now);
}

// Congestion control's ceiling: --cc-max-mbps, else the tx port's link speed.
uint64_t Runtime::cc_max_mbps() const {
    return opt_.cc_max_mbps != 0 ? opt_.cc_max_mbps : node_.link_mbps();
}

bool Runtime::senders_busy() const {
    for (const Sender* s : senders())
        if (s->busy() != 0)
            return true;
    return false;
}

// The run's work is over (the benchmark's: the service serves until
// stopped), and nothing it sent is in flight any more.
bool Runtime::done() const { return bench_ != nullptr && bench_->done(); }

bool Runtime::drained() const { return !senders_busy() && (bench_ == nullptr || bench_->drained()); }

void Runtime::control(uint64_t now) {
    const int q = stop_.requests();
    if (q >= 2) {
        stop(now, "signal");
    } else if (q == 1 && plane_.phase_now() == Phase::Run && !closing_) {
        const int sig = stop_.last_signal(); // 0: the shell's quit (or the end of its input)
        if (sig != 0)
            TM_LOG(NOTICE, app, "signal %d", sig);
        else
            TM_LOG(NOTICE, app, "quit (shell)");
        begin_drain(now, sig ? "signal" : "quit");
    }
    if (plane_.phase_now() == Phase::Run && deadline_tsc_ && now >= deadline_tsc_ && !closing_)
        begin_drain(now, "duration");
    answer_results(); // the shell's

    // The node's round: the lcores' answers (on_answer), the control
    // plane's packets (handshakes, keep-alives, ARP: the session table's),
    // the moves between rx lcores, what was let go a second ago, ended
    // sessions whose flows are out forgotten by the table.
    node_.tick(now);
    if (service_)
        service_->poll(now); // applications: requests, wake-ups, memory let go
    if (opt_.external_consumer && opt_.mode != Mode::Send)
        watch_flows(now);
    scan_flows(now);
    if (now >= next_rates_) {
        update_rates(now);
        forget_ended(now); // once a second too
    }
    check_done(now);
    // The period may change at run time (shell: `set stats-period`).
    const uint64_t period = static_cast<uint64_t>(stats_period_.load(std::memory_order_relaxed) * double(tsc_hz_));
    if (period == 0)
        next_stats_ = 0;
    else if (next_stats_ == 0 || next_stats_ > now + period)
        next_stats_ = now + period;
    if (next_stats_ && now >= next_stats_ && plane_.phase_now() != Phase::Stop) {
        print_stats(now);
        while (next_stats_ <= now)
            next_stats_ += period;
    }
}

// Every 10 ms, each flow's Sender state: a failed flow logged once, and a
// session held at the congestion floor warned about once.
void Runtime::scan_flows(uint64_t now) {
    if (failed_logged_.size() < reg_.size())
        failed_logged_.resize(reg_.size(), false);
    if (floor_since_.size() < reg_.size())
        floor_since_.resize(reg_.size(), 0);
    // Every 10 ms, not every control round: each look reads every flow's
    // Sender state, lines its tx lcore writes per message, which then come
    // back to that lcore as misses (64 flows of 64 B messages in loopback:
    // 7% of the rate when it was every 100 us).
    const bool scan = now >= next_flow_scan_;
    if (scan)
        next_flow_scan_ = now + tsc_hz_ / 100;
    const double floor_bps = CongestionConfig{}.min_bps * 1.05;
    for (size_t i = 0; scan && i < reg_.size() && opt_.mode != Mode::Recv; i++) {
        const Sender::FlowView v = send_view(ctx_of(*reg_[i]));
        if (v.failed != FailReason::None && !failed_logged_[i]) {
            failed_logged_[i] = true;
            TM_LOG(WARNING, app, "flow %zu failed (%s): messages from %u on are not confirmed", i, to_string(v.failed),
                   v.released);
        }
        // Congestion control held at its floor for a second while the flow
        // has work (and not by --cc-max-mbps): say why that may be, once per
        // session (a delay-based controller cannot tell a queue from a
        // receiver waiting for a CPU).
        AppSession* a = static_cast<AppSession*>(reg_[i]->send_session);
        const bool floor = v.cc_rate_bps > 0 && v.cc_rate_bps <= floor_bps && v.submitted != v.released &&
                           (cc_max_mbps() == 0 || cc_max_mbps() * 1e6 > floor_bps) && a != nullptr && !a->floor_said;
        if (!floor) {
            floor_since_[i] = 0;
        } else if (floor_since_[i] == 0) {
            floor_since_[i] = now;
        } else if (now - floor_since_[i] > tsc_hz_) {
            a->floor_said = true;
            TM_LOG(WARNING, app,
                   "session %u to %s: congestion control has held it at the 1 Mbit/s floor for 1 s (smoothed RTT %.1f "
                   "ms, base %.1f ms, --cc-target-us %" PRIu64 "): a queue on the path, or busy threads sharing the "
                   "peers' CPUs with their lcores, whose scheduling delay reads as queueing; give the lcores cores of "
                   "their own or raise --cc-target-us above that delay",
                   a->index, to_string(a->peer).c_str(), double(v.cc_srtt) * 1e3 / double(tsc_hz_),
                   double(v.cc_base_rtt) * 1e3 / double(tsc_hz_), opt_.cc_target_us);
        }
    }
}

// How the work ends: recv sessions complete, the run done (linger, or
// close and stop), a drain over, the CLOSE packets out.
void Runtime::check_done(uint64_t now) {
    if (bench_)
        bench_->count_complete();
    const bool finished = done();
    if (finished && work_end_tsc_ == 0)
        work_end_tsc_ = now; // rates are over the time the work was in flight
    if (plane_.phase_now() == Phase::Run && opt_.exit_when_done && !lingering_ && finished && !closing_) {
        if (opt_.linger) { // final counters stay readable (telemetry) until a signal
            lingering_ = true;
            exit_reason_ = "done";
            end_tsc_ = now;
            close_sessions(now); // the counters are final from here on
            TM_LOG(NOTICE, app, "done; --linger: waiting for a signal");
        } else {
            close_and_stop(now, "done");
        }
    }
    if (plane_.phase_now() == Phase::Drain && !closing_) {
        if (drained())
            close_and_stop(now, exit_reason_.c_str());
        else if (now >= drain_deadline_)
            stop(drain_start_, exit_reason_.c_str()); // rates: no traffic after the drain began
    }
    if (closing_) { // the CLOSE packets are out (loopback: and in), or it is time
        bool out = true;
        for (const Sender* s : senders())
            out = out && rte_ring_empty(s->ctl_out()) && s->busy() == 0;
        if (opt_.mode == Mode::Loopback)
            for (Session* s : sessions().sessions())
                out = out && (s->state == SessionState::Ended || !s->local_peer);
        if (out || now >= close_deadline_)
            plane_.phase.store(static_cast<int>(Phase::Stop), std::memory_order_relaxed);
    }
}

// Each flow's messages per second over the last second: sent, and done
// (send: delivered; otherwise consumed). Once a second: each look reads
// the flow's Sender state (see the 10 ms scan above).
void Runtime::update_rates(uint64_t now) {
    const double dt = rates_tsc_ != 0 ? double(now - rates_tsc_) / double(tsc_hz_) : 0;
    for (FlowCtx* f : ctxs()) {
        const uint32_t sent = f->send != nullptr || f->detached || opt_.mode != Mode::Recv ? send_view(*f).sent : 0;
        const uint32_t done = released_of(*f);
        if (dt > 0) {
            f->rate_sent.store(double(sent - f->rate_sent_seen) / dt, std::memory_order_relaxed);
            f->rate_done.store(double(done - f->rate_done_seen) / dt, std::memory_order_relaxed);
        }
        f->rate_sent_seen = sent;
        f->rate_done_seen = done;
    }
    rates_tsc_ = now;
    next_rates_ = now + tsc_hz_;
}

// The external consumer's released cursors become the flows' consumed
// counters. A flow whose oldest unreleased message is complete while the
// cursor has not moved for kConsumerStallUs is stalled: reported, never
// overwritten (the placer's window ends at released + ring size).
void Runtime::watch_flows(uint64_t now) {
    const uint64_t limit = tsc_hz_ * kConsumerStallUs / 1000000;
    if (seen_released_.size() < reg_.size()) {
        seen_released_.resize(reg_.size(), 0);
        moved_tsc_.resize(reg_.size(), 0);
    }
    uint32_t n = 0;
    for (size_t i = 0; i < reg_.size(); i++) {
        FlowCtx& f = ctx_of(*reg_[i]);
        if (!f.ring)
            continue;
        const uint32_t rel = f.ring->released();
        f.consumed.store(rel, std::memory_order_release);
        if (rel != seen_released_[i] || moved_tsc_[i] == 0) {
            seen_released_[i] = rel;
            moved_tsc_[i] = now;
        }
        const bool waiting = f.ring->poll(rel) != nullptr;
        const bool st = waiting && now - moved_tsc_[i] >= limit;
        if (!waiting)
            moved_tsc_[i] = now;
        if (st != stalled_[i].load(std::memory_order_relaxed)) {
            stalled_[i].store(st, std::memory_order_relaxed);
            if (st)
                TM_LOG(WARNING, app, "flow %zu stalled: message %u is complete, the consumer released nothing for %" PRIu64
                       " ms", i, rel, kConsumerStallUs / 1000);
            else
                TM_LOG(NOTICE, app, "flow %zu resumed at message %u", i, rel);
        }
        n += st;
    }
    nstalled_.store(n, std::memory_order_relaxed);
}

bool Runtime::set_completion(CompletionMode m, std::string& why) {
    if (!switchable()) {
        why = opt_.external_consumer ? "the consumer is another process (--consumer-lcores none)"
                                     : opt_.mode == Mode::Send ? "a sender has no receive side"
                                                               : "only a shell run (-i) can switch";
        return false;
    }
    for (Receiver* r : receivers())
        r->set_mode(m);
    plane_.completion.store(static_cast<uint8_t>(m), std::memory_order_relaxed);
    return true;
}

} // namespace tailmark::app
