// tx role. Loopback and send mode: the generator writes each message, the
// TxMarker cuts it into its packet group and marks the LAST packet, and
// bursts go out with bounded retries. Recv mode: the credit ACKs (ack.h).
//
// Fast path: no heap allocation, no lock, no log. Mbufs come from the pool;
// message buffers were allocated at set-up.
#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "ack.h"
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

// May flow s start its next message now? (credits)
inline bool window_open(const TxFlowState& s) {
    if (!g_dp.flow_control)
        return true;
    const FlowCtx& f = *s.f;
    uint32_t released;
    if (g_dp.mode == Mode::Loopback) {
        released = f.ring->released(); // same process: the consumer cursor itself
    } else {
        if (f.peer_seen.load(std::memory_order_acquire) == 0)
            return false; // no receiver yet: nothing may be sent
        released = f.credit.load(std::memory_order_acquire);
    }
    return static_cast<uint32_t>(s.next_msg - released) < g_dp.ring_size;
}

// Picks flow s's next message, if one may start: a queued `send` request of
// the shell first, else the generator (--messages per flow; 0 = endless).
// Sets s.msg's length through start_message's caller. No lock: the requests
// come on an SP/SC rte_ring, start/stop as single atomic stores.
inline bool may_start(TxFlowState& s, uint64_t& len) {
    if (s.f->send_q != nullptr && g_tx_paused.load(std::memory_order_relaxed))
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
    s.gen_sent++;
    s.cur_send = false;
    len = g_dp.msg_size;
    return true;
}

inline void start_message(TxCtx& c, TxFlowState& s, uint64_t len) {
    generate(s.f->id, s.next_msg, s.buf, len);
    if (s.f->sizes != nullptr) // before any packet of it leaves: the consumer checks the length
        __atomic_store_n(&s.f->sizes[s.next_msg & (g_dp.ring_size - 1)], uint64_t(s.next_msg) << 32 | len,
                         __ATOMIC_RELEASE);
    s.msg.msg_id = s.next_msg;
    s.msg.bytes = {s.buf, static_cast<size_t>(len)};
    s.msg.chain = nullptr;
    c.marker.prepare(s.f->tx, s.msg); // checked at set-up: the plan fits
    s.next_pkt = 0;
    s.active = true;
    c.active++;
}

bool tx_data_queue(TxCtx& c, TxQueueCtx& q, uint64_t now) {
    if (!flush(c, q, now))
        return false; // the PMD is full: let the other roles run
    if (q.nflows == 0)
        return false;
    const bool may_open = phase() == Phase::Run;
    const uint32_t burst = dp_burst();
    uint32_t n = 0, idle = 0;
    uint64_t len = 0;
    while (n < burst && idle < q.nflows) {
        TxFlowState& s = q.flows[q.rr];
        if (!s.active) {
            if (!may_open || !may_start(s, len)) {
                q.rr = q.rr + 1 == q.nflows ? 0 : q.rr + 1;
                idle++;
                continue;
            }
            start_message(c, s, len);
        }
        idle = 0;
        uint32_t k = s.msg.plan.pkt_count - s.next_pkt;
        if (k > burst - n)
            k = burst - n;
        const int rc = c.marker.build(s.f->tx, s.msg, s.next_pkt, k, q.pend + n);
        if (unlikely(rc < 0)) {
            bump(c.alloc_fail);
            break; // pool empty: retry next iteration
        }
        n += k;
        s.next_pkt += k;
        if (s.next_pkt == s.msg.plan.pkt_count) {
            s.active = false;
            c.active--;
            s.next_msg++;
            s.f->sent.store(s.next_msg, std::memory_order_release);
            bump(c.msgs_sent);
            bump(c.bytes_tx, s.msg.bytes.size());
            if (s.cur_send)
                s.f->sends_sent.store(s.f->sends_sent.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        }
        // Round robin per chunk: large messages of several flows interleave.
        q.rr = q.rr + 1 == q.nflows ? 0 : q.rr + 1;
    }
    return submit(c, q, n, now);
}

// Recv mode: one credit ACK per flow whose consumer cursor advanced (batched),
// and a keep-alive per flow every ack_keepalive_cycles.
bool tx_ack_queue(TxCtx& c, TxQueueCtx& q, uint64_t now) {
    if (!flush(c, q, now) || q.nflows == 0)
        return false;
    uint32_t n = 0;
    const uint32_t burst = dp_burst();
    for (uint32_t i = 0; i < q.nflows && n < burst; i++) {
        TxFlowState& s = q.flows[q.rr];
        q.rr = q.rr + 1 == q.nflows ? 0 : q.rr + 1;
        const uint32_t released = s.f->consumed.load(std::memory_order_acquire);
        const uint32_t adv = released - s.acked;
        const uint64_t since = now - s.ack_tsc;
        if (!(adv >= g_dp.ack_batch || (adv != 0 && since >= g_dp.ack_min_cycles) ||
              since >= g_dp.ack_keepalive_cycles || s.ack_tsc == 0))
            continue;
        rte_mbuf* m = build_ack(c.pool, s.f->tx, released);
        if (unlikely(m == nullptr)) {
            bump(c.alloc_fail);
            break;
        }
        q.pend[n++] = m;
        s.acked = released;
        s.ack_tsc = now;
        bump(c.acks_tx);
        if (g_dp.messages != 0 && released == g_dp.messages)
            s.f->final_acks.fetch_add(1, std::memory_order_relaxed);
    }
    return submit(c, q, n, now);
}

} // namespace

bool tx_step(TxCtx& c) {
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
