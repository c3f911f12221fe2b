// SessionTable (session.h): two or three tables wired together in memory.
// Every frame a table transmits lands in its outbox; the test carries it to
// the table whose receive MAC it names (a broadcast: to every other table),
// or drops, duplicates, holds, corrupts or replays it. Time is explicit:
// Config::hz = 1e9, so 1 us = 1000 cycles, and every poll is at a known TSC.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include <rte_ether.h>
#include <rte_ip.h>

#include "fixtures.h"
#include "tailmark/session.h"

using namespace tailmark;

namespace {

constexpr uint64_t kHz = 1'000'000'000;
constexpr uint64_t kUs = kHz / 1'000'000;
constexpr uint64_t kMs = 1000 * kUs;
constexpr uint64_t kSec = 1000 * kMs;
constexpr uint64_t T0 = 1000 * kSec; // far from 0: no deadline is "0 + x"

constexpr uint16_t kPort = 47474;
constexpr uint16_t kService = 4242;
const uint32_t kIpA = RTE_IPV4(198, 18, 0, 1);
const uint32_t kIpB = RTE_IPV4(198, 18, 0, 2);
const Endpoint kEpA{kIpA, kPort};
const Endpoint kEpB{kIpB, kPort};
const rte_ether_addr kMacA = {{0x02, 0, 0, 0, 0, 0x0a}};
const rte_ether_addr kMacB = {{0x02, 0, 0, 0, 0, 0x0b}};
const rte_ether_addr kMacL = {{0x02, 0, 0, 0, 0, 0x1c}}; // loopback: the receiving port
const rte_ether_addr kBcast = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
const SipKey kK{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
const SipKey kK2{0x0706050403020100ull, 0x0f0e0d0c0b0a0909ull}; // one bit off

constexpr uint16_t kBaseA = 10;  // the connector's flow ids
constexpr uint16_t kBaseB = 100; // the acceptor's

bool same(const rte_ether_addr& a, const rte_ether_addr& b) { return rte_is_same_ether_addr(&a, &b); }

// --- frames, read independently of control.cc --------------------------------

uint16_t be16(const std::vector<uint8_t>& b, size_t at) { return static_cast<uint16_t>(b.at(at) << 8 | b.at(at + 1)); }
uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
    return static_cast<uint32_t>(be16(b, at)) << 16 | be16(b, at + 2);
}
uint64_t be64(const std::vector<uint8_t>& b, size_t at) {
    return static_cast<uint64_t>(be32(b, at)) << 32 | be32(b, at + 4);
}

// Offsets in a frame: Ethernet 0, IPv4 14, UDP 34, tailmark header 42
// (flow at 44), SESSION body 58 (control.h): its number at +24, CONNECT's
// and ACCEPT's parameters from +32 (the cookie first).
constexpr size_t kB = kFrameOverhead;

struct Pkt {
    uint64_t at = 0; // the TSC it was sent at
    std::vector<uint8_t> bytes;

    rte_ether_addr dst() const { return mac_at(0); }
    rte_ether_addr src() const { return mac_at(6); }
    bool arp() const { return be16(bytes, 12) == RTE_ETHER_TYPE_ARP; }
    uint16_t arp_op() const { return be16(bytes, 20); }
    uint32_t arp_spa() const { return be32(bytes, 28); }
    uint32_t arp_tpa() const { return be32(bytes, 38); }
    bool session() const { return !arp() && bytes.size() >= kB + 32; }
    SessionType type() const { return static_cast<SessionType>(bytes.at(kB)); }
    uint8_t flags() const { return bytes.at(kB + 1); }
    uint16_t service() const { return be16(bytes, kB + 2); }
    uint16_t src_session() const { return be16(bytes, kB + 4); }
    uint16_t dst_session() const { return be16(bytes, 44); }
    uint32_t src_epoch() const { return be32(bytes, kB + 8); }
    uint32_t dst_epoch() const { return be32(bytes, kB + 12); }
    uint64_t nonce() const { return be64(bytes, kB + 16); }
    uint64_t seq() const { return be64(bytes, kB + 24); }
    // CONNECT, ACCEPT; RETRY (cookie)
    uint64_t cookie() const { return be64(bytes, kB + 32); }
    uint16_t nflows() const { return be16(bytes, kB + 40); }
    uint16_t flow_base() const { return be16(bytes, kB + 42); }
    uint32_t mtu() const { return be32(bytes, kB + 44); }
    uint32_t ring_size() const { return be32(bytes, kB + 48); }
    // REFUSE, RESET
    uint16_t reason() const { return be16(bytes, kB + 32); }
    uint16_t index() const { return be16(bytes, kB + 34); }
    uint64_t expected() const { return be64(bytes, kB + 40); }
    uint64_t got() const { return be64(bytes, kB + 48); }
    // The MAC: SipHash-2-4 over the tailmark header and the body before it.
    bool signed_with(const SipKey& k) const {
        const size_t end = bytes.size() - kMacLen;
        return siphash24(k, {bytes.data() + kEthLen + kIpLen + kUdpLen, end - (kEthLen + kIpLen + kUdpLen)}) ==
               be64(bytes, end);
    }
    bool is(SessionType t) const { return session() && type() == t; }
    bool is_ka(uint8_t f) const { return is(SessionType::Keepalive) && flags() == f; }

private:
    rte_ether_addr mac_at(size_t at) const {
        rte_ether_addr a;
        memcpy(a.addr_bytes, bytes.data() + at, 6);
        return a;
    }
};

// --- the network ------------------------------------------------------------

enum class Fate { Deliver, Drop, Duplicate, Hold };

struct Event {
    uint16_t id;
    SessionState state;
    SessionEnd end;
    uint64_t at;
};

struct Node;

struct Net {
    static constexpr unsigned kMbufs = 2047;
    tmtest::Pool pool{kMbufs};
    uint64_t now = T0;
    std::vector<Node*> nodes;
    std::function<Fate(const Node& from, const Pkt& p)> fate; // empty: deliver everything
    std::vector<Pkt> held;

    ~Net() { CHECK(pool.avail() == kMbufs); } // every frame was freed by someone
    void flush();
    void carry(Node& from, rte_mbuf* m, const Pkt& p);
    void poll();
    // Polls every `step` up to and including t.
    void run_to(uint64_t t, uint64_t step = kMs) {
        while (now + step <= t) {
            now += step;
            poll();
        }
        if (now < t) {
            now = t;
            poll();
        }
    }
    void at(uint64_t t) {
        now = t;
        poll();
    }
    void inject(Node& to, const std::vector<uint8_t>& bytes);
};

struct Node {
    Net& net;
    const char* name;
    SessionTable::Config cfg;
    std::deque<rte_mbuf*> out; // transmitted, not yet on the wire
    std::vector<Pkt> sent;     // everything it transmitted, in order
    std::vector<Event> events; // its notify callback's calls
    std::function<void(Session&)> also; // more work in the notify callback
    bool up = true;            // on the wire, and polled
    std::unique_ptr<SessionTable> t;

    Node(Net& n, const char* nm, const rte_ether_addr& mac, uint32_t ip,
         const std::function<void(SessionTable::Config&)>& tweak = {})
        : net(n), name(nm) {
        cfg.pool = n.pool.mp;
        cfg.mac = mac;
        cfg.rx_mac = mac;
        cfg.self = {ip, kPort};
        cfg.hz = kHz;
        if (tweak)
            tweak(cfg);
        t = std::make_unique<SessionTable>(
            cfg,
            [this](rte_mbuf* m) {
                sent.push_back(Pkt{net.now, tmtest::flat(m)});
                out.push_back(m);
                return true;
            },
            [this](Session& s) {
                events.push_back({s.id, s.state, s.end, net.now});
                if (also)
                    also(s);
            });
        net.nodes.push_back(this);
    }
    ~Node() {
        for (rte_mbuf* m : out)
            rte_pktmbuf_free(m);
        std::erase(net.nodes, this);
    }
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    size_t count(SessionType ty, int flags = -1) const {
        size_t n = 0;
        for (const Pkt& p : sent)
            n += p.is(ty) && (flags < 0 || p.flags() == flags);
        return n;
    }
    std::vector<Pkt> all(SessionType ty, int flags = -1) const {
        std::vector<Pkt> v;
        for (const Pkt& p : sent)
            if (p.is(ty) && (flags < 0 || p.flags() == flags))
                v.push_back(p);
        return v;
    }
    uint64_t drops(DropReason r) const { return t->counters().drops[index(r)]; }
    uint64_t drops_total() const {
        uint64_t n = 0;
        for (uint64_t d : t->counters().drops)
            n += d;
        return n;
    }
};

void Net::flush() {
    for (unsigned guard = 0;; guard++) {
        REQUIRE(guard < 100000); // two tables talking forever is a bug
        Node* from = nullptr;
        for (Node* n : nodes)
            if (!n->out.empty()) {
                from = n;
                break;
            }
        if (from == nullptr)
            return;
        rte_mbuf* m = from->out.front();
        from->out.pop_front();
        const Pkt p{now, tmtest::flat(m)};
        const Fate f = !from->up ? Fate::Drop : fate ? fate(*from, p) : Fate::Deliver;
        if (f == Fate::Drop || f == Fate::Hold) {
            if (f == Fate::Hold)
                held.push_back(p);
            rte_pktmbuf_free(m);
            continue;
        }
        carry(*from, m, p);
        if (f == Fate::Duplicate)
            carry(*from, tmtest::mbuf_of(pool.mp, p.bytes), p);
    }
}

// To every table on the wire whose receive MAC the frame names; a broadcast
// to every other one.
void Net::carry(Node& from, rte_mbuf* m, const Pkt& p) {
    std::vector<Node*> to;
    const bool bcast = same(p.dst(), kBcast);
    // A node receives at its port's MAC and at its rails' (one wire for all here).
    auto owns = [&](const Node& n) {
        bool any = same(n.cfg.rx_mac, p.dst());
        for (uint32_t i = 0; i < n.cfg.nrails; i++)
            any |= memcmp(n.cfg.rails[i].mac, p.dst().addr_bytes, 6) == 0;
        return any;
    };
    for (Node* n : nodes)
        if (n->up && (bcast ? n != &from : owns(*n)))
            to.push_back(n);
    if (to.empty()) {
        rte_pktmbuf_free(m);
        return;
    }
    for (size_t i = 1; i < to.size(); i++)
        to[i]->t->on_frame(tmtest::mbuf_of(pool.mp, p.bytes), now);
    to[0]->t->on_frame(m, now);
}

void Net::poll() {
    for (Node* n : std::vector<Node*>(nodes))
        if (n->up)
            n->t->poll(now);
    flush();
}

void Net::inject(Node& to, const std::vector<uint8_t>& bytes) {
    to.t->on_frame(tmtest::mbuf_of(pool.mp, bytes), now);
    flush();
}

// --- the application's side -------------------------------------------------

FlowParams proposal() {
    FlowParams p;
    p.nflows = 4;
    p.mtu = 9000;
    p.ring_size = 64;
    p.max_msg = 4096;
    p.key = 0xA1A1A1A1;
    return p;
}

// A listener's decide(): agrees to the proposal with its own MTU (the
// smaller wins) and its own keys, or does what the test sets.
struct Acceptor {
    uint32_t mtu = 1500;
    uint32_t key = 0xB2B2B2B2;
    std::vector<KeyOverride> overrides{{2, 0xC3C3C3C3}};
    bool defer = false;
    AcceptDecision refuse{};                      // reason != None: refuse with it
    std::function<void(FlowParams&)> bend;        // changes what is agreed
    int calls = 0;
    FlowParams proposed;
    Endpoint from;

