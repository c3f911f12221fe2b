// The sender: cuts a message into its packet group (wire.h's GroupPlan),
// writes headers from the flow's template, and appends the 32-byte trailer to
// the final mbuf segment of the group's last packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_mempool.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "tailmark/crc32c.h"
#include "tailmark/polyval.h"
#include "tailmark/siphash.h"
#include "tailmark/wire.h"

namespace tailmark {

struct Addressing {
    rte_ether_addr src_mac{};
    rte_ether_addr dst_mac{};
    uint32_t src_ip = 0; // host order
    uint32_t dst_ip = 0;
    uint16_t udp_port = kDefaultUdpPort;
};

// Everything the sender knows about a flow, prepared once at set-up.
struct TxFlow {
    uint16_t id = 0;
    uint32_t key = 0;
    uint32_t ring_mask = 0; // ring size - 1 at the receiver
    uint32_t stride = 0;    // payload bytes per full packet
    uint16_t ip_sum = 0;    // folded sum of the IPv4 header template (length, checksum 0)
    // The session's data version: 1, or 2 with a tag under tag_key on every
    // packet (data_tag.h). Only the general build path makes version 2's.
    uint8_t version = kVersion;
    bool data_auth = false; // --data-auth: the tag covers the payload too, through auth_key
    // Its frames go only over the in-memory loopback to another end of this
    // process: a long message's CRC32C is not made, its trailer carries 0
    // (the receiver checks none: FlowAuth::loopback).
    bool loopback = false;
    SipKey tag_key{};
    alignas(8) uint8_t l2l4[kEthLen + kIpLen + kUdpLen]{};
    PolyvalKey auth_key{};  // data_auth: the POLYVAL key (polyval.h)

    uint32_t overhead() const { return frame_overhead(version); }
    // False when ring_size is not a power of two or the MTU cannot hold a trailer.
    // auth_h: --data-auth's 16-byte POLYVAL key (version 2), or nullptr.
    static bool make(TxFlow& out, uint16_t id, uint32_t key, uint32_t ring_size, uint32_t mtu,
                     const Addressing& addr, uint8_t version = kVersion, const SipKey& tag_key = {},
                     const uint8_t* auth_h = nullptr);
    // UDP source port: stable per flow, spread for RSS/ECMP.
    static uint16_t source_port(uint16_t flow);
};

enum class PayloadMode : uint8_t {
    Copy,     // payload copied into the packet mbufs
    ZeroCopy, // payload referenced: extbuf over the caller's bytes, or indirect mbufs of its chain
};

struct TxMessage {
    uint32_t msg_id = 0;
    std::span<const uint8_t> bytes; // the message, when chain is null
    rte_mbuf* chain = nullptr;      // or: the message as an mbuf chain (pkt_len bytes)
    // ZeroCopy from bytes: the caller's shared info. Every packet segment holds
    // one reference; the caller holds one more and drops it when done.
    rte_mbuf_ext_shared_info* shinfo = nullptr;
    // ZeroCopy from bytes: the IOVA of bytes[0] when the owner knows it
    // (memory it DMA-mapped itself); RTE_BAD_IOVA: looked up per segment
    // (rte_mem_virt2iova, which in IOVA-as-PA mode reads /proc/self/pagemap).
    rte_iova_t iova = RTE_BAD_IOVA;
    // The send stamp every packet built next carries as its IPv4
    // identification (network order; congestion control's RTT, see
    // congestion.h). DF is set, so the ID is free (RFC 6864).
    uint16_t stamp = 0;
    // Filled by TxMarker::prepare.
    GroupPlan plan;
    uint32_t crc32c = 0;
    // prepare_streamed: the CRC32C is computed while the payload is copied,
    // packet by packet in order, and is final once the LAST is built.
    bool crc_pending = false;
    uint32_t crc_state = 0; // CRC32C state of bytes [0, crc_upto)
    uint32_t crc_upto = 0;

