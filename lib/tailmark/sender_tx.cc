// The Sender's work on its lcore: retransmissions (NACKs' and probes'), and
// the transmit path (new messages cut into packets, paced, burst out). The
// retransmission timers are in sender_timers.cc; flows, submissions,
// completions and control intake in sender.cc.
#include "tailmark/sender.h"
#include "tailmark/sender_flow.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <rte_ring_elem.h>

namespace tailmark {

using namespace sender_detail;

inline const TxMarker& Sender::marker(const SendFlow& f, const TxMessage& m) const {
    if (f.spec.payload != PayloadMode::ZeroCopy)
        return marker_;
    return m.chain == nullptr && m.bytes.size() <= kCopyBreak ? marker_ : marker_zc_;
}

// --- retransmission ----------------------------------------------------------------

bool Sender::push_job(const Nack& n) {
    if (job_count_ >= jobs_cap_)
        return false;
    const uint32_t at = (job_head_ + job_count_) % static_cast<uint32_t>(jobs_.size());
    jobs_[at] = n;
    jobs_begun_[at] = 0;
    job_count_++;
    jobs_held_until_ = 0; // a request the pacers may not hold
    if (SendFlow* f = table_[n.flow]; f != nullptr)
        f->jobs++;
    return true;
}

// A request of `flow` leaves the queue for good (served, or stale).
inline void Sender::job_over(uint16_t flow) {
    if (SendFlow* f = table_[flow]; f != nullptr && f->jobs != 0)
        f->jobs--;
}

// The request in service, held by its session's pacer: what is left of it
// goes back to the front of the queue (the spare slot), so that the
// requests of other sessions behind it go meanwhile.
void Sender::park_job() {
    Nack rest;
    rest.flow = job_.flow;
    rest.msg_id = job_.msg_id;
    rest.nranges = 0;
    rest.ranges[rest.nranges++] = {static_cast<uint16_t>(job_pos_), static_cast<uint16_t>(job_end_ - job_pos_)};
    for (uint32_t r = job_r_ + 1; r < job_.nranges && r < kMaxNackRanges; r++)
        rest.ranges[rest.nranges++] = job_.ranges[r];
    const uint32_t size = static_cast<uint32_t>(jobs_.size());
    job_head_ = (job_head_ + size - 1) % size;
    jobs_[job_head_] = rest;
    jobs_begun_[job_head_] = job_fresh_ ? 0 : 1;
    job_count_++;
    job_on_ = false;
}

// Takes up the next request: the oldest whose session's pacer lets it go
// (the requests of a session share its pacer, so each session's go in
// order; one session held back by its pacer, at a low rate a whole
// message's retransmission for seconds, holds back no other: issue
// 2026-12-04, the world-8 all_to_all). Only for a message the flow still
// owes (sent, not yet released) and ranges inside its group; of the message
// being cut, the packets already sent (a paced 1 MiB message is out for
// many RTTs, and its gaps are NACKed meanwhile). False: none left, or every
// one held (jobs_held_until_: until when).
bool Sender::start_job(uint64_t now) {
    const uint32_t size = static_cast<uint32_t>(jobs_.size());
    uint32_t i = 0; // requests at the front that their pacers hold
    uint64_t held_until = UINT64_MAX;
    while (i < job_count_) {
        uint32_t at = (job_head_ + i) % size;
        {
            const Nack& c = jobs_[at];
            const SendFlow* hf = table_[c.flow];
            if (hf != nullptr && hf->cc != nullptr && hf->failed == FailReason::None && c.nranges != 0 &&
                !hf->cc->may_send(now) && !before(c.msg_id, hf->released)) {
                if (hf->cc->next_send() < held_until)
                    held_until = hf->cc->next_send();
                i++;
                continue;
            }
        }
        job_ = jobs_[at];
        const bool begun = jobs_begun_[at] != 0;
        // Out of the queue; those held in front of it move up one, in order.
        for (; at != job_head_; at = (at + size - 1) % size) {
            const uint32_t prev = (at + size - 1) % size;
            jobs_[at] = jobs_[prev];
            jobs_begun_[at] = jobs_begun_[prev];
        }
        job_head_ = (job_head_ + 1) % size;
        job_count_--;
        SendFlow* f = table_[job_.flow];
        bool ok = f != nullptr && f->failed == FailReason::None && job_.nranges != 0 &&
                  job_.nranges <= kMaxNackRanges;
        if (ok) {
            job_limit_ = sent_pkts(*f, job_.msg_id);
            ok = job_limit_ != 0;
            if (ok) {
                const OutMsg& o = f->out[job_.msg_id & f->mask];
                job_msg_.msg_id = o.msg_id;
                job_msg_.bytes = {o.data, o.chain ? 0 : o.len};
                job_msg_.chain = o.chain;
                job_msg_.shinfo = o.shinfo;
                job_msg_.iova = o.iova;
                job_msg_.plan = plan_group(o.len, f->spec.tx.stride);
                job_msg_.crc32c = o.crc32c;
                job_msg_.crc_pending = false; // only a LAST carries it, and the LAST of a message being cut is not out
                // The first range with packets in the group (sent ones).
                for (job_r_ = 0; job_r_ < job_.nranges; job_r_++) {
                    const NackRange& r = job_.ranges[job_r_];
                    if (r.first >= job_limit_)
                        continue;
                    job_pos_ = r.first;
                    job_end_ = range_end(r, job_limit_);
                    break;
                }
                ok = job_r_ < job_.nranges;
            }
        }
        if (ok) {
            // Counted once its first packet is built, or as stale if let go
            // before; a parked one was counted when it began.
            job_fresh_ = !begun;
            return true;
        }
        if (!begun)
            bump(ctr_.stale_reqs);
        job_over(job_.flow);
    }
    if (job_count_ != 0) { // every one held: no need to look again before the first pacer opens
        jobs_held_until_ = held_until;
        bump(ctr_.cc_paced);
        if (paced_until_ == 0 || held_until < paced_until_)
            paced_until_ = held_until;
    }
    return false;
}

void Sender::on_cc_event(CcEvent e) {
    switch (e) {
    case CcEvent::None: break;
    case CcEvent::Increase: bump(ctr_.cc_increases); break;
    case CcEvent::Decrease: bump(ctr_.cc_decreases); break;
    case CcEvent::LossDecrease: bump(ctr_.cc_loss_decreases); break;
    }
}

// The session's pacer holds the flow back for now.
inline bool Sender::paced(SendFlow& f, uint64_t now) {
    if (f.cc == nullptr || f.cc->may_send(now))
        return false;
    bump(ctr_.cc_paced);
    if (paced_until_ == 0 || f.cc->next_send() < paced_until_)
        paced_until_ = f.cc->next_send();
    return true;
}

// Packets pend_[first, first + k) of a paced flow were built: their frames' bytes.
inline void Sender::pace(SendFlow& f, uint64_t now, uint32_t first, uint32_t k) {
    uint64_t bytes = 0;
    for (uint32_t i = first; i < first + k; i++)
        bytes += rte_pktmbuf_pkt_len(pend_[i]);
    f.cc->sent(now, bytes);
}

// Retransmissions into pend_[n..), before any new message.
uint32_t Sender::serve_jobs(uint32_t burst, uint32_t n, uint64_t now) {
    if (!job_on_ && now < jobs_held_until_)
        return n; // every request waits for its session's pacer
    while (n < burst) {
        if (!job_on_ && !(job_on_ = start_job(now)))
            break;
        SendFlow& f = *table_[job_.flow];
        // A request served over several rounds: its message may have been
        // released, or its flow failed, since. Either let go of the bytes
        // (retire), which job_msg_ still points at: stop.
        if (f.failed != FailReason::None || before(job_.msg_id, f.released)) {
            if (job_fresh_)
                bump(ctr_.stale_reqs);
            job_on_ = false;
            job_over(job_.flow);
            continue;
        }
        if (paced(f, now)) {
            // Its turn comes with its pacer's; the other sessions' requests
            // meanwhile (start_job passes over this one while it is held).
            park_job();
            continue;
        }
        uint32_t k = job_end_ - job_pos_;
        if (k > burst - n)
            k = burst - n;
        if (f.cc != nullptr && k * f.spec.tx.stride > f.cc->step_bytes())
            k = f.cc->step_bytes() / f.spec.tx.stride + 1;
        job_msg_.stamp = stamp_;
        uint32_t path = 0;
        if (unlikely(f.paths != nullptr)) { // one packet at a time, each off the path it was lost on
            k = 1;
            path = aim(f, job_msg_, k, f.path_rec(job_.msg_id)[job_pos_], now);
        }
        const TxMarker& mk = marker(f, job_msg_);
        const int rc = mk.build(f.spec.tx, job_msg_, job_pos_, k, pend_ + n, Flags::Retx);
        if (unlikely(rc < 0)) {
            bump(ctr_.alloc_fail);
            break;
        }
        if (unlikely(f.paths != nullptr)) {
            carried(f, job_.msg_id, job_pos_, k, path, true);
            if (f.paths->rails() > 1)
                to_rail(n, k, f.paths->rail(path));
        }
        if (&mk == &marker_zc_)
            bump(ctr_.zero_copy_pkts, k);
        if (f.cc != nullptr)
            pace(f, now, n, k);
        n += k;
        bump(ctr_.retx_pkts, k);
        if (job_fresh_) {
            bump(ctr_.retx_reqs);
            job_fresh_ = false;
        }
        publish(f.retx_pkts, f.retx_pkts + k);
        job_pos_ += k;
        if (job_pos_ == job_end_) { // the next range of the request
            const uint32_t count = job_limit_;
            job_on_ = false;
            for (job_r_++; job_r_ < job_.nranges; job_r_++) {
                const NackRange& r = job_.ranges[job_r_];
                if (r.first >= count)
                    continue;
                job_pos_ = r.first;
                job_end_ = range_end(r, count);
                job_on_ = true;
                break;
            }
            if (!job_on_)
                job_over(job_.flow);
        }
    }
    return n;
}

// --- transmit --------------------------------------------------------------------

inline void Sender::next_turn() {
    rr_ = rr_ + 1 >= flows_.size() ? 0 : rr_ + 1;
    turn_bytes_ = 0;
    turn_pkts_ = 0;
    // Many flows: the one after next is out of cache by its turn (64 flows x
    // 64 B: its state and its local peer's cursor words were most of the
    // round robin's misses). Fetch it a turn ahead.
    if (flows_.size() > kPrefetchFlows) // a few flows' state stays in L1 between their turns
        prefetch_next();
}

void Sender::prefetch_next() const {
    const uint32_t ahead = rr_ + 1 >= flows_.size() ? 0 : rr_ + 1;
    const SendFlow* nf = flows_[ahead];
    for (size_t off = 0; off < sizeof(SendFlow); off += 64)
        rte_prefetch0(reinterpret_cast<const uint8_t*>(nf) + off);
    if (nf->spec.local_released != nullptr) {
        rte_prefetch0(nf->spec.local_released);
        rte_prefetch0(nf->spec.local_acked);
    }
}

// The source's message m as the flow's message to cut.
inline void Sender::fill_msg(SendFlow& f, const Message& m) {
    // m was just written field by field by the source: two 8-byte loads,
    // not one 16-byte load that no store can forward to.
    const uint8_t* data = m.bytes.data();
    size_t size = m.bytes.size();
    asm volatile("" : "+r"(data), "+r"(size));
    f.msg.bytes = m.chain ? std::span<const uint8_t>{} : std::span<const uint8_t>{data, size};
    f.msg.chain = m.chain;
    f.msg.shinfo = m.chain ? nullptr : m.shinfo;
    f.msg.iova = m.iova;
}

// The source's message m as flow f's next (f.submitted): submit()'s checks
// (the flow and the window are known good here), the plan made once, for the
// check and the cut, and its record. False: refused (counted).
inline bool Sender::accept(SendFlow& f, const Message& m, uint64_t cookie) {
    const uint64_t len = m.length();
    fill_msg(f, m);
    const bool ok = len <= f.spec.max_msg && marker(f, f.msg).prepare_streamed(f.spec.tx, f.msg);
    // An unreliable flow that reports nothing, and bytes nobody holds:
    // nothing will ever read a record of this message (no retransmission, no
    // completion, no reference to let go). It is cut straight from m, its
    // cursors moved at its LAST (a third of the tx path's per-message
    // bookkeeping at 64 B).
    f.unrecorded = ok && !f.spec.reliable && !f.spec.report && m.chain == nullptr && m.shinfo == nullptr;
    if (unlikely(!ok))
        refuse(m); // larger than the region: the source's mistake
    else if (!f.unrecorded)
        enqueue(f, m, len, cookie);
    return ok;
}

// Message f.sent, planned in f.msg, is cut from its first packet on.
inline void Sender::begin_cut(SendFlow& f) {
    if (!f.unrecorded)
        f.out[f.sent & f.mask].pkt_count = f.msg.plan.pkt_count;
    f.next_pkt = 0;
    f.active = true;
    active_++;
}

// An unrecorded message's LAST was built: it is submitted, sent and done at once.
inline void Sender::sent_unrecorded(SendFlow& f) {
    f.unrecorded = false;
    publish(f.submitted, f.submitted + 1);
    publish(f.sent, f.sent + 1);
    publish(f.reported, f.reported + 1);
}

// The rest of a flow's turn (one not paced: no congestion control) while
// its messages come from the source one packet each (64 B): source, plan,
// build, record and cursors, without the round robin's per-message checks,
// which cannot change within a turn, and with TxMarker::build_one. Any
// other message (a chain, one of more packets, one an unrecorded flow would
// have to record, or one whose mbuf the pool cannot give) becomes the
// flow's active message for the general loop; one refused (too large for
// the region) ends the turn (refused_). Returns n with the packets built at
// pend_[n..).
//
// The tx path at 64 B is bound by its stores (see OneFrame), so the run
// keeps in registers what the general loop writes back per message: the
// message (a local TxMessage, build_one inline), the cursors (published
// when the run ends), the turn's packets and bytes, the counters. A
// message to record (a reliable flow's, or one to report) has its record
// written whole, once, where the general loop wrote it field by field as
// the message went from queued to cut to sent. An unrecorded message is
// submitted, sent and reported at once: the three cursors move together.
// recorded: f.spec.reliable || f.spec.report, its messages have records.
// batched: the source has SendSourceMany.
template <bool recorded, bool batched>
inline uint32_t Sender::one_run(SendFlow& f, uint32_t burst, uint32_t n, uint64_t now) {
    // What the window takes. Within the run sent == submitted (the source
    // is asked only when nothing is queued), and released and reported stay
    // where they are: when the room runs out, the general loop takes the
    // next message (it looks at a local consumer's credits, and reports an
    // unreliable flow's records as sent).
    uint32_t left = f.spec.ring_size - (f.spec.reliable ? f.sent - f.released : f.submitted - f.reported);
    if (turn_pkts_ >= burst || left == 0 || f.sent != f.submitted)
        return n;
    if constexpr (!recorded)
        left = UINT32_MAX; // its cursors move together: the room stays as it is
    const uint32_t n0 = n;
    const uint32_t end = std::min(burst, n0 + (burst - turn_pkts_));
    const uint32_t id0 = f.submitted;
    uint32_t id = id0;
    uint64_t tb = turn_bytes_, bytes = 0;
    // Every message prepare_one takes is short enough to be copied in a
    // zero-copy flow too: marker() would pick the copy marker for it.
    static_assert(TxMarker::kStreamMin - 1 <= kCopyBreak);
    const TxMarker& mk = marker_;
    TxMessage tm;
    tm.stamp = stamp_;
    auto settle = [&] { // the cursors, the turn and the counters, once
        const uint32_t k = id - id0;
        publish(f.submitted, f.submitted + k);
        publish(f.sent, f.sent + k);
        if constexpr (!recorded)
            publish(f.reported, f.reported + k);
        turn_pkts_ += n - n0;
        turn_bytes_ = tb;
        bump(ctr_.msgs_sent, n - n0);
        bump(ctr_.bytes_sent, bytes);
        // Reliable: the timer runs, armed by the message before the run.
        if (recorded && k != 0 && !f.spec.reliable)
            retire(f); // reported as sent
    };
    // A batched source fills a burst's messages at once, each one that
    // prepare_one takes and build_one builds from the mbufs set aside: none
    // of them can be left unsent. Only a message alone in its batch may be
    // any (SendSourceMany).
    uint32_t have = 0, at = 0;
    SourceLimits lim;
    const bool many = batched && mk.one_max(f.spec.tx, lim.max_len);
    lim.max_len = std::min<uint64_t>(lim.max_len, f.spec.max_msg);
    lim.no_shinfo = !recorded;
    while (n < end && tb < cfg_.tx_quantum && left != 0) {
        Message one; // source_'s
        uint64_t one_cookie = 0;
        if constexpr (batched) {
            if (at == have) {
                at = have = 0;
                if (many) {
                    // As many as the burst, the window and the quantum take
                    // (every message of the run costs a stride of the quantum).
                    const uint64_t by_bytes = (cfg_.tx_quantum - tb + f.spec.tx.stride - 1) / f.spec.tx.stride;
                    uint32_t want = std::min<uint32_t>(end - n, left);
                    want = static_cast<uint32_t>(std::min<uint64_t>(want, by_bytes));
                    want = stash_.ready(want) < want ? 1 : want; // short of mbufs: one, as source_ would
                    have = source_many_(source_ctx_, f.spec.user, id, want, lim, src_msgs_, src_cookies_);
                    if (have == 0)
                        break;
                } else if (!source_(source_ctx_, f.spec.user, id, one, one_cookie)) {
                    break;
                }
            }
        } else if (!source_(source_ctx_, f.spec.user, id, one, one_cookie)) {
            break;
        }
        // Read in place, field by field: a copy of a whole Message loads
        // wider than the source stored it, which stalls store forwarding.
        const Message& m = batched && have != 0 ? src_msgs_[at] : one;
        const uint64_t cookie = batched && have != 0 ? src_cookies_[at] : one_cookie;
        at += batched && have != 0;
        tm.bytes = m.bytes;
        tm.msg_id = id;
        if (unlikely(m.chain != nullptr || (!recorded && m.shinfo != nullptr) || m.bytes.size() > f.spec.max_msg ||
                     !mk.prepare_one(f.spec.tx, tm) || mk.build_one(f.spec.tx, f.one, tm, pend_ + n, &stash_) < 0)) {
            // The general loop's: as new_data takes a fresh message.
            settle();
            // A batch's messages all fit (or it had one): none is left here
            // but by a source that broke SendSourceMany's rule. Those are
            // handed back and counted, never dropped silently.
            if constexpr (batched)
                for (uint32_t i = at; i < have; i++)
                    refuse(src_msgs_[i]);
            if (accept(f, m, cookie)) {
                f.msg.msg_id = f.sent;
                f.msg.stamp = stamp_;
                begin_cut(f);
            } else {
                refused_ = true; // as new_data's refusal: it ends the flow's turn
                next_turn();
            }
            return n;
        }
        if constexpr (recorded) {
            if (m.shinfo != nullptr) { // as enqueue: the record's reference
                if (rte_mbuf_ext_refcnt_read(m.shinfo) == 0)
                    rte_mbuf_ext_refcnt_set(m.shinfo, 1);
                else
                    rte_mbuf_ext_refcnt_update(m.shinfo, 1);
            }
            f.out[id & f.mask] = OutMsg{cookie, m.bytes.data(), nullptr, m.shinfo, m.iova, id,
                                        static_cast<uint32_t>(tm.plan.msg_len), tm.crc32c, 1, now};
            left--;
        }
        n++;
        tb += tm.plan.stride;
        bytes += tm.plan.msg_len;
        id++;
    }
    settle();
    f.unrecorded = false;
    return n;
}

// A flow's turn ends with a message once it sent a burst of packets in it,
// or at a quantum of bytes (within a message larger than the quantum).
inline bool Sender::turn_over(const SendFlow& f, uint64_t bytes, uint32_t pkts, uint32_t burst) const {
    return (bytes >= cfg_.tx_quantum && (!f.active || f.msg.plan.msg_len > cfg_.tx_quantum)) ||
           (!f.active && pkts >= burst);
}

// Flow f's message just had its LAST built: its record final, its timer
// armed; while its messages are one packet each, the rest of its turn as a
// run (one_run). Returns n with the run's packets.
inline uint32_t Sender::message_sent(SendFlow& f, uint32_t burst, uint32_t n, uint64_t now) {
    f.active = false;
    active_--;
    bump(ctr_.msgs_sent);
    bump(ctr_.bytes_sent, f.msg.plan.msg_len);
    // What follows in this turn, while it is one packet a message.
    const bool run = f.msg.plan.pkt_count == 1 && f.cc == nullptr && source_ != nullptr && f.paths == nullptr;
    const bool recorded = f.spec.reliable || f.spec.report;
    if (f.unrecorded) {
        sent_unrecorded(f);
        if (run)
            n = one_run<false>(f, burst, n, now);
    } else {
        OutMsg& o = f.out[f.sent & f.mask];
        o.crc32c = f.msg.crc32c; // final: the LAST is built
        o.sent_tsc = now;
        queued_--;
        publish(f.sent, f.sent + 1);
        if (!f.spec.reliable)
            retire(f);
        else if (f.deadline == 0)
            restart(f, now);
        if (run)
            n = recorded ? one_run<true>(f, burst, n, now) : one_run<false>(f, burst, n, now);
    }
    return n;
}

// Flow f's turn ends once over. A paced flow's turn is its session's
// (PacedTurn): it goes on over the pacer's steps, and the session's other
// flows take theirs after it, not whichever the round robin meets when the
// pacer opens (that was the flow that sent first, every step: issue 41).
inline void Sender::end_turn_if_over(SendFlow& f, uint32_t burst) {
    if (f.turn != nullptr) {
        if (turn_over(f, f.turn->bytes, f.turn->pkts, burst)) {
            f.turn->end();
            next_turn();
        }
    } else if (turn_over(f, turn_bytes_, turn_pkts_, burst)) {
        next_turn();
    }
}

// New messages, round robin. A flow's turn is whole messages, until one
// ends with a burst of packets sent in the turn (or a quantum of bytes);
// of a message larger than the quantum, a quantum. Small messages thus go a
// burst of one flow at a time: its state, and its receiver's and consumer's,
// stay warm for all of them, where a message per turn touched 32 flows' in
// every burst (64 flows x 64 B: 1.19x). Another flow's message waits behind
// at most a burst (and a message) of each flow ahead of it. Interleaving
// every burst instead put a partly sent message of every flow in flight at
// once (64 flows x 64 KiB: 4 MiB of regions and buffers in use, out of the
// caches). A paced flow's turn is the same, over as many of its session's
// pacer steps as it takes; the session's flows take turns (PacedTurn).
uint32_t Sender::new_data(uint32_t burst, uint32_t n, uint64_t now) {
    const uint32_t nflows = static_cast<uint32_t>(flows_.size());
    uint32_t idle = 0;
    stash_.open(burst - n);
    while (n < burst && idle < nflows) {
        SendFlow& f = *flows_[rr_];
        if (f.turn != nullptr && f.turn->holder != nullptr && f.turn->holder != &f) {
            next_turn(); // its session's turn is another flow's
            idle++;
            continue;
        }
        if (!f.active) {
            if (f.spec.local_released != nullptr && f.failed == FailReason::None)
                sync_local(f);
            bool have = f.failed == FailReason::None && f.sent != f.submitted;
            bool fresh = false; // the message is m, just made by the source
            Message m;
            if (!have && f.failed == FailReason::None && source_ != nullptr &&
                f.submitted - f.reported < f.spec.ring_size) {
                uint64_t cookie = 0;
                if (source_(source_ctx_, f.spec.user, f.submitted, m, cookie)) {
                    have = accept(f, m, cookie);
                    fresh = have;
                }
            }
            // The credit window: the receiver takes msg_ids below released + ring.
            if (!have || (f.spec.reliable && f.sent - f.released >= f.spec.ring_size)) {
                if (f.turn != nullptr && f.turn->holder == &f)
                    f.turn->end(); // nothing to send: its session's next flow takes the turn
                next_turn();
                idle++;
                continue;
            }
            OutMsg& o = f.out[f.sent & f.mask];
            f.msg.msg_id = f.sent;
            if (!fresh) { // prepared above when fresh
                f.msg.bytes = {o.data, o.chain ? 0 : o.len};
                f.msg.chain = o.chain;
                f.msg.shinfo = o.shinfo;
                f.msg.iova = o.iova;
                // The CRC32C is folded into the copy as the packets are built
                // (final once the LAST is); checked at submit: the plan fits.
                marker(f, f.msg).prepare_streamed(f.spec.tx, f.msg);
            }
            begin_cut(f);
        }
        if (f.turn != nullptr)
            f.turn->holder = &f; // the session's turn is this flow's, from now or when its pacer opens
        // Its pacer holds the session, or its slow start waits for feedback
        // (Congestion::silent; new data only): another session's flow meanwhile.
        if (paced(f, now) || (f.cc != nullptr && f.cc->silent(now))) {
            next_turn();
            idle++;
            continue;
        }
        idle = 0;
        uint32_t k = f.msg.plan.pkt_count - f.next_pkt;
        if (k > burst - n)
            k = burst - n;
        if (f.cc != nullptr && k * f.msg.plan.stride > f.cc->step_bytes())
            k = f.cc->step_bytes() / f.msg.plan.stride + 1;
        if (f.turn != nullptr && f.msg.plan.msg_len > cfg_.tx_quantum) { // the turn ends at its quantum
            const uint64_t left = (cfg_.tx_quantum - f.turn->bytes + f.msg.plan.stride - 1) / f.msg.plan.stride;
            if (k > left)
                k = static_cast<uint32_t>(left);
        }
        f.msg.stamp = stamp_;
        uint32_t path = 0;
        if (unlikely(f.paths != nullptr))
            path = aim(f, f.msg, k, TxPaths::kNone, now);
        const TxMarker& mk = marker(f, f.msg); // a one-packet message skips build()'s checks (not sprayed: its OneFrame holds one port)
        const int rc = f.paths == nullptr && mk.one_packet(f.spec.tx, f.msg)
                           ? mk.build_one(f.spec.tx, f.one, f.msg, pend_ + n, &stash_)
                           : mk.build(f.spec.tx, f.msg, f.next_pkt, k, pend_ + n, Flags::None, &stash_);
        if (unlikely(rc < 0)) {
            bump(ctr_.alloc_fail);
            break; // pool empty: next round
        }
        if (unlikely(f.paths != nullptr)) {
            carried(f, f.msg.msg_id, f.next_pkt, k, path, false);
            if (f.paths->rails() > 1)
                to_rail(n, k, f.paths->rail(path));
        }
        if (&mk == &marker_zc_)
            bump(ctr_.zero_copy_pkts, k);
        if (f.cc != nullptr)
            pace(f, now, n, k);
        n += k;
        f.next_pkt += k;
        // The turn's count: a paced flow's is its session's (PacedTurn).
        const uint64_t bytes = static_cast<uint64_t>(k) * f.msg.plan.stride; // about: the LAST carries less
        if (f.turn != nullptr) {
            f.turn->bytes += bytes;
            f.turn->pkts += k;
        } else {
            turn_bytes_ += bytes;
            turn_pkts_ += k;
        }
        if (f.next_pkt == f.msg.plan.pkt_count) {
            n = message_sent(f, burst, n, now);
            if (unlikely(refused_)) { // the turn ended, as a refusal above ends it
                refused_ = false;
                idle++;
                continue;
            }
        }
        end_turn_if_over(f, burst);
    }
    stash_.release();
    return n;
}

// Intake: ACK/NACK frames (verified here), local receivers' records.
bool Sender::intake(uint64_t now) {
    rte_mbuf* in[TxMarker::kMaxBurst];
    unsigned k = rte_ring_sc_dequeue_burst(wire_in_, reinterpret_cast<void**>(in), TxMarker::kMaxBurst, nullptr);
    for (unsigned i = 0; i < k; i++)
        on_wire_control(in[i], now);
    if (k)
        rte_pktmbuf_free_bulk(in, k);
    const unsigned l = rte_ring_sc_dequeue_burst_elem(local_in_, ctl_in_, sizeof(Control), std::size(ctl_in_), nullptr);
    for (unsigned i = 0; i < l; i++)
        on_control(ctl_in_[i], now);
    return k + l != 0;
}

void Sender::hear_all(uint64_t now) {
    while (intake(now)) {
    }
}

bool Sender::poll(uint64_t now) {
    bool work = intake(now);
    // Completions a full queue held back.
    if (backlog_ && comp_count_ < comp_.size()) {
        backlog_ = false;
        for (SendFlow* f : flows_)
            retire(*f);
    }
    timers(now);

    paced_until_ = 0;
    if (likely(cfg_.rails == 1) ? tx_.flush(now) : rails_ready(now)) {
        const uint32_t burst = __atomic_load_n(&cfg_.burst, __ATOMIC_RELAXED);
        uint32_t n = rte_ring_sc_dequeue_burst(ctl_out_, reinterpret_cast<void**>(pend_), burst / 2 ? burst / 2 : 1,
                                               nullptr);
        bump(ctr_.ctl_tx, n);
        if (unlikely(cfg_.rails > 1)) // an ACK goes back by the rail it was built for (Receiver::emit)
            for (uint32_t i = 0; i < n; i++)
                for (uint32_t r = 1; r < cfg_.rails; r++)
                    if (rte_is_same_ether_addr(&rte_pktmbuf_mtod(pend_[i], const rte_ether_hdr*)->src_addr,
                                               &rail_mac_[r]))
                        to_rail(i, 1, r);
        stamp_host_ = static_cast<uint16_t>(now >> stamp_shift_);
        stamp_ = rte_cpu_to_be_16(stamp_host_);
        n = serve_jobs(burst, n, now);
        if (!flows_.empty())
            n = new_data(burst, n, now);
        if (unlikely(cfg_.rails > 1) && n != 0) {
            split_rails(n, now);
            work = true;
            n = 0;
        }
        if (n != 0) {
            tx_.send(n, now);
            work = true;
            paced_until_ = 0;
        }
    }
    uint32_t busy = active_ + queued_ + tx_.pending() + job_count_ + (job_on_ ? 1 : 0);
    for (uint32_t r = 1; r < cfg_.rails; r++)
        busy += rail_tx_[r]->pending();
    if (busy != busy_)
        __atomic_store_n(&busy_, busy, __ATOMIC_RELAXED);
    return work;
}

} // namespace tailmark
