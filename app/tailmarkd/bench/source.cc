// The generator as the Senders' source (source.h). Fast path: no heap
// allocation, no lock, no log; reached through the Sender's function
// pointers only, so living apart from the tx step costs nothing.
#include "source.h"

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ring_elem.h>

#include "run/context.h"
#include "generator.h"

namespace tailmark::app {

// The generator's buffer comes back: the Sender let go of the message (it
// was delivered, or failed). Copy mode: the Sender's hold is the only
// reference, so this runs on the Sender's lcore, the buffer stack's owner.
void gen_buf_free(void*, void* opaque) {
    GenBuf* b = static_cast<GenBuf*>(opaque);
    b->next = b->owner->free_bufs;
    b->owner->free_bufs = b;
}

void gen_delivered(void* ctx, const SendCompletion* done, uint32_t n) {
    TxCtx& c = *static_cast<TxCtx*>(ctx);
    const uint64_t t = rte_rdtsc();
    for (uint32_t i = 0; i < n; i++)
        if (done[i].status == SendStatus::Delivered) {
            const uint64_t lat = t > done[i].cookie ? t - done[i].cookie : 0;
            c.hist.add(lat);
            static_cast<GenFlow*>(done[i].user)->f->lat.add(lat);
        }
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

} // namespace tailmark::app
