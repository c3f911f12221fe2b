#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <rte_ip.h>

#include "fixtures.h"
#include "tailmark/arp.h"

using namespace tailmark;

namespace {

const rte_ether_addr kMyMac = {{0x02, 0, 0, 0, 0, 1}};
const rte_ether_addr kPeerMac = {{0x02, 0, 0, 0, 0, 2}};
const rte_ether_addr kOtherMac = {{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}};
const uint32_t kMyIp = RTE_IPV4(198, 18, 0, 1);
const uint32_t kPeerIp = RTE_IPV4(198, 18, 0, 2);
const uint32_t kOtherIp = RTE_IPV4(198, 18, 0, 9);

bool mac_eq(const rte_ether_addr& a, const rte_ether_addr& b) {
    return rte_is_same_ether_addr(&a, &b);
}

// Frame offsets (Ethernet 14 + ARP 28).
constexpr size_t kHtype = 14, kPtype = 16, kHlen = 18, kPlen = 19, kOp = 20, kSha = 22, kSpa = 28,
                 kTha = 32, kTpa = 38;

// An ARP frame written out byte by byte, independently of arp.cc.
std::vector<uint8_t> arp_bytes(const rte_ether_addr& dst, const rte_ether_addr& src, uint16_t op,
                               const rte_ether_addr& sha, uint32_t spa, const rte_ether_addr& tha,
                               uint32_t tpa, size_t len = 60) {
    std::vector<uint8_t> f(len, 0);
    auto mac = [&](size_t at, const rte_ether_addr& a) { memcpy(&f[at], a.addr_bytes, 6); };
    auto be32 = [&](size_t at, uint32_t v) {
        f[at] = uint8_t(v >> 24), f[at + 1] = uint8_t(v >> 16), f[at + 2] = uint8_t(v >> 8),
        f[at + 3] = uint8_t(v);
    };
    mac(0, dst);
    mac(6, src);
    f[12] = 0x08, f[13] = 0x06;
    f[kHtype] = 0x00, f[kHtype + 1] = 0x01;
    f[kPtype] = 0x08, f[kPtype + 1] = 0x00;
    f[kHlen] = 6;
    f[kPlen] = 4;
    f[kOp] = uint8_t(op >> 8), f[kOp + 1] = uint8_t(op);
    mac(kSha, sha);
    be32(kSpa, spa);
    mac(kTha, tha);
    be32(kTpa, tpa);
    return f;
}

const rte_ether_addr kBcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
const rte_ether_addr kZero = {{0, 0, 0, 0, 0, 0}};

// A chained packet of `bytes`, cut at the given offsets (ascending).
rte_mbuf* chain_of(rte_mempool* mp, const std::vector<uint8_t>& bytes, std::vector<size_t> cuts) {
    cuts.push_back(bytes.size());
    rte_mbuf* head = nullptr;
    size_t from = 0;
    for (size_t to : cuts) {
        rte_mbuf* seg =
            tmtest::mbuf_of(mp, std::vector<uint8_t>(bytes.begin() + from, bytes.begin() + to));
        if (head == nullptr)
            head = seg;
        else
            REQUIRE(rte_pktmbuf_chain(head, seg) == 0);
        from = to;
    }
    return head;
}

ArpVerdict parse_bytes(rte_mempool* mp, const std::vector<uint8_t>& f, ArpInfo& out,
                       uint32_t my_ip = 0) {
    rte_mbuf* m = tmtest::mbuf_of(mp, f);
    ArpVerdict v = my_ip ? parse_arp(m, out, my_ip) : parse_arp(m, out);
    rte_pktmbuf_free(m);
    return v;
}

} // namespace

TEST_CASE("arp: request is built byte-exact and parses back", "[arp]") {
    tmtest::Pool pool(255);
    const unsigned before = pool.avail();
    rte_mbuf* m = build_arp_request(pool.mp, kMyMac, kMyIp, kPeerIp);
    REQUIRE(m != nullptr);
    CHECK(m->nb_segs == 1);
    CHECK(rte_pktmbuf_pkt_len(m) == 60);
    CHECK(tmtest::flat(m) == arp_bytes(kBcast, kMyMac, 1, kMyMac, kMyIp, kZero, kPeerIp));

    ArpInfo a;
    REQUIRE(parse_arp(m, a) == ArpVerdict::Request);
    CHECK(a.op == kArpOpRequest);
    CHECK(mac_eq(a.sha, kMyMac));
    CHECK(mac_eq(a.tha, kZero));
    CHECK(a.spa == kMyIp);
    CHECK(a.tpa == kPeerIp);
    // At the peer: a request for its address. At us (or anyone else): not ours to answer.
    CHECK(parse_arp(m, a, kPeerIp) == ArpVerdict::Request);
    CHECK(parse_arp(m, a, kMyIp) == ArpVerdict::NotForUs);
    CHECK(parse_arp(m, a, kOtherIp) == ArpVerdict::NotForUs);
    rte_pktmbuf_free(m);
    CHECK(pool.avail() == before);
}