    AcceptDecision operator()(Session& s, const FlowParams& p) {
        calls++;
        proposed = p;
        from = s.peer;
        if (refuse.reason != RefuseReason::None)
            return refuse;
        AcceptDecision d;
        d.agreed = p;
        d.agreed.mtu = std::min(p.mtu, mtu);
        if (!p.keys_given) {
            d.agreed.key = key;
            d.agreed.overrides = overrides;
        }
        if (bend)
            bend(d.agreed);
        d.local_base = kBaseB;
        d.defer = defer;
        return d;
    }
};

void listen(Node& n, Acceptor& acc, const SipKey& key = kK) {
    REQUIRE(n.t->listen(kService, key, [&acc](Session& s, const FlowParams& p) { return acc(s, p); }));
}

Session* connect(Node& a, const Endpoint& to = kEpB, const rte_ether_addr* mac = &kMacB,
                 const FlowParams& p = proposal()) {
    Session* s = a.t->connect(to, kService, kK, p, kBaseA, mac, a.net.now);
    REQUIRE(s != nullptr);
    return s;
}

// The acceptor's session for connector session `c`.
Session* accepted(Node& b, const Session& c) {
    Session* r = nullptr;
    for (Session* s : b.t->sessions())
        if (!s->connector && s->peer_id == c.id && s->peer_epoch == c.local_epoch && s->state != SessionState::Ended) {
            REQUIRE(r == nullptr);
            r = s;
        }
    return r;
}

struct Pair {
    Session* a;
    Session* b;
};
// A connects to B at net.now, everything delivered: up and confirmed.
Pair establish(Node& a, Node& b) {
    Session* sa = connect(a);
    a.net.flush();
    REQUIRE(sa->state == SessionState::Established);
    Session* sb = accepted(b, *sa);
    REQUIRE(sb != nullptr);
    REQUIRE(sb->state == SessionState::Established);
    REQUIRE(sb->confirmed);
    return {sa, sb};
}

// What a frame could change in a table.
struct Snap {
    uint16_t id;
    SessionState state;
    SessionEnd end;
    bool confirmed;
    uint16_t peer_id, peer_base, replaces;
    uint32_t peer_epoch, mtu, asks;
    uint64_t last_rx, next_tx, deadline;
    bool operator==(const Snap&) const = default;
};
std::vector<Snap> snap(SessionTable& t) {
    std::vector<Snap> v;
    for (Session* s : t.sessions())
        v.push_back({s->id, s->state, s->end, s->confirmed, s->peer_id, s->peer_base, s->replaces, s->peer_epoch,
                     s->params.mtu, s->asks, s->last_rx, s->next_tx, s->deadline});
    return v;
}

// A frame the test changed, signed again with `key`: what only a holder of
// the secret can make.
std::vector<uint8_t> resign(std::vector<uint8_t> f, const SipKey& key) {
    const size_t hdr = kEthLen + kIpLen + kUdpLen, end = f.size() - kMacLen;
    const uint64_t mac = siphash24(key, {f.data() + hdr, end - hdr});
    for (size_t i = 0; i < 8; i++)
        f[end + i] = static_cast<uint8_t>(mac >> (56 - 8 * i));
    return f;
}

// A SESSION packet built by the test (with the library's builder), along the
// template of `from`'s link: the forger knows the layout, not always the key.
std::vector<uint8_t> forge(Net& net, const Session& from, SessionType type, uint8_t flags, uint64_t nonce,
                           const SipKey& key = kK) {
    SessionMsg m;
    m.type = type;
    m.flags = flags;
    m.service = kService;
    m.src_session = from.id;
    m.src_epoch = from.local_epoch;
    m.dst_session = from.peer_id;
    m.dst_epoch = from.peer_epoch;
    m.nonce = nonce;
    static uint64_t seq = uint64_t(1) << 40; // numbers the table has not used: fresh to its peer
    m.seq = ++seq;
    if (type == SessionType::Reset)
        m.reason = RefuseReason::UnknownSession;
    REQUIRE(from.link != nullptr);
    rte_mbuf* b = build_session(net.pool.mp, from.link->l2l4, key, m);
    REQUIRE(b != nullptr);
    auto v = tmtest::flat(b);
    rte_pktmbuf_free(b);
    return v;
}

void check_link_template(const SessionLink& l, const rte_ether_addr& src_mac, const rte_ether_addr& dst_mac,
                         uint32_t src_ip, uint32_t dst_ip) {
    std::vector<uint8_t> t(l.l2l4, l.l2l4 + sizeof(l.l2l4));
    Pkt p{0, t};
    CHECK(same(p.dst(), dst_mac));
    CHECK(same(p.src(), src_mac));
    CHECK(be16(t, 12) == RTE_ETHER_TYPE_IPV4);
    CHECK(t[14] == 0x45);                         // IPv4, no options
    CHECK((be16(t, 20) & RTE_IPV4_HDR_DF_FLAG));  // DF
    CHECK(t[23] == IPPROTO_UDP);
    CHECK(be32(t, 26) == src_ip);
    CHECK(be32(t, 30) == dst_ip);
    CHECK(be16(t, 34) == kPort);
    CHECK(be16(t, 36) == kPort);
}

} // namespace

// 1 ---------------------------------------------------------------------------

TEST_CASE("handshake: exactly CONNECT, RETRY, CONNECT(cookie), ACCEPT, KEEPALIVE(confirm); both ends agree on "
          "everything", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    const bool defer = GENERATE(false, true);
    INFO("defer " << defer);
    acc.defer = defer;
    listen(b, acc);

    Session* sa = connect(a);
    CHECK(sa->state == SessionState::Connecting);
    CHECK(sa->connector);
    net.flush();
    REQUIRE(acc.calls == 1);
    CHECK(acc.proposed.nflows == 4);
    CHECK(acc.proposed.mtu == 9000);
    CHECK(acc.proposed.ring_size == 64);
    CHECK(acc.proposed.max_msg == 4096);
    CHECK(acc.proposed.key == 0xA1A1A1A1);
    CHECK_FALSE(acc.proposed.keys_given);
    CHECK(acc.from == kEpA);
    REQUIRE(b.t->sessions().size() == 1);
    Session* sb = b.t->sessions()[0];

    uint64_t up = T0;
    if (defer) {
        // Installing: nothing sent but the RETRY, nobody told; A's retry is absorbed.
        CHECK(sb->state == SessionState::Accepting);
        CHECK(sb->link != nullptr);
        CHECK(b.sent.size() == 1);
        CHECK(b.events.empty());
        net.run_to(T0 + 200 * kMs);
        CHECK(a.count(SessionType::Connect) == 3);
        CHECK(b.sent.size() == 1);
        CHECK(acc.calls == 1);
        CHECK(sa->state == SessionState::Connecting);
        up = T0 + 250 * kMs;
        net.now = up;
        b.t->accept_ready(sb, up);
        net.flush();
    }

    REQUIRE(sa->state == SessionState::Established);
    REQUIRE(sb->state == SessionState::Established);
    CHECK(sa->end == SessionEnd::None);
    CHECK(sb->end == SessionEnd::None);

    // The wire: a CONNECT, the RETRY with B's token, the CONNECT(s) echoing
    // it, one ACCEPT, one KEEPALIVE confirming it. Numbers: each end's 1, 2, ...
    const size_t connects = defer ? 3 : 2;
    REQUIRE(a.sent.size() == connects + 1);
    REQUIRE(b.sent.size() == 2);
    const Pkt& rt = b.sent[0];
    CHECK(rt.at == T0);
    CHECK(rt.is(SessionType::Retry));
    CHECK(same(rt.dst(), kMacA));
    CHECK(rt.src_session() == 0); // B keeps nothing for it: no session
    CHECK(rt.dst_session() == sa->id);
    CHECK(rt.dst_epoch() == sa->local_epoch);
    CHECK(rt.nonce() == sa->connect_nonce);
    CHECK(rt.cookie() != 0);
    CHECK(rt.signed_with(kK));
    CHECK(sa->cookie == rt.cookie());
    for (size_t i = 0; i < connects; i++) {
        const Pkt& c = a.sent[i];
        CHECK(c.at == (i < 2 ? T0 : T0 + 200 * kMs));
        CHECK(c.seq() == i + 1);
        CHECK(c.cookie() == (i == 0 ? 0 : rt.cookie()));
        CHECK(c.is(SessionType::Connect));
        CHECK(same(c.dst(), kMacB));
        CHECK(same(c.src(), kMacA));
        CHECK(c.service() == kService);
        CHECK(c.src_session() == sa->id);
        CHECK(c.src_epoch() == sa->local_epoch);
        CHECK(c.dst_session() == 0);
        CHECK(c.dst_epoch() == 0);
        CHECK(c.nonce() == sa->connect_nonce);
        CHECK(c.flow_base() == kBaseA);
        CHECK(c.mtu() == 9000);
        CHECK(c.signed_with(kK));
    }
    const Pkt& ac = b.sent[1];
    CHECK(ac.at == up);
    CHECK(ac.is(SessionType::Accept));
    CHECK(ac.seq() == 1); // B's session's first
    CHECK(ac.cookie() == 0);
    CHECK(same(ac.dst(), kMacA));
    CHECK(same(ac.src(), kMacB));
    CHECK(ac.dst_session() == sa->id);
    CHECK(ac.dst_epoch() == sa->local_epoch);
    CHECK(ac.src_session() == sb->id);
    CHECK(ac.src_epoch() == sb->local_epoch);
    CHECK(ac.nonce() == sa->connect_nonce);
    CHECK(ac.flow_base() == kBaseB);
    CHECK(ac.mtu() == 1500);
    CHECK(ac.signed_with(kK));
    const Pkt& ka = a.sent.back();
    CHECK(ka.at == up);
    CHECK(ka.is_ka(0)); // a confirmation, not a probe
    CHECK(ka.seq() == connects + 1);
    CHECK(ka.dst_session() == sb->id);
    CHECK(ka.dst_epoch() == sb->local_epoch);
    CHECK(ka.signed_with(kK));

    // Each knows the other.
    CHECK(sa->peer_id == sb->id);
    CHECK(sb->peer_id == sa->id);
    CHECK(sa->peer_epoch == sb->local_epoch);
    CHECK(sb->peer_epoch == sa->local_epoch);
    CHECK(sa->local_epoch != 0);
    CHECK(sb->local_epoch != 0);
    CHECK(sa->local_base == kBaseA);
    CHECK(sa->peer_base == kBaseB);
    CHECK(sb->local_base == kBaseB);
    CHECK(sb->peer_base == kBaseA);
    CHECK(sa->peer == kEpB);
    CHECK(sb->peer == kEpA);
    CHECK(same(sa->peer_mac, kMacB));
    CHECK(same(sb->peer_mac, kMacA));
    CHECK(sb->service == kService);
    CHECK(sb->key == kK);
    CHECK(sb->confirmed);
    CHECK_FALSE(sb->connector);
    CHECK_FALSE(sa->local_peer);
    CHECK_FALSE(sb->local_peer);
    CHECK(sa->last_rx == up);
    CHECK(sa->next_tx == up + kSec); // the first probe

    // The agreed parameters: the smaller MTU, the acceptor's keys.
    for (const Session* s : {sa, sb}) {
        CHECK(s->params.nflows == 4);
        CHECK(s->params.mtu == 1500);
        CHECK(s->params.ring_size == 64);
        CHECK(s->params.max_msg == 4096);
        CHECK(s->params.key == 0xB2B2B2B2);
        REQUIRE(s->params.overrides.size() == 1);
        CHECK(s->params.key_of(0) == 0xB2B2B2B2);
        CHECK(s->params.key_of(2) == 0xC3C3C3C3);
        CHECK(s->params.key_of(3) == 0xB2B2B2B2);
    }

    // Notified once each, for Established.
    REQUIRE(a.events.size() == 1);
    REQUIRE(b.events.size() == 1);
    CHECK(a.events[0].id == sa->id);
    CHECK(a.events[0].state == SessionState::Established);
    CHECK(b.events[0].id == sb->id);
    CHECK(b.events[0].state == SessionState::Established);
    CHECK(b.events[0].at == up);

    // The data plane's view.
    REQUIRE(sa->link != nullptr);
    REQUIRE(sb->link != nullptr);
    CHECK(sa->link->key == kK);
    CHECK(sb->link->key == kK);
    CHECK(sa->link->local_epoch == sa->local_epoch);
    CHECK(sa->link->peer_epoch == sb->local_epoch);
    CHECK(sb->link->local_epoch == sb->local_epoch);
    CHECK(sb->link->peer_epoch == sa->local_epoch);
    CHECK(sa->link->local_id == sa->id);
    CHECK(sa->link->peer_id == sb->id);
    CHECK(sb->link->local_id == sb->id);
    CHECK(sb->link->peer_id == sa->id);
    CHECK(sa->link->connector);
    CHECK_FALSE(sb->link->connector);
    CHECK_FALSE(sa->link->local_peer);
    CHECK_FALSE(sb->link->local_peer);
    check_link_template(*sa->link, kMacA, kMacB, kIpA, kIpB);
    check_link_template(*sb->link, kMacB, kMacA, kIpB, kIpA);

    const SessionCounters& ca = a.t->counters();
    const SessionCounters& cb = b.t->counters();
    CHECK(ca.tx == connects + 1);
    CHECK(ca.rx == 2);
    CHECK(cb.tx == 2);
    CHECK(cb.rx == connects + 1);
    CHECK(cb.retries == 1);
    CHECK(ca.established == 1);
    CHECK(cb.established == 1);
    CHECK(ca.ended + cb.ended == 0);
    CHECK(a.drops_total() + b.drops_total() == 0);

    // Until the first probe, silence.
    net.run_to(up + kSec - kMs);
    CHECK(a.sent.size() == connects + 1);
    CHECK(b.sent.size() == 2);
}

