// Congestion control of one session in one Sender: a paced rate, set from the
// queueing delay that the receiver's ACKs let the sender measure, with loss
// and retransmission timeouts as the backstops.
//
// Why delay, and why a rate (README, "Congestion control"):
//  - a bottleneck queue fills before it drops: the delay says "too fast"
//    while nothing is lost yet, and a queue held near a small target leaves
//    room for other traffic (64 B messages of another session behind a bulk
//    transfer wait for the target, not for a full queue);
//  - loss alone cannot tell a congested queue from a lossy wire; a loss
//    counts as congestion only when the delay agrees, so random loss costs
//    its retransmission and not the rate;
//  - a message is cut into packets by the Sender, which can space them:
//    a rate with TSC pacing sends a window as a stream, not as one burst
//    into a shallow queue.
//
// The RTT sample: every data packet's IPv4 identification carries its send
// stamp (the TSC in units of 2^shift cycles, about 1 us, 16 bits); the
// receiver echoes the newest one with the time it held it (control.h); the
// sender subtracts the hold. No per-packet state on either side.
//
// The control law (Swift-like, per interval of max(interval, srtt)): with
// q = the interval's smallest RTT sample - the path's base RTT,
//   q > target:           rate *= 1 - min(max_md, beta * (q - target) / rtt)
//   a loss and q > target/2, or NACKs for over a tenth of what the
//   window sent:          rate *= 1 - loss_md
//   a loss in a window whose delay is not to be trusted: the rate holds
//   slow start ends at the first sample with a queue over target/2, and
//   the rate goes back to the one before the last doubling
//   else (rate-limited):  slow start: rate *= 2; then rate += ai per ms, or
//                         one frame per RTT (at most rate / 32 per RTT)
//                         where that is more and no shaper is known;
//                         behind a shaper (a cut for a queue found the rate
//                         over 1.25x what the path held in the last 32 ms),
//                         ai / 8 for 64 ms past what the path held, after
//                         each cut; below what the path held (the knee), at
//                         least a 25th of the knee per ms
// and a retransmission timeout halves it (undone by the first sample after
// it, if that sample says the silence was not the path's). A cut takes the rate no higher
// than what the path delivered in the interval, or, when the feedback
// stopped for over 1 ms in it (the receiver descheduled), than the best of
// the last 10-20 ms. The smallest sample of an interval, not the mean: a
// receiver descheduled for a time slice delays some samples; a standing
// queue delays all of them. An interval whose feedback stopped for over
// 1 ms counts that gap off its smallest sample: every sample of it may be
// late by the slice, with no queue behind it. One sample 8 targets over the
// base, the feedback flowing, cuts at once (a shallow queue near overflow). An interval decides only on samples that
// arrived over at least 100 us: a peer descheduled for a time slice answers
// on waking with one burst of late samples, and its next ACK is on time.
// Samples of packets sent before the last decrease are left out: they show
// the queue that decrease answered (Swift's one decrease per RTT). Equal
// additive steps and equal multiplicative cuts bring two sessions to equal
// rates (AIMD).
//
// Owned by the Sender's lcore: no atomics but the published rate.
#pragma once

#include <cstdint>

