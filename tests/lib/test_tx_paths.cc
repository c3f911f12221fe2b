// TxPaths' weights (spraying's shares), driven by hand with a 1 GHz "TSC".
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <sstream>

#include "tailmark/congestion.h"
#include "tailmark/tx_paths.h"

using namespace tailmark;

namespace {
constexpr uint64_t kHz = 1000000000;
constexpr uint64_t kUs = 1000; // cycles per microsecond
} // namespace

// 16 paths that nothing tells apart: a packet every 20 us by choose(), and
// every 200 us an ACK that echoes one packet sent 50 to 400 us before, picked
// at random (so each sample's delay is noise, alike on every path, and a
// path's samples follow its share): about one sample a path per rebalance,
// as the receiver's one ACK per flow every 200 us gives. The shares must stay
// near equal. Seen failing with the weights moved by up to 50% on a single
// sample: they random-walked onto a few paths (multipath.sh case a,
// 2026-12-05: 4 of 16 paths held 79% of the share, their links queued, and
// the session's rate was cut to half the 4 links' capacity).
TEST_CASE("paths: paths alike under noisy samples keep near-equal shares", "[paths]") {
    const unsigned shift = Congestion::stamp_shift(kHz);
    TxPaths tp;
    tp.init(16, 50000, kHz, shift);
    std::mt19937_64 rng(7);
    struct Sent {
        uint64_t at;
        uint16_t stamp;
    };
    std::deque<Sent> sent;
    uint64_t now = 1000000 * kUs;
    const uint64_t end = now + 2000000 * kUs; // 2 s: 10 000 samples, 1 000 rebalances
    double worst_max = 0, worst_min = 1;
    for (uint64_t k = 0; now < end; k++, now += 20 * kUs) {
        const uint32_t p = tp.choose(now);
        tp.sent(p, 1, false);
        sent.push_back({now, tp.stamp(static_cast<uint16_t>(now >> shift), p)});
        while (!sent.empty() && sent.front().at + 400 * kUs < now)
            sent.pop_front();
        if (k % 10 != 0)
            continue;
        // One of the packets sent 50..400 us ago.
        std::vector<const Sent*> pick;
        for (const Sent& s : sent)
            if (s.at + 50 * kUs <= now)
                pick.push_back(&s);
        if (pick.empty())
            continue;
        tp.on_echo(now, pick[rng() % pick.size()]->stamp, 0);
        if (now > end - 1000000 * kUs) { // the second half: settled
            double hi = 0, lo = 1;
            for (uint32_t q = 0; q < 16; q++) {
                hi = std::max(hi, tp.view(q).share);
                lo = std::min(lo, tp.view(q).share);
            }
            worst_max = std::max(worst_max, hi);
            worst_min = std::min(worst_min, lo);
        }
    }
    INFO("shares over the last second: largest " << worst_max << ", smallest " << worst_min
                                                 << " (equal: " << 1.0 / 16 << ")");
    for (uint32_t q = 0; q < 16; q++)
        CHECK_FALSE(tp.view(q).dead);
    CHECK(worst_max < 2.0 / 16);
    CHECK(worst_min > 0.5 / 16);
}

