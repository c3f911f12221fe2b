// SessionTable's receive path on the control thread: each frame from the
// wire (on_frame), ARP, and the SESSION packets by type: CONNECT (with its
// RETRY token), ACCEPT, REFUSE, KEEPALIVE, RESET, CLOSE and RETRY. The table,
// what each end sends, and the timers (poll) are in session.cc.
#include "tailmark/session.h"

#include <algorithm>
#include <cstring>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_random.h>
#include <rte_udp.h>

#include "tailmark/log.h"
#include "tailmark/packet_parser.h"

namespace tailmark {

namespace {

// The frame's L2-L4, as sent: who it came from.
struct Origin {
    rte_ether_addr mac;
    Endpoint ep;
};
bool origin_of(const rte_mbuf* m, Origin& o) {
    uint8_t buf[kEthLen + kIpLen + kUdpLen];
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, sizeof(buf), buf));
    if (p == nullptr)
        return false;
    const auto* eth = reinterpret_cast<const rte_ether_hdr*>(p);
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(p + kEthLen);
    const auto* udp = reinterpret_cast<const rte_udp_hdr*>(p + kEthLen + kIpLen);
    o.mac = eth->src_addr;
    o.ep.ip = rte_be_to_cpu_32(ip->src_addr);
    o.ep.port = rte_be_to_cpu_16(udp->src_port);
    return true;
}

// The peer's rails beyond its first, as its CONNECT or ACCEPT names them.
void take_rails(Session& s, const SessionMsg& m) {
    s.peer_nrails = m.nrails;
    for (uint32_t i = 0; i < m.nrails; i++)
        s.peer_rails[i] = m.rails[i];
}

FlowParams params_of(const SessionMsg& m) {
    FlowParams p;
    p.nflows = m.nflows;
    p.mtu = m.mtu;
    p.ring_size = m.ring_size;
    p.max_msg = m.max_msg;
    p.key = m.key;
    p.keys_given = (m.key_flags & kKeysGiven) != 0;
    p.version = static_cast<uint8_t>(m.data_version);
    p.data_auth = (m.data_flags & kDataAuth) != 0;
    p.overrides.assign(m.overrides, m.overrides + m.noverrides);
    return p;
}

} // namespace

// --- frames -----------------------------------------------------------------

void SessionTable::on_frame(rte_mbuf* m, uint64_t now) {
    if (rte_pktmbuf_data_len(m) >= kEthLen &&
        rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type == RTE_BE16(RTE_ETHER_TYPE_ARP))
        on_arp(m, now);
    else
        on_session(m, now);
    rte_pktmbuf_free(m);
}

void SessionTable::on_arp(rte_mbuf* m, uint64_t now) {
    (void)now;
    ArpInfo a;
    const ArpVerdict v = parse_arp(m, a, cfg_.self.ip);
    // A resolved neighbour that claims another MAC is not believed
    // (ArpResolver::on_packet): counted, and said once per address.
    auto learn = [&] {
        const ArpResolver::Learn l = arp_.on_packet(a, cfg_.self.ip);
        if (l != ArpResolver::Learn::Refused && l != ArpResolver::Learn::RefusedAgain)
            return;
        ctr_.arp_refused++;
        // The control thread's ARP handling, once per address (RefusedAgain is
        // silent): never on a data packet's path.
        if (l == ArpResolver::Learn::Refused)
            TM_LOG(WARNING, lib, "ARP: %u.%u.%u.%u claims a new MAC; not believed (sessions keep theirs; the next " // control thread, once per address
               "session to it resolves it again)", a.spa >> 24, (a.spa >> 16) & 255, (a.spa >> 8) & 255, a.spa & 255);
    };
    switch (v) {
    case ArpVerdict::Request:
        ctr_.arp_rx++;
        learn();
        if (rte_mbuf* r = build_arp_reply(cfg_.pool, cfg_.mac, cfg_.self.ip, a); r != nullptr && tx_(r))
            ctr_.arp_tx++;
        else
            ctr_.tx_fail++;
        break;
    case ArpVerdict::Reply:
        ctr_.arp_rx++;
        learn();
        break;
    case ArpVerdict::NotForUs:
        learn(); // a resolved neighbour's change is reported, never taken
        count(DropReason::ArpNotOurs);
        break;
    default:
        count(DropReason::ArpNotOurs);
        break;
    }
}

