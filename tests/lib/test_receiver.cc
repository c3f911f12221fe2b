// Receiver: the ACK scheduler's cadence, the cumulative ACK after a consumer
// gives up, the routing of frames that are not data, a local sender's
// records, and the placer's counters when earlier state is thrown away. Real
// completion rings, real rte_rings, real mbufs; time driven by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <rte_mbuf_dyn.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "fixtures.h"
#include "tailmark/arp.h"
#include "tailmark/control.h"
#include "tailmark/packet_parser.h"
#include "tailmark/receiver.h"

using namespace tailmark;
using R = DropReason;

namespace {

const SipKey kKey{0x0706050403020100ull, 0x0F0E0D0C0B0A0908ull};
constexpr uint32_t kLocalEpoch = 0x7EE20002; // this end (the receiver)
constexpr uint32_t kPeerEpoch = 0x51E00001;  // the sender's
constexpr uint16_t kRxFlow = 70;             // this end's id: data carries it
constexpr uint16_t kFlow = 5;                // the sender's id: ACKs and NACKs carry it
constexpr uint32_t kDataKey = 0xC0FFEE;
constexpr uint32_t kStride = stride_for_mtu(1500);
constexpr uint32_t kRing = 16; // ACK batch: 16 / 4 = 4

struct Rig {
    tmtest::Pool pool;
    std::string name = tmtest::unique_name("rcv");
    std::vector<uint8_t> sender_of = std::vector<uint8_t>(65536, kNoSender);
    rte_ring* ctl_out = nullptr;
    rte_ring* control = nullptr;
    rte_ring* wire_in[2] = {};
    rte_ring* local_in[2] = {};
    SessionLink link;
    std::unique_ptr<CompletionRing> ring;
    std::unique_ptr<Receiver> rx;
    RecvFlow* flow = nullptr;
    TxFlow tx = tmtest::make_flow(kRxFlow, kDataKey, kRing);

    Rig(uint64_t nack_delay, uint64_t ack_min, bool local_peer = false, unsigned control_slots = 64,
        int arrival_field = -1, int rail_port = -1) {
        auto mk = [&](const char* sfx, unsigned n, unsigned flags) {
            rte_ring* r = rte_ring_create((name + sfx).c_str(), n, SOCKET_ID_ANY, flags);
            REQUIRE(r != nullptr);
            return r;
        };
        ctl_out = mk("co", 64, 0);
        control = mk("cp", control_slots, RING_F_EXACT_SZ);
        wire_in[0] = mk("w0", 64, 0);
        wire_in[1] = mk("w1", 64, 0);
        for (int i = 0; i < 2; i++) {
            local_in[i] = rte_ring_create_elem((name + "l" + std::to_string(i)).c_str(), sizeof(Control), 64,
                                               SOCKET_ID_ANY, 0);
            REQUIRE(local_in[i] != nullptr);
        }
        sender_of[kFlow] = 1;
        link.key = kKey;
        link.local_epoch = kLocalEpoch;
        link.peer_epoch = kPeerEpoch;
        link.local_peer = local_peer;
        memcpy(link.l2l4, tmtest::make_flow(kFlow).l2l4, sizeof(link.l2l4));

        ReceiverConfig c;
        c.pool = pool.mp;
        c.nack_delay = nack_delay;
        c.ack_min = ack_min;
        c.routes.sender_of = sender_of.data();
        c.routes.wire_in = wire_in;
        c.routes.local_in = local_in;
        c.routes.nsenders = 2;
        c.routes.control = control;
        c.routes.ctl_out = ctl_out;
        c.arrival_field = arrival_field;
        if (rail_port >= 0) { // rail 1 arrives on port rail_port (rail 0 on port 0)
            c.rails = 2;
            c.rail_ports[1] = static_cast<uint16_t>(rail_port);
        }
        c.name = name.c_str();
        rx = std::make_unique<Receiver>(c);
        REQUIRE(rx->ok());

        ring = tmtest::make_ring(kRxFlow, kRing, 64 * 1024);
        REQUIRE(ring != nullptr);
        RecvFlowSpec sp;
        sp.id = kRxFlow;
        sp.ring = ring.get();
        sp.key = kDataKey;
        sp.stride = kStride;
        sp.peer_flow = kFlow;
        sp.link = &link;
        flow = Receiver::make_flow(sp, SOCKET_ID_ANY);
        REQUIRE(flow != nullptr);
        REQUIRE(rx->install(flow));
    }
    ~Rig() {
        if (rx && rx->remove(kRxFlow) == flow)
            Receiver::free_flow(flow);
        rx.reset();
        rte_mbuf* m;
        for (rte_ring* r : {ctl_out, control, wire_in[0], wire_in[1]}) {
            while (rte_ring_dequeue(r, reinterpret_cast<void**>(&m)) == 0)
                rte_pktmbuf_free(m);
            rte_ring_free(r);
        }
        rte_ring_free(local_in[0]);
        rte_ring_free(local_in[1]);
    }
    Rig(const Rig&) = delete;
    Rig& operator=(const Rig&) = delete;