// 2 ---------------------------------------------------------------------------

TEST_CASE("ARP: the connector resolves the peer's MAC, or ends ArpFailed after its tries", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);

    Session* sa = connect(a, kEpB, nullptr);
    CHECK(sa->state == SessionState::Resolving);
    CHECK(a.sent.empty()); // the request goes out at the next poll

    SECTION("B answers: CONNECT goes to B's MAC") {
        net.at(T0);
        REQUIRE(a.sent.size() == 1);
        const Pkt& rq = a.sent[0];
        CHECK(rq.arp());
        CHECK(rq.arp_op() == kArpOpRequest);
        CHECK(same(rq.dst(), kBcast));
        CHECK(same(rq.src(), kMacA));
        CHECK(rq.arp_spa() == kIpA);
        CHECK(rq.arp_tpa() == kIpB);
        REQUIRE(b.sent.size() == 1);
        CHECK(b.sent[0].arp());
        CHECK(b.sent[0].arp_op() == kArpOpReply);
        CHECK(same(b.sent[0].dst(), kMacA));
        CHECK(sa->state == SessionState::Resolving); // the CONNECT waits for the next poll

        net.at(T0 + kMs);
        REQUIRE(a.sent.size() == 4); // the request, CONNECT, CONNECT(cookie), the confirmation
        for (size_t i : {1, 2}) {
            const Pkt& c = a.sent[i];
            CHECK(c.is(SessionType::Connect));
            CHECK(c.at == T0 + kMs);
            CHECK(same(c.dst(), kMacB));
        }
        CHECK(same(sa->peer_mac, kMacB));
        CHECK(sa->state == SessionState::Established);
        CHECK(a.sent[3].is_ka(0));
        CHECK(a.t->counters().arp_tx == 1);
        CHECK(a.t->counters().arp_rx == 1);
        CHECK(b.t->counters().arp_tx == 1);
        CHECK(b.t->counters().arp_rx == 1);
        CHECK(b.sent.size() == 3); // the reply, the RETRY, the ACCEPT
    }

    SECTION("nobody answers: ArpFailed after arp_tries requests, at the exact poll") {
        b.up = false;
        const uint64_t retry = a.cfg.arp_retry_us * kUs;
        const uint32_t tries = a.cfg.arp_tries;
        REQUIRE(tries == 10);
        const uint64_t gives_up = T0 + tries * retry;
        net.at(T0);
        net.run_to(gives_up - kMs);
        net.at(gives_up - 1);
        CHECK(sa->state == SessionState::Resolving);
        CHECK(a.events.empty());
        net.at(gives_up);
        CHECK(sa->state == SessionState::Ended);
        CHECK(sa->end == SessionEnd::ArpFailed);
        REQUIRE(a.events.size() == 1);
        CHECK(a.events[0].end == SessionEnd::ArpFailed);
        CHECK(a.events[0].at == gives_up);
        REQUIRE(a.sent.size() == tries);
        for (uint32_t i = 0; i < tries; i++) {
            CHECK(a.sent[i].arp());
            CHECK(a.sent[i].at == T0 + i * retry);
        }
        net.run_to(gives_up + 10 * kSec, 10 * kMs);
        CHECK(a.sent.size() == tries);
        CHECK(a.count(SessionType::Connect) == 0);
    }
}

// 3 ---------------------------------------------------------------------------

TEST_CASE("REFUSE: the connector ends Refused with the acceptor's reason and both values; B keeps nothing", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);

    struct Case {
        RefuseReason reason;
        uint16_t index;
        uint64_t expected, got;
    };
    const Case c = GENERATE(Case{RefuseReason::MsgSize, 0, 8192, 4096}, Case{RefuseReason::RingSize, 0, 128, 64},
                            Case{RefuseReason::Flows, 0, 2, 4}, Case{RefuseReason::Key, 3, 0xD4D4D4D4, 0xA1A1A1A1});
    INFO("reason " << to_string(c.reason));
    acc.refuse.reason = c.reason;
    acc.refuse.index = c.index;
    acc.refuse.expected = c.expected;
    acc.refuse.got = c.got;

    net.fate = [](const Node&, const Pkt& p) { return p.is(SessionType::Refuse) ? Fate::Hold : Fate::Deliver; };
    Session* sa = connect(a);
    net.flush();
    CHECK(acc.calls == 1);
    REQUIRE(net.held.size() == 1);
    // Signed, but for another CONNECT (nonce): not believed.
    std::vector<uint8_t> other = net.held[0].bytes;
    other[kB + 23] ^= 0x01;
    net.inject(a, resign(other, kK));
    CHECK(sa->state == SessionState::Connecting);
    CHECK(a.drops(DropReason::ControlStale) == 1);
    net.inject(a, net.held[0].bytes);
    CHECK(sa->state == SessionState::Ended);
    CHECK(sa->end == SessionEnd::Refused);
    CHECK(sa->refuse == c.reason);
    CHECK(sa->refuse_index == c.index);
    CHECK(sa->refuse_expected == c.expected);
    CHECK(sa->refuse_got == c.got);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].state == SessionState::Ended);
    CHECK(a.events[0].end == SessionEnd::Refused);
    CHECK(a.t->counters().refused == 1);

    // B: no session, nobody told, its RETRY, then one REFUSE that authenticates.
    CHECK(b.t->sessions().empty());
    CHECK(b.events.empty());
    CHECK(b.t->counters().refused == 1);
    CHECK(b.t->counters().established == 0);
    REQUIRE(b.sent.size() == 2);
    CHECK(b.sent[0].is(SessionType::Retry));
    const Pkt& r = b.sent[1];
    CHECK(r.is(SessionType::Refuse));
    CHECK(r.signed_with(kK));
    CHECK_FALSE(r.signed_with(kK2));
    CHECK(r.dst_session() == sa->id);
    CHECK(r.dst_epoch() == sa->local_epoch);
    CHECK(r.nonce() == sa->connect_nonce);
    CHECK(r.reason() == static_cast<uint16_t>(c.reason));
    CHECK(r.index() == c.index);
    CHECK(r.expected() == c.expected);
    CHECK(r.got() == c.got);
    CHECK(same(r.dst(), kMacA));

    // Nothing more, ever.
    net.run_to(T0 + 6 * kSec, 10 * kMs);
    CHECK(a.sent.size() == 2);
    CHECK(b.sent.size() == 2);
}

TEST_CASE("an ACCEPT that agrees to something not proposed: BadAccept, and a CLOSE", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    FlowParams p = proposal();
    RefuseReason want = RefuseReason::None;
    uint64_t expected = 0, got = 0;
    uint16_t index = 0;
    SECTION("another ring size") {
        acc.bend = [](FlowParams& f) { f.ring_size = 128; };
        want = RefuseReason::RingSize, expected = 64, got = 128;
    }
    SECTION("another message size") {
        acc.bend = [](FlowParams& f) { f.max_msg = 8192; };
        want = RefuseReason::MsgSize, expected = 4096, got = 8192;
    }
    SECTION("a larger MTU than proposed") {
        acc.bend = [](FlowParams& f) { f.mtu = 9200; };
        want = RefuseReason::Mtu, expected = 9000, got = 9200;
    }
    SECTION("given keys, and the acceptor holds another one for flow 1") {
        p.keys_given = true;
        acc.bend = [](FlowParams& f) { f.overrides = {{1, 0xDEADBEEF}}; };
        want = RefuseReason::Key, expected = 0xA1A1A1A1, got = 0xDEADBEEF, index = 1;
    }
    Session* sa = connect(a, kEpB, &kMacB, p);
    net.flush();
    CHECK(sa->state == SessionState::Ended);
    CHECK(sa->end == SessionEnd::BadAccept);
    CHECK(sa->refuse == want);
    CHECK(sa->refuse_expected == expected);
    CHECK(sa->refuse_got == got);
    CHECK(sa->refuse_index == index);
    REQUIRE(a.events.size() == 1); // never Established
    CHECK(a.events[0].end == SessionEnd::BadAccept);
    CHECK(a.t->counters().established == 0);
    // CONNECT, CONNECT(cookie), then CLOSE instead of the confirmation.
    REQUIRE(a.sent.size() == 3);
    CHECK(a.sent[0].is(SessionType::Connect));
    CHECK(a.sent[1].is(SessionType::Connect));
    CHECK(a.sent[2].is(SessionType::Close));
    CHECK(a.sent[2].signed_with(kK));
    REQUIRE(b.t->sessions().size() == 1);
    Session* sb = b.t->sessions()[0];
    CHECK(a.sent[2].dst_session() == sb->id);
    CHECK(sb->state == SessionState::Ended);
    CHECK(sb->end == SessionEnd::PeerClosed);
    REQUIRE(b.events.size() == 2);
    CHECK(b.events[1].end == SessionEnd::PeerClosed);
    CHECK(b.sent.size() == 2); // the RETRY, the ACCEPT
}

// 4 ---------------------------------------------------------------------------

TEST_CASE("no answer: CONNECT every connect_retry_us, NoAnswer at connect_timeout_us, B silent", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    DropReason why = DropReason::None;
    SECTION("B listens with another secret") {
        listen(b, acc, kK2);
        why = DropReason::ControlBadAuth;
    }
    SECTION("nobody listens on the service") { why = DropReason::UnknownSession; }

    Session* sa = connect(a);
    const uint64_t retry = a.cfg.connect_retry_us * kUs;
    const uint64_t timeout = T0 + a.cfg.connect_timeout_us * kUs;
    REQUIRE(retry == 200 * kMs);
    REQUIRE(timeout == T0 + 5 * kSec);
    net.flush();
    net.run_to(timeout - kMs);
    net.at(timeout - 1);
    CHECK(sa->state == SessionState::Connecting);
    net.at(timeout);
    CHECK(sa->state == SessionState::Ended);
    CHECK(sa->end == SessionEnd::NoAnswer);
    REQUIRE(a.events.size() == 1);
    CHECK(a.events[0].at == timeout);

    const size_t n = (timeout - T0) / retry; // 25: at T0, T0 + 200 ms, ... T0 + 4.8 s
    REQUIRE(a.sent.size() == n);
    for (size_t i = 0; i < n; i++) {
        CHECK(a.sent[i].is(SessionType::Connect));
        CHECK(a.sent[i].at == T0 + i * retry);
        CHECK(a.sent[i].nonce() == sa->connect_nonce); // a retry, not a new attempt
    }
    CHECK(b.sent.empty());
    CHECK(b.t->sessions().empty());
    CHECK(acc.calls == 0);
    CHECK(b.drops(why) == n);
    CHECK(b.drops_total() == n);
    CHECK(b.t->counters().rx == 0);

    net.run_to(timeout + 2 * kSec, 10 * kMs);
    CHECK(a.sent.size() == n);
}

// 5 ---------------------------------------------------------------------------

