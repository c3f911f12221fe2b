// Congestion: the pacer's spacing and the control law, driven by hand with a
// 1 GHz "TSC" (one cycle = one nanosecond), so every figure below is exact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>

#include "tailmark/congestion.h"

using namespace tailmark;

namespace {

constexpr uint64_t kHz = 1000000000;
constexpr uint64_t kUs = 1000; // cycles per microsecond

CongestionConfig config() {
    CongestionConfig c;
    c.tsc_hz = kHz;
    c.start_bps = 200e6; // 25 MB/s: 40 ns per byte
    c.min_bps = 1e6;
    c.max_bps = 100e9;
    c.target_us = 500;
    c.interval_us = 500;
    c.ai_bps_per_ms = 10e6;
    return c;
}

// A controller at t = 0 whose base RTT is 100 us (one sample, window closed).
Congestion started(const CongestionConfig& cfg = config()) {
    Congestion cc;
    cc.init(cfg, Congestion::stamp_shift(kHz), 0);
    return cc;
}

// At 200 Mbit/s, one sample at 0 and a send at 1 ms, then silent: the
// timeout at 6 ms (RTO 5 ms) halved it.
Congestion cut_by_timeout(const CongestionConfig& cfg = config()) {
    Congestion cc = started(cfg);
    cc.on_rtt(1, 100 * kUs);
    cc.sent(1 + 1000 * kUs, 100);
    REQUIRE(cc.on_timeout(1 + 6000 * kUs, 5000 * kUs));
    REQUIRE(cc.rate_bps() == 100e6);
    return cc;
}

// Slow start ended by a sample with a queue over half the target (at
// 200 us, 260 us of it over the 100 us base): the rate halved (no delivery
// figure caps it: on_rtt carries none). Returns the rate.
double leave_slow_start(Congestion& cc) {
    cc.on_rtt(1, 100 * kUs);
    cc.sent(1, 1000);
    REQUIRE(cc.on_rtt(1 + 200 * kUs, 360 * kUs) == CcEvent::Decrease);
    REQUIRE_FALSE(cc.slow_start());
    return cc.rate_bps();
}

} // namespace

TEST_CASE("stamps: 2^shift cycles is the largest power of two not above a microsecond", "[congestion]") {
    CHECK(Congestion::stamp_shift(1000000000) == 9);  // 512 ns
    CHECK(Congestion::stamp_shift(2100000000) == 11); // 975 ns
    CHECK(Congestion::stamp_shift(4096000000) == 12);
    CHECK(Congestion::stamp_shift(1000000) == 0);
}

TEST_CASE("pacer: bytes / rate apart, lateness caught up for at most slack_us", "[congestion]") {
    Congestion cc = started();
    CHECK(cc.rate_bps() == 200e6);
    CHECK(cc.step_bytes() == 3000); // 20 us at 25 MB/s is 500 B: two full frames at least
    REQUIRE(cc.may_send(0));
    cc.sent(0, 1000); // 40 ns per byte
    CHECK_FALSE(cc.may_send(39999));
    CHECK(cc.may_send(40000));
    cc.sent(40000, 1500);
    CHECK_FALSE(cc.may_send(99999));
    CHECK(cc.may_send(100000));
    // Late by 900 us: the pacer forgives 50 us of it (a burst of 1250 B), not more.
    cc.sent(1000000, 1000); // from 950000: next at 990000
    CHECK(cc.may_send(1000000));
    cc.sent(1000000, 1000); // 1030000
    CHECK_FALSE(cc.may_send(1029999));
    CHECK(cc.may_send(1030000));
}

TEST_CASE("echo: the RTT is now - the stamp - the hold, across the 16-bit wrap", "[congestion]") {
    Congestion cc = started();
    // Sent at 512 * 65530 (stamp 65530), echoed after 20 us at the receiver,
    // back at 512 * (65536 + 1000): 1006 units later, 20 us of them held.
    const uint64_t sent = 512ull * 65530, now = 512ull * (65536 + 1000);
    cc.on_echo(now, static_cast<uint16_t>(sent >> 9), 20000);
    CHECK(cc.last_rtt() == now - sent - 20000);
    CHECK(cc.base_rtt() == now - sent - 20000);
    // A hold longer than the stamp's age: no sample.
    cc.on_echo(now + 512, static_cast<uint16_t>((now >> 9) & 0xFFFF), 600);
    CHECK(cc.last_rtt() == now - sent - 20000);
}

