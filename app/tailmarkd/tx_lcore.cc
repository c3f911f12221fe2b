// tx role: each Sender this lcore owns (one per tx queue) polls: control
// intake, timers, retransmissions, others' control packets, new data. The
// generator is the Senders' message source, an application like any other:
// it writes a message into one of its buffers when the Sender asks for one,
// and the Sender holds the buffer until the message is delivered.
// --replay bypasses the Sender for data: ready-made packet groups, re-stamped
// and sent again once freed (the rx path as the bottleneck, in loopback).
//
// Fast path: no heap allocation, no lock, no log.
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ring_elem.h>

#include "context.h"
#include "drivers/replay_pool.h"
#include "generator.h"
#include "service.h"

namespace tailmark::app {

// The generator's buffer comes back: the Sender let go of the message (it
// was delivered, or failed). Copy mode: the Sender's hold is the only
// reference, so this runs on the Sender's lcore, the buffer stack's owner.
void gen_buf_free(void*, void* opaque) {
    GenBuf* b = static_cast<GenBuf*>(opaque);
    b->next = b->owner->free_bufs;
    b->owner->free_bufs = b;
}

// Flow g's message msg_id, len bytes: the fixed bytes, the scratch buffer
// or a buffer off the stack (false: every one is in flight), its length
// stored where the consumer checks it before any packet of it leaves.
inline bool make_message(TxCtx& c, GenFlow& g, uint32_t msg_id, uint64_t len, Message& m) {
    FlowCtx& f = *g.f;
    if (g.fixed != nullptr) { // message 0's bytes, written once: the bytes outlive the flow
        m = Message{{g.fixed, static_cast<size_t>(len)}, nullptr, nullptr, RTE_BAD_IOVA};
    } else if (g.scratch != nullptr) { // unreliable: copied before the Sender asks again
        generate(f.gen_id, msg_id, g.scratch, len);
        m = Message{{g.scratch, static_cast<size_t>(len)}, nullptr, nullptr, RTE_BAD_IOVA};
    } else {
        GenBuf* b = c.free_bufs;
        if (unlikely(b == nullptr)) {
            bump(c.buf_waits);
            return false;
        }
        c.free_bufs = b->next;
        generate(f.gen_id, msg_id, b->data, len);
        m = Message{{b->data, static_cast<size_t>(len)}, nullptr, &b->shinfo, RTE_BAD_IOVA};
    }
    if (f.sizes != nullptr)
        __atomic_store_n(&f.sizes[msg_id & (f.ring_size - 1)], uint64_t(msg_id) << 32 | len, __ATOMIC_RELEASE);
    return true;
}

// The Senders' source: flow g's next message, if one may start: a queued
// `send` request of the shell first, else the generator (--messages per
// flow; 0 = endless), paced by --rate. No lock: the requests come on an
// SP/SC rte_ring, start/stop as single atomic stores.
bool gen_source(void* ctx, void* user, uint32_t msg_id, Message& m, uint64_t& cookie) {
    TxCtx& c = *static_cast<TxCtx*>(ctx);
    GenFlow& g = *static_cast<GenFlow*>(user);
    FlowCtx& f = *g.f;
    const Plane& pl = *c.plane;
    const DataPlaneConfig& cfg = pl.cfg;
    if (pl.phase_now() != Phase::Run)
        return false;
    if (f.send_q != nullptr && pl.tx_paused.load(std::memory_order_relaxed))
        return false;
    if (g.send_left == 0 && f.send_q != nullptr) {
        uint64_t req;
        if (rte_ring_sc_dequeue_elem(f.send_q, &req, sizeof(req)) == 0) {
            g.send_size = static_cast<uint32_t>(req >> 32);
            g.send_left = static_cast<uint32_t>(req);
        }
    }
    const bool shell = g.send_left != 0;
    uint64_t len;
    if (shell) {
        len = g.send_size;
    } else {
        if (!pl.gen_on.load(std::memory_order_relaxed) || (cfg.messages != 0 && g.gen_sent >= cfg.messages))
            return false;
        if (cfg.pace_cycles != 0) { // --rate: one message per interval; a late start does not bank credit
            const uint64_t now = rte_rdtsc();
            if (g.next_start == 0) // flows staggered over the interval: evenly paced, not in bursts
                g.next_start = now + cfg.pace_cycles * g.f->gen_id / (cfg.flows ? cfg.flows : 1);
            if (now < g.next_start)
                return false;
            // Late by more than a microsecond (the lcore was held up, most
            // often by the VM: tens of us, hundreds of times a second): one
            // late message per tx step. The flows whose turns fell into the
            // stall then leave a loop turn apart instead of as one burst, in
            // which each would wait at the receiver for the placement and
            // consumption of those ahead of it.
            if (now - g.next_start > cfg.late_cycles) {
                if (c.late_turn == c.turn)
                    return false;
                c.late_turn = c.turn;
            }
            // Late (the lcore was held up): skip the missed intervals but keep
            // the flow's phase. Restarting from `now` would line every late
            // flow up on the same instant.
            g.next_start += cfg.pace_cycles * (1 + (now - g.next_start) / cfg.pace_cycles);
        }
        len = cfg.generator_length(msg_id);
    }
    if (!make_message(c, g, msg_id, len, m))
        return false; // every buffer is in flight: the next turn
    if (shell) {
        g.send_left--;
        f.sends_sent.store(f.sends_sent.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    } else {
        g.gen_sent++;
    }
    cookie = c.delivery_latency ? rte_rdtsc() : msg_id;
    bump(c.gen_msgs);
    return true;
}

// The plain generator (no shell, no --rate, a buffer per message or one
// fixed): a flow's next messages, the plane and the quota looked at once.
// The others go one at a time, through gen_source. A message longer than
// lim.max_len, or with a buffer's shared info where lim says none, comes
// alone, first in its batch.
uint32_t gen_source_many(void* ctx, void* user, uint32_t first, uint32_t max, const SourceLimits& lim, Message* ms,
                         uint64_t* cookies) {
    TxCtx& c = *static_cast<TxCtx*>(ctx);
    GenFlow& g = *static_cast<GenFlow*>(user);
    FlowCtx& f = *g.f;
    const Plane& pl = *c.plane;
    const DataPlaneConfig& cfg = pl.cfg;
    if (max <= 1 || f.send_q != nullptr || cfg.pace_cycles != 0 || g.scratch != nullptr) {
        ms[0] = Message{};
        cookies[0] = 0;
        return gen_source(ctx, user, first, ms[0], cookies[0]) ? 1 : 0;
    }
    if (pl.phase_now() != Phase::Run || !pl.gen_on.load(std::memory_order_relaxed))
        return 0;
    if (cfg.messages != 0) {
        if (g.gen_sent >= cfg.messages)
            return 0;
        max = cfg.messages - g.gen_sent < max ? cfg.messages - g.gen_sent : max;
    }
    const bool shinfo_fits = g.fixed != nullptr || !lim.no_shinfo;
    uint32_t k = 0;
    while (k < max) {
        const uint32_t id = first + k;
        const uint64_t len = cfg.generator_length(id);
        const bool fits = len <= lim.max_len && shinfo_fits;
        if (!fits && k != 0)
            break; // it comes first in the next batch
        if (!make_message(c, g, id, len, ms[k]))
            break; // every buffer is in flight: the next turn
        cookies[k++] = c.delivery_latency ? rte_rdtsc() : id;
        if (!fits)
            break; // alone
    }
    g.gen_sent += k;
    bump(c.gen_msgs, k);
    return k;
}

namespace {

// --replay: the index of flow r's packet group for its next message (one
// of ring_size sets) among its packets.
inline uint32_t replay_set(const ReplayFlow& r, uint32_t ring_size) {
    return (r.next_msg & (ring_size - 1)) * r.plan.pkt_count;
}

// May it be reused? Only when every packet of its previous use was freed (by
// the PMD, or the receiver: ReplayPool counts it), and the credits allow it.
inline bool replay_ready(const ReplayFlow& r, uint32_t ring_size) {
    if (r.ring != nullptr && static_cast<uint32_t>(r.next_msg - r.ring->released()) >= ring_size)
        return false;
    const uint32_t set = replay_set(r, ring_size);
    for (uint32_t i = 0; i < r.plan.pkt_count; i++)
        if (!r.pool->reusable(set + i))
            return false;
    return true;
}

// A ready-made packet re-stamped for message msg: its header's msg_id and,
// in the group's LAST, the trailer's flag and slot (both replay loops).
inline void stamp_msg_id(uint8_t* msg_id_at, uint32_t msg) {
    const rte_be32_t be_msg = rte_cpu_to_be_32(msg);
    memcpy(msg_id_at, &be_msg, 4);
}
inline void stamp_trailer(uint8_t* trailer, uint32_t msg, uint32_t slot) {
    const rte_be64_t flag = rte_cpu_to_be_64(flag_for(msg));
    const rte_be32_t be_slot = rte_cpu_to_be_32(slot);
    memcpy(trailer + offsetof(WireTrailer, flag), &flag, 8);
    memcpy(trailer + offsetof(WireTrailer, slot), &be_slot, 4);
}

// Packets [first, first + k) of the current message, re-stamped.
inline void replay_build(const ReplayFlow& r, uint32_t ring_size, uint32_t first, uint32_t k, rte_mbuf** out) {
    const uint32_t set = replay_set(r, ring_size);
    const uint32_t msg = r.next_msg;
    for (uint32_t i = 0; i < k; i++) {
        rte_mbuf* m = r.pkts[set + first + i];
        stamp_msg_id(rte_pktmbuf_mtod(m, uint8_t*) + kEthLen + kIpLen + kUdpLen + offsetof(WireHeader, msg_id), msg);
        if (first + i + 1 == r.plan.pkt_count)
            stamp_trailer(rte_pktmbuf_mtod(m, uint8_t*) + m->data_len - kTrailerLen, msg, msg & (ring_size - 1));
        r.pool->take(set + first + i); // its next free makes it reusable again
        out[i] = m;
    }
}

// --replay's general case: round robin over the queue's flows, a message per
// turn, a group split across bursts where it does not fit. Returns how many
// packets it queued at out; counts the messages it began and finished.
uint32_t replay_turns(const Plane& pl, ReplayQueue& rq, uint32_t burst, bool may_open, rte_mbuf** out,
                      uint32_t& opened, uint32_t& done) {
    std::vector<ReplayFlow>& flows = rq.flows;
    const uint32_t ring = pl.cfg.ring_size;
    const uint32_t nflows = static_cast<uint32_t>(flows.size());
    // Kept below nflows by a compare, not a modulo: a division per message
    // was the longest step of the loop's chain.
    uint32_t rr = rq.rr < nflows ? rq.rr : 0;
    uint32_t n = 0, idle = 0;
    while (n < burst && idle < nflows) {
        ReplayFlow& r = flows[rr];
        if (!r.active) {
            if (!may_open || (pl.cfg.messages != 0 && r.next_msg >= pl.cfg.messages) || !replay_ready(r, ring)) {
                rr = rr + 1 == nflows ? 0 : rr + 1;
                idle++;
                continue;
            }
            opened++;
            r.active = true;
            r.next_pkt = 0;
        }
        idle = 0;
        uint32_t k = r.plan.pkt_count - r.next_pkt;
        if (k > burst - n)
            k = burst - n;
        replay_build(r, ring, r.next_pkt, k, out + n);
        n += k;
        r.next_pkt += k;
        if (r.next_pkt == r.plan.pkt_count) {
            r.active = false;
            r.next_msg++;
            rr = rr + 1 == nflows ? 0 : rr + 1;
            done++;
        }
    }
    rq.rr = rr;
    return n;
}

// A queue of one flow whose messages are one packet each (64 B), on its own
// lcore (ReplayFlow::own_lcore): its next messages while each may start, up
// to `max`, its turns back to back. Returns how many. Its own loop keeps the
// counts, the packets and the message number in registers, where the general
// one reloads them after every store into a packet: tx replay on net_null
// 1.3-1.5x. Not where another lcore reads the packets: there, back-to-back
// stores into lines that lcore has just read cost the tx lcore 135 against
// 70 cycles per packet (rx64, whose lcore 0 then bounded it at 10.5 M
// msgs/s instead of 14); spaced by the general loop's work, they overlap it.
uint32_t replay_run(ReplayFlow& r, uint32_t ring_size, uint32_t max, uint32_t msg_cap, rte_mbuf** out) {
    rte_mbuf* const* pkts = r.pkts;
    const ReplayStamp* stamps = r.stamps;
    drivers::ReplayPool::Counts counts = r.pool->counts();
    const uint32_t mask = ring_size - 1;
    const uint32_t first = r.next_msg;
    if (r.ring != nullptr) { // the credits: messages below released + ring_size
        const uint32_t credit = ring_size - static_cast<uint32_t>(first - r.ring->released());
        max = credit < max ? credit : max;
    }
    if (msg_cap != 0)
        max = msg_cap - first < max ? msg_cap - first : max;
    uint32_t k = 0;
    // Taken as it is stamped: a packet of this run is not reusable again in it.
    for (; k < max && counts.reusable((first + k) & mask); k++) {
        const uint32_t msg = first + k, i = msg & mask;
        const ReplayStamp p = stamps[i];
        stamp_msg_id(p.msg_id, msg);
        stamp_trailer(p.trailer, msg, i);
        counts.take(i); // its next free makes it reusable again
        out[k] = pkts[i];
    }
    r.next_msg = first + k;
    return k;
}

bool replay_queue(TxCtx& c, ReplayQueue& rq, uint64_t now) {
    TxBurst& q = *rq.q;
    std::vector<ReplayFlow>& flows = rq.flows;
    if (!q.flush(now) || flows.empty())
        return false;
    const Plane& pl = *c.plane;
    const uint32_t burst = pl.burst_now();
    const bool may_open = pl.phase_now() == Phase::Run;
    rte_mbuf** out = q.slots();
    uint32_t n, opened = 0, done = 0;
    if (flows.size() == 1 && flows[0].own_lcore && flows[0].plan.pkt_count == 1)
        n = opened = done = may_open ? replay_run(flows[0], pl.cfg.ring_size, burst, pl.cfg.messages, out) : 0;
    else
        n = replay_turns(pl, rq, burst, may_open, out, opened, done);
    if (n == 0)
        return false;
    // Counted once per burst, before its packets leave: opened first (the
    // drain check reads a difference as a message partly queued), and no
    // message is consumed before it is counted as queued.
    bump(c.replay_opened, opened);
    bump(c.replay_msgs, done);
    bump(c.replay_pkts, n);
    q.send(n, now);
    return true;
}

} // namespace

bool tx_step(TxCtx& c, uint64_t now) {
    c.turn = now;
    bool work = false;
    uint64_t paced = 0;
    for (Sender* s : c.senders) {
        work |= s->poll(now);
        const uint64_t p = s->paced_until();
        paced = p != 0 && (paced == 0 || p < paced) ? p : paced;
        SendCompletion done[32]; // the generator's flows report none; others' are counted
        const uint32_t k = s->take_completions(done, 32);
        if (k) {
            bump(c.completions, k);
            if (c.service) { // an application's: into its completion ring
                for (uint32_t i = 0; i < k; i++) {
                    svc_complete(done[i]);
                    if (i + 1 == k || done[i + 1].user != done[i].user) // the flow's last of the batch
                        svc_publish(done[i]);
                }
            } else if (c.delivery_latency) {
                const uint64_t t = rte_rdtsc();
                for (uint32_t i = 0; i < k; i++)
                    if (done[i].status == SendStatus::Delivered) {
                        const uint64_t lat = t > done[i].cookie ? t - done[i].cookie : 0;
                        c.hist.add(lat);
                        static_cast<GenFlow*>(done[i].user)->f->lat.add(lat);
                    }
            }
        }
    }
    for (ReplayQueue& rq : c.replay)
        work |= replay_queue(c, rq, now);
    c.paced_until = work ? 0 : paced;
    return work;
}

} // namespace tailmark::app