TEST_CASE("loss and duplicates in the handshake", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    const uint64_t retry = 200 * kMs;

    SECTION("the first CONNECT is lost: the retry establishes") {
        int connects = 0;
        net.fate = [&](const Node&, const Pkt& p) {
            return p.is(SessionType::Connect) && connects++ == 0 ? Fate::Drop : Fate::Deliver;
        };
        Session* sa = connect(a);
        net.flush();
        net.run_to(T0 + retry - kMs);
        CHECK(sa->state == SessionState::Connecting);
        CHECK(b.t->sessions().empty());
        net.run_to(T0 + retry);
        CHECK(sa->state == SessionState::Established);
        Session* sb = accepted(b, *sa);
        REQUIRE(sb != nullptr);
        CHECK(sb->confirmed);
        CHECK(a.count(SessionType::Connect) == 3); // lost, the retry, the retry with the cookie
        CHECK(a.sent[0].nonce() == a.sent[1].nonce());
        CHECK(a.sent[1].nonce() == a.sent[2].nonce());
        CHECK(b.sent.size() == 2);
        CHECK(acc.calls == 1);
        CHECK(a.events.size() == 1);
        CHECK(b.events.size() == 1);
    }

    SECTION("the ACCEPT is lost: the retried CONNECT gets the same ACCEPT, B keeps one session") {
        int accepts = 0;
        net.fate = [&](const Node&, const Pkt& p) {
            return p.is(SessionType::Accept) && accepts++ == 0 ? Fate::Drop : Fate::Deliver;
        };
        Session* sa = connect(a);
        net.flush();
        REQUIRE(b.t->sessions().size() == 1);
        Session* sb = b.t->sessions()[0];
        CHECK(sb->state == SessionState::Established);
        CHECK_FALSE(sb->confirmed);
        net.run_to(T0 + retry - kMs);
        CHECK(sa->state == SessionState::Connecting);
        net.run_to(T0 + retry);
        CHECK(sa->state == SessionState::Established);
        CHECK(b.t->sessions().size() == 1);
        CHECK(sb->confirmed);
        CHECK(acc.calls == 1);
        REQUIRE(b.sent.size() == 3); // RETRY, the lost ACCEPT, the retry's
        CHECK(b.sent[2].is(SessionType::Accept));
        CHECK(b.sent[2].nonce() == b.sent[1].nonce());
        CHECK(b.sent[2].src_epoch() == b.sent[1].src_epoch());
        CHECK(b.sent[2].seq() == b.sent[1].seq() + 1);
        CHECK(b.sent[2].at == T0 + retry);
        CHECK(a.count(SessionType::Connect) == 3);
        CHECK(a.count(SessionType::Keepalive) == 1);
        CHECK(a.events.size() == 1);
        CHECK(b.events.size() == 1);
        CHECK(sa->peer_epoch == sb->local_epoch);
    }

    SECTION("the confirmation is lost: B stays unconfirmed until the first probe") {
        net.fate = [&](const Node&, const Pkt& p) { return p.is_ka(0) ? Fate::Drop : Fate::Deliver; };
        Session* sa = connect(a);
        net.flush();
        CHECK(sa->state == SessionState::Established);
        Session* sb = accepted(b, *sa);
        REQUIRE(sb != nullptr);
        net.run_to(T0 + kSec - kMs);
        CHECK(sb->state == SessionState::Established);
        CHECK_FALSE(sb->confirmed);
        CHECK(sb->last_rx == T0);
        net.run_to(T0 + kSec);
        CHECK(sb->confirmed);
        CHECK(sb->last_rx == T0 + kSec);
        CHECK(a.count(SessionType::Keepalive, kKeepaliveAsk) == 1);
        CHECK(b.count(SessionType::Keepalive, kKeepaliveAnswer) == 1);
        CHECK(b.events.size() == 1);
    }

    SECTION("every handshake packet duplicated: the same sessions, each notified once") {
        net.fate = [](const Node&, const Pkt&) { return Fate::Duplicate; };
        Session* sa = connect(a);
        net.flush();
        CHECK(sa->state == SessionState::Established);
        REQUIRE(b.t->sessions().size() == 1);
        Session* sb = b.t->sessions()[0];
        CHECK(sb->confirmed);
        CHECK(sa->peer_epoch == sb->local_epoch);
        CHECK(acc.calls == 1);
        CHECK(a.events.size() == 1);
        CHECK(b.events.size() == 1);
        // Two CONNECTs in: two RETRYs (nothing kept), four in: one CONNECT
        // with the cookie (the token again is no news); two of those in: two
        // ACCEPTs (the second a retry's answer); four in: the two numbers
        // once each, a confirmation for each; four in at B: two taken. Each
        // copy of a number is a replay, counted.
        CHECK(a.count(SessionType::Connect) == 2);
        CHECK(b.count(SessionType::Retry) == 2);
        CHECK(b.count(SessionType::Accept) == 2);
        CHECK(a.count(SessionType::Keepalive, 0) == 2);
        CHECK(a.sent.size() + b.sent.size() == 8);
        CHECK(a.drops(DropReason::ControlReplayed) == 2);
        CHECK(b.drops(DropReason::ControlReplayed) == 2);
    }

    SECTION("each packet of an established session delivered again changes nothing") {
        auto [sa, sb] = establish(a, b);
        net.run_to(T0 + kSec);
        REQUIRE(a.sent.size() == 4); // CONNECT, CONNECT(cookie), confirmation, probe
        REQUIRE(b.sent.size() == 3); // RETRY, ACCEPT, answer
        const auto sna = snap(*a.t), snb = snap(*b.t);
        const Pkt conn = a.sent[0], conf = a.sent[2], ask = a.sent[3], retry_pkt = b.sent[0], accept = b.sent[1],
                  answer = b.sent[2];

        // A confirmation, an answer, an ACCEPT, a probe again: each number
        // was taken, so a recording changes nothing, not even last_rx (a
        // replayed answer would keep a dead acceptor looking alive, a probe
        // a dead connector), and draws no answer.
        net.inject(b, conf.bytes);
        net.inject(a, answer.bytes);
        net.inject(a, accept.bytes);
        net.inject(b, ask.bytes);
        CHECK(a.sent.size() == 4);
        CHECK(b.sent.size() == 3);
        CHECK(a.drops(DropReason::ControlReplayed) == 2);
        CHECK(b.drops(DropReason::ControlReplayed) == 2);
        // The RETRY again: A connects no more: not news.
        const uint64_t stale = a.drops(DropReason::ControlStale);
        net.inject(a, retry_pkt.bytes);
        CHECK(a.drops(DropReason::ControlStale) == stale + 1);
        net.inject(b, conn.bytes); // a CONNECT again: the ACCEPT again, confirmed again
        REQUIRE(b.sent.size() == 4);
        CHECK(b.sent.back().is(SessionType::Accept));
        CHECK(b.sent.back().nonce() == conn.nonce());
        CHECK(a.sent.size() == 5);
        CHECK(b.t->sessions().size() == 1);
        CHECK(acc.calls == 1);
        CHECK(snap(*a.t) == sna);
        CHECK(snap(*b.t) == snb);
        CHECK(sa->state == SessionState::Established);
        CHECK(sb->confirmed);
        CHECK(a.events.size() == 1);
        CHECK(b.events.size() == 1);
        // The next real probe (a higher sequence) is answered as ever.
        net.run_to(T0 + 2 * kSec);
        CHECK(a.sent.size() == 6);
        CHECK(b.sent.size() == 5);
        CHECK(b.sent.back().is_ka(kKeepaliveAnswer));
        // An answer signed right, a fresh number, but echoing no probe A
        // sent is not news: it would keep a dead acceptor looking alive.
        const uint64_t stale_a = a.drops(DropReason::ControlStale);
        std::vector<uint8_t> odd = b.sent.back().bytes;
        odd[kEthLen + kIpLen + kUdpLen + kHeaderLen + 23] ^= 0x01; // the nonce's last byte
        odd[kEthLen + kIpLen + kUdpLen + kHeaderLen + 31] ^= 0x10; // a number B has not used, in the window
        net.inject(a, resign(odd, kK));
        CHECK(a.drops(DropReason::ControlStale) == stale_a + 1);
        net.inject(a, b.sent.back().bytes); // the real one: believed (a recent probe's echo)
        CHECK(a.drops(DropReason::ControlStale) == stale_a + 1);
    }
}

// 6 ---------------------------------------------------------------------------

TEST_CASE("keep-alives: one probe a second from the connector, one answer each, nothing else", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto [sa, sb] = establish(a, b);
    REQUIRE(a.cfg.keepalive_us == 1000000);
    const size_t a0 = a.sent.size(), b0 = b.sent.size();

    net.run_to(T0 + 10 * kSec);
    REQUIRE(a.sent.size() - a0 == 10);
    REQUIRE(b.sent.size() - b0 == 10);
    for (size_t i = 0; i < 10; i++) {
        const Pkt& ask = a.sent[a0 + i];
        const Pkt& ans = b.sent[b0 + i];
        CHECK(ask.is_ka(kKeepaliveAsk));
        CHECK(ask.at == T0 + (i + 1) * kSec);
        CHECK(ask.dst_session() == sb->id);
        CHECK(ask.dst_epoch() == sb->local_epoch);
        CHECK(ask.signed_with(kK));
        CHECK(ans.is_ka(kKeepaliveAnswer));
        CHECK(ans.at == ask.at); // an answer, never on its own
        CHECK(ans.nonce() == ask.nonce());
        CHECK(ans.dst_session() == sa->id);
        CHECK(ans.signed_with(kK));
    }
    CHECK(sa->state == SessionState::Established);
    CHECK(sb->state == SessionState::Established);
    CHECK(sa->last_rx == T0 + 10 * kSec);
    CHECK(sb->last_rx == T0 + 10 * kSec);
    CHECK(sa->asks == 10);
    CHECK(a.events.size() == 1);
    CHECK(b.events.size() == 1);
    CHECK(a.drops_total() + b.drops_total() == 0);
}

// 7 ---------------------------------------------------------------------------

TEST_CASE("peer timeout: nothing heard for peer_timeout_us ends both ends at that exact poll", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto [sa, sb] = establish(a, b);
    REQUIRE(a.cfg.peer_timeout_us == 5000000);
    net.fate = [](const Node&, const Pkt&) { return Fate::Drop; };
    const uint64_t dead = T0 + 5 * kSec;

    SECTION("silence") {
        sa->link->ack_tx_tsc.store(T0 + 3 * kSec); // what this end sent is no news of the peer
        net.run_to(dead - kMs);
        net.at(dead - 1);
        CHECK(sa->state == SessionState::Established);
        CHECK(sb->state == SessionState::Established);
        net.at(dead);
        CHECK(sa->state == SessionState::Ended);
        CHECK(sb->state == SessionState::Ended);
        CHECK(sa->end == SessionEnd::PeerTimeout);
        CHECK(sb->end == SessionEnd::PeerTimeout);
        REQUIRE(a.events.size() == 2);
        REQUIRE(b.events.size() == 2);
        CHECK(a.events[1].at == dead);
        CHECK(b.events[1].at == dead);
        // Probes at 1..5 s (the last one in the poll that gives up); no CLOSE.
        CHECK(a.count(SessionType::Keepalive, kKeepaliveAsk) == 5);
        CHECK(a.sent.size() == 3 + 5);
        CHECK(b.sent.size() == 2);
        net.run_to(dead + 3 * kSec, 10 * kMs);
        CHECK(a.sent.size() == 8);
    }

    SECTION("the data plane's stamp of an authentic ACK counts as hearing the peer") {
        net.run_to(T0 + 3 * kSec);
        sa->link->peer_ctl_tsc.store(T0 + 3 * kSec, std::memory_order_relaxed);
        net.run_to(dead);
        CHECK(sb->end == SessionEnd::PeerTimeout); // B's link was not stamped
        net.run_to(T0 + 8 * kSec - kMs);
        net.at(T0 + 8 * kSec - 1);
        CHECK(sa->state == SessionState::Established);
        net.at(T0 + 8 * kSec);
        CHECK(sa->state == SessionState::Ended);
        CHECK(sa->end == SessionEnd::PeerTimeout);
        CHECK(a.events.back().at == T0 + 8 * kSec);
    }
}

// 8 ---------------------------------------------------------------------------