    // Every packet of a message, in order (since: the lcore's previous poll).
    void deliver(uint32_t msg_id, const std::vector<uint8_t>& bytes, uint64_t now, uint64_t since = 0) {
        auto g = tmtest::build_group(pool.mp, tx, msg_id, bytes);
        rx->rx_burst(g.data(), static_cast<uint16_t>(g.size()), now, since);
    }
    // Some packets of a message.
    void deliver(uint32_t msg_id, const std::vector<uint8_t>& bytes, std::initializer_list<uint32_t> idx,
                 uint64_t now) {
        auto g = tmtest::build_group(pool.mp, tx, msg_id, bytes);
        std::vector<rte_mbuf*> pick;
        for (uint32_t i : idx)
            pick.push_back(g[i]);
        for (uint32_t i = 0; i < g.size(); i++)
            if (std::find(idx.begin(), idx.end(), i) == idx.end())
                rte_pktmbuf_free(g[i]);
        rx->rx_burst(pick.data(), static_cast<uint16_t>(pick.size()), now);
    }
    void consume(uint32_t msg_id) {
        REQUIRE(ring->poll(msg_id) != nullptr);
        REQUIRE(ring->release(msg_id));
    }

    struct Ack {
        Header h;
        Control c;
    };
    // The ACK/NACK frames on ctl_out, verified with the session's key.
    std::vector<Ack> sent() {
        std::vector<Ack> out;
        rte_mbuf* m;
        while (rte_ring_dequeue(ctl_out, reinterpret_cast<void**>(&m)) == 0) {
            ParsedPacket p;
            CHECK(parse_packet(m, ParserConfig{}, p) == R::None);
            CHECK(p.is_control());
            Ack a;
            a.h = p.hdr;
            CHECK(parse_ack(m, p, kKey, a.c) == R::None);
            rte_pktmbuf_free(m);
            out.push_back(a);
        }
        return out;
    }
    const RxCounters& pc() const { return rx->placer().counters(); }
    uint64_t rdrops(R r) const { return rx->counters().drops[index(r)]; }
};

void check_ack(const Rig::Ack& a, uint32_t released, uint32_t acked) {
    CHECK(a.h.flow == kFlow);
    CHECK(static_cast<uint8_t>(a.h.flags) == static_cast<uint8_t>(Flags::Ack));
    CHECK(a.h.msg_id == acked);
    CHECK_FALSE(a.c.nack);
    CHECK(a.c.released_upto == released);
    CHECK(a.c.acked_upto == acked);
    CHECK(a.c.sender_epoch == kPeerEpoch);
    CHECK(a.c.receiver_epoch == kLocalEpoch);
    CHECK(a.c.n.flow == kFlow);
}

} // namespace

TEST_CASE("ACK cadence: at once after a batch, else once ack_min passed since the last, never for nothing",
          "[receiver]") {
    Rig r(0, 1000);
    std::vector<std::vector<uint8_t>> b;
    for (uint32_t i = 0; i < 12; i++)
        b.push_back(tmtest::pattern(200 + i, i));

    for (uint32_t m = 0; m < 3; m++)
        r.deliver(m, b[m], 100);
    CHECK(r.rx->placer().acked_upto(kRxFlow) == 3);
    r.rx->poll(100); // moved by 3 < 4, and 100 < ack_min since none
    CHECK(r.sent().empty());
    r.deliver(3, b[3], 200);
    r.rx->poll(200); // a batch
    auto a = r.sent();
    REQUIRE(a.size() == 1);
    check_ack(a[0], 0, 4);
    CHECK(r.link.ack_tx_tsc.load() == 200);
    r.rx->poll(300);
    CHECK(r.sent().empty());

    r.consume(0);
    r.consume(1);
    r.rx->poll(1199); // released moved by 2: waits for ack_min since 200
    CHECK(r.sent().empty());
    r.rx->poll(1200);
    a = r.sent();
    REQUIRE(a.size() == 1);
    check_ack(a[0], 2, 4);
    r.rx->poll(5000);
    CHECK(r.sent().empty());

    for (uint32_t m = 4; m < 8; m++)
        r.deliver(m, b[m], 1300);
    r.rx->poll(1300); // a batch again, 100 after the last
    a = r.sent();
    REQUIRE(a.size() == 1);
    check_ack(a[0], 2, 8);
    r.consume(2);
    r.consume(3);
    r.consume(4);
    r.consume(5);
    r.rx->poll(1301); // the consumer moved by a batch
    a = r.sent();
    REQUIRE(a.size() == 1);
    check_ack(a[0], 6, 8);
    r.rx->poll(100000);
    CHECK(r.sent().empty());
    CHECK(r.rx->counters().acks_tx == 4);
    CHECK(r.rx->counters().ctl_packets == 4);
    CHECK(r.rx->counters().nacks_tx == 0);
    CHECK(r.rx->counters().ctl_lost == 0);
}

