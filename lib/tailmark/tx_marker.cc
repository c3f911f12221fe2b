#include "tailmark/tx_marker.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <rte_ip.h>
#include <rte_memcpy.h>
#include <rte_udp.h>

#include "tailmark/data_tag.h"
#include "tailmark/mbuf_pieces.h"
#include "tailmark/udp_cksum.h"

#include "tailmark/crc32c.h"

namespace tailmark {

uint16_t TxFlow::source_port(uint16_t flow) {
    // Ephemeral range, mixed so neighbouring flows land on different RSS buckets.
    uint32_t h = static_cast<uint32_t>(flow) * 0x9E3779B1u;
    return static_cast<uint16_t>(49152 + ((h >> 16) % 16384));
}

bool TxFlow::make(TxFlow& out, uint16_t id, uint32_t key, uint32_t ring_size, uint32_t mtu,
                  const Addressing& a, uint8_t version, const SipKey& tag_key, const uint8_t* auth_h) {
    const uint32_t stride = stride_for_mtu(mtu, version);
    if (ring_size == 0 || (ring_size & (ring_size - 1)) != 0 || stride <= kTrailerLen ||
        stride > UINT16_MAX || (version != kVersion && version != kVersion2))
        return false;
    out = TxFlow{};
    out.id = id;
    out.key = key;
    out.version = version;
    out.tag_key = tag_key;
    if (auth_h != nullptr && version == kVersion2) {
        out.data_auth = true;
        polyval_key(out.auth_key, auth_h);
    }
    out.ring_mask = ring_size - 1;
    out.stride = stride;
    auto* eth = reinterpret_cast<rte_ether_hdr*>(out.l2l4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(out.l2l4 + kEthLen);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(out.l2l4 + kEthLen + kIpLen);
    eth->dst_addr = a.dst_mac;
    eth->src_addr = a.src_mac;
    eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
    ip->version_ihl = RTE_IPV4_VHL_DEF; // version 4, IHL 5
    ip->type_of_service = 0;
    ip->total_length = 0;                // per packet
    ip->packet_id = 0;                   // per packet: the send stamp (DF set: the ID is free, RFC 6864)
    ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->hdr_checksum = 0;
    ip->src_addr = rte_cpu_to_be_32(a.src_ip);
    ip->dst_addr = rte_cpu_to_be_32(a.dst_ip);
    udp->src_port = rte_cpu_to_be_16(source_port(id));
    udp->dst_port = rte_cpu_to_be_16(a.udp_port);
    udp->dgram_len = 0; // per packet
    udp->dgram_cksum = 0; // allowed for IPv4; the trailer's CRC32C covers the payload
    out.ip_sum = rte_raw_cksum(ip, kIpLen);
    return true;
}

namespace {
// A loopback flow's message (TxFlow::loopback): no CRC32C, the trailer's 0.
inline void no_checksum(TxMessage& msg) {
    msg.crc_pending = false;
    msg.crc32c = 0;
}
} // namespace

bool TxMarker::prepare_long(const TxFlow& flow, TxMessage& msg) const {
    if (flow.loopback) [[unlikely]] {
        no_checksum(msg);
        return true;
    }
    // Only the single-segment path streams, and a short message gains nothing:
    // its CRC is cheaper in one go (folding's set-up costs more than the copy).
    if (!single_segment(flow, msg) || msg.plan.msg_len < kStreamMin) {
        checksum(msg);
        return true;
    }
    msg.crc32c = 0;
    msg.crc_pending = true;
    msg.crc_state = kCrc32cInit;
    msg.crc_upto = 0;
    return true;
}

bool TxMarker::prepare(const TxFlow& flow, TxMessage& msg) const {
    msg.plan = plan_group(msg.length(), flow.stride);
    if (!msg.plan.ok())
        return false;
    if (flow.loopback)
        no_checksum(msg);
    else
        checksum(msg);
    return true;
}

void TxMarker::checksum(TxMessage& msg) {
    msg.crc_pending = false;
    uint32_t st = kCrc32cInit;
    if (msg.chain) {
        for (const rte_mbuf* s = msg.chain; s; s = s->next)
            st = crc32c_update(st, {rte_pktmbuf_mtod(s, const uint8_t*), s->data_len});
    } else {
        st = crc32c_inline(st, msg.bytes);
    }
    msg.crc32c = crc32c_finish(st);
}

namespace {

// Position inside a message given as an mbuf chain.
struct ChainPos {
    rte_mbuf* seg;
    uint32_t off;
};

ChainPos seek(rte_mbuf* chain, uint32_t off) {
    rte_mbuf* s = chain;
    while (s && off >= s->data_len && s->next) {
        off -= s->data_len;
        s = s->next;
    }
    return {s, off};
}

// Pieces (source segments) that bytes [off, off+len) of the chain span.
uint32_t chain_pieces(rte_mbuf* chain, uint32_t off, uint32_t len) {
    if (len == 0)
        return 0;
    ChainPos p = seek(chain, off);
    uint32_t n = 0;
    while (len > 0 && p.seg) {
        uint32_t take = p.seg->data_len - p.off;
        if (take > len)
            take = len;
        if (take > 0)
            n++;
        len -= take;
        p.seg = p.seg->next;
        p.off = 0;
    }
    return n;
}

// The UDP checksum: by the NIC (the pseudo-header's sum in the field, the
// request in ol_flags, l2/l3 lengths set), or here over the pseudo-header,
// UDP header and payload (the field 0 while summing).
inline void fill_udp_checksum(rte_mbuf* m, rte_ipv4_hdr* ip, rte_udp_hdr* udp, bool offload) {
    if (offload) {
        m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
        udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, m->ol_flags);
    } else {
        udp->dgram_cksum = udp4_cksum(m, ip, kEthLen + kIpLen);
    }
}

} // namespace

uint32_t TxMarker::segs_for(const TxFlow& flow, const TxMessage& msg, uint32_t idx) const {
    const uint32_t len = msg.plan.len_of(idx);
    const bool last = msg.plan.is_last(idx);
    if (mode_ == PayloadMode::Copy) {
        const uint32_t room = room_;
        const uint32_t body = flow.overhead() + len;
        uint32_t segs = (body + room - 1) / room;
        const uint32_t used_in_final = body - (segs - 1) * room;
        if (last && room - used_in_final < kTrailerLen)
            segs++; // the trailer must sit whole in the final segment
        return segs;
    }
    uint32_t pieces = msg.chain ? chain_pieces(msg.chain, msg.plan.offset_of(idx), len)
                                : (len > 0 ? 1u : 0u);
    // header mbuf + payload references + (LAST with payload) a trailer mbuf:
    // the trailer cannot be appended to memory the sender does not own.
    return 1 + pieces + ((last && pieces > 0) ? 1u : 0u);
}

namespace {

// L2-L4 from the template, then the lengths and the IPv4 checksum; the header.
// Returns the UDP header (its checksum is filled last, over the whole packet).
inline rte_udp_hdr* write_headers(uint8_t* p, const TxFlow& flow, const Header& h, bool last, uint16_t stamp) {
    rte_memcpy(p, flow.l2l4, sizeof(flow.l2l4));
    const uint32_t udp_len = kUdpLen + header_len(flow.version) + h.pay_len + (last ? kTrailerLen : 0);
    const uint16_t ip_len = static_cast<uint16_t>(kIpLen + udp_len);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(p + kEthLen + kIpLen);
    ip->total_length = rte_cpu_to_be_16(ip_len);
    ip->packet_id = stamp;
    ip->hdr_checksum = static_cast<uint16_t>(~ones_add(ones_add(flow.ip_sum, rte_cpu_to_be_16(ip_len)), stamp));
    udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(udp_len));
    encode(h, reinterpret_cast<WireHeader*>(p + kEthLen + kIpLen + kUdpLen));
    return udp;
}

inline Header header_for(const TxMessage& msg, const TxFlow& flow, uint32_t idx, bool last, Flags extra) {
    Header h;
    h.version = flow.version;
    h.flags = (last ? Flags::Last : Flags::None) | extra;
    h.flow = flow.id;
    h.msg_id = msg.msg_id;
    h.pkt_idx = static_cast<uint16_t>(idx);
    h.pay_len = static_cast<uint16_t>(msg.plan.len_of(idx));
    h.offset = msg.plan.offset_of(idx);
    return h;
}

inline Trailer trailer_for(const TxMessage& msg, const TxFlow& flow) {
    Trailer t;
    t.flag = flag_for(msg.msg_id);
    t.slot = msg.msg_id & flow.ring_mask;
    t.key = flow.key;
    t.msg_len = msg.plan.msg_len;
    t.pkt_count = static_cast<uint16_t>(msg.plan.pkt_count);
    t.crc32c = msg.crc32c;
    return t;
}

// Version 2: the tag over the header (at p, as written) and the LAST's
// trailer (nullptr: none), right after the header. Once both are final.
// --data-auth: over the payload too, `len` bytes from `off` in the packet
// `m` (a chain: its segments' next pointers set up to those bytes).
inline void sign_data(const TxFlow& flow, uint8_t* hdr, const void* trailer, const rte_mbuf* m, uint32_t off,
                      uint32_t len) {
    if (flow.version != kVersion2)
        return;
    if (!flow.data_auth) {
        put_tag(hdr + kHeaderLen, data_tag(flow.tag_key, hdr, trailer));
        return;
    }
    Polyval h;
    h.init();
    for_each_piece(m, off, len, [&](const uint8_t* src, uint32_t n) { h.update(flow.auth_key, src, n); });
    uint64_t poly[2];
    h.final(flow.auth_key, poly);
    put_tag(hdr + kHeaderLen, data_tag(flow.tag_key, hdr, trailer, poly));
}

// The usual case, a copied message whose every packet fits one mbuf: one
// bulk allocation, then headers, payload and trailer written in place; no
// segment arithmetic. kStream: the CRC32C is folded into the copy (a
// separate instance, so the plain one pays nothing for it).
//
// The mbufs come raw from the pool (rte_mempool_get_bulk) and are set up
// here with constant stores: rte_pktmbuf_reset reads buf_len and rewrites
// ol_flags in place, loads that every packet's writes waited on (the top
// sample of the tx path). A pool's free mbuf has refcnt 1, nb_segs 1 and
// next NULL (rte_mbuf_raw_alloc's guarantee), and a direct one's buffer
// right behind it (TxMarker::Fresh::direct).
template <bool kStream>
int build_single(rte_mempool* pool, const TxMarker::Fresh& fresh, bool udp_checksum, bool offload, const TxFlow& flow,
                 TxMessage& msg, uint32_t first, uint32_t n, rte_mbuf** out, Flags extra, MbufStash* stash) {
    if (stash != nullptr ? !stash->take(out, n) : rte_mempool_get_bulk(pool, reinterpret_cast<void**>(out), n) != 0)
        return -ENOMEM;
    const GroupPlan& plan = msg.plan;
    const uint32_t ov = flow.overhead();
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t idx = first + i;
        const bool last = plan.is_last(idx);
        const Header h = header_for(msg, flow, idx, last, extra);
        rte_mbuf* m = out[i];
        uint8_t* p = fresh.data(m);
        fresh.init(m);
        rte_udp_hdr* udp = write_headers(p, flow, h, last, msg.stamp);
        const uint8_t* src = msg.bytes.data() + h.offset;
        if (kStream && h.offset == msg.crc_upto) { // in order: copy and checksum in one pass
            msg.crc_state = crc32c_copy(msg.crc_state, p + ov, {src, h.pay_len});
            msg.crc_upto += h.pay_len;
        } else {
            rte_memcpy(p + ov, src, h.pay_len);
        }
        uint32_t len = ov + h.pay_len;
        const uint8_t* trailer = nullptr;
        if (last) {
            if constexpr (kStream) {
                // Built out of order (a caller's choice): the whole message again.
                if (msg.crc_upto != plan.msg_len)
                    msg.crc_state = crc32c_update(kCrc32cInit, msg.bytes);
                msg.crc32c = crc32c_finish(msg.crc_state);
                msg.crc_pending = false;
            }
            encode(trailer_for(msg, flow), reinterpret_cast<WireTrailer*>(p + len));
            trailer = p + len;
            len += kTrailerLen;
        }
        m->data_len = static_cast<uint16_t>(len);
        sign_data(flow, p + kEthLen + kIpLen + kUdpLen, trailer, m, ov, h.pay_len);
        m->pkt_len = len;
        if (udp_checksum)
            fill_udp_checksum(m, reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen), udp, offload);
    }
    return static_cast<int>(n);
}

} // namespace

