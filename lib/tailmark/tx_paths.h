// Spraying (--paths N): a session's data packets leave by N UDP source
// ports, the rest of the 5-tuple unchanged, so that ECMP hashes them onto up
// to N paths. The receiver places packets by offset whatever their order or
// port, so nothing changes there. TxPaths is one session's path state in a
// Sender, owned by its lcore: plain counters, no allocation, no locks.
//
// Per path: its RTT, from the echoes (a sprayed packet's send stamp names its
// path in the low bits, so the ACK that echoes it says which path the sample
// is of, with no per-packet state); its loss, from the NACKs (the Sender
// keeps which path each packet of an outstanding message last went by); and
// its share of the session's packets, a weight that the path's queueing
// delay (against the session's other paths) and its loss move. Once the
// session's controller leaves slow start, a path's weight is a rate of its
// own, set from its own queue (AIMD per path, as UCCL keeps a window per
// path), and the session's rate is their sum: an overloaded link slows its
// own paths, not the session (one controller cut the session whenever the
// link with most of its ports queued: multipath.sh case a 501-516 Mbit/s of
// 800, and 683-708 per path, 2026-12-05). A path that
// loses most of what it carries is dead: it gets nothing but a probe now and
// then (a packet, as AWS SRD and UCCL do), and lives again once a probe gets
// through. A retransmission goes by another path than the packet's last.
#pragma once

#include <cstdint>

#include "tailmark/congestion.h"

namespace tailmark {

// One path as summaries and the shell see it.
struct PathView {
    uint32_t session = 0; // the Sender's path-slot index of its session
    uint16_t path = 0;
    uint16_t port = 0;    // its UDP source port
    uint16_t rail = 0;    // the rail it leaves by (session_link.h)
    uint64_t sent = 0;    // data packets that went by it, retransmissions and probes included
    uint64_t retx = 0;    // of them, retransmissions
    uint64_t lost = 0;    // packets of it that a NACK named
    uint64_t probes = 0;  // packets sent to it while it was dead
    uint64_t samples = 0; // RTT samples (echoes of its packets)
    uint64_t deaths = 0;  // times it was found dead
    double srtt_us = 0;   // smoothed RTT (0: no sample)
    double share = 0;     // its share of new packets now (0: dead)
    double rate_bps = 0;  // its rate, once the session's is its paths' sum (0: not yet)
    uint64_t cuts = 0;    // decreases of its rate on its own queue (steered, the session's controller counts none)
    bool dead = false;
};

class TxPaths {
public:
    static constexpr uint32_t kMax = 16;     // paths per session: 4 low bits of the send stamp
    static constexpr uint32_t kNone = kMax;  // choose(): no path to avoid
    static constexpr uint32_t kRun = 4;      // packets in a row that go by one path, at most

    // n paths (2..kMax), the first one's UDP source port base (host order),
    // and the Sender's clock: its TSC rate and stamp shift (congestion.h).
    // Over several rails, path p leaves by rail p % rails (each rail then
    // has paths of its own, and a rail that fails is paths that die).
    void init(uint32_t n, uint16_t base_port, uint64_t tsc_hz, unsigned stamp_shift, uint32_t rails = 1);
    // The session's controller (its flows share it), and its settings (the
    // same law per path): once it leaves slow start, each path has a rate of
    // its own, moved by its own queue, and the session's is their sum
    // (steer()). Unbound, the paths only share out the session's rate
    // (weights, rebalance()).
    void bind(Congestion* cc, const CongestionConfig& cfg);
    uint32_t count() const { return n_; }
    // Path p's UDP source port (host order): base + p in the ephemeral range.
    uint16_t port(uint32_t p) const { return port_[p]; }
    static uint16_t port_for(uint16_t base, uint32_t p);
    uint32_t rail(uint32_t p) const { return p % rails_; }
    uint32_t rails() const { return rails_; }