// The ACK's hold is the time its echoed packet spent in this host. A burst
// that came after the lcore was away (descheduled: 1.2-1.4 ms on 2 vCPUs)
// arrived at most since the last poll that drained the queue (rx_step's
// floor), and waited in the rx ring; the hold counts that wait, so the
// sender's RTT sample is the path's. Without it, tailmark-cat --flows 4
// between two daemons cut its rate 20-25 times in 2 s, 6.6% of the samples
// over 500 us (1.4% for one flow).
TEST_CASE("echo: the hold counts from the burst's arrival floor, the rx ring's wait being this host's", "[receiver]") {
    Rig r(0, 1000);
    const uint64_t hz = rte_get_tsc_hz();
    const uint64_t t0 = 10 * hz, stall = hz / 1000; // a 1 ms stall before the burst
    auto b = tmtest::pattern(300, 1);
    auto ns = [&](uint64_t cycles) { return cycles * 1000000000ull / hz; };

    for (uint32_t m = 0; m < 4; m++) // a batch: the next poll ACKs it
        r.deliver(m, b, t0 + stall, t0);
    r.rx->poll(t0 + stall + 100);
    auto a = r.sent();
    REQUIRE(a.size() == 1);
    CHECK(a[0].c.hold_ns == ns(stall + 100)); // from the floor, not from the burst

    for (uint32_t m = 4; m < 8; m++) // no floor (the in-memory loopback, a hand-over): from the burst
        r.deliver(m, b, t0 + 2 * stall);
    r.rx->poll(t0 + 2 * stall + 100);
    a = r.sent();
    REQUIRE(a.size() == 1);
    CHECK(a[0].c.hold_ns == ns(100));

    for (uint32_t m = 8; m < 12; m++) // a floor after the burst (clocks at odds): the burst's
        r.deliver(m, b, t0 + 3 * stall, t0 + 4 * stall);
    r.rx->poll(t0 + 3 * stall + 100);
    a = r.sent();
    REQUIRE(a.size() == 1);
    CHECK(a[0].c.hold_ns == ns(100));
}

// The Sender's half of it: an ACK routed to it carries the earliest it may
// have arrived (the burst's floor, else the burst's own TSC), for its wait in
// this host to count as such (SenderConfig::arrival_field).
TEST_CASE("echo: ACKs routed to a Sender carry their burst's earliest arrival", "[receiver]") {
    const int off = tmtest::arrival_field();
    REQUIRE(off >= 0);
    Rig r(0, 1000, false, 64, off);
    Control c;
    c.released_upto = 0;
    c.acked_upto = 0;
    c.sender_epoch = kLocalEpoch;
    c.receiver_epoch = kPeerEpoch;
    c.n.flow = kFlow;
    auto routed = [&](uint64_t now, uint64_t since) {
        rte_mbuf* m = build_ack(r.pool.mp, r.link.l2l4, kKey, c);
        REQUIRE(m != nullptr);
        r.rx->rx_burst(&m, 1, now, since);
        rte_mbuf* got = nullptr;
        REQUIRE(rte_ring_dequeue(r.wire_in[1], reinterpret_cast<void**>(&got)) == 0);
        const uint64_t at = *RTE_MBUF_DYNFIELD(got, off, uint64_t*);
        rte_pktmbuf_free(got);
        return at;
    };
    CHECK(routed(5000, 1000) == 1000); // the floor
    CHECK(routed(7000, 0) == 7000);    // none: the burst
    CHECK(routed(7000, 9000) == 7000); // a floor after the burst: the burst
}

TEST_CASE("nack_delay 0: a give-up still moves the cumulative ACK (acked_upto >= released_upto)",
          "[receiver]") {
    // Regression: the catch-up to the consumer's cursor ran only in the NACK
    // scan, which NACK delay 0 turns off; the cumulative ACK stayed behind
    // the given-up message for good, every ACK carried acked_upto <
    // released_upto (which a sender refuses as malformed), and no credit
    // ever came back.
    Rig r(0, 1000);
    const auto big = tmtest::pattern(2 * kStride + 100, 1); // 3 packets
    const auto small = tmtest::pattern(100, 2);
    r.deliver(0, big, {0}, 100); // msg 0 never completes
    r.deliver(1, small, 100);
    CHECK(r.rx->placer().acked_upto(kRxFlow) == 0);
    REQUIRE(r.ring->release(0)); // the consumer gives msg 0 up
    CHECK(r.ring->gave_up() == 1);
    r.consume(1);
    r.rx->poll(2000);
    auto a = r.sent();
    REQUIRE(a.size() == 1);
    check_ack(a[0], 2, 2);
    CHECK(r.rx->placer().acked_upto(kRxFlow) == 2);
    // And it keeps moving.
    r.deliver(2, small, 2100);
    r.rx->poll(3100);
    a = r.sent();
    REQUIRE(a.size() == 1);
    check_ack(a[0], 2, 3);
    CHECK(r.rx->counters().nacks_tx == 0);
}

