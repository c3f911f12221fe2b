// libFuzzer target: raw frames through the complete rx path (RxPlacer::process:
// parse, flow checks, placement, completion), with invariants checked after
// every frame. The input format is described in fuzz_rx.h.
//
// Invariants (abort() with a message on violation, so libFuzzer reports it):
//   - memory: after every frame, each flow's ring (slots, regions, the padding
//     between a region's size and its 4 KiB stride, everything up to the end
//     of the memzone) equals a shadow copy the harness keeps: the shadow gets
//     the frame's payload at its offset when, and only when, the placer says
//     it placed it. So a write anywhere else, even of one byte, is caught.
//   - completions: a slot changes only with a completion write, at most one per
//     frame, and counters().completions moves with it. The slot holds
//     flag == msg_id + 1, slot index == msg_id mod ring, its own flow, the
//     metadata of the LAST trailer the placer accepted, a msg_len within the
//     region, and crc32c(region, msg_len) == slot.crc32c. The message is inside
//     the receive window, was never completed before, the slot's previous
//     message was released, and every byte [0, msg_len) was placed by an
//     accepted packet of this message (no stale region bytes).
//   - counters: every frame is counted once (packets), placed at most once, and
//     a dropped frame is counted under the reason process() returned.
//   - mbufs: the pool's available count is back to full after every frame.
// The consumer side (ctl bits) polls, checks the CRC of what it reads and
// releases, so windows advance and slots get reused within one input.
#include "fuzz_rx.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "fuzz_eal.h"
#include "tailmark/completion_ring.h"
#include "tailmark/crc32c.h"
#include "tailmark/rx_placer.h"
#include "tailmark/wire.h"

using namespace tailmark;

