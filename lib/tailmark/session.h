// Sessions: a pair of endpoints (IPv4 address, UDP port) that agreed, at run
// time, on the flows between them. The control plane's half of the protocol:
// the handshake, keep-alives, liveness, resets and closes (the SESSION
// packets of control.h), and ARP for the peers' MACs. One SessionTable per
// process, on one thread (the control loop); time comes in as an argument.
//
//   connector                                   acceptor (a listener on `service`)
//     ARP who-has peer --------------------->   (answers for its own address)
//     CONNECT(epoch c, nonce n, proposal) --->   nothing kept:
//     <--- RETRY(n, cookie)                       a token only the acceptor computes
//     CONNECT(c, n, proposal, cookie) ------->   the connector receives where it
//                                                 says it is: decide: refuse, or
//                                                 allocate flows
//     <--- REFUSE(reason, theirs, ours, n)        (no session)
//     <--- ACCEPT(epoch a, n, agreed)             session, unconfirmed
//     KEEPALIVE(confirm) -------------------->   confirmed: an older incarnation
//                                                 of the same peer session ends
//     ... data, ACKs ...
//     KEEPALIVE(ask, nonce k), every second -->  <--- KEEPALIVE(answer, k)
//                                                 (a restarted acceptor knows no
//                                                 such session: <--- RESET(k))
//     CLOSE --------------------------------->   ended
//
// Every SESSION packet is authenticated (control.h). The acceptor learns the
// key from its listener (the packet names the service), so a packet that
// does not authenticate is never answered. A new connector epoch replaces the
// old incarnation only once confirmed, so replaying a recorded CONNECT does
// not tear a live session down; a CONNECT seen before (its session, epoch
// and nonce, from whatever address) makes nothing new, and one without a
// valid cookie makes nothing at all. Every session packet of an
// established session is numbered, and each number is taken once
// (ReplayWindow): a recorded KEEPALIVE or CLOSE replayed is refused
// (control_replayed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "tailmark/arp.h"
#include "tailmark/control.h"
#include "tailmark/replay_window.h"
#include "tailmark/session_link.h"