TEST_CASE("routing: ACK/NACK frames to their flow's Sender, SESSION and ARP to the control plane, the rest "
          "dropped and freed",
          "[receiver]") {
    Rig r(0, 1000, false, 2); // the control ring holds 2
    r.sender_of[9] = 0;
    r.sender_of[8] = 5; // no such Sender
    const unsigned start = r.pool.avail();

    Control c;
    c.released_upto = 1;
    c.acked_upto = 2;
    c.sender_epoch = kLocalEpoch;
    c.receiver_epoch = kPeerEpoch;
    auto ack_for = [&](uint16_t flow, bool nack) {
        Control x = c;
        x.n.flow = flow;
        x.nack = nack;
        if (nack) {
            x.n.msg_id = 2;
            x.n.nranges = 1;
            x.n.ranges[0] = {0, 0};
        }
        rte_mbuf* m = build_ack(r.pool.mp, r.link.l2l4, kKey, x);
        REQUIRE(m != nullptr);
        return m;
    };
    SessionMsg sm;
    sm.type = SessionType::Keepalive;
    sm.dst_session = kFlow; // a session id that is also a flow id: still the control plane's
    sm.src_epoch = kLocalEpoch;
    sm.dst_epoch = kPeerEpoch;
    const rte_ether_addr mac{{0x02, 0, 0, 0, 0, 9}};
    rte_mbuf* in[7] = {
        ack_for(kFlow, false),                                                  // -> wire_in[1]
        ack_for(9, true),                                                       // -> wire_in[0]
        ack_for(6, false),                                                      // no owner
        ack_for(8, false),                                                      // owner out of range
        build_session(r.pool.mp, r.link.l2l4, kKey, sm),                        // -> control
        build_arp_request(r.pool.mp, mac, RTE_IPV4(198, 18, 0, 9), RTE_IPV4(198, 18, 0, 1)), // -> control
        build_arp_request(r.pool.mp, mac, RTE_IPV4(198, 18, 0, 9), RTE_IPV4(198, 18, 0, 2)), // control full
    };
    for (rte_mbuf* m : in)
        REQUIRE(m != nullptr);
    rte_mbuf* expect[7];
    std::copy(std::begin(in), std::end(in), expect);
    r.rx->rx_burst(in, 7, 100);

    rte_mbuf* got[8];
    REQUIRE(rte_ring_dequeue_burst(r.wire_in[1], reinterpret_cast<void**>(got), 8, nullptr) == 1);
    CHECK(got[0] == expect[0]);
    rte_pktmbuf_free(got[0]);
    REQUIRE(rte_ring_dequeue_burst(r.wire_in[0], reinterpret_cast<void**>(got), 8, nullptr) == 1);
    CHECK(got[0] == expect[1]);
    rte_pktmbuf_free(got[0]);
    REQUIRE(rte_ring_dequeue_burst(r.control, reinterpret_cast<void**>(got), 8, nullptr) == 2);
    CHECK(got[0] == expect[4]);
    CHECK(got[1] == expect[5]);
    rte_pktmbuf_free_bulk(got, 2);
    CHECK(r.rx->counters().routed == 4);
    CHECK(r.rdrops(R::UnknownFlow) == 2);
    CHECK(r.rdrops(R::ControlBacklog) == 1);
    uint64_t total = 0;
    for (uint64_t d : r.rx->counters().drops)
        total += d;
    CHECK(total == 3);
    CHECK(r.pc().packets == 0); // none of them is the placer's
    CHECK(r.pool.avail() == start); // the dropped ones were freed
}