    uint64_t length() const { return chain ? rte_pktmbuf_pkt_len(chain) : bytes.size(); }
};

class TxMarker;

// A one-packet message's packet, made once for a flow and a payload length,
// without what changes from message to message (the send stamp and the
// IPv4 checksum, msg_id, the trailer's flag, slot and CRC32C). build_one
// writes a packet from it in a few wide stores: the tx path at 64 B is
// bound by its stores, not by its instructions (without the CRC32C it ran
// no faster; writing the same lines in 5 stores instead of 35, 1.11x).
// The caller keeps one per flow; the flow's TxFlow must not change.
struct OneFrame {
    // Where build_one patches it: 16-, 32- and 64-bit lanes of the 32-byte
    // words it stores (head[0, 32), head[kHead2At, kFrameOverhead), the
    // trailer, the mbuf's from kMbufAt).
    static constexpr uint32_t kIdAt = kEthLen + offsetof(rte_ipv4_hdr, packet_id); // the stamp
    static constexpr uint32_t kCsumAt = kEthLen + offsetof(rte_ipv4_hdr, hdr_checksum);
    static constexpr uint32_t kHead2At = kFrameOverhead - 32;
    static constexpr uint32_t kMsgIdAt = kEthLen + kIpLen + kUdpLen + offsetof(WireHeader, msg_id) - kHead2At;
    static constexpr size_t kMbufAt = offsetof(rte_mbuf, data_off);

    alignas(64) uint8_t head[64]{};   // [0, kFrameOverhead): L2-L4 and the header
    alignas(32) uint8_t trailer[32]{}; // the WireTrailer: key, msg_len, pkt_count, magic
    // The rte_mbuf's bytes from data_off on: rearm_data, ol_flags,
    // packet_type, pkt_len, data_len, vlan_tci (and hash, zeroed).
    alignas(32) uint8_t mbuf[32]{};
    uint16_t ip_sum = 0;             // the IPv4 header's folded sum, but for the stamp
    uint32_t pay_len = UINT32_MAX;   // made for this payload length (UINT32_MAX: not yet)
    const TxMarker* marker = nullptr; // by this TxMarker (its pool's mbufs)
};

static_assert(OneFrame::kIdAt % 2 == 0 && OneFrame::kIdAt + 2 <= 32);
static_assert(OneFrame::kCsumAt % 2 == 0 && OneFrame::kCsumAt + 2 <= 32);
static_assert(OneFrame::kMsgIdAt % 4 == 0 && OneFrame::kMsgIdAt + 4 <= 32 && OneFrame::kHead2At <= 32);
static_assert(offsetof(WireTrailer, flag) == 0 && offsetof(WireTrailer, slot) == 8 &&
              offsetof(WireTrailer, crc32c) == 24 && sizeof(WireTrailer) == 32);
// The mbuf's 32 bytes from data_off hold every field Fresh::init and the
// lengths write but vlan_tci_outer and tx_offload, and end before buf_len.
static_assert(offsetof(rte_mbuf, ol_flags) >= OneFrame::kMbufAt && offsetof(rte_mbuf, ol_flags) + 8 <= OneFrame::kMbufAt + 32);
static_assert(offsetof(rte_mbuf, packet_type) >= OneFrame::kMbufAt &&
              offsetof(rte_mbuf, packet_type) + 4 <= OneFrame::kMbufAt + 32);
static_assert(offsetof(rte_mbuf, pkt_len) >= OneFrame::kMbufAt && offsetof(rte_mbuf, pkt_len) + 4 <= OneFrame::kMbufAt + 32);
static_assert(offsetof(rte_mbuf, data_len) >= OneFrame::kMbufAt && offsetof(rte_mbuf, data_len) + 2 <= OneFrame::kMbufAt + 32);
static_assert(offsetof(rte_mbuf, vlan_tci) >= OneFrame::kMbufAt && offsetof(rte_mbuf, vlan_tci) + 2 <= OneFrame::kMbufAt + 32);
static_assert(OneFrame::kMbufAt + 32 <= offsetof(rte_mbuf, vlan_tci_outer) &&
              OneFrame::kMbufAt + 32 <= offsetof(rte_mbuf, buf_len));

// One's complement addition (the IPv4 checksum's).
inline uint16_t ones_add(uint16_t sum, uint16_t v) {
    uint32_t s = static_cast<uint32_t>(sum) + v;
    s = (s & 0xFFFF) + (s >> 16);
    return static_cast<uint16_t>(s);
}

// Raw mbufs taken from the pool once per round of building, as many as the
// round may send, and handed to build() a message at a time; what is left
// goes back at the end of the round. One-packet messages (64 B) otherwise
// pay a pool call per message. Only pointers move here: each mbuf is set up
// when it is built (build_single), so a round that sends less costs no more
// than two pointer copies.
class MbufStash {
public:
    explicit MbufStash(rte_mempool* pool) : pool_(pool) {}
    ~MbufStash() { release(); }
    MbufStash(const MbufStash&) = delete;
    MbufStash& operator=(const MbufStash&) = delete;

