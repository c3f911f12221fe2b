// libFuzzer target: control packets through the control plane and the
// sender's ACK intake, with invariants checked after every frame and every
// poll. The input format is described in fuzz_ctl.h.
//
// Invariants (abort() with a message on violation, so libFuzzer reports it):
// the table (SessionTable):
//   - accounting: every frame is taken (rx, arp_rx) or dropped under a
//     reason: one of them moves, the drops by one at most.
//   - authentication: a frame that authenticates under none of the
//     harness's keys changes no session and is never answered; an ARP frame
//     changes no session.
//   - amplification: one packet at most answers a frame; every packet goes
//     from this end's address to the frame's source or a session's peer.
//   - what it sends parses, read_session() takes it, and it authenticates
//     under the key of the session that sends it (the listener's otherwise).
//   - allocation (issue 35): nothing is kept for a peer before it proves it
//     is live: a session appears only on an authentic CONNECT whose cookie a
//     RETRY of this table carried, one at most; never more than
//     max_sessions; one live acceptor session per connector incarnation
//     (its session, epoch and nonce).
//   - states: forward only (resolving, connecting, accepting, established,
//     ended); confirmed stays, and only an acceptor's; Ended goes with an end
//     reason; Established has a link; a frame ends a session only as its
//     type says (CLOSE peer_closed, RESET peer_reset, REFUSE refused,
//     KEEPALIVE replaced, ACCEPT bad_accept or no_answer), one at most.
// the sender (ACK, NACK):
//   - accounting: on_wire_control() returns None and one ACK or NACK is
//     counted, or it returns a reason and that reason is counted.
//   - authentication: a frame that does not authenticate under the flow's
//     key moves no cursor and refreshes no liveness.
//   - cursors: released <= acked <= sent <= submitted, never backwards;
//     completions in msg_id order, each once, Delivered only below released.
//   - what it sends: data packets of the flow, each carrying exactly its
//     message's bytes at its offset inside its group (and the LAST its
//     length and CRC); no retransmission of a message released before.
// mbufs: the pool is full again after every record and every poll.
#include "fuzz_ctl.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include <rte_mbuf.h>
#include <rte_random.h>

#include "fixtures.h"
#include "fuzz_eal.h"
#include "ring_port.h"
#include "tailmark/arp.h"
#include "tailmark/control.h"
#include "tailmark/crc32c.h"
#include "tailmark/packet_parser.h"
#include "tailmark/sender.h"
#include "tailmark/session.h"

using namespace tailmark;

namespace tmfuzz::ctl {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kHz = 1'000'000'000; // cycles per second: 1 cycle = 1 ns
constexpr uint64_t kT0 = 1000 * kHz;    // far from 0: no deadline is "0 + x"
constexpr uint64_t kSeed = 0x7A11A4C7;  // rte_srand, every input: epochs, nonces, cookies replay
constexpr unsigned kPoolSize = 2047;
// Byte offsets in a frame (IPv4 without options): the tailmark header, then
// the control body (control.h).
constexpr size_t IP = kEthLen, UDP = kEthLen + kIpLen, H = UDP + kUdpLen, B = kFrameOverhead;

rte_mempool* g_pool = nullptr;
tmtest::RingPort* g_port = nullptr;
RunStats g_stats;
uint32_t g_record = 0; // record number within the input, for messages
alignas(64) SessionLink g_link; // the sender's flow's session

[[noreturn]] __attribute__((format(printf, 1, 2))) void violated(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\ntailmark fuzz_ctl: INVARIANT VIOLATED (record #%u of the input): ", g_record);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    abort();
}

// ---- bytes ----------------------------------------------------------------------

bool fits(const Bytes& f, size_t off, size_t n) { return f.size() >= off + n; }
uint64_t rd(const Bytes& f, size_t off, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | f[off + i];
    return v;
}
void wr(Bytes& f, size_t off, size_t n, uint64_t v) {
    for (size_t i = 0; i < n; i++)
        f[off + i] = static_cast<uint8_t>(v >> (8 * (n - 1 - i)));
}
// Echo's rule: a field the input left 0 takes the value, any other stays.
void fill(Bytes& f, size_t off, size_t n, uint64_t v) {
    if (fits(f, off, n) && rd(f, off, n) == 0)
        wr(f, off, n, v);
}
bool is_arp(const Bytes& f) { return fits(f, 12, 2) && rd(f, 12, 2) == RTE_ETHER_TYPE_ARP; }
Endpoint src_of(const Bytes& f) {
    return fits(f, H, 0) ? Endpoint{static_cast<uint32_t>(rd(f, IP + 12, 4)), static_cast<uint16_t>(rd(f, UDP, 2))}
                         : Endpoint{};
}
Endpoint dst_of(const Bytes& f) {
    return fits(f, H, 0) ? Endpoint{static_cast<uint32_t>(rd(f, IP + 16, 4)), static_cast<uint16_t>(rd(f, UDP + 2, 2))}
                         : Endpoint{};
}
bool session_frame(const Bytes& f) { return fits(f, B, 1) && (f[H + 1] & static_cast<uint8_t>(Flags::Session)); }

// A control packet's MAC sits at the end of its UDP datagram and covers the
// tailmark header and the body before it (control.h).
bool mac_end(const Bytes& f, size_t& end) {
    if (!fits(f, H, 0))
        return false;
    const size_t udp_len = rd(f, UDP + 4, 2);
    end = UDP + udp_len;
    return udp_len >= kUdpLen + kHeaderLen + kMacLen && end <= f.size();
}
bool signed_with(const Bytes& f, const SipKey& k) {
    size_t end;
    return mac_end(f, end) && siphash24(k, {f.data() + H, end - kMacLen - H}) == rd(f, end - kMacLen, 8);
}
void sign(Bytes& f, const SipKey& k) {
    if (size_t end; mac_end(f, end))
        wr(f, end - kMacLen, 8, siphash24(k, {f.data() + H, end - kMacLen - H}));
}

// The frame as the wire hands it over: in mbufs of the pool's data room,
// chained when it needs more than one; `split`: in two, cut at its middle.
rte_mbuf* mbuf_of(const Bytes& f, bool split) {
    rte_mbuf* head = nullptr;
    size_t done = 0;
    do {
        rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
        if (m == nullptr)
            env_failure("mbuf alloc");
        size_t take = std::min<size_t>(rte_pktmbuf_tailroom(m), f.size() - done);
        if (split && head == nullptr && f.size() > 1)
            take = std::min(take, f.size() / 2);
        if (take != 0)
            memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(take)), f.data() + done, take);
        done += take;
        if (head == nullptr)
            head = m;
        else if (rte_pktmbuf_chain(head, m) != 0)
            env_failure("mbuf chain");
    } while (done < f.size());
    return head;
}

