#include "tailmark/congestion.h"

#include <algorithm>

namespace tailmark {

namespace {
constexpr uint64_t kBaseWindowUs = 10000000; // the base RTT is the smallest of the last 10-20 s
inline uint64_t us_to_cycles(uint64_t us, uint64_t hz) { return hz / 1000000 * us + hz % 1000000 * us / 1000000; }
} // namespace

unsigned Congestion::stamp_shift(uint64_t tsc_hz) {
    unsigned s = 0;
    while ((tsc_hz >> (s + 1)) >= 1000000)
        s++;
    return s; // 2^s cycles <= 1 us < 2^(s+1) cycles
}

void Congestion::init(const CongestionConfig& cfg, unsigned shift, uint64_t now) {
    cfg_ = cfg;
    shift_ = shift;
    cut_tsc_ = 0;
    gap_avg_ = 0;
    sent_total_ = delivered_ = win_delivered_ = 0;
    unanswered_ = sample_tsc_ = stall_end_ = 0;
    undo_bps_ = 0;
    delivery_ = 0;
    for (uint64_t& x : sent_at_)
        x = 0;
    target_ = us_to_cycles(cfg.target_us, cfg.tsc_hz);
    interval_ = us_to_cycles(cfg.interval_us, cfg.tsc_hz);
    step_us_ = cfg.nap_step_us != 0 ? cfg.nap_step_us : cfg.step_us;
    slack_ = us_to_cycles(cfg.nap_step_us != 0 ? std::max(cfg.nap_step_us, cfg.slack_us) : cfg.slack_us, cfg.tsc_hz);
    next_tsc_ = now;
    base_ = base_prev_ = UINT64_MAX;
    base_roll_ = now + us_to_cycles(kBaseWindowUs, cfg.tsc_hz);
    srtt_ = last_rtt_ = 0;
    open_window(now);
    deliv_best_ = deliv_prev_ = 0;
    deliv_roll_ = now + us_to_cycles(kBestWindowUs, cfg.tsc_hz);
    stall_ = us_to_cycles(kStallUs, cfg.tsc_hz);
    silent_max_ = us_to_cycles(kSilentUs, cfg.tsc_hz);
    held_ = 0;
    held_start_ = now;
    held_delivered_ = held_stalled_ = 0;
    probe_armed_ = false;
    probe_since_ = 0;
    shaper_until_ = 0;
    span_ = us_to_cycles(kSpanUs, cfg.tsc_hz);
    slow_start_ = true;
    draining_ = false;
    drain_path_ = 0;
    steered_ = false;
    set_rate(cfg.start_bps);
}

void Congestion::set_rate(double bps) {
    if (bps < cfg_.min_bps)
        bps = cfg_.min_bps;
    if (bps > cfg_.max_bps)
        bps = cfg_.max_bps;
    rate_ = bps;
    const double bytes_per_s = bps / 8;
    cpb_fp_ = static_cast<uint64_t>(static_cast<double>(cfg_.tsc_hz) * 65536.0 / bytes_per_s);
    double step = bytes_per_s * static_cast<double>(step_us_) / 1e6;
    if (step < 3000) // two full frames: a step of one packet would make every packet a poll round
        step = 3000;
    if (step > 64 * 1024)
        step = 64 * 1024;
    step_bytes_ = static_cast<uint32_t>(step);
}

void Congestion::spray() {
    step_us_ = cfg_.step_us;
    slack_ = us_to_cycles(cfg_.slack_us, cfg_.tsc_hz);
    set_rate(rate_); // its step in bytes
}

CcEvent Congestion::on_echo(uint64_t now, uint16_t echo, uint32_t hold_ns) {
    const uint64_t now_u = now >> shift_;
    const uint64_t age_u = (now_u - echo) & 0xFFFF; // stamps are the low 16 bits
    const uint64_t rtt = age_u << shift_;
    const uint64_t hold = static_cast<uint64_t>(hold_ns) * cfg_.tsc_hz / 1000000000ull;
    if (hold >= rtt)
        return CcEvent::None; // a stamp older than the wrap, or clocks at odds: no sample
    if (age_u < (uint64_t(kSlots - 1) << kSlotShift))
        note_delivered(now_u - age_u);
    return on_rtt(now, rtt - hold, now - rtt);
}

void Congestion::note_delivered(uint64_t stamp_units) {
    const uint64_t d = sent_at_[(stamp_units >> kSlotShift) & (kSlots - 1)];
    if (d > delivered_ && d <= sent_total_)
        delivered_ = d;
}

// Bits per second delivered since the window opened (0: too short to say).
double Congestion::window_delivery(uint64_t now) const {
    if (now - win_start_ < interval_ / 2 || delivered_ <= win_delivered_)
        return 0;
    return static_cast<double>(delivered_ - win_delivered_) * 8 * static_cast<double>(cfg_.tsc_hz) /
           static_cast<double>(now - win_start_);
}

// A window's delivery rate, as the path's: the best of the last 10-20 ms is
// kept (two halves, as the base RTT's) for windows whose own figure cannot
// be trusted (see cut_to).
void Congestion::note_delivery(uint64_t now, double bps) {
    if (now >= deliv_roll_) {
        const uint64_t period = us_to_cycles(kBestWindowUs, cfg_.tsc_hz);
        deliv_prev_ = now - deliv_roll_ < period ? deliv_best_ : 0; // a period without a figure: none is recent
        deliv_best_ = 0;
        deliv_roll_ = now + period;
    }
    if (bps <= 0)
        return;
    delivery_ = bps;
    if (!slow_start_ && bps > deliv_best_) // slow start's windows carry a token bucket's burst
        deliv_best_ = bps;
}

// A cut: to `bps`, but never above what the path delivered meanwhile (a rate
// that overshot many times over, in slow start or behind a token bucket's
// burst, comes down to the path's in one step instead of one halving per RTT).
// Meanwhile: this window's figure, unless the feedback stopped for a while in
// it. The receiver's lcore was then descheduled (busy pollers sharing a few
// CPUs: time slices of several ms); its frames waited in the rx ring and its
// ACKs with them, so the window shows a fraction of a path that did not slow.
// A cut to that fraction took 1 Gbit/s to 250-400 Mbit/s, and additive steps
// took 100 ms back (82-92% goodput where the path carried 96%). Such a window
// is capped at the path's best recent figure instead.
void Congestion::cut_to(uint64_t now, double bps, bool queue) {
    const bool stalled = win_gap_ > stall_;
    const double d = window_delivery(now);
    note_delivery(now, stalled ? 0 : d);
    double cap = delivery_;
    if (stalled) {
        const double best = deliv_best_ > deliv_prev_ ? deliv_best_ : deliv_prev_;
        if (best > cap)
            cap = best;
    }
    // A queue's cut past slow start whose window heard its ACKs in clumps
    // (its longest gap 1.25x the usual one): at least what the path held
    // over its last 32 ms. Such a window's 2-3 ACKs read 407-878 Mbit/s of
    // a path that held 1003, and cuts to that took 1.3 Gbit/s to 0.74 in
    // 3 ms, then 50 ms to climb back (congestion.sh 2a: 78-88% goodput on an
    // Intel Xeon where --cc off carried 94%). A window of evenly spaced
    // ACKs is believed: a path shared anew shows there first.
    if (queue && !slow_start_ && !stalled && win_gap_ * 4 > gap_avg_ * 5 && held_ > cap)
        cap = held_;
    if (cap > 0 && bps > cap)
        bps = cap;
    // A shaper, where the window sent at its rate (an application-limited
    // one, such as an all_to_all's bursts with gaps between, delivered what
    // it sent and no more: its rate over what the path held says nothing).
    const double path = held_ > d ? held_ : d;
    if (queue && !slow_start_ && held_ > 0 && rate_limited(now) && rate_ > kHiddenRatio * path) // slow start overshoots by design
        shaper_until_ = now + us_to_cycles(kShaperUs, cfg_.tsc_hz);
    set_rate(bps);
    slow_start_ = false;
    cut_tsc_ = now;
    probe_armed_ = now < shaper_until_;
}

// What the path held, once per kHeldUs: what got through over the whole
// period (the time below the path after a cut included), less the
// feedback's silences.
void Congestion::note_held(uint64_t now) {
    const uint64_t span = now - held_start_;
    if (span < us_to_cycles(kHeldUs, cfg_.tsc_hz))
        return;
    if (held_stalled_ < span / 2)
        held_ = static_cast<double>(delivered_ - held_delivered_) * 8 * static_cast<double>(cfg_.tsc_hz) /
                static_cast<double>(span - held_stalled_);
    held_start_ = now;
    held_delivered_ = delivered_;
    held_stalled_ = 0;
}

// The additive step for dt seconds rate-limited without congestion: the
// whole step, but behind a shaper (cut_to), after each cut, an eighth for
// kProbeUs once the rate passes the knee (what the path held over the last
// 32 ms), then the whole step until the next cut (the path evidently
// carries more: another session left). Why: a shaper's token bucket
// (tbf's 64 KiB) lets a rate past the path through at line speed until the
// bucket is empty, so no queue shows while the rate climbs. With the whole
// step, a 100 Mbit/s session climbed to 150-210 Mbit/s before the first
// sample of a queue, which then grew 0.7-1 ms per ms until the cut: p99
// 2.4-2.6 ms for the 64 B session behind it, against a 500 us target
// (tests/integration/congestion.sh case 4; congestion.md, "behind a
// shaper").
//
// Off a known shaper, the step is at least one frame per RTT (the window's
// growth in Reno and Swift; the RTT here is the control interval, at least
// 500 us), and at most 1/kFrameShare of the rate per RTT. A fixed 5 Mbit/s
// per ms took 1 Gbit/s 200 ms of sending to regain, and the sessions of
// 2 x 2 ranks' all_to_all, which send 256 KiB bursts, never got past
// 0.3-1.3 Gbit/s each on a path that carried 5: a 1 MiB all_to_all took
// 7.5-8.1 ms against 4.8-5.6 with the frame per RTT (and 2.8 with --cc off;
// congestion.md, "the step").
// Behind a shaper the bucket hides the queue while the rate climbs, and the
// frame per RTT took the 64 B session's p99 behind a 100 Mbit/s bulk one to
// 3.2-4.5 ms (congestion.sh case 4, bound 3 ms): there the step stays ai.
//
// Below the knee, shaper or not, the step is at least a 25th of the knee
// per ms (kKneeStep): the path carried the knee over the last 32 ms, and a
// cut below it (a window that read a fraction of the path, the path slowed
// for a moment) is regained in about 15 ms. With ai's 5 Mbit/s per ms
// alone, behind a tbf at 1 Gbit/s (a shaper, found) each cut to 450-650
// Mbit/s took 100 ms to regain: congestion.sh 2a ran at 86-91% quiet and
// 77-87% beside a load of 10% of each vCPU, against 93-96% and 85-90% with
// the knee's step (--cc off: 96% and 93%). Up to a knee of 125 Mbit/s the
// knee's step is no more than ai's: one session at 100 Mbit/s, or two that
// share 200 (congestion.sh cases 1, 3 and 4), step as before.
double Congestion::increase(uint64_t now, double dt) {
    double step = cfg_.ai_bps_per_ms * dt * 1000;
    if (cfg_.frame_bytes != 0 && now >= shaper_until_) {
        const double rtt = static_cast<double>(std::max(srtt_, interval_)) / static_cast<double>(cfg_.tsc_hz);
        const double per_rtt = std::min(static_cast<double>(cfg_.frame_bytes) * 8 / rtt, rate_ / kFrameShare);
        step = std::max(step, per_rtt * dt / rtt);
    }
    if (held_ <= 0)
        return step;
    if (rate_ < held_)
        return std::max(step, held_ * kKneeStep * dt);
    if (probe_armed_) {
        probe_armed_ = false;
        probe_since_ = now;
    }
    if (probe_since_ != 0 && now - probe_since_ < us_to_cycles(kProbeUs, cfg_.tsc_hz))
        step /= kProbeSlow;
    return step;
}

// The window sent at least half of rate x its length: the rate, not the
// application, limited it (the increase's condition, and a shaper's).
bool Congestion::rate_limited(uint64_t now) const {
    const double s = static_cast<double>(now - win_start_) / static_cast<double>(cfg_.tsc_hz);
    return static_cast<double>(win_sent_) * 8 >= rate_ * s * 0.5;
}

void Congestion::open_window(uint64_t now) {
    win_start_ = now;
    win_delivered_ = delivered_;
    win_min_ = UINT64_MAX;
    win_sent_ = 0;
    win_gap_ = 0;
    win_loss_ = false;
    win_lost_ = 0;
}

CcEvent Congestion::on_rtt(uint64_t now, uint64_t rtt, uint64_t sent) {
    const uint64_t gap = srtt_ == 0 ? 0 : now - sample_tsc_;
    if (srtt_ == 0) { // the first sample opens the first interval
        win_start_ = now;
        win_delivered_ = delivered_;
    } else if (gap > win_gap_) {
        win_gap_ = gap;
    }
    if (gap > stall_) {
        stall_end_ = now;
        held_stalled_ += gap;
    } else if (gap != 0) {
        gap_avg_ = gap_avg_ == 0 ? gap : gap_avg_ - (gap_avg_ >> 3) + (gap >> 3);
    }
    // The first sample after a timeout's cut says what the silence was. It
    // echoes a packet sent before the cut, late by no more than the silence
    // (and a target): the path carried what was in flight, the peer (or
    // this lcore) was descheduled, and the cut is undone, as TCP's Eifel
    // undoes a spurious timeout's. Cut by such timeouts, 1 Gbit/s of 64 KiB
    // messages through tbf ran at 82% (26 in 4.9 s) where a quiet machine
    // carries 93-95%. Or it echoes a packet sent since, with no queue: the
    // path carries what is sent now, and a loss in the silence is its
    // probes' to repair (their NACKs count as loss does), not the rate's.
    // A late ACK is such a silence: 2 x 2 ranks' 16 MiB all_to_all over
    // veths (scripts/lib/torch_loop.sh) took 33-39 halvings per daemon in
    // 30 ops, not one packet lost (the af_packet rings dropped none; every
    // probe found its message already whole at the receiver), 2-4 undone,
    // each sample after the silence 0.05-2 ms old after 10-96 ms of it;
    // undone too, 36-48 ms an op against 40-82.
    if (undo_bps_ != 0) {
        const bool before = sent < cut_tsc_ && rtt <= gap + base_rtt() + target_;
        const bool after = sent >= cut_tsc_ && rtt <= base_rtt() + target_;
        if (gap > stall_ && (before || after) && undo_bps_ > rate_)
            set_rate(undo_bps_);
        undo_bps_ = 0;
    }
    last_rtt_ = rtt;
    sample_tsc_ = now;
    unanswered_ = 0;
    srtt_ = srtt_ == 0 ? rtt : srtt_ - (srtt_ >> 3) + (rtt >> 3);
    if (rtt < base_)
        base_ = rtt;
    if (now >= base_roll_) { // the path may have changed: forget the older half
        base_prev_ = base_;
        base_ = rtt;
        base_roll_ = now + us_to_cycles(kBaseWindowUs, cfg_.tsc_hz);
    }
    if (steered_) // its paths decide (steer)
        return CcEvent::None;
    // A packet sent before the last cut shows the queue that cut was for:
    // it says nothing of the new rate (a deep queue drains for an RTT after
    // the cut, and counting it again cut to the floor).
    if (sent < cut_tsc_)
        return CcEvent::None;
    if (win_min_ == UINT64_MAX)
        win_first_ = now;
    if (rtt < win_min_)
        win_min_ = rtt;
    // A sample 8 targets over the base RTT with the feedback flowing (no
    // time slice to explain it): the queue is near what a shallow bottleneck
    // holds (tbf's 2 ms plus its burst at 100 Mbit/s: ~7 ms), and waiting for
    // the interval's end lets it overflow onto everyone's packets. Cut at
    // once, by the most one decrease takes, at most once per smoothed RTT.
    // (The 64 B session behind a bulk one, tests/integration/congestion.sh
    // case 4: p99 2.35-2.73 ms and nothing dropped, against 3.7-4.9 ms and
    // 125 drops waiting; 100 Mbit/s goodput 85-92% against 92%.)
    // "Flowing" for this packet: sent after the latest silence ended. A
    // receiver that wakes from a time slice answers every flow of the
    // session at once: the first ACK ends the silence, and the others, which
    // come right after it, echo packets that waited through the same slice
    // (tailmark-cat --flows 4: 17 halvings in 3 s, 0.5-0.9 Gbit/s where one
    // flow carried 1.2-1.5).
    if (!slow_start_ && sent > stall_end_ && rtt > base_rtt() + 8 * target_ && now - cut_tsc_ > srtt_) {
        cut_to(now, rate_ * (1 - cfg_.max_md), true);
        open_window(now);
        return CcEvent::Decrease;
    }
    // Slow start ends at the first sample that shows a queue of half the
    // target, not at the interval's end: the rate doubled an interval ago
    // and the queue grows by the whole excess until the cut. Back to the
    // rate before that doubling, which the path was still carrying.
    if (slow_start_ && rtt > base_rtt() + target_ / 2) {
        draining_ = true;
        cut_to(now, rate_ / 2, true);
        open_window(now);
        return CcEvent::Decrease;
    }
    // The interval is over, and its samples span kSpanUs. A peer descheduled
    // for a time slice (shorter than kStallUs too) answers on waking with one
    // burst of samples, all late by up to the slice: a window that opened
    // just before the slice holds only those, and its smallest showed a
    // queue that was not on the path. Cut by it, and capped at the window's
    // delivery, 1 Gbit/s fell to 185-650 Mbit/s 14-18 times in 5 s (82-90%
    // goodput on an AMD EPYC where --cc off carried 96%). The next ACK
    // feedback, 200 us on, echoes a packet that did not wait.
    const uint64_t len = srtt_ > interval_ ? srtt_ : interval_;
    return now - win_start_ >= len && now - win_first_ >= span_ ? update(now) : CcEvent::None;
}

// The drain after slow start (draining_), at a window's end with queue q:
// a window whose feedback flowed and whose queue stood says what the path
// delivers; the first such window with the queue gone (and nothing lost)
// ends the drain, the rate back at that figure. True: the rate went up.
bool Congestion::drained(uint64_t now, uint64_t q) {
    if (q > target_ && win_gap_ <= stall_) {
        if (const double d = window_delivery(now); d > 0)
            drain_path_ = d;
        return false;
    }
    if (q > target_ / 2 || win_loss_ || win_gap_ > stall_) // a late window's small queue may be the gap's
        return false;
    draining_ = false;
    if (drain_path_ <= rate_)
        return false;
    set_rate(drain_path_);
    return true;
}

CcEvent Congestion::update(uint64_t now) {
    note_held(now);
    const uint64_t base = base_rtt();
    uint64_t q = win_min_ > base ? win_min_ - base : 0;
    // A window in which the feedback stopped for a while (win_gap_ > 1 ms):
    // something on the path was descheduled for a time slice (this lcore,
    // the peer's, or the kernel thread that moves af_packet frames), and
    // every sample of the window may be late by up to that gap with no queue
    // behind it. Its queue is the smallest sample less the gap. Read as a
    // queue, the slices of 2 vCPUs shared with a busy-wait load (20-40% of
    // each CPU) cut 1 Gbit/s to 13-16% goodput and 100 Mbit/s to 65-85%
    // (tests/integration/congestion.sh); less the gap, 51-59% and 86-94%,
    // and on a quiet machine 90-95% where the slices took 100 Mbit/s to 70%.
    if (win_gap_ > stall_)
        q = q > win_gap_ ? q - win_gap_ : 0;
    const double dt = static_cast<double>(now - win_start_) / static_cast<double>(cfg_.tsc_hz);
    CcEvent ev = CcEvent::None;
    if (draining_ && drained(now, q))
        ev = CcEvent::Increase;
    else if (q > target_) {
        double md = cfg_.beta * static_cast<double>(q - target_) / static_cast<double>(win_min_);
        if (md > cfg_.max_md)
            md = cfg_.max_md;
        cut_to(now, rate_ * (1 - md), true);
        ev = CcEvent::Decrease;
    } else if (win_loss_ && (q > target_ / 2 || win_lost_ * kHeavyLoss > win_sent_)) {
        // Heavy loss is congestion whatever the delay says. Under CPU
        // contention nearly every window has a stall, its queue is read as
        // nothing, and loss was the one signal left: two senders into one
        // 200 Mbit/s tbf beside a build (congestion.sh case 3) climbed to
        // 210-270 Mbit/s each, srtt 7 ms, 2-3x the packets the messages
        // needed, with 9-11 loss decreases in 7 s. A lossy wire (case 5:
        // 2% dropped) stays under the tenth.
        cut_to(now, rate_ * (1 - cfg_.loss_md), false);
        ev = CcEvent::LossDecrease;
    } else if (win_loss_ && win_gap_ > stall_) {
        // A loss, and a delay that cannot say whether it was the queue's:
        // no more rate on that evidence (nor less: a wire's random loss).
    } else if (rate_limited(now)) {
        if (win_gap_ <= stall_)
            note_delivery(now, window_delivery(now));
        // Only while the rate limits: an application that sends less must not
        // earn a rate it never tried (and then spend it as one burst).
        set_rate(slow_start_ ? rate_ * 2 : rate_ + increase(now, dt));
        ev = CcEvent::Increase;
    }
    open_window(now);
    return ev;
}

// Slow start heard nothing for kSilentUs (silent): it starts over from
// start_bps, as TCP's does after a timeout, and goes on sending: its
// packets reach the receiver, whose ACKs (and NACKs of the gaps) bring
// samples again. Another silence waits again.
void Congestion::end_silence(uint64_t now) {
    if (cfg_.start_bps < rate_)
        set_rate(cfg_.start_bps);
    cut_tsc_ = now;    // samples of packets sent before say nothing of it
    unanswered_ = now; // the next silence counts from here
    open_window(now);
}

bool Congestion::on_timeout(uint64_t now, uint64_t rto) {
    if (unanswered_ == 0 || now - unanswered_ < rto)
        return false;
    slow_start_ = false;
    draining_ = false;
    if (undo_bps_ == 0)
        undo_bps_ = rate_; // the rate before this silence's first cut
    set_rate(rate_ / 2);
    cut_tsc_ = now;
    // The silence counts again from here: every flow of the session has its
    // own timer, and the flows of one stall expire together. Each was
    // another halving (4 flows: a sixteenth of the rate per stall).
    unanswered_ = now;
    open_window(now);
    return true;
}

} // namespace tailmark