    // The round may build up to `want` more packets.
    void open(uint32_t want) { want_ = want; }
    // k raw mbufs of the pool into out; false when the pool has too few.
    bool take(rte_mbuf** out, uint32_t k) {
        if (n_ - pos_ < k && !refill(k))
            return false;
        for (uint32_t i = 0; i < k; i++)
            out[i] = m_[pos_ + i];
        pos_ += k;
        want_ = want_ > k ? want_ - k : 0;
        return true;
    }
    // At least k (k <= kMax) ready to take, if the pool has them: how many are.
    uint32_t ready(uint32_t k) {
        if (n_ - pos_ < k)
            refill(k);
        return n_ - pos_;
    }
    // The round is over: the rest back to the pool.
    void release() {
        if (pos_ < n_)
            rte_mempool_put_bulk(pool_, reinterpret_cast<void**>(m_ + pos_), n_ - pos_);
        n_ = pos_ = 0;
    }

    static constexpr uint32_t kMax = 64; // a burst (TxMarker::kMaxBurst)

private:
    bool refill(uint32_t k);
    rte_mempool* pool_;
    uint32_t n_ = 0, pos_ = 0, want_ = 0;
    rte_mbuf* m_[kMax];
};

class TxMarker {
public:
    // `pool` gives every mbuf the marker needs (headers, copies, attachments).
    TxMarker(rte_mempool* pool, PayloadMode mode)
        : pool_(pool), room_(rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM), mode_(mode),
          fresh_(fresh_for(pool)) {}

    // Plans the group and computes the CRC32C. False: the message cannot be
    // sent with this flow's stride (more than 65535 packets).
    bool prepare(const TxFlow& flow, TxMessage& msg) const;
    // The same, but the CRC32C is left to build(), which folds it into the
    // copy of each packet's payload: one pass over the message instead of
    // two. msg.crc32c is valid once the LAST packet is built (packets built
    // out of order are checksummed again, whole, at the LAST).
    bool prepare_streamed(const TxFlow& flow, TxMessage& msg) const {
        msg.plan = plan_group(msg.length(), flow.stride);
        if (!msg.plan.ok())
            return false;
        // A short message (64 B: the tx path's common case) is checksummed
        // here, inline: two calls and the kernel dispatch cost as much as its CRC.
        if (msg.chain == nullptr && msg.plan.msg_len < kCrc32cShortMax) {
            msg.crc_pending = false;
            msg.crc32c = crc32c_finish(crc32c_inline(kCrc32cInit, msg.bytes));
            return true;
        }
        return prepare_long(flow, msg);
    }

    // Builds packets [first, first + n) of the group into out[0..n). Returns n,
    // or a negative errno with nothing allocated and nothing leaked:
    // -ENOMEM (pool empty), -EINVAL (range outside the group, or a packet would
    // need more than kMaxSegs segments). `extra` is or-ed into every header's
    // flags (Flags::Retx for a retransmitted copy).
    // `stash` (of this marker's pool), if given, supplies single-segment
    // packets' mbufs.
    int build(const TxFlow& flow, TxMessage& msg, uint32_t first, uint32_t n, rte_mbuf** out,
              Flags extra = Flags::None, MbufStash* stash = nullptr) const;

    // The longest message prepare_one takes for this flow; false when it
    // takes none (prepare_one's conditions that do not depend on the message;
    // test_tx_marker.cc checks the two agree).
    bool one_max(const TxFlow& flow, uint64_t& max_len) const {
        if (mode_ != PayloadMode::Copy || flow.version != kVersion || flow.stride <= kTrailerLen ||
            flow.stride > UINT16_MAX || kFrameOverhead + kTrailerLen > room_)
            return false;
        // A one-packet message: its frame in one mbuf, whatever the stride.
        max_len = std::min<uint64_t>(std::min<uint64_t>(flow.stride - kTrailerLen, kStreamMin - 1),
                                     room_ - kFrameOverhead - kTrailerLen);
        return true;
    }

