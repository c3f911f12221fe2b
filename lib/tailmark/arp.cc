#include "tailmark/arp.h"

#include <cstring>

#include <rte_arp.h>
#include <rte_byteorder.h>

namespace tailmark {

namespace {

struct alignas(2) ArpFrame { // both members are 2-aligned: no padding, no packing needed
    rte_ether_hdr eth;
    rte_arp_hdr arp;
};
static_assert(sizeof(ArpFrame) == kArpFrameLen);
static_assert(kArpMinFrame == 60);

// One zeroed 60-byte frame with the Ethernet header and the fixed ARP fields.
rte_mbuf* new_frame(rte_mempool* pool, const rte_ether_addr& dst, const rte_ether_addr& src,
                    uint16_t op, ArpFrame*& f) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr)
        return nullptr;
    char* p = rte_pktmbuf_append(m, kArpMinFrame);
    if (p == nullptr) { // a pool whose data room is under 60 bytes
        rte_pktmbuf_free(m);
        return nullptr;
    }
    memset(p, 0, kArpMinFrame); // the padding must not carry a previous packet's bytes
    f = reinterpret_cast<ArpFrame*>(p);
    f->eth.dst_addr = dst;
    f->eth.src_addr = src;
    f->eth.ether_type = RTE_BE16(RTE_ETHER_TYPE_ARP);
    f->arp.arp_hardware = RTE_BE16(RTE_ARP_HRD_ETHER);
    f->arp.arp_protocol = RTE_BE16(RTE_ETHER_TYPE_IPV4);
    f->arp.arp_hlen = RTE_ETHER_ADDR_LEN;
    f->arp.arp_plen = 4;
    f->arp.arp_opcode = rte_cpu_to_be_16(op);
    m->l2_len = sizeof(rte_ether_hdr);
    return m;
}

constexpr rte_ether_addr kBroadcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

} // namespace

ArpVerdict parse_arp(const rte_mbuf* m, ArpInfo& out) {
    const uint32_t pkt_len = rte_pktmbuf_pkt_len(m);
    if (pkt_len < sizeof(rte_ether_hdr))
        return ArpVerdict::NotArp;
    ArpFrame copy;
    const uint32_t have = pkt_len < kArpFrameLen ? pkt_len : kArpFrameLen;
    auto* f = static_cast<const ArpFrame*>(rte_pktmbuf_read(m, 0, have, &copy));
    if (f == nullptr) // a chain shorter than its pkt_len says
        return ArpVerdict::Malformed;
    // A tagged frame has its TPID (0x8100, 0x88a8, ...) here, so the ethertype
    // test alone refuses it; a tag the NIC stripped shows only in ol_flags.
    if (f->eth.ether_type != RTE_BE16(RTE_ETHER_TYPE_ARP) ||
        (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED))
        return ArpVerdict::NotArp;
    if (have < kArpFrameLen)
        return ArpVerdict::Malformed;

    const rte_arp_hdr& a = f->arp;
    if (a.arp_hardware != RTE_BE16(RTE_ARP_HRD_ETHER) ||
        a.arp_protocol != RTE_BE16(RTE_ETHER_TYPE_IPV4) || a.arp_hlen != RTE_ETHER_ADDR_LEN ||
        a.arp_plen != 4)
        return ArpVerdict::Malformed;
    const uint16_t op = rte_be_to_cpu_16(a.arp_opcode);
    if (op != kArpOpRequest && op != kArpOpReply)
        return ArpVerdict::Malformed;

    out.op = op;
    out.sha = a.arp_data.arp_sha;
    out.tha = a.arp_data.arp_tha;
    out.spa = rte_be_to_cpu_32(a.arp_data.arp_sip);
    out.tpa = rte_be_to_cpu_32(a.arp_data.arp_tip);
    return op == kArpOpRequest ? ArpVerdict::Request : ArpVerdict::Reply;
}

ArpVerdict parse_arp(const rte_mbuf* m, ArpInfo& out, uint32_t my_ip) {
    const ArpVerdict v = parse_arp(m, out);
    if (v != ArpVerdict::Request)
        return v;
    // A reply goes to sha: never to a multicast or zero MAC (a forged request
    // must not make us flood the segment).
    if (my_ip == 0 || out.tpa != my_ip || !arp_unicast_mac(out.sha))
        return ArpVerdict::NotForUs;
    return ArpVerdict::Request;
}

rte_mbuf* build_arp_request(rte_mempool* pool, const rte_ether_addr& my_mac, uint32_t my_ip,
                            uint32_t target_ip) {
    ArpFrame* f;
    rte_mbuf* m = new_frame(pool, kBroadcast, my_mac, kArpOpRequest, f);
    if (m == nullptr)
        return nullptr;
    f->arp.arp_data.arp_sha = my_mac;
    f->arp.arp_data.arp_sip = rte_cpu_to_be_32(my_ip);
    // arp_tha stays zero: unknown, which is what is being asked.
    f->arp.arp_data.arp_tip = rte_cpu_to_be_32(target_ip);
    return m;
}