void fix_lengths(Bytes& f) {
    const size_t n = f.size();
    if (n >= UDP)
        wr(f, IP + 2, 2, n - kEthLen);
    if (n >= H)
        wr(f, UDP + 4, 2, n - UDP);
    if (n >= B)
        wr(f, H + 10, 2, n - B); // pay_len: a control packet's whole body, MAC included
    if (n >= UDP && (f[IP] & 0x0F) == 5) {
        f[IP + 10] = f[IP + 11] = 0;
        const uint16_t ck = static_cast<uint16_t>(~rte_raw_cksum(&f[IP], kIpLen));
        memcpy(&f[IP + 10], &ck, 2); // the raw sum is in memory order already
    }
}

// ---- the table --------------------------------------------------------------------

uint64_t mac48(const rte_ether_addr& a) {
    uint64_t v = 0;
    for (uint8_t b : a.addr_bytes)
        v = v << 8 | b;
    return v;
}

int rank(SessionState s) {
    switch (s) {
    case SessionState::Resolving: return 0;
    case SessionState::Connecting: return 1;
    case SessionState::Accepting: return 2;
    case SessionState::Established: return 3;
    case SessionState::Ended: return 4;
    }
    return -1;
}

// Everything of a session a frame could change.
struct Snap {
    bool connector, confirmed, link;
    SessionState state;
    SessionEnd end;
    uint16_t peer_id, peer_base, replaces, service, local_base;
    uint32_t local_epoch, peer_epoch, mtu, asks, peer_ask_seq, tries;
    uint32_t peer_ip;
    uint16_t peer_port;
    uint64_t peer_mac, last_rx, next_tx, deadline, tx_seq, rx_top, cookie, connect_nonce, key_nonce;
    bool operator==(const Snap&) const = default;
};
Snap snap_of(const Session& s) {
    return {s.connector, s.confirmed, s.link != nullptr, s.state, s.end, s.peer_id, s.peer_base, s.replaces,
            s.service, s.local_base, s.local_epoch, s.peer_epoch, s.params.mtu, s.asks, s.peer_ask_seq, s.tries,
            s.peer.ip, s.peer.port, mac48(s.peer_mac), s.last_rx, s.next_tx, s.deadline, s.tx_seq, s.rx_win.top(),
            s.cookie, s.connect_nonce, s.key_nonce};
}

struct Table {
    std::unique_ptr<SessionTable> t;
    uint32_t max_sessions = 0;
    bool defer = false;
    uint16_t conn_id = 0;          // the connector session (0: none, or forgotten)
    std::vector<Bytes> out;        // packets sent since the last look
    std::vector<uint64_t> cookies; // every RETRY's
    std::map<uint16_t, Snap> prev; // the sessions as last checked
    std::set<uint16_t> accepted, confirmed;

    std::map<uint16_t, Snap> snaps() const {
        std::map<uint16_t, Snap> m;
        for (Session* s : t->sessions())
            m[s->id] = snap_of(*s);
        return m;
    }
    Session* newest_acceptor() const {
        Session* n = nullptr;
        for (Session* s : t->sessions())
            if (!s->connector)
                n = s;
        return n;
    }
};