TEST_CASE("arp: a request for my IP gets a unicast reply, byte-exact", "[arp]") {
    tmtest::Pool pool(255);
    const unsigned before = pool.avail();
    // The peer asks who has kMyIp.
    rte_mbuf* req = build_arp_request(pool.mp, kPeerMac, kPeerIp, kMyIp);
    REQUIRE(req != nullptr);
    ArpInfo q;
    REQUIRE(parse_arp(req, q, kMyIp) == ArpVerdict::Request);
    rte_pktmbuf_free(req);

    rte_mbuf* rep = build_arp_reply(pool.mp, kMyMac, kMyIp, q);
    REQUIRE(rep != nullptr);
    CHECK(rte_pktmbuf_pkt_len(rep) == 60);
    CHECK(tmtest::flat(rep) == arp_bytes(kPeerMac, kMyMac, 2, kMyMac, kMyIp, kPeerMac, kPeerIp));

    ArpInfo r;
    REQUIRE(parse_arp(rep, r) == ArpVerdict::Reply);
    CHECK(r.op == kArpOpReply);
    CHECK(mac_eq(r.sha, kMyMac));
    CHECK(mac_eq(r.tha, kPeerMac));
    CHECK(r.spa == kMyIp);
    CHECK(r.tpa == kPeerIp);
    CHECK(parse_arp(rep, r, kPeerIp) == ArpVerdict::Reply); // replies are never NotForUs
    CHECK(parse_arp(rep, r, kOtherIp) == ArpVerdict::Reply);

    // The peer's resolver, which asked, learns us from the reply.
    ArpResolver peer;
    REQUIRE(peer.want(kMyIp, 0));
    peer.on_packet(r, kPeerIp);
    rte_ether_addr got;
    REQUIRE(peer.lookup(kMyIp, got));
    CHECK(mac_eq(got, kMyMac));
    rte_pktmbuf_free(rep);
    CHECK(pool.avail() == before);
}

TEST_CASE("arp: a request for another IP is NotForUs and gets no reply", "[arp]") {
    tmtest::Pool pool(63);
    // The integration's rx path, in miniature: answer Request, nothing else.
    auto answer = [&](const std::vector<uint8_t>& frame) -> rte_mbuf* {
        ArpInfo a;
        return parse_bytes(pool.mp, frame, a, kMyIp) == ArpVerdict::Request
                   ? build_arp_reply(pool.mp, kMyMac, kMyIp, a)
                   : nullptr;
    };
    rte_mbuf* r = answer(arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, kOtherIp));
    CHECK(r == nullptr);
    // A request for us from a multicast, broadcast or zero sender MAC: no reply
    // (it would go to a group address).
    const rte_ether_addr mcast = {{0x01, 0x00, 0x5e, 0, 0, 1}};
    for (const rte_ether_addr& bad : {mcast, kBcast, kZero}) {
        ArpInfo a;
        const auto f = arp_bytes(kBcast, kPeerMac, 1, bad, kPeerIp, kZero, kMyIp);
        CHECK(parse_bytes(pool.mp, f, a, kMyIp) == ArpVerdict::NotForUs);
        CHECK(parse_bytes(pool.mp, f, a) == ArpVerdict::Request); // well-formed all the same
    }
    // With no address of our own, nothing is for us.
    {
        ArpInfo a;
        const auto f = arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, 0);
        rte_mbuf* m = tmtest::mbuf_of(pool.mp, f);
        CHECK(parse_arp(m, a, uint32_t{0}) == ArpVerdict::NotForUs);
        rte_pktmbuf_free(m);
    }
    // And the control: the same request for kMyIp is answered.
    r = answer(arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, kMyIp));
    REQUIRE(r != nullptr);
    rte_pktmbuf_free(r);
    CHECK(pool.avail() == 63);
}