    // prepare_streamed of a message (bytes, not a chain) that build_one
    // may build, in the caller's TxMessage: planned, its CRC32C done. False,
    // with msg.plan made, for any other message (prepare_streamed and
    // build() take it). Nothing of msg leaves the inline path, so a caller's
    // local TxMessage stays in registers (Sender::one_run).
    bool prepare_one(const TxFlow& flow, TxMessage& msg) const {
        msg.plan = plan_group(msg.bytes.size(), flow.stride);
        if (msg.plan.pkt_count != 1 || msg.plan.msg_len >= kStreamMin || mode_ != PayloadMode::Copy ||
            flow.version != kVersion || kFrameOverhead + msg.plan.msg_len + kTrailerLen > room_)
            return false;
        msg.crc_pending = false;
        msg.crc32c = crc32c_finish(crc32c_inline(kCrc32cInit, msg.bytes));
        return true;
    }
    // A one-packet message copied into one mbuf, its CRC32C done (as
    // prepare_streamed leaves a short one), of a version 1 flow: build_one
    // may build it.
    bool one_packet(const TxFlow& flow, const TxMessage& msg) const {
        return msg.plan.pkt_count == 1 && !msg.crc_pending && flow.version == kVersion && single_segment(flow, msg);
    }
    // build(flow, msg, 0, 1, out, Flags::None, stash) of a one_packet()
    // message, without build()'s range checks and its dispatch between
    // copies with and without the CRC32C folded in: at 64 B those cost as
    // much as a fifth of the tx path (txfixed64: Sender::one_run alone
    // 1.02-1.07x, with build_one 1.22x). The packet is `one`'s, remade when
    // the length (or the marker) differs from the last message's.
    int build_one(const TxFlow& flow, OneFrame& one, TxMessage& msg, rte_mbuf** out, MbufStash* stash) const;

    static constexpr uint32_t kMaxBurst = 64;
    static_assert(kMaxBurst == MbufStash::kMax);
    // prepare_streamed checksums shorter messages in one go.
    static constexpr uint32_t kStreamMin = 512;
    static constexpr uint32_t kMaxSegs = 16;

    PayloadMode mode() const { return mode_; }
    // Fill the UDP checksum (software). The wire format allows 0; with it a
    // receiver that verifies finds a damaged packet by itself, so a corrupting
    // link costs a packet's retransmission instead of the whole message's
    // (the trailer's CRC32C only says that some byte of the message is wrong).
    // offload: the NIC fills it (RTE_ETH_TX_OFFLOAD_UDP_CKSUM on the queue):
    // the packet carries the pseudo-header sum and the request flags.
    void set_udp_checksum(bool on, bool offload = false) {
        udp_checksum_ = on;
        udp_offload_ = on && offload;
    }

    // A single-segment packet's mbuf straight from the pool, set up with
    // constant stores (see build_single).
    struct Fresh {
        static_assert(offsetof(rte_mbuf, port) + sizeof(uint16_t) - offsetof(rte_mbuf, data_off) == sizeof(uint64_t));
        uint64_t rearm = 0;      // data_off, refcnt 1, nb_segs 1, port: rte_mbuf::rearm_data
        uint64_t tx_offload = 0; // l2_len, l3_len
        uint64_t ol_flags = 0;   // RTE_MBUF_F_EXTERNAL in a pool of pinned external buffers (kept, as reset keeps it)
        uint32_t data_at = 0;    // the data's offset from the mbuf (direct mbufs)
        uint16_t data_off = 0;
        bool direct = true;