// The table's transmit: each packet parses as what it claims, then is kept
// as bytes (its addresses are checked by look()).
bool transmit(Table& tb, rte_mbuf* m) {
    const Bytes b = tmtest::flat(m);
    if (is_arp(b)) {
        ArpInfo a;
        const ArpVerdict v = parse_arp(m, a);
        if (v != ArpVerdict::Request && v != ArpVerdict::Reply)
            violated("the table sent an ARP frame parse_arp() refuses");
    } else {
        ParserConfig pc;
        pc.udp_port = dst_of(b).port;
        ParsedPacket p;
        SessionFrame raw;
        SessionMsg msg;
        DropReason r = parse_packet(m, pc, p);
        if (r == DropReason::None && !p.is_session())
            violated("the table sent a packet that is not a SESSION packet");
        if (r == DropReason::None)
            r = read_session(m, p, raw, msg);
        if (r != DropReason::None)
            violated("the table sent a packet its own parser drops (%s)", to_string(r).data());
        // The connector's packets under its key; the acceptor sessions' packets
        // and what answers for no session (RETRY, RESET) under the listener's.
        const bool own = msg.type == SessionType::Connect ||
                         (msg.src_session == tb.conn_id &&
                          (msg.type == SessionType::Keepalive || msg.type == SessionType::Close));
        if (!authentic(raw, own ? kConnKey : kListenKey))
            violated("the table sent a %s of session %u not signed with %s key", to_string(msg.type),
                     msg.src_session, own ? "the connector's" : "the listener's");
        if (msg.type == SessionType::Retry)
            tb.cookies.push_back(msg.cookie);
    }
    tb.out.push_back(b);
    rte_pktmbuf_free(m);
    return true;
}

// A word to a list of words.
void append(std::string& list, const std::string& word) {
    if (!list.empty())
        list += ' ';
    list += word;
}

std::string name_of(const Bytes& b) {
    if (is_arp(b))
        return "arp";
    const auto type = static_cast<SessionType>(b[B]);
    if (type == SessionType::Keepalive && b[B + 1] == kKeepaliveAsk)
        return "keepalive_ask";
    if (type == SessionType::Keepalive && b[B + 1] == kKeepaliveAnswer)
        return "keepalive_answer";
    return to_string(type);
}

// The packets sent since the last look: from this end, to `from` (the
// frame's source, if a frame was taken) or to a session's peer (before or
// after); one at most in answer to a frame.
void look(Table& tb, const Endpoint* from, const std::map<uint16_t, Snap>& before) {
    if (from != nullptr && tb.out.size() > 1)
        violated("one frame answered with %zu packets", tb.out.size());
    const auto after = tb.snaps();
    for (const Bytes& b : tb.out) {
        append(g_stats.sent, name_of(b));
        if (is_arp(b))
            continue;
        const Endpoint src = src_of(b), dst = dst_of(b);
        if (!(src == Endpoint{kIp, kPort}) || rd(b, 6, 6) != mac48(kMac))
            violated("the table sent a packet from %s, not its own address", to_string(src).c_str());
        bool ok = from != nullptr && dst == *from;
        for (const auto* m : {&before, &after})
            for (const auto& [id, s] : *m)
                ok = ok || dst == Endpoint{s.peer_ip, s.peer_port};
        if (!ok)
            violated("the table sent a %s to %s: neither the frame's source nor a session's peer",
                     name_of(b).c_str(), to_string(dst).c_str());
    }
    tb.out.clear();
}

// The table as a whole, after a frame or a poll.
void check_table(Table& tb) {
    const auto now = tb.snaps();
    if (now.size() > tb.max_sessions)
        violated("%zu sessions, max_sessions %u", now.size(), tb.max_sessions);
    std::set<std::tuple<uint16_t, uint32_t, uint64_t, uint16_t>> incarnations;
    for (const auto& [id, s] : now) {
        if ((s.state == SessionState::Ended) != (s.end != SessionEnd::None))
            violated("session %u: state %s with end %s", id, to_string(s.state), to_string(s.end));
        if (s.confirmed && (s.connector || (s.state != SessionState::Established && s.state != SessionState::Ended)))
            violated("session %u: confirmed, %s, state %s", id, s.connector ? "a connector" : "an acceptor",
                     to_string(s.state));
        if (s.state == SessionState::Established && !s.link)
            violated("session %u: established without a link", id);
        if (s.connector != (id == tb.conn_id))
            violated("session %u: a connector the harness did not start", id);
        if (s.local_epoch == 0)
            violated("session %u: epoch 0", id);
        if (auto p = tb.prev.find(id); p != tb.prev.end()) {
            if (rank(s.state) < rank(p->second.state))
                violated("session %u: back from %s to %s", id, to_string(p->second.state), to_string(s.state));
            if (p->second.confirmed && !s.confirmed)
                violated("session %u: no longer confirmed", id);
            if (s.local_epoch != p->second.local_epoch || s.connector != p->second.connector)
                violated("session %u: its epoch or role changed", id);
        }
        if (!s.connector && s.state != SessionState::Ended &&
            !incarnations.insert({s.peer_id, s.peer_epoch, s.connect_nonce, s.service}).second)
            violated("two live acceptor sessions for connector session %u epoch %08x", s.peer_id, s.peer_epoch);
        if (!s.connector && tb.accepted.insert(id).second)
            g_stats.accepted++;
        if (s.confirmed && tb.confirmed.insert(id).second)
            g_stats.confirmed++;
    }
    tb.prev = now;
}