TEST_CASE("arp: an RFC 5227 probe for my IP is answered; nothing is learned from it", "[arp]") {
    tmtest::Pool pool(63);
    // Probe: sender IP 0.0.0.0, target my IP, tha zero, broadcast.
    const auto probe = arp_bytes(kBcast, kOtherMac, 1, kOtherMac, 0, kZero, kMyIp);
    ArpInfo a;
    REQUIRE(parse_bytes(pool.mp, probe, a, kMyIp) == ArpVerdict::Request);
    CHECK(a.spa == 0);
    rte_mbuf* r = build_arp_reply(pool.mp, kMyMac, kMyIp, a);
    REQUIRE(r != nullptr);
    // Unicast to the prober's MAC; tpa is the probe's sender IP, 0.0.0.0 (as Linux answers).
    CHECK(tmtest::flat(r) == arp_bytes(kOtherMac, kMyMac, 2, kMyMac, kMyIp, kOtherMac, 0));
    rte_pktmbuf_free(r);

    ArpResolver res;
    res.on_packet(a, kMyIp);
    rte_ether_addr got;
    CHECK_FALSE(res.lookup(0, got));
    // Nothing was added: 64 wants still fit.
    for (uint32_t i = 0; i < ArpResolver::kEntries; i++)
        REQUIRE(res.want(RTE_IPV4(10, 0, 0, 1 + i), 0));
    CHECK_FALSE(res.want(RTE_IPV4(10, 0, 1, 1), 0));
    // A probe for someone else is not answered.
    const auto other = arp_bytes(kBcast, kOtherMac, 1, kOtherMac, 0, kZero, kPeerIp);
    CHECK(parse_bytes(pool.mp, other, a, kMyIp) == ArpVerdict::NotForUs);
    CHECK(pool.avail() == 63);
}

TEST_CASE("arp: gratuitous ARP (announcement)", "[arp]") {
    tmtest::Pool pool(63);
    rte_mbuf* g = build_gratuitous_arp(pool.mp, kPeerMac, kPeerIp);
    REQUIRE(g != nullptr);
    CHECK(tmtest::flat(g) == arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, kPeerIp));
    ArpInfo a;
    REQUIRE(parse_arp(g, a) == ArpVerdict::Request);
    CHECK(a.spa == kPeerIp);
    CHECK(a.tpa == kPeerIp);
    CHECK(parse_arp(g, a, kMyIp) == ArpVerdict::NotForUs); // not a question for us
    rte_pktmbuf_free(g);

    // We had the peer at an old MAC: the announcement does not move it (ARP
    // is not authenticated: issue 35). The claim is refused and reported
    // (once: Refused, then RefusedAgain), the entry no longer looked up, and
    // the next want() resolves it afresh: the first reply to us wins.
    ArpResolver res;
    REQUIRE(res.want(kPeerIp, 0));
    ArpInfo old = a;
    old.op = kArpOpReply;
    old.sha = kOtherMac;
    old.tpa = kMyIp;
    CHECK(res.on_packet(old, kMyIp) == ArpResolver::Learn::Learned);
    rte_ether_addr got;
    REQUIRE(res.lookup(kPeerIp, got));
    CHECK(mac_eq(got, kOtherMac));
    CHECK(res.on_packet(old, kMyIp) == ArpResolver::Learn::Nothing); // the same MAC again
    CHECK(res.on_packet(a, kMyIp) == ArpResolver::Learn::Refused);
    CHECK(res.on_packet(a, kMyIp) == ArpResolver::Learn::RefusedAgain);
    CHECK_FALSE(res.lookup(kPeerIp, got));
    REQUIRE(res.want(kPeerIp, 10));
    int sent = 0;
    res.poll(10, 1000, [&](uint32_t ip) { sent += ip == kPeerIp; });
    CHECK(sent == 1);
    CHECK(res.on_packet(a, kMyIp) == ArpResolver::Learn::Nothing); // an announcement answers no request
    ArpInfo reply = a;
    reply.op = kArpOpReply;
    reply.tpa = kMyIp;
    CHECK(res.on_packet(reply, kMyIp) == ArpResolver::Learn::Learned);
    REQUIRE(res.lookup(kPeerIp, got));
    CHECK(mac_eq(got, kPeerMac));

    // A resolver that never heard of the peer does not add it: the target is not us.
    ArpResolver fresh;
    fresh.on_packet(a, kMyIp);
    CHECK_FALSE(fresh.lookup(kPeerIp, got));
    CHECK(pool.avail() == 63);
}

