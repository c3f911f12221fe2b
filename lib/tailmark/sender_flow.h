// The Sender's private state, shared by its two files (sender.cc: flows,
// submissions, completions, control intake and spraying; sender_tx.cc:
// retransmission, timers and the transmit path). Not installed: nothing
// outside the Sender sees a SendFlow.
#pragma once

#include <cstdint>

#include <rte_mbuf.h>

#include "tailmark/sender.h"

namespace tailmark {

namespace sender_detail {

// Owner-written, any-reader counters and cursors.
inline void bump(uint64_t& c, uint64_t n = 1) { __atomic_store_n(&c, c + n, __ATOMIC_RELAXED); }
// The generic forms: clang takes __atomic_*_n on integers and pointers only,
// and these serve the enum class FailReason too (GCC emits the same plain
// moves for both).
template <class T>
inline void publish(T& x, T v) { __atomic_store(&x, &v, __ATOMIC_RELAXED); }
template <class T>
inline T peek(const T& x) {
    T v;
    __atomic_load(&x, &v, __ATOMIC_RELAXED);
    return v;
}

inline bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

// What the Sender keeps of a message until it is done: its bytes (held) and
// what the LAST packet's trailer needs.
struct OutMsg { // 64 bytes: one line per message
    uint64_t cookie;
    const uint8_t* data;
    rte_mbuf* chain;
    rte_mbuf_ext_shared_info* shinfo;
    rte_iova_t iova; // of data[0] (RTE_BAD_IOVA: looked up)
    uint32_t msg_id;
    uint32_t len;
    uint32_t crc32c;
    uint32_t pkt_count;
    uint64_t sent_tsc; // its LAST was built
};

// Drops the Sender's reference on a message's bytes.
inline void let_go(OutMsg& o) {
    if (o.chain != nullptr) {
        rte_pktmbuf_free(o.chain);
        o.chain = nullptr;
    } else if (o.shinfo != nullptr) {
        if (rte_mbuf_ext_refcnt_update(o.shinfo, -1) == 0)
            o.shinfo->free_cb(const_cast<uint8_t*>(o.data), o.shinfo->fcb_opaque);
        o.shinfo = nullptr;
    }
}

// The next message of the probes: the timer re-sends the LAST packets of at
// most this many of the oldest unacknowledged messages per expiry.
constexpr uint32_t kProbeMsgs = 8;

static_assert(sizeof(OutMsg) == 64);

} // namespace sender_detail

// One flow of a Sender, owned by its lcore.
struct SendFlow {
    SendFlowSpec spec;
    uint32_t mask = 0;
    sender_detail::OutMsg* out = nullptr; // ring_size records, msg_id mod ring_size
    // Cursors (msg_ids): reported <= released <= acked <= sent <= submitted
    // (reliable); records live in [reported, submitted).
    uint32_t submitted = 0;
    uint32_t sent = 0;      // every packet of every message below it was built
    uint32_t acked = 0;     // cumulative ACK
    uint32_t released = 0;  // the receiver's consumer cursor: credits
    uint32_t reported = 0;  // completions produced below it
    bool active = false;    // message `sent` is being cut
    uint32_t next_pkt = 0;
    TxMessage msg;
    FailReason failed = FailReason::None;
    uint64_t failed_msgs = 0;
    uint64_t retx_pkts = 0;
    // Retransmission timer: lazy (an ACK does not reset it; when it fires it
    // looks for progress first).
    uint64_t deadline = 0; // 0: off
    uint64_t rto = 0;
    uint64_t armed_tsc = 0;
    uint32_t retries = 0;
    uint32_t seen_acked = 0, seen_released = 0;
    bool graced = false;  // one late firing forgiven since the last progress
    bool unrecorded = false; // the active message has no record (see new_data)
    uint32_t index = 0;   // in the round robin
    uint32_t jobs = 0;    // its retransmission requests queued or in service here (NACKs', probes')
    ReplayWindow ctl_win; // its peer's ACK and NACK numbers taken (wire only)
    NackFilter nacks;     // the NACKs taken lately: which part of the next one is news
    Congestion* cc = nullptr; // its session's (nullptr: not congestion-controlled)
    PacedTurn* turn = nullptr; // its session's round-robin turn (with cc)
    OneFrame one;             // its one-packet messages' packet (TxMarker::build_one)
    // Spraying (spec.paths > 1): its session's paths, and per record the
    // path each packet of the message last went by (path_pkts per record):
    // a NACK's packets are the loss of their paths, a retransmission avoids it.
    TxPaths* paths = nullptr;
    uint8_t* path_of = nullptr;
    uint32_t path_pkts = 0;
    uint8_t rail = 0; // rails: whose addresses its template holds now
    uint8_t* path_rec(uint32_t msg_id) const { return path_of + size_t(msg_id & mask) * path_pkts; }
};

// A submitted message's record (the submit path and the transmit path's
// batched source).
inline void Sender::enqueue(SendFlow& f, const Message& m, uint64_t len, uint64_t cookie) {
    sender_detail::OutMsg& o = f.out[f.submitted & f.mask];
    o.cookie = cookie;
    o.msg_id = f.submitted;
    o.len = static_cast<uint32_t>(len);
    o.chain = m.chain;
    o.data = m.chain ? nullptr : m.bytes.data();
    o.shinfo = m.chain ? nullptr : m.shinfo;
    o.iova = m.iova;
    if (o.shinfo != nullptr) {
        // Nobody else holds an unreferenced buffer (no mbuf points at it):
        // the first reference needs no atomic, which costs ~8% of the tx
        // path at 64 B. DPDK's update() only skips it when the count is 1.
        if (rte_mbuf_ext_refcnt_read(o.shinfo) == 0)
            rte_mbuf_ext_refcnt_set(o.shinfo, 1);
        else
            rte_mbuf_ext_refcnt_update(o.shinfo, 1);
    }
    o.crc32c = 0;
    o.pkt_count = 0;
    o.sent_tsc = 0;
    sender_detail::publish(f.submitted, f.submitted + 1);
    queued_++;
}

} // namespace tailmark