// A RETRY token: SipHash under this table's own key of where the CONNECT
// came from (address, port, Ethernet source: the acceptor believes the
// frame's source MAC only as far as a RETRY sent to it came back), which
// session incarnation and nonce it names, and the time
// (cookie_period_us buckets: a token is good in its bucket and the next).
uint64_t SessionTable::cookie_for(const SessionMsg& msg, const Endpoint& from, const rte_ether_addr& from_mac,
                                  uint64_t bucket) const {
    uint8_t b[40] = {};
    memcpy(b + 0, &from.ip, 4);
    memcpy(b + 4, &from.port, 2);
    memcpy(b + 6, &msg.src_session, 2);
    memcpy(b + 8, &msg.src_epoch, 4);
    memcpy(b + 12, &msg.service, 2);
    memcpy(b + 16, &msg.nonce, 8);
    memcpy(b + 24, &bucket, 8);
    memcpy(b + 32, from_mac.addr_bytes, 6); // the session's peer MAC is the one the RETRY reached
    const uint64_t c = siphash24(cookie_key_, {b, sizeof(b)});
    return c != 0 ? c : 1;
}

// Answers a CONNECT without keeping anything: the token goes to the address
// the CONNECT came from, signed with the listener's key (the connector
// believes only what authenticates).
void SessionTable::send_retry(const SessionMsg& msg, const Endpoint& from, const rte_ether_addr& from_mac,
                              const SipKey& key, uint64_t now) {
    Session tmp = stand_in(0, retry_epoch_, msg.service, from, from_mac); // no session: RETRY's src_session is 0
    SessionMsg r = answer(msg, SessionType::Retry);
    r.cookie = cookie_for(msg, from, from_mac, now / us(cfg_.cookie_period_us));
    if (send(tmp, r, key))
        ctr_.retries++;
}

void SessionTable::on_connect(const SessionMsg& msg, const SessionFrame& raw, const Endpoint& from,
                              const rte_ether_addr& from_mac, uint64_t now) {
    auto li = listeners_.find(msg.service);
    if (li == listeners_.end()) {
        count(DropReason::UnknownSession); // no key to answer with: silence
        return;
    }
    if (!authentic(raw, li->second.key)) {
        count(DropReason::ControlBadAuth);
        return;
    }
    ctr_.rx++;
    // The same connector session again (its session, epoch and nonce), from
    // wherever it comes: its CONNECT was retried (our ACCEPT was lost, or is
    // on its way), or replayed. Nothing new is made for it.
    for (auto& [id, x] : sessions_)
        if (!x->connector && x->state != SessionState::Ended && x->peer_id == msg.src_session &&
            x->peer_epoch == msg.src_epoch && x->connect_nonce == msg.nonce && x->service == msg.service) {
            if (x->state == SessionState::Established && x->peer == from)
                send_accept(*x, msg.nonce);
            return;
        }
    // Nothing is kept for a CONNECT until its connector shows it receives at
    // the address it sends from: the token of a RETRY sent there, echoed.
    const uint64_t bucket = now / us(cfg_.cookie_period_us);
    if (msg.cookie == 0 ||
        (msg.cookie != cookie_for(msg, from, from_mac, bucket) &&
         msg.cookie != cookie_for(msg, from, from_mac, bucket - 1))) {
        send_retry(msg, from, from_mac, li->second.key, now);
        return;
    }
    // Another epoch of a session from the same address: a new incarnation.
    // The one to replace is the confirmed incarnation when there is one: a
    // pending session made by a replayed CONNECT is no incarnation, and it
    // ends at its deadline anyway.
    uint16_t older = 0;
    bool older_confirmed = false;
    for (auto& [id, x] : sessions_) {
        if (x->connector || x->state == SessionState::Ended || !(x->peer == from) || x->peer_id != msg.src_session ||
            x->service != msg.service || x->peer_epoch == msg.src_epoch)
            continue;
        if (!older_confirmed) {
            older = id;
            older_confirmed = x->confirmed;
        }
    }
    Session* s = make(false, now);
    if (s == nullptr) {
        count(DropReason::ControlBacklog);
        return;
    }
    s->peer = from;
    s->peer_mac = from == cfg_.self ? cfg_.rx_mac : from_mac; // to ourselves: where we receive
    s->service = msg.service;
    s->key = li->second.key;
    s->peer_id = msg.src_session;
    s->peer_epoch = msg.src_epoch;
    s->peer_base = msg.flow_base;
    s->connect_nonce = msg.nonce;
    take_rails(*s, msg);
    s->rx_win.take(msg.seq);
    s->replaces = older;
    if (from == cfg_.self)
        if (Session* c = find(msg.src_session); c != nullptr && c->connector && c->local_epoch == msg.src_epoch)
            s->local_peer = true;
    // The data version: the highest both speak; 1 between two ends of this
    // process (its frames never leave it: nothing to prove); below our
    // least, refused naming both.
    FlowParams proposed = params_of(msg);
    proposed.version = s->local_peer ? kVersion : std::min<uint8_t>(proposed.version, cfg_.max_version);
    proposed.data_auth = proposed.version == kVersion2 && (proposed.data_auth || cfg_.data_auth);
    s->params.version = proposed.version;
    s->params.data_auth = proposed.data_auth;
    do
        s->key_nonce = rte_rand();
    while (s->key_nonce == 0);
    make_link(*s);
    AcceptDecision d;
    if (!s->local_peer && (proposed.version < cfg_.min_version || (cfg_.data_auth && proposed.version < kVersion2))) {
        d.reason = RefuseReason::Version;
        d.expected = cfg_.data_auth ? kVersion2 : cfg_.min_version;
        d.got = msg.data_version;
    } else if (s->link != nullptr) {
        d = li->second.decide(*s, proposed);
    } else {
        d.reason = RefuseReason::NoRoom;
    }
    if (d.reason != RefuseReason::None) {
        SessionMsg r = answer(msg, SessionType::Refuse);
        r.reason = d.reason;
        r.index = d.index;
        r.expected = d.expected;
        r.got = d.got;
        send(*s, r, s->key);
        ctr_.refused++;
        forget(s);
        return;
    }
    s->params = d.agreed;
    s->params.nflows = proposed.nflows;
    s->params.version = proposed.version; // the table's choice, whatever the application agreed
    s->params.data_auth = proposed.data_auth;
    s->local_base = d.local_base;
    make_link(*s); // the agreed parameters in the data plane's view
    s->deadline = now + us(cfg_.connect_timeout_us); // to be confirmed by then
    s->last_rx = now;
    s->state = SessionState::Accepting;
    if (!d.defer)
        accept_ready(s, now);
}