namespace tailmark {

struct Endpoint {
    uint32_t ip = 0; // host order
    uint16_t port = 0;
    bool operator==(const Endpoint&) const = default;
};
std::string to_string(const Endpoint& e); // "198.18.0.2:47474"
std::string ip_to_string(uint32_t ip);     // host order: "198.18.0.2"

// What a session's flows are: proposed by the connector, agreed by both.
struct FlowParams {
    uint16_t nflows = 1;
    uint32_t mtu = 1500;
    uint32_t ring_size = 64;
    uint32_t max_msg = 4096;
    uint32_t key = 0;
    bool keys_given = false; // the acceptor must hold the same keys (else it chooses)
    // The data version: proposed, the highest the connector speaks; agreed,
    // the one the acceptor took (1 between two ends of one process: its
    // frames never leave it).
    uint8_t version = kVersion2;
    // Version 2 only: the tag covers the payload too (--data-auth). Asked
    // for by either end, taken (a connector that asked refuses an ACCEPT
    // without it).
    bool data_auth = false;
    std::vector<KeyOverride> overrides;
    uint32_t key_of(uint16_t index) const;
};

enum class SessionState : uint8_t {
    Resolving,   // connector: waiting for the peer's MAC (ARP)
    Connecting,  // connector: CONNECT sent, no answer yet
    Accepting,   // acceptor: the application installs the flows; ACCEPT follows
    Established,
    Ended,
};
const char* to_string(SessionState s);

enum class SessionEnd : uint8_t {
    None,
    Refused,     // the acceptor refused (reason, values)
    NoAnswer,    // connector: no ACCEPT or REFUSE in time (nobody listens, or another secret);
                 // acceptor: the connector never confirmed the ACCEPT
    ArpFailed,   // the peer's address did not answer ARP
    PeerTimeout, // nothing authentic from the peer for the peer timeout
    PeerReset,   // the peer knows no such session any more: it restarted
    PeerClosed,  // the peer closed it
    Closed,      // closed here
    Replaced,    // acceptor: a new incarnation of the peer's session was confirmed
    BadAccept,   // connector: the ACCEPT agreed to something not proposed
};
const char* to_string(SessionEnd e);

struct Session {
    uint16_t id = 0;
    bool connector = false;
    SessionState state = SessionState::Resolving;
    SessionEnd end = SessionEnd::None;
    uint16_t service = 0;
    Endpoint peer;
    rte_ether_addr peer_mac{};
    SipKey key;
    FlowParams params;        // connector: proposed, then agreed; acceptor: agreed
    uint16_t local_base = 0;  // this end's flow ids: local_base + i
    uint16_t peer_base = 0;   // the peer's
    uint32_t local_epoch = 0, peer_epoch = 0;
    uint16_t peer_id = 0;
    SessionLink* link = nullptr; // the data plane's view, valid from Established (acceptor: Accepting) on
    bool local_peer = false;     // both ends are in this table (loopback)
    bool confirmed = false;      // acceptor: the connector answered the ACCEPT
    uint16_t replaces = 0;       // acceptor: an older incarnation, ended once this one is confirmed
    // A refusal (Refused, BadAccept): which setting, and both sides' values.
    RefuseReason refuse = RefuseReason::None;
    uint16_t refuse_index = 0;
    uint64_t refuse_expected = 0, refuse_got = 0;
    // Timing (TSC).
    uint64_t connect_nonce = 0;
    uint64_t ask_nonce[kMaxRails]{}; // recent liveness probes, a round's (a RESET or an answer must echo one)
    uint32_t asks = 0;
    uint32_t ask_seq = 0;      // connector: the probes' sequence (the nonce's upper half)
    uint32_t peer_ask_seq = 0; // acceptor: the last probe's sequence taken (a replay is older)
    uint64_t tx_seq = 0;       // the number of this end's last session packet (control.h's seq)
    ReplayWindow rx_win;       // the peer's session packets' numbers taken
    uint64_t cookie = 0;       // connector: the acceptor's RETRY token, echoed in each CONNECT
    uint64_t key_nonce = 0;    // the acceptor's nonce for the data keys (its ACCEPT carries it)
    uint64_t started = 0, deadline = 0, next_tx = 0, last_rx = 0;
    uint32_t tries = 0;
    uint8_t peer_nrails = 0;   // the peer's rails beyond its first, from its CONNECT or ACCEPT
    RailAddress peer_rails[kMaxRails - 1]{};
    void* user = nullptr;      // the application's
};

// A listener's answer to a CONNECT.
struct AcceptDecision {
    RefuseReason reason = RefuseReason::None; // None: accept
    uint16_t index = 0;                       // refusals: the flow a key is about
    uint64_t expected = 0, got = 0;           // refusals: ours, theirs
    FlowParams agreed;                        // accept: what the session is
    uint16_t local_base = 0;                  // accept: the acceptor's flow ids
    bool defer = false;                       // accept: ACCEPT once accept_ready() is called
};

struct SessionCounters {
    uint64_t rx = 0, tx = 0;           // SESSION packets taken, sent
    uint64_t arp_rx = 0, arp_tx = 0;   // ARP frames taken (requests answered, replies learnt), sent
    uint64_t arp_refused = 0;          // a resolved neighbour claimed another MAC: not believed (logged)
    uint64_t established = 0, ended = 0, refused = 0;
    uint64_t tx_fail = 0;              // packets not sent: no mbuf, or the tx ring full
    uint64_t retries = 0;              // acceptor: CONNECTs answered with a RETRY (no cookie, or a stale one)
    DropCounters drops{};              // frames refused
};

class SessionTable {
public:
    struct Config {
        rte_mempool* pool = nullptr;
        rte_ether_addr mac{};    // the port this end sends from
        rte_ether_addr rx_mac{}; // the port it receives on (loopback over two ports: another one)
        Endpoint self;
        uint64_t hz = 0;                       // TSC cycles per second
        uint64_t connect_retry_us = 200000;    // CONNECT again
        uint64_t connect_timeout_us = 5000000; // give up connecting
        uint64_t keepalive_us = 1000000;       // connector: a liveness probe this often
        uint64_t peer_timeout_us = 5000000;    // nothing authentic for this long: the peer is gone
        uint64_t arp_retry_us = 200000;
        uint32_t arp_tries = 10;
        // Routed peers: a peer outside self.ip's subnet (netmask, host
        // order) is reached through the gateway, whose MAC ARP resolves
        // (gateway 0: every peer is on the link).
        uint32_t netmask = 0;
        uint32_t gateway = 0;
        uint32_t max_sessions = 1024;
        uint64_t cookie_period_us = 2000000;   // a RETRY token is good for one to two of these
        // Data versions: a connector offers max_version; an acceptor takes the
        // highest both speak and refuses (Version) below min_version. 2: every
        // data packet carries a keyed tag (wire-format.md). A session of two
        // ends of one process is version 1 whatever these say.
        uint8_t max_version = kVersion2;
        uint8_t min_version = kVersion2;
        // Data authentication: a connector asks for it, an acceptor requires
        // it (refusing, Version, a peer that cannot: version 1).
        bool data_auth = false;
        // Rails beyond the first (--rails): this end's other ports, each
        // with its address; offered in CONNECT and ACCEPT (control.h).
        uint8_t nrails = 0;
        RailAddress rails[kMaxRails - 1]{};
    };
    using Transmit = std::function<bool(rte_mbuf*)>; // takes the packet (false: it was not sent; freed)
    using Decide = std::function<AcceptDecision(Session& s, const FlowParams& proposed)>;
    using Notify = std::function<void(Session& s)>;  // Established, or Ended

