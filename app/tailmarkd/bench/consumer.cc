// consumer role: the benchmark's verifying consumer, the application of the
// flows' completion rings when the daemon consumes them itself (no
// --consumer-lcores none, no --mode service). For each flow it owns, in
// msg_id order:
//   message mode: poll the slot's flag (acquire), take the latency sample,
//                 verify every byte of the region against the generator,
//                 release the slot;
//   packet mode:  dequeue every per-packet completion, count the packets of
//                 each message (pkt_count comes on the LAST's record); once a
//                 message has them all, the same sample, verification and
//                 release.
// Latency = TSC when the consumer sees the completion - rx TSC of the packet
// that completed it; into a preallocated histogram.
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "run/context.h"
#include "generator.h"

namespace tailmark::app {

namespace {

// What a burst's finished messages add to the counters, bumped once per
// burst: at 64 B the consumer, like the tx path (tx_marker.h's OneFrame),
// is bound by its stores, and six counters per message were six of them.
struct Tally {
    uint64_t completed = 0, verified = 0, errors = 0, bytes = 0;

    void add_to(ConsCtx& c, ConsFlow& s) const {
        if (completed == 0)
            return;
        bump(c.completed, completed);
        bump(s.completed, completed);
        bump(c.verified, verified);
        bump(s.verified, verified);
        bump(c.verify_errors, errors);
        bump(s.verify_errors, errors);
        bump(c.bytes, bytes);
        bump(s.bytes, bytes);
    }
};

inline void finish(ConsCtx& c, ConsFlow& s, Tally& t, const uint8_t* data, uint64_t len, uint64_t rx_tsc,
                   uint64_t seen_tsc, bool packet_mode) {
    const DataPlaneConfig& cfg = c.plane->cfg;
    const uint64_t lat = seen_tsc > rx_tsc ? seen_tsc - rx_tsc : 0;
    c.hist.add(lat);
    s.f->lat.add(lat);
    if (unlikely(c.trace != nullptr) && lat > c.trace->bound())
        c.trace->slow(s.f->gen_id, s.next, rx_tsc, seen_tsc, c.completed + t.completed);
    t.completed++;
    if (cfg.verify) { // --verify off: the completion alone (benchmarks of the consumer's own cost)
        // A 0-byte message compares nothing: its data (and s.expect) may be
        // null, which memcmp must not be given even for 0 bytes (UBSan).
        const bool ok = len == expected_length(*s.f, s.next, cfg.generator_length(s.next)) &&
                        (len == 0 ||
                         (len <= s.expect_len ? memcmp(data, s.expect, len) == 0
                                              : verify(s.f->gen_id, cfg.replay || cfg.fixed_payload ? 0 : s.next, data, len)));
        t.verified += ok;
        t.errors += !ok;
    }
    t.bytes += len;
    if (packet_mode)
        s.ring->release_seen(s.next); // no flag in packet mode: every packet's completion was seen
    else
        s.ring->release(s.next);
    s.next++;
    s.f->consumed.store(s.next, std::memory_order_release);
}

bool consume_messages(ConsCtx& c, ConsFlow& s, uint32_t burst) {
    CompletionRing& ring = *s.ring;
    Tally t;
    uint32_t k = 0;
    for (; k < burst; k++) {
        const CompletionSlot* slot = ring.poll(s.next);
        if (slot == nullptr)
            break;
        const uint64_t seen = rte_rdtsc();
        const auto bytes = ring.message(slot);
        finish(c, s, t, bytes.data(), bytes.size(), slot->rx_tsc, seen, false);
    }
    t.add_to(c, s);
    return k != 0;
}

bool consume_packets(ConsCtx& c, ConsFlow& s, uint32_t burst) {
    if (s.pkt_cq == nullptr)
        return false;
    PacketCompletion recs[kMaxBurst];
    const uint32_t mask = s.ring->mask();
    const unsigned n = rte_ring_sc_dequeue_burst_elem(s.pkt_cq, recs, sizeof(PacketCompletion), burst, nullptr);
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
    Tally t;
    for (;;) {
        PktSlot& ps = s.slots[s.next & mask];
        if (!ps.valid || ps.msg_id != s.next || ps.total == 0 || ps.got < ps.total)
            break;
        const uint64_t seen = rte_rdtsc();
        ps.valid = 0;
        finish(c, s, t, s.ring->region(s.next), ps.bytes, ps.rx_tsc, seen, true);
    }
    t.add_to(c, s);
    return n != 0;
}

} // namespace

bool consume_step(ConsCtx& c) {
    bool work = false;
    const uint32_t burst = c.plane->burst_now();
    if (c.plane->completion_now() == CompletionMode::Packet) {
        for (ConsFlow* s : c.flows)
            work |= consume_packets(c, *s, burst);
    } else {
        for (ConsFlow* s : c.flows)
            work |= consume_messages(c, *s, burst);
    }
    return work;
}

} // namespace tailmark::app