// Two links of 100 Mbit/s behind one session's 8 paths: ECMP put 6 of its
// ports on link A and 2 on link B (multipath.sh's 16 ports fall 3/3/4/6 on
// its 4 links). Each link is a FIFO bottleneck that holds 5 ms and drops
// beyond; a packet arrives 50 us after it leaves its link; the receiver ACKs
// every 200 us, echoing the newest packet it has, with its hold. With the
// session's rate from one controller and the paths only sharing it out,
// link A's queue cuts the whole session while link B idles. With a rate per
// path, each link's paths share that link.
TEST_CASE("paths: steered, each path's rate follows its own link: both links carry near their capacity",
          "[paths]") {
    const unsigned shift = Congestion::stamp_shift(kHz);
    CongestionConfig cfg;
    cfg.tsc_hz = kHz;
    Congestion cc;
    uint64_t now = 1000000 * kUs;
    cc.init(cfg, shift, now);
    TxPaths tp;
    tp.init(8, 50000, kHz, shift);
    tp.bind(&cc, cfg);
    constexpr uint32_t kBytes = 1500;
    constexpr double kLinkBps = 100e6;
    const uint64_t per_pkt = static_cast<uint64_t>(kBytes * 8 / kLinkBps * kHz); // 120 us
    struct Link {
        uint64_t free_at = 0;
        uint64_t delivered = 0, dropped = 0; // packets, over the last second
    } link[2];
    struct InFlight {
        uint64_t arrives;
        uint16_t stamp;
    };
    std::vector<InFlight> flight;
    const uint64_t end = now + 3000000 * kUs;
    const uint64_t judged = end - 1000000 * kUs; // the last second: settled
    uint64_t next_ack = now + 200 * kUs;
    for (; now < end; now += 10 * kUs) {
        while (cc.may_send(now)) {
            const uint32_t p = tp.choose(now);
            Link& l = link[p < 6 ? 0 : 1];
            tp.sent(p, 1, false);
            cc.sent(now, kBytes);
            const uint64_t start = std::max(now, l.free_at);
            if (start - now > 5000 * kUs) {
                if (now >= judged)
                    l.dropped++;
                continue;
            }
            l.free_at = start + per_pkt;
            if (now >= judged)
                l.delivered++;
            flight.push_back({l.free_at + 50 * kUs, tp.stamp(static_cast<uint16_t>(now >> shift), p)});
        }
        if (now < next_ack)
            continue;
        next_ack += 200 * kUs;
        const InFlight* newest = nullptr;
        for (const InFlight& f : flight)
            if (f.arrives <= now && (newest == nullptr || f.arrives > newest->arrives))
                newest = &f;
        if (newest == nullptr)
            continue;
        const uint16_t echo = newest->stamp;
        const uint32_t hold = static_cast<uint32_t>(now - newest->arrives); // ns at 1 GHz
        std::erase_if(flight, [&](const InFlight& f) { return f.arrives <= now; });
        cc.on_echo(now, echo, hold);
        tp.on_echo(now, echo, hold);
    }
    // Packets of 1500 B at 100 Mbit/s: 8333 a second a link.
    INFO("the last second: link A " << link[0].delivered << " packets, " << link[0].dropped << " dropped; link B "
                                    << link[1].delivered << ", " << link[1].dropped << " dropped; session "
                                    << cc.rate_bps() / 1e6 << " Mbit/s");
    std::ostringstream paths;
    for (uint32_t p = 0; p < 8; p++)
        paths << " " << p << ":" << tp.view(p).rate_bps / 1e6 << "Mbit/s," << tp.view(p).cuts << "cuts";
    INFO("paths (rate, cuts):" << paths.str());
    CHECK(cc.steered());
    CHECK(link[0].delivered >= 8333 * 85 / 100);
    CHECK(link[1].delivered >= 8333 * 85 / 100);
    CHECK(link[0].dropped + link[1].dropped == 0);

    // A retransmission timeout's cut is the controller's: the paths take it
    // at their next rebalance, and the session's rate stays their sum.
    const double before = cc.rate_bps();
    cc.sent(now, kBytes);
    REQUIRE(cc.on_timeout(now + 10000 * kUs, 1000 * kUs));
    tp.choose(now + 12000 * kUs);
    double sum = 0;
    for (uint32_t p = 0; p < 8; p++)
        sum += tp.view(p).rate_bps;
    INFO("before the timeout " << before / 1e6 << " Mbit/s; after, the paths' sum " << sum / 1e6
                               << " and the controller's " << cc.rate_bps() / 1e6);
    CHECK(sum == Approx(cc.rate_bps()).epsilon(1e-9));
    CHECK(sum <= 0.6 * before);
}

namespace {
// A session's controller and 4 paths bound to it, past slow start (a queue
// of half the target ended it), 1 s into a 1 GHz clock; packets of 1500 B
// as the pacer lets them go, and ACKs that echo the newest packet sent at
// least 60 us before (the path's RTT), its hold the rest of its wait.
struct Steered {
    struct Sent {
        uint64_t at = 0;
        uint32_t path = 0;
        uint16_t stamp = 0;
    };
    unsigned shift = Congestion::stamp_shift(kHz);
    CongestionConfig cfg;
    Congestion cc;
    TxPaths tp;
    uint64_t now = 1000000 * kUs;
    std::deque<Sent> sent; // the newest 64

    explicit Steered(double ai_bps_per_ms) {
        cfg.tsc_hz = kHz;
        cfg.ai_bps_per_ms = ai_bps_per_ms;
        cc.init(cfg, shift, now);
        tp.init(4, 50000, kHz, shift);
        tp.bind(&cc, cfg);
        cc.on_rtt(now, 60 * kUs);
        cc.on_rtt(now + 10 * kUs, 60 * kUs + cfg.target_us * kUs);
        REQUIRE_FALSE(cc.slow_start());
    }
    // What the pacer lets go now, each packet given to `each`.
    template <class F> void send(F&& each) {
        while (cc.may_send(now)) {
            const uint32_t p = tp.choose(now);
            tp.sent(p, 1, false);
            cc.sent(now, 1500);
            sent.push_back({now, p, tp.stamp(static_cast<uint16_t>(now >> shift), p)});
            if (sent.size() > 64)
                sent.pop_front();
            each(sent.back());
        }
    }
    void echo(const Sent& s) { tp.on_echo(now, s.stamp, static_cast<uint32_t>(now - s.at - 60 * kUs)); }
    // An ACK now, echoing the newest packet that arrived and that `ok` takes.
    template <class F> void ack(F&& ok) {
        for (auto it = sent.rbegin(); it != sent.rend(); ++it)
            if (it->at + 60 * kUs <= now && ok(*it)) {
                echo(*it);
                return;
            }
    }
};
} // namespace