TEST_CASE("arp: every malformed field is rejected", "[arp]") {
    tmtest::Pool pool(255);
    const auto good = arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, kMyIp);
    ArpInfo a;
    REQUIRE(parse_bytes(pool.mp, good, a) == ArpVerdict::Request);

    struct Mut {
        const char* what;
        size_t at;
        std::vector<uint8_t> val;
    };
    const Mut muts[] = {
        {"htype 0", kHtype, {0, 0}},
        {"htype 6 (IEEE 802)", kHtype, {0, 6}},
        {"htype 0x0100", kHtype, {1, 0}},
        {"ptype IPv6", kPtype, {0x86, 0xdd}},
        {"ptype ARP", kPtype, {0x08, 0x06}},
        {"ptype 0", kPtype, {0, 0}},
        {"ptype 0x0008", kPtype, {0, 8}},
        {"hlen 0", kHlen, {0}},
        {"hlen 5", kHlen, {5}},
        {"hlen 7", kHlen, {7}},
        {"hlen 16", kHlen, {16}},
        {"plen 0", kPlen, {0}},
        {"plen 3", kPlen, {3}},
        {"plen 5", kPlen, {5}},
        {"plen 16", kPlen, {16}},
        {"op 0", kOp, {0, 0}},
        {"op 3 (RARP request)", kOp, {0, 3}},
        {"op 4 (RARP reply)", kOp, {0, 4}},
        {"op 8 (InARP)", kOp, {0, 8}},
        {"op 0x0100", kOp, {1, 0}},
        {"op 0x0102", kOp, {1, 2}},
        {"op 0xffff", kOp, {0xff, 0xff}},
    };
    for (const Mut& mu : muts) {
        auto f = good;
        std::copy(mu.val.begin(), mu.val.end(), f.begin() + mu.at);
        INFO(mu.what);
        CHECK(parse_bytes(pool.mp, f, a) == ArpVerdict::Malformed);
        CHECK(parse_bytes(pool.mp, f, a, kMyIp) == ArpVerdict::Malformed);
    }
    // Every op byte value other than 1 and 2.
    for (unsigned op = 0; op < 0x10000; op += (op < 256 ? 1 : 257)) {
        auto f = good;
        f[kOp] = uint8_t(op >> 8), f[kOp + 1] = uint8_t(op);
        INFO("op " << op);
        const ArpVerdict want = op == 1   ? ArpVerdict::Request
                                : op == 2 ? ArpVerdict::Reply
                                          : ArpVerdict::Malformed;
        REQUIRE(parse_bytes(pool.mp, f, a) == want);
    }
    CHECK(pool.avail() == 255);
}

TEST_CASE("arp: truncation at every length below the minimum; never reads past pkt_len", "[arp]") {
    tmtest::Pool pool(255);
    const auto good = arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, kMyIp);
    ArpInfo a;
    for (size_t len = 0; len < kArpFrameLen; len++) {
        INFO("len " << len);
        const ArpVerdict want = len < 14 ? ArpVerdict::NotArp : ArpVerdict::Malformed;
        // A short buffer.
        CHECK(parse_bytes(pool.mp, {good.begin(), good.begin() + long(len)}, a) == want);
        // The whole frame in the buffer, pkt_len cut: the bytes past it are there but not ours.
        rte_mbuf* m = tmtest::mbuf_of(pool.mp, good);
        REQUIRE(rte_pktmbuf_trim(m, uint16_t(good.size() - len)) == 0);
        CHECK(parse_arp(m, a) == want);
        CHECK(parse_arp(m, a, kMyIp) == want);
        rte_pktmbuf_free(m);
        // Chained, cut in two.
        if (len >= 2) {
            rte_mbuf* c = chain_of(pool.mp, {good.begin(), good.begin() + long(len)}, {len / 2});
            CHECK(parse_arp(c, a) == want);
            rte_pktmbuf_free(c);
        }
    }
    // 42 bytes (no padding; a software sender may not pad) is enough, and
    // trailing bytes past the body (padding, an FCS) are ignored.
    CHECK(parse_bytes(pool.mp, {good.begin(), good.begin() + kArpFrameLen}, a) ==
          ArpVerdict::Request);
    auto longer = good;
    longer.resize(128, 0xee);
    CHECK(parse_bytes(pool.mp, longer, a) == ArpVerdict::Request);
    CHECK(pool.avail() == 255);
}

