#include "tailmark/tx_paths.h"

#include <algorithm>

#include "tailmark/congestion.h"

namespace tailmark {

namespace {
// How often the weights move: a few RTT samples of each path in between
// (an ACK per flow every 200 us echoes one packet, of one path).
constexpr uint64_t kRebalanceUs = 2000;
// Loss is judged per window of this many packets sent by a path.
constexpr uint32_t kLossWindow = 64;
// Dead: at least this many lost over the window and the one before it,
// and at least half of what the two carried. A black hole loses all; 2%
// random loss never comes near, nor do a queue's drops but for a burst
// that overflows it (then the path rests until its probe gets through).
constexpr uint32_t kDeadLost = 16;
// A dead path's probes: the first after 10 ms, then twice as long each
// time one is lost, up to 200 ms.
constexpr uint64_t kProbeFirstUs = 10000;
constexpr uint64_t kProbeMaxUs = 200000;
// Weights: relative to a mean of 1 over the live paths; a live path keeps
// a floor, so that it is still measured.
constexpr double kMinWeight = 0.05;
constexpr double kMaxWeight = 4.0;
// Per rebalance: a path whose queueing delay is above the (share-weighted)
// mean of the session's paths gives share to those below it, by at most
// 20%; the delay is read against the larger of the mean and 100 us, so that
// microseconds of noise on empty paths move nothing much.
constexpr double kDelayGain = 0.5;
constexpr double kDelayStep = 0.2;
constexpr uint64_t kDelayScaleUs = 100;
// A path is judged by its delay only with at least two RTT samples since
// the last rebalance. The echoes are few: an ACK per flow every 200 us
// echoes one packet of one path, so 16 paths get about one sample each
// per rebalance. Weights moved by up to 50% on one sample random-walked
// onto a few paths: 4 of 16 held 79% of the share in multipath.sh case a.
// Their links queued, and the session's rate was cut to half the links'
// capacity.
constexpr uint32_t kMinFresh = 2;
// A path with fewer samples since the last rebalance is drawn a tenth of
// the way back to the mean: one that had little share gets samples again
// (it may have only looked slow), so weights do not settle on a few paths.
constexpr double kPull = 0.1;
// And a path that loses pays 2x its smoothed loss fraction per rebalance
// (2% loss: 4%), at most 30%: the delay of the paths it hands its share to
// brings it back, so a lossy path settles below its equal share, not at 0.
constexpr double kLossGain = 2.0;
constexpr double kLossStep = 0.3;
// But delay alone must not lift a path that loses more than the others
// above its equal share: its drops come before its queue (a lossy link
// carries less, so it queues less), and the delay's reward outweighed the
// loss's penalty (a path losing 2% with the lowest delay took 90% of the
// share; multipath.sh case c's lossy link carried 26%, over its quarter).
// "More": its loss over ~8 windows above the paths' mean by half a percent,
// so that a queue's drops spread over every path lift no cap.
constexpr double kLossExcess = 0.005;
// Steered (bind): a path's rate moves, as the session's controller's does
// (congestion.h), on the smallest RTT sample of its own window: down when
// its queue is over the target, up by an equal part of the session's
// additive step otherwise (AIMD per path: the paths of one link share it).
// A window decides with two samples, or one once it is 8 ms old: the
// echoes are few (an ACK per flow every 200 us, one path's packet each).
// A window in which the session's feedback stopped for over 1 ms counts the
// silence off its sample (a time slice, not a queue). A path losing over a
// tenth of what it carries is congested whatever its delay says.
constexpr uint64_t kSteerWindowUs = 8000;
// A path's decrease per unit of excess delay is the controller's beta (0.4
// since 2026-12-05). With 0.8, the controller's before, case a of
// tests/integration/multipath.sh carried 667-672 Mbit/s against 679-708 at
// 0.4 (a quarter: 530-717; fresher windows of 4 samples, or more additive
// step per path, less; 2-4 interleaved runs): a path's cut is made up only
// by its part of the additive step.
constexpr uint64_t kStallUs = 1000;
constexpr double kHeavyLoss = 0.1;
constexpr double kHeavyLossMd = 0.15;
} // namespace

uint16_t TxPaths::port_for(uint16_t base, uint32_t p) {
    // The ephemeral range, as TxFlow::source_port: base + p, wrapped in it.
    const uint32_t off = base >= 49152 ? base - 49152u : base % 16384u;
    return static_cast<uint16_t>(49152 + (off + p) % 16384);
}

void TxPaths::init(uint32_t n, uint16_t base_port, uint64_t tsc_hz, unsigned stamp_shift, uint32_t rails) {
    *this = TxPaths{};
    n_ = std::clamp<uint32_t>(n, 1, kMax);
    rails_ = std::clamp<uint32_t>(rails, 1, n_);
    uint16_t bits = 0;
    while ((1u << bits) < n_)
        bits++;
    mask_ = static_cast<uint16_t>((1u << bits) - 1);
    shift_ = stamp_shift;
    tsc_hz_ = tsc_hz;
    for (uint32_t p = 0; p < n_; p++)
        port_[p] = port_for(base_port, p);
    alive_ = n_;
    total_ = n_;
}

void TxPaths::bind(Congestion* cc, const CongestionConfig& cfg) {
    if (cc_ == cc)
        return;
    cc_ = cc;
    cc->spray();
    steering_ = false;
    target_ = us(cfg.target_us);
    beta_ = cfg.beta;
    max_md_ = cfg.max_md;
    ai_ = cfg.ai_bps_per_ms;
    min_bps_ = cfg.min_bps;
}

// A path's control window opens afresh (its samples from now on).
void TxPaths::open_window(Path& x, uint64_t now) {
    x.win_min = UINT64_MAX;
    x.win_n = 0;
    x.win_start = now;
}

// A steered path's rate cut to `keep` of itself; samples of packets sent
// before now no longer count.
void TxPaths::cut(Path& x, uint64_t now, double keep) {
    x.weight *= keep;
    x.cut_at = now;
    x.cuts++;
    open_window(x, now);
}

// Every path's rate, and so the session's, times k.
void TxPaths::scale(double k) {
    for (uint32_t p = 0; p < n_; p++)
        path_[p].weight *= k;
    total_ *= k;
}

uint32_t TxPaths::choose(uint64_t now, uint32_t avoid) {
    if (now >= next_rebalance_)
        rebalance(now);
    if (avoid == kNone && now >= next_probe_) {
        // The dead path whose probe is due: one packet, then it waits.
        uint32_t due = kNone;
        next_probe_ = UINT64_MAX;
        for (uint32_t p = 0; p < n_; p++) {
            Path& x = path_[p];
            if (!x.dead)
                continue;
            if (due == kNone && x.probe_at <= now) {
                due = p;
                x.probe_at = now + x.probe_gap;
                x.probe_gap = std::min(x.probe_gap * 2, us(kProbeMaxUs));
            }
            next_probe_ = std::min(next_probe_, x.probe_at);
        }
        if (due != kNone)
            return due;
    }
    // Smooth weighted round robin (nginx's): every live path earns its
    // weight, the richest goes and pays the round's total.
    uint32_t best = kNone;
    double sum = 0;
    for (uint32_t p = 0; p < n_; p++) {
        Path& x = path_[p];
        if (x.dead || p == avoid)
            continue;
        x.current += x.weight;
        sum += x.weight;
        if (best == kNone || x.current > path_[best].current)
            best = p;
    }
    if (best == kNone) // only `avoid` lives
        return avoid < n_ ? avoid : 0;
    path_[best].current -= sum;
    return best;
}

void TxPaths::sent(uint32_t p, uint32_t pkts, bool retx) {
    Path& x = path_[p];
    x.sent += pkts;
    if (retx)
        x.retx += pkts;
    x.win_sent += pkts;
    if (x.win_sent >= kLossWindow) {
        // The window closes: its loss fraction into the smoothed one, and
        // it stays as the previous window for the death test (NACKs come a
        // NACK delay and an RTT after their packets).
        const double frac = std::min(1.0, static_cast<double>(x.win_lost) / x.win_sent);
        x.loss = 0.5 * x.loss + 0.5 * frac;
        x.loss_slow += (frac - x.loss_slow) / 8;
        x.prev_sent = x.win_sent;
        x.prev_lost = x.win_lost;
        x.loss_news = true;
        x.win_sent = x.win_lost = 0;
    }
}

void TxPaths::on_echo(uint64_t now, uint16_t echo, uint32_t hold_ns) {
    const uint32_t p = echo & mask_;
    if (p >= n_)
        return;
    const uint64_t age_u = ((now >> shift_) - echo) & 0xFFFF; // stamps are 16 bits
    const uint64_t rtt = age_u << shift_;
    const uint64_t hold = static_cast<uint64_t>(hold_ns) * tsc_hz_ / 1000000000ull;
    if (hold >= rtt)
        return;
    if (last_sample_ != 0 && now - last_sample_ > gap_)
        gap_ = now - last_sample_;
    if (last_sample_ != 0 && now - last_sample_ > us(kStallUs))
        stall_end_ = now;
    last_sample_ = now;
    Path& x = path_[p];
    if (x.dead) {
        // A packet of it arrived: a probe, if it left after the path died
        // (an older one is news from before).
        if (now - rtt > x.dead_since)
            revive(now, p);
        return;
    }
    const uint64_t r = rtt - hold;
    x.samples++;
    x.fresh++;
    x.srtt = x.srtt == 0 ? r : (3 * x.srtt + r) / 4;
    x.min_rtt = std::min(x.min_rtt, r);
    if (now - rtt < x.cut_at)
        return;
    x.win_min = std::min(x.win_min, r);
    x.win_n++;
    // A queue 8 targets deep on this path, the feedback flowing (its packet
    // left after the last silence ended): near what a shallow bottleneck
    // holds, so cut now, not at the window's end, as the session's
    // controller does (congestion.h).
    const bool flowing = now - rtt > stall_end_;
    if (steering_ && base_ != UINT64_MAX && flowing && r > base_ + 8 * target_ && now - x.cut_at > x.srtt) {
        const double was = x.weight;
        cut(x, now, 1 - max_md_);
        x.weight = std::max(x.weight, floor_);
        total_ -= was - x.weight;
        cc_->steer(total_);
        told_bps_ = cc_->rate_bps();
    }
}

void TxPaths::on_lost(uint64_t now, uint32_t p, uint32_t pkts) {
    Path& x = path_[p];
    x.lost += pkts;
    x.win_lost += pkts;
    const uint32_t lost = x.win_lost + x.prev_lost;
    if (!x.dead && lost >= kDeadLost && 2 * lost >= x.win_sent + x.prev_sent)
        kill(now, p);
}

void TxPaths::note_probe(uint32_t p, uint16_t flow, uint32_t msg_id, uint32_t pkt) {
    Path& x = path_[p];
    if (!x.probe.pending)
        probes_out_++;
    x.probe = {flow, static_cast<uint16_t>(pkt), msg_id, true};
    x.probes++;
}

void TxPaths::probe_done(uint64_t now, uint32_t p, bool arrived) {
    Path& x = path_[p];
    if (!x.probe.pending)
        return;
    x.probe.pending = false;
    probes_out_--;
    if (arrived && x.dead)
        revive(now, p);
}

void TxPaths::kill(uint64_t now, uint32_t p) {
    if (alive_ <= 1)
        return; // the last path: the flows' timers judge the peer, not this
    Path& x = path_[p];
    x.dead = true;
    x.deaths++;
    x.dead_since = now;
    total_ -= x.weight;
    x.weight = 0;
    x.current = 0;
    x.probe_gap = us(kProbeFirstUs);
    x.probe_at = now + x.probe_gap;
    next_probe_ = std::min(next_probe_, x.probe_at);
    alive_--;
}

void TxPaths::revive(uint64_t now, uint32_t p) {
    Path& x = path_[p];
    if (x.probe.pending) {
        x.probe.pending = false;
        probes_out_--;
    }
    x.dead = false;
    // A quarter of a mean share to start with; its delay earns it the rest.
    x.weight = alive_ ? std::max(kMinWeight, 0.25 * total_ / alive_) : 1;
    x.current = 0;
    x.loss = 0;
    x.win_sent = x.win_lost = x.prev_sent = x.prev_lost = 0;
    x.srtt = 0;
    x.fresh = 0;
    x.cut_at = now;
    open_window(x, now);
    total_ += x.weight;
    alive_++;
}

void TxPaths::rebalance(uint64_t now) {
    next_rebalance_ = now + us(kRebalanceUs);
    if (cc_ != nullptr && !steering_ && !cc_->slow_start())
        start_steering(now);
    if (steering_) {
        steer(now);
        return;
    }
    uint64_t base = UINT64_MAX;
    double wq = 0, w = 0;
    for (uint32_t p = 0; p < n_; p++)
        if (!path_[p].dead)
            base = std::min(base, path_[p].min_rtt);
    if (base != UINT64_MAX) {
        for (uint32_t p = 0; p < n_; p++) {
            const Path& x = path_[p];
            if (!x.dead && x.srtt != 0) {
                wq += x.weight * static_cast<double>(x.srtt - std::min(x.srtt, base));
                w += x.weight;
            }
        }
    }
    const double mean_q = w > 0 ? wq / w : 0;
    const double scale = std::max(mean_q, static_cast<double>(us(kDelayScaleUs)));
    double sum = 0;
    for (uint32_t p = 0; p < n_; p++) {
        Path& x = path_[p];
        if (x.dead)
            continue;
        double f = 1;
        if (x.fresh >= kMinFresh && base != UINT64_MAX) {
            const double q = static_cast<double>(x.srtt - std::min(x.srtt, base));
            f = std::clamp(1 - kDelayGain * (q - mean_q) / scale, 1 - kDelayStep, 1 + kDelayStep);
        }
        f *= 1 - std::min(kLossStep, kLossGain * x.loss);
        x.weight *= f;
        if (x.fresh < kMinFresh) // too few samples to judge it by: back towards the mean, to be measured again
            x.weight += kPull * (total_ / alive_ - x.weight);
        x.fresh = 0;
        sum += x.weight;
    }
    // Back to a mean of 1, within the floor and the ceiling.
    total_ = 0;
    for (uint32_t p = 0; p < n_; p++) {
        Path& x = path_[p];
        if (x.dead)
            continue;
        x.weight = sum > 0 ? std::clamp(x.weight * alive_ / sum, kMinWeight, kMaxWeight) : 1;
        total_ += x.weight;
    }
    cap_lossy();
}

// A path that loses more than the others (kLossExcess): no more than the
// mean weight of the others less its loss's toll (kLossGain: 2% lost, 4%
// less), so below an equal share.
void TxPaths::cap_lossy() {
    double mean_loss = 0;
    for (uint32_t p = 0; p < n_; p++)
        if (!path_[p].dead)
            mean_loss += path_[p].loss_slow;
    mean_loss = alive_ ? mean_loss / alive_ : 0;
    for (uint32_t p = 0; p < n_ && alive_ > 1; p++) {
        Path& x = path_[p];
        if (x.dead || x.loss_slow <= mean_loss + kLossExcess)
            continue;
        const double others = (total_ - x.weight) / (alive_ - 1) * (1 - std::min(kLossStep, kLossGain * x.loss_slow));
        if (x.weight > others) {
            total_ -= x.weight - others;
            x.weight = others;
        }
    }
}

// Steering begins where the session's slow start ended: its rate, shared
// out as the weights stood.
void TxPaths::start_steering(uint64_t now) {
    steering_ = true;
    const double r = cc_->rate_bps();
    for (uint32_t p = 0; p < n_; p++) {
        Path& x = path_[p];
        if (x.dead)
            continue;
        x.weight = total_ > 0 ? r * x.weight / total_ : r / alive_;
        x.cut_at = now;
        open_window(x, now);
    }
    total_ = r;
    told_bps_ = r;
    sent_mark_ = cc_->sent_bytes();
    last_steer_ = now;
    gap_ = 0;
}

// Each path's rate from its own window (kSteerWindowUs), the session's
// their sum.
void TxPaths::steer(uint64_t now) {
    // The controller moved its rate since we set it: a timeout's cut, or
    // its undoing. Every path takes it.
    const double cur = cc_->rate_bps();
    if (told_bps_ > 0 && total_ > 0 && (cur < told_bps_ * 0.999 || cur > told_bps_ * 1.001))
        scale(cur / told_bps_);
    // Only while the rate limits: a session that sends less must not earn
    // a rate it never tried (as the controller's increase).
    const double dt_s = static_cast<double>(now - last_steer_) / static_cast<double>(tsc_hz_);
    const bool limited = static_cast<double>(cc_->sent_bytes() - sent_mark_) * 8 >= total_ * dt_s * 0.5;
    const bool stalled = gap_ > us(kStallUs);
    uint64_t base = UINT64_MAX;
    for (uint32_t p = 0; p < n_; p++)
        if (!path_[p].dead)
            base = std::min(base, path_[p].min_rtt);
    base_ = base;
    const double mean = alive_ ? total_ / alive_ : 0;
    for (uint32_t p = 0; p < n_; p++) {
        Path& x = path_[p];
        x.fresh = 0;
        if (x.dead)
            continue;
        // Heavy loss: congestion whatever the delay says, judged first and
        // without samples (a path whose packets are lost echoes none), once
        // per loss window. Judged only with its window's samples, and with
        // the stalls of shared CPUs discounting every queue, an overloaded
        // link's paths lost 13-96% of their packets, uncut, in a case-c
        // run (512 Mbit/s).
        if (x.loss_news) {
            x.loss_news = false;
            if (x.loss > kHeavyLoss) {
                cut(x, now, 1 - kHeavyLossMd);
                continue;
            }
        }
        if (x.win_n == 0 || (x.win_n < kMinFresh && now - x.win_start < us(kSteerWindowUs)))
            continue;
        uint64_t q = x.win_min > base ? x.win_min - base : 0;
        if (stalled)
            q = q > gap_ ? q - gap_ : 0;
        if (q > target_) {
            const double excess = static_cast<double>(q - target_) / static_cast<double>(x.win_min);
            cut(x, now, 1 - std::min(max_md_, beta_ * excess));
            continue;
        }
        if (limited) {
            // Its part of the additive step for the window's time, at most
            // kSteerWindowUs of it: a window that waited long for its
            // samples earns no more than one that filled in time.
            const uint64_t t = std::min(now - x.win_start, us(kSteerWindowUs));
            x.weight += ai_ / alive_ * static_cast<double>(t) * 1000 / static_cast<double>(tsc_hz_);
        }
        open_window(x, now);
    }
    // A floor, so that every live path is still measured.
    floor_ = std::max(alive_ ? min_bps_ / alive_ : 0, kMinWeight * mean);
    total_ = 0;
    for (uint32_t p = 0; p < n_; p++) {
        Path& x = path_[p];
        if (x.dead)
            continue;
        x.weight = std::max(x.weight, floor_);
        total_ += x.weight;
    }
    cap_lossy();
    cc_->steer(total_);
    told_bps_ = cc_->rate_bps();
    if (total_ > 0 && told_bps_ != total_) // the controller's floor or ceiling
        scale(told_bps_ / total_);
    sent_mark_ = cc_->sent_bytes();
    last_steer_ = now;
    gap_ = 0;
}

PathView TxPaths::view(uint32_t p) const {
    const Path& x = path_[p];
    PathView v;
    v.path = static_cast<uint16_t>(p);
    v.port = port_[p];
    v.rail = static_cast<uint16_t>(rail(p));
    v.sent = x.sent;
    v.retx = x.retx;
    v.lost = x.lost;
    v.probes = x.probes;
    v.samples = x.samples;
    v.deaths = x.deaths;
    v.srtt_us = tsc_hz_ ? static_cast<double>(x.srtt) * 1e6 / static_cast<double>(tsc_hz_) : 0;
    v.share = x.dead || total_ <= 0 ? 0 : x.weight / total_;
    v.rate_bps = steering_ && !x.dead ? x.weight : 0;
    v.cuts = x.cuts;
    v.dead = x.dead;
    return v;
}

} // namespace tailmark