// A case-c run of multipath.sh (2026-12-05) read 512 Mbit/s: the paths of
// one overloaded link lost 13-96% of their packets, and their rates were
// never cut. Their windows held no samples to judge (a path whose packets
// are lost echoes none), and the stalls of 2 shared vCPUs discount every
// queue. Heavy loss cuts a path once per loss window, samples or not.
TEST_CASE("paths: steered, a path that loses a quarter of its packets and echoes none is cut all the same",
          "[paths]") {
    Steered s(0); // no increase: each rate moves by its own cuts alone
    double start0 = 0;
    uint32_t on0 = 0;
    const uint64_t end = s.now + 2000000 * kUs;
    for (uint64_t k = 0; s.now < end; k++, s.now += 100 * kUs) {
        s.send([&](const Steered::Sent& x) {
            if (start0 == 0 && s.tp.view(0).rate_bps > 0)
                start0 = s.tp.view(0).rate_bps; // steering began
            if (x.path == 0 && on0++ % 4 == 0)
                s.tp.on_lost(s.now, 0, 1); // path 0 loses one packet in 4
        });
        if (k % 2 == 0)
            s.ack([](const Steered::Sent& x) { return x.path != 0; }); // no queue anywhere
    }
    const PathView v0 = s.tp.view(0);
    INFO("path 0: " << start0 / 1e6 << " Mbit/s when steering began, " << v0.rate_bps / 1e6 << " now, " << v0.cuts
                    << " cuts, " << v0.lost << " lost of " << v0.sent);
    REQUIRE(start0 > 0);
    CHECK_FALSE(v0.dead); // a quarter lost: not dead
    CHECK(v0.samples == 0);
    CHECK(v0.rate_bps < 0.5 * start0);
    for (uint32_t p = 1; p < 4; p++) {
        INFO("path " << p);
        CHECK(s.tp.view(p).cuts == 0);
        CHECK(s.tp.view(p).rate_bps == Approx(start0));
    }
}

// A path that lived again took its window as opened at time 0, and its
// first increase was the additive step for the whole uptime: a case-c run
// of multipath.sh (2026-12-05) paced 7.2 Gbit/s over 800 and resent 15k
// packets. Revived, a path starts from a quarter of a mean rate and earns
// its step for its window's time, at most 8 ms of it.
TEST_CASE("paths: steered, a dead path that lives again starts low and climbs like the others", "[paths]") {
    Steered s(CongestionConfig{}.ai_bps_per_ms);
    Steered::Sent probe;
    bool killed = false, revived = false;
    uint32_t on0 = 0;
    double worst = 0; // path 0's rate against the others' largest, once revived
    const uint64_t end = s.now + 300000 * kUs;
    for (uint64_t k = 0; s.now < end; k++, s.now += 100 * kUs) {
        s.send([&](const Steered::Sent& x) {
            if (x.path == 0 && s.tp.dead(0))
                probe = x;
            if (x.path == 0 && !killed && ++on0 == 64) { // 50 ms in or so: all its packets lost at once
                s.tp.on_lost(s.now, 0, 64);
                killed = s.tp.dead(0);
                REQUIRE(killed);
            }
        });
        if (probe.at != 0 && probe.at + 60 * kUs <= s.now) { // its probe gets through
            s.echo(probe);
            probe.at = 0;
            revived = !s.tp.dead(0);
        }
        if (k % 2 == 0)
            s.ack([&](const Steered::Sent& x) { return !(x.path == 0 && s.tp.dead(0)); });
        if (revived) {
            double others = 0;
            for (uint32_t p = 1; p < 4; p++)
                others = std::max(others, s.tp.view(p).rate_bps);
            worst = std::max(worst, s.tp.view(0).rate_bps / others);
        }
    }
    INFO("path 0's rate against the others' largest, at worst, once revived: " << worst << "; session "
                                                                               << s.cc.rate_bps() / 1e6 << " Mbit/s");
    REQUIRE(killed);
    REQUIRE(revived);
    CHECK(s.tp.view(0).deaths == 1);
    CHECK(worst <= 1.0);
    CHECK(s.cc.rate_bps() < 5e9); // 300 ms of additive steps from ~25 Mbit/s: about 1.5 Gbit/s
}