void SessionTable::on_session(rte_mbuf* m, uint64_t now) {
    ParserConfig pc;
    pc.udp_port = cfg_.self.port;
    ParsedPacket p;
    DropReason r = parse_packet(m, pc, p);
    if (r == DropReason::None && !p.is_session())
        r = DropReason::Control;
    SessionFrame raw;
    SessionMsg msg;
    if (r == DropReason::None)
        r = read_session(m, p, raw, msg);
    Origin o;
    if (r == DropReason::None && !origin_of(m, o))
        r = DropReason::FrameTooShort;
    if (r != DropReason::None) {
        count(r);
        return;
    }
    if (msg.type == SessionType::Connect) {
        on_connect(msg, raw, o.ep, o.mac, now);
        return;
    }
    Session* s = find(msg.dst_session);
    const bool mine = s != nullptr && s->state != SessionState::Ended && msg.dst_epoch == s->local_epoch;
    // Not this end's session, or not from its peer's incarnation (ACCEPT,
    // REFUSE and RETRY come before the connector knows that).
    if (!mine || (msg.type != SessionType::Accept && msg.type != SessionType::Refuse && msg.type != SessionType::Retry &&
                  s->peer_epoch != msg.src_epoch)) {
        if (late_close(msg, raw, s))
            return;
        on_unknown_session(msg, raw, s, o.ep, o.mac);
        return;
    }
    if (!authentic(raw, s->key)) {
        count(DropReason::ControlBadAuth);
        return;
    }
    // Each of the peer's numbers once: a recorded KEEPALIVE replayed would
    // keep a dead peer's session alive, a recorded CLOSE end a later one.
    // (REFUSE, RESET and RETRY must echo a nonce of ours instead.)
    if ((msg.type == SessionType::Accept || msg.type == SessionType::Keepalive || msg.type == SessionType::Close) &&
        !s->rx_win.take(msg.seq)) {
        count(DropReason::ControlReplayed);
        return;
    }
    ctr_.rx++;
    switch (msg.type) {
    case SessionType::Accept:
        on_accept(msg, *s, now);
        return;
    case SessionType::Refuse:
        on_refuse(msg, *s, now);
        return;
    case SessionType::Keepalive: { // answered by the rail it came by
        uint32_t rail = 0;
        for (uint32_t i = 0; i < s->peer_nrails; i++)
            if (s->peer_rails[i].ip == o.ep.ip)
                rail = i + 1;
        on_keepalive(msg, *s, now, rail);
        return;
    }
    case SessionType::Reset:
        on_reset(msg, *s, now);
        return;
    case SessionType::Close:
        end(*s, SessionEnd::PeerClosed, now);
        return;
    case SessionType::Retry:
        on_retry(msg, *s, now);
        return;
    case SessionType::Connect:
        return;
    }
}