// The end a frame of this type may give a session.
bool may_end(SessionType type, SessionEnd e) {
    switch (e) {
    case SessionEnd::PeerClosed: return type == SessionType::Close;
    case SessionEnd::PeerReset: return type == SessionType::Reset;
    case SessionEnd::Refused: return type == SessionType::Refuse;
    case SessionEnd::Replaced: return type == SessionType::Keepalive;
    case SessionEnd::BadAccept:
    case SessionEnd::NoAnswer: return type == SessionType::Accept;
    default: return false;
    }
}

uint64_t drops_of(const DropCounters& d) {
    uint64_t n = 0;
    for (uint64_t x : d)
        n += x;
    return n;
}

// ---- repairs of a frame to the table ---------------------------------------------

void echo_session(Table& tb, Bytes& f, bool acceptor) {
    if (!fits(f, B, kSessionFixedLen))
        return;
    const auto type = static_cast<SessionType>(f[B]);
    if (type == SessionType::Connect) {
        if (!tb.cookies.empty())
            fill(f, B + 32, 8, tb.cookies.back());
        return;
    }
    const Session* s = acceptor ? tb.newest_acceptor() : tb.t->find(tb.conn_id);
    if (s == nullptr)
        return;
    fill(f, H + 2, 2, s->id);
    fill(f, B + 12, 4, s->local_epoch);
    fill(f, B + 2, 2, s->service);
    if (s->peer_epoch != 0) {
        fill(f, B + 4, 2, s->peer_id);
        fill(f, B + 8, 4, s->peer_epoch);
    }
    const uint64_t probe = s->asks ? s->ask_nonce[(s->asks - 1) % 4] : 0;
    switch (type) {
    case SessionType::Accept:
    case SessionType::Refuse:
    case SessionType::Retry: fill(f, B + 16, 8, s->connect_nonce); break;
    case SessionType::Reset: fill(f, B + 16, 8, probe); break;
    case SessionType::Keepalive:
        if (f[B + 1] & kKeepaliveAnswer)
            fill(f, B + 16, 8, probe);
        else if (f[B + 1] & kKeepaliveAsk)
            fill(f, B + 16, 4, s->peer_ask_seq + 1); // the upper half: the probes' sequence
        break;
    default: break;
    }
}

void repair_for_table(Table& tb, Bytes& f, uint8_t c) {
    if (c & kCtlFixEcho)
        echo_session(tb, f, c & kCtlAcceptor);
    const Session* dst = nullptr;
    bool connect = true;
    if (fits(f, B, kSessionFixedLen)) {
        connect = static_cast<SessionType>(f[B]) == SessionType::Connect;
        if (!connect)
            dst = tb.t->find(static_cast<uint16_t>(rd(f, H + 2, 2)));
    }
    if ((c & kCtlFixSeq) && dst != nullptr)
        wr(f, B + 24, 8, dst->rx_win.top() + 1);
    if (c & kCtlFixLen)
        fix_lengths(f);
    if (c & kCtlFixMac)
        sign(f, dst != nullptr ? dst->key : kListenKey);
}