TEST_CASE("arp: chained mbufs parse at every split point", "[arp]") {
    tmtest::Pool pool(255);
    const auto good = arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, kMyIp);
    for (size_t cut = 1; cut < good.size(); cut++) {
        for (size_t cut2 : {size_t{0}, cut + 1, cut + 7}) {
            std::vector<size_t> cuts{cut};
            if (cut2 > cut && cut2 < good.size())
                cuts.push_back(cut2);
            rte_mbuf* m = chain_of(pool.mp, good, cuts);
            INFO("cuts " << cut << " " << cut2);
            ArpInfo a;
            REQUIRE(parse_arp(m, a, kMyIp) == ArpVerdict::Request);
            CHECK(mac_eq(a.sha, kPeerMac));
            CHECK(a.spa == kPeerIp);
            CHECK(a.tpa == kMyIp);
            rte_pktmbuf_free(m);
        }
    }
    CHECK(pool.avail() == 255);
}

TEST_CASE("arp: other ethertypes and VLAN-tagged frames are not ARP", "[arp]") {
    tmtest::Pool pool(63);
    const auto good = arp_bytes(kBcast, kPeerMac, 1, kPeerMac, kPeerIp, kZero, kMyIp);
    ArpInfo a;
    for (uint16_t et : {0x0800, 0x86dd, 0x8035 /* RARP */, 0x0000, 0x0608}) {
        auto f = good;
        f[12] = uint8_t(et >> 8), f[13] = uint8_t(et);
        INFO("ethertype " << et);
        CHECK(parse_bytes(pool.mp, f, a) == ArpVerdict::NotArp);
    }
    // An ARP body behind an 802.1Q, 802.1ad or old QinQ tag.
    for (uint16_t tpid : {0x8100, 0x88a8, 0x9100}) {
        std::vector<uint8_t> f(good.begin(), good.begin() + 12);
        f.insert(f.end(), {uint8_t(tpid >> 8), uint8_t(tpid), 0x00, 0x05, 0x08, 0x06});
        f.insert(f.end(), good.begin() + 14, good.end());
        INFO("tpid " << tpid);
        CHECK(parse_bytes(pool.mp, f, a) == ArpVerdict::NotArp);
    }
    // A tag the NIC stripped: the frame looks untagged, the flag says otherwise.
    rte_mbuf* m = tmtest::mbuf_of(pool.mp, good);
    REQUIRE(parse_arp(m, a) == ArpVerdict::Request);
    m->ol_flags |= RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_VLAN;
    m->vlan_tci = 5;
    CHECK(parse_arp(m, a) == ArpVerdict::NotArp);
    CHECK(parse_arp(m, a, kMyIp) == ArpVerdict::NotArp);
    rte_pktmbuf_free(m);
    CHECK(pool.avail() == 63);
}

TEST_CASE("arp: builders return nullptr and leak nothing when the pool is empty", "[arp]") {
    tmtest::Pool pool(63); // no per-lcore cache under 512: avail() is exact
    std::vector<rte_mbuf*> held;
    while (rte_mbuf* m = rte_pktmbuf_alloc(pool.mp))
        held.push_back(m);
    REQUIRE(held.size() == 63);
    REQUIRE(pool.avail() == 0);
    ArpInfo q;
    q.op = kArpOpRequest;
    q.sha = kPeerMac;
    q.spa = kPeerIp;
    q.tpa = kMyIp;
    CHECK(build_arp_request(pool.mp, kMyMac, kMyIp, kPeerIp) == nullptr);
    CHECK(build_arp_reply(pool.mp, kMyMac, kMyIp, q) == nullptr);
    CHECK(build_gratuitous_arp(pool.mp, kMyMac, kMyIp) == nullptr);
    CHECK(pool.avail() == 0);
    // One back: one build succeeds, the next fails again.
    rte_pktmbuf_free(held.back());
    held.pop_back();
    rte_mbuf* m = build_arp_reply(pool.mp, kMyMac, kMyIp, q);
    REQUIRE(m != nullptr);
    CHECK(build_arp_request(pool.mp, kMyMac, kMyIp, kPeerIp) == nullptr);
    rte_pktmbuf_free(m);
    tmtest::free_all(held);
    CHECK(pool.avail() == 63);

    // A pool whose mbufs cannot hold 60 bytes: nullptr, and the mbuf goes back.
    tmtest::Pool tiny(31, RTE_PKTMBUF_HEADROOM + 40);
    REQUIRE(tiny.mp != nullptr);
    CHECK(build_arp_request(tiny.mp, kMyMac, kMyIp, kPeerIp) == nullptr);
    CHECK(build_gratuitous_arp(tiny.mp, kMyMac, kMyIp) == nullptr);
    CHECK(tiny.avail() == 31);
}