TEST_CASE("local peer: no ACK packets (the sender reads the cursors); NACKs as records to its local inbox",
          "[receiver]") {
    Rig r(1000, 1000, true);
    const auto small = tmtest::pattern(100, 1);
    const auto big = tmtest::pattern(3 * kStride + 100, 2); // 4 packets
    r.deliver(0, small, 100);
    r.rx->poll(100);
    r.consume(0);
    r.rx->poll(5000);
    CHECK(rte_ring_count(r.ctl_out) == 0);
    CHECK(r.rx->counters().acks_tx == 0);
    CHECK(*Receiver::acked_word(r.flow) == 1); // what the sender reads instead

    r.deliver(1, big, {0, 2}, 6000); // packet 1 missing, below packet 2
    r.rx->poll(6000);
    CHECK(rte_ring_count(r.local_in[1]) == 0); // not for the NACK delay
    r.rx->poll(7500);
    REQUIRE(rte_ring_count(r.local_in[1]) == 1);
    Control c;
    REQUIRE(rte_ring_dequeue_elem(r.local_in[1], &c, sizeof(c)) == 0);
    CHECK(c.nack);
    CHECK(c.n.flow == kFlow);
    CHECK(c.n.msg_id == 1);
    REQUIRE(c.n.nranges == 1);
    CHECK(c.n.ranges[0].first == 1);
    CHECK(c.n.ranges[0].count == 1);
    CHECK(c.released_upto == 1);
    CHECK(c.acked_upto == 1);
    CHECK(c.sender_epoch == kPeerEpoch);
    CHECK(c.receiver_epoch == kLocalEpoch);
    CHECK(rte_ring_count(r.local_in[0]) == 0);
    CHECK(rte_ring_count(r.ctl_out) == 0);
    CHECK(r.rx->counters().nacks_tx == 1);
    CHECK(r.rx->counters().ctl_packets == 0);
    CHECK(r.link.ack_tx_tsc.load() == 7500);
}

TEST_CASE("placer counters: a placed packet is never a drop, thrown-away state is counted as discarded",
          "[receiver]") {
    // Regression: packets once placed, whose state a contradicting LAST threw
    // away, were counted as drops too, so drops + placed exceeded packets.
    Rig r(0, 1000);
    auto balanced = [&] {
        INFO("packets " << r.pc().packets << " placed " << r.pc().placed << " dropped " << r.pc().dropped());
        CHECK(r.pc().placed + r.pc().dropped() == r.pc().packets);
    };
    SECTION("a LAST that contradicts earlier packets") {
        const auto x = tmtest::pattern(5 * kStride + 200, 1); // 6 packets
        const auto y = tmtest::pattern(2 * kStride + 100, 2); // 3 packets, same msg_id
        r.deliver(0, x, {0, 1, 2, 3}, 100);
        CHECK(r.pc().placed == 4);
        balanced();
        r.deliver(0, y, {2}, 200); // its LAST: 3 packets, x's 4 placed do not fit
        CHECK(r.pc().packets == 5);
        CHECK(r.pc().placed == 5);
        CHECK(r.pc().dropped() == 0);
        CHECK(r.pc().discarded == 4);
        balanced();
        r.deliver(0, y, {0, 1}, 300);
        CHECK(r.pc().completions == 1);
        const CompletionSlot* s = r.ring->poll(0);
        REQUIRE(s != nullptr);
        auto got = r.ring->message(s);
        CHECK(std::vector<uint8_t>(got.begin(), got.end()) == y);
        r.deliver(0, y, {1}, 400); // a real drop now
        CHECK(r.pc().drops[index(R::AlreadyCompleted)] == 1);
        CHECK(r.pc().packets == 8);
        CHECK(r.pc().placed == 7);
        CHECK(r.pc().discarded == 4);
        balanced();
    }
    SECTION("a retransmitted LAST replacing a different one") {
        const auto x = tmtest::pattern(2 * kStride + 100, 3); // 3 packets
        const auto z = tmtest::pattern(2 * kStride + 300, 4); // 3 packets, another trailer
        r.deliver(0, x, {2, 0}, 100);
        CHECK(r.pc().placed == 2);
        // z's LAST as the sender's retransmission (RETX)
        TxMarker mk(r.pool.mp, PayloadMode::Copy);
        TxMessage m;
        m.msg_id = 0;
        m.bytes = z;
        REQUIRE(mk.prepare(r.tx, m));
        rte_mbuf* last = nullptr;
        REQUIRE(mk.build(r.tx, m, 2, 1, &last, Flags::Retx) == 1);
        r.rx->rx_burst(&last, 1, 200);
        CHECK(r.pc().packets == 3);
        CHECK(r.pc().placed == 3);
        CHECK(r.pc().dropped() == 0);
        CHECK(r.pc().discarded == 2);
        balanced();
        // x's LAST again, not a retransmission: a conflict, dropped, not placed.
        r.deliver(0, x, {2}, 300);
        CHECK(r.pc().drops[index(R::ConflictingLast)] == 1);
        CHECK(r.pc().placed == 3);
        balanced();
        r.deliver(0, z, {0, 1}, 400);
        CHECK(r.pc().completions == 1);
        const CompletionSlot* s = r.ring->poll(0);
        REQUIRE(s != nullptr);
        auto got = r.ring->message(s);
        CHECK(std::vector<uint8_t>(got.begin(), got.end()) == z);
        CHECK(r.pc().packets == 6);
        CHECK(r.pc().placed == 5);
        CHECK(r.pc().discarded == 2);
        balanced();
    }
}

