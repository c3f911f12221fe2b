// tx role. Loopback and send mode: the generator writes each message, the
// TxMarker cuts it into its packet group and marks the LAST packet, and
// bursts go out with bounded retries; retransmissions (NACKed packets, the
// timer's probes) go first. Recv mode: ACKs and NACKs (tailmark/control.h).
//
// Fast path: no heap allocation, no lock, no log. Mbufs come from the pool;
// message buffers were allocated at set-up.
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_timer.h>

#include "context.h"
#include "generator.h"

namespace tailmark::app {

namespace {

// Hands pending packets to the PMD. True when nothing is pending afterwards.
// A partial burst keeps its rest for the next iteration; after stall_cycles
// without any progress the rest is freed and counted (a dead link must not
// hang the lcore, and must not stop it from polling its other roles).
bool flush(TxCtx& c, TxQueueCtx& q, uint64_t now) {
    if (q.pos == q.npend) {
        q.npend = q.pos = 0;
        return true;
    }
    const uint16_t left = static_cast<uint16_t>(q.npend - q.pos);
    const uint16_t sent = rte_eth_tx_burst(c.port, q.queue, q.pend + q.pos, left);
    if (sent)
        bump(c.pkts_tx, sent);
    q.pos += sent;
    if (q.pos == q.npend) {
        q.npend = q.pos = 0;
        q.stall_since = 0;
        return true;
    }
    if (sent != 0 || q.stall_since == 0) {
        q.stall_since = now;
        return false;
    }
    if (now - q.stall_since > g_dp.stall_cycles) {
        rte_pktmbuf_free_bulk(q.pend + q.pos, q.npend - q.pos);
        bump(c.tx_dropped, q.npend - q.pos);
        q.npend = q.pos = 0;
        q.stall_since = 0;
        return true;
    }
    return false;
}

// Hands the n packets just built into q.pend to the PMD. False when there
// were none.
inline bool submit(TxCtx& c, TxQueueCtx& q, uint32_t n, uint64_t now) {
    if (n == 0)
        return false;
    q.npend = n;
    q.pos = 0;
    flush(c, q, now);
    return true;
}

void on_timer(rte_timer* t, void* arg);

inline void arm(TxFlowState& s, uint64_t ticks) {
    s.seen_acked = acked_of(*s.f);
    s.seen_released = released_of(*s.f);
    s.deadline = rte_rdtsc() + ticks;
    s.timer_on = rte_timer_reset(&s.timer, ticks, SINGLE, rte_lcore_id(), on_timer, &s) == 0;
}

// (Re)starts the timer with the base timeout: progress was made.
inline void restart(TxFlowState& s) {
    s.retries = 0;
    s.rto = g_dp.rto_cycles;
    arm(s, s.rto);
}

// Retransmission timer of one flow (rte_timer_manage, on its tx lcore).
// Progress (the cumulative ACK or the consumer cursor moved) re-arms it with
// the base timeout. Otherwise, once the oldest unacknowledged message was
// sent a timeout ago, it expires: back-off, and a probe (the LAST packet
// again, flagged RETX) for the oldest few messages; a receiver answers a
// probe with a NACK of what it misses, or an ACK. After --retry-limit
// expiries in a row the flow fails.
constexpr uint32_t kProbeMsgs = 8;

void on_timer(rte_timer*, void* arg) {
    TxFlowState& s = *static_cast<TxFlowState*>(arg);
    TxCtx& c = *s.c;
    FlowCtx& f = *s.f;
    s.timer_on = false;
    if (failed(f))
        return;
    const uint64_t now = rte_rdtsc();
    const uint32_t acked = acked_of(f);
    const uint32_t rel = released_of(f);
    const uint32_t next = s.next_msg;
    const bool send = g_dp.mode == Mode::Send;
    if (acked == next && (!send || rel == next))
        return; // nothing owed: armed again by the next message sent
    if (now - s.deadline > s.rto / 2) {
        // Fired late: this lcore was not running (descheduled), so neither
        // was whatever shares it (the rx role in loopback). Give the other
        // roles a round before judging; this is not an expiry.
        arm(s, s.rto / 4 + 1);
        return;
    }
    if (acked != s.seen_acked || rel != s.seen_released) {
        restart(s);
        return;
    }
    if (acked != next) {
        const OutMsg& head = s.out[acked & (g_dp.ring_size - 1)];
        if (head.msg_id == acked && now - head.sent_tsc < s.rto) {
            arm(s, s.rto - (now - head.sent_tsc)); // sent recently: not late yet
            return;
        }
    } else if (now - f.last_ctl.load(std::memory_order_relaxed) < s.rto) {
        // Send: all completed, the receiver's consumer has not released them
        // yet and its keep-alives arrive: a slow consumer, not a loss.
        arm(s, s.rto);
        return;
    }
    bump(c.rto_expired);
    if (++s.retries > g_dp.retry_limit) {
        fail(f, FlowFailure::RetryLimit);
        return;
    }
    for (uint32_t m = acked; m != next && m - acked < kProbeMsgs; m++) {
        const OutMsg& o = s.out[m & (g_dp.ring_size - 1)];
        if (o.msg_id != m)
            continue;
        Nack n{};
        n.flow = f.id;
        n.msg_id = m;
        n.nranges = 1;
        n.ranges[0] = {static_cast<uint16_t>(o.pkt_count - 1), 1};
        if (rte_ring_enqueue_elem(s.q->nack_q, &n, sizeof(n)) != 0)
            break;
        bump(c.probes);
    }
    s.rto = s.rto * 2 < g_dp.rto_max_cycles ? s.rto * 2 : g_dp.rto_max_cycles;
    arm(s, s.rto);
}

// The next range of the request being served with packets to send.
inline bool next_range(TxQueueCtx& q, uint32_t pkt_count) {
    for (; q.job_r < q.job.nranges; q.job_r++) {
        const NackRange& r = q.job.ranges[q.job_r];
        if (r.first >= pkt_count)
            continue;
        const uint32_t end = r.count == 0 || r.first + uint32_t(r.count) > pkt_count ? pkt_count : r.first + r.count;
        q.job_pos = r.first;
        q.job_end = end;
        return true;
    }
    return false;
}

// Takes up the request in q.job: only for a message the flow still owes
// (sent, not acknowledged); the bytes come from the generator again.
bool start_job(TxCtx& c, TxQueueCtx& q) {
    const Nack& j = q.job;
    if (j.flow >= g_dp.nflows || j.nranges == 0 || j.nranges > kMaxNackRanges)
        return false;
    FlowCtx& f = g_dp.flows[j.flow];
    TxFlowState* s = f.txs;
    if (s == nullptr || s->q != &q || failed(f))
        return false;
    const uint32_t acked = acked_of(f);
    if (static_cast<int32_t>(j.msg_id - acked) < 0 || static_cast<int32_t>(j.msg_id - s->next_msg) >= 0)
        return false;
    const OutMsg& o = s->out[j.msg_id & (g_dp.ring_size - 1)];
    if (o.msg_id != j.msg_id)
        return false;
    q.job_r = 0;
    if (!next_range(q, o.pkt_count))
        return false;
    if (q.scratch_len != o.len || q.scratch_flow != j.flow || q.scratch_msg != j.msg_id) {
        generate(f.id, g_dp.fixed_payload ? 0 : j.msg_id, q.scratch, o.len);
        q.scratch_flow = f.id;
        q.scratch_msg = j.msg_id;
        q.scratch_len = o.len;
    }
    q.job_msg.msg_id = j.msg_id;
    q.job_msg.bytes = {q.scratch, o.len};
    q.job_msg.chain = nullptr;
    q.job_msg.plan = plan_group(o.len, f.tx.stride);
    q.job_msg.crc32c = o.crc32c;
    bump(c.retx_reqs);
    return true;
}

// Retransmissions into q.pend[0..), before any new message. Returns the count.
uint32_t tx_retx(TxCtx& c, TxQueueCtx& q, uint32_t burst) {
    uint32_t n = 0;
    while (n < burst) {
        if (!q.job_on) {
            if (rte_ring_sc_dequeue_elem(q.nack_q, &q.job, sizeof(Nack)) != 0)
                break;
            q.job_on = start_job(c, q);
            if (!q.job_on) {
                bump(c.stale_reqs);
                continue;
            }
        }
        FlowCtx& f = g_dp.flows[q.job.flow];
        uint32_t k = q.job_end - q.job_pos;
        if (k > burst - n)
            k = burst - n;
        const int rc = c.marker.build(f.tx, q.job_msg, q.job_pos, k, q.pend + n, Flags::Retx);
        if (unlikely(rc < 0)) {
            bump(c.alloc_fail);
            break;
        }
        n += k;
        bump(c.retx_pkts, k);
        bump(f.txs->retx_pkts, k);
        q.job_pos += k;
        if (q.job_pos == q.job_end) {
            q.job_r++;
            q.job_on = next_range(q, q.job_msg.plan.pkt_count);
        }
    }
    return n;
}

// May flow s start its next message now? (credits)
inline bool window_open(const TxFlowState& s) {
    if (!g_dp.flow_control)
        return true;
    const FlowCtx& f = *s.f;
    if (g_dp.mode == Mode::Send && f.peer_seen.load(std::memory_order_acquire) == 0)
        return false; // no receiver yet: nothing may be sent
    return static_cast<uint32_t>(s.next_msg - released_of(f)) < g_dp.ring_size;
}

// Picks flow s's next message, if one may start: a queued `send` request of
// the shell first, else the generator (--messages per flow; 0 = endless).
// Sets s.msg's length through start_message's caller. No lock: the requests
// come on an SP/SC rte_ring, start/stop as single atomic stores.
inline bool may_start(TxFlowState& s, uint64_t& len, uint64_t now) {
    if (s.f->send_q != nullptr && g_tx_paused.load(std::memory_order_relaxed))
        return false;
    if (failed(*s.f))
        return false;
    if (!window_open(s))
        return false;
    if (s.send_left == 0 && s.f->send_q != nullptr) {
        uint64_t req;
        if (rte_ring_sc_dequeue_elem(s.f->send_q, &req, sizeof(req)) == 0) {
            s.send_size = static_cast<uint32_t>(req >> 32);
            s.send_left = static_cast<uint32_t>(req);
        }
    }
    if (s.send_left != 0) {
        s.send_left--;
        s.cur_send = true;
        len = s.send_size;
        return true;
    }
    if (!g_gen_on.load(std::memory_order_relaxed) || (g_dp.messages != 0 && s.gen_sent >= g_dp.messages))
        return false;
    if (g_dp.pace_cycles != 0) { // --rate: one message per interval; a late start does not bank credit
        if (s.next_start == 0) // flows staggered over the interval: evenly paced, not in bursts
            s.next_start = now + g_dp.pace_cycles * s.f->id / g_dp.nflows;
        if (now < s.next_start)
            return false;
        // Late (the lcore was held up): skip the missed intervals but keep the
        // flow's phase. Restarting from `now` would line every late flow up on
        // the same instant, and their messages would queue behind each other
        // from then on (4 flows: p50 0.8 -> 4 us after one 0.7 ms stall).
        s.next_start += g_dp.pace_cycles * (1 + (now - s.next_start) / g_dp.pace_cycles);
    }
    s.gen_sent++;
    s.cur_send = false;
    len = generator_length(s.next_msg);
    return true;
}

// --replay: the ready-made group for the flow's next message.
inline rte_mbuf** replay_set(const TxFlowState& s) {
    return s.replay + (s.next_msg & (g_dp.ring_size - 1)) * s.replay_plan.pkt_count;
}

// --replay: may that group be reused? Only when the receiver has freed every
// packet of its previous use (this lcore's reference alone is left).
inline bool replay_free(const TxFlowState& s) {
    rte_mbuf** set = replay_set(s);
    for (uint32_t i = 0; i < s.replay_plan.pkt_count; i++)
        if (rte_mbuf_refcnt_read(set[i]) != 1)
            return false;
    return true;
}

// --replay: packets [first, first + k) of the current message, re-stamped.
inline void replay_build(const TxFlowState& s, uint32_t first, uint32_t k, rte_mbuf** out) {
    rte_mbuf** set = replay_set(s);
    const uint32_t msg = s.next_msg;
    const rte_be32_t be_msg = rte_cpu_to_be_32(msg);
    for (uint32_t i = 0; i < k; i++) {
        rte_mbuf* m = set[first + i];
        uint8_t* h = rte_pktmbuf_mtod(m, uint8_t*) + kEthLen + kIpLen + kUdpLen;
        memcpy(h + 4, &be_msg, 4); // Header::msg_id
        if (first + i + 1 == s.replay_plan.pkt_count) {
            uint8_t* t = rte_pktmbuf_mtod(m, uint8_t*) + m->data_len - kTrailerLen;
            const rte_be64_t flag = rte_cpu_to_be_64(flag_for(msg));
            const rte_be32_t slot = rte_cpu_to_be_32(msg & (g_dp.ring_size - 1));
            memcpy(t, &flag, 8);
            memcpy(t + 8, &slot, 4);
        }
        rte_mbuf_refcnt_update(m, 1); // the receiver's free leaves ours
        out[i] = m;
    }
}

// The generator's message: its bytes, its plan and CRC32C, and the record a
// retransmission needs.
inline void write_message(TxCtx& c, TxFlowState& s, uint64_t len) {
    uint8_t* buf = s.buf; // fixed payload: message 0's bytes since set-up
    if (!g_dp.fixed_payload) {
        if (len <= g_dp.tx_quantum) // sent whole in this turn (tx_data_queue)
            buf = s.q->turn_buf;
        generate(s.f->id, s.next_msg, buf, len);
    }
    if (s.f->sizes != nullptr) // before any packet of it leaves: the consumer checks the length
        __atomic_store_n(&s.f->sizes[s.next_msg & (g_dp.ring_size - 1)], uint64_t(s.next_msg) << 32 | len,
                         __ATOMIC_RELEASE);
    s.msg.msg_id = s.next_msg;
    s.msg.bytes = {buf, static_cast<size_t>(len)};
    s.msg.chain = nullptr;
    // The CRC32C is folded into the copy as the packets are built; the record
    // gets it once the LAST is (tx_data_queue). A retransmission is only ever
    // asked for a message sent whole.
    c.marker.prepare_streamed(s.f->tx, s.msg); // checked at set-up: the plan fits
    OutMsg& o = s.out[s.next_msg & (g_dp.ring_size - 1)];
    o.msg_id = s.next_msg;
    o.len = static_cast<uint32_t>(len);
    o.crc32c = 0;
    o.pkt_count = s.msg.plan.pkt_count;
}

inline void start_message(TxCtx& c, TxFlowState& s, uint64_t len) {
    if (g_dp.replay)
        s.msg.plan = s.replay_plan; // ready-made: nothing to generate, checksum or record
    else
        write_message(c, s, len);
    s.next_pkt = 0;
    s.active = true;
    c.active++;
}

inline void next_turn(TxQueueCtx& q) {
    q.rr = q.rr + 1 == q.nflows ? 0 : q.rr + 1;
    q.turn_bytes = 0;
}

bool tx_data_queue(TxCtx& c, TxQueueCtx& q, uint64_t now) {
    if (!flush(c, q, now))
        return false; // the PMD is full: let the other roles run
    if (q.nflows == 0)
        return false;
    const bool may_open = phase() == Phase::Run;
    const uint32_t burst = dp_burst();
    uint32_t n = tx_retx(c, q, burst), idle = 0;
    uint64_t len = 0;
    while (n < burst && idle < q.nflows) {
        TxFlowState& s = q.flows[q.rr];
        if (!s.active) {
            if (!may_open || (g_dp.replay && !replay_free(s)) || !may_start(s, len, now)) {
                next_turn(q);
                idle++;
                continue;
            }
            start_message(c, s, len);
        }
        idle = 0;
        uint32_t k = s.msg.plan.pkt_count - s.next_pkt;
        if (k > burst - n)
            k = burst - n;
        int rc = static_cast<int>(k);
        if (g_dp.replay)
            replay_build(s, s.next_pkt, k, q.pend + n);
        else
            rc = c.marker.build(s.f->tx, s.msg, s.next_pkt, k, q.pend + n);
        if (unlikely(rc < 0)) {
            bump(c.alloc_fail);
            break; // pool empty: retry next iteration
        }
        n += k;
        s.next_pkt += k;
        q.turn_bytes += static_cast<uint64_t>(k) * s.msg.plan.stride; // about: the LAST carries less
        if (s.next_pkt == s.msg.plan.pkt_count) {
            s.active = false;
            c.active--;
            OutMsg& o = s.out[s.next_msg & (g_dp.ring_size - 1)];
            o.sent_tsc = now;
            if (!g_dp.replay)
                o.crc32c = s.msg.crc32c; // final: the LAST is built
            s.next_msg++;
            // No timer without a receiver to answer: --flow-control off
            // (a sink such as net_null) and --replay are benchmarks.
            if (!s.timer_on && !g_dp.replay && g_dp.flow_control)
                restart(s);
            s.f->sent.store(s.next_msg, std::memory_order_release);
            bump(c.msgs_sent);
            bump(c.bytes_tx, s.msg.bytes.size());
            if (s.cur_send)
                s.f->sends_sent.store(s.f->sends_sent.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        }
        // Round robin: a finished message, or a quantum of one larger than the
        // quantum, ends the flow's turn; a message up to it is never cut (its
        // bytes are in the queue's one turn_buf). Interleaving every burst
        // instead put a partly sent message of every flow in flight at once
        // (64 flows x 64 KiB: 4 MiB of regions and buffers in use, out of the
        // caches).
        if (!s.active || (s.msg.plan.msg_len > g_dp.tx_quantum && q.turn_bytes >= g_dp.tx_quantum))
            next_turn(q);
    }
    return submit(c, q, n, now);
}

// Recv mode: NACKs first (the placers' requests, each with the current
// cursors), then an ACK per flow whose cursors advanced (coalesced: a
// quarter of the ring, or ack_min_cycles), a retransmission asked for one,
// or the keep-alive is due.
bool tx_ack_queue(TxCtx& c, TxQueueCtx& q, uint64_t now) {
    if (!flush(c, q, now) || q.nflows == 0)
        return false;
    uint32_t n = 0;
    const uint32_t burst = dp_burst();
    Control ctl;
    ctl.epoch = g_dp.epoch;
    while (n < burst && rte_ring_sc_dequeue_elem(q.nack_q, &ctl.n, sizeof(Nack)) == 0) {
        const FlowCtx& f = g_dp.flows[ctl.n.flow];
        ctl.nack = true;
        ctl.released_upto = f.consumed.load(std::memory_order_acquire);
        ctl.acked_upto = f.placer->acked_upto(f.id); // after: released <= acked
        rte_mbuf* m = build_control(c.pool, f.tx, ctl);
        if (unlikely(m == nullptr)) {
            bump(c.alloc_fail); // lost: the placer asks again after its back-off
            break;
        }
        q.pend[n++] = m;
        bump(c.nacks_tx);
    }
    ctl.nack = false;
    ctl.n.nranges = 0;
    for (uint32_t i = 0; i < q.nflows && n < burst; i++) {
        TxFlowState& s = q.flows[q.rr];
        q.rr = q.rr + 1 == q.nflows ? 0 : q.rr + 1;
        const uint32_t released = s.f->consumed.load(std::memory_order_acquire);
        const uint32_t acked = s.f->placer->acked_upto(s.f->id);
        const uint32_t adv = (released - s.acked) > (acked - s.ack_cum) ? released - s.acked : acked - s.ack_cum;
        const uint64_t since = now - s.ack_tsc;
        const bool asked = s.f->placer->take_ack_request(s.f->id);
        if (!(adv >= g_dp.ack_batch || (adv != 0 && since >= g_dp.ack_min_cycles) || asked ||
              since >= g_dp.ack_keepalive_cycles || s.ack_tsc == 0))
            continue;
        ctl.n.flow = s.f->id;
        ctl.released_upto = released;
        ctl.acked_upto = acked;
        rte_mbuf* m = build_control(c.pool, s.f->tx, ctl);
        if (unlikely(m == nullptr)) {
            bump(c.alloc_fail);
            break;
        }
        q.pend[n++] = m;
        s.acked = released;
        s.ack_cum = acked;
        s.ack_tsc = now;
        bump(c.acks_tx);
        if (g_dp.messages != 0 && released == g_dp.messages)
            s.f->final_acks.fetch_add(1, std::memory_order_relaxed);
    }
    return submit(c, q, n, now);
}

} // namespace

bool tx_step(TxCtx& c) {
    rte_timer_manage(); // retransmission timers of this lcore's flows
    const uint64_t now = rte_rdtsc();
    uint32_t pending = 0;
    bool work = false;
    for (uint32_t i = 0; i < c.nqueues; i++) {
        TxQueueCtx& q = c.queues[i];
        work |= g_dp.mode == Mode::Recv ? tx_ack_queue(c, q, now) : tx_data_queue(c, q, now);
        pending += q.npend - q.pos;
    }
    const uint32_t busy = c.active + pending;
    if (busy != c.busy)
        __atomic_store_n(&c.busy, busy, __ATOMIC_RELAXED);
    return work;
}

} // namespace tailmark::app