TEST_CASE("arp: the builders pad with zeros, not with a recycled buffer's bytes", "[arp]") {
    tmtest::Pool pool(1, RTE_MBUF_DEFAULT_BUF_SIZE);
    // Dirty the single mbuf's data room.
    rte_mbuf* d = tmtest::mbuf_of(pool.mp, std::vector<uint8_t>(200, 0xa5));
    rte_pktmbuf_free(d);
    rte_mbuf* m = build_arp_request(pool.mp, kMyMac, kMyIp, kPeerIp);
    REQUIRE(m != nullptr);
    CHECK(tmtest::flat(m) == arp_bytes(kBcast, kMyMac, 1, kMyMac, kMyIp, kZero, kPeerIp));
    rte_pktmbuf_free(m);
}

TEST_CASE("arp resolver: retry cadence and give-up at exact times", "[arp]") {
    ArpResolver res(3);
    const uint64_t R = 1000;
    std::vector<std::pair<uint64_t, uint32_t>> sent;
    uint64_t now = 0;
    auto poll = [&](uint64_t t) {
        now = t;
        return res.poll(t, R, [&](uint32_t ip) {
            sent.push_back({now, ip});
            return true;
        });
    };
    REQUIRE(res.want(kPeerIp, 100));
    CHECK(res.since(kPeerIp) == 100);
    CHECK(res.attempts(kPeerIp) == 0);
    CHECK(poll(100) == 0); // first request at once
    CHECK(poll(100) == 0); // not twice
    CHECK(poll(1099) == 0);
    CHECK(sent.size() == 1);
    CHECK(poll(1100) == 0); // retry_cycles after the previous send
    CHECK(poll(2099) == 0);
    CHECK(poll(2100) == 0);
    CHECK(res.attempts(kPeerIp) == 3);
    CHECK_FALSE(res.failed(kPeerIp));
    CHECK(poll(3099) == 0); // the last request still has its full interval
    CHECK_FALSE(res.failed(kPeerIp));
    CHECK(poll(3100) == 1); // gives up once
    CHECK(res.failed(kPeerIp));
    CHECK(res.attempts(kPeerIp) == 3);
    CHECK(poll(3100) == 0);
    CHECK(poll(1000000) == 0);
    const std::vector<std::pair<uint64_t, uint32_t>> want_sent = {
        {100, kPeerIp}, {1100, kPeerIp}, {2100, kPeerIp}};
    CHECK(sent == want_sent);
    rte_ether_addr got;
    CHECK_FALSE(res.lookup(kPeerIp, got));

    // A late answer still resolves it.
    ArpInfo r;
    r.op = kArpOpReply;
    r.sha = kPeerMac;
    r.spa = kPeerIp;
    r.tha = kMyMac;
    r.tpa = kMyIp;
    res.on_packet(r, kMyIp);
    CHECK_FALSE(res.failed(kPeerIp));
    REQUIRE(res.lookup(kPeerIp, got));
    CHECK(mac_eq(got, kPeerMac));
    CHECK(poll(2000000) == 0);
    CHECK(sent.size() == 3);

    // want() after a give-up starts over.
    ArpResolver res2(2);
    REQUIRE(res2.want(kOtherIp, 0));
    CHECK(res2.poll(0, R, [](uint32_t) {}) == 0); // void sender: always sent
    CHECK(res2.poll(R, R, [](uint32_t) {}) == 0);
    CHECK(res2.poll(2 * R, R, [](uint32_t) {}) == 1);
    REQUIRE(res2.failed(kOtherIp));
    REQUIRE(res2.want(kOtherIp, 5000));
    CHECK_FALSE(res2.failed(kOtherIp));
    CHECK(res2.attempts(kOtherIp) == 0);
    CHECK(res2.since(kOtherIp) == 5000);
    int n = 0;
    res2.poll(5000, R, [&](uint32_t) { n++; });
    CHECK(n == 1);
}