    // The path of the next run of packets (at most kRun): the paths in
    // proportion to their weights (smooth weighted round robin), a dead
    // path's probe when one is due (never for a retransmission), and never
    // `avoid` while another path lives.
    uint32_t choose(uint64_t now, uint32_t avoid = kNone);
    // The send stamp (host order) of a packet going by path p: the clock's
    // stamp with its low bits replaced by p. The RTT sample is off by at
    // most 2^bits - 1 stamp units (15 us at 16 paths).
    uint16_t stamp(uint16_t host_stamp, uint32_t p) const {
        return static_cast<uint16_t>((host_stamp & ~mask_) | p);
    }
    void sent(uint32_t p, uint32_t pkts, bool retx);
    // An authentic ACK's or NACK's echo (host order) and hold time.
    void on_echo(uint64_t now, uint16_t echo, uint32_t hold_ns);
    // pkts packets that last went by p were NACKed.
    void on_lost(uint64_t now, uint32_t p, uint32_t pkts);

    // Probes: the packet a dead path's probe carried (the Sender checks it
    // against its flow's cumulative ACK and its packet's path record).
    struct Probe {
        uint16_t flow = 0;
        uint16_t pkt = 0;
        uint32_t msg_id = 0;
        bool pending = false;
    };
    bool probing() const { return probes_out_ != 0; }
    const Probe& probe(uint32_t p) const { return path_[p].probe; }
    void note_probe(uint32_t p, uint16_t flow, uint32_t msg_id, uint32_t pkt);
    // The probe of p arrived (revive) or was lost (wait longer).
    void probe_done(uint64_t now, uint32_t p, bool arrived);
    bool dead(uint32_t p) const { return path_[p].dead; }
    uint32_t alive() const { return alive_; }

    PathView view(uint32_t p) const;

private:
    struct Path {
        uint64_t sent = 0, retx = 0, lost = 0, probes = 0, samples = 0, deaths = 0;
        uint64_t srtt = 0;              // cycles, 0: no sample yet
        uint64_t min_rtt = UINT64_MAX;  // cycles
        uint32_t win_sent = 0, win_lost = 0;   // the loss window (kLossWindow packets sent)
        uint32_t prev_sent = 0, prev_lost = 0; // the window before it
        uint32_t fresh = 0;             // samples since the last rebalance
        double loss = 0;                // smoothed loss fraction of its windows
        double loss_slow = 0;           // the same over ~8 windows: which paths lose more than the others
        double weight = 1;              // relative share of new packets (0: dead); steered: its rate, bps
        // Steered: the path's control window, as the session's controller's
        // (congestion.h): its smallest sample, how many, since when; samples
        // of packets sent before its last cut do not count.
        uint64_t win_min = UINT64_MAX, win_start = 0, cut_at = 0, cuts = 0;
        uint32_t win_n = 0;
        bool loss_news = false;         // a loss window closed since the last steer
        double current = 0;             // smooth weighted round robin's
        uint64_t dead_since = 0, probe_at = 0, probe_gap = 0;
        bool dead = false;
        Probe probe;
    };
    void rebalance(uint64_t now);
    void steer(uint64_t now);
    void cap_lossy();
    void open_window(Path& x, uint64_t now);
    void cut(Path& x, uint64_t now, double keep);
    void scale(double k);
    void start_steering(uint64_t now);
    void kill(uint64_t now, uint32_t p);
    void revive(uint64_t now, uint32_t p);
    uint64_t us(uint64_t n) const { return n * tsc_hz_ / 1000000; }

    Path path_[kMax];
    uint16_t port_[kMax]{};
    uint32_t n_ = 0, alive_ = 0, probes_out_ = 0, rails_ = 1;
    uint16_t mask_ = 0;
    unsigned shift_ = 0;
    uint64_t tsc_hz_ = 0;
    double total_ = 0;          // the live paths' weights, summed
    uint64_t next_rebalance_ = 0;
    uint64_t next_probe_ = UINT64_MAX; // the earliest probe_at of a dead path
    // Steering (bind): the controller, its settings, and what it was told.
    Congestion* cc_ = nullptr;
    bool steering_ = false;
    uint64_t target_ = 0;
    double beta_ = 0, max_md_ = 0, ai_ = 0, min_bps_ = 0;
    double told_bps_ = 0;        // the rate steer() last set
    uint64_t sent_mark_ = 0, last_steer_ = 0;
    uint64_t last_sample_ = 0, gap_ = 0; // the longest silence between samples since the last steer
    uint64_t stall_end_ = 0;    // the latest sample that ended a silence (over kStallUs)
    uint64_t base_ = UINT64_MAX; // the paths' smallest RTT, as of the last steer
    double floor_ = 0;           // the least rate of a live path, as of the last steer
};

} // namespace tailmark