namespace {

// Two Receivers (two rx lcores) sharing an owner table, each with its
// hand-off ring of ring_size places; with learn, the table of where each
// flow's frames come in too.
// The test flow (kRxFlow) on ring, not installed anywhere yet.
RecvFlow* handoff_flow(CompletionRing* ring) {
    RecvFlowSpec sp;
    sp.id = kRxFlow;
    sp.ring = ring;
    sp.key = kDataKey;
    sp.stride = kStride;
    RecvFlow* flow = Receiver::make_flow(sp, SOCKET_ID_ANY);
    REQUIRE(flow != nullptr);
    return flow;
}

struct HandoffPair {
    std::vector<uint8_t> owner = std::vector<uint8_t>(65536, RxPlacer::kNoOwner);
    std::vector<uint8_t> arrived = std::vector<uint8_t>(65536, RxPlacer::kNoOwner);
    rte_ring* in[2] = {};
    std::unique_ptr<Receiver> rx[2];

    HandoffPair(rte_mempool* mp, const char* tag, unsigned ring_size, bool learn) {
        const std::string name = tmtest::unique_name(tag);
        for (int i = 0; i < 2; i++) {
            in[i] = rte_ring_create((name + std::to_string(i)).c_str(), ring_size, SOCKET_ID_ANY, RING_F_SC_DEQ);
            REQUIRE(in[i] != nullptr);
        }
        for (uint8_t i = 0; i < 2; i++) {
            ReceiverConfig c;
            c.pool = mp;
            c.routes.rx_owner = owner.data();
            c.routes.rx_arrived = learn ? arrived.data() : nullptr;
            c.routes.handoff_in = in;
            c.routes.nreceivers = 2;
            c.routes.self = i;
            const std::string n = name + "r" + std::to_string(i);
            c.name = n.c_str();
            rx[i] = std::make_unique<Receiver>(c);
            REQUIRE(rx[i]->ok());
        }
    }
    // The test flow on a completion ring of its own, named rx[at]'s in the
    // owner table and installed there; tx cuts its packets. The test
    // removes and frees the flow.
    std::unique_ptr<CompletionRing> ring;
    RecvFlow* flow = nullptr;
    TxFlow tx = tmtest::make_flow(kRxFlow, kDataKey, kRing);
    void install_flow(uint8_t at) {
        ring = tmtest::make_ring(kRxFlow, kRing, 64 * 1024);
        REQUIRE(ring != nullptr);
        flow = handoff_flow(ring.get());
        owner[kRxFlow] = at;
        REQUIRE(rx[at]->install(flow));
    }
    ~HandoffPair() {
        rx[0].reset();
        rx[1].reset();
        rte_ring_free(in[0]);
        rte_ring_free(in[1]);
    }
};

} // namespace

// Steering by hand-off: two Receivers (two rx lcores) share an owner table;
// the flow is B's, its data arrives at A (the port's hash put it there).
TEST_CASE("hand-off: data of another Receiver's flow goes to its ring, is placed there once, never bounces",
          "[receiver]") {
    tmtest::Pool pool;
    HandoffPair hp(pool.mp, "ho", 8, false); // each ring holds 7
    hp.install_flow(1);
    const unsigned start = pool.avail();

    std::vector<uint8_t> msg(5000);
    for (size_t i = 0; i < msg.size(); i++)
        msg[i] = static_cast<uint8_t>(i * 7 + 3);
    auto g = tmtest::build_group(pool.mp, hp.tx, 0, msg); // 4 packets
    REQUIRE(g.size() == 4);
    hp.rx[0]->rx_burst(g.data(), 4, 100);
    CHECK(hp.rx[0]->counters().handed_out == 4);
    CHECK(hp.rx[0]->placer().counters().packets == 0); // counted where placed
    CHECK(hp.ring->poll(0) == nullptr);
    hp.rx[1]->poll(200);
    CHECK(hp.rx[1]->counters().handed_in == 4);
    CHECK(hp.rx[1]->placer().counters().placed == 4);
    const CompletionSlot* s = hp.ring->poll(0);
    REQUIRE(s != nullptr);
    CHECK(s->msg_len == msg.size());
    CHECK(memcmp(hp.ring->region(0), msg.data(), msg.size()) == 0);
    REQUIRE(hp.ring->release(0));

    // B's own data on B's queue: placed at once, nothing handed.
    auto g1 = tmtest::build_group(pool.mp, hp.tx, 1, msg);
    hp.rx[1]->rx_burst(g1.data(), static_cast<uint16_t>(g1.size()), 300);
    CHECK(hp.rx[1]->placer().counters().placed == 8);
    CHECK(hp.rx[1]->counters().handed_out == 0);
    REQUIRE(hp.ring->poll(1) != nullptr);
    REQUIRE(hp.ring->release(1));

    // A full hand-off ring (7 places): the rest is dropped and counted; the
    // sender's recovery owes it.
    std::vector<rte_mbuf*> many;
    for (uint32_t m = 2; m < 4; m++) {
        auto gm = tmtest::build_group(pool.mp, hp.tx, m, msg);
        many.insert(many.end(), gm.begin(), gm.end());
    }
    hp.rx[0]->rx_burst(many.data(), static_cast<uint16_t>(many.size()), 400);
    CHECK(hp.rx[0]->counters().handed_out == 4 + 7);
    CHECK(hp.rx[0]->counters().drops[index(R::HandoffBacklog)] == 1);

    // The flow leaves B before B drains: the frames are dropped at B as an
    // unknown flow's, never passed back to A.
    REQUIRE(hp.rx[1]->remove(kRxFlow) == hp.flow);
    hp.owner[kRxFlow] = RxPlacer::kNoOwner;
    hp.rx[1]->poll(500);
    CHECK(hp.rx[1]->counters().handed_in == 4 + 7);
    CHECK(hp.rx[1]->placer().counters().drops[index(R::UnknownFlow)] == 7);
    CHECK(hp.rx[1]->counters().handed_out == 0);
    CHECK(rte_ring_count(hp.in[0]) == 0);
    // No owner at all: A drops it itself.
    auto g2 = tmtest::build_group(pool.mp, hp.tx, 4, msg);
    hp.rx[0]->rx_burst(g2.data(), static_cast<uint16_t>(g2.size()), 600);
    CHECK(hp.rx[0]->placer().counters().drops[index(R::UnknownFlow)] == 4);
    CHECK(hp.rx[0]->counters().handed_out == 11);
    CHECK(pool.avail() == start); // every frame freed exactly once
    Receiver::free_flow(hp.flow);
}

