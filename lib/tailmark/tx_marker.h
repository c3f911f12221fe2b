// The sender: cuts a message into its packet group (wire.h's GroupPlan),
// writes headers from the flow's template, and appends the 32-byte trailer to
// the final mbuf segment of the group's last packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "tailmark/crc32c.h"
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
    alignas(8) uint8_t l2l4[kEthLen + kIpLen + kUdpLen]{};

    // False when ring_size is not a power of two or the MTU cannot hold a trailer.
    static bool make(TxFlow& out, uint16_t id, uint32_t key, uint32_t ring_size, uint32_t mtu,
                     const Addressing& addr);
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
        return prepare_long(msg);
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

    // A one-packet message copied into one mbuf, its CRC32C done (as
    // prepare_streamed leaves a short one): build_one may build it.
    bool one_packet(const TxMessage& msg) const {
        return msg.plan.pkt_count == 1 && !msg.crc_pending && single_segment(msg);
    }
    // build(flow, msg, 0, 1, out, Flags::None, stash) of a one_packet()
    // message, without build()'s range checks and its dispatch between
    // copies with and without the CRC32C folded in: at 64 B those cost as
    // much as a fifth of the tx path (txfixed64: Sender::sink_run alone
    // 1.02-1.07x, with build_one 1.22x).
    int build_one(const TxFlow& flow, TxMessage& msg, rte_mbuf** out, MbufStash* stash) const;

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
    bool prepare_long(TxMessage& msg) const; // prepare_streamed once the plan is made
    int build_segments(const TxFlow& flow, TxMessage& msg, uint32_t first, uint32_t n, rte_mbuf** out,
                       Flags extra) const;
    static void checksum(TxMessage& msg); // msg.crc32c over the whole message
    uint32_t segs_for(const TxMessage& msg, uint32_t idx) const;
    bool single_segment(const TxMessage& msg) const {
        return mode_ == PayloadMode::Copy && msg.chain == nullptr && kFrameOverhead + msg.plan.stride <= room_;
    }
    rte_mempool* pool_;
    uint32_t room_; // data room per mbuf, after the headroom (read once: it is in the pool's private area)
    PayloadMode mode_;
    bool udp_checksum_ = false;
    bool udp_offload_ = false;
    Fresh fresh_;
};

} // namespace tailmark
