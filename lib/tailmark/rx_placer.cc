#include "tailmark/rx_placer.h"

#include <atomic>
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_memcpy.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "tailmark/crc32c.h"

namespace tailmark {

namespace {
enum class SlotState : uint8_t { Idle, Receiving, Completed };

// Receive state of one slot: which packets of the message in it are placed.
// A plain bitset, not rte_bitmap: resetting must cost the message's size,
// not the capacity (a 64-byte message must not clear 8 KiB of bits).
struct SlotRx {
    uint32_t msg_id;
    SlotState state;
    bool have_last;
    uint16_t pkt_count; // from the trailer, once the LAST is in
    uint32_t received;  // distinct packets placed
    uint32_t hi_idx;    // highest pkt_idx placed + 1
    uint64_t bytes;     // payload bytes placed
    uint64_t max_end;   // highest offset + pay_len placed
    Trailer trailer;
    uint64_t* seen;     // kMaxPktsPerMessage bits
};

constexpr uint32_t kSeenWords = (kMaxPktsPerMessage + 63) / 64;
} // namespace

struct RxPlacer::FlowRx {
    CompletionRing* ring;
    uint32_t key;
    uint32_t mask;
    uint64_t region_size;
    uint32_t stride;   // payload bytes of every full packet of a group
    uint16_t id;
    rte_ring* pkt_cq;  // packet mode
    SlotRx* slots;
    uint64_t* bits;
};

RxPlacer::RxPlacer(const ParserConfig& cfg, int socket_id) : cfg_(cfg), socket_(socket_id) {
    table_ = static_cast<FlowRx**>(
        rte_zmalloc_socket("tm_flow_table", sizeof(FlowRx*) * 65536, RTE_CACHE_LINE_SIZE, socket_));
}

RxPlacer::~RxPlacer() {
    for (FlowRx* f : flows_) {
        rte_free(f->bits);
        rte_free(f->slots);
        rte_free(f);
    }
    rte_free(table_);
}

bool RxPlacer::add_flow(uint16_t flow, CompletionRing* ring, uint32_t key, uint32_t stride) {
    if (table_ == nullptr || ring == nullptr || table_[flow] != nullptr || stride <= kTrailerLen ||
        stride > UINT16_MAX)
        return false;
    auto* f = static_cast<FlowRx*>(rte_zmalloc_socket("tm_flow_rx", sizeof(FlowRx), 64, socket_));
    if (f == nullptr)
        return false;
    const uint32_t n = ring->size();
    f->slots = static_cast<SlotRx*>(rte_zmalloc_socket("tm_slot_rx", sizeof(SlotRx) * n, 64, socket_));
    f->bits = static_cast<uint64_t*>(
        rte_zmalloc_socket("tm_slot_bits", sizeof(uint64_t) * kSeenWords * n, 64, socket_));
    if (f->slots == nullptr || f->bits == nullptr) {
        rte_free(f->slots);
        rte_free(f->bits);
        rte_free(f);
        return false;
    }
    for (uint32_t i = 0; i < n; i++)
        f->slots[i].seen = f->bits + static_cast<uint64_t>(i) * kSeenWords;
    f->ring = ring;
    f->key = key;
    f->mask = ring->mask();
    f->region_size = ring->region_size();
    f->stride = stride;
    f->id = flow;
    table_[flow] = f;
    flows_.push_back(f);
    return true;
}

void RxPlacer::set_packet_completion_ring(uint16_t flow, rte_ring* r) {
    if (table_ != nullptr && table_[flow] != nullptr)
        table_[flow]->pkt_cq = r;
}

static inline void reset_slot(SlotRx& s, uint32_t msg_id) {
    const uint32_t words = (s.hi_idx + 63) / 64;
    if (words)
        memset(s.seen, 0, words * sizeof(uint64_t));
    s.msg_id = msg_id;
    s.state = SlotState::Receiving;
    s.have_last = false;
    s.pkt_count = 0;
    s.received = 0;
    s.hi_idx = 0;
    s.bytes = 0;
    s.max_end = 0;
}

// Copies the payload out of a (possibly chained) mbuf into the region.
static inline void copy_payload(uint8_t* dst, const rte_mbuf* m, uint32_t off, uint32_t len) {
    while (off >= m->data_len) {
        off -= m->data_len;
        m = m->next;
    }
    while (len > 0) {
        uint32_t n = m->data_len - off;
        if (n > len)
            n = len;
        rte_memcpy(dst, rte_pktmbuf_mtod_offset(m, const uint8_t*, off), n);
        dst += n;
        len -= n;
        off = 0;
        m = m->next;
    }
}

DropReason RxPlacer::process(const rte_mbuf* m, uint64_t now_tsc) {
    ctr_.packets++;
    ParsedPacket p;
    DropReason r = parse_packet(m, cfg_, p);
    if (likely(r == DropReason::None)) {
        if (unlikely(p.is_control())) {
            r = DropReason::Control;
        } else {
            FlowRx* f = table_[p.hdr.flow];
            r = f == nullptr ? DropReason::UnknownFlow : place(*f, m, p, now_tsc);
        }
    }
    if (r != DropReason::None)
        ctr_.drops[index(r)]++;
    return r;
}

void RxPlacer::rx_burst(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) {
    for (uint16_t i = 0; i < n; i++) {
        if (i + 1 < n)
            rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
        process(pkts[i], now_tsc);
    }
    rte_pktmbuf_free_bulk(pkts, n);
}

DropReason RxPlacer::place(FlowRx& f, const rte_mbuf* m, const ParsedPacket& p, uint64_t now_tsc) {
    const Header& h = p.hdr;
    const bool last = p.is_last();
    if (last) {
        const Trailer& t = p.trailer;
        if (t.key != f.key)
            return DropReason::BadKey;
        if (t.slot != (h.msg_id & f.mask))
            return DropReason::BadSlot;
        if (t.msg_len > f.region_size)
            return DropReason::MsgTooLarge;
    }
    if (static_cast<uint64_t>(h.offset) + h.pay_len > f.region_size)
        return DropReason::OutsideRegion;
    // Group geometry (wire.h, plan_group): payload-bearing packets sit at
    // pkt_idx * stride and carry at most stride bytes, so no two overlap; a
    // LAST without payload sits at msg_len (checked by the parser).
    if ((h.pay_len != 0 && static_cast<uint64_t>(h.pkt_idx) * f.stride != h.offset) ||
        h.pay_len > f.stride)
        return DropReason::BadOffset;

    // Receive window: the credits granted, [released, released + ring size).
    // Read live, not cached: a consumer may release (give up) a message that
    // never completed, and a late packet of it must not touch the slot again.
    if (static_cast<uint32_t>(h.msg_id - f.ring->released()) > f.mask)
        return DropReason::OutsideWindow;

    const uint32_t slot_idx = h.msg_id & f.mask;
    SlotRx& s = f.slots[slot_idx];
    // Any other message in this slot is older than the window, so it was
    // completed and released: the slot is free for this one.
    if (s.msg_id != h.msg_id || s.state == SlotState::Idle)
        reset_slot(s, h.msg_id);
    if (s.state == SlotState::Completed)
        return DropReason::AlreadyCompleted;

    if (last) {
        if (s.have_last)
            return p.trailer == s.trailer ? DropReason::Duplicate : DropReason::ConflictingLast;
        // Earlier packets that do not fit this LAST's geometry: the state is
        // not this message's. Discard it; retransmission rebuilds it.
        if (s.hi_idx > p.trailer.pkt_count || s.max_end > p.trailer.msg_len ||
            (s.seen[h.pkt_idx >> 6] & (1ull << (h.pkt_idx & 63)))) {
            reset_slot(s, h.msg_id);
            ctr_.drops[index(DropReason::PktIdxRange)]++;
        }
    } else if (s.have_last) {
        if (h.pkt_idx >= s.pkt_count)
            return DropReason::PktIdxRange;
        if (static_cast<uint64_t>(h.offset) + h.pay_len > s.trailer.msg_len)
            return DropReason::BadOffset;
    }

    uint64_t& word = s.seen[h.pkt_idx >> 6];
    const uint64_t bit = 1ull << (h.pkt_idx & 63);
    if (word & bit)
        return DropReason::Duplicate;
    // Packet mode: a packet is only taken if its completion can be delivered.
    // This lcore is the queue's only producer, so the space stays free.
    const CompletionMode mode = this->mode();
    if (mode == CompletionMode::Packet && f.pkt_cq != nullptr && rte_ring_free_count(f.pkt_cq) == 0)
        return DropReason::CompletionQueueFull;
    word |= bit;

    if (h.pay_len)
        copy_payload(f.ring->region(slot_idx) + h.offset, m, p.payload_off, h.pay_len);
    s.received++;
    s.bytes += h.pay_len;
    if (h.pkt_idx + 1u > s.hi_idx)
        s.hi_idx = h.pkt_idx + 1u;
    if (static_cast<uint64_t>(h.offset) + h.pay_len > s.max_end)
        s.max_end = static_cast<uint64_t>(h.offset) + h.pay_len;
    ctr_.placed++;
    ctr_.bytes += h.pay_len;
    if (last) {
        s.have_last = true;
        s.trailer = p.trailer;
        s.pkt_count = p.trailer.pkt_count;
    }

    if (mode == CompletionMode::Packet && f.pkt_cq != nullptr) {
        PacketCompletion pc{h.msg_id, h.pkt_idx, last ? p.trailer.pkt_count : uint16_t(0), h.offset,
                            h.pay_len, now_tsc};
        rte_ring_sp_enqueue_elem(f.pkt_cq, &pc, sizeof(pc)); // space checked above
        ctr_.packet_completions++;
    }

    if (s.have_last && s.received == s.pkt_count)
        complete(f, slot_idx, now_tsc);
    return DropReason::None;
}

void RxPlacer::complete(FlowRx& f, uint32_t slot_idx, uint64_t now_tsc) {
    SlotRx& s = f.slots[slot_idx];
    const Trailer& t = s.trailer;
    if (s.bytes != t.msg_len) {
        ctr_.drops[index(DropReason::LengthMismatch)]++;
        reset_slot(s, s.msg_id);
        return;
    }
    const uint8_t* region = f.ring->region(slot_idx);
    if (crc32c({region, t.msg_len}) != t.crc32c) {
        ctr_.drops[index(DropReason::CrcMismatch)]++;
        reset_slot(s, s.msg_id);
        return;
    }
    s.state = SlotState::Completed;
    if (mode() == CompletionMode::Packet)
        return; // the consumer learnt of every packet already
    CompletionSlot* cs = f.ring->slot(slot_idx);
    cs->msg_id = s.msg_id;
    cs->msg_len = t.msg_len;
    cs->crc32c = t.crc32c;
    cs->pkt_count = t.pkt_count;
    cs->flow = f.id;
    cs->rx_tsc = now_tsc;
    cs->complete_tsc = rte_rdtsc();
    // Metadata above, then the flag: a consumer that sees the flag sees them.
    std::atomic_ref<uint64_t>(cs->flag).store(t.flag, std::memory_order_release);
    ctr_.completions++;
}

} // namespace tailmark