TxMarker::Fresh TxMarker::fresh_for(rte_mempool* pool) {
    Fresh f;
    const uint16_t room = rte_pktmbuf_data_room_size(pool);
    rte_mbuf t{};
    t.data_off = room < RTE_PKTMBUF_HEADROOM ? room : RTE_PKTMBUF_HEADROOM; // rte_pktmbuf_reset_headroom
    rte_mbuf_refcnt_set(&t, 1);
    t.nb_segs = 1;
    t.port = RTE_MBUF_PORT_INVALID;
    memcpy(&f.rearm, reinterpret_cast<const uint8_t*>(&t) + offsetof(rte_mbuf, data_off), sizeof(f.rearm));
    t.l2_len = kEthLen;
    t.l3_len = kIpLen;
    f.tx_offload = t.tx_offload;
    // A direct mbuf's buffer follows its header and private area, where
    // rte_pktmbuf_init put it and every detach puts it back; not so for a
    // pool of pinned external buffers.
    f.direct = (rte_pktmbuf_priv_flags(pool) & RTE_PKTMBUF_POOL_F_PINNED_EXT_BUF) == 0;
    f.ol_flags = f.direct ? 0 : RTE_MBUF_F_EXTERNAL;
    f.data_at = static_cast<uint32_t>(sizeof(rte_mbuf) + rte_pktmbuf_priv_size(pool) + t.data_off);
    f.data_off = t.data_off;
    return f;
}