// The peer's CLOSE for a session this end has ended already: a copy by
// another rail (CLOSE goes by every rail), or the peer's own while ours was
// on its way (both ends closed at once). Authentic, fresh and of the
// session's incarnation, it is taken, not counted as a drop: it is the
// goodbye the peer owes, not stale input. Anything else goes on as before.
bool SessionTable::late_close(const SessionMsg& msg, const SessionFrame& raw, Session* s) {
    if (msg.type != SessionType::Close || s == nullptr || s->state != SessionState::Ended ||
        msg.dst_epoch != s->local_epoch || msg.src_epoch != s->peer_epoch || !authentic(raw, s->key))
        return false;
    if (!s->rx_win.take(msg.seq))
        count(DropReason::ControlReplayed);
    else
        ctr_.rx++;
    return true;
}

// A liveness probe for a session this end does not hold (it restarted,
// or ended it): an authentic one gets a RESET, so the peer gives up at
// once rather than after its timeout. It must echo the probe's nonce, so
// a recorded RESET cannot end a later session. Anything else: dropped.
void SessionTable::on_unknown_session(const SessionMsg& msg, const SessionFrame& raw, const Session* s,
                                      const Endpoint& from, const rte_ether_addr& from_mac) {
    auto li = listeners_.find(msg.service);
    if (msg.type == SessionType::Keepalive && (msg.flags & kKeepaliveAsk) && li != listeners_.end() &&
        authentic(raw, li->second.key)) {
        Session tmp = stand_in(msg.dst_session, msg.dst_epoch ? msg.dst_epoch : 1, msg.service, from, from_mac);
        SessionMsg reset = answer(msg, SessionType::Reset);
        reset.reason = RefuseReason::UnknownSession;
        send(tmp, reset, li->second.key);
        ctr_.rx++;
        return;
    }
    count(s == nullptr ? DropReason::UnknownSession : DropReason::ControlStale);
}

// The acceptor's answer to our CONNECT: the session is established, or
// ended (BadAccept) when the answer agrees to something not proposed.
void SessionTable::on_accept(const SessionMsg& msg, Session& s, uint64_t now) {
    if (!s.connector || msg.nonce != s.connect_nonce) {
        count(DropReason::ControlStale);
        return;
    }
    if (s.state == SessionState::Established) { // our confirmation was lost
        if (msg.src_epoch == s.peer_epoch) {
            SessionMsg k = to_peer(s, SessionType::Keepalive, rte_rand());
            send(s, k, s.key);
        }
        return;
    }
    if (s.state != SessionState::Connecting)
        return;
    // It must agree to what was proposed; only the MTU may shrink.
    uint64_t want = 0, got = 0;
    const RefuseReason bad = bad_accept(msg, s, want, got);
    s.peer_id = msg.src_session;
    s.peer_epoch = msg.src_epoch;
    s.peer_base = msg.flow_base;
    if (bad != RefuseReason::None) {
        s.refuse = bad;
        s.refuse_expected = want;
        s.refuse_got = got;
        s.state = SessionState::Established; // so that end() says CLOSE
        end(s, SessionEnd::BadAccept, now);
        return;
    }
    s.params.mtu = msg.mtu;
    s.params.key = msg.key;
    s.params.version = static_cast<uint8_t>(msg.data_version);
    s.params.data_auth = (msg.data_flags & kDataAuth) != 0;
    s.key_nonce = msg.key_nonce;
    s.params.overrides.assign(msg.overrides, msg.overrides + msg.noverrides);
    take_rails(s, msg);
    if (s.peer == cfg_.self)
        if (Session* a = find(msg.src_session); a != nullptr && !a->connector && a->local_epoch == msg.src_epoch)
            s.local_peer = true;
    make_link(s);
    if (s.link == nullptr) {
        end(s, SessionEnd::NoAnswer, now);
        return;
    }
    s.state = SessionState::Established;
    s.last_rx = now;
    ctr_.established++;
    notify_(s);
    // The confirmation: the acceptor lets an older incarnation go on it.
    SessionMsg k = to_peer(s, SessionType::Keepalive, rte_rand());
    send(s, k, s.key);
    s.next_tx = now + us(cfg_.keepalive_us);
}

