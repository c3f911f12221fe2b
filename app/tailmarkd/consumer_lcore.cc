// consumer role. For each flow it owns, in msg_id order:
//   message mode: poll the slot's flag (acquire), take the latency sample,
//                 verify every byte of the region against the generator,
//                 release the slot;
//   packet mode:  dequeue every per-packet completion, count the packets of
//                 each message (pkt_count comes on the LAST's record); once a
//                 message has them all, the same sample, verification and
//                 release.
// Latency = TSC when the consumer sees the completion - rx TSC of the packet
// that completed it; into a preallocated histogram.
#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "context.h"
#include "generator.h"

namespace tailmark::app {

namespace {

inline void finish(ConsCtx& c, ConsFlowState& s, const uint8_t* data, uint64_t len, uint64_t rx_tsc,
                   uint64_t seen_tsc) {
    c.hist.add(seen_tsc > rx_tsc ? seen_tsc - rx_tsc : 0);
    bump(c.completed);
    if (g_dp.verify) { // --verify off: the completion alone (benchmarks of the consumer's own cost)
        const bool ok = len == expected_length(*s.f, s.next, generator_length(s.next)) &&
                        verify(s.f->id, g_dp.replay || g_dp.fixed_payload ? 0 : s.next, data, len);
        bump(ok ? c.verified : c.verify_errors);
    }
    bump(c.bytes, len);
    s.f->ring->release(s.next);
    s.next++;
    s.f->consumed.store(s.next, std::memory_order_release);
}

bool consume_messages(ConsCtx& c, ConsFlowState& s) {
    CompletionRing& ring = *s.f->ring;
    uint32_t k = 0;
    for (const uint32_t burst = dp_burst(); k < burst; k++) {
        const CompletionSlot* slot = ring.poll(s.next);
        if (slot == nullptr)
            break;
        const uint64_t seen = rte_rdtsc();
        const auto bytes = ring.message(slot);
        finish(c, s, bytes.data(), bytes.size(), slot->rx_tsc, seen);
    }
    return k != 0;
}

bool consume_packets(ConsCtx& c, ConsFlowState& s) {
    PacketCompletion recs[kMaxBurst];
    const uint32_t mask = g_dp.ring_size - 1;
    const unsigned n = rte_ring_sc_dequeue_burst_elem(s.f->pkt_cq, recs, sizeof(PacketCompletion),
                                                      dp_burst(), nullptr);
    for (unsigned i = 0; i < n; i++) {
        const PacketCompletion& r = recs[i];
        PktSlot& ps = s.slots[r.msg_id & mask];
        if (!ps.valid || ps.msg_id != r.msg_id)
            ps = PktSlot{r.msg_id, 0, 0, 0, 1, 0};
        ps.got++;
        ps.bytes += r.len;
        if (r.rx_tsc > ps.rx_tsc)
            ps.rx_tsc = r.rx_tsc;
        if (r.pkt_count != 0)
            ps.total = r.pkt_count;
    }
    for (;;) {
        PktSlot& ps = s.slots[s.next & mask];
        if (!ps.valid || ps.msg_id != s.next || ps.total == 0 || ps.got < ps.total)
            return n != 0;
        const uint64_t seen = rte_rdtsc();
        ps.valid = 0;
        finish(c, s, s.f->ring->region(s.next), ps.bytes, ps.rx_tsc, seen);
    }
}

} // namespace

bool consume_step(ConsCtx& c) {
    bool work = false;
    if (dp_completion() == CompletionMode::Packet) {
        for (uint32_t i = 0; i < c.nflows; i++)
            work |= consume_packets(c, c.flows[i]);
    } else {
        for (uint32_t i = 0; i < c.nflows; i++)
            work |= consume_messages(c, c.flows[i]);
    }
    return work;
}

} // namespace tailmark::app