TEST_CASE("RESET: a restarted acceptor answers an authentic probe; replays and forgeries do nothing", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto [sa, sb] = establish(a, b);
    const uint16_t old_b_id = sb->id;
    const uint32_t old_b_epoch = sb->local_epoch;

    SECTION("B restarts: A's next probe gets a RESET echoing it, A ends PeerReset") {
        b.up = false;
        Node b2(net, "B'", kMacB, kIpB);
        Acceptor acc2;
        listen(b2, acc2);
        net.run_to(T0 + kSec - kMs);
        CHECK(sa->state == SessionState::Established);
        net.run_to(T0 + kSec);
        REQUIRE(b2.sent.size() == 1);
        const Pkt ask = a.sent.back();
        CHECK(ask.is_ka(kKeepaliveAsk));
        const Pkt r = b2.sent[0];
        CHECK(r.is(SessionType::Reset));
        CHECK(r.signed_with(kK));
        CHECK(r.nonce() == ask.nonce());
        CHECK(r.dst_session() == sa->id);
        CHECK(r.dst_epoch() == sa->local_epoch);
        CHECK(r.src_session() == old_b_id);
        CHECK(r.src_epoch() == old_b_epoch);
        CHECK(r.reason() == static_cast<uint16_t>(RefuseReason::UnknownSession));
        CHECK(same(r.dst(), kMacA));
        CHECK(sa->state == SessionState::Ended);
        CHECK(sa->end == SessionEnd::PeerReset);
        REQUIRE(a.events.size() == 2);
        CHECK(a.events[1].at == T0 + kSec);
        CHECK(b2.t->sessions().empty());
        CHECK(b2.events.empty());
        CHECK(acc2.calls == 0);

        // A reconnects to B'; the old RESET, replayed, is stale.
        Pair p2 = establish(a, b2);
        CHECK(p2.a->id != sa->id);
        const uint64_t stale = a.drops(DropReason::ControlStale);
        net.inject(a, r.bytes);
        CHECK(a.drops(DropReason::ControlStale) == stale + 1);
        CHECK(p2.a->state == SessionState::Established);
        CHECK(a.events.size() == 3);
    }

    SECTION("a RESET must echo one of A's recent probes") {
        // The restarted process, off the wire: it answers a recording of A's probe.
        Node b2(net, "B'", kMacB, kIpB);
        b2.up = false;
        Acceptor acc2;
        listen(b2, acc2);
        net.run_to(T0 + kSec);
        const Pkt ask1 = a.sent.back();
        REQUIRE(ask1.is_ka(kKeepaliveAsk));
        b2.t->on_frame(tmtest::mbuf_of(net.pool.mp, ask1.bytes), net.now);
        REQUIRE(b2.out.size() == 1);
        const Pkt reset1 = b2.sent.back();
        REQUIRE(reset1.is(SessionType::Reset));
        REQUIRE(reset1.nonce() == ask1.nonce());
        rte_pktmbuf_free(b2.out.front());
        b2.out.clear();

        const uint64_t stale = a.drops(DropReason::ControlStale);
        SECTION("echoing a probe 3 probes back: one of the last 4, believed") {
            net.run_to(T0 + 4 * kSec);
            net.inject(a, reset1.bytes);
            CHECK(sa->end == SessionEnd::PeerReset);
        }
        SECTION("echoing a probe 4 probes back: a recording, stale") {
            net.run_to(T0 + 5 * kSec);
            net.inject(a, reset1.bytes);
            CHECK(sa->state == SessionState::Established);
            CHECK(a.drops(DropReason::ControlStale) == stale + 1);
        }
        SECTION("a RESET with the right key and fields, echoing no probe of A's: stale") {
            const std::vector<uint8_t> f = forge(net, *sb, SessionType::Reset, 0, ask1.nonce() ^ 2);
            net.inject(a, f);
            CHECK(sa->state == SessionState::Established);
            CHECK(a.drops(DropReason::ControlStale) == stale + 1);
            // The same, echoing the probe: believed (the nonce was all that differed).
            net.inject(a, forge(net, *sb, SessionType::Reset, 0, ask1.nonce()));
            CHECK(sa->end == SessionEnd::PeerReset);
        }
    }

    SECTION("a probe with a wrong MAC gets no RESET") {
        b.up = false;
        Node b2(net, "B'", kMacB, kIpB);
        Acceptor acc2;
        listen(b2, acc2);
        net.fate = [](const Node& from, const Pkt&) { return from.name[0] == 'A' ? Fate::Hold : Fate::Deliver; };
        net.run_to(T0 + kSec);
        REQUIRE(net.held.size() == 1);
        std::vector<uint8_t> bad = net.held[0].bytes;
        bad[bad.size() - 1] ^= 0x01; // the MAC's last bit
        net.inject(b2, bad);
        CHECK(b2.sent.empty());
        CHECK(b2.drops(DropReason::UnknownSession) == 1);
        bad = net.held[0].bytes;
        bad[kB + 16] ^= 0x80; // the nonce's first bit
        net.inject(b2, bad);
        CHECK(b2.sent.empty());
        CHECK(b2.drops(DropReason::UnknownSession) == 2);
        CHECK(sa->state == SessionState::Established);
        net.inject(b2, net.held[0].bytes); // the genuine probe
        CHECK(b2.sent.size() == 1);
        CHECK(sa->end == SessionEnd::PeerReset);
    }
}

// 9 ---------------------------------------------------------------------------