bool MbufStash::refill(uint32_t k) {
    release();
    const uint32_t w = std::min(want_ > k ? want_ : k, kMax); // k <= kMaxBurst: build() checks
    if (rte_mempool_get_bulk(pool_, reinterpret_cast<void**>(m_), w) == 0) {
        n_ = w;
        return true;
    }
    if (w == k || rte_mempool_get_bulk(pool_, reinterpret_cast<void**>(m_), k) != 0)
        return false;
    n_ = k;
    return true;
}

int TxMarker::build(const TxFlow& flow, TxMessage& msg, uint32_t first, uint32_t n, rte_mbuf** out,
                    Flags extra, MbufStash* stash) const {
    const GroupPlan& plan = msg.plan;
    if (n == 0 || n > kMaxBurst || first >= plan.pkt_count || n > plan.pkt_count - first)
        return -EINVAL;
    if (mode_ == PayloadMode::ZeroCopy && !msg.chain && msg.shinfo == nullptr && msg.length() > 0)
        return -EINVAL;

    if (room_ < flow.overhead() + kTrailerLen)
        return -EINVAL;
    // A full packet's payload, or a tail and the trailer (never more than a
    // stride together: plan_group), fits one mbuf.
    if (single_segment(flow, msg))
        return msg.crc_pending ? build_single<true>(pool_, fresh_, udp_checksum_, udp_offload_, flow, msg, first, n, out, extra, stash)
                               : build_single<false>(pool_, fresh_, udp_checksum_, udp_offload_, flow, msg, first, n, out, extra, stash);
    return build_segments(flow, msg, first, n, out, extra);
}