TEST_CASE("arp resolver: an unsent request costs no attempt", "[arp]") {
    ArpResolver res(2);
    REQUIRE(res.want(kPeerIp, 0));
    int tries = 0;
    auto fail = [&](uint32_t) {
        tries++;
        return false;
    };
    auto ok = [&](uint32_t) {
        tries++;
        return true;
    };
    CHECK(res.poll(0, 1000, fail) == 0);
    CHECK(res.poll(1, 1000, fail) == 0); // pool still empty: tried again at the next poll
    CHECK(tries == 2);
    CHECK(res.attempts(kPeerIp) == 0);
    CHECK(res.poll(2, 1000, ok) == 0);
    CHECK(res.attempts(kPeerIp) == 1);
    CHECK(res.poll(1001, 1000, ok) == 0); // due at 1002
    CHECK(tries == 3);
    CHECK(res.poll(1002, 1000, ok) == 0);
    CHECK(res.attempts(kPeerIp) == 2);
    CHECK(res.poll(2002, 1000, ok) == 1);
    CHECK(tries == 4);
}

TEST_CASE("arp resolver: several IPs keep their own cadence; TSC wrap", "[arp]") {
    ArpResolver res(2);
    const uint64_t R = 100;
    std::vector<uint32_t> got_ips;
    auto send = [&](uint32_t ip) {
        got_ips.push_back(ip);
        return true;
    };
    const uint64_t t0 = UINT64_MAX - 50; // the TSC wraps between the requests
    REQUIRE(res.want(kPeerIp, t0));
    res.poll(t0, R, send);
    REQUIRE(res.want(kOtherIp, t0 + 30));
    res.poll(t0 + 30, R, send);
    CHECK(got_ips == std::vector<uint32_t>{kPeerIp, kOtherIp});
    res.poll(t0 + 99, R, send);
    CHECK(got_ips.size() == 2);
    res.poll(t0 + 100, R, send); // wrapped: 49
    CHECK(got_ips == std::vector<uint32_t>{kPeerIp, kOtherIp, kPeerIp});
    // The peer answers; only the other one goes on.
    ArpInfo r;
    r.op = kArpOpReply;
    r.sha = kPeerMac;
    r.spa = kPeerIp;
    r.tpa = kMyIp;
    res.on_packet(r, kMyIp);
    res.poll(t0 + 130, R, send);
    CHECK(got_ips == std::vector<uint32_t>{kPeerIp, kOtherIp, kPeerIp, kOtherIp});
    CHECK(res.poll(t0 + 229, R, send) == 0);
    CHECK(res.poll(t0 + 230, R, send) == 1);
    CHECK(res.failed(kOtherIp));
    CHECK_FALSE(res.failed(kPeerIp));
    CHECK(got_ips.size() == 4);
}