namespace tailmark {

struct CongestionConfig {
    bool enabled = true;
    uint64_t tsc_hz = 0;
    double start_bps = 50e6;    // the first rate, then slow start (doubling per interval)
    double min_bps = 1e6;
    double max_bps = 100e9;     // the port's line rate, where known
    uint64_t target_us = 500;   // queueing delay tolerated above the base RTT
    uint64_t interval_us = 500; // the shortest control interval
    double ai_bps_per_ms = 5e6; // additive increase, per ms of time rate-limited without congestion
    // The session's largest frame (bytes; 0: ai_bps_per_ms alone). Off a
    // known shaper, the additive step is at least one frame per RTT, as
    // Reno's and Swift's windows grow, and at most 1/kFrameShare of the
    // rate per RTT (increase() says why).
    uint32_t frame_bytes = 0;
    double beta = 0.4;          // decrease per unit of relative excess delay (congestion.md: why 0.4)
    double max_md = 0.5;        // the most one decrease takes
    double loss_md = 0.15;      // the decrease on a loss the delay confirms
    uint64_t step_us = 20;      // a pacing step: this long at the current rate (at least 2 packets)
    uint64_t slack_us = 50;     // lateness the pacer may catch up (poll jitter), as a burst
    // A session of one path where the lcore naps: its step, and as much
    // lateness caught up (0: step_us and slack_us). A sprayed session keeps
    // step_us (TxPaths::bind: spray()). engine/config.h says why.
    uint64_t nap_step_us = 0;
};

// What happened at the end of an interval.
enum class CcEvent : uint8_t { None, Increase, Decrease, LossDecrease };

class Congestion {
public:
    // Stamps: the TSC >> shift, about a microsecond (the IPv4 ID's 16 bits
    // wrap after ~65 ms: RTTs beyond that alias, and are not expected).
    static unsigned stamp_shift(uint64_t tsc_hz);

    void init(const CongestionConfig& cfg, unsigned shift, uint64_t now);

    // --- pacing (per packet burst) ---
    bool may_send(uint64_t now) const { return now >= next_tsc_; }
    uint64_t next_send() const { return next_tsc_; }
    // Slow start heard RTT samples, then sent for over kStallUs without one
    // more: no new data until one comes, for up to kSilentUs. The rate is
    // open loop, and one that doubled just before the peer was descheduled
    // for a time slice went on into a shallow queue for the whole slice (a
    // 64 KiB-burst tbf at 200 Mbit/s: 174-1335 frames dropped over a
    // 4.5-17.5 ms silence, against 0-18 when it waits;
    // tests/lib/test_congestion_shaper.cc). Waiting is bounded: every
    // packet since may have been lost (another sender's slow start filled
    // the queue), and a message not yet wholly sent has no timer armed;
    // after kSilentUs slow start starts over (end_silence). Before the
    // first sample the rate is start_bps, which doubles only on samples.
    // Retransmissions are not held.
    bool silent(uint64_t now) {
        if (!slow_start_ || srtt_ == 0 || unanswered_ == 0 || now - unanswered_ <= stall_)
            return false;
        if (now - unanswered_ <= silent_max_)
            return true;
        end_silence(now);
        return false;
    }
    uint32_t step_bytes() const { return step_bytes_; }
    // Sprayed (tx_paths.h): step_us and slack_us, not nap_step_us. Each of
    // the session's paths steers its own rate by its own queue, and with
    // steps of up to 64 KiB two rails' shares of a session spread wider
    // (51-75 % on one in 7 tests/torch/rails.sh runs against 50-67 % in 4,
    // and one CI run below its 25 % floor).
    void spray();
    // `bytes` went out (frames, at now): the next step waits bytes / rate.
    void sent(uint64_t now, uint64_t bytes) {
        const uint64_t floor = now > slack_ ? now - slack_ : 0;
        next_tsc_ = (next_tsc_ > floor ? next_tsc_ : floor) + ((bytes * cpb_fp_) >> 16);
        win_sent_ += bytes;
        sent_total_ += bytes;
        if (unanswered_ == 0)
            unanswered_ = now;
        sent_at_[(now >> (shift_ + kSlotShift)) & (kSlots - 1)] = sent_total_;
    }