// What an ACCEPT agrees to that was not proposed (None: nothing), with
// ours and its values, and a key's flow in s.refuse_index.
RefuseReason SessionTable::bad_accept(const SessionMsg& msg, Session& s, uint64_t& want, uint64_t& got) const {
    const FlowParams& p = s.params;
    RefuseReason bad = RefuseReason::None;
    if (msg.nflows != p.nflows)
        bad = RefuseReason::Flows, want = p.nflows, got = msg.nflows;
    else if (msg.ring_size != p.ring_size)
        bad = RefuseReason::RingSize, want = p.ring_size, got = msg.ring_size;
    else if (msg.max_msg != p.max_msg)
        bad = RefuseReason::MsgSize, want = p.max_msg, got = msg.max_msg;
    else if (msg.mtu > p.mtu || stride_for_mtu(msg.mtu, static_cast<uint8_t>(msg.data_version)) == 0)
        bad = RefuseReason::Mtu, want = p.mtu, got = msg.mtu;
    else if (msg.data_version > p.version || (msg.data_version < cfg_.min_version && s.peer != cfg_.self))
        bad = RefuseReason::Version, want = p.version, got = msg.data_version;
    else if (p.data_auth && !(msg.data_flags & kDataAuth) && s.peer != cfg_.self) // asked for, not taken
        bad = RefuseReason::Version, want = kDataAuth, got = msg.data_flags;
    if (bad == RefuseReason::None && p.keys_given)
        for (uint16_t i = 0; i < p.nflows && bad == RefuseReason::None; i++) {
            uint32_t k = msg.key;
            for (uint16_t j = 0; j < msg.noverrides; j++)
                if (msg.overrides[j].index == i)
                    k = msg.overrides[j].key;
            if (k != p.key_of(i))
                bad = RefuseReason::Key, want = p.key_of(i), got = k, s.refuse_index = i;
        }
    return bad;
}

// The acceptor's refusal of our CONNECT: the session ends (Refused).
void SessionTable::on_refuse(const SessionMsg& msg, Session& s, uint64_t now) {
    if (!s.connector || s.state != SessionState::Connecting || msg.nonce != s.connect_nonce) {
        count(DropReason::ControlStale);
        return;
    }
    s.refuse = msg.reason;
    s.refuse_index = msg.index;
    s.refuse_expected = msg.expected;
    s.refuse_got = msg.got;
    ctr_.refused++;
    end(s, SessionEnd::Refused, now);
}

// A KEEPALIVE: the connector's probe (answered here), the acceptor's answer,
// or the confirmation of an ACCEPT; the first the acceptor takes confirms its
// session, and an older incarnation it replaces ends.
void SessionTable::on_keepalive(const SessionMsg& msg, Session& s, uint64_t now, uint32_t rail) {
    // Freshness: an answer must echo one of the probes this end sent, a
    // probe must carry a sequence above the last one (its nonce's upper
    // half): a recording replayed later keeps no dead peer alive.
    if (msg.flags & kKeepaliveAnswer) {
        bool echoed = false;
        for (uint64_t n : s.ask_nonce)
            echoed |= n != 0 && n == msg.nonce;
        if (!s.connector || !echoed) {
            count(DropReason::ControlStale);
            return;
        }
    } else if (msg.flags & kKeepaliveAsk) {
        const uint32_t seq = static_cast<uint32_t>(msg.nonce >> 32);
        if (s.connector || static_cast<int32_t>(seq - s.peer_ask_seq) <= 0) {
            count(DropReason::ControlStale);
            return;
        }
        s.peer_ask_seq = seq;
    }
    s.last_rx = now;
    if (!s.connector && !s.confirmed && s.state == SessionState::Established) {
        s.confirmed = true;
        if (Session* old = find(s.replaces); old != nullptr && old != &s)
            end(*old, SessionEnd::Replaced, now);
        s.replaces = 0;
    }
    if (msg.flags & kKeepaliveAsk) {
        SessionMsg k = to_peer(s, SessionType::Keepalive, msg.nonce);
        k.flags = kKeepaliveAnswer;
        send(s, k, s.key, rail);
    }
}

// The peer knows no such session (it restarted): ended, if the RESET echoes
// one of our probes.
void SessionTable::on_reset(const SessionMsg& msg, Session& s, uint64_t now) {
    bool echoed = false;
    for (uint64_t n : s.ask_nonce)
        echoed |= n != 0 && n == msg.nonce;
    if (!s.connector || !echoed) {
        count(DropReason::ControlStale);
        return;
    }
    end(s, SessionEnd::PeerReset, now);
}

// The acceptor's token for our CONNECT: again at once, with it.
void SessionTable::on_retry(const SessionMsg& msg, Session& s, uint64_t now) {
    if (!s.connector || s.state != SessionState::Connecting || msg.nonce != s.connect_nonce) {
        count(DropReason::ControlStale);
        return;
    }
    if (s.cookie == msg.cookie)
        return; // a copy: the CONNECT with it went, and its retries go on their clock
    s.cookie = msg.cookie;
    send_connect(s, now);
}

} // namespace tailmark