TEST_CASE("the connector restarts: the new incarnation replaces the old one once confirmed, a replay never",
          "[session]") {
    Net net;
    auto a = std::make_unique<Node>(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto [sa, sb_old] = establish(*a, b);
    const Pkt old_connect = a->sent[0];        // without a cookie
    const Pkt old_connect_cookie = a->sent[1]; // with B's token, good until T0 + 4 s at most
    const uint32_t old_epoch = sa->local_epoch;
    const uint16_t old_id = sa->id;
    net.run_to(T0 + 2 * kSec);

    // A' on the same port and address; A is gone.
    a->up = false;
    Node a2(net, "A'", kMacA, kIpA);
    net.fate = [](const Node&, const Pkt& p) { return p.is_ka(0) ? Fate::Hold : Fate::Deliver; };
    Session* sa2 = connect(a2);
    net.flush();
    CHECK(sa2->id == old_id);
    CHECK(sa2->local_epoch != old_epoch);
    REQUIRE(sa2->state == SessionState::Established);
    REQUIRE(b.t->sessions().size() == 2);
    Session* sb = accepted(b, *sa2);
    REQUIRE(sb != nullptr);
    CHECK(sb != sb_old);
    CHECK_FALSE(sb->confirmed);
    CHECK(sb->replaces == sb_old->id);
    CHECK(sb_old->state == SessionState::Established); // not yet: A' has not confirmed
    REQUIRE(b.events.size() == 2);
    CHECK(b.events[1].id == sb->id);

    REQUIRE(net.held.size() == 1);
    net.fate = {};
    net.inject(b, net.held[0].bytes); // A's confirmation
    CHECK(sb->confirmed);
    CHECK(sb->replaces == 0);
    CHECK(sb_old->state == SessionState::Ended);
    CHECK(sb_old->end == SessionEnd::Replaced);
    REQUIRE(b.events.size() == 3);
    CHECK(b.events[2].id == sb_old->id);
    CHECK(b.events[2].end == SessionEnd::Replaced);
    CHECK(b.count(SessionType::Close) == 0);

    // A's CONNECTs, recorded at T0 and replayed now. Without the cookie:
    // a RETRY to wherever it came from, nothing kept.
    net.run_to(T0 + 3 * kSec);
    const uint64_t retries = b.t->counters().retries;
    net.inject(b, old_connect.bytes);
    CHECK(b.t->sessions().size() == 2);
    CHECK(b.t->counters().retries == retries + 1);
    // With it, from another UDP port: the token names the port: a RETRY.
    std::vector<uint8_t> moved = old_connect_cookie.bytes;
    moved[kEthLen + kIpLen + 1] ^= 0x01; // the UDP source port (outside the MAC)
    net.inject(b, moved);
    CHECK(b.t->sessions().size() == 2);
    CHECK(b.t->counters().retries == retries + 2);
    // With it, as recorded, while the token is good: a pending session that
    // never gets confirmed; the live one is untouched.
    const size_t a2_sent = a2.sent.size();
    const uint64_t a2_stale = a2.drops(DropReason::ControlStale);
    net.inject(b, old_connect_cookie.bytes);
    REQUIRE(b.t->sessions().size() == 3);
    Session* ghost = b.t->sessions()[2];
    CHECK(ghost->peer_epoch == old_epoch);
    CHECK(ghost->state == SessionState::Established);
    CHECK_FALSE(ghost->confirmed);
    CHECK(ghost->replaces == sb->id);
    CHECK(a2.sent.size() == a2_sent);                            // its ACCEPT reached A', who ignored it
    CHECK(a2.drops(DropReason::ControlStale) == a2_stale + 1);
    // Again, and again from another port: the same CONNECT (session, epoch,
    // nonce) makes nothing more, wherever it comes from.
    net.inject(b, old_connect_cookie.bytes);
    net.inject(b, moved);
    CHECK(b.t->sessions().size() == 3);
    CHECK(b.t->counters().retries == retries + 2);
    const uint64_t expire = T0 + 3 * kSec + 5 * kSec;
    net.run_to(expire - kMs);
    net.at(expire - 1);
    CHECK(ghost->state == SessionState::Established);
    net.at(expire);
    CHECK(ghost->state == SessionState::Ended);
    CHECK(ghost->end == SessionEnd::NoAnswer);
    CHECK(sb->state == SessionState::Established);
    CHECK(sb->confirmed);
    CHECK(sa2->state == SessionState::Established);
    REQUIRE(b.events.size() == 5);
    CHECK(b.events[3].id == ghost->id);
    CHECK(b.events[4].id == ghost->id);
    CHECK(b.events[4].end == SessionEnd::NoAnswer);
    CHECK(b.events[4].at == expire);
}

TEST_CASE("a replay pending when the connector restarts again: the confirmation ends the live incarnation",
          "[session]") {
    // A0, then A1 replaces it; a recording of A0's CONNECT makes a pending
    // session; A2 then connects and confirms. The incarnation A2 replaces is
    // A1's, the confirmed one, not the replay's.
    Net net;
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto a0 = std::make_unique<Node>(net, "A0", kMacA, kIpA);
    auto [s0, b0] = establish(*a0, b);
    const Pkt a0_connect = a0->sent[1]; // with B's token, good for the 2 s below
    a0->up = false;
    net.at(T0 + kSec);
    auto a1 = std::make_unique<Node>(net, "A1", kMacA, kIpA);
    auto [s1, b1] = establish(*a1, b);
    CHECK(b0->end == SessionEnd::Replaced);
    net.at(T0 + 2 * kSec);
    net.inject(b, a0_connect.bytes);
    REQUIRE(b.t->sessions().size() == 3);
    Session* ghost = b.t->sessions()[2];
    CHECK_FALSE(ghost->confirmed);

    a1->up = false;
    net.at(T0 + 2 * kSec + 100 * kMs);
    Node a2(net, "A2", kMacA, kIpA);
    auto [s2, b2] = establish(a2, b);
    CHECK(b1->state == SessionState::Ended);
    CHECK(b1->end == SessionEnd::Replaced);
    CHECK(b2->state == SessionState::Established);
    // The replay's session still waits for its deadline.
    CHECK(ghost->state == SessionState::Established);
    net.run_to(T0 + 7 * kSec, 10 * kMs);
    CHECK(ghost->end == SessionEnd::NoAnswer);
    CHECK(b2->state == SessionState::Established);
}

// 10 --------------------------------------------------------------------------

TEST_CASE("CLOSE: the peer ends PeerClosed; a CLOSE with other epochs or another key is ignored", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto [sa, sb] = establish(a, b);
    net.run_to(T0 + 500 * kMs);

    SECTION("A closes") {
        a.t->close(sa, net.now);
        net.flush();
        CHECK(sa->end == SessionEnd::Closed);
        CHECK(sb->end == SessionEnd::PeerClosed);
        REQUIRE(a.sent.size() == 4); // CONNECT, CONNECT(cookie), confirmation, CLOSE
        const Pkt& c = a.sent[3];
        CHECK(c.is(SessionType::Close));
        CHECK(c.signed_with(kK));
        CHECK(c.dst_session() == sb->id);
        CHECK(c.dst_epoch() == sb->local_epoch);
        CHECK(c.src_epoch() == sa->local_epoch);
        REQUIRE(a.events.size() == 2);
        REQUIRE(b.events.size() == 2);
        CHECK(a.events[1].end == SessionEnd::Closed);
        CHECK(b.events[1].end == SessionEnd::PeerClosed);
        CHECK(b.events[1].at == T0 + 500 * kMs);
        net.run_to(T0 + 7 * kSec, 10 * kMs); // no probes, no timeouts, nothing
        CHECK(a.sent.size() == 4);
        CHECK(b.sent.size() == 2);
        CHECK(a.events.size() == 2);
        CHECK(b.events.size() == 2);
    }
    SECTION("B closes") {
        b.t->close(sb, net.now);
        net.flush();
        CHECK(sb->end == SessionEnd::Closed);
        CHECK(sa->end == SessionEnd::PeerClosed);
    }
    SECTION("both close at once: each takes the other's CLOSE, which is no drop; a replayed copy is") {
        const uint64_t rx_a = a.t->counters().rx, rx_b = b.t->counters().rx;
        a.t->close(sa, net.now);
        b.t->close(sb, net.now);
        net.flush();
        CHECK(sa->end == SessionEnd::Closed);
        CHECK(sb->end == SessionEnd::Closed);
        CHECK(a.t->counters().rx == rx_a + 1);
        CHECK(b.t->counters().rx == rx_b + 1);
        CHECK(a.drops_total() == 0);
        CHECK(b.drops_total() == 0);
        REQUIRE(a.sent.back().is(SessionType::Close));
        net.inject(b, a.sent.back().bytes);
        CHECK(b.drops(DropReason::ControlReplayed) == 1);
        CHECK(b.t->counters().rx == rx_b + 1);
        CHECK(b.events.size() == 2);
    }
    SECTION("forged CLOSEs") {
        Session wrong = *sa;
        auto deliver = [&](const std::vector<uint8_t>& f, DropReason why) {
            const uint64_t before = b.drops(why);
            net.inject(b, f);
            CHECK(b.drops(why) == before + 1);
            CHECK(sb->state == SessionState::Established);
        };
        wrong.peer_epoch = sb->local_epoch + 1;
        deliver(forge(net, wrong, SessionType::Close, 0, 1), DropReason::ControlStale);
        wrong = *sa;
        wrong.local_epoch = sa->local_epoch + 1;
        deliver(forge(net, wrong, SessionType::Close, 0, 1), DropReason::ControlStale);
        deliver(forge(net, *sa, SessionType::Close, 0, 1, kK2), DropReason::ControlBadAuth);
        CHECK(b.events.size() == 1);
        // The same builder with the right fields and key: believed.
        net.inject(b, forge(net, *sa, SessionType::Close, 0, 1));
        CHECK(sb->end == SessionEnd::PeerClosed);
    }
}

// 11 --------------------------------------------------------------------------

namespace {

// Bytes a flip may touch: all but the Ethernet header, the UDP source port
// and the UDP checksum. Those are addressing the MAC does not cover (by
// design: it covers the tailmark header and body) and the parser does not
// read (the checksum is 0 and not verified): a flip there delivers the same
// authentic message.
bool flippable(size_t byte) { return byte >= kEthLen && !(byte >= 34 && byte < 36) && !(byte >= 40 && byte < 42); }

// Every single-bit flip of `p`, delivered to `to`: no state changes, nothing
// sent, nobody notified, one drop counted each.
void every_flip(Net& net, Node& to, const Pkt& p) {
    const auto before = snap(*to.t);
    const size_t sent = to.sent.size(), events = to.events.size(), sessions = to.t->sessions().size();
    const uint64_t rx = to.t->counters().rx;
    size_t flips = 0;
    for (size_t byte = 0; byte < p.bytes.size(); byte++) {
        if (!flippable(byte))
            continue;
        for (int bit = 0; bit < 8; bit++) {
            INFO(to_string(p.type()) << " to " << to.name << ": byte " << byte << " bit " << bit);
            std::vector<uint8_t> f = p.bytes;
            f[byte] ^= static_cast<uint8_t>(1u << bit);
            const uint64_t drops = to.drops_total();
            net.inject(to, f);
            REQUIRE(to.drops_total() == drops + 1);
            REQUIRE(to.sent.size() == sent);
            REQUIRE(to.events.size() == events);
            REQUIRE(to.t->sessions().size() == sessions);
            REQUIRE(snap(*to.t) == before);
            REQUIRE(to.t->counters().rx == rx);
            flips++;
        }
    }
    CHECK(flips == 8 * (p.bytes.size() - kEthLen - 4));
}

} // namespace

TEST_CASE("forgeries: every single-bit flip of an ACCEPT, KEEPALIVE, RESET or CLOSE changes nothing", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto hold = [&](auto pred) {
        net.held.clear();
        net.fate = [pred](const Node&, const Pkt& p) { return pred(p) ? Fate::Hold : Fate::Deliver; };
    };

    SECTION("ACCEPT, confirmation, probe, answer") {
        hold([](const Pkt& p) { return p.is(SessionType::Accept); });
        Session* sa = connect(a);
        net.flush();
        REQUIRE(net.held.size() == 1);
        const Pkt accept = net.held[0];
        every_flip(net, a, accept);
        CHECK(sa->state == SessionState::Connecting);

        hold([](const Pkt& p) { return p.is_ka(0); });
        net.inject(a, accept.bytes);
        CHECK(sa->state == SessionState::Established);
        REQUIRE(net.held.size() == 1);
        const Pkt confirm = net.held[0];
        Session* sb = accepted(b, *sa);
        REQUIRE(sb != nullptr);
        every_flip(net, b, confirm);
        CHECK_FALSE(sb->confirmed);
        net.inject(b, confirm.bytes);
        CHECK(sb->confirmed);

        hold([](const Pkt& p) { return p.is_ka(kKeepaliveAsk); });
        net.run_to(T0 + kSec);
        REQUIRE(net.held.size() == 1);
        const Pkt ask = net.held[0];
        every_flip(net, b, ask);
        CHECK(sb->last_rx == T0);

        hold([](const Pkt& p) { return p.is_ka(kKeepaliveAnswer); });
        net.inject(b, ask.bytes);
        CHECK(sb->last_rx == T0 + kSec);
        REQUIRE(net.held.size() == 1);
        const Pkt answer = net.held[0];
        net.now += kMs;
        every_flip(net, a, answer);
        CHECK(sa->last_rx == T0);
        net.inject(a, answer.bytes);
        CHECK(sa->last_rx == net.now);
    }

    SECTION("an ACCEPT signed with the key, echoing another nonce, is stale") {
        hold([](const Pkt& p) { return p.is(SessionType::Accept); });
        Session* sa = connect(a);
        net.flush();
        REQUIRE(net.held.size() == 1);
        const Pkt accept = net.held[0];
        std::vector<uint8_t> f = accept.bytes;
        f[kB + 23] ^= 0x01; // the nonce's last bit
        f[kB + 31] ^= 0x02; // and a number B has not used (3): fresh, so the nonce decides
        const uint64_t stale = a.drops(DropReason::ControlStale);
        net.inject(a, resign(f, kK));
        CHECK(sa->state == SessionState::Connecting);
        CHECK(a.drops(DropReason::ControlStale) == stale + 1);
        CHECK(a.sent.size() == 2); // CONNECT, CONNECT(cookie)
        net.inject(a, resign(accept.bytes, kK)); // signing again alone changes nothing
        CHECK(sa->state == SessionState::Established);
    }

    SECTION("RESET") {
        auto [sa, sb] = establish(a, b);
        b.up = false;
        Node b2(net, "B'", kMacB, kIpB);
        Acceptor acc2;
        listen(b2, acc2);
        hold([](const Pkt& p) { return p.is(SessionType::Reset); });
        net.run_to(T0 + kSec);
        REQUIRE(net.held.size() == 1);
        const Pkt reset = net.held[0];
        every_flip(net, a, reset);
        CHECK(sa->state == SessionState::Established);
        net.inject(a, reset.bytes);
        CHECK(sa->end == SessionEnd::PeerReset);
    }

    SECTION("CLOSE") {
        auto [sa, sb] = establish(a, b);
        hold([](const Pkt& p) { return p.is(SessionType::Close); });
        a.t->close(sa, net.now);
        net.flush();
        REQUIRE(net.held.size() == 1);
        const Pkt close = net.held[0];
        every_flip(net, b, close);
        CHECK(sb->state == SessionState::Established);
        net.inject(b, close.bytes);
        CHECK(sb->end == SessionEnd::PeerClosed);
    }
}

// 11b -------------------------------------------------------------------------

TEST_CASE("freshness: a dead connector's recorded packets, replayed, keep nothing alive; its session ends at the "
          "peer timeout (issue 35)", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    auto [sa, sb] = establish(a, b);
    net.run_to(T0 + 2 * kSec); // two probes answered
    std::vector<Pkt> recorded; // every session packet A sent: CONNECTs, the confirmation, the probes
    for (const Pkt& p : a.sent)
        if (!p.is(SessionType::Connect))
            recorded.push_back(p);
    REQUIRE(recorded.size() == 3);
    CHECK(recorded[0].is_ka(0));
    CHECK(sb->last_rx == T0 + 2 * kSec);
    a.up = false; // A dies
    const uint64_t dead = T0 + 2 * kSec + b.cfg.peer_timeout_us * kUs;
    // Replayed every 100 ms until past the timeout: each refused as a replay,
    // B's view of A unchanged, no answer.
    uint64_t replays = 0;
    const size_t b_sent = b.sent.size();
    for (uint64_t t = T0 + 2 * kSec + 100 * kMs; t < dead; t += 100 * kMs) {
        net.at(t);
        for (const Pkt& p : recorded) {
            net.inject(b, p.bytes);
            replays++;
        }
        REQUIRE(sb->last_rx == T0 + 2 * kSec);
    }
    CHECK(b.drops(DropReason::ControlReplayed) == replays);
    CHECK(b.sent.size() == b_sent);
    CHECK(sb->state == SessionState::Established);
    net.at(dead);
    CHECK(sb->state == SessionState::Ended);
    CHECK(sb->end == SessionEnd::PeerTimeout);
}

TEST_CASE("a recorded CONNECT replayed from a thousand source ports makes no session: a RETRY to each, nothing "
          "kept (issue 35)", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    // A's first CONNECT, held: never delivered.
    net.fate = [](const Node&, const Pkt& p) { return p.is(SessionType::Connect) ? Fate::Hold : Fate::Deliver; };
    Session* sa = connect(a);
    net.flush();
    REQUIRE(net.held.size() == 1);
    const Pkt rec = net.held[0];
    net.fate = [](const Node&, const Pkt&) { return Fate::Drop; }; // the RETRYs go nowhere
    for (uint32_t port = 0; port < 1000; port++) {
        std::vector<uint8_t> f = rec.bytes;
        f[kEthLen + kIpLen + 0] = static_cast<uint8_t>(port >> 8); // the UDP source port
        f[kEthLen + kIpLen + 1] = static_cast<uint8_t>(port);
        net.inject(b, f);
    }
    CHECK(b.t->sessions().empty());
    CHECK(acc.calls == 0);
    CHECK(b.t->counters().retries == 1000);
    CHECK(b.count(SessionType::Retry) == 1000);
    CHECK(b.drops_total() == 0);
    CHECK(sa->state == SessionState::Connecting);
    // The genuine connector still gets in.
    net.fate = {};
    net.run_to(T0 + 200 * kMs);
    CHECK(sa->state == SessionState::Established);
    CHECK(b.t->sessions().size() == 1);
    CHECK(acc.calls == 1);
}

TEST_CASE("ARP: an unsolicited ARP moves no session's peer; the acceptor believes a CONNECT's source MAC only as far "
          "as its RETRY came back (issue 35)", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);
    const rte_ether_addr kEvil = {{0x02, 0, 0, 0, 0, 0xee}};
    SECTION("a gratuitous ARP for B's address, from another MAC, while A's session to it is up") {
        Session* sa = connect(a, kEpB, nullptr); // resolved by ARP
        net.run_to(T0 + 10 * kMs);
        REQUIRE(sa->state == SessionState::Established);
        REQUIRE(same(sa->peer_mac, kMacB));
        rte_mbuf* g = build_gratuitous_arp(net.pool.mp, kEvil, kIpB);
        REQUIRE(g != nullptr);
        const std::vector<uint8_t> ga = tmtest::flat(g);
        rte_pktmbuf_free(g);
        net.inject(a, ga);
        net.inject(a, ga);
        CHECK(a.t->counters().arp_refused == 2);
        CHECK(same(sa->peer_mac, kMacB));
        CHECK(same(Pkt{0, std::vector<uint8_t>(sa->link->l2l4, sa->link->l2l4 + 6)}.dst(), kMacB));
        net.run_to(T0 + 2 * kSec + 10 * kMs); // probes still go to B, answered
        CHECK(sa->state == SessionState::Established);
        CHECK(a.all(SessionType::Keepalive, kKeepaliveAsk).size() == 2);
        for (const Pkt& p : a.all(SessionType::Keepalive, kKeepaliveAsk))
            CHECK(same(p.dst(), kMacB));
        // A new session to B resolves it again: a request, B's reply wins.
        const size_t reqs = a.t->counters().arp_tx;
        Session* s2 = a.t->connect(kEpB, kService, kK, proposal(), 20, nullptr, net.now);
        REQUIRE(s2 != nullptr);
        CHECK(s2->state == SessionState::Resolving);
        net.run_to(net.now + 10 * kMs);
        CHECK(a.t->counters().arp_tx == reqs + 1);
        CHECK(s2->state == SessionState::Established);
        CHECK(same(s2->peer_mac, kMacB));
    }
    SECTION("a CONNECT with a good token from another Ethernet source: a RETRY, to that source") {
        net.fate = [](const Node&, const Pkt& p) {
            return p.is(SessionType::Connect) && p.cookie() != 0 ? Fate::Hold : Fate::Deliver;
        };
        Session* sa = connect(a);
        net.flush();
        REQUIRE(net.held.size() == 1);
        std::vector<uint8_t> moved = net.held[0].bytes;
        memcpy(moved.data() + 6, kEvil.addr_bytes, 6); // the Ethernet source (outside the MAC)
        const uint64_t retries = b.t->counters().retries;
        net.fate = [](const Node&, const Pkt&) { return Fate::Drop; };
        net.inject(b, moved);
        CHECK(b.t->sessions().empty());
        CHECK(b.t->counters().retries == retries + 1);
        CHECK(same(b.sent.back().dst(), kEvil));
        net.fate = {};
        net.inject(b, net.held[0].bytes); // the genuine one
        CHECK(sa->state == SessionState::Established);
        REQUIRE(b.t->sessions().size() == 1);
        CHECK(same(b.t->sessions()[0]->peer_mac, kMacA));
    }
}