    // --- feedback ---
    // An authentic ACK/NACK's echo: the RTT is now - its stamp - its hold.
    // Returns what the end of an interval decided.
    CcEvent on_echo(uint64_t now, uint16_t echo, uint32_t hold_ns);
    // An RTT sample of a packet sent at `sent` (tests: sent = now - rtt).
    CcEvent on_rtt(uint64_t now, uint64_t rtt, uint64_t sent);
    CcEvent on_rtt(uint64_t now, uint64_t rtt) { return on_rtt(now, rtt, now - rtt); }
    // A NACK: `bytes` of frames reported missing (the packets it asks for),
    // all sent by `sent`. Packets sent before the last cut were lost in the
    // episode that cut answered (TCP's recovery: one decrease per loss
    // episode): not news for the rate. Counted, the repair of a slow start
    // that overshot a 64 KiB-burst tbf (580 packets dropped) cut at every
    // interval for 2 s, at 1 Mbit/s, while the path carried 100
    // (congestion.sh case 4: the bulk session at 1.1-40 Mbit/s in 3 of 63
    // runs, against 88-92).
    void on_loss(uint64_t bytes, uint64_t sent) {
        if (sent < cut_tsc_)
            return;
        win_loss_ = true;
        win_lost_ += bytes;
    }
    // A retransmission timeout of `rto` cycles: half the rate, if the path
    // fell silent: packets went out and no RTT sample came for a whole rto
    // since the first of them (true: cut). A paced session at a low rate is
    // quiet between its steps, which is not silence.
    bool on_timeout(uint64_t now, uint64_t rto);

    // Steered (a sprayed session, tx_paths.h): past slow start the rate is
    // the sum of its paths' rates, each set from that path's own queue, so
    // that one overloaded link slows its own paths and not the session. The
    // controller then takes samples (srtt, base) and a timeout's cut, and
    // decides nothing else; the paths read the cut off rate_bps().
    void steer(double bps) {
        steered_ = true;
        set_rate(bps);
    }
    bool steered() const { return steered_; }
    uint64_t sent_bytes() const { return sent_total_; } // frames' bytes, ever

    double rate_bps() const { return rate_; }
    double delivery_bps() const { return delivery_; } // the path's measured rate (0: none yet)
    uint64_t srtt() const { return srtt_; }      // cycles (0: no sample yet)
    uint64_t base_rtt() const { return base_ < base_prev_ ? base_ : base_prev_; }
    uint64_t last_rtt() const { return last_rtt_; }
    bool slow_start() const { return slow_start_; }

private:
    CcEvent update(uint64_t now);
    bool drained(uint64_t now, uint64_t q);
    void end_silence(uint64_t now);
    void set_rate(double bps);
    void cut_to(uint64_t now, double bps, bool queue); // queue: the delay showed one (not a loss)
    void note_delivered(uint64_t stamp_units);
    double window_delivery(uint64_t now) const;
    void note_delivery(uint64_t now, double bps);
    void open_window(uint64_t now);
    double increase(uint64_t now, double dt);
    bool rate_limited(uint64_t now) const;
    void note_held(uint64_t now);

