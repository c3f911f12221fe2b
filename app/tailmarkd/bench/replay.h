// --replay: the rx path as the benchmark's bottleneck. The tx lcore bypasses
// the Sender for data and resends ready-made packet groups (made once by
// Bench::make_replay, in a drivers::ReplayPool), re-stamped with each
// message's msg_id, flag and slot, once every packet of the group's last use
// was freed and the receiver's credits allow it.
//
// Included by tx_step.cc only, with internal linkage as when it lived
// there: tx_step inlines all of it (the replay loops were tuned for it).
// Fast path: no heap allocation, no lock, no log.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include "run/context.h"
#include "drivers/replay_pool.h"

namespace tailmark::app {
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
} // namespace tailmark::app