// A flow moving to the Receiver its frames reach (the daemon's rebalance):
// arrivals are learned where frames come in off the port, not where they
// were handed; while the flow is named the new Receiver's but not installed
// there, its frames wait on that Receiver's ring (held), and are placed once
// it is; a flow that never arrives is dropped after kHoldLimitUs, not held
// for ever.
TEST_CASE("hand-off: a moving flow's frames are held until it is installed, then placed once", "[receiver]") {
    tmtest::Pool pool;
    HandoffPair hp(pool.mp, "mv", 64, true);
    hp.install_flow(0);
    const unsigned start = pool.avail();
    std::vector<uint8_t> msg(5000);
    for (size_t i = 0; i < msg.size(); i++)
        msg[i] = static_cast<uint8_t>(i * 13 + 1);
    const uint64_t t0 = 1000000;

    // Message 0 comes in on lcore 1's queue: handed to 0, placed there; the
    // arrival is 1's, and placing the handed frames on 0 does not change it.
    auto g0 = tmtest::build_group(pool.mp, hp.tx, 0, msg);
    REQUIRE(g0.size() == 4);
    hp.rx[1]->rx_burst(g0.data(), 4, t0);
    CHECK(hp.arrived[kRxFlow] == 1);
    hp.rx[0]->poll(t0 + 1);
    CHECK(hp.rx[0]->placer().counters().placed == 4);
    CHECK(hp.arrived[kRxFlow] == 1);
    REQUIRE(hp.ring->poll(0) != nullptr);
    REQUIRE(hp.ring->release(0));

    // The move: out of 0, named 1's, not yet in 1. Message 1 comes in on 1:
    // held on 1's own ring, again at each poll, nothing placed or dropped.
    REQUIRE(hp.rx[0]->remove(kRxFlow) == hp.flow);
    hp.owner[kRxFlow] = 1;
    auto g1 = tmtest::build_group(pool.mp, hp.tx, 1, msg);
    hp.rx[1]->rx_burst(g1.data(), 4, t0 + 2);
    CHECK(hp.rx[1]->counters().held == 4);
    CHECK(rte_ring_count(hp.in[1]) == 4);
    hp.rx[1]->poll(t0 + 3);
    CHECK(hp.rx[1]->counters().held == 8);
    CHECK(hp.rx[1]->counters().handed_in == 4);
    CHECK(rte_ring_count(hp.in[1]) == 4);
    CHECK(hp.rx[1]->placer().counters().placed == 0);
    // In 1 now: the held frames are placed at its next poll, once.
    REQUIRE(hp.rx[1]->install(hp.flow));
    hp.rx[1]->poll(t0 + 4);
    CHECK(hp.rx[1]->placer().counters().placed == 4);
    CHECK(hp.rx[1]->counters().handed_in == 8);
    // Held frames count as handed to itself (4 to 0, then 4 held twice): the sums balance.
    CHECK(hp.rx[1]->counters().handed_out == 12);
    CHECK(hp.rx[0]->counters().handed_in + hp.rx[1]->counters().handed_in ==
          hp.rx[0]->counters().handed_out + hp.rx[1]->counters().handed_out);
    CHECK(rte_ring_count(hp.in[1]) == 0);
    const CompletionSlot* s = hp.ring->poll(1);
    REQUIRE(s != nullptr);
    CHECK(s->msg_len == msg.size());
    CHECK(memcmp(hp.ring->region(1), msg.data(), msg.size()) == 0);
    REQUIRE(hp.ring->release(1));
    for (uint8_t i = 0; i < 2; i++) {
        CHECK(hp.rx[i]->counters().drops[index(R::UnknownFlow)] == 0);
        CHECK(hp.rx[i]->placer().counters().drops[index(R::UnknownFlow)] == 0);
    }

    // Named 1's but never installed again: held for kHoldLimitUs, then dropped.
    REQUIRE(hp.rx[1]->remove(kRxFlow) == hp.flow);
    const uint64_t limit = kHoldLimitUs * rte_get_tsc_hz() / 1000000;
    auto g2 = tmtest::build_group(pool.mp, hp.tx, 2, msg);
    const uint64_t t1 = t0 + 10;
    hp.rx[1]->rx_burst(g2.data(), 4, t1);
    hp.rx[1]->poll(t1 + limit / 2);
    CHECK(rte_ring_count(hp.in[1]) == 4);
    hp.rx[1]->poll(t1 + limit + 1);
    CHECK(rte_ring_count(hp.in[1]) == 0);
    CHECK(hp.rx[1]->counters().drops[index(R::UnknownFlow)] == 4);
    CHECK(pool.avail() == start); // every frame freed exactly once
    Receiver::free_flow(hp.flow);
}