    // The delivery rate, from the echoes alone: what the sender had sent
    // when it stamped the echoed packet has arrived (one path, in order),
    // so the bytes sent by each 2^kSlotShift-stamp slot, kept for kSlots
    // slots (about 16 ms), say how much got through by each echo.
    static constexpr unsigned kSlotShift = 5;
    static constexpr uint32_t kSlots = 512;
    uint64_t sent_total_ = 0;
    uint64_t sent_at_[kSlots] = {};
    uint64_t delivered_ = 0;     // bytes known arrived
    uint64_t win_delivered_ = 0; // ... at the window's start
    double delivery_ = 0;        // bits/s over the last window whose feedback flowed
    // The best of those windows' figures in the last 10-20 ms (two halves):
    // the cap of a window in which the feedback stopped (see cut_to).
    static constexpr uint64_t kBestWindowUs = 10000;
    static constexpr uint64_t kStallUs = 1000; // 5 ACK feedback periods
    static constexpr uint64_t kHeavyLoss = 10; // NACKed bytes over 1/kHeavyLoss of a window's: congestion
    double deliv_best_ = 0, deliv_prev_ = 0;
    uint64_t deliv_roll_ = 0;
    // What the path delivered over the last whole kHeldUs, less the
    // feedback's silences over stall_ (time slices, not the path): a token
    // bucket's burst (64 KiB) adds at most 16 Mbit/s to it.
    static constexpr uint64_t kHeldUs = 32000;
    double held_ = 0;
    uint64_t held_start_ = 0, held_delivered_ = 0, held_stalled_ = 0;
    // The knee is held_: above it the rate climbs by 1/kProbeSlow of the
    // additive step for kProbeUs after it first passes it since the last
    // cut, then by the whole step until the next cut (increase).
    static constexpr uint64_t kProbeUs = 64000;
    static constexpr double kProbeSlow = 8;
    // The frame-per-RTT step's cap, a share of the rate per RTT: a 100 or
    // 200 Mbit/s path with a 0.5 ms RTT holds a few frames, and a frame
    // per RTT added a quarter of the rate at a time.
    static constexpr double kFrameShare = 32;
    // Below the knee, the step is at least kKneeStep x the knee per second
    // (a 25th of it per ms; increase() says why).
    static constexpr double kKneeStep = 40;
    bool probe_armed_ = false; // a cut since the last slow probe began
    // Only behind a shaper: a cut for a queue that found the rate over
    // kHiddenRatio x what the path held (a queue the bucket hid while the
    // rate climbed) says one is on the path, for kShaperUs. Elsewhere (the receiver's CPU
    // the limit, a lossy wire) cuts find the rate near what the path held,
    // and slow probes after each only cost the rate (the lossy wire of
    // congestion.sh case 5: 285-340 Mbit/s against 424-492).
    static constexpr double kHiddenRatio = 1.25;
    static constexpr uint64_t kShaperUs = 10000000;
    uint64_t shaper_until_ = 0;
    uint64_t probe_since_ = 0; // when the slow probe began
    uint64_t stall_ = 0;   // cycles between samples that make a window's figure untrusted
    static constexpr uint64_t kSilentUs = 5000; // the longest slow start waits for feedback (silent): the default RTO
    uint64_t silent_max_ = 0;
    uint64_t win_gap_ = 0; // the longest time between two samples in this window
    uint64_t stall_end_ = 0; // the latest sample that ended a silence (a gap over stall_)
    double undo_bps_ = 0;    // the rate before a timeout's cut, until the next sample judges it
    uint64_t gap_avg_ = 0;   // the usual time between two samples (cycles; gaps under stall_, 1/8 EWMA)

    CongestionConfig cfg_;
    unsigned shift_ = 11;
    // pacer
    uint64_t next_tsc_ = 0;
    uint64_t cpb_fp_ = 0;    // cycles per byte, 16.16 fixed point
    uint32_t step_bytes_ = 0;
    uint64_t step_us_ = 0;   // cfg_.step_us, or nap_step_us till spray()
    uint64_t slack_ = 0;
    // controller
    double rate_ = 0;        // bits per second
    bool slow_start_ = true;
    // After slow start, until a window first shows the queue gone (under
    // target/2): the queue its overshoot left drains, and the cuts meanwhile
    // compound (200 Mbit/s tbf: 380, 179, 89, 59 Mbit/s over 14 ms, then
    // 30 ms of additive steps back). What the path delivered while that
    // queue stood is its rate (a standing queue keeps the bottleneck busy):
    // once drained, the rate goes back to it.
    bool draining_ = false;
    double drain_path_ = 0; // bits/s delivered in the last window with the queue standing
    bool steered_ = false;
    uint64_t target_ = 0, interval_ = 0; // cycles
    uint64_t base_ = UINT64_MAX, base_prev_ = UINT64_MAX, base_roll_ = 0;
    uint64_t srtt_ = 0, last_rtt_ = 0;
    uint64_t sample_tsc_ = 0; // the latest sample's arrival
    uint64_t unanswered_ = 0; // the first send since the latest sample (0: none)
    uint64_t cut_tsc_ = 0;    // the last decrease: samples of packets sent before it do not decide
    uint64_t win_start_ = 0, win_min_ = UINT64_MAX, win_sent_ = 0;
    // The window's first deciding sample arrived at win_first_; it closes
    // only once its samples span kSpanUs (half the receiver's ACK feedback
    // period), so the ACK after a wake-up's late burst is in it (on_rtt).
    static constexpr uint64_t kSpanUs = 100;
    uint64_t win_first_ = 0, span_ = 0;
    bool win_loss_ = false;
    uint64_t win_lost_ = 0; // bytes the window's NACKs asked for (repeats counted again)
};

} // namespace tailmark