void TxMarker::make_one(const TxFlow& flow, uint32_t pay_len, OneFrame& one) const {
    Header h;
    h.flags = Flags::Last;
    h.flow = flow.id;
    h.pay_len = static_cast<uint16_t>(pay_len);
    memset(one.head, 0, sizeof(one.head));
    write_headers(one.head, flow, h, true, 0);
    const uint16_t ip_len = static_cast<uint16_t>(kIpLen + kUdpLen + kHeaderLen + pay_len + kTrailerLen);
    one.ip_sum = ones_add(flow.ip_sum, rte_cpu_to_be_16(ip_len));
    Trailer t;
    t.key = flow.key;
    t.msg_len = pay_len;
    t.pkt_count = 1;
    encode(t, reinterpret_cast<WireTrailer*>(one.trailer));
    rte_mbuf m{};
    fresh_.init(&m);
    m.data_len = static_cast<uint16_t>(kFrameOverhead + pay_len + kTrailerLen);
    m.pkt_len = m.data_len;
    memcpy(one.mbuf, reinterpret_cast<const uint8_t*>(&m) + OneFrame::kMbufAt, sizeof(one.mbuf));
    one.pay_len = pay_len;
    one.marker = this;
}

#if !defined(__AVX2__)
int TxMarker::build_one(const TxFlow& flow, OneFrame&, TxMessage& msg, rte_mbuf** out, MbufStash* stash) const {
    return build_single<false>(pool_, fresh_, udp_checksum_, udp_offload_, flow, msg, 0, 1, out, Flags::None, stash);
}
#endif

void TxMarker::udp_checksum_one(rte_mbuf* m, uint8_t* p) const {
    fill_udp_checksum(m, reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen), reinterpret_cast<rte_udp_hdr*>(p + kEthLen + kIpLen),
                      udp_offload_);
}