    SessionTable(const Config& cfg, Transmit tx, Notify notify);
    ~SessionTable();

    bool listen(uint16_t service, const SipKey& key, Decide decide);
    void unlisten(uint16_t service);

    // Starts a session to `peer` (its MAC by ARP unless given). nullptr when
    // the table is full. The flow ids [local_base, local_base + nflows) are
    // the caller's, allocated before.
    Session* connect(const Endpoint& peer, uint16_t service, const SipKey& key, const FlowParams& proposal,
                     uint16_t local_base, const rte_ether_addr* mac, uint64_t now, void* user = nullptr);
    // A deferred acceptance: the flows are installed, send the ACCEPT.
    void accept_ready(Session* s, uint64_t now);
    // Closes a session here: CLOSE to the peer, Ended (Closed).
    void close(Session* s, uint64_t now);
    // Forgets an Ended session: the application has let go of its flows, so
    // its link is freed. The pointer is invalid afterwards.
    void forget(Session* s);

    // A SESSION or ARP frame from the wire: taken, answered, freed.
    void on_frame(rte_mbuf* m, uint64_t now);
    // Retries, probes, timeouts, ARP. Call every few hundred microseconds.
    void poll(uint64_t now);

    Session* find(uint16_t id);
    std::vector<Session*> sessions();
    const SessionCounters& counters() const { return ctr_; }
    const Config& config() const { return cfg_; }
    ArpResolver& arp() { return arp_; }
    // The address whose MAC a packet to `ip` goes to: ip itself, or the gateway.
    uint32_t next_hop(uint32_t ip) const {
        return cfg_.gateway != 0 && (ip & cfg_.netmask) != (cfg_.self.ip & cfg_.netmask) ? cfg_.gateway : ip;
    }

private:
    struct Listener {
        SipKey key;
        Decide decide;
    };
    uint64_t us(uint64_t u) const { return cfg_.hz * u / 1000000; }
    Session* make(bool connector, uint64_t now);
    void make_link(Session& s);
    void link_rails(const Session& s, SessionLink& l) const;
    void offer_rails(SessionMsg& m) const;
    void template_to(const Session& s, uint8_t (&l2l4)[kEthLen + kIpLen + kUdpLen]) const;
    // By the session's rail `rail` (its link's addresses; 0: the first).
    bool send(Session& s, SessionMsg& m, const SipKey& key, uint32_t rail = 0);
    uint32_t rails_of(const Session& s) const { return s.link != nullptr ? s.link->rails : 1; }
    // A packet of type t to s's peer: its session, its incarnation.
    static SessionMsg to_peer(const Session& s, SessionType t, uint64_t nonce) {
        SessionMsg m;
        m.type = t;
        m.dst_session = s.peer_id;
        m.dst_epoch = s.peer_epoch;
        m.nonce = nonce;
        return m;
    }
    // An answer of type t to msg: to its sender's session and incarnation,
    // its nonce echoed (what makes the answer the sender's to believe).
    static SessionMsg answer(const SessionMsg& msg, SessionType t) {
        SessionMsg m;
        m.type = t;
        m.dst_session = msg.src_session;
        m.dst_epoch = msg.src_epoch;
        m.nonce = msg.nonce;
        return m;
    }
    // The stand-in session an answer to a sender we hold none for goes by.
    Session stand_in(uint16_t id, uint32_t epoch, uint16_t service, const Endpoint& from,
                     const rte_ether_addr& from_mac) const {
        Session tmp;
        tmp.id = id;
        tmp.local_epoch = epoch;
        tmp.service = service;
        tmp.peer = from;
        tmp.peer_mac = from == cfg_.self ? cfg_.rx_mac : from_mac; // to ourselves: where we receive
        return tmp;
    }
    void send_connect(Session& s, uint64_t now);
    void send_accept(Session& s, uint64_t nonce);
    uint64_t cookie_for(const SessionMsg& msg, const Endpoint& from, const rte_ether_addr& from_mac,
                        uint64_t bucket) const;
    void send_retry(const SessionMsg& msg, const Endpoint& from, const rte_ether_addr& from_mac, const SipKey& key,
                    uint64_t now);
    void end(Session& s, SessionEnd why, uint64_t now);
    void on_arp(rte_mbuf* m, uint64_t now);
    void on_session(rte_mbuf* m, uint64_t now);
    void on_connect(const SessionMsg& msg, const SessionFrame& raw, const Endpoint& from,
                    const rte_ether_addr& from_mac, uint64_t now);
    // on_session's cases, one per SESSION packet type (session_rx.cc).
    bool late_close(const SessionMsg& msg, const SessionFrame& raw, Session* s); // taken: true
    void on_unknown_session(const SessionMsg& msg, const SessionFrame& raw, const Session* s, const Endpoint& from,
                            const rte_ether_addr& from_mac);
    void on_accept(const SessionMsg& msg, Session& s, uint64_t now);
    RefuseReason bad_accept(const SessionMsg& msg, Session& s, uint64_t& want, uint64_t& got) const;
    void on_refuse(const SessionMsg& msg, Session& s, uint64_t now);
    void on_keepalive(const SessionMsg& msg, Session& s, uint64_t now, uint32_t rail);
    void on_reset(const SessionMsg& msg, Session& s, uint64_t now);
    void on_retry(const SessionMsg& msg, Session& s, uint64_t now);
    void count(DropReason r) { ctr_.drops[index(r)]++; }

    Config cfg_;
    Transmit tx_;
    Notify notify_;
    ArpResolver arp_;
    std::map<uint16_t, Listener> listeners_;
    std::map<uint16_t, std::unique_ptr<Session>> sessions_;
    uint16_t next_id_ = 1;
    SessionCounters ctr_;
    // RETRY tokens: a keyed hash this table alone can compute and check,
    // with nothing kept per CONNECT (a SYN cookie's idea).
    SipKey cookie_key_{};
    uint32_t retry_epoch_ = 0; // the RETRY packets' src_epoch (they belong to no session)
};

} // namespace tailmark