// One frame into the table, and everything checked.
void table_frame(Table& tb, const Bytes& f, bool split, uint64_t now) {
    const auto before = tb.snaps();
    const SessionCounters cb = tb.t->counters();
    const bool arp = is_arp(f);
    const bool auth = !arp && (signed_with(f, kListenKey) || signed_with(f, kConnKey));
    const Endpoint from = src_of(f);
    tb.t->on_frame(mbuf_of(f, split), now);
    if (rte_mempool_avail_count(g_pool) != kPoolSize)
        violated("mbufs not returned: %u of %u in the pool after the frame", rte_mempool_avail_count(g_pool),
                 kPoolSize);

    const SessionCounters& ca = tb.t->counters();
    const uint64_t drops = drops_of(ca.drops) - drops_of(cb.drops);
    const uint64_t taken = (ca.rx - cb.rx) + (ca.arp_rx - cb.arp_rx);
    if (drops > 1 || ca.rx - cb.rx > 1 || ca.arp_rx - cb.arp_rx > 1 || taken + drops == 0)
        violated("frame accounted as %llu taken, %llu dropped", static_cast<unsigned long long>(taken),
                 static_cast<unsigned long long>(drops));
    if (!auth && !tb.out.empty() && !arp)
        violated("a frame no key of the harness signs was answered (%s)", name_of(tb.out[0]).c_str());
    look(tb, &from, before);

    const auto after = tb.snaps();
    if (!auth && after != before)
        violated(arp ? "an ARP frame changed a session" : "a frame no key of the harness signs changed a session");
    std::vector<uint16_t> made;
    for (const auto& [id, s] : after)
        if (!before.count(id))
            made.push_back(id);
    if (!made.empty()) {
        const bool connect = session_frame(f) && static_cast<SessionType>(f[B]) == SessionType::Connect;
        const uint64_t cookie = fits(f, B, 40) ? rd(f, B + 32, 8) : 0;
        if (made.size() > 1 || !connect || !signed_with(f, kListenKey))
            violated("%zu sessions made by a frame that is no authentic CONNECT", made.size());
        if (std::find(tb.cookies.begin(), tb.cookies.end(), cookie) == tb.cookies.end())
            violated("session %u made for a CONNECT whose cookie %016llx no RETRY of this table carried", made[0],
                     static_cast<unsigned long long>(cookie));
        if (after.at(made[0]).confirmed)
            violated("session %u confirmed as it was made", made[0]);
    }
    int ended = 0;
    for (const auto& [id, s] : after) {
        auto b = before.find(id);
        if (s.end == SessionEnd::None || (b != before.end() && b->second.end != SessionEnd::None))
            continue;
        ended++;
        if (!session_frame(f) || !may_end(static_cast<SessionType>(f[B]), s.end))
            violated("session %u ended %s by a frame of type %u", id, to_string(s.end),
                     fits(f, B, 1) ? f[B] : 0);
    }
    if (ended > 1)
        violated("one frame ended %d sessions", ended);
    check_table(tb);
}

// What an application does between two records: lets ended sessions go,
// and (kCfgDefer) sends the deferred ACCEPTs.
void application(Table& tb, uint64_t now) {
    const auto before = tb.snaps();
    for (Session* s : tb.t->sessions()) {
        if (s->state == SessionState::Ended) {
            if (s->id == tb.conn_id)
                tb.conn_id = 0;
            tb.t->forget(s);
        } else if (tb.defer && s->state == SessionState::Accepting) {
            tb.t->accept_ready(s, now);
        }
    }
    look(tb, nullptr, before);
    check_table(tb);
}

// ---- the sender -----------------------------------------------------------------

// Message i: kMsgSizes[i % 6] bytes of g_bytes from (i * 97) % 1024.
uint8_t g_bytes[4096 + 1024];
uint32_t size_of(uint32_t i) { return kMsgSizes[i % 6]; }
const uint8_t* bytes_of(uint32_t i) { return g_bytes + (i * 97) % 1024; }
constexpr uint64_t kCookie = 1000; // message i's cookie: kCookie + i

struct Snd {
    std::unique_ptr<Sender> s;
    SendFlow* f = nullptr;
    uint32_t reported = 0; // completions taken: the next one's msg_id
    Sender::FlowView v{};  // as last checked
    uint64_t seq_max = 0;  // the highest ACK/NACK number fed
    bool before(uint32_t a, uint32_t b) const { return static_cast<int32_t>(a - b) < 0; }
};

void submit_more(Snd& sd) {
    for (uint32_t i = Sender::view(sd.f).submitted; i < kMaxMsgs && sd.s->credit(kFlow) > 0; i++) {
        Message m;
        m.bytes = {bytes_of(i), size_of(i)};
        if (sd.s->submit(kFlow, m, kCookie + i) != 0)
            violated("submit(msg %u) refused with credit %u", i, sd.s->credit(kFlow));
    }
}

// The data packets on the port: every one of its flow's messages, exactly
// their bytes; none of a message released before the poll.
void drain_port(Snd& sd, uint32_t released_before) {
    rte_mbuf* ms[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(g_port->tx, reinterpret_cast<void**>(ms), 64, nullptr)) > 0) {
        for (unsigned i = 0; i < n; i++) {
            ParsedPacket p;
            const DropReason r = parse_packet(ms[i], ParserConfig{}, p);
            if (r != DropReason::None || p.is_control() || p.hdr.flow != kPeerFlow)
                violated("the sender sent a packet that is not its flow's data (%s)", to_string(r).data());
            const uint32_t id = p.hdr.msg_id;
            if (sd.before(id, released_before) && has(p.hdr.flags, Flags::Retx))
                violated("msg %u retransmitted after its release (released %u)", id, released_before);
            if (!sd.before(id, Sender::view(sd.f).submitted))
                violated("msg %u sent, never submitted", id);
            const uint32_t len = size_of(id);
            const GroupPlan g = plan_group(len, kStride);
            const uint32_t count = g.pkt_count;
            if (p.hdr.pkt_idx >= count || p.hdr.offset != g.offset_of(p.hdr.pkt_idx) ||
                static_cast<uint64_t>(p.hdr.offset) + p.hdr.pay_len > len)
                violated("msg %u (%u bytes): packet %u at [%u, +%u) outside its group", id, len, p.hdr.pkt_idx,
                         p.hdr.offset, p.hdr.pay_len);
            Bytes pay(p.hdr.pay_len);
            const void* d = rte_pktmbuf_read(ms[i], p.payload_off, p.hdr.pay_len, pay.data());
            if (p.hdr.pay_len && d != nullptr && d != pay.data())
                memcpy(pay.data(), d, pay.size());
            if (p.hdr.pay_len && (d == nullptr || memcmp(pay.data(), bytes_of(id) + p.hdr.offset, p.hdr.pay_len) != 0))
                violated("msg %u packet %u: payload differs from the message's bytes", id, p.hdr.pkt_idx);
            if (p.is_last() && (p.trailer.msg_len != len || p.trailer.crc32c != crc32c({bytes_of(id), len}) ||
                                p.trailer.pkt_count != count))
                violated("msg %u: its LAST's trailer does not describe it", id);
            if (has(p.hdr.flags, Flags::Retx))
                g_stats.retx_pkts++;
        }
        rte_pktmbuf_free_bulk(ms, n);
    }
}