// Out of line: its arrays (8 KiB of segment pointers) would make every
// single-segment build touch and probe a stack frame that large.
int TxMarker::build_segments(const TxFlow& flow, TxMessage& msg, uint32_t first, uint32_t n, rte_mbuf** out,
                             Flags extra) const {
    const GroupPlan& plan = msg.plan;
    if (msg.crc_pending) // not streamed on this path: the whole message first
        checksum(msg);
    uint32_t segs[kMaxBurst];
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        segs[i] = segs_for(flow, msg, first + i);
        if (segs[i] > kMaxSegs)
            return -EINVAL;
        total += segs[i];
    }
    rte_mbuf* mb[kMaxBurst * kMaxSegs];
    if (rte_pktmbuf_alloc_bulk(pool_, mb, total) != 0)
        return -ENOMEM;

    const uint32_t room = room_;
    uint32_t next = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t idx = first + i;
        const bool last = plan.is_last(idx);
        const uint32_t off = plan.offset_of(idx);
        const uint32_t len = plan.len_of(idx);
        rte_mbuf* head = mb[next++];
        rte_mbuf* seg = head; // the chain's current final segment
        // Links a segment from the bulk allocation behind `seg`. Attaching
        // resets an mbuf's next pointer, so segments are linked as they fill.
        auto link = [&](rte_mbuf* s) {
            seg->next = s;
            seg = s;
        };

        uint8_t* p = rte_pktmbuf_mtod(head, uint8_t*);
        rte_udp_hdr* udp = write_headers(p, flow, header_for(msg, flow, idx, last, extra), last, msg.stamp);
        head->data_len = static_cast<uint16_t>(flow.overhead());

        if (mode_ == PayloadMode::Copy) {
            // Fill segment after segment.
            uint32_t done = 0;
            ChainPos cp = msg.chain ? seek(msg.chain, off) : ChainPos{nullptr, 0};
            while (done < len) {
                if (seg->data_len == room)
                    link(mb[next++]);
                uint32_t take = room - seg->data_len;
                if (take > len - done)
                    take = len - done;
                uint8_t* dst = rte_pktmbuf_mtod_offset(seg, uint8_t*, seg->data_len);
                if (msg.chain) {
                    for (uint32_t copied = 0; copied < take;) {
                        uint32_t c = cp.seg->data_len - cp.off;
                        if (c > take - copied)
                            c = take - copied;
                        rte_memcpy(dst + copied, rte_pktmbuf_mtod_offset(cp.seg, uint8_t*, cp.off), c);
                        copied += c;
                        cp.off += c;
                        if (cp.off == cp.seg->data_len && cp.seg->next)
                            cp = {cp.seg->next, 0};
                    }
                } else {
                    rte_memcpy(dst, msg.bytes.data() + off + done, take);
                }
                seg->data_len = static_cast<uint16_t>(seg->data_len + take);
                done += take;
            }
            if (last && rte_pktmbuf_tailroom(seg) < kTrailerLen)
                link(mb[next++]); // the trailer sits whole in the final segment
        } else if (len > 0) {
            if (msg.chain) {
                ChainPos cp = seek(msg.chain, off);
                for (uint32_t left = len; left > 0; cp = {cp.seg->next, 0}) {
                    uint32_t c = cp.seg->data_len - cp.off;
                    if (c > left)
                        c = left;
                    if (c == 0)
                        continue;
                    rte_mbuf* ref = mb[next++];
                    rte_pktmbuf_attach(ref, cp.seg); // holds a reference on the source buffer
                    ref->data_off = static_cast<uint16_t>(ref->data_off + cp.off);
                    ref->data_len = static_cast<uint16_t>(c);
                    link(ref);
                    left -= c;
                }
            } else {
                rte_mbuf* ref = mb[next++];
                auto* addr = const_cast<uint8_t*>(msg.bytes.data() + off);
                rte_mbuf_ext_refcnt_update(msg.shinfo, 1);
                rte_pktmbuf_attach_extbuf(ref, addr, msg.iova != RTE_BAD_IOVA ? msg.iova + off : rte_mem_virt2iova(addr),
                                          static_cast<uint16_t>(len), msg.shinfo);
                ref->data_len = static_cast<uint16_t>(len);
                link(ref);
            }
            // The trailer cannot be appended to memory the sender does not
            // own: it gets a fresh, writable final segment.
            if (last)
                link(mb[next++]);
        }

        uint32_t pkt_len = flow.overhead() + len;
        const WireTrailer* trailer = nullptr;
        if (last) {
            auto* t = rte_pktmbuf_mtod_offset(seg, WireTrailer*, seg->data_len);
            encode(trailer_for(msg, flow), t);
            trailer = t;
            seg->data_len = static_cast<uint16_t>(seg->data_len + kTrailerLen);
            pkt_len += kTrailerLen;
        }
        sign_data(flow, p + kEthLen + kIpLen + kUdpLen, trailer, head, flow.overhead(), len);
        seg->next = nullptr;
        head->nb_segs = static_cast<uint16_t>(segs[i]);
        head->pkt_len = pkt_len;
        head->l2_len = kEthLen;
        head->l3_len = kIpLen;
        if (udp_checksum_)
            fill_udp_checksum(head, rte_pktmbuf_mtod_offset(head, rte_ipv4_hdr*, kEthLen), udp, udp_offload_);
        out[i] = head;
    }
    return static_cast<int>(n);
}

} // namespace tailmark