rte_mbuf* build_arp_reply(rte_mempool* pool, const rte_ether_addr& my_mac, uint32_t my_ip,
                          const ArpInfo& request) {
    ArpFrame* f;
    rte_mbuf* m = new_frame(pool, request.sha, my_mac, kArpOpReply, f);
    if (m == nullptr)
        return nullptr;
    f->arp.arp_data.arp_sha = my_mac;
    f->arp.arp_data.arp_sip = rte_cpu_to_be_32(my_ip);
    f->arp.arp_data.arp_tha = request.sha;
    f->arp.arp_data.arp_tip = rte_cpu_to_be_32(request.spa); // 0.0.0.0 for a probe, as Linux does
    return m;
}

rte_mbuf* build_gratuitous_arp(rte_mempool* pool, const rte_ether_addr& my_mac, uint32_t my_ip) {
    return build_arp_request(pool, my_mac, my_ip, my_ip);
}

// ---- ArpResolver ----

ArpResolver::Entry* ArpResolver::find(uint32_t ip) {
    for (Entry& x : e_)
        if (x.state != State::Free && x.ip == ip)
            return &x;
    return nullptr;
}

const ArpResolver::Entry* ArpResolver::find(uint32_t ip) const {
    for (const Entry& x : e_)
        if (x.state != State::Free && x.ip == ip)
            return &x;
    return nullptr;
}

bool ArpResolver::want(uint32_t ip, uint64_t now_tsc) {
    if (ip == 0)
        return false;
    Entry* x = find(ip);
    if (x != nullptr) {
        if (!x->wanted || x->state == State::Failed || x->disputed)
            x->since = now_tsc;
        x->wanted = true;
        if (x->state == State::Failed || x->disputed) { // resolved afresh
            x->state = State::Pending;
            x->attempts = 0;
            x->disputed = false;
        }
        return true;
    }
    // A free entry, else one that was only learned (nobody asked for it).
    Entry* slot = nullptr;
    for (Entry& y : e_)
        if (y.state == State::Free) {
            slot = &y;
            break;
        }
    if (slot == nullptr)
        for (Entry& y : e_)
            if (!y.wanted) {
                slot = &y;
                break;
            }
    if (slot == nullptr)
        return false;
    *slot = Entry{};
    slot->ip = ip;
    slot->state = State::Pending;
    slot->wanted = true;
    slot->since = now_tsc;
    return true;
}

void ArpResolver::forget(uint32_t ip) {
    if (Entry* x = find(ip))
        *x = Entry{};
}

bool ArpResolver::lookup(uint32_t ip, rte_ether_addr& mac) const {
    const Entry* x = find(ip);
    if (x == nullptr || x->state != State::Resolved || x->disputed)
        return false;
    mac = x->mac;
    return true;
}

bool ArpResolver::failed(uint32_t ip) const {
    const Entry* x = find(ip);
    return x != nullptr && x->state == State::Failed;
}

uint32_t ArpResolver::attempts(uint32_t ip) const {
    const Entry* x = find(ip);
    return x == nullptr ? 0 : x->attempts;
}

uint64_t ArpResolver::since(uint32_t ip) const {
    const Entry* x = find(ip);
    return x == nullptr ? 0 : x->since;
}

ArpResolver::Learn ArpResolver::on_packet(const ArpInfo& a, uint32_t my_ip) {
    // spa 0: a probe (RFC 5227) binds no address. spa == my_ip: someone else
    // claims our address; that is a conflict to report, not a neighbour.
    if (a.spa == 0 || a.spa == my_ip || !arp_unicast_mac(a.sha))
        return Learn::Nothing;
    if (a.op != kArpOpRequest && a.op != kArpOpReply)
        return Learn::Nothing;
    const bool to_us = my_ip != 0 && a.tpa == my_ip;
    Entry* x = find(a.spa);
    if (x == nullptr) {
        if (!to_us)
            return Learn::Nothing;
        for (Entry& y : e_)
            if (y.state == State::Free) {
                x = &y;
                break;
            }
        if (x == nullptr) // full: learning is an optimisation, never evicts
            return Learn::Nothing;
        *x = Entry{};
        x->ip = a.spa;
        x->mac = a.sha;
        x->state = State::Resolved;
        return Learn::Learned;
    }
    if (x->state == State::Pending || x->state == State::Failed) {
        if (a.op != kArpOpReply || !to_us) // only the answer to a request of ours resolves it
            return Learn::Nothing;
        x->mac = a.sha;
        x->state = State::Resolved;
        x->disputed = false;
        return Learn::Learned;
    }
    if (rte_is_same_ether_addr(&x->mac, &a.sha))
        return Learn::Nothing;
    const bool again = x->disputed;
    x->disputed = true;
    return again ? Learn::RefusedAgain : Learn::Refused;
}

} // namespace tailmark