// Completions and cursors, after a frame or a poll.
void check_sender(Snd& sd) {
    const Sender::FlowView v = Sender::view(sd.f);
    if (sd.before(v.acked, v.released) || sd.before(v.sent, v.acked) || sd.before(v.submitted, v.sent))
        violated("cursors out of order: released %u acked %u sent %u submitted %u", v.released, v.acked, v.sent,
                 v.submitted);
    if (sd.before(v.released, sd.v.released) || sd.before(v.acked, sd.v.acked) || sd.before(v.sent, sd.v.sent))
        violated("a cursor went back: released %u -> %u, acked %u -> %u, sent %u -> %u", sd.v.released, v.released,
                 sd.v.acked, v.acked, sd.v.sent, v.sent);
    SendCompletion c[64];
    for (uint32_t n; (n = sd.s->take_completions(c, 64)) > 0;)
        for (uint32_t i = 0; i < n; i++) {
            if (c[i].flow != kFlow || c[i].msg_id != sd.reported || c[i].cookie != kCookie + c[i].msg_id)
                violated("completion of flow %u msg %u cookie %llu; expected msg %u", c[i].flow, c[i].msg_id,
                         static_cast<unsigned long long>(c[i].cookie), sd.reported);
            if (c[i].status == SendStatus::Delivered ? !sd.before(c[i].msg_id, v.released)
                                                     : c[i].status != SendStatus::Failed || v.failed == FailReason::None)
                violated("msg %u completed %s with released %u, failed %s", c[i].msg_id,
                         c[i].status == SendStatus::Delivered ? "delivered" : "not delivered", v.released,
                         to_string(v.failed));
            sd.reported++;
        }
    if (rte_mempool_avail_count(g_pool) != kPoolSize)
        violated("mbufs not returned: %u of %u in the pool", rte_mempool_avail_count(g_pool), kPoolSize);
    sd.v = v;
}

void sender_poll(Snd& sd, uint64_t now) {
    const uint32_t released = Sender::view(sd.f).released;
    sd.s->poll(now);
    drain_port(sd, released);
    check_sender(sd);
}

void start_sender(Snd& sd, bool cc, uint64_t now) {
    SenderConfig c;
    c.port = g_port->id;
    c.pool = g_pool;
    c.rto = kHz / 1000; // 1 ms
    c.rto_max = 8 * c.rto;
    c.retry_limit = 4;
    c.stall = UINT64_MAX / 4; // the port's ring never fills: drained after every poll
    c.completions = 64;
    c.jobs = 8; // a small queue: NACKs fill it
    c.max_flows = 4;
    c.cc.enabled = cc;
    c.cc.tsc_hz = kHz;
    c.cc.start_bps = 200e6;
    c.name = "tm_fz_snd";
    sd.s = std::make_unique<Sender>(c);
    if (!sd.s->ok())
        env_failure("Sender");
    SendFlowSpec sp;
    sp.id = kFlow;
    sp.tx = tmtest::make_flow(kPeerFlow, 0xC0FFEE, kFlowRing);
    sp.ring_size = kFlowRing;
    sp.max_msg = 1 << 20;
    sp.link = &g_link;
    sd.f = Sender::make_flow(sp, SOCKET_ID_ANY);
    if (sd.f == nullptr || !sd.s->install(sd.f))
        env_failure("the sender's flow");
    sd.v = Sender::view(sd.f);
    submit_more(sd);
    sender_poll(sd, now);
}

void stop_sender(Snd& sd) {
    if (!sd.s)
        return;
    const SenderCounters& k = sd.s->counters();
    g_stats.acks = k.acks_rx;
    g_stats.nacks = k.nacks_rx;
    g_stats.delivered = k.delivered;
    g_stats.failed = k.failed;
    for (size_t i = 0; i < kDropReasonCount; i++)
        g_stats.drops[i] += k.drops[i];
    sd.s->fail(kFlow, FailReason::Closed);
    check_sender(sd);
    if (sd.s->remove(kFlow) != sd.f)
        violated("the flow cannot be removed once failed and reported");
    sd.s.reset();
    Sender::free_flow(sd.f);
    sd.f = nullptr;
}

