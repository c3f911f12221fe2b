// The control loop on the main lcore: launching the lcores, each control
// round's work, and how a run ends (done, drained, closed, stopped).
#include "runtime.h"

#include <cinttypes>
#include <cstdio>

#include <rte_cycles.h>
#include <rte_launch.h>

#include "bench/bench.h"
#include "service/service.h"
#include "telemetry/stats_line.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

constexpr uint64_t kDrainUs = 500000;       // after a stop request, finish in-flight messages for 0.5 s
constexpr uint64_t kControlUs = 100;        // control loop period
constexpr uint64_t kCloseUs = 20000;        // CLOSE packets leave within this before the lcores stop

} // namespace

Runtime::Runtime(const Options& opt, StopRequest& stop) : opt_(opt), stop_(stop) {}

Runtime::~Runtime() {
    teardown();
}

// --- run and control ----------------------------------------------------------

void Runtime::run() {
    results_mail_.loop_started(); // from here on the shell's results() come from control()
    const unsigned main_lcore = rte_get_main_lcore();
    launch_tsc_ = rte_rdtsc();
    deadline_tsc_ = opt_.duration > 0 ? launch_tsc_ + static_cast<uint64_t>(opt_.duration * double(tsc_hz_)) : 0;
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
    // The main lcore's roles, if any, and the control round every 100 us.
    engine::run_main_lcore(*lcores_[main_lcore], apply_bench_op, tsc_hz_ * kControlUs / 1000000, kControlUs,
                           [this](uint64_t now) { control(now); });
    node_.stop(); // the lcores joined
    if (end_tsc_ == 0)
        end_tsc_ = rte_rdtsc();
    results_mail_.loop_ended();
    results_mail_.answer([this] { return results(); }); // one asked while the loop ended
}

// The shell's thread (shell/results_mailbox.h): never blocks the control
// thread, which answers between its rounds.
bool Runtime::results_from_shell(Results& out, double timeout_s) {
    return results_mail_.ask(out, [this] { return results(); }, timeout_s);
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
    if (service_) // the applications are told, and every session is closed
        service_->shutdown(now);
    node_.close_sessions(now, service_ != nullptr);
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
    results_mail_.answer([this] { return results(); }); // the shell's

    // The node's round: the lcores' answers (on_answer), the control
    // plane's packets (handshakes, keep-alives, ARP: the session table's),
    // the moves between rx lcores, what was let go a second ago, ended
    // sessions whose flows are out forgotten by the table.
    node_.tick(now);
    if (service_)
        service_->poll(now); // applications: requests, wake-ups, memory let go
    // Failures, the congestion floor, a consumer process's cursors and
    // stalls, rates; the external consumer's cursor is the flow's consumed count.
    watch_.tick(reg_, now, [](engine::SessionFlow& f, uint32_t rel) {
        ctx_of(f).consumed.store(rel, std::memory_order_release);
    });
    if (now >= next_forget_) {
        forget_ended(now);
        next_forget_ = now + tsc_hz_;
    }
    check_done(now);
    // The period may change at run time (shell: `set stats-period`).
    const uint64_t period = static_cast<uint64_t>(stats_period_.load(std::memory_order_relaxed) * double(tsc_hz_));
    if (period == 0)
        next_stats_ = 0;
    else if (next_stats_ == 0 || next_stats_ > now + period)
        next_stats_ = now + period;
    if (next_stats_ && now >= next_stats_ && plane_.phase_now() != Phase::Stop) {
        stats_line_->print(now);
        while (next_stats_ <= now)
            next_stats_ += period;
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
        bool out = node_.closes_out();
        if (opt_.mode == Mode::Loopback) // and in: the session with itself ended
            for (Session* s : sessions().sessions())
                out = out && (s->state == SessionState::Ended || !s->local_peer);
        if (out || now >= close_deadline_)
            plane_.phase.store(static_cast<int>(Phase::Stop), std::memory_order_relaxed);
    }
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