TEST_CASE("control law: slow start doubles, a queue above the target cuts in proportion", "[congestion]") {
    Congestion cc = started();
    CHECK(cc.on_rtt(1, 100 * kUs) == CcEvent::None); // base 100 us; the first interval runs to 500 us
    CHECK(cc.rate_bps() == 200e6);
    CHECK(cc.slow_start());
    // Rate-limited (sent at the rate for the interval), no queue: doubled.
    cc.sent(1, 200e6 / 8 * 0.0005); // 500 us worth
    CHECK(cc.on_rtt(1 + 250 * kUs, 100 * kUs) == CcEvent::None); // inside the interval
    CHECK(cc.on_rtt(1 + 500 * kUs, 110 * kUs) == CcEvent::Increase);
    CHECK(cc.rate_bps() == 400e6);
    // A queue: slow start ends at once, back to 200 Mbit/s (below).
    cc.sent(1 + 500 * kUs, 1000);
    CHECK(cc.on_rtt(1 + 800 * kUs, 1000 * kUs) == CcEvent::Decrease);
    CHECK(cc.rate_bps() == 200e6);
    CHECK_FALSE(cc.slow_start());
    // Packets sent before that cut show the queue it answered: left out.
    CHECK(cc.on_rtt(1 + 1000 * kUs, 1000 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(1 + 1300 * kUs, 1200 * kUs) == CcEvent::None);
    CHECK(cc.rate_bps() == 200e6);
    // Sent after it, and the queue still 900 us (target 500): rate x (1 -
    // beta x 400/1000), the interval (500 us) being over and its samples
    // spanning 100 us (one sample alone does not decide).
    CHECK(cc.on_rtt(1 + 1800 * kUs, 1000 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(1 + 1900 * kUs, 1000 * kUs) == CcEvent::Decrease);
    CHECK(cc.rate_bps() == Approx(200e6 * (1 - CongestionConfig{}.beta * 400.0 / 1000.0)));
}

TEST_CASE("control law: slow start ends at the first sample with a queue of half the target, halved",
          "[congestion]") {
    Congestion cc = started();
    cc.on_rtt(1, 100 * kUs);
    cc.sent(1, 1e6);
    CHECK(cc.on_rtt(1 + 500 * kUs, 100 * kUs) == CcEvent::Increase);
    CHECK(cc.rate_bps() == 400e6);
    const uint64_t t = 1 + 500 * kUs;
    cc.sent(t, 1e6);
    CHECK(cc.on_rtt(t + 100 * kUs, 340 * kUs) == CcEvent::None); // 240 us of queue: under half the target
    CHECK(cc.slow_start());
    CHECK(cc.on_rtt(t + 200 * kUs, 360 * kUs) == CcEvent::Decrease); // 260 us: over
    CHECK(cc.rate_bps() == 200e6);
    CHECK_FALSE(cc.slow_start());
    // The interval restarted there: additive from now on.
    cc.sent(t + 200 * kUs, 1e6);
    CHECK(cc.on_rtt(t + 600 * kUs, 360 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(t + 700 * kUs, 360 * kUs) == CcEvent::Increase); // + 10 Mbit/s per ms
    CHECK(cc.rate_bps() == Approx(205e6));
}

TEST_CASE("control law: the smallest sample of an interval decides (a descheduled receiver is not a queue)",
          "[congestion]") {
    Congestion cc = started();
    cc.on_rtt(1, 100 * kUs);
    cc.sent(1, 1e6);
    CHECK(cc.on_rtt(1 + 500 * kUs, 100 * kUs) == CcEvent::Increase); // the base RTT's interval closed
    CHECK(cc.on_rtt(1 + 600 * kUs, 400 * kUs) == CcEvent::Decrease);  // slow start over: 200 Mbit/s
    const uint64_t t0 = 1 + 600 * kUs;
    cc.sent(t0, 1e6);
    CHECK(cc.on_rtt(t0 + 100 * kUs, 4000 * kUs) == CcEvent::None); // held up 4 ms
    CHECK(cc.on_rtt(t0 + 200 * kUs, 3000 * kUs) == CcEvent::None);
    // The interval has grown to the smoothed RTT (822 us); one clean sample: no queue.
    CHECK(cc.on_rtt(t0 + 800 * kUs, 150 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(t0 + 900 * kUs, 150 * kUs) == CcEvent::Increase);
    CHECK(cc.rate_bps() == Approx(209e6)); // + 10 Mbit/s per ms, 0.9 ms
}

TEST_CASE("control law: additive increase per ms, only while the rate limits; loss counts only with delay",
          "[congestion]") {
    CongestionConfig cfg = config();
    Congestion cc = started(cfg);
    cc.on_rtt(1, 100 * kUs);
    // Nothing sent since the sample: quiet, not silent (a paced session
    // between its steps); no cut however long.
    CHECK_FALSE(cc.on_timeout(1 + 20000 * kUs, 5000 * kUs));
    // Sent, and a timeout within its RTO of that send: no cut yet.
    cc.sent(1 + 20000 * kUs, 100);
    CHECK_FALSE(cc.on_timeout(1 + 24999 * kUs, 5000 * kUs));
    CHECK(cc.rate_bps() == 200e6);
    CHECK(cc.slow_start());
    // Silent for the whole RTO since that send: half, and slow start is over.
    const uint64_t t = 1 + 25000 * kUs;
    CHECK(cc.on_timeout(t, 5000 * kUs));
    CHECK(cc.rate_bps() == 100e6);
    CHECK_FALSE(cc.slow_start());
    // Sent little (application-limited): no increase. (Each interval below
    // has two samples 100 us apart: one alone does not decide.) The first
    // sample, of a packet sent since the cut with no queue, says the
    // silence was not the path's: the cut is undone; slow start stays over.
    cc.sent(t, 100);
    CHECK(cc.on_rtt(t + 400 * kUs, 100 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(t + 500 * kUs, 100 * kUs) == CcEvent::None);
    CHECK(cc.rate_bps() == 200e6);
    CHECK_FALSE(cc.slow_start());
    // Sent at the rate: + 10 Mbit/s per ms, for 0.5 ms.
    cc.sent(t + 500 * kUs, 200e6 / 8 * 0.0005);
    CHECK(cc.on_rtt(t + 900 * kUs, 100 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(t + 1000 * kUs, 100 * kUs) == CcEvent::Increase);
    CHECK(cc.rate_bps() == Approx(205e6));
    // A loss with no queue (a lossy wire: one packet of 1 MB): not congestion.
    cc.sent(t + 1000 * kUs, 1e6);
    cc.on_loss(1500, t + 1000 * kUs);
    CHECK(cc.on_rtt(t + 1400 * kUs, 100 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(t + 1500 * kUs, 100 * kUs) == CcEvent::Increase);
    // A loss with the queue past half the target: 15% off.
    const double r = cc.rate_bps();
    cc.sent(t + 1500 * kUs, 1e6);
    cc.on_loss(1500, t + 1500 * kUs);
    CHECK(cc.on_rtt(t + 1900 * kUs, 400 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(t + 2000 * kUs, 400 * kUs) == CcEvent::LossDecrease);
    CHECK(cc.rate_bps() == Approx(r * 0.85));
}

// Off a known shaper, a rate-limited window with no queue adds one frame per
// RTT (the RTT at least the 500 us interval), at most a 32nd of the rate per
// RTT, and never less than ai (10 Mbit/s per ms here). Each case: slow start
// at 2R ends at R, then one window of 500 us sent at R.
TEST_CASE("control law: off a shaper, the step is a frame per RTT, at most a 32nd of the rate", "[congestion]") {
    struct Case {
        uint32_t frame;
        double rate, after;
    };
    for (const Case c : {
             Case{1500, 100e6, 105e6},                  // ai (5 Mbit/s a window) over a 32nd (3.125)
             Case{1500, 400e6, 400e6 * (1 + 1.0 / 32)}, // a 32nd (12.5) under the frame (12000 bits / 500 us: 24)
             Case{1500, 1e9, 1e9 + 24e6},               // the frame
             Case{9000, 1e9, 1e9 * (1 + 1.0 / 32)},     // a 32nd (31.25) under the frame (144)
             Case{9000, 8e9, 8e9 + 144e6},              // the frame
             Case{0, 1e9, 1e9 + 5e6},                   // no frame size: ai alone
         }) {
        CongestionConfig cfg = config();
        cfg.frame_bytes = c.frame;
        cfg.start_bps = 2 * c.rate;
        Congestion cc = started(cfg);
        REQUIRE(leave_slow_start(cc) == c.rate);
        const uint64_t t = 1 + 200 * kUs;
        cc.sent(t, c.rate / 8 * 0.0005);
        CHECK(cc.on_rtt(t + 400 * kUs, 100 * kUs) == CcEvent::None);
        INFO("frame " << c.frame << " B at " << c.rate / 1e6 << " Mbit/s");
        CHECK(cc.on_rtt(t + 500 * kUs, 100 * kUs) == CcEvent::Increase);
        CHECK(cc.rate_bps() == Approx(c.after));
    }
}

// A cut for a queue in a window that sent below its rate (an application's
// bursts with gaps) says nothing of a shaper: the step after it stays a
// frame per RTT. (Read as a shaper, it was ai for 10 s: 2 x 2 ranks'
// all_to_all over the wire, 256 KiB bursts, kept the slow step.) The echoes
// carry stamps here, so the controller knows what the path held.
TEST_CASE("control law: an application-limited window's cut is not a shaper", "[congestion]") {
    CongestionConfig cfg = config();
    cfg.frame_bytes = 9000;
    cfg.ai_bps_per_ms = 1e6;
    cfg.start_bps = 2e9;
    const unsigned shift = Congestion::stamp_shift(kHz);
    Congestion cc = started(cfg);
    REQUIRE(leave_slow_start(cc) == 1e9);
    // An echo at `now` of the packet sent at `at`, after `rtt` of path.
    auto echo = [&](uint64_t now, uint64_t at, uint64_t rtt) {
        return cc.on_echo(now, static_cast<uint16_t>(at >> shift), static_cast<uint32_t>(now - at - rtt));
    };
    // 40 ms of 20 KB a millisecond (160 Mbit/s, a sixth of the rate), echoed
    // every 100 us with no queue: what the path held is known (32 ms), and
    // nothing changes the rate.
    uint64_t t = 1 + 1000 * kUs;
    for (int ms = 0; ms < 40; ms++) {
        cc.sent(t, 20000);
        for (int k = 1; k <= 10; k++)
            REQUIRE(echo(t + k * 100 * kUs, t, 100 * kUs) == CcEvent::None);
        t += 1000 * kUs;
    }
    REQUIRE(cc.rate_bps() == 1e9);
    // One more such burst meets a queue of 1 ms: cut.
    cc.sent(t, 20000);
    uint64_t now = t + 1100 * kUs;
    while (echo(now, t, 1100 * kUs) == CcEvent::None && now < t + 3000 * kUs)
        now += 100 * kUs;
    REQUIRE(now < t + 3000 * kUs); // the cut, at `now`
    const double r = cc.rate_bps();
    CHECK(r < 1e9);
    // Then a window sent at the rate, no queue: a 32nd of the rate per RTT
    // (the smoothed one, which the queue took past the 500 us interval),
    // not ai's 1 Mbit/s per ms.
    t = now;
    cc.sent(t, r / 8 * 0.001);
    now = t + 100 * kUs;
    while (echo(now, t, 100 * kUs) == CcEvent::None && now < t + 2000 * kUs)
        now += 100 * kUs;
    REQUIRE(now < t + 2000 * kUs);
    const double rtt = static_cast<double>(std::max<uint64_t>(cc.srtt(), 500 * kUs));
    INFO("window " << (now - t) / kUs << " us, srtt " << cc.srtt() / kUs << " us");
    CHECK(cc.rate_bps() == Approx(r * (1 + static_cast<double>(now - t) / rtt / 32)));
}

TEST_CASE("control law: the flows of a session that time out together cut once", "[congestion]") {
    // Silent for an RTO: the first flow's timer cut.
    Congestion cc = cut_by_timeout();
    // The session's three other flows expire in the same stall: no more.
    for (uint64_t f = 1; f < 4; f++)
        CHECK_FALSE(cc.on_timeout(1 + 6000 * kUs + f * 10 * kUs, 5000 * kUs));
    CHECK(cc.rate_bps() == 100e6);
    // Still silent an RTO after the cut: the next halving.
    CHECK_FALSE(cc.on_timeout(1 + 10999 * kUs, 5000 * kUs));
    CHECK(cc.on_timeout(1 + 11000 * kUs, 5000 * kUs));
    CHECK(cc.rate_bps() == 50e6);
}

TEST_CASE("control law: one cut takes at most half, the rate stays within [min, max]", "[congestion]") {
    CongestionConfig cfg = config();
    cfg.max_bps = 300e6;
    Congestion cc = started(cfg);
    cc.on_rtt(1, 100 * kUs);
    cc.sent(1, 1e6);
    CHECK(cc.on_rtt(1 + 500 * kUs, 100 * kUs) == CcEvent::Increase);
    CHECK(cc.rate_bps() == 300e6); // 400 capped
    cc.sent(1 + 500 * kUs, 1e6);
    // 50 ms: slow start ends (150), the interval becomes the smoothed RTT
    // (growing with every sample), then the cut: half, not more.
    CHECK(cc.on_rtt(1 + 1000 * kUs, 50000 * kUs) == CcEvent::Decrease);
    CHECK(cc.rate_bps() == 150e6);
    CHECK(cc.on_rtt(1 + 12500 * kUs, 50000 * kUs) == CcEvent::None);
    CHECK(cc.on_rtt(1 + 18000 * kUs, 50000 * kUs) == CcEvent::Decrease); // srtt 16.6 ms by now
    CHECK(cc.rate_bps() == 75e6);
    for (uint64_t i = 0; i < 20; i++) { // silent after every send
        cc.sent(20000 * kUs + i * 2000 * kUs, 100);
        CHECK(cc.on_timeout(21000 * kUs + i * 2000 * kUs, 1000 * kUs));
    }
    CHECK(cc.rate_bps() == 1e6);
}

namespace {

// A sender at 1 Gbit/s (1250 B every 10 us) on a path with a 50 us base RTT.
// Every 100 us an ACK echoes the newest packet the receiver placed: the
// receiver places `share` x the send rate (1: the path carries it all; 2: a
// receiver catching up on a backlog), never a packet sent less than 50 us ago.
struct Path {
    Congestion& cc;
    uint64_t t = 0;       // the next send
    uint64_t placed = 0;  // send time of the newest packet placed
    CcEvent last = CcEvent::None;
    bool cut = false;     // a Decrease since the last look
    bool loss_cut = false; // a LossDecrease since the last look
    void run(uint64_t until, double share, bool acks = true) {
        for (; t < until; t += 10 * kUs) {
            cc.sent(t, 1250);
            if (!acks || t % (100 * kUs) != 0 || t < 50 * kUs)
                continue;
            placed += static_cast<uint64_t>(share * 100 * kUs);
            if (placed > t - 50 * kUs)
                placed = t - 50 * kUs;
            last = cc.on_echo(t, static_cast<uint16_t>(placed >> 9), 0);
            cut |= last == CcEvent::Decrease;
            loss_cut |= last == CcEvent::LossDecrease;
        }
    }
};

// A controller at 1 Gbit/s on Path: slow start ended by a queue of 300 us at
// 2 ms, then feedback flowing with no queue until the ACK of 8 ms, which
// closed the last interval. The rate has crept up; the path carries 1 Gbit/s.
struct Steady {
    Congestion cc;
    Path p{cc};
    double before = 0; // the rate at 8 ms
    Steady() {
        CongestionConfig cfg = config();
        cfg.start_bps = 1e9;
        cc.init(cfg, Congestion::stamp_shift(kHz), 0);
        p.run(2000 * kUs, 1);
        REQUIRE(cc.slow_start());
        cc.on_rtt(p.t, 350 * kUs, p.t - 350 * kUs);
        REQUIRE_FALSE(cc.slow_start());
        p.run(8010 * kUs, 1);
        REQUIRE_FALSE(p.cut);
        before = cc.rate_bps();
    }
};

} // namespace

TEST_CASE("control law: a window whose feedback stopped (a descheduled receiver) is not cut by its late echoes",
          "[congestion]") {
    Steady st;
    Congestion& cc = st.cc;
    Path& p = st.p;
    const double before = st.before;
    CHECK(cc.delivery_bps() == Approx(1e9).epsilon(0.05));
    // The receiver is descheduled for 3 ms: no ACK. Its frames wait in the
    // rx ring; once back, its first echoes show a 2.85 and 2.75 ms "queue",
    // late by no more than the 3 ms silence: no queue is left once the gap
    // is counted off, and nothing is cut.
    p.run(11000 * kUs, 1, false);
    p.run(11010 * kUs, 2);
    CHECK(p.last == CcEvent::None); // one late echo alone does not decide
    p.run(11500 * kUs, 2);
    CHECK_FALSE(p.cut);
    CHECK(cc.rate_bps() >= before);
    CHECK(cc.delivery_bps() == Approx(1e9).epsilon(0.05)); // the last trusted window's figure
}

// Under CPU contention nearly every window has a silence, and its queue is
// read as none: loss is then the signal left (congestion.sh case 3 beside a
// build: two senders climbed to 1.05-1.35x the bottleneck each).
TEST_CASE("control law: NACKs for over a tenth of a window cut whatever the delay; a light loss where the delay "
          "cannot be trusted holds the rate",
          "[congestion]") {
    Steady st;
    Congestion& cc = st.cc;
    Path& p = st.p;
    const double before = st.before;
    SECTION("heavy, the feedback flowing and no queue") {
        cc.on_loss(10000, p.t); // 8 packets of the 62.5 KB a 500 us window sends: over a tenth
        p.run(8700 * kUs, 1);
        CHECK(p.loss_cut);
        CHECK_FALSE(p.cut);
        CHECK(cc.rate_bps() <= Approx(0.85 * before));
    }
    SECTION("heavy, but of packets sent before the last cut (slow start's end at 2 ms): that cut answered it") {
        cc.on_loss(10000, 1500 * kUs);
        p.run(8700 * kUs, 1);
        CHECK_FALSE(p.loss_cut);
        CHECK(cc.rate_bps() > before);
    }
    SECTION("light, the feedback flowing and no queue: a lossy wire, the rate climbs on") {
        cc.on_loss(5000, p.t); // 4 packets: under a tenth
        p.run(8700 * kUs, 1);
        CHECK_FALSE(p.loss_cut);
        CHECK(cc.rate_bps() > before);
    }
    SECTION("heavy, after a silence that explains any queue") {
        p.run(11000 * kUs, 1, false);
        cc.on_loss(50000, p.t);
        p.run(11500 * kUs, 2);
        CHECK(p.loss_cut);
        CHECK(cc.rate_bps() <= Approx(0.85 * before));
    }
    SECTION("light, after a silence: held") {
        p.run(11000 * kUs, 1, false);
        const double r = cc.rate_bps();
        cc.on_loss(5000, p.t); // of the 3 ms silence's 375 KB
        p.run(11500 * kUs, 2);
        CHECK_FALSE(p.loss_cut);
        CHECK_FALSE(p.cut);
        CHECK(cc.rate_bps() == r);
    }
}

TEST_CASE("control law: a queue longer than the feedback's silence is cut after it", "[congestion]") {
    Steady st;
    Congestion& cc = st.cc;
    Path& p = st.p;
    const double before = st.before;
    // 3 ms without an ACK, then echoes 5 ms old: 2 ms of them are a queue
    // that no time slice explains (1.95 ms over the base RTT, less the gap).
    p.run(11000 * kUs, 1, false);
    CHECK(cc.on_rtt(p.t, 5000 * kUs, p.t - 5000 * kUs) == CcEvent::None); // the span rule: not alone
    CHECK(cc.on_rtt(p.t + 110 * kUs, 5000 * kUs, p.t - 4890 * kUs) == CcEvent::Decrease);
    CHECK(cc.rate_bps() < 0.9 * before);
    CHECK(cc.rate_bps() >= 0.5 * before);
}

TEST_CASE("control law: with the feedback flowing, a cut goes no higher than the window delivered", "[congestion]") {
    Steady st;
    Congestion& cc = st.cc;
    Path& p = st.p;
    // The path slows to a fifth (another sender came): the queue passes the
    // target within the interval, and the cut goes to what the path
    // delivered, below the proportional cut.
    p.run(11000 * kUs, 0.2);
    REQUIRE(p.cut);
    CHECK(cc.rate_bps() == Approx(0.2e9).epsilon(0.1));
}

TEST_CASE("control law: the burst of late echoes a waking receiver sends is not a queue", "[congestion]") {
    Steady st;
    Congestion& cc = st.cc;
    Path& p = st.p;
    const double before = st.before;
    // No ACK for 0.8 ms (under the stall rule's 1 ms), the sender still
    // sending. The receiver wakes, places its backlog and echoes a packet
    // from early in it: 650 us, a 600 us "queue" over the 500 us target,
    // alone in a window that opened just before the silence. Cut by it, the
    // rate would go to what that window saw delivered.
    p.run(8800 * kUs, 1, false);
    CHECK(cc.on_rtt(p.t, 650 * kUs, p.t - 650 * kUs) == CcEvent::None);
    // Its next ACK, 100 us on, echoes a packet that did not wait.
    p.placed = p.t - 50 * kUs - 100 * kUs;
    p.run(8910 * kUs, 1);
    CHECK(p.last == CcEvent::Increase);
    CHECK_FALSE(p.cut);
    CHECK(cc.rate_bps() > before);
}

TEST_CASE("control law: one sample of a queue near overflow, the feedback flowing, cuts at once", "[congestion]") {
    Steady st;
    Congestion& cc = st.cc;
    Path& p = st.p;
    // Mid-interval (the last one closed at 8 ms), 100 us after the previous
    // echo: a 4.5 ms RTT, 9 targets over the base. No waiting for the end.
    CHECK(cc.on_rtt(p.t + 90 * kUs, 4500 * kUs, p.t - 4410 * kUs) == CcEvent::Decrease);
    CHECK(cc.rate_bps() <= st.before * 0.5 + 1);
    // The next such sample, within the smoothed RTT of that cut: not again.
    CHECK(cc.on_rtt(p.t + 150 * kUs, 4500 * kUs, p.t - 4350 * kUs) == CcEvent::None);
}

TEST_CASE("control law: the ACKs of every flow after a silence are not a queue near overflow", "[congestion]") {
    Steady st;
    Congestion& cc = st.cc;
    Path& p = st.p;
    // The receiver is descheduled for 4 ms, then answers each of a session's
    // 4 flows at once: the first ACK ends the silence, the other three come
    // 1 us apart, and all four echo packets that waited 4.5 ms in its rx
    // ring. None is a queue (and the window's end counts the silence off).
    p.run(12000 * kUs, 1, false);
    for (uint64_t f = 0; f < 4; f++)
        CHECK(cc.on_rtt(p.t + f * kUs, 4500 * kUs, p.t + f * kUs - 4500 * kUs) != CcEvent::Decrease);
    CHECK(cc.rate_bps() >= st.before);
    // A packet sent after the silence that comes back 4.5 ms late is one.
    // (The feedback flows again: an echo every 100 us, 60 us old.)
    const uint64_t t0 = p.t;
    for (uint64_t t = t0 + 100 * kUs; t < t0 + 5000 * kUs; t += 100 * kUs)
        cc.on_rtt(t, 60 * kUs, t - 60 * kUs);
    const double r = cc.rate_bps();
    CHECK(cc.on_rtt(t0 + 5000 * kUs, 4500 * kUs, t0 + 500 * kUs) == CcEvent::Decrease);
    CHECK(cc.rate_bps() <= r * 0.5 + 1);
}

TEST_CASE("control law: a timeout whose silence was a descheduled peer is undone by the first sample", "[congestion]") {
    CongestionConfig cfg = config();
    // Sent at 1 ms, then silent: the timeout at 6 ms halved.
    Congestion cc = cut_by_timeout(cfg);
    // At 7 ms the peer, back from a time slice, echoes the packet of 1 ms:
    // 6 ms old, all of it the silence (6.9 ms since the last sample).
    cc.on_rtt(1 + 7000 * kUs, 6000 * kUs, 1 + 1000 * kUs);
    CHECK(cc.rate_bps() == 200e6);

    // The same silence, but the first sample is of a packet sent after the
    // cut: with no queue (100 us, the base), the path carries what is sent
    // now, and the cut is undone; with one over the target, it stands.
    Congestion c2 = cut_by_timeout(cfg);
    c2.on_rtt(1 + 7000 * kUs, 100 * kUs, 1 + 6900 * kUs);
    CHECK(c2.rate_bps() == 200e6);
    Congestion c4 = cut_by_timeout(cfg);
    c4.on_rtt(1 + 7000 * kUs, 700 * kUs, 1 + 6300 * kUs);
    CHECK(c4.rate_bps() == 100e6);

    // A packet sent before the cut, but later than the silence explains:
    // sent at 10 us, echoed at 7 ms (6.99 ms) where the silence began with
    // the sample of 0.9 ms (6.1 ms): a queue on top of it, not undone.
    Congestion c3 = started(cfg);
    c3.on_rtt(1, 100 * kUs);
    c3.on_rtt(1 + 900 * kUs, 100 * kUs);
    c3.sent(1 + 1000 * kUs, 100);
    REQUIRE(c3.on_timeout(1 + 6000 * kUs, 5000 * kUs));
    c3.on_rtt(1 + 7000 * kUs, 6990 * kUs, 1 + 10 * kUs);
    CHECK(c3.rate_bps() == 100e6);
}