TEST_CASE("arp resolver: learning from replies and requests", "[arp]") {
    ArpResolver res;
    rte_ether_addr got;
    auto pkt = [](uint16_t op, const rte_ether_addr& sha, uint32_t spa, uint32_t tpa) {
        ArpInfo a;
        a.op = op;
        a.sha = sha;
        a.spa = spa;
        a.tpa = tpa;
        return a;
    };
    // A request to us from an unknown sender: learned (it is about to talk to us).
    res.on_packet(pkt(kArpOpRequest, kPeerMac, kPeerIp, kMyIp), kMyIp);
    REQUIRE(res.lookup(kPeerIp, got));
    CHECK(mac_eq(got, kPeerMac));
    // want() of an IP already learned sends nothing.
    REQUIRE(res.want(kPeerIp, 0));
    int n = 0;
    res.poll(0, 10, [&](uint32_t) { n++; });
    CHECK(n == 0);
    // A request to someone else from an unknown sender: not learned.
    res.on_packet(pkt(kArpOpRequest, kOtherMac, kOtherIp, RTE_IPV4(198, 18, 0, 77)), kMyIp);
    CHECK_FALSE(res.lookup(kOtherIp, got));
    // ...and a known sender is not moved by one either, nor by a request to
    // us, nor by a reply nobody asked for: refused, its entry disputed.
    CHECK(res.on_packet(pkt(kArpOpRequest, kOtherMac, kPeerIp, RTE_IPV4(198, 18, 0, 77)), kMyIp) ==
          ArpResolver::Learn::Refused);
    CHECK(res.on_packet(pkt(kArpOpRequest, kOtherMac, kPeerIp, kMyIp), kMyIp) == ArpResolver::Learn::RefusedAgain);
    CHECK(res.on_packet(pkt(kArpOpReply, kOtherMac, kPeerIp, kMyIp), kMyIp) == ArpResolver::Learn::RefusedAgain);
    CHECK_FALSE(res.lookup(kPeerIp, got));
    // A reply to us from an IP nobody asked for: learned (RFC 826).
    res.on_packet(pkt(kArpOpReply, kOtherMac, kOtherIp, kMyIp), kMyIp);
    REQUIRE(res.lookup(kOtherIp, got));
    // A reply for a wanted IP: resolves it and stops its requests.
    const uint32_t ip3 = RTE_IPV4(198, 18, 0, 3);
    REQUIRE(res.want(ip3, 0));
    CHECK_FALSE(res.lookup(ip3, got));
    res.on_packet(pkt(kArpOpReply, kPeerMac, ip3, kMyIp), kMyIp);
    REQUIRE(res.lookup(ip3, got));
    CHECK(mac_eq(got, kPeerMac));
    n = 0;
    res.poll(1000, 10, [&](uint32_t) { n++; });
    CHECK(n == 0);

    // Never learned: a sender claiming my IP, multicast/zero sender MACs, spa 0.
    const uint32_t ip4 = RTE_IPV4(198, 18, 0, 4);
    REQUIRE(res.want(ip4, 0));
    const rte_ether_addr mcast = {{0x01, 0x00, 0x5e, 0, 0, 1}};
    res.on_packet(pkt(kArpOpReply, mcast, ip4, kMyIp), kMyIp);
    res.on_packet(pkt(kArpOpReply, kBcast, ip4, kMyIp), kMyIp);
    res.on_packet(pkt(kArpOpReply, kZero, ip4, kMyIp), kMyIp);
    CHECK_FALSE(res.lookup(ip4, got));
    res.on_packet(pkt(kArpOpReply, kOtherMac, kMyIp, kMyIp), kMyIp);
    CHECK_FALSE(res.lookup(kMyIp, got));
    res.on_packet(pkt(kArpOpRequest, kOtherMac, 0, kMyIp), kMyIp);
    CHECK_FALSE(res.lookup(0, got));
    // forget() drops an entry.
    res.forget(ip3);
    CHECK_FALSE(res.lookup(ip3, got));
    CHECK_FALSE(res.want(0, 0));
}

TEST_CASE("arp resolver: a fixed table; wanted entries displace learned ones", "[arp]") {
    ArpResolver res;
    rte_ether_addr got;
    // Fill the table with learned-only entries.
    for (uint32_t i = 0; i < ArpResolver::kEntries; i++) {
        ArpInfo a;
        a.op = kArpOpRequest;
        a.sha = kPeerMac;
        a.spa = RTE_IPV4(10, 1, 0, 1 + i);
        a.tpa = kMyIp;
        res.on_packet(a, kMyIp);
        REQUIRE(res.lookup(a.spa, got));
    }
    // A 65th learned one is dropped, not evicting anything.
    ArpInfo extra;
    extra.op = kArpOpRequest;
    extra.sha = kPeerMac;
    extra.spa = RTE_IPV4(10, 2, 0, 1);
    extra.tpa = kMyIp;
    res.on_packet(extra, kMyIp);
    CHECK_FALSE(res.lookup(extra.spa, got));
    // want() takes learned entries' places, up to a full table of wanted ones.
    for (uint32_t i = 0; i < ArpResolver::kEntries; i++)
        REQUIRE(res.want(RTE_IPV4(10, 3, 0, 1 + i), 0));
    CHECK_FALSE(res.want(RTE_IPV4(10, 4, 0, 1), 0));
    int n = 0;
    res.poll(0, 10, [&](uint32_t) { n++; });
    CHECK(n == int(ArpResolver::kEntries));
}

TEST_CASE("arp: verdict names", "[arp]") {
    const ArpVerdict all[] = {ArpVerdict::NotArp, ArpVerdict::Malformed, ArpVerdict::Request,
                              ArpVerdict::Reply, ArpVerdict::NotForUs};
    std::vector<std::string> names;
    for (ArpVerdict v : all)
        names.emplace_back(to_string(v));
    CHECK(names ==
          std::vector<std::string>{"not_arp", "malformed", "request", "reply", "not_for_us"});
}