void repair_for_sender(Snd& sd, Bytes& f, uint8_t c) {
    if ((c & kCtlFixEcho) && fits(f, B, kAckFixedLen)) {
        const bool nack = f[H + 1] & static_cast<uint8_t>(Flags::Nack);
        const uint32_t base = Sender::view(sd.f).released;
        fill(f, H + 2, 2, kFlow);
        fill(f, B + 8, 4, g_link.local_epoch);
        fill(f, B + 12, 4, g_link.peer_epoch);
        wr(f, B + 0, 4, base + rd(f, B + 0, 4));
        wr(f, B + 4, 4, base + rd(f, B + 4, 4));
        wr(f, H + 4, 4, nack ? base + rd(f, H + 4, 4) : rd(f, B + 4, 4));
        if (nack && f.size() >= B + kAckBodyLen + 4 && (f.size() - B - kAckBodyLen) / 4 <= kMaxNackRanges)
            wr(f, B + 16, 2, (f.size() - B - kAckBodyLen) / 4);
    }
    if ((c & kCtlFixSeq) && fits(f, B, kAckFixedLen))
        wr(f, B + 24, 8, sd.seq_max + 1);
    if (fits(f, B, kAckFixedLen))
        sd.seq_max = std::max<uint64_t>(sd.seq_max, rd(f, B + 24, 8));
    if (c & kCtlFixLen)
        fix_lengths(f);
    if (c & kCtlFixMac)
        sign(f, kAckKey);
}

void sender_frame(Snd& sd, const Bytes& f, bool split, uint64_t now) {
    const SenderCounters b = sd.s->counters();
    const Sender::FlowView vb = Sender::view(sd.f);
    const uint64_t seen = g_link.peer_ctl_tsc.load(std::memory_order_relaxed);
    rte_mbuf* m = mbuf_of(f, split);
    const DropReason r = sd.s->on_wire_control(m, now);
    rte_pktmbuf_free(m);
    const SenderCounters& a = sd.s->counters();
    const uint64_t taken = (a.acks_rx - b.acks_rx) + (a.nacks_rx - b.nacks_rx);
    const uint64_t drops = drops_of(a.drops) - drops_of(b.drops);
    if (r == DropReason::None ? taken != 1 || drops != 0 || a.ctl_packets != b.ctl_packets + 1
                              : taken != 0 || drops != 1 || a.drops[index(r)] != b.drops[index(r)] + 1)
        violated("on_wire_control() returned %s: %llu ACKs/NACKs taken, %llu drops counted", to_string(r).data(),
                 static_cast<unsigned long long>(taken), static_cast<unsigned long long>(drops));
    if (!signed_with(f, kAckKey)) {
        const Sender::FlowView va = Sender::view(sd.f);
        if (r == DropReason::None || va.acked != vb.acked || va.released != vb.released || va.failed != vb.failed ||
            g_link.peer_ctl_tsc.load(std::memory_order_relaxed) != seen)
            violated("a frame not signed with the flow's key was believed (%s)", to_string(r).data());
    }
    check_sender(sd);
}

// ---- one input ---------------------------------------------------------------------

void set_up_link() {
    g_link.key = kAckKey;
    g_link.local_epoch = kSenderEpoch;
    g_link.peer_epoch = kReceiverEpoch;
    g_link.connector = true;
    g_link.peer_ctl_tsc.store(0, std::memory_order_relaxed);
    g_link.ack_tx_tsc.store(0, std::memory_order_relaxed);
    memcpy(g_link.l2l4, tmtest::make_flow(kFlow).l2l4, sizeof(g_link.l2l4));
}

AcceptDecision decide(Table& tb, const FlowParams& p) {
    AcceptDecision d;
    auto refuse = [&](RefuseReason r, uint64_t want, uint64_t got) {
        d.reason = r;
        d.expected = want;
        d.got = got;
        return d;
    };
    if (p.nflows > kMaxFlows)
        return refuse(RefuseReason::NoRoom, kMaxFlows, p.nflows);
    if (p.ring_size == 0 || (p.ring_size & (p.ring_size - 1)) != 0 || p.ring_size > 4096)
        return refuse(RefuseReason::RingSize, kConnRing, p.ring_size);
    if (p.max_msg == 0 || p.max_msg > (1u << 20))
        return refuse(RefuseReason::MsgSize, 1u << 20, p.max_msg);
    if (p.keys_given)
        for (uint16_t i = 0; i < p.nflows; i++)
            if (p.key_of(i) != kAcceptKeyValue) {
                d.index = i;
                return refuse(RefuseReason::Key, kAcceptKeyValue, p.key_of(i));
            }
    d.agreed = p;
    d.agreed.mtu = std::min<uint32_t>(p.mtu, 1500);
    d.agreed.key = kAcceptKeyValue;
    d.agreed.overrides.clear();
    d.local_base = kAcceptBase;
    d.defer = tb.defer;
    return d;
}