// Rails (session_link.h): an ACK goes back by the rail its flow's newest
// packet came by, with that rail's addresses, so a rail that fails, the
// first one included, takes no acknowledgement with it; and data that
// arrives is the peer's sign of life.
TEST_CASE("rails: an ACK goes back by the rail of its flow's newest packet, with that rail's addresses", "[receiver]") {
    constexpr uint16_t kRailPort = 7;
    Rig r(0, 1000, false, 64, -1, kRailPort);
    r.link.rails = 2;
    memcpy(r.link.rail[0].macs, r.link.l2l4, 12);
    memcpy(r.link.rail[0].ips, r.link.l2l4 + kEthLen + 12, 8);
    const uint8_t macs1[12] = {0x02, 0, 0, 0, 1, 2, 0x02, 0, 0, 0, 1, 1};
    memcpy(r.link.rail[1].macs, macs1, 12);
    r.link.rail[1].ips[0] = rte_cpu_to_be_32(0x0A4F0102);
    r.link.rail[1].ips[1] = rte_cpu_to_be_32(0x0A4F0101);
    const uint64_t t0 = 10 * rte_get_tsc_hz();
    auto b = tmtest::pattern(300, 1);
    // One batch (4 messages) by a port: the next poll ACKs it; the frame it sent.
    auto round = [&](uint32_t first, uint16_t port, uint64_t now) {
        for (uint32_t m = first; m < first + 4; m++) {
            auto g = tmtest::build_group(r.pool.mp, r.tx, m, b);
            for (rte_mbuf* x : g)
                x->port = port;
            r.rx->rx_burst(g.data(), static_cast<uint16_t>(g.size()), now);
        }
        r.rx->poll(now + 100);
        std::vector<uint8_t> f;
        rte_mbuf* m;
        REQUIRE(rte_ring_dequeue(r.ctl_out, reinterpret_cast<void**>(&m)) == 0);
        f = tmtest::flat(m);
        ParsedPacket p;
        CHECK(parse_packet(m, ParserConfig{}, p) == R::None);
        Control c;
        CHECK(parse_ack(m, p, kKey, c) == R::None); // signed over the header, whatever the addresses
        CHECK(c.acked_upto == first + 4);
        rte_pktmbuf_free(m);
        CHECK(rte_ring_count(r.ctl_out) == 0);
        CHECK(rte_raw_cksum(f.data() + kEthLen, kIpLen) == 0xFFFF); // its IPv4 checksum holds
        return f;
    };
    auto on_rail = [&](const std::vector<uint8_t>& f, uint32_t rail) {
        CHECK(memcmp(f.data(), r.link.rail[rail].macs, 12) == 0);
        CHECK(memcmp(f.data() + kEthLen + 12, r.link.rail[rail].ips, 8) == 0);
    };
    CHECK(r.link.peer_data_tsc.load() == 0);
    {
        INFO("data by rail 1");
        on_rail(round(0, kRailPort, t0), 1);
        CHECK(r.link.peer_data_tsc.load() == t0); // the newest packet's arrival
    }
    {
        INFO("data by rail 0 (port 0)");
        on_rail(round(4, 0, t0 + 1000), 0);
        CHECK(r.link.peer_data_tsc.load() == t0 + 1000);
    }
    {
        INFO("a port that is no rail of the session's: rail 0");
        on_rail(round(8, 9, t0 + 2000), 0);
    }
    {
        INFO("the session has one rail: rail 0 whatever the port");
        r.link.rails = 1;
        on_rail(round(12, kRailPort, t0 + 3000), 0);
    }
}
