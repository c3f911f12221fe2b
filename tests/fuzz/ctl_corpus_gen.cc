// fuzz_ctl's seed corpus (fuzz_ctl_replay --write-corpus DIR): the
// handshake's steps, both ends, and the sender's ACKs and NACKs, each as
// the packets a peer sends, built with the library's own builders
// (build_session, build_ack, build_arp_request); and one input per refusal.
// Deterministic: the same binary writes the same files. Each seed names its
// outcome, checked exactly when it is written and by `--check-seeds DIR`
// (the test fuzz_ctl_seeds): the packets the table sent, in order; how its
// sessions ended; the sessions accepted and confirmed; the sender's ACKs,
// NACKs, deliveries, failures and retransmitted packets; the drop reasons
// counted (each named one at least once, no other).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_mbuf.h>

#include "fixtures.h"
#include "fuzz_ctl.h"
#include "seed_files.h"
#include "tailmark/arp.h"
#include "tailmark/control.h"

using namespace tailmark;

namespace tmfuzz::ctl {
namespace {

using Bytes = std::vector<uint8_t>;
using R = DropReason;

constexpr size_t UDP = kEthLen + kIpLen, B = kFrameOverhead;

// The peer's connector session: what its CONNECTs say.
constexpr uint16_t kPeerSession = 7;
constexpr uint32_t kPeerEpoch = 0xC0C0C0C0;
constexpr uint64_t kPeerNonce = 0x0123456789ABCDEF;
// The peer's acceptor session: what its ACCEPTs say.
constexpr uint16_t kPeerAcceptor = 200;
constexpr uint32_t kPeerAcceptorEpoch = 0xACCE0001;

// What the peer's packets are repaired with: authentic, echoing what the
// table told it, each number fresh; kToAcceptor: to the newest acceptor
// session (else the connector's).
constexpr uint8_t kAuthentic = kCtlFixEcho | kCtlFixSeq | kCtlFixMac;
constexpr uint8_t kToAcceptor = kAuthentic | kCtlAcceptor;

// The peer's L2-L4 towards the table, from `port`.
void l2l4(uint8_t (&t)[kEthLen + kIpLen + kUdpLen], uint16_t port = kPort) {
    memset(t, 0, sizeof(t));
    auto* eth = reinterpret_cast<rte_ether_hdr*>(t);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(t + kEthLen);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(t + kEthLen + kIpLen);
    eth->dst_addr = kMac;
    eth->src_addr = kPeerMac;
    eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->src_addr = rte_cpu_to_be_32(kPeerIp);
    ip->dst_addr = rte_cpu_to_be_32(kIp);
    udp->src_port = rte_cpu_to_be_16(port);
    udp->dst_port = rte_cpu_to_be_16(kPort);
}

Bytes taken(rte_mbuf* m) {
    if (m == nullptr) {
        fprintf(stderr, "ctl corpus generator: a builder refused\n");
        exit(2);
    }
    Bytes b = tmtest::flat(m);
    rte_pktmbuf_free(m);
    return b;
}

Bytes session(const SessionMsg& m, const SipKey& key = kListenKey, uint16_t port = kPort) {
    uint8_t t[kEthLen + kIpLen + kUdpLen];
    l2l4(t, port);
    return taken(build_session(pool(), t, key, m));
}

SessionMsg msg(SessionType type, uint8_t flags = 0) {
    SessionMsg m;
    m.type = type;
    m.flags = flags;
    return m; // ids, epochs, service and nonce 0: the harness echoes them (kCtlFixEcho)
}

// The peer's CONNECT: two flows, its MTU 1500, the table's default version.
SessionMsg connect_msg(uint16_t session = kPeerSession, uint32_t epoch = kPeerEpoch) {
    SessionMsg m = msg(SessionType::Connect);
    m.service = kService;
    m.src_session = session;
    m.src_epoch = epoch;
    m.nonce = kPeerNonce + session + epoch;
    m.seq = 1;
    m.nflows = 2;
    m.mtu = 1500;
    m.ring_size = 64;
    m.max_msg = 4096;
    m.key = 0x1234;
    m.data_version = kVersion2;
    return m;
}

// The peer's ACCEPT of the table's CONNECT: what the table proposed.
SessionMsg accept_msg() {
    SessionMsg m = msg(SessionType::Accept);
    m.src_session = kPeerAcceptor;
    m.src_epoch = kPeerAcceptorEpoch;
    m.nflows = kConnFlows;
    m.mtu = 1500;
    m.ring_size = kConnRing;
    m.max_msg = kConnMaxMsg;
    m.key = 0x5678;
    m.flow_base = 300;
    m.data_version = kVersion2;
    m.key_nonce = 0x4B4E4F4E4345;
    return m;
}

SessionMsg with_seq(SessionMsg m, uint64_t seq) {
    m.seq = seq;
    return m;
}

// An ACK or NACK to the sender; with kAuthentic its cursors are relative to
// the sender's released cursor.
Bytes ack(uint32_t released, uint32_t acked, uint64_t seq = 0) {
    Control c;
    c.released_upto = released;
    c.acked_upto = acked;
    c.seq = seq;
    uint8_t t[kEthLen + kIpLen + kUdpLen];
    l2l4(t);
    return taken(build_ack(pool(), t, kAckKey, c));
}
Bytes nack(uint32_t msg_id, NackRange r, uint64_t seq = 0) {
    Control c;
    c.nack = true;
    c.n.msg_id = msg_id;
    c.n.nranges = 1;
    c.n.ranges[0] = r;
    c.seq = seq;
    uint8_t t[kEthLen + kIpLen + kUdpLen];
    l2l4(t);
    return taken(build_ack(pool(), t, kAckKey, c));
}

Bytes arp_who_has(uint32_t ip) { return taken(build_arp_request(pool(), kPeerMac, kPeerIp, ip)); }
Bytes arp_reply_to_table() {
    ArpInfo req;
    req.op = kArpOpRequest;
    memcpy(req.sha.addr_bytes, kMac.addr_bytes, 6);
    req.spa = kIp;
    req.tpa = kPeerIp;
    return taken(build_arp_reply(pool(), kPeerMac, kPeerIp, req));
}

Bytes flip_last(Bytes f) {
    f.back() ^= 0x01;
    return f;
}

struct In {
    Bytes b;
    explicit In(uint8_t cfg) { b.push_back(cfg); }
    bool split = false; // every frame from here on in two mbufs
    In& add(const Bytes& f, uint8_t c = 0) {
        const size_t l = f.size() | (split ? kLenSplit : 0);
        b.push_back(c);
        b.push_back(static_cast<uint8_t>(l >> 8));
        b.push_back(static_cast<uint8_t>(l));
        b.insert(b.end(), f.begin(), f.end());
        return *this;
    }
    In& tick(uint8_t step, uint8_t c = 0) { return add({}, ctl(c, step)); }
    // The handshake, the table listening: CONNECT, RETRY, CONNECT with the
    // cookie, ACCEPT; `confirm`: and the connector's KEEPALIVE confirming it.
    In& handshake(bool confirm, const SessionMsg& m = connect_msg()) {
        add(session(m));
        add(session(m), kCtlFixEcho | kCtlFixMac);
        if (confirm)
            add(session(msg(SessionType::Keepalive)), kToAcceptor);
        return *this;
    }
    // The table's CONNECT accepted by the peer.
    In& accepted() { return add(session(accept_msg(), kConnKey), kAuthentic); }
};

struct Expect {
    std::string sent{};
    std::string ends{};
    uint32_t accepted = 0, confirmed = 0;
    uint64_t established = 0, refused = 0;
    uint64_t acks = 0, nacks = 0, delivered = 0, failed = 0, retx = 0;
    std::vector<R> drops{};
};

struct Seed {
    std::string name;
    Bytes input;
    Expect want;
};

std::vector<Seed> seeds() {
    std::vector<Seed> s;
    const uint8_t L = kCfgNoConnect; // the table only listens

    // ---- the handshake, the table listening ----
    s.push_back({"connect_answered_by_retry", In(L).add(session(connect_msg())).b, {.sent = "retry"}});
    s.push_back({"connect_valid", In(L).handshake(false).b,
                 {.sent = "retry accept", .accepted = 1, .established = 1}});
    s.push_back({"connect_confirmed", In(L).handshake(true).b,
                 {.sent = "retry accept", .accepted = 1, .confirmed = 1, .established = 1}});
    {
        In in(L);
        in.split = true;
        s.push_back({"connect_confirmed_chained", in.handshake(true).b,
                     {.sent = "retry accept", .accepted = 1, .confirmed = 1, .established = 1}});
        Bytes padded = session(connect_msg());
        padded.resize(2500); // Ethernet padding past one mbuf's data room: chained
        s.push_back({"connect_padded_chained", In(L).add(padded).b, {.sent = "retry"}});
    }
    s.push_back({"connect_deferred_accept", In(L | kCfgDefer).handshake(true).b,
                 {.sent = "retry accept", .accepted = 1, .confirmed = 1, .established = 1}});
    s.push_back({"connect_bad_mac", In(L).add(flip_last(session(connect_msg()))).b, {.drops = {R::ControlBadAuth}}});
    s.push_back({"connect_other_key", In(L).add(session(connect_msg(), kConnKey)).b, {.drops = {R::ControlBadAuth}}});
    {
        SessionMsg m = connect_msg();
        m.service = 999;
        s.push_back({"connect_unknown_service", In(L).add(session(m)).b, {.drops = {R::UnknownSession}}});
        m = connect_msg();
        m.cookie = 0x00C0FFEE00C0FFEE;
        s.push_back({"connect_forged_cookie", In(L).add(session(m)).b, {.sent = "retry"}});
        m = connect_msg();
        m.nflows = 0;
        s.push_back({"connect_malformed_no_flows", In(L).add(session(m)).b, {.drops = {R::ControlMalformed}}});
        m = connect_msg();
        m.ring_size = 48;
        s.push_back({"connect_refused_ring_size", In(L).handshake(false, m).b, {.sent = "retry refuse", .refused = 1}});
        m = connect_msg();
        m.nflows = kMaxFlows + 1;
        s.push_back({"connect_refused_no_room", In(L).handshake(false, m).b, {.sent = "retry refuse", .refused = 1}});
        m = connect_msg();
        m.data_version = kVersion;
        s.push_back({"connect_refused_version_data_auth", In(L | kCfgDataAuth).handshake(false, m).b,
                     {.sent = "retry refuse", .refused = 1}});
    }
    {
        // The cookie is good for one to two periods (2 s), from the address
        // it went to, for the CONNECT it answered.
        const SessionMsg m = connect_msg();
        s.push_back({"connect_stale_cookie",
                     In(L).add(session(m)).add(session(m), ctl(kCtlFixEcho | kCtlFixMac, kStepLong)).b,
                     {.sent = "retry retry"}});
        s.push_back({"connect_cookie_from_another_port",
                     In(L).add(session(m)).add(session(m, kListenKey, kPort + 1), kCtlFixEcho | kCtlFixMac).b,
                     {.sent = "retry retry"}});
        SessionMsg other = m;
        other.nonce++;
        s.push_back({"connect_cookie_of_another_nonce",
                     In(L).add(session(m)).add(session(other), kCtlFixEcho | kCtlFixMac).b, {.sent = "retry retry"}});
        // Retransmitted (its ACCEPT lost): answered again, nothing new made.
        s.push_back({"connect_retransmitted",
                     In(L).handshake(false).add(session(m), kCtlFixEcho | kCtlFixMac).b,
                     {.sent = "retry accept accept", .accepted = 1, .established = 1}});
    }
    s.push_back({"connect_table_full",
                 In(L | kCfgSmallTable).handshake(false, connect_msg(7)).handshake(false, connect_msg(8))
                     .handshake(false, connect_msg(9)).b,
                 {.sent = "retry accept retry accept retry", .accepted = 2, .established = 2,
                  .drops = {R::ControlBacklog}}});
    s.push_back({"acceptor_unconfirmed_times_out", In(L).handshake(false).tick(kStepLong).b,
                 {.sent = "retry accept", .ends = "no_answer", .accepted = 1, .established = 1}});
    // A new incarnation of the peer's session (another epoch) replaces the
    // confirmed one once it is confirmed itself.
    s.push_back({"connect_new_incarnation_replaces",
                 In(L).handshake(true).handshake(true, connect_msg(kPeerSession, kPeerEpoch + 1)).b,
                 {.sent = "retry accept retry accept", .ends = "replaced", .accepted = 2, .confirmed = 2,
                  .established = 2}});

    // ---- keep-alives and closes at the acceptor ----
    {
        // The confirmation numbered 2 (the CONNECT took 1), then again.
        const Bytes ka = session(with_seq(msg(SessionType::Keepalive), 2));
        const uint8_t no_seq = kCtlFixEcho | kCtlFixMac | kCtlAcceptor;
        s.push_back({"keepalive_replayed", In(L).handshake(false).add(ka, no_seq).add(ka, no_seq).b,
                     {.sent = "retry accept", .accepted = 1, .confirmed = 1, .established = 1,
                      .drops = {R::ControlReplayed}}});
        s.push_back({"close_replayed", In(L).handshake(false).add(ka, no_seq)
                                           .add(session(with_seq(msg(SessionType::Close), 2)), no_seq).b,
                     {.sent = "retry accept", .accepted = 1, .confirmed = 1, .established = 1,
                      .drops = {R::ControlReplayed}}});
    }
    {
        SessionMsg ka = msg(SessionType::Keepalive);
        ka.dst_epoch = 0x0BAD0BAD;
        s.push_back({"keepalive_other_epoch", In(L).handshake(false).add(session(ka), kToAcceptor).b,
                     {.sent = "retry accept", .accepted = 1, .established = 1, .drops = {R::ControlStale}}});
        s.push_back({"keepalive_bad_mac", In(L).handshake(false).add(session(msg(SessionType::Keepalive)),
                                                                     kToAcceptor & ~kCtlFixMac).b,
                     {.sent = "retry accept", .accepted = 1, .established = 1, .drops = {R::ControlBadAuth}}});
    }
    s.push_back({"keepalive_probe_answered",
                 In(L).handshake(true).add(session(msg(SessionType::Keepalive, kKeepaliveAsk)), kToAcceptor).b,
                 {.sent = "retry accept keepalive_answer", .accepted = 1, .confirmed = 1, .established = 1}});
    {
        SessionMsg probe = msg(SessionType::Keepalive, kKeepaliveAsk);
        probe.nonce = uint64_t(1) << 32 | 0x5EED;
        s.push_back({"keepalive_probe_replayed",
                     In(L).handshake(true).add(session(probe), kToAcceptor).add(session(probe), kToAcceptor).b,
                     {.sent = "retry accept keepalive_answer", .accepted = 1, .confirmed = 1, .established = 1,
                      .drops = {R::ControlStale}}});
        // A probe for a session this end does not hold (it restarted): an
        // authentic one gets a RESET echoing it, a forged one nothing.
        probe.service = kService;
        probe.src_session = kPeerSession;
        probe.src_epoch = kPeerEpoch;
        probe.dst_session = 77;
        probe.dst_epoch = 0x77777777;
        probe.seq = 5;
        s.push_back({"keepalive_probe_unknown_session_reset", In(L).add(session(probe)).b, {.sent = "reset"}});
        s.push_back({"keepalive_probe_unknown_session_forged", In(L).add(flip_last(session(probe))).b,
                     {.drops = {R::UnknownSession}}});
    }
    s.push_back({"close_by_peer", In(L).handshake(true).add(session(msg(SessionType::Close)), kToAcceptor).b,
                 {.sent = "retry accept", .ends = "peer_closed", .accepted = 1, .confirmed = 1, .established = 1}});

    // ---- frames that are no SESSION packet ----
    s.push_back({"arp_request_answered", In(L).add(arp_who_has(kIp)).b, {.sent = "arp"}});
    s.push_back({"arp_not_ours", In(L).add(arp_who_has(RTE_IPV4(198, 18, 0, 9))).b, {.drops = {R::ArpNotOurs}}});
    s.push_back({"ack_to_table", In(L).add(ack(0, 0, 1)).b, {.drops = {R::Control}}});
    {
        Bytes cut = session(connect_msg());
        cut.resize(30);
        s.push_back({"truncated", In(L).add(cut).b, {.drops = {R::FrameTooShort}}});
    }

    // ---- the handshake, the table connecting ----
    s.push_back({"connector_no_answer", In(0).tick(kStepLong).b, {.sent = "connect", .ends = "no_answer"}});
    {
        SessionMsg retry = msg(SessionType::Retry);
        retry.src_epoch = 0x7E7E7E7E; // the acceptor's epoch for RETRYs; no session (src_session 0)
        retry.cookie = 0x00C00C1E00C00C1E;
        s.push_back({"connector_retry", In(0).add(session(retry, kConnKey), kAuthentic).b,
                     {.sent = "connect connect"}});
        retry.nonce = 0x1234;
        s.push_back({"connector_retry_other_nonce", In(0).add(session(retry, kConnKey), kAuthentic).b,
                     {.sent = "connect", .drops = {R::ControlStale}}});
    }
    s.push_back({"connector_accepted", In(0).accepted().b, {.sent = "connect keepalive", .established = 1}});
    s.push_back({"connector_accept_bad_mac",
                 In(0).add(session(accept_msg(), kConnKey), kAuthentic & ~kCtlFixMac).b,
                 {.sent = "connect", .drops = {R::ControlBadAuth}}});
    {
        SessionMsg a = accept_msg();
        a.ring_size = 32;
        s.push_back({"connector_bad_accept", In(0).add(session(a, kConnKey), kAuthentic).b,
                     {.sent = "connect close", .ends = "bad_accept"}});
        a = accept_msg();
        a.nonce = 0x1234;
        s.push_back({"connector_accept_other_nonce", In(0).add(session(a, kConnKey), kAuthentic).b,
                     {.sent = "connect", .drops = {R::ControlStale}}});
        const uint8_t no_seq = kCtlFixEcho | kCtlFixMac;
        const Bytes twice = session(with_seq(accept_msg(), 3), kConnKey);
        s.push_back({"connector_accept_replayed", In(0).add(twice, no_seq).add(twice, no_seq).b,
                     {.sent = "connect keepalive", .established = 1, .drops = {R::ControlReplayed}}});
        // Retransmitted (the confirmation was lost): confirmed again.
        s.push_back({"connector_accept_retransmitted", In(0).accepted().accepted().b,
                     {.sent = "connect keepalive keepalive", .established = 1}});
    }
    s.push_back({"connector_refused",
                 In(0).add(session([] {
                               SessionMsg r = msg(SessionType::Refuse);
                               r.src_session = kPeerAcceptor; // the session it made to refuse
                               r.src_epoch = kPeerAcceptorEpoch;
                               r.reason = RefuseReason::Busy;
                               return r;
                           }(), kConnKey), kAuthentic).b,
                 {.sent = "connect", .ends = "refused", .refused = 1}});
    {
        // A probe a second; answered, the peer stays; silent for 5 s, it is gone.
        In alive(0), silent(0);
        alive.accepted();
        silent.accepted();
        for (int i = 0; i < 5; i++) {
            alive.add(session(msg(SessionType::Keepalive, kKeepaliveAnswer), kConnKey), ctl(kAuthentic, kStepSec));
            silent.tick(kStepSec);
        }
        const std::string probes = "connect keepalive keepalive_ask keepalive_ask keepalive_ask keepalive_ask "
                                   "keepalive_ask";
        s.push_back({"connector_keepalive_answered", alive.b, {.sent = probes, .established = 1}});
        s.push_back({"connector_peer_timeout", silent.b,
                     {.sent = probes, .ends = "peer_timeout", .established = 1}});
    }
    s.push_back({"connector_reset",
                 In(0).accepted().add(session(msg(SessionType::Reset), kConnKey), ctl(kAuthentic, kStepSec)).b,
                 {.sent = "connect keepalive keepalive_ask", .ends = "peer_reset", .established = 1}});
    {
        SessionMsg r = msg(SessionType::Reset);
        r.nonce = 0x5555;
        s.push_back({"connector_reset_not_echoing",
                     In(0).accepted().add(session(r, kConnKey), ctl(kAuthentic, kStepSec)).b,
                     {.sent = "connect keepalive keepalive_ask", .established = 1, .drops = {R::ControlStale}}});
    }
    s.push_back({"connector_closed_by_peer",
                 In(0).accepted().add(session(msg(SessionType::Close), kConnKey), kAuthentic).b,
                 {.sent = "connect keepalive", .ends = "peer_closed", .established = 1}});
    s.push_back({"connector_resolves_by_arp",
                 In(kCfgArp).tick(kStepShort).add(arp_reply_to_table()).tick(kStepShort).b,
                 {.sent = "arp connect"}});

    // ---- the sender: ACKs and NACKs (8 messages out, ids 0-7) ----
    const uint8_t S = kAuthentic | kCtlSender;
    s.push_back({"ack_delivers", In(L).add(ack(3, 8), S).b, {.acks = 1, .delivered = 3}});
    {
        // Congestion control paces the first messages out; the ACK's echo is
        // an RTT sample.
        Control c;
        c.released_upto = c.acked_upto = 1;
        c.echo = 0x0100;
        c.hold_ns = 1000;
        uint8_t t[kEthLen + kIpLen + kUdpLen];
        l2l4(t);
        s.push_back({"ack_delivers_cc", In(L | kCfgCc).add(taken(build_ack(pool(), t, kAckKey, c)), S).b,
                     {.acks = 1, .delivered = 1}});
    }
    {
        In in(L);
        in.split = true;
        s.push_back({"ack_delivers_chained", in.add(ack(3, 8), S).b, {.acks = 1, .delivered = 3}});
    }
    s.push_back({"ack_bad_mac", In(L).add(ack(3, 8), S & ~kCtlFixMac).b, {.drops = {R::ControlBadAuth}}});
    {
        const Bytes twice = ack(1, 2, 9);
        const uint8_t no_seq = S & ~kCtlFixSeq;
        s.push_back({"ack_replayed", In(L).add(twice, no_seq).add(twice, no_seq).b,
                     {.acks = 1, .delivered = 1, .drops = {R::ControlReplayed}}});
    }
    {
        Bytes stale = ack(3, 8);
        stale[B + 11] ^= 0x01; // sender_epoch: kept by the echo, not this incarnation's
        s.push_back({"ack_stale_epoch", In(L).add(stale, S).b, {.drops = {R::ControlStale}}});
        Bytes other = ack(3, 8);
        other[kEthLen + kIpLen + kUdpLen + 3] = 9; // flow 9: none such
        s.push_back({"ack_unknown_flow", In(L).add(other, S).b, {.drops = {R::UnknownFlow}}});
    }
    s.push_back({"ack_beyond_sent", In(L).add(ack(3, 20), S).b, {.drops = {R::ControlMalformed}}});
    s.push_back({"ack_released_beyond_acked", In(L).add(ack(5, 4), S).b, {.drops = {R::ControlMalformed}}});
    s.push_back({"nack_retransmits", In(L).add(nack(1, {0, 0}), S).tick(kStepShort, kCtlSender).b,
                 {.nacks = 1, .retx = 3}});
    // Beyond the group: nothing to send, the request let go; the next is served.
    s.push_back({"nack_range_beyond_group",
                 In(L).add(nack(1, {200, 1}), S).tick(kStepShort, kCtlSender).add(nack(1, {0, 0}), S)
                     .tick(kStepShort, kCtlSender).b,
                 {.nacks = 2, .retx = 3}});
    {
        Bytes no_ranges = ack(0, 0);
        no_ranges[kEthLen + kIpLen + kUdpLen + 1] = static_cast<uint8_t>(Flags::Nack);
        s.push_back({"nack_without_ranges", In(L).add(no_ranges, S).b, {.drops = {R::ControlMalformed}}});
        In full(L);
        for (int i = 0; i < 9; i++)
            full.add(nack(1, {0, 1}), S);
        s.push_back({"nack_queue_full", full.b, {.nacks = 8, .drops = {R::NackQueueFull}}});
    }
    // ---- regressions: bugs this harness found in lib/ (issue 36), fixed ----
    // Sender::apply compared the cursors pairwise modulo 2^32: released
    // 0x60000000 <= acked 0xD0000000 <= sent 8 each held, so the released
    // cursor went past sent and the flow reported a billion deliveries of
    // messages never submitted. Now each cursor is checked against sent.
    s.push_back({"repro_ack_released_past_sent", In(L).add(ack(0x60000000, 0xD0000000), S).b,
                 {.drops = {R::ControlMalformed}}});
    s.push_back({"session_to_sender", In(L).add(session(connect_msg()), kCtlSender).b, {.drops = {R::Control}}});
    {
        // No ACK at all: the timer probes the 8 messages' LASTs at each of
        // retry_limit (4) expiries, the first late firing forgiven, then
        // gives the flow up: 8 messages failed, 4 x 8 probes.
        In silent(L);
        for (int i = 0; i < 7; i++)
            silent.tick(kStepSec, kCtlSender);
        s.push_back({"sender_retry_limit", silent.b, {.failed = 8, .retx = 32}});
    }
    return s;
}

std::string drops_text(const DropCounters& d) {
    std::string t;
    for (size_t i = 0; i < kDropReasonCount; i++)
        if (d[i]) {
            char b[64];
            snprintf(b, sizeof(b), " %s=%llu", kDropReasonNames[i].data(), static_cast<unsigned long long>(d[i]));
            t += b;
        }
    return t.empty() ? " none" : t;
}

// Runs one seed and says whether it did what its name says, exactly.
bool behaves(const Seed& sd) {
    LLVMFuzzerTestOneInput(sd.input.data(), sd.input.size());
    const RunStats& st = last_stats();
    const Expect& w = sd.want;
    bool drops_ok = true;
    for (size_t i = 0; i < kDropReasonCount; i++) {
        bool named = false;
        for (R r : w.drops)
            named = named || index(r) == i;
        drops_ok = drops_ok && (st.drops[i] > 0) == named;
    }
    const bool ok = drops_ok && st.sent == w.sent && st.ends == w.ends && st.accepted == w.accepted &&
                    st.confirmed == w.confirmed && st.established == w.established && st.refused == w.refused &&
                    st.acks == w.acks && st.nacks == w.nacks && st.delivered == w.delivered &&
                    st.failed == w.failed && st.retx_pkts == w.retx;
    if (!ok) {
        auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
        fprintf(stderr,
                "seed %s does not behave as named:\n"
                "  sent \"%s\" (want \"%s\"), ends \"%s\" (want \"%s\")\n"
                "  accepted %u (want %u), confirmed %u (want %u), established %llu (want %llu), refused %llu "
                "(want %llu)\n"
                "  sender: acks %llu (want %llu), nacks %llu (want %llu), delivered %llu (want %llu), failed %llu "
                "(want %llu), retransmitted packets %llu (want %llu)\n"
                "  drops:%s (want:",
                sd.name.c_str(), st.sent.c_str(), w.sent.c_str(), st.ends.c_str(), w.ends.c_str(), st.accepted,
                w.accepted, st.confirmed, w.confirmed, u(st.established), u(w.established), u(st.refused),
                u(w.refused), u(st.acks), u(w.acks), u(st.nacks), u(w.nacks), u(st.delivered), u(w.delivered),
                u(st.failed), u(w.failed), u(st.retx_pkts), u(w.retx), drops_text(st.drops).c_str());
        for (R r : w.drops)
            fprintf(stderr, " %s", kDropReasonNames[index(r)].data());
        fprintf(stderr, "%s)\n", w.drops.empty() ? " none" : "");
    }
    return ok;
}

std::vector<SeedFile> seed_files() {
    std::vector<SeedFile> v;
    for (Seed& sd : seeds()) {
        const std::string file = sd.name.rfind("repro_", 0) == 0 ? sd.name : "seed_" + sd.name;
        Bytes b = sd.input;
        v.push_back({file, std::move(b), [sd = std::move(sd)] { return behaves(sd); }});
    }
    return v;
}

struct Totals {
    uint64_t records = 0, sent = 0, accepted = 0, acks = 0;
} g_total; // replayed inputs, summed (tally)

} // namespace
} // namespace tmfuzz::ctl

namespace tmfuzz {

int write_corpus(const char* dir) { return write_seed_files("fuzz_ctl_replay", dir, ctl::seed_files()); }
int check_corpus(const char* dir) { return check_seed_files("fuzz_ctl_replay", dir, ctl::seed_files()); }

void tally() {
    const ctl::RunStats& s = ctl::last_stats();
    ctl::g_total.records += s.records;
    ctl::g_total.sent += s.sent.empty() ? 0 : 1 + std::count(s.sent.begin(), s.sent.end(), ' ');
    ctl::g_total.accepted += s.accepted;
    ctl::g_total.acks += s.acks + s.nacks;
}

std::string totals() {
    char b[160];
    snprintf(b, sizeof(b), "%llu records, %llu packets sent by the table, %llu sessions accepted, %llu ACKs/NACKs taken",
             static_cast<unsigned long long>(ctl::g_total.records), static_cast<unsigned long long>(ctl::g_total.sent),
             static_cast<unsigned long long>(ctl::g_total.accepted), static_cast<unsigned long long>(ctl::g_total.acks));
    return b;
}

} // namespace tmfuzz