TEST_CASE("data version: 2 taken by default, both ends derive the same per-direction keys; 1 only where allowed, "
          "or between ends of one process (issue 35)", "[session]") {
    Net net;
    SECTION("both speak 2") {
        Node a(net, "A", kMacA, kIpA);
        Node b(net, "B", kMacB, kIpB);
        Acceptor acc;
        listen(b, acc);
        auto [sa, sb] = establish(a, b);
        CHECK(sa->params.version == kVersion2);
        CHECK(sb->params.version == kVersion2);
        CHECK(acc.proposed.version == kVersion2);
        REQUIRE(sa->link != nullptr);
        REQUIRE(sb->link != nullptr);
        CHECK(sa->link->data_version == kVersion2);
        CHECK(sb->link->data_version == kVersion2);
        // What A tags, B verifies, and the other way round; the two
        // directions differ, and neither is the secret.
        CHECK(sa->link->tx_data_key == sb->link->rx_data_key);
        CHECK(sb->link->tx_data_key == sa->link->rx_data_key);
        CHECK_FALSE(sa->link->tx_data_key == sa->link->rx_data_key);
        CHECK_FALSE(sa->link->tx_data_key == kK);
        CHECK_FALSE(sa->link->tx_data_key == SipKey{});
        // The ACCEPT carried B's key nonce; the CONNECTs none.
        for (const Pkt& p : a.all(SessionType::Connect))
            CHECK(be16(p.bytes, kB + 64) == 2);
        const Pkt acc_pkt = b.all(SessionType::Accept).at(0);
        CHECK(be16(acc_pkt.bytes, kB + 64) == 2);
        CHECK(be64(acc_pkt.bytes, kB + 72) == sb->key_nonce);
        CHECK(sb->key_nonce != 0);
        // Another incarnation (A restarted): other keys.
        const SipKey old_key = sa->link->tx_data_key;
        a.up = false;
        Node a2(net, "A'", kMacA, kIpA);
        Session* s2 = connect(a2);
        net.flush();
        REQUIRE(s2->state == SessionState::Established);
        CHECK(s2->link->data_version == kVersion2);
        CHECK_FALSE(s2->link->tx_data_key == old_key);
        Session* b2 = accepted(b, *s2);
        REQUIRE(b2 != nullptr);
        CHECK(b2->link->rx_data_key == s2->link->tx_data_key);
    }
    SECTION("a connector that offers 1, an acceptor that needs 2: refused, naming the version") {
        Node a(net, "A", kMacA, kIpA, [](SessionTable::Config& c) { c.max_version = kVersion; });
        Node b(net, "B", kMacB, kIpB);
        Acceptor acc;
        listen(b, acc);
        Session* sa = connect(a);
        net.flush();
        CHECK(sa->state == SessionState::Ended);
        CHECK(sa->end == SessionEnd::Refused);
        CHECK(sa->refuse == RefuseReason::Version);
        CHECK(sa->refuse_expected == kVersion2);
        CHECK(sa->refuse_got == kVersion);
        CHECK(acc.calls == 0);
        CHECK(b.t->sessions().empty());
    }
    SECTION("an acceptor that allows 1 (--insecure) takes it from a connector that offers 1") {
        Node a(net, "A", kMacA, kIpA, [](SessionTable::Config& c) { c.max_version = c.min_version = kVersion; });
        Node b(net, "B", kMacB, kIpB, [](SessionTable::Config& c) { c.min_version = kVersion; });
        Acceptor acc;
        listen(b, acc);
        auto [sa, sb] = establish(a, b);
        CHECK(sa->link->data_version == kVersion);
        CHECK(sb->link->data_version == kVersion);
    }
    SECTION("--data-auth: asked for by the connector, or required by the acceptor, the session's; hash keys "
            "per direction") {
        const bool by_connector = GENERATE(true, false);
        Node a(net, "A", kMacA, kIpA, [&](SessionTable::Config& c) { c.data_auth = by_connector; });
        Node b(net, "B", kMacB, kIpB, [&](SessionTable::Config& c) { c.data_auth = !by_connector; });
        Acceptor acc;
        listen(b, acc);
        auto [sa, sb] = establish(a, b);
        CHECK(sa->params.data_auth);
        CHECK(sb->params.data_auth);
        REQUIRE(sa->link != nullptr);
        REQUIRE(sb->link != nullptr);
        CHECK(sa->link->data_auth);
        CHECK(sb->link->data_auth);
        CHECK(memcmp(sa->link->tx_auth_h, sb->link->rx_auth_h, 16) == 0);
        CHECK(memcmp(sb->link->tx_auth_h, sa->link->rx_auth_h, 16) == 0);
        CHECK(memcmp(sa->link->tx_auth_h, sa->link->rx_auth_h, 16) != 0);
        CHECK(memcmp(sa->link->tx_auth_h, &sa->link->tx_data_key, 16) != 0); // not the tag's key
        for (const Pkt& p : a.all(SessionType::Connect))
            CHECK(be16(p.bytes, kB + 66) == (by_connector ? kDataAuth : 0));
        CHECK(be16(b.all(SessionType::Accept).at(0).bytes, kB + 66) == kDataAuth);
    }
    SECTION("--data-auth off at both ends: none, and no hash keys") {
        Node a(net, "A", kMacA, kIpA);
        Node b(net, "B", kMacB, kIpB);
        Acceptor acc;
        listen(b, acc);
        auto [sa, sb] = establish(a, b);
        CHECK_FALSE(sa->link->data_auth);
        CHECK_FALSE(sb->link->data_auth);
        CHECK(be16(b.all(SessionType::Accept).at(0).bytes, kB + 66) == 0);
    }
    SECTION("a connector that asked for --data-auth refuses an ACCEPT without it (signed, as from an acceptor "
            "that would not)") {
        Node a(net, "A", kMacA, kIpA, [](SessionTable::Config& c) { c.data_auth = true; });
        Node b(net, "B", kMacB, kIpB);
        Acceptor acc;
        listen(b, acc);
        net.fate = [](const Node&, const Pkt& p) { return p.is(SessionType::Accept) ? Fate::Hold : Fate::Deliver; };
        Session* sa = connect(a);
        net.flush();
        REQUIRE(net.held.size() == 1);
        std::vector<uint8_t> f = net.held[0].bytes;
        f[kB + 66] = 0;
        f[kB + 67] = 0; // data_flags: none
        net.fate = {};
        net.inject(a, resign(f, kK));
        CHECK(sa->state == SessionState::Ended);
        CHECK(sa->end == SessionEnd::BadAccept);
        CHECK(sa->refuse == RefuseReason::Version);
        CHECK(sa->refuse_expected == kDataAuth);
        CHECK(sa->refuse_got == 0);
    }
    SECTION("an acceptor that requires --data-auth refuses a connector that offers version 1 only") {
        Node a(net, "A", kMacA, kIpA, [](SessionTable::Config& c) { c.max_version = c.min_version = kVersion; });
        Node b(net, "B", kMacB, kIpB, [](SessionTable::Config& c) {
            c.min_version = kVersion;
            c.data_auth = true;
        });
        Acceptor acc;
        listen(b, acc);
        Session* sa = connect(a);
        net.flush();
        CHECK(sa->state == SessionState::Ended);
        CHECK(sa->refuse == RefuseReason::Version);
        CHECK(sa->refuse_expected == kVersion2);
        CHECK(acc.calls == 0);
    }
    SECTION("two ends of one process: 1, their frames never leave it") {
        Node l(net, "L", kMacA, kIpA, [](SessionTable::Config& c) { c.rx_mac = kMacL; });
        Acceptor acc;
        listen(l, acc);
        Session* c = l.t->connect(kEpA, kService, kK, proposal(), kBaseA, nullptr, net.now);
        net.flush();
        REQUIRE(c->state == SessionState::Established);
        Session* s = accepted(l, *c);
        REQUIRE(s != nullptr);
        CHECK(c->link->data_version == kVersion);
        CHECK(s->link->data_version == kVersion);
    }
}

// 12 --------------------------------------------------------------------------

