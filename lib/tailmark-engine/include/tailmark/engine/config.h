// What an application tells the engine about its Senders and Receivers: a
// plain struct, no command-line options (the daemon translates its Options
// into one, engine_config() in app/tailmarkd). Times are in microseconds;
// the engine turns them into TSC cycles with sender_config() and
// receiver_config(), which fill the protocol library's configs for one
// tx queue's Sender and one rx queue's Receiver (the routes, pools and
// names are the caller's).
#pragma once

#include <cstdint>

#include "tailmark/receiver.h"
#include "tailmark/sender.h"

namespace tailmark::engine {

struct EngineConfig {
    uint16_t udp_port = 47474;
    bool udp_checksum = true;          // fill (tx) and verify (rx) the UDP checksum
    uint32_t burst = 32;               // packets per tx/rx burst
    uint64_t tx_quantum = 1 << 20;     // payload bytes one flow sends per round-robin turn
    uint64_t rto_us = 0, rto_max_us = 0; // retransmission timeout, its back-off's bound
    uint32_t retry_limit = 0;          // timeouts in a row before a flow fails
    uint64_t nack_delay_us = 0;        // rx: a gap waits this long before it is NACKed
    uint64_t stream_min = 0;           // rx: streaming stores from this message size (0: never)
    CompletionMode completion = CompletionMode::Message;
    struct {
        bool enabled = true;
        uint64_t target_us = 0;        // the queueing delay it aims at
        uint64_t start_mbps = 0;
        uint64_t max_mbps = 0;         // the path's rate (0: the caller did not know; none)
        uint64_t ack_feedback_us = 0;  // rx: ACK at least this often while data arrives
    } cc;
    uint32_t idle_sleep_us = 0;        // an idle lcore's sleep per turn, after idle_spin_us idle (0: poll only)
    uint32_t idle_spin_us = 1000;      // how long an idle lcore polls before its first nap
    uint32_t paths = 1;                // UDP source ports a session's data is sprayed over (tx_paths.h)
};

inline constexpr uint64_t kTxStallUs = 250000; // give up a partial burst after 250 ms without progress
inline constexpr uint64_t kAckMinUs = 20;      // rx: ACK a moved cursor within 20 us
// rx: a queue not drained for this long means its lcore was away (a time
// slice elsewhere: 1-4 ms seen on 2 vCPUs), not busy: a burst's work is
// 0.1-0.35 ms at 3-11 k cycles a packet, a nap 50 us (RxCtx::away).
inline constexpr uint64_t kAwayUs = 500;

// Sessions between two applications of this process go through the
// in-memory loopback, which has no wire and so no MTU of its own: at a
// port's 1500 bytes a 1 MiB message is 721 packets, each one parsed,
// checked and placed by the one lcore that serves every application of the
// host. Their packets carry a 60 KiB stride instead (whole pages; the IPv4
// length's 64 KiB bounds it): 18 packets. Only for zero-copy sends, whose
// payload is one extbuf segment; a copied packet takes at most
// TxMarker::kMaxSegs mbufs.
inline constexpr uint32_t kLoopbackStride = 60u << 10;
inline constexpr uint32_t kLoopbackMtu = kLoopbackStride + kIpLen + kUdpLen + header_len(kVersion);
static_assert(stride_for_mtu(kLoopbackMtu, kVersion) == kLoopbackStride);
static_assert(kLoopbackMtu + kTrailerLen <= UINT16_MAX);

inline uint64_t us_to_tsc(uint64_t tsc_hz, uint64_t us) { return tsc_hz * us / 1000000; }

// Where the lcore naps (--idle-sleep-us), the pacer of a session of one
// path steps by half the queueing delay congestion control tolerates
// (target_us / 2 of the rate; still at most 64 KiB and at least two
// frames), and catches up as much lateness: a step's burst adds at most
// half the target to a bottleneck's queue. A 20 us step kept the lcore
// polling between steps for as long as a paced session had data (a hold
// under two naps never naps, nap_due), taking the CPUs it shares with the
// applications, and a nap's lateness past 50 us was rate lost. A sprayed
// session keeps the 20 us step (Congestion::spray). A millisecond's step
// (Linux's TSO autosizing) was too much at 100 Mbit/s: the 64 B session
// behind a bulk one in tests/integration/congestion.sh case 4 waited 2.8 ms
// at p99, against 1.4-1.6 at 20 us and at half the target.
inline uint64_t nap_pace_step_us(uint64_t target_us, uint64_t step_us) {
    return target_us / 2 > step_us ? target_us / 2 : 0;
}

// The Sender of one tx queue. `local`: the in-memory loopback between
// applications of this process (nothing to pace, nothing to checksum).
inline SenderConfig sender_config(const EngineConfig& c, uint64_t tsc_hz, bool local) {
    SenderConfig sc;
    sc.udp_port = c.udp_port;
    if (!local)
        sc.udp_checksum = c.udp_checksum;
    sc.burst = c.burst;
    sc.tx_quantum = c.tx_quantum;
    sc.rto = us_to_tsc(tsc_hz, c.rto_us);
    sc.rto_max = us_to_tsc(tsc_hz, c.rto_max_us);
    sc.retry_limit = c.retry_limit;
    sc.stall = us_to_tsc(tsc_hz, kTxStallUs);
    if (!local)
        sc.paths = c.paths;
    sc.cc.enabled = local ? false : c.cc.enabled;
    sc.cc.tsc_hz = tsc_hz;
    if (!local) {
        sc.cc.target_us = c.cc.target_us;
        sc.cc.start_bps = static_cast<double>(c.cc.start_mbps) * 1e6;
        sc.cc.max_bps = static_cast<double>(c.cc.max_mbps) * 1e6;
        if (sc.cc.start_bps > sc.cc.max_bps)
            sc.cc.start_bps = sc.cc.max_bps;
        if (c.idle_sleep_us != 0)
            sc.cc.nap_step_us = nap_pace_step_us(c.cc.target_us, sc.cc.step_us);
    }
    return sc;
}

// The Receiver of one rx queue.
inline ReceiverConfig receiver_config(const EngineConfig& c, uint64_t tsc_hz) {
    ReceiverConfig rc;
    rc.parser.udp_port = c.udp_port;
    rc.parser.verify_udp_checksum = c.udp_checksum;
    rc.nack_delay = us_to_tsc(tsc_hz, c.nack_delay_us);
    rc.stream_min = c.stream_min;
    rc.ack_min = us_to_tsc(tsc_hz, kAckMinUs);
    rc.ack_feedback = c.cc.enabled ? us_to_tsc(tsc_hz, c.cc.ack_feedback_us) : 0;
    rc.tsc_hz = tsc_hz;
    rc.mode = c.completion;
    return rc;
}

} // namespace tailmark::engine
