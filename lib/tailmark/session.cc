#include "tailmark/session.h"

#include <algorithm>
#include <cstring>
#include <new>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_random.h>
#include <rte_udp.h>

namespace tailmark {

std::string ip_to_string(uint32_t ip) {
    char b[16];
    snprintf(b, sizeof(b), "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255); // set-up only
    return b;
}

std::string to_string(const Endpoint& e) { return ip_to_string(e.ip) + ":" + std::to_string(e.port); }

uint32_t FlowParams::key_of(uint16_t index) const {
    for (const KeyOverride& o : overrides)
        if (o.index == index)
            return o.key;
    return key;
}

const char* to_string(SessionState s) {
    switch (s) {
    case SessionState::Resolving: return "resolving";
    case SessionState::Connecting: return "connecting";
    case SessionState::Accepting: return "accepting";
    case SessionState::Established: return "established";
    case SessionState::Ended: return "ended";
    }
    return "?";
}

const char* to_string(SessionEnd e) {
    switch (e) {
    case SessionEnd::None: return "none";
    case SessionEnd::Refused: return "refused";
    case SessionEnd::NoAnswer: return "no_answer";
    case SessionEnd::ArpFailed: return "arp_failed";
    case SessionEnd::PeerTimeout: return "peer_timeout";
    case SessionEnd::PeerReset: return "peer_reset";
    case SessionEnd::PeerClosed: return "peer_closed";
    case SessionEnd::Closed: return "closed";
    case SessionEnd::Replaced: return "replaced";
    case SessionEnd::BadAccept: return "bad_accept";
    }
    return "?";
}

namespace {

uint32_t random_epoch() {
    uint32_t e;
    do
        e = static_cast<uint32_t>(rte_rand());
    while (e == 0);
    return e;
}

void fill_params(SessionMsg& m, const FlowParams& p) {
    m.data_version = p.version;
    m.data_flags = p.data_auth && p.version == kVersion2 ? kDataAuth : 0;
    m.nflows = p.nflows;
    m.mtu = p.mtu;
    m.ring_size = p.ring_size;
    m.max_msg = p.max_msg;
    m.key = p.key;
    m.noverrides = static_cast<uint16_t>(p.overrides.size() < kMaxKeyOverrides ? p.overrides.size() : kMaxKeyOverrides);
    for (uint16_t i = 0; i < m.noverrides; i++)
        m.overrides[i] = p.overrides[i];
}

// A session's data key for one direction (version 2): SipHash-2-4 under
// the session's secret of a label, what the key is for (`what`: 't' the
// tag's SipHash key, 'h' --data-auth's POLYVAL key), the direction, both
// ends' handshake nonces and epochs, twice (the key's two halves). Each
// incarnation has its own; the keys never travel.
SipKey data_key(const SipKey& secret, bool from_connector, uint64_t connect_nonce, uint64_t key_nonce,
                uint32_t connector_epoch, uint32_t acceptor_epoch, uint8_t what = 't') {
    uint8_t b[32] = {'t', 'm', 'd', 'k', 2, static_cast<uint8_t>(from_connector ? 'c' : 'a'), 0, what};
    memcpy(b + 8, &connect_nonce, 8);
    memcpy(b + 16, &key_nonce, 8);
    memcpy(b + 24, &connector_epoch, 4);
    memcpy(b + 28, &acceptor_epoch, 4);
    SipKey k;
    b[6] = 0;
    k.k0 = siphash24(secret, {b, sizeof(b)});
    b[6] = 1;
    k.k1 = siphash24(secret, {b, sizeof(b)});
    return k;
}

} // namespace

SessionTable::SessionTable(const Config& cfg, Transmit tx, Notify notify)
    : cfg_(cfg), tx_(std::move(tx)), notify_(std::move(notify)), arp_(cfg.arp_tries) {
    cookie_key_ = {rte_rand(), rte_rand()};
    retry_epoch_ = random_epoch();
}

SessionTable::~SessionTable() {
    for (auto& [id, s] : sessions_)
        if (s->link != nullptr) {
            s->link->~SessionLink();
            rte_free(s->link);
        }
}

bool SessionTable::listen(uint16_t service, const SipKey& key, Decide decide) {
    if (listeners_.count(service))
        return false;
    listeners_[service] = Listener{key, std::move(decide)};
    return true;
}

void SessionTable::unlisten(uint16_t service) { listeners_.erase(service); }

Session* SessionTable::find(uint16_t id) {
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second.get();
}

std::vector<Session*> SessionTable::sessions() {
    std::vector<Session*> v;
    for (auto& [id, s] : sessions_)
        v.push_back(s.get());
    return v;
}

Session* SessionTable::make(bool connector, uint64_t now) {
    if (sessions_.size() >= cfg_.max_sessions || sessions_.size() >= 65535)
        return nullptr;
    while (next_id_ == 0 || sessions_.count(next_id_))
        next_id_++;
    auto s = std::make_unique<Session>();
    s->id = next_id_++;
    s->connector = connector;
    s->local_epoch = random_epoch();
    s->started = now;
    Session* p = s.get();
    sessions_[p->id] = std::move(s);
    return p;
}

// Own address -> the peer: what every control packet of the session starts with.
void SessionTable::template_to(const Session& s, uint8_t (&l2l4)[kEthLen + kIpLen + kUdpLen]) const {
    memset(l2l4, 0, sizeof(l2l4));
    auto* eth = reinterpret_cast<rte_ether_hdr*>(l2l4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(l2l4 + kEthLen);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(l2l4 + kEthLen + kIpLen);
    eth->dst_addr = s.peer_mac;
    eth->src_addr = cfg_.mac;
    eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->src_addr = rte_cpu_to_be_32(cfg_.self.ip);
    ip->dst_addr = rte_cpu_to_be_32(s.peer.ip);
    udp->src_port = rte_cpu_to_be_16(cfg_.self.port);
    udp->dst_port = rte_cpu_to_be_16(s.peer.port);
}

void SessionTable::make_link(Session& s) {
    if (s.link == nullptr) {
        void* mem = rte_zmalloc("tm_session_link", sizeof(SessionLink), 64); // set-up only
        if (mem == nullptr)
            return;
        s.link = new (mem) SessionLink();
    }
    SessionLink& l = *s.link;
    l.key = s.key;
    l.local_epoch = s.local_epoch;
    l.peer_epoch = s.peer_epoch;
    l.local_id = s.id;
    l.peer_id = s.peer_id;
    l.local_peer = s.local_peer;
    l.connector = s.connector;
    l.data_version = s.params.version;
    if (s.params.version == kVersion2) {
        const uint32_t ce = s.connector ? s.local_epoch : s.peer_epoch;
        const uint32_t ae = s.connector ? s.peer_epoch : s.local_epoch;
        l.tx_data_key = data_key(s.key, s.connector, s.connect_nonce, s.key_nonce, ce, ae);
        l.rx_data_key = data_key(s.key, !s.connector, s.connect_nonce, s.key_nonce, ce, ae);
        l.data_auth = s.params.data_auth;
        if (l.data_auth) {
            const SipKey th = data_key(s.key, s.connector, s.connect_nonce, s.key_nonce, ce, ae, 'h');
            const SipKey rh = data_key(s.key, !s.connector, s.connect_nonce, s.key_nonce, ce, ae, 'h');
            memcpy(l.tx_auth_h, &th, 16);
            memcpy(l.rx_auth_h, &rh, 16);
        }
    }
    template_to(s, l.l2l4);
    link_rails(s, l);
}

// The rails both ends have, rail i to the peer's rail i: each one's
// addresses as its data packets carry them. Not between two ends of this
// process (their frames never leave it).
void SessionTable::link_rails(const Session& s, SessionLink& l) const {
    l.rails = static_cast<uint8_t>(1 + (s.local_peer ? 0 : std::min(cfg_.nrails, s.peer_nrails)));
    for (uint32_t r = 0; r < l.rails; r++) {
        RailHeader& h = l.rail[r];
        if (r == 0) {
            h = RailHeader::of(l.l2l4);
            continue;
        }
        memcpy(h.macs, s.peer_rails[r - 1].mac, 6);
        memcpy(h.macs + 6, cfg_.rails[r - 1].mac, 6);
        h.ips[0] = rte_cpu_to_be_32(cfg_.rails[r - 1].ip);
        h.ips[1] = rte_cpu_to_be_32(s.peer_rails[r - 1].ip);
    }
}

// This end's rails beyond its first, into a CONNECT or ACCEPT.
void SessionTable::offer_rails(SessionMsg& m) const {
    m.nrails = cfg_.nrails;
    for (uint32_t i = 0; i < cfg_.nrails; i++)
        m.rails[i] = cfg_.rails[i];
}

bool SessionTable::send(Session& s, SessionMsg& m, const SipKey& key, uint32_t rail) {
    m.src_session = s.id;
    m.src_epoch = s.local_epoch;
    m.service = s.service;
    m.seq = ++s.tx_seq;
    uint8_t l2l4[kEthLen + kIpLen + kUdpLen];
    template_to(s, l2l4);
    if (rail != 0 && rail < rails_of(s)) // that rail's addresses: the data plane sends it by that rail
        s.link->rail[rail].write(l2l4);
    rte_mbuf* b = build_session(cfg_.pool, l2l4, key, m);
    if (b == nullptr || !tx_(b)) {
        ctr_.tx_fail++;
        return false;
    }
    ctr_.tx++;
    return true;
}

void SessionTable::send_connect(Session& s, uint64_t now) {
    SessionMsg m;
    m.type = SessionType::Connect;
    m.nonce = s.connect_nonce;
    m.cookie = s.cookie;
    fill_params(m, s.params);
    m.flow_base = s.local_base;
    m.key_flags = s.params.keys_given ? kKeysGiven : 0;
    offer_rails(m);
    send(s, m, s.key);
    s.tries++;
    s.next_tx = now + us(cfg_.connect_retry_us);
}

void SessionTable::send_accept(Session& s, uint64_t nonce) {
    SessionMsg m = to_peer(s, SessionType::Accept, nonce);
    fill_params(m, s.params);
    m.flow_base = s.local_base;
    m.key_nonce = s.key_nonce;
    offer_rails(m);
    send(s, m, s.key);
}

Session* SessionTable::connect(const Endpoint& peer, uint16_t service, const SipKey& key, const FlowParams& proposal,
                               uint16_t local_base, const rte_ether_addr* mac, uint64_t now, void* user) {
    Session* s = make(true, now);
    if (s == nullptr)
        return nullptr;
    s->peer = peer;
    s->service = service;
    s->key = key;
    s->params = proposal;
    s->params.version = std::min(proposal.version, cfg_.max_version); // offered: the highest we speak
    s->params.data_auth = s->params.version == kVersion2 && (proposal.data_auth || cfg_.data_auth);
    s->local_base = local_base;
    s->user = user;
    s->connect_nonce = rte_rand();
    s->deadline = now + us(cfg_.connect_timeout_us);
    if (mac != nullptr || peer.ip == cfg_.self.ip) {
        s->peer_mac = mac ? *mac : cfg_.rx_mac; // our own address: the port we receive on
        s->state = SessionState::Connecting;
        send_connect(*s, now);
    } else {
        rte_ether_addr m;
        if (arp_.lookup(next_hop(peer.ip), m)) {
            s->peer_mac = m;
            s->state = SessionState::Connecting;
            send_connect(*s, now);
        } else {
            s->state = SessionState::Resolving;
            arp_.want(next_hop(peer.ip), now);
        }
    }
    return s;
}

void SessionTable::accept_ready(Session* s, uint64_t now) {
    if (s == nullptr || s->state != SessionState::Accepting)
        return;
    s->state = SessionState::Established;
    s->last_rx = now;
    ctr_.established++;
    send_accept(*s, s->connect_nonce);
    notify_(*s);
}

void SessionTable::end(Session& s, SessionEnd why, uint64_t now) {
    (void)now;
    if (s.state == SessionState::Ended)
        return;
    const bool was_up = s.state == SessionState::Established;
    s.state = SessionState::Ended;
    s.end = why;
    ctr_.ended++;
    if (was_up && (why == SessionEnd::Closed || why == SessionEnd::BadAccept)) {
        for (uint32_t r = 0; r < rails_of(s); r++) { // by every rail: the first may be down
            SessionMsg m = to_peer(s, SessionType::Close, rte_rand());
            send(s, m, s.key, r);
        }
    }
    notify_(s);
}

void SessionTable::close(Session* s, uint64_t now) {
    if (s != nullptr)
        end(*s, SessionEnd::Closed, now);
}

void SessionTable::forget(Session* s) {
    if (s == nullptr)
        return;
    if (s->link != nullptr) {
        s->link->~SessionLink();
        rte_free(s->link);
    }
    sessions_.erase(s->id);
}

// --- time -------------------------------------------------------------------

void SessionTable::poll(uint64_t now) {
    arp_.poll(now, us(cfg_.arp_retry_us), [&](uint32_t ip) {
        rte_mbuf* m = build_arp_request(cfg_.pool, cfg_.mac, cfg_.self.ip, ip);
        if (m == nullptr || !tx_(m)) {
            ctr_.tx_fail++;
            return false;
        }
        ctr_.arp_tx++;
        return true;
    });
    // By id: a notification may forget() a session.
    std::vector<uint16_t> ids;
    ids.reserve(sessions_.size());
    for (auto& [id, x] : sessions_)
        ids.push_back(id);
    for (uint16_t id : ids) {
        Session* sp = find(id);
        if (sp == nullptr)
            continue;
        Session& s = *sp;
        switch (s.state) {
        case SessionState::Resolving: {
            rte_ether_addr mac;
            if (arp_.lookup(next_hop(s.peer.ip), mac)) {
                s.peer_mac = mac;
                s.state = SessionState::Connecting;
                send_connect(s, now);
            } else if (arp_.failed(next_hop(s.peer.ip))) {
                end(s, SessionEnd::ArpFailed, now);
            }
            break;
        }
        case SessionState::Connecting:
            if (now >= s.deadline)
                end(s, SessionEnd::NoAnswer, now);
            else if (now >= s.next_tx)
                send_connect(s, now);
            break;
        case SessionState::Accepting:
            if (now >= s.deadline) // the application never had the flows ready
                end(s, SessionEnd::NoAnswer, now);
            break;
        case SessionState::Established: {
            if (s.connector && now >= s.next_tx) {
                // Upper half a sequence (the acceptor wants it rising), lower
                // half random (a RESET or answer must echo it). One by every
                // rail, each answered by the rail it came by: the session
                // lives while any rail carries (ask_nonce holds a round's).
                for (uint32_t r = 0; r < rails_of(s); r++) {
                    const uint64_t nonce = uint64_t(++s.ask_seq) << 32 | (rte_rand() & 0xFFFFFFFFu);
                    SessionMsg k = to_peer(s, SessionType::Keepalive, nonce);
                    k.flags = kKeepaliveAsk;
                    s.ask_nonce[s.asks++ % kMaxRails] = k.nonce;
                    send(s, k, s.key, r);
                }
                s.next_tx = now + us(cfg_.keepalive_us);
            }
            if (!s.connector && !s.confirmed && now >= s.deadline) {
                end(s, SessionEnd::NoAnswer, now); // a replayed CONNECT, or a connector that died at once
                break;
            }
            uint64_t seen = s.last_rx;
            if (s.link != nullptr) { // its ACKs (sender side) or its data (receiver side) came
                const uint64_t d = s.link->peer_ctl_tsc.load(std::memory_order_relaxed);
                const uint64_t p = s.link->peer_data_tsc.load(std::memory_order_relaxed);
                seen = std::max({seen, d, p});
            }
            if (now > seen && now - seen >= us(cfg_.peer_timeout_us))
                end(s, SessionEnd::PeerTimeout, now);
            break;
        }
        case SessionState::Ended:
            break;
        }
    }
}

} // namespace tailmark