TEST_CASE("loopback: a table connects to its own endpoint; both halves know the peer is local", "[session]") {
    Net net;
    // Sends on kMacA, receives on kMacL (loopback over two ports).
    Node l(net, "L", kMacA, kIpA, [](SessionTable::Config& c) { c.rx_mac = kMacL; });
    Acceptor acc;
    listen(l, acc);
    Session* c = l.t->connect(kEpA, kService, kK, proposal(), kBaseA, nullptr, net.now);
    REQUIRE(c != nullptr);
    CHECK(c->state == SessionState::Connecting); // no ARP for its own address
    CHECK(same(c->peer_mac, kMacL));
    net.flush();
    REQUIRE(l.t->sessions().size() == 2);
    Session* s = accepted(l, *c);
    REQUIRE(s != nullptr);
    CHECK(c->state == SessionState::Established);
    CHECK(s->state == SessionState::Established);
    CHECK(s->confirmed);
    CHECK(c->connector);
    CHECK_FALSE(s->connector);
    CHECK(c->id != s->id);
    CHECK(c->peer_id == s->id);
    CHECK(s->peer_id == c->id);
    CHECK(c->peer_epoch == s->local_epoch);
    CHECK(s->peer_epoch == c->local_epoch);
    CHECK(c->local_peer);
    CHECK(s->local_peer);
    REQUIRE(c->link != nullptr);
    REQUIRE(s->link != nullptr);
    CHECK(c->link->local_peer);
    CHECK(s->link->local_peer);
    CHECK(same(c->peer_mac, kMacL));
    CHECK(same(s->peer_mac, kMacL));
    check_link_template(*c->link, kMacA, kMacL, kIpA, kIpA);
    check_link_template(*s->link, kMacA, kMacL, kIpA, kIpA);
    // CONNECT, RETRY, CONNECT(cookie), ACCEPT, confirmation; no ARP.
    REQUIRE(l.sent.size() == 5);
    CHECK(l.sent[0].is(SessionType::Connect));
    CHECK(same(l.sent[0].dst(), kMacL));
    CHECK(same(l.sent[0].src(), kMacA));
    CHECK(l.sent[1].is(SessionType::Retry));
    CHECK(same(l.sent[1].dst(), kMacL)); // to ourselves: where we receive
    CHECK(l.sent[2].is(SessionType::Connect));
    CHECK(l.sent[3].is(SessionType::Accept));
    CHECK(l.sent[4].is_ka(0));
    CHECK(l.t->counters().arp_tx == 0);
    REQUIRE(l.events.size() == 2);
    CHECK(l.t->counters().established == 2);
    SECTION("it lives like any other") {
        net.run_to(T0 + 3 * kSec, 10 * kMs);
        CHECK(l.sent.size() == 5 + 2 * 3);
        CHECK(c->state == SessionState::Established);
        CHECK(s->state == SessionState::Established);
    }
    SECTION("the acceptor's half ends unheard: the connector's probe gets a RESET, sent where it receives") {
        net.fate = [](const Node&, const Pkt& p) { return p.is(SessionType::Close) ? Fate::Drop : Fate::Deliver; };
        l.t->close(s, net.now);
        net.flush();
        CHECK(s->end == SessionEnd::Closed);
        CHECK(c->state == SessionState::Established); // its CLOSE was lost
        net.run_to(T0 + kSec);
        REQUIRE(l.sent.size() == 8); // ..., CLOSE, probe, RESET
        const Pkt& r = l.sent[7];
        CHECK(r.is(SessionType::Reset));
        CHECK(r.nonce() == l.sent[6].nonce());
        CHECK(same(r.dst(), kMacL));
        CHECK(same(r.src(), kMacA));
        CHECK(c->end == SessionEnd::PeerReset);
    }
}

// 13 --------------------------------------------------------------------------

TEST_CASE("forget(): an Ended session is gone; notifications may hold or forget sessions mid-poll", "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA);
    Node b(net, "B", kMacB, kIpB);
    Acceptor acc;
    listen(b, acc);

    SECTION("forget after the end") {
        auto [sa, sb] = establish(a, b);
        const uint16_t ida = sa->id, idb = sb->id;
        a.t->close(sa, net.now);
        net.flush();
        REQUIRE(sb->state == SessionState::Ended);
        a.t->forget(sa);
        b.t->forget(sb);
        CHECK(a.t->find(ida) == nullptr);
        CHECK(b.t->find(idb) == nullptr);
        CHECK(a.t->sessions().empty());
        CHECK(b.t->sessions().empty());
        // A new session gets a new id, not the forgotten one.
        Pair p = establish(a, b);
        CHECK(p.a->id != ida);
        CHECK(p.b->id != idb);
        CHECK(a.t->sessions().size() == 1);
    }

    // Three sessions to nobody: they time out in the same poll.
    std::vector<uint16_t> ids;
    auto three_to_nobody = [&] {
        b.up = false;
        for (int i = 0; i < 3; i++)
            ids.push_back(connect(a)->id);
        net.flush();
    };
    const uint64_t timeout = T0 + 5 * kSec;

    SECTION("pointers recorded by the notify callback stay valid until forget()") {
        three_to_nobody();
        std::vector<Session*> seen;
        a.also = [&](Session& s) { seen.push_back(&s); };
        net.run_to(timeout, 100 * kMs);
        REQUIRE(seen.size() == 3);
        for (size_t i = 0; i < 3; i++) {
            CHECK(seen[i] == a.t->find(ids[i]));
            CHECK(seen[i]->state == SessionState::Ended);
            CHECK(seen[i]->end == SessionEnd::NoAnswer);
        }
        for (Session* s : seen)
            a.t->forget(s);
        CHECK(a.t->sessions().empty());
    }

    SECTION("each session forgotten from its own Ended notification, mid-poll") {
        three_to_nobody();
        a.also = [&](Session& s) {
            if (s.state == SessionState::Ended)
                a.t->forget(&s);
        };
        net.run_to(timeout, 100 * kMs);
        REQUIRE(a.events.size() == 3);
        for (size_t i = 0; i < 3; i++) {
            CHECK(a.events[i].id == ids[i]);
            CHECK(a.events[i].end == SessionEnd::NoAnswer);
            CHECK(a.events[i].at == timeout);
            CHECK(a.t->find(ids[i]) == nullptr);
        }
        CHECK(a.t->sessions().empty());
    }

    SECTION("forgotten from the notification of a frame (the peer's CLOSE)") {
        auto [sa, sb] = establish(a, b);
        const uint16_t idb = sb->id;
        b.also = [&](Session& s) {
            if (s.state == SessionState::Ended)
                b.t->forget(&s);
        };
        a.t->close(sa, net.now);
        net.flush();
        CHECK(b.t->find(idb) == nullptr);
        CHECK(b.events.back().end == SessionEnd::PeerClosed);
    }
}

// Rails ----------------------------------------------------------------------

namespace {
// A rail's address: 10.79.R.H, MAC 02:00:00:00:R:H.
RailAddress rail_addr(uint8_t rail, uint8_t host) {
    RailAddress r;
    r.ip = RTE_IPV4(10, 79, rail, host);
    const uint8_t mac[6] = {0x02, 0, 0, 0, rail, host};
    memcpy(r.mac, mac, 6);
    return r;
}
void check_rail(const SessionLink& l, uint32_t r, const RailAddress& src, const RailAddress& dst) {
    INFO("rail " << r);
    CHECK(memcmp(l.rail[r].macs, dst.mac, 6) == 0);
    CHECK(memcmp(l.rail[r].macs + 6, src.mac, 6) == 0);
    CHECK(l.rail[r].ips[0] == rte_cpu_to_be_32(src.ip));
    CHECK(l.rail[r].ips[1] == rte_cpu_to_be_32(dst.ip));
}
} // namespace

TEST_CASE("rails: CONNECT and ACCEPT name each end's rails; both links stripe over the rails both ends have, "
          "rail i to the peer's rail i, rail 0 the session's own addresses",
          "[session]") {
    Net net;
    const uint8_t a_rails = GENERATE(0, 1, 3);
    const uint8_t b_rails = GENERATE(0, 2, 3);
    Node a(net, "A", kMacA, kIpA, [&](SessionTable::Config& c) {
        c.nrails = a_rails;
        for (uint8_t i = 0; i < a_rails; i++)
            c.rails[i] = rail_addr(static_cast<uint8_t>(i + 1), 1);
    });
    Node b(net, "B", kMacB, kIpB, [&](SessionTable::Config& c) {
        c.nrails = b_rails;
        for (uint8_t i = 0; i < b_rails; i++)
            c.rails[i] = rail_addr(static_cast<uint8_t>(i + 1), 2);
    });
    Acceptor acc;
    listen(b, acc);
    const Pair p = establish(a, b);
    INFO("A has " << unsigned{a_rails} << " rails beyond its first, B " << unsigned{b_rails});
    const uint32_t both = 1u + std::min(a_rails, b_rails);
    for (const Session* s : {p.a, p.b}) {
        REQUIRE(s->link != nullptr);
        CHECK(s->link->rails == both);
        // Rail 0: the control template's addresses.
        CHECK(memcmp(s->link->rail[0].macs, s->link->l2l4, 12) == 0);
        CHECK(memcmp(s->link->rail[0].ips, s->link->l2l4 + kEthLen + 12, 8) == 0);
    }
    CHECK(p.a->peer_nrails == b_rails);
    CHECK(p.b->peer_nrails == a_rails);
    for (uint32_t r = 1; r < both; r++) {
        const auto r8 = static_cast<uint8_t>(r);
        check_rail(*p.a->link, r, rail_addr(r8, 1), rail_addr(r8, 2));
        check_rail(*p.b->link, r, rail_addr(r8, 2), rail_addr(r8, 1));
    }
    // On the wire: every CONNECT and the ACCEPT name the sender's rails.
    for (const Node* n : {&a, &b})
        for (const Pkt& k : n->sent)
            if (k.is(SessionType::Connect) || k.is(SessionType::Accept))
                CHECK(k.bytes[kFrameOverhead + 68] == (n == &a ? a_rails : b_rails));
}

TEST_CASE("rails: keep-alives ask by every rail and are answered by the rail they came by; a session whose first "
          "rail is down lives on the others; CLOSE goes by every rail",
          "[session]") {
    Net net;
    Node a(net, "A", kMacA, kIpA, [&](SessionTable::Config& c) {
        c.nrails = 1;
        c.rails[0] = rail_addr(1, 1);
    });
    Node b(net, "B", kMacB, kIpB, [&](SessionTable::Config& c) {
        c.nrails = 1;
        c.rails[0] = rail_addr(1, 2);
    });
    Acceptor acc;
    listen(b, acc);
    const Pair p = establish(a, b);
    REQUIRE(p.a->link->rails == 2);
    auto on_rail1 = [](const Pkt& k) { return be32(k.bytes, 26) >> 8 == (RTE_IPV4(10, 79, 1, 0) >> 8); };
    const size_t a0 = a.sent.size(), b0 = b.sent.size();
    net.run_to(T0 + kSec + 10 * kMs, kMs); // the first round of probes
    std::vector<const Pkt*> asks, answers;
    for (size_t i = a0; i < a.sent.size(); i++)
        if (a.sent[i].is_ka(kKeepaliveAsk))
            asks.push_back(&a.sent[i]);
    for (size_t i = b0; i < b.sent.size(); i++)
        if (b.sent[i].is_ka(kKeepaliveAnswer))
            answers.push_back(&b.sent[i]);
    REQUIRE(asks.size() == 2);
    REQUIRE(answers.size() == 2);
    CHECK_FALSE(on_rail1(*asks[0])); // rail 0: the session's own addresses
    CHECK(be32(asks[0]->bytes, 26) == kIpA);
    CHECK(on_rail1(*asks[1]));
    CHECK(be32(asks[1]->bytes, 30) == RTE_IPV4(10, 79, 1, 2));
    CHECK(memcmp(asks[1]->bytes.data(), rail_addr(1, 2).mac, 6) == 0);
    for (const Pkt* k : answers) { // each by the rail its probe came by
        const bool r1 = on_rail1(*k);
        CHECK(std::count_if(asks.begin(), asks.end(), [&](const Pkt* q) {
                  return q->nonce() == k->nonce() && on_rail1(*q) == r1;
              }) == 1);
    }
    SECTION("rail 0 down: nothing by it for three peer timeouts, and both ends live") {
        net.fate = [&](const Node&, const Pkt& k) { return on_rail1(k) ? Fate::Deliver : Fate::Drop; };
        net.run_to(T0 + 16 * kSec, 10 * kMs);
        CHECK(p.a->state == SessionState::Established);
        CHECK(p.b->state == SessionState::Established);
        SECTION("CLOSE by every rail: the peer ends PeerClosed by rail 1") {
            a.t->close(p.a, net.now);
            net.flush();
            CHECK(p.b->state == SessionState::Ended);
            CHECK(p.b->end == SessionEnd::PeerClosed);
            CHECK(std::count_if(a.sent.begin(), a.sent.end(), [](const Pkt& k) { return k.is(SessionType::Close); }) == 2);
        }
    }
    SECTION("CLOSE by every rail, both up: the peer ends by the first and takes the copy, no drop") {
        const uint64_t rx = b.t->counters().rx, drops = b.drops_total();
        a.t->close(p.a, net.now);
        net.flush();
        CHECK(p.b->end == SessionEnd::PeerClosed);
        CHECK(b.t->counters().rx == rx + 2);
        CHECK(b.drops_total() == drops);
        CHECK(b.events.size() == 2);
    }
    SECTION("every rail down: both ends time out, as without rails") {
        net.fate = [](const Node&, const Pkt&) { return Fate::Drop; };
        net.run_to(T0 + 16 * kSec, 10 * kMs);
        CHECK(p.a->end == SessionEnd::PeerTimeout);
        CHECK(p.b->end == SessionEnd::PeerTimeout);
    }
}