namespace tmfuzz {
namespace {

constexpr unsigned kPoolSize = 2047;
constexpr unsigned kPktRingSize = 64;

// Byte offsets in a frame (IPv4 without options).
constexpr size_t kIpOff = kEthLen;
constexpr size_t kUdpOff = kEthLen + kIpLen;
constexpr size_t kHdrOff = kUdpOff + kUdpLen;
constexpr size_t kPayOff = kFrameOverhead;

rte_mempool* g_pool = nullptr;
rte_ring* g_pkt_rings[kNumFlows] = {};
RunStats g_stats;
uint32_t g_frame_no = 0; // frame number within the current input, for messages

[[noreturn]] __attribute__((format(printf, 1, 2))) void violated(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\ntailmark fuzz: INVARIANT VIOLATED (frame #%u of the input): ", g_frame_no);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    abort();
}

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
void put16(uint8_t* p, size_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}

Header header_of(const std::vector<uint8_t>& f) {
    WireHeader w;
    memcpy(&w, f.data() + kHdrOff, sizeof(w));
    return decode(&w);
}

// What the harness expects of one slot: the message whose packets it placed.
struct SlotModel {
    bool active = false;
    uint32_t msg_id = 0;
    std::vector<uint8_t> covered; // 1 per region byte placed by this message
    bool have_last = false;
    Trailer last;                 // the latest accepted LAST's trailer
};

struct FlowCtx {
    const FlowSpec* spec = nullptr;
    rte_ring* pkt_ring = nullptr;
    std::unique_ptr<CompletionRing> ring;
    uint8_t* base = nullptr; // writable span: slots, then regions, to the memzone's end
    size_t len = 0;
    size_t slots_len = 0;
    std::vector<uint8_t> shadow;
    uint32_t released = 0; // the consumer's cursor, mirrored
    std::vector<SlotModel> model;
    std::vector<uint32_t> completed; // msg_ids completed in this input

    size_t region_off(uint32_t slot) const { return static_cast<size_t>(ring->region(slot) - base); }
};

struct Run {
    FlowCtx flows[kNumFlows];
    bool packet_mode = false;

    FlowCtx* find(uint16_t id) {
        for (FlowCtx& c : flows)
            if (c.spec->id == id)
                return &c;
        return nullptr;
    }
};

// ---- frame repairs (ctl bits) ----------------------------------------------

void fix_lengths(std::vector<uint8_t>& f) {
    const size_t n = f.size();
    if (n >= kUdpOff)
        put16(&f[kIpOff + 2], n - kEthLen);
    if (n >= kHdrOff)
        put16(&f[kUdpOff + 4], n - kUdpOff);
    if (n >= kPayOff) {
        const size_t body = n - kPayOff;
        const bool last = f[kHdrOff + 1] & static_cast<uint8_t>(Flags::Last);
        if (!last)
            put16(&f[kHdrOff + 10], body);
        else if (body >= kTrailerLen)
            put16(&f[kHdrOff + 10], body - kTrailerLen);
    }
}

// Makes a LAST packet's trailer consistent with its header and, for a known
// flow, gives it the key, the slot and a CRC that matches the slot's region as
// it will be once this packet's payload is placed: a sender that knows what
// the region holds. That lets any combination of packets reach completion.
void fix_trailer(Run& run, std::vector<uint8_t>& f) {
    const size_t n = f.size();
    if (n < kPayOff || !(f[kHdrOff + 1] & static_cast<uint8_t>(Flags::Last)))
        return;
    const size_t udp_len = get16(&f[kUdpOff + 4]);
    const size_t end = kUdpOff + udp_len;
    if (udp_len < kUdpLen + kHeaderLen + kTrailerLen || end > n)
        return;
    uint8_t* tp = &f[end - kTrailerLen];
    const Header h = header_of(f);
    WireTrailer w;
    memcpy(&w, tp, sizeof(w));
    Trailer t = decode(&w);
    t.magic = kMagic;
    t.reserved = 0;
    t.flag = flag_for(h.msg_id);
    t.pkt_count = static_cast<uint16_t>(h.pkt_idx + 1);
    t.msg_len = h.offset + h.pay_len;
    if (FlowCtx* c = run.find(h.flow)) {
        t.slot = h.msg_id & c->ring->mask();
        t.key = c->spec->key;
        if (t.msg_len <= c->spec->region_size) {
            const uint8_t* region = c->ring->region(t.slot);
            std::vector<uint8_t> img(region, region + t.msg_len);
            if (h.pay_len > 0 && static_cast<uint64_t>(h.offset) + h.pay_len <= t.msg_len &&
                kPayOff + h.pay_len <= end - kTrailerLen)
                memcpy(img.data() + h.offset, &f[kPayOff], h.pay_len);
            t.crc32c = crc32c(img);
        }
    }
    encode(t, &w);
    memcpy(tp, &w, sizeof(w));
}

void fix_ip_checksum(std::vector<uint8_t>& f) {
    if (f.size() < kUdpOff)
        return;
    const size_t ihl = (f[kIpOff] & 0x0F) * 4u;
    if (ihl < kIpLen || kIpOff + ihl > f.size())
        return;
    f[kIpOff + 10] = f[kIpOff + 11] = 0;
    uint16_t ck = static_cast<uint16_t>(~rte_raw_cksum(&f[kIpOff], ihl));
    memcpy(&f[kIpOff + 10], &ck, 2); // the raw sum is in memory order already
}

// ---- mbufs -------------------------------------------------------------------

rte_mbuf* make_mbuf(const std::vector<uint8_t>& f, uint8_t seg_mode, uint8_t ol_mode, bool vlan) {
    const size_t room = rte_pktmbuf_data_room_size(g_pool) - RTE_PKTMBUF_HEADROOM;
    auto seg_size = [&](unsigned i) -> size_t {
        switch (seg_mode) {
        case kSeg64: return 64;
        case kSegTiny: return i < 10 ? 7 : room;
        case kSegHalves: return i == 0 ? (f.size() / 2 ? f.size() / 2 : 1) : room;
        default: return room;
        }
    };
    rte_mbuf* head = rte_pktmbuf_alloc(g_pool);
    if (head == nullptr)
        env_failure("mbuf alloc");
    rte_mbuf* seg = head;
    size_t done = 0;
    for (unsigned i = 0;; i++) {
        size_t take = seg_size(i);
        if (take > room)
            take = room;
        if (take > f.size() - done)
            take = f.size() - done;
        if (take)
            memcpy(rte_pktmbuf_mtod(seg, uint8_t*), f.data() + done, take);
        seg->data_len = static_cast<uint16_t>(take);
        done += take;
        if (done >= f.size())
            break;
        rte_mbuf* next = rte_pktmbuf_alloc(g_pool);
        if (next == nullptr)
            env_failure("mbuf alloc (segment %u)", i + 1);
        seg->next = next;
        seg = next;
        head->nb_segs++;
    }
    head->pkt_len = static_cast<uint32_t>(f.size());
    switch (ol_mode) {
    case kOlGood:
        head->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
        if (vlan) {
            head->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
            head->vlan_tci = 7;
        }
        break;
    case kOlL4Bad: head->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_BAD; break;
    case kOlIpBad: head->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_BAD | RTE_MBUF_F_RX_L4_CKSUM_GOOD; break;
    default: break;
    }
    return head;
}

// ---- checks --------------------------------------------------------------------

void check_completion(Run& run, FlowCtx& c, uint32_t i, const uint8_t* old_bytes) {
    CompletionSlot s, o;
    memcpy(&s, c.base + static_cast<size_t>(i) * kSlotSize, sizeof(s));
    memcpy(&o, old_bytes, sizeof(o));
    const uint16_t id = c.spec->id;
    const uint32_t mask = c.ring->mask();
    if (run.packet_mode)
        violated("flow %u slot %u written in packet mode", id, i);
    if (s.flag != static_cast<uint64_t>(s.msg_id) + 1)
        violated("flow %u slot %u: flag %llu is not msg_id %u + 1", id, i,
                 static_cast<unsigned long long>(s.flag), s.msg_id);
    if ((s.msg_id & mask) != i)
        violated("flow %u: msg %u completed in slot %u, not msg_id mod %u", id, s.msg_id, i, mask + 1);
    if (s.flow != id)
        violated("flow %u slot %u: slot names flow %u", id, i, s.flow);
    if (s.msg_len > c.spec->region_size)
        violated("flow %u msg %u: msg_len %u beyond the %llu-byte region", id, s.msg_id, s.msg_len,
                 static_cast<unsigned long long>(c.spec->region_size));
    const uint32_t crc = crc32c({c.ring->region(i), s.msg_len});
    if (crc != s.crc32c)
        violated("flow %u msg %u: completed, but crc32c(region, %u) = %08x, slot says %08x", id,
                 s.msg_id, s.msg_len, crc, s.crc32c);
    if (static_cast<uint32_t>(s.msg_id - c.released) > mask)
        violated("flow %u msg %u completed outside the window [%u, %u + %u)", id, s.msg_id, c.released,
                 c.released, mask + 1);
    if (o.flag != 0) {
        const uint32_t d = c.released - o.msg_id;
        if (d == 0 || d > 0x80000000u)
            violated("flow %u slot %u: msg %u overwrote msg %u before it was released (released %u)",
                     id, i, s.msg_id, o.msg_id, c.released);
    }
    if (std::find(c.completed.begin(), c.completed.end(), s.msg_id) != c.completed.end())
        violated("flow %u msg %u completed twice", id, s.msg_id);
    c.completed.push_back(s.msg_id);
    const SlotModel& m = c.model[i];
    if (!m.active || m.msg_id != s.msg_id || !m.have_last)
        violated("flow %u msg %u completed with no accepted LAST packet of it", id, s.msg_id);
    if (m.last.flag != s.flag || m.last.msg_len != s.msg_len || m.last.crc32c != s.crc32c ||
        m.last.pkt_count != s.pkt_count || m.last.key != c.spec->key)
        violated("flow %u msg %u: slot metadata differs from the accepted LAST trailer", id, s.msg_id);
    if (const void* hole = memchr(m.covered.data(), 0, s.msg_len); hole)
        violated("flow %u msg %u (msg_len %u, pkt_count %u) completed, but byte %zu was never "
                 "placed by a packet of this message: the CRC covered stale region bytes",
                 id, s.msg_id, s.msg_len, s.pkt_count,
                 static_cast<size_t>(static_cast<const uint8_t*>(hole) - m.covered.data()));
}

// After one frame: apply what the placer reported to the shadow and compare
// every flow's whole writable memory with it.
void check_memory(Run& run, const std::vector<uint8_t>& f, bool placed, uint64_t completions) {
    if (placed) {
        const Header h = header_of(f);
        FlowCtx* c = run.find(h.flow);
        if (c == nullptr)
            violated("placed a packet of unregistered flow %u", h.flow);
        const uint64_t end = static_cast<uint64_t>(h.offset) + h.pay_len;
        if (end > c->spec->region_size)
            violated("flow %u: placed [%u, %llu) beyond the %llu-byte region", h.flow, h.offset,
                     static_cast<unsigned long long>(end),
                     static_cast<unsigned long long>(c->spec->region_size));
        if (kPayOff + h.pay_len > f.size())
            violated("flow %u: placed %u payload bytes from a %zu-byte frame", h.flow, h.pay_len,
                     f.size());
        const uint32_t slot = h.msg_id & c->ring->mask();
        if (h.pay_len > 0)
            memcpy(&c->shadow[c->region_off(slot) + h.offset], f.data() + kPayOff, h.pay_len);
        SlotModel& m = c->model[slot];
        if (!m.active || m.msg_id != h.msg_id) {
            m.active = true;
            m.msg_id = h.msg_id;
            m.have_last = false;
            std::fill(m.covered.begin(), m.covered.end(), 0);
        }
        std::fill(m.covered.begin() + h.offset, m.covered.begin() + static_cast<long>(end), 1);
        if (has(h.flags, Flags::Last)) {
            const size_t tend = kUdpOff + get16(&f[kUdpOff + 4]);
            WireTrailer w;
            memcpy(&w, &f[tend - kTrailerLen], sizeof(w));
            m.have_last = true;
            m.last = decode(&w);
        }
    }
    uint64_t changed = 0;
    for (FlowCtx& c : run.flows) {
        const uint8_t* a = c.base + c.slots_len;
        const uint8_t* e = c.shadow.data() + c.slots_len;
        const size_t n = c.len - c.slots_len;
        if (memcmp(a, e, n) != 0) {
            size_t k = 0;
            while (a[k] == e[k])
                k++;
            const size_t off = c.slots_len + k;
            const size_t r0 = c.region_off(0);
            const size_t stride = c.ring->size() > 1 ? c.region_off(1) - r0 : c.len - r0;
            if (off < r0)
                violated("flow %u: wrote byte %zu of the ring, between the slots and the regions "
                         "(expected %02x, found %02x)", c.spec->id, off, e[k], a[k]);
            violated("flow %u: unexpected write at region %zu offset %zu (region size %llu, "
                     "stride %zu; expected %02x, found %02x)", c.spec->id, (off - r0) / stride,
                     (off - r0) % stride, static_cast<unsigned long long>(c.spec->region_size),
                     stride, e[k], a[k]);
        }
        for (uint32_t i = 0; i < c.ring->size(); i++) {
            uint8_t* sa = c.base + static_cast<size_t>(i) * kSlotSize;
            uint8_t* se = c.shadow.data() + static_cast<size_t>(i) * kSlotSize;
            if (memcmp(sa, se, kSlotSize) == 0)
                continue;
            changed++;
            check_completion(run, c, i, se);
            memcpy(se, sa, kSlotSize);
        }
    }
    if (changed > 1)
        violated("%llu completion slots written by one frame", static_cast<unsigned long long>(changed));
    if (changed != completions)
        violated("%llu slots written, completions counter moved by %llu",
                 static_cast<unsigned long long>(changed), static_cast<unsigned long long>(completions));
    g_stats.completions += changed;
}

// ---- the consumer ----------------------------------------------------------------

void consume(Run& run) {
    for (FlowCtx& c : run.flows) {
        while (const CompletionSlot* s = c.ring->poll(c.released)) {
            auto msg = c.ring->message(s);
            if (s->msg_len > c.spec->region_size || crc32c(msg) != s->crc32c)
                violated("flow %u: consumer read msg %u, whose bytes do not match its CRC",
                         c.spec->id, c.released);
            if (!c.ring->release(c.released))
                violated("flow %u: release(%u) refused", c.spec->id, c.released);
            c.released++;
            g_stats.consumed++;
        }
        if (c.pkt_ring != nullptr) {
            PacketCompletion pc;
            while (rte_ring_sc_dequeue_elem(c.pkt_ring, &pc, sizeof(pc)) == 0) {
                if (static_cast<uint64_t>(pc.offset) + pc.len > c.spec->region_size)
                    violated("flow %u: packet completion [%u, +%u) beyond the region", c.spec->id,
                             pc.offset, pc.len);
                g_stats.packet_completions++;
            }
        }
    }
}

void give_up(Run& run) {
    for (FlowCtx& c : run.flows) {
        if (!c.ring->release(c.released))
            violated("flow %u: release(%u) refused", c.spec->id, c.released);
        c.released++;
    }
}

void drain_pkt_rings() {
    PacketCompletion pc;
    for (rte_ring* r : g_pkt_rings)
        while (rte_ring_sc_dequeue_elem(r, &pc, sizeof(pc)) == 0) {
        }
}

// ---- one input -------------------------------------------------------------------------

void set_up(Run& run) {
    for (size_t k = 0; k < kNumFlows; k++) {
        FlowCtx& c = run.flows[k];
        const FlowSpec& fs = kFlows[k];
        c.spec = &fs;
        c.pkt_ring = g_pkt_rings[k];
        c.ring = CompletionRing::create(fs.id, fs.ring_size, fs.region_size, SOCKET_ID_ANY);
        if (!c.ring)
            env_failure("CompletionRing::create(flow %u)", fs.id);
        auto span = c.ring->writable_span();
        c.base = span.data();
        c.len = span.size();
        c.slots_len = static_cast<size_t>(fs.ring_size) * kSlotSize;
        if (reinterpret_cast<uint8_t*>(c.ring->slot(0)) != c.base)
            env_failure("ring layout: writable span does not start at slot 0");
        // Regions start with a canary pattern: stale bytes a completion must not
        // cover, and padding nothing may write. (Computed once: a byte loop here,
        // instrumented, would cost more than the rest of the input.)
        static std::vector<uint8_t> canary[kNumFlows];
        const size_t r0 = c.region_off(0);
        if (canary[k].size() != c.len - r0) {
            canary[k].resize(c.len - r0);
            for (size_t i = 0; i < canary[k].size(); i++)
                canary[k][i] = static_cast<uint8_t>(0xA5 ^ (i * 0x9D) ^ (k << 5));
        }
        memcpy(c.base + r0, canary[k].data(), canary[k].size());
        c.shadow.assign(c.base, c.base + c.len);
        c.released = 0;
        c.completed.clear();
        c.model.resize(fs.ring_size);
        for (SlotModel& m : c.model) {
            m.active = m.have_last = false;
            m.covered.assign(fs.region_size, 0);
        }
    }
}

} // namespace

const RunStats& last_stats() { return g_stats; }
rte_mempool* pool() { return g_pool; }

} // namespace tmfuzz

using namespace tmfuzz;

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    static bool done = false;
    if (done)
        return 0;
    done = true;
    init_eal(argc && *argc > 0 ? (*argv)[0] : "fuzz_rx");
    g_pool = rte_pktmbuf_pool_create("tm_fuzz_pool", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                     SOCKET_ID_ANY);
    if (g_pool == nullptr)
        env_failure("mbuf pool");
    for (size_t k = 0; k < kNumFlows; k++) {
        std::string name = "tm_fuzz_pc" + std::to_string(k);
        g_pkt_rings[k] = rte_ring_create_elem(name.c_str(), sizeof(PacketCompletion), kPktRingSize,
                                              SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (g_pkt_rings[k] == nullptr)
            env_failure("packet completion ring");
    }
    atexit(cleanup_eal);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (g_pool == nullptr)
        LLVMFuzzerInitialize(nullptr, nullptr);
    g_stats = RunStats{};
    g_frame_no = 0;
    if (size == 0)
        return 0;

    const uint8_t cfg_bits = data[0];
    ParserConfig cfg;
    cfg.verify_udp_checksum = cfg_bits & kCfgVerifyUdp;
    cfg.verify_ip_checksum = !(cfg_bits & kCfgNoIpVerify);
    if (cfg_bits & kCfgAltPort)
        cfg.udp_port = kAltUdpPort;

    drain_pkt_rings();
    // One Run for the process: its buffers keep their capacity from input to
    // input (allocating ~200 KiB of shadow per input costs more than the rest).
    static Run run;
    run.packet_mode = cfg_bits & kCfgPacketMode;
    set_up(run);
    {
        RxPlacer placer(cfg, SOCKET_ID_ANY);
        for (FlowCtx& c : run.flows) {
            if (!placer.add_flow(c.spec->id, c.ring.get(), c.spec->key, stride_for_mtu(c.spec->mtu)))
                env_failure("add_flow(%u)", c.spec->id);
            if (run.packet_mode)
                placer.set_packet_completion_ring(c.spec->id, c.pkt_ring);
        }
        placer.set_mode(run.packet_mode ? CompletionMode::Packet : CompletionMode::Message);
        placer.set_stream_min(cfg_bits & kCfgStream ? kStreamMin : 0);

        size_t pos = 1;
        static std::vector<uint8_t> f;
        while (pos < size) {
            g_frame_no++;
            const uint8_t c = data[pos++];
            uint16_t lenf = 0;
            if (pos + 2 <= size) {
                lenf = get16(data + pos);
                pos += 2;
            } else {
                pos = size;
            }
            size_t len = lenf & kLenMask;
            if (len > size - pos)
                len = size - pos;
            f.assign(data + pos, data + pos + len);
            pos += len;

            if (c & kCtlConsume)
                consume(run);
            if (lenf & kLenGiveUp)
                give_up(run);
            if (c & kCtlFixLen)
                fix_lengths(f);
            if (c & kCtlFixTrailer)
                fix_trailer(run, f);
            if (c & kCtlFixIpCsum)
                fix_ip_checksum(f);

            rte_mbuf* m = make_mbuf(f, (c >> kCtlSegShift) & 3, (c >> kCtlOlShift) & 3,
                                    cfg_bits & kCfgVlanOnGood);
            const RxCounters before = placer.counters();
            const bool burst = lenf & kLenBurst;
            DropReason r = DropReason::None;
            if (burst) {
                placer.rx_burst(&m, 1, g_frame_no);
            } else {
                r = placer.process(m, g_frame_no);
                rte_pktmbuf_free(m);
            }
            if (rte_mempool_avail_count(g_pool) != kPoolSize)
                violated("mbufs not returned: %u of %u in the pool after the frame",
                         rte_mempool_avail_count(g_pool), kPoolSize);

            const RxCounters& after = placer.counters();
            if (after.packets != before.packets + 1)
                violated("packets counter moved by %llu",
                         static_cast<unsigned long long>(after.packets - before.packets));
            const uint64_t placed = after.placed - before.placed;
            const uint64_t completions = after.completions - before.completions;
            const uint64_t drops = after.dropped() - before.dropped();
            if (placed > 1 || completions > 1)
                violated("one frame: placed %llu, completions %llu",
                         static_cast<unsigned long long>(placed),
                         static_cast<unsigned long long>(completions));
            if (placed + drops == 0)
                violated("frame neither placed nor counted as dropped");
            if (!burst) {
                if ((r == DropReason::None) != (placed == 1))
                    violated("process() returned %s but placed %llu", to_string(r).data(),
                             static_cast<unsigned long long>(placed));
                if (r != DropReason::None && after.drops[index(r)] == before.drops[index(r)])
                    violated("dropped as %s, not counted", to_string(r).data());
            }
            check_memory(run, f, placed == 1, completions);
            g_stats.frames++;
            g_stats.placed += placed;
        }
        consume(run);
        g_stats.drops = placer.counters().drops;
        g_stats.discarded = placer.counters().discarded;
        if (!run.packet_mode && placer.counters().completions != g_stats.completions)
            violated("completions counter %llu, slot writes seen %llu",
                     static_cast<unsigned long long>(placer.counters().completions),
                     static_cast<unsigned long long>(g_stats.completions));
    }
    for (FlowCtx& c : run.flows)
        c.ring.reset(); // after the placer: frees the memzones for the next input
    return 0;
}
