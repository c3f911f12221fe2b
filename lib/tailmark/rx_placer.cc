// The RxPlacer's packet path: validation, placement, the completion write,
// the cumulative ACK, and the gap scan that NACKs. The flow table (flows
// made, installed, taken off; per-flow reads by id) is in rx_placer_flows.cc.
#include "tailmark/rx_placer.h"
#include "tailmark/rx_placer_flow.h"

#include <atomic>
#include <cstring>

#include <immintrin.h>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_memcpy.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "tailmark/control.h"
#include "tailmark/crc32c.h"
#include "tailmark/data_tag.h"
#include "tailmark/mbuf_pieces.h"
#include "tailmark/stream_copy.h"

// The rx path's stages (bench.sh --stages): inline, as one function, in a
// normal build; out of line in a -Dstage_profile=true build, so that perf
// attributes each stage's samples to its own symbol.
#ifdef TAILMARK_STAGE_PROFILE
#define TM_STAGE [[gnu::noinline]]
#define TM_STAGE_INLINE [[gnu::noinline]]
#else
#define TM_STAGE
#define TM_STAGE_INLINE [[gnu::always_inline]] inline
#endif

namespace tailmark {

using namespace rx_placer_detail;

// The sender retransmits something this receiver already has: its ACK was
// lost or is late. One flag, not a queue: one ACK answers them all.
static inline void request_ack(uint32_t& req) {
    if (!__atomic_load_n(&req, __ATOMIC_RELAXED))
        __atomic_store_n(&req, 1, __ATOMIC_RELEASE);
}

static inline void reset_slot(SlotRx& s, uint32_t msg_id, uint64_t now_tsc, uint32_t crc_from) {
    // One word (a message of up to 64 packets) by a plain store: memset's
    // narrower or overlapping stores cannot be forwarded to the 64-bit load
    // of the same word that follows at once in claim(), a stall of about 200
    // TSC cycles per message (bench.sh --stages, 64 B).
    const uint32_t words = (s.hi_idx + 63) / 64;
    if (words == 1)
        __atomic_store_n(&s.seen[0], uint64_t{0}, __ATOMIC_RELAXED); // not turned back into memset
    else if (words)
        memset(s.seen, 0, words * sizeof(uint64_t));
    s.msg_id = msg_id;
    s.state = SlotState::Receiving;
    s.have_last = false;
    s.pkt_count = 0;
    s.received = 0;
    s.hi_idx = 0;
    s.bytes = 0;
    s.max_end = 0;
    s.progress_tsc = now_tsc;
    s.nack_tsc = 0;
    s.nacks = 0;
    s.discarded = false;
    s.crc_state = kCrc32cInit;
    s.crc_upto = crc_from;
}

// First index in [i, end) whose bit is `want`, or end.
static inline uint32_t find_bit(const uint64_t* bits, uint32_t i, uint32_t end, bool want) {
    while (i < end) {
        uint64_t w = bits[i >> 6];
        if (!want)
            w = ~w;
        w &= ~0ull << (i & 63);
        if (w != 0) {
            const uint32_t j = (i & ~63u) + static_cast<uint32_t>(__builtin_ctzll(w));
            return j < end ? j : end;
        }
        i = (i | 63u) + 1;
    }
    return end;
}


// Copies the payload into the region.
static inline void copy_payload(uint8_t* dst, const rte_mbuf* m, uint32_t off, uint32_t len) {
    for_each_piece(m, off, len, [&](const uint8_t* src, uint32_t n) {
        rte_memcpy(dst, src, n);
        dst += n;
    });
}

// The same, checksumming as it copies (the packet continues the CRC's prefix).
static inline uint32_t copy_payload_crc(uint8_t* dst, const rte_mbuf* m, uint32_t off, uint32_t len, uint32_t crc) {
    for_each_piece(m, off, len, [&](const uint8_t* src, uint32_t n) {
        crc = crc32c_copy(crc, dst, {src, n});
        dst += n;
    });
    return crc;
}

// The same two, with streaming stores (stream_copy.h): the copy first, then
// the CRC over the packet's bytes, in L1 by then.
static inline void copy_payload_stream(uint8_t* dst, const rte_mbuf* m, uint32_t off, uint32_t len) {
    for_each_piece(m, off, len, [&](const uint8_t* src, uint32_t n) {
        stream_copy(dst, src, n);
        dst += n;
    });
}
static inline uint32_t copy_payload_crc_stream(uint8_t* dst, const rte_mbuf* m, uint32_t off, uint32_t len,
                                               uint32_t crc) {
    for_each_piece(m, off, len, [&](const uint8_t* src, uint32_t n) {
        stream_copy(dst, src, n);
        crc = crc32c_update(crc, {src, n});
        dst += n;
    });
    return crc;
}

// A large payload's next packet most often lands right after it, in the
// same region: its lines are fetched for writing while this one is copied.
// With many flows the regions are out of the caches (64 flows x 16 x 64 KiB)
// and the copy waited on every destination line's read for ownership
// (loop64kx64: rx 615 -> 487 cycles per packet). Below kPrefetchPayload the
// next packet is most often another message's, in another region.
constexpr uint32_t kPrefetchPayload = 1024;

// [p, p + n) fetched for writing, a line at a time. Always inlined, and
// with _mm_prefetch (an intrinsic) rather than rte_prefetch0_write: DPDK's
// read prefetches are volatile asm, but its write prefetch is a plain
// __builtin_prefetch in a static inline function, and GCC 12 appears to
// take a function that only does that for one without side effects. Left
// a call in these large functions, it was dropped, prefetches and all: the
// object had no prefetchw for them, and the first measurements of the
// fetches below showed nothing.
[[gnu::always_inline]] static inline void lines_for_writing(const uint8_t* p, uint64_t n) {
    for (uint64_t o = 0; o < n; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_ET0);
}

// The slot and the first `bytes` of the region of message msg_id, fetched
// for writing, if the consumer has released them (by the cached cursor, a
// lower bound): one it still reads would be taken from under it. The
// consumer's core read them last time round the ring, so this core's first
// store to them would wait for the line, and every store behind it in the
// store buffer with it (parse_packet's, the next packet's). The flow's own
// copies of the geometry: the ring's header is a line the consumer writes.
[[gnu::always_inline]] inline void RxPlacer::fetch_for_writing(const FlowRx& f, uint32_t msg_id, uint64_t bytes) {
    if (static_cast<uint32_t>(msg_id - f.released_seen) > f.mask)
        return;
    lines_for_writing(reinterpret_cast<const uint8_t*>(f.ring->slot(msg_id)), 1);
    lines_for_writing(f.ring->region(msg_id), bytes < f.region_size ? bytes : f.region_size);
}

template <CompletionMode kMode>
[[gnu::always_inline]] inline bool RxPlacer::streams(const FlowRx& f) const {
    return kMode == CompletionMode::Message && stream_min_ != 0 && f.region_size >= stream_min_;
}

// One-packet messages: how many messages ahead the completion slot and the
// region's first line are fetched for writing (see place()). The
// application path at 64 B (tailmark-perf --loop through the service) ran
// 1.15-1.25x at 1 to 6 ahead, rx64 1.04x.
constexpr uint32_t kPrefetchCompletions = 4;

static inline void prefetch_next_payload(uint8_t* region, uint64_t region_size, uint32_t off, uint32_t len) {
    const uint64_t from = static_cast<uint64_t>(off) + len; // <= region_size: check_geometry
    const uint64_t to = from + len < region_size ? from + len : region_size;
    lines_for_writing(region + from, to - from);
}

// Not data for a placer: control packets (their owners take them) and ARP.
static inline bool routed(DropReason r, const ParsedPacket& p, const rte_mbuf* m) {
    if (r == DropReason::None)
        return p.is_control();
    if (r != DropReason::NotIpv4 || rte_pktmbuf_data_len(m) < kEthLen)
        return false;
    return rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type == RTE_BE16(RTE_ETHER_TYPE_ARP);
}

// A flow's entry in the hand-off table against a packet of it: version 2
// and the tag verifies, or (version 1) nothing to prove.
static inline bool authentic_arrival(const FlowAuth& a, const ParsedPacket& p, const rte_mbuf* m, bool loopback) {
    const uint8_t v = __atomic_load_n(&a.version, __ATOMIC_ACQUIRE); // written after the keys
    if (v == 0 || v != p.hdr.version)
        return false;
    if (a.loopback) // its proof is the way it came
        return loopback;
    if (v == kVersion)
        return true;
    if (!a.data_auth)
        return data_tag_ok(a.key, nullptr, p, m);
    PolyvalKey k; // only when the flow's arrival moves: its first packet on another lcore
    polyval_key(k, a.auth_h);
    return data_tag_ok(a.key, &k, p, m);
}

template <CompletionMode kMode>
inline DropReason RxPlacer::process_as(const rte_mbuf* m, uint64_t now_tsc, bool route) {
    ParsedPacket p;
    DropReason r = parse_packet(m, cfg_, p);
    if (route) {
        if (unlikely(routed(r, p, m)))
            return DropReason::Count; // the caller's: not counted here
        if (r == DropReason::None && owner_of_ != nullptr) {
            // Where a flow's data arrives, learnt only from a packet of it
            // that is authentic (version 2; a version 1 flow has no proof).
            if (learn_ != nullptr && unlikely(__atomic_load_n(&learn_[p.hdr.flow], __ATOMIC_RELAXED) != self_) &&
                (auth_of_ == nullptr || authentic_arrival(auth_of_[p.hdr.flow], p, m, from_loopback_)))
                __atomic_store_n(&learn_[p.hdr.flow], self_, __ATOMIC_RELAXED); // written only when it changes
            if (unlikely(table_[p.hdr.flow] == nullptr)) {
                const uint8_t o = __atomic_load_n(&owner_of_[p.hdr.flow], __ATOMIC_RELAXED);
                if (o != kNoOwner)
                    return DropReason::Count; // another placer's flow, or one moving here: the caller's
            }
        }
    }
    ctr_.packets++;
    if (likely(r == DropReason::None)) {
        if (unlikely(p.is_control())) {
            r = DropReason::Control;
        } else {
            if (has(p.hdr.flags, Flags::Retx))
                ctr_.retx++;
            FlowRx* f = table_[p.hdr.flow];
            // A flow of the in-memory loopback from a port: no flow of the wire.
            if (f != nullptr && unlikely(f->loopback > from_loopback_))
                f = nullptr;
            r = f == nullptr ? DropReason::UnknownFlow : place<kMode>(*f, m, p, now_tsc);
            if (r == DropReason::None) { // congestion control's RTT sample: echoed by the next ACK
                f->echo = p.ip_id;
                f->echo_tsc = floor_ != 0 ? floor_ : now_tsc;
                f->echo_port = m->port;
            }
        }
    }
    if (r != DropReason::None)
        ctr_.drops[index(r)]++;
    return r;
}

DropReason RxPlacer::process(const rte_mbuf* m, uint64_t now_tsc) {
    return mode() == CompletionMode::Packet ? process_as<CompletionMode::Packet>(m, now_tsc, false)
                                            : process_as<CompletionMode::Message>(m, now_tsc, false);
}

namespace {
// The lines the parser reads: the headers, and the trailer at the end of the
// first segment (a single-segment LAST's). For a small frame that is every
// line; a large payload is streamed by the copy.
inline void prefetch_frame(const rte_mbuf* m) {
    const auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
    rte_prefetch0(d);
    rte_prefetch0(d + 64);
    if (m->data_len > 128)
        rte_prefetch0(d + m->data_len - 1);
    if (m->data_len > 192 && m->data_len <= 256)
        rte_prefetch0(d + 128);
}
} // namespace

template <CompletionMode kMode>
void RxPlacer::burst_as(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc, rte_mbuf** keep, uint16_t* nkeep) {
    // The mbufs' first cache lines for the whole burst, then each packet's
    // headers kAhead packets before it is parsed (as l3fwd does): the misses
    // overlap instead of stalling one per packet.
    constexpr uint16_t kAhead = 4;
    for (uint16_t i = 0; i < n; i++)
        rte_prefetch0(pkts[i]);
    for (uint16_t i = 0; i < n && i < kAhead; i++)
        prefetch_frame(pkts[i]);
    uint16_t j = 0; // pkts[0, j): to free
    for (uint16_t i = 0; i < n; i++) {
        if (i + kAhead < n)
            prefetch_frame(pkts[i + kAhead]);
        if (process_as<kMode>(pkts[i], now_tsc, keep != nullptr) == DropReason::Count)
            keep[(*nkeep)++] = pkts[i];
        else
            pkts[j++] = pkts[i];
    }
    rte_pktmbuf_free_bulk(pkts, j);
}

void RxPlacer::rx_burst(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) {
    if (mode() == CompletionMode::Packet)
        burst_as<CompletionMode::Packet>(pkts, n, now_tsc, nullptr, nullptr);
    else
        burst_as<CompletionMode::Message>(pkts, n, now_tsc, nullptr, nullptr);
}

void RxPlacer::rx_burst_route(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc, rte_mbuf** keep, uint16_t& nkeep) {
    nkeep = 0;
    if (mode() == CompletionMode::Packet)
        burst_as<CompletionMode::Packet>(pkts, n, now_tsc, keep, &nkeep);
    else
        burst_as<CompletionMode::Message>(pkts, n, now_tsc, keep, &nkeep);
}

// msg_id inside [released, released + ring size), the cached cursor first.
inline bool RxPlacer::in_window(FlowRx& f, uint32_t msg_id) {
    if (likely(static_cast<uint32_t>(msg_id - f.released_seen) <= f.mask))
        return true;
    f.released_seen = __atomic_load_n(f.released_word, __ATOMIC_ACQUIRE);
    return static_cast<uint32_t>(msg_id - f.released_seen) <= f.mask;
}

// The trailer against the flow, and the packet against the group geometry.
TM_STAGE_INLINE DropReason RxPlacer::check_geometry(const FlowRx& f, const ParsedPacket& p) {
    const Header& h = p.hdr;
    if (p.is_last()) {
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
    // So no group that fits the region has this index (a LAST without
    // payload claiming more packets than msg_len needs).
    if (h.pkt_idx >= f.max_pkts)
        return DropReason::PktIdxRange;
    return DropReason::None;
}

TM_STAGE_INLINE DropReason RxPlacer::check_window(FlowRx& f, const Header& h, bool retx) {
    // Receive window: the credits granted, [released, released + ring size).
    // The consumer writes its cursor for every message, so reading it per
    // packet costs a cache-line transfer; the placer checks a cached lower
    // bound instead and reads the cursor only when that does not answer. A
    // message below the real cursor can pass the cached check only while its
    // slot holds no newer message (placing that one moved the cache past
    // it), so it was either completed (its slot says so: re-read below) or
    // given up by the consumer, which the gave_up count tells at once. The
    // verdicts are those of a live read.
    const uint32_t gave_up = __atomic_load_n(f.gave_up_word, __ATOMIC_ACQUIRE);
    if (unlikely(gave_up != f.gave_up_seen)) {
        f.gave_up_seen = gave_up;
        f.released_seen = __atomic_load_n(f.released_word, __ATOMIC_ACQUIRE);
    }
    if (!in_window(f, h.msg_id)) {
        if (retx)
            request_ack(f.ack_req);
        return DropReason::OutsideWindow;
    }
    return DropReason::None;
}

// The slot's state for this packet: a new message, the LAST's consistency
// with what came before, then its bit in the slot's bitset (set on None).
template <CompletionMode kMode>
TM_STAGE_INLINE DropReason RxPlacer::claim(FlowRx& f, const ParsedPacket& p, uint64_t now_tsc) {
    const Header& h = p.hdr;
    const bool last = p.is_last();
    const bool retx = has(h.flags, Flags::Retx);
    const uint32_t slot_idx = h.msg_id & f.mask;
    SlotRx& s = f.slots[slot_idx];
    if (unlikely(s.state == SlotState::Completed && s.msg_id == h.msg_id)) {
        // Completed: the live cursor says whether it was released already.
        f.released_seen = __atomic_load_n(f.released_word, __ATOMIC_ACQUIRE);
        if (static_cast<uint32_t>(h.msg_id - f.released_seen) > f.mask) {
            if (retx)
                request_ack(f.ack_req);
            return DropReason::OutsideWindow;
        }
    }
    // Any other message in this slot is older than the window, so it was
    // completed and released: the slot is free for this one.
    if (s.msg_id != h.msg_id || s.state == SlotState::Idle)
        reset_slot(s, h.msg_id, now_tsc, f.crc_from);
    if (s.state == SlotState::Completed) {
        if (retx)
            request_ack(f.ack_req);
        return DropReason::AlreadyCompleted;
    }
    if ((int32_t)(h.msg_id + 1 - f.hi_msg) > 0 || !f.any) {
        f.hi_msg = h.msg_id + 1;
        f.any = true;
    }

    if (last) {
        if (s.have_last) {
            if (p.trailer == s.trailer) {
                if (retx) // the sender's retransmission timer probes: say what is missing now
                    nack(f, slot_idx, now_tsc, true);
                return DropReason::Duplicate;
            }
            if (!retx)
                return DropReason::ConflictingLast;
            // A retransmitted LAST is the sender's word: the state built on
            // the other one (a corrupted copy) was not this message's.
            ctr_.discarded += s.received;
            reset_slot(s, h.msg_id, now_tsc, f.crc_from);
        }
        // Earlier packets that do not fit this LAST's geometry: the state is
        // not this message's. Discard it; retransmission rebuilds it.
        if (s.hi_idx > p.trailer.pkt_count || s.max_end > p.trailer.msg_len ||
            (s.seen[h.pkt_idx >> 6] & (1ull << (h.pkt_idx & 63)))) {
            ctr_.discarded += s.received;
            reset_slot(s, h.msg_id, now_tsc, f.crc_from);
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
    if (kMode == CompletionMode::Packet && f.pkt_cq != nullptr && rte_ring_free_count(f.pkt_cq) == 0)
        return DropReason::CompletionQueueFull;
    word |= bit;
    return DropReason::None;
}

// A payload placed around the caches: no line to take back, none to fetch
// ahead; write_completion fences before the flag. Inlined, but taken as
// [[unlikely]] in place(), so that the cached path's code stays as it was:
// a plain branch moved the 4 KiB p99 (lat4kx1) from 0.37 to 0.46 us, and a
// call instead cost the streamed path 13% (rx at 64 KiB, 287 -> 330 cycles
// per packet, 3 pairs).
[[gnu::always_inline]] inline void RxPlacer::place_streamed(FlowRx& f, uint32_t slot_idx, const rte_mbuf* m,
                                                const ParsedPacket& p) {
    const Header& h = p.hdr;
    SlotRx& s = f.slots[slot_idx];
    uint8_t* dst = f.ring->region(slot_idx) + h.offset;
    if (h.offset == s.crc_upto) {
        s.crc_state = copy_payload_crc_stream(dst, m, p.payload_off, h.pay_len, s.crc_state);
        s.crc_upto += h.pay_len;
    } else {
        copy_payload_stream(dst, m, p.payload_off, h.pay_len);
    }
    streamed_ = true;
    ctr_.streamed++;
}

template <CompletionMode kMode>
DropReason RxPlacer::place(FlowRx& f, const rte_mbuf* m, const ParsedPacket& p, uint64_t now_tsc) {
    const Header& h = p.hdr;
    const bool last = p.is_last();
    const bool retx = has(h.flags, Flags::Retx);
    // A version 2 flow: its tag before anything else is looked at (wire-
    // format.md: a packet whose tag does not verify places nothing).
    if (unlikely(h.version != f.version))
        return DropReason::BadVersion;
    if (f.version == kVersion2 && !data_tag_ok(f.tag_key, f.data_auth ? &f.auth_key : nullptr, p, m))
        return DropReason::DataBadTag;
    DropReason r = check_geometry(f, p);
    if (r != DropReason::None)
        return r;
    r = check_window(f, h, retx);
    if (r != DropReason::None)
        return r;
    r = claim<kMode>(f, p, now_tsc);
    if (r != DropReason::None)
        return r;
    const uint32_t slot_idx = h.msg_id & f.mask;
    SlotRx& s = f.slots[slot_idx];

    // A one-packet message, whole in this packet (64 B: the common case):
    // copied and checksummed in one pass, checked against its trailer and
    // completed at once, without the group's bookkeeping (received, bytes,
    // the trailer's copy, ...), which nothing reads of a completed slot.
    // hi_idx stays right: the next reset clears the bitset by it. At 64 B
    // the rx path, like the tx path (tx_marker.h's OneFrame), is bound by
    // its stores. A CRC32C that disagrees takes the general path's verdict.
    bool copied = false;
    if (kMode == CompletionMode::Message && last && h.pkt_idx == 0 && p.trailer.pkt_count == 1 && s.received == 0 &&
        h.pay_len == p.trailer.msg_len) {
        uint32_t crc = kCrc32cInit;
        if (h.pay_len)
            crc = copy_payload_crc(f.ring->region(slot_idx) + h.offset, m, p.payload_off, h.pay_len, crc);
        s.hi_idx = 1;
        if (likely(crc32c_finish(crc) == p.trailer.crc32c) || f.loopback) {
            ctr_.placed++;
            ctr_.bytes += h.pay_len;
            s.state = SlotState::Completed;
            write_completion(f, slot_idx, h.msg_id, p.trailer, now_tsc);
            fetch_for_writing(f, h.msg_id + kPrefetchCompletions, 1);
            advance(f);
            return DropReason::None;
        }
        s.crc_state = crc;
        s.crc_upto = h.pay_len;
        copied = true;
    }

    if (h.pay_len && !copied && streams<kMode>(f)) [[unlikely]] {
        place_streamed(f, slot_idx, m, p);
    } else if (h.pay_len && !copied) {
        uint8_t* const region = f.ring->region(slot_idx);
        uint8_t* dst = region + h.offset;
        if (h.pay_len >= kPrefetchPayload)
            prefetch_next_payload(region, f.region_size, h.offset, h.pay_len);
        if (h.offset == s.crc_upto) { // in order: one pass copies and checksums
            s.crc_state = copy_payload_crc(dst, m, p.payload_off, h.pay_len, s.crc_state);
            s.crc_upto += h.pay_len;
        } else {
            copy_payload(dst, m, p.payload_off, h.pay_len);
        }
    }
    s.received++;
    s.bytes += h.pay_len;
    s.progress_tsc = now_tsc;
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

    if (kMode == CompletionMode::Packet && f.pkt_cq != nullptr) {
        PacketCompletion pc{h.msg_id, h.pkt_idx, last ? p.trailer.pkt_count : uint16_t(0), h.offset,
                            h.pay_len, now_tsc};
        rte_ring_sp_enqueue_elem(f.pkt_cq, &pc, sizeof(pc)); // space checked above
        ctr_.packet_completions++;
    }

    if (s.have_last && s.received == s.pkt_count)
        complete<kMode>(f, slot_idx, now_tsc);
    else if (last && retx)
        nack(f, slot_idx, now_tsc, true); // a timer probe: answer at once
    return DropReason::None;
}

template <CompletionMode kMode>
TM_STAGE void RxPlacer::complete(FlowRx& f, uint32_t slot_idx, uint64_t now_tsc) {
    SlotRx& s = f.slots[slot_idx];
    const Trailer& t = s.trailer;
    DropReason bad = DropReason::None;
    if (s.bytes != t.msg_len) {
        bad = DropReason::LengthMismatch;
    } else if (!f.loopback) {
        uint32_t crc = s.crc_state; // the prefix checksummed on arrival, then the rest from the region
        if (s.crc_upto < t.msg_len)
            crc = crc32c_update(crc, {f.ring->region(slot_idx) + s.crc_upto, t.msg_len - s.crc_upto});
        if (crc32c_finish(crc) != t.crc32c)
            bad = DropReason::CrcMismatch;
    }
    if (bad != DropReason::None) { // discarded: all of it again
        ctr_.drops[index(bad)]++;
        reset_slot(s, s.msg_id, now_tsc, f.crc_from);
        s.discarded = true; // the scan asks again if this NACK is lost or postponed
        nack(f, slot_idx, now_tsc, true);
        return;
    }
    s.state = SlotState::Completed;
    if (kMode == CompletionMode::Message) // packet mode: the consumer learnt of every packet already
        write_completion(f, slot_idx, s.msg_id, t, now_tsc);
    // The next message's first packet, as prefetch_next_payload does within
    // a message: 4 KiB messages, rx 1.08x, the application path 1.02-1.06x
    // (two messages on: rx 1.03x).
    fetch_for_writing(f, s.msg_id + 1, streams<kMode>(f) ? 0 : f.stride);
    advance(f);
}

// Metadata first, then the flag with a release store.
TM_STAGE void RxPlacer::write_completion(FlowRx& f, uint32_t slot_idx, uint32_t msg_id, const Trailer& t,
                                         uint64_t now_tsc) {
    CompletionSlot* cs = f.ring->slot(slot_idx);
    cs->msg_id = msg_id;
    cs->msg_len = t.msg_len;
    cs->crc32c = t.crc32c;
    cs->pkt_count = t.pkt_count;
    cs->flow = f.id;
    cs->rx_tsc = now_tsc; // no rdtsc per message here: it costs ~30 cycles on this core
    fence_streamed(); // the payload's streaming stores before the flag
    // Metadata above, then the flag: a consumer that sees the flag sees them.
    std::atomic_ref<uint64_t>(cs->flag).store(t.flag, std::memory_order_release);
    ctr_.completions++;
}

// Moves the cumulative ACK over every completed message in a row, and
// publishes it if it moved.
void RxPlacer::advance(FlowRx& f) {
    while (f.any && f.cum != f.hi_msg) {
        const SlotRx& x = f.slots[f.cum & f.mask];
        if (x.msg_id != f.cum || x.state != SlotState::Completed)
            break;
        f.cum++;
    }
    if (f.cum != f.acked)
        __atomic_store_n(&f.acked, f.cum, __ATOMIC_RELEASE);
}

// Asks for the missing packets of the message in a slot: zero runs of its
// bitset below what it knows of the group (pkt_count once the LAST is in,
// else the highest index seen), then, without the LAST, everything from
// there to the end.
void RxPlacer::nack(FlowRx& f, uint32_t slot_idx, uint64_t now_tsc, bool tail) {
    if (f.nack_q == nullptr || nack_delay_ == 0) // no queue, or NACKs off
        return;
    SlotRx& s = f.slots[slot_idx];
    Nack n;
    n.flow = f.id;
    n.msg_id = s.msg_id;
    n.nranges = 0;
    const uint32_t known = s.have_last ? s.pkt_count : s.hi_idx;
    uint32_t i = 0;
    while (n.nranges < kMaxNackRanges) {
        const uint32_t z = find_bit(s.seen, i, known, false);
        if (z == known)
            break;
        const uint32_t e = find_bit(s.seen, z, known, true);
        n.ranges[n.nranges++] = {static_cast<uint16_t>(z), static_cast<uint16_t>(e - z)};
        i = e;
    }
    if (tail && !s.have_last && n.nranges < kMaxNackRanges)
        n.ranges[n.nranges++] = {static_cast<uint16_t>(s.hi_idx), 0};
    if (n.nranges == 0)
        return;
    if (rte_ring_enqueue_elem(f.nack_q, &n, sizeof(n)) != 0) {
        ctr_.nack_q_full++; // the next scan asks again
        return;
    }
    s.nack_tsc = now_tsc;
    if (s.nacks < 255)
        s.nacks++;
    ctr_.nacks++;
}

// Every message between the cumulative ACK and the highest one seen that
// misses packets with evidence of loss, and made no progress for the NACK
// delay (doubling with every NACK), is NACKed. Evidence: a gap below a packet
// that arrived (packets of a flow leave in order: msg_id, then pkt_idx), the
// LAST in with packets missing, or any packet of a later message (then the
// whole rest of this one is missing). The newest message with no such gap is
// only in flight: a late LAST is the sender's timer's to find. A message
// nothing arrived for starts waiting here.
void RxPlacer::catch_up(FlowRx& f) {
    const uint32_t rel = f.ring->released();
    if ((int32_t)(rel - f.cum) > 0) { // released without completing (a consumer gave up)
        f.cum = rel;
        advance(f);
    }
}

void RxPlacer::sync_released(uint16_t flow) {
    FlowRx* f = table_ != nullptr ? table_[flow] : nullptr;
    if (f != nullptr)
        catch_up(*f);
}

void RxPlacer::scan(uint64_t now_tsc) {
    if (nack_delay_ == 0) {
        next_scan_ = UINT64_MAX;
        return;
    }
    next_scan_ = now_tsc + nack_delay_ / 2;
    for (FlowRx* f : flows_) {
        if (f->nack_q == nullptr)
            continue;
        catch_up(*f);
        if (!f->any || (int32_t)(f->hi_msg - f->cum) <= 0)
            continue;
        uint32_t m = f->cum;
        for (uint32_t k = 0; m != f->hi_msg && k <= f->mask; k++, m++) {
            const uint32_t idx = m & f->mask;
            SlotRx& s = f->slots[idx];
            if (s.msg_id == m && s.state == SlotState::Completed)
                continue;
            if (s.msg_id != m || s.state == SlotState::Idle) {
                reset_slot(s, m, now_tsc, f->crc_from); // inside the window: its slot is free
                continue;
            }
            const bool newest = m + 1 == f->hi_msg;
            const bool gap = s.have_last || s.received < s.hi_idx || !newest || s.discarded;
            const uint64_t since = s.progress_tsc > s.nack_tsc ? s.progress_tsc : s.nack_tsc;
            const uint64_t wait = nack_delay_ << (s.nacks < 6 ? s.nacks : 6);
            if (gap && now_tsc >= since && now_tsc - since >= wait)
                nack(*f, idx, now_tsc, !newest || s.discarded);
        }
    }
}

} // namespace tailmark