void set_up_table(Table& tb, uint8_t cfg_bits, uint64_t now) {
    SessionTable::Config cfg;
    cfg.pool = g_pool;
    cfg.mac = cfg.rx_mac = kMac;
    cfg.self = {kIp, kPort};
    cfg.hz = kHz;
    cfg.max_sessions = tb.max_sessions = cfg_bits & kCfgSmallTable ? 2 : 4;
    cfg.data_auth = cfg_bits & kCfgDataAuth;
    if (cfg_bits & kCfgV1)
        cfg.max_version = cfg.min_version = kVersion;
    tb.defer = cfg_bits & kCfgDefer;
    tb.t = std::make_unique<SessionTable>(
        cfg, [&tb](rte_mbuf* m) { return transmit(tb, m); },
        [](Session& s) {
            if (s.state == SessionState::Ended)
                append(g_stats.ends, to_string(s.end));
        });
    if (!tb.t->listen(kService, kListenKey, [&tb](Session&, const FlowParams& p) { return decide(tb, p); }))
        env_failure("listen");
    if (!(cfg_bits & kCfgNoConnect)) {
        FlowParams p;
        p.nflows = kConnFlows;
        p.mtu = kConnMtu;
        p.ring_size = kConnRing;
        p.max_msg = kConnMaxMsg;
        p.key = cfg_bits & kCfgKeysGiven ? kAcceptKeyValue : kConnKeyValue;
        p.keys_given = cfg_bits & kCfgKeysGiven;
        const Session* s = tb.t->connect({kPeerIp, kPort}, kService, kConnKey, p, kConnBase,
                                         cfg_bits & kCfgArp ? nullptr : &kPeerMac, now);
        if (s == nullptr)
            env_failure("connect");
        tb.conn_id = s->id;
    }
    look(tb, nullptr, {});
    check_table(tb);
}

constexpr uint64_t kSteps[] = {0, kHz / 10000, kHz, 6 * kHz};

} // namespace

const RunStats& last_stats() { return g_stats; }
rte_mempool* pool() { return g_pool; }

} // namespace tmfuzz::ctl

using namespace tmfuzz::ctl;

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    static bool done = false;
    if (done)
        return 0;
    done = true;
    tmfuzz::init_eal(argc && *argc > 0 ? (*argv)[0] : "fuzz_ctl");
    g_pool = rte_pktmbuf_pool_create("tm_fuzz_pool", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (g_pool == nullptr)
        tmfuzz::env_failure("mbuf pool");
    try {
        g_port = new tmtest::RingPort(g_pool, 4096);
    } catch (const std::exception& e) {
        tmfuzz::env_failure("ring port: %s", e.what());
    }
    for (size_t i = 0; i < sizeof(g_bytes); i++)
        g_bytes[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
    atexit([] {
        delete g_port;
        tmfuzz::cleanup_eal();
    });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (g_pool == nullptr)
        LLVMFuzzerInitialize(nullptr, nullptr);
    g_stats = RunStats{};
    g_record = 0;
    if (size == 0)
        return 0;
    rte_srand(kSeed);
    const uint8_t cfg_bits = data[0];
    uint64_t now = kT0;
    set_up_link();
    Table tb;
    Snd sd;
    set_up_table(tb, cfg_bits, now);

    size_t pos = 1;
    static Bytes f;
    while (pos < size) {
        g_record++;
        const uint8_t c = data[pos++];
        uint16_t lenf = 0;
        if (pos + 2 <= size) {
            lenf = static_cast<uint16_t>(data[pos] << 8 | data[pos + 1]);
            pos += 2;
        } else {
            pos = size;
        }
        const size_t len = std::min<size_t>(lenf & kLenMask, size - pos);
        const bool split = lenf & kLenSplit;
        f.assign(data + pos, data + pos + len);
        pos += len;

        if (const uint64_t dt = kSteps[(c >> kCtlStepShift) & 3]; dt != 0) {
            now += dt;
            const auto before = tb.snaps();
            tb.t->poll(now);
            look(tb, nullptr, before);
            check_table(tb);
            if (sd.s)
                sender_poll(sd, now);
        }
        if (c & kCtlSender) {
            if (!sd.s)
                start_sender(sd, cfg_bits & kCfgCc, now);
            if (!f.empty()) {
                repair_for_sender(sd, f, c);
                sender_frame(sd, f, split, now);
            }
            submit_more(sd);
        } else if (!f.empty()) {
            repair_for_table(tb, f, c);
            table_frame(tb, f, split, now);
        }
        application(tb, now);
        g_stats.records++;
    }
    const SessionCounters& k = tb.t->counters();
    g_stats.established = k.established;
    g_stats.refused = k.refused;
    for (size_t i = 0; i < kDropReasonCount; i++)
        g_stats.drops[i] += k.drops[i];
    stop_sender(sd);
    tb.t.reset();
    if (rte_mempool_avail_count(g_pool) != kPoolSize)
        violated("mbufs not returned: %u of %u in the pool at the end", rte_mempool_avail_count(g_pool), kPoolSize);
    return 0;
}