        uint8_t* data(rte_mbuf* m) const {
            return direct ? reinterpret_cast<uint8_t*>(m) + data_at : static_cast<uint8_t*>(m->buf_addr) + data_off;
        }
        void init(rte_mbuf* m) const {
            // data_off, refcnt, nb_segs and port: one 8-byte store (rearm_data)
            __builtin_memcpy(reinterpret_cast<uint8_t*>(m) + offsetof(rte_mbuf, data_off), &rearm, sizeof(rearm));
            m->ol_flags = ol_flags;
            m->packet_type = 0;
            m->vlan_tci = 0;
            m->vlan_tci_outer = 0;
            m->tx_offload = tx_offload;
        }
    };

private:
    static Fresh fresh_for(rte_mempool* pool);
    void make_one(const TxFlow& flow, uint32_t pay_len, OneFrame& one) const;
    void udp_checksum_one(rte_mbuf* m, uint8_t* p) const;
    bool prepare_long(const TxFlow& flow, TxMessage& msg) const; // prepare_streamed once the plan is made
    int build_segments(const TxFlow& flow, TxMessage& msg, uint32_t first, uint32_t n, rte_mbuf** out,
                       Flags extra) const;
    static void checksum(TxMessage& msg); // msg.crc32c over the whole message
    uint32_t segs_for(const TxFlow& flow, const TxMessage& msg, uint32_t idx) const;
    // Every packet of the message fits one mbuf: a full stride's, or (one
    // packet) the message and its trailer, whatever the stride (the
    // in-memory loopback's is 60 KiB).
    bool single_segment(const TxFlow& flow, const TxMessage& msg) const {
        const uint32_t biggest = msg.plan.pkt_count == 1 ? msg.plan.msg_len + kTrailerLen : msg.plan.stride;
        return mode_ == PayloadMode::Copy && msg.chain == nullptr && flow.overhead() + biggest <= room_;
    }
    rte_mempool* pool_;
    uint32_t room_; // data room per mbuf, after the headroom (read once: it is in the pool's private area)
    PayloadMode mode_;
    bool udp_checksum_ = false;
    bool udp_offload_ = false;
    Fresh fresh_;
};

#if defined(__AVX2__)
// Inline: the sender's run of one-packet messages keeps its state in
// registers across it (Sender::one_run); a call spilled it.
[[gnu::always_inline]] inline int TxMarker::build_one(const TxFlow& flow, OneFrame& one, TxMessage& msg, rte_mbuf** out,
                               MbufStash* stash) const {
    const uint32_t len = msg.plan.msg_len;
    if (unlikely(one.pay_len != len || one.marker != this))
        make_one(flow, len, one);
    if (stash != nullptr ? !stash->take(out, 1) : rte_mempool_get_bulk(pool_, reinterpret_cast<void**>(out), 1) != 0)
        return -ENOMEM;
    rte_mbuf* m = out[0];
    uint8_t* p = fresh_.data(m);
    const uint16_t stamp = msg.stamp; // in network order, as write_headers stores it
    __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(one.head));
    w0 = _mm256_insert_epi16(w0, static_cast<short>(stamp), OneFrame::kIdAt / 2);
    w0 = _mm256_insert_epi16(w0, static_cast<short>(static_cast<uint16_t>(~ones_add(one.ip_sum, stamp))),
                             OneFrame::kCsumAt / 2);
    __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(one.head + OneFrame::kHead2At));
    w1 = _mm256_insert_epi32(w1, static_cast<int>(rte_cpu_to_be_32(msg.msg_id)), OneFrame::kMsgIdAt / 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), w0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + OneFrame::kHead2At), w1);
    rte_memcpy(p + kFrameOverhead, msg.bytes.data(), len);
    __m256i t = _mm256_load_si256(reinterpret_cast<const __m256i*>(one.trailer));
    t = _mm256_insert_epi64(t, static_cast<long long>(rte_cpu_to_be_64(flag_for(msg.msg_id))), 0);
    t = _mm256_insert_epi32(t, static_cast<int>(rte_cpu_to_be_32(msg.msg_id & flow.ring_mask)), 2);
    t = _mm256_insert_epi32(t, static_cast<int>(rte_cpu_to_be_32(msg.crc32c)), 6);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + kFrameOverhead + len), t);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(reinterpret_cast<uint8_t*>(m) + OneFrame::kMbufAt),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(one.mbuf)));
    m->vlan_tci_outer = 0;
    m->tx_offload = fresh_.tx_offload;
    if (udp_checksum_)
        udp_checksum_one(m, p);
    return 1;
}
#endif

} // namespace tailmark
