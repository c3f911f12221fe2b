// lib/tailmark-engine's parts on their own: deferred free (what other
// threads may read goes only once its delay passed, oldest first), and the
// request rings an lcore serves between rounds (the engine's ops applied by
// the library, the application's handed to its handler, every one answered
// in order). Time is explicit ticks; the rings are real rte_rings.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "fixtures.h"
#include "tailmark/congestion.h"
#include "tailmark/tx_paths.h"
#include "tailmark/engine/config.h"
#include "tailmark/engine/deferred_free.h"
#include "tailmark/engine/flow_registry.h"
#include "tailmark/engine/session_flows.h"
#include "tailmark/session_link.h"
#include "tailmark/engine/lcore.h"
#include "tailmark/engine/lcore_loop.h"

using namespace tailmark;
using engine::DeferredFree;
using engine::Request;

TEST_CASE("DeferredFree: an entry runs once its delay passed, to the tick, oldest first", "[engine]") {
    DeferredFree d(100);
    std::vector<int> ran;
    d.later(1000, [&] { ran.push_back(1); });
    d.later(1050, [&] { ran.push_back(2); });
    d.later(1020, [&] { ran.push_back(3); }); // let go later than 2's time, but queued after it
    CHECK(d.pending() == 3);
    CHECK(d.run(1099) == 0);
    CHECK(ran.empty());
    CHECK(d.run(1100) == 1);
    CHECK(ran == std::vector<int>{1});
    // 3 is due at 1120, but waits behind 2 (due at 1150): order is kept.
    CHECK(d.run(1120) == 0);
    CHECK(d.run(1150) == 2);
    CHECK(ran == std::vector<int>{1, 2, 3});
    CHECK(d.pending() == 0);
}

TEST_CASE("DeferredFree: an entry may defer another; run_all runs everything", "[engine]") {
    DeferredFree d(10);
    int a = 0, b = 0;
    d.later(0, [&] {
        a++;
        d.later(10, [&] { b++; });
    });
    CHECK(d.run(10) == 1); // the one it deferred is not due yet (10 + 10)
    CHECK(a == 1);
    CHECK(b == 0);
    CHECK(d.pending() == 1);
    d.later(1000, [&] { b += 10; });
    CHECK(d.run_all() == 2);
    CHECK(b == 11);
    CHECK(d.pending() == 0);
}

TEST_CASE("FlowRegistry: slots in order, shown on publish, given back and reused oldest first, never past capacity",
          "[engine]") {
    engine::FlowRegistry<int> reg(3);
    int a = 1, b = 2, c = 3, d = 4, e = 5;
    uint32_t i = 99;
    int* old = &e;
    REQUIRE(reg.add(&a, i, old));
    CHECK(i == 0);
    CHECK(old == nullptr);
    REQUIRE(reg.add(&b, i, old));
    CHECK(i == 1);
    CHECK(reg.size() == 2);
    CHECK(reg.count() == 0); // not published: other threads see none yet
    reg.publish();
    CHECK(reg.count() == 2);
    CHECK(&reg.at(1) == &b);
    REQUIRE(reg.add(&c, i, old));
    CHECK(i == 2);
    CHECK(reg.room() == 0);
    CHECK_FALSE(reg.add(&d, i, old)); // full: nothing changed
    CHECK(reg.size() == 3);
    CHECK(reg.made() == 3);
    // Slots 2 then 0 given back: 2 serves first, and its flow comes back to be freed.
    reg.release(2);
    reg.release(0);
    CHECK(reg.room() == 2);
    REQUIRE(reg.add(&d, i, old));
    CHECK(i == 2);
    CHECK(old == &c);
    REQUIRE(reg.add(&e, i, old));
    CHECK(i == 0);
    CHECK(old == &a);
    CHECK(reg[0] == &e); // the new flow, in place
    CHECK(&reg.at(0) == &e);
    CHECK(reg.made() == 5);
    CHECK(reg.reused() == 2);
    CHECK(reg.size() == 3);
    CHECK_FALSE(reg.add(&a, i, old));
    reg.clear();
    CHECK(reg.count() == 0);
    CHECK(reg.room() == 3);
}

TEST_CASE("serve_requests: the application's ops to its handler, each answered in order", "[engine]") {
    const std::string name = tmtest::unique_name("eng_rq");
    rte_ring* req = rte_ring_create_elem((name + "q").c_str(), sizeof(Request), 16, SOCKET_ID_ANY,
                                         RING_F_SP_ENQ | RING_F_SC_DEQ);
    rte_ring* resp = rte_ring_create_elem((name + "p").c_str(), sizeof(Request), 16, SOCKET_ID_ANY,
                                          RING_F_SP_ENQ | RING_F_SC_DEQ);
    REQUIRE(req != nullptr);
    REQUIRE(resp != nullptr);
    std::vector<uint32_t> seen;
    auto app = [&](Request& r) {
        seen.push_back(r.index);
        r.ok = r.index % 2 == 0;
    };
    CHECK_FALSE(engine::serve_requests(req, resp, app)); // nothing asked

    const auto op = Request::Op::App1;
    for (uint32_t i = 0; i < 5; i++) {
        Request r{op};
        r.index = i;
        REQUIRE(rte_ring_sp_enqueue_elem(req, &r, sizeof(r)) == 0);
    }
    CHECK(engine::serve_requests(req, resp, app));
    CHECK(seen == std::vector<uint32_t>{0, 1, 2, 3, 4});
    for (uint32_t i = 0; i < 5; i++) {
        Request r{};
        REQUIRE(rte_ring_sc_dequeue_elem(resp, &r, sizeof(r)) == 0);
        CHECK(r.index == i);
        CHECK(r.op == op);
        CHECK(r.ok == (i % 2 == 0));
    }
    CHECK(rte_ring_count(resp) == 0);
    rte_ring_free(req);
    rte_ring_free(resp);
}

TEST_CASE("EngineConfig: the Senders' and Receivers' configs, in TSC cycles; the in-memory loopback unpaced",
          "[engine]") {
    engine::EngineConfig c;
    c.udp_port = 4000;
    c.udp_checksum = true;
    c.burst = 16;
    c.rto_us = 200;
    c.rto_max_us = 5000;
    c.retry_limit = 30;
    c.nack_delay_us = 50;
    c.completion = CompletionMode::Packet;
    c.cc.enabled = true;
    c.cc.target_us = 100;
    c.cc.start_mbps = 20000;
    c.cc.max_mbps = 10000; // the start is clamped to it
    c.cc.ack_feedback_us = 30;
    const uint64_t hz = 2'000'000'000;

    const SenderConfig s = engine::sender_config(c, hz, false);
    CHECK(s.udp_port == 4000);
    CHECK(s.udp_checksum);
    CHECK(s.burst == 16);
    CHECK(s.rto == 400'000);
    CHECK(s.rto_max == 10'000'000);
    CHECK(s.retry_limit == 30);
    CHECK(s.stall == hz / 4); // 250 ms
    CHECK(s.cc.enabled);
    CHECK(s.cc.tsc_hz == hz);
    CHECK(s.cc.max_bps == 10e9);
    CHECK(s.cc.start_bps == 10e9);

    const SenderConfig l = engine::sender_config(c, hz, true);
    CHECK_FALSE(l.cc.enabled);
    CHECK_FALSE(l.udp_checksum);
    CHECK(l.rto == s.rto);

    const ReceiverConfig r = engine::receiver_config(c, hz);
    CHECK(r.parser.udp_port == 4000);
    CHECK(r.parser.verify_udp_checksum);
    CHECK(r.nack_delay == 100'000);
    CHECK(r.ack_min == 40'000); // 20 us
    CHECK(r.ack_feedback == 60'000);
    CHECK(r.mode == CompletionMode::Packet);
    c.cc.enabled = false;
    CHECK(engine::receiver_config(c, hz).ack_feedback == 0);
}

// Where the lcore naps, a session of one path paces by half the target and
// catches up as much lateness; a sprayed one (TxPaths::bind) by 20 us and 50 us.
TEST_CASE("sender_config: where the lcore naps, a lone path steps by half the target, a sprayed one by 20 us",
          "[engine]") {
    engine::EngineConfig c;
    c.cc.enabled = true;
    c.cc.target_us = 500;
    c.cc.start_mbps = 4000;
    c.cc.max_mbps = 100000;
    const uint64_t hz = 1'000'000'000; // a cycle is a nanosecond

    // Polling (send, recv, loopback's default): no nap step.
    c.idle_sleep_us = 0;
    const SenderConfig poll = engine::sender_config(c, hz, false);
    CHECK(poll.cc.nap_step_us == 0);
    CHECK(poll.cc.step_us == CongestionConfig{}.step_us);
    CHECK(poll.cc.slack_us == CongestionConfig{}.slack_us);
    // Napping (--mode service's default, 50 us): 250 us.
    c.idle_sleep_us = 50;
    const SenderConfig nap = engine::sender_config(c, hz, false);
    CHECK(nap.cc.nap_step_us == 250);
    CHECK_FALSE(engine::sender_config(c, hz, true).cc.enabled); // the loopback: nothing to pace
    c.cc.target_us = 40; // never below the polling step
    CHECK(engine::sender_config(c, hz, false).cc.nap_step_us == 0);

    // What that makes of the pacer: at 4 Gbit/s a step is 64 KiB (the cap;
    // 20 us is 10000 bytes), and a lcore back from a 900 us nap sends 250 us
    // of it at once, where a polling one sends 50.
    const uint64_t late = 1'900'000; // 900 us after the 1 ms that 500000 bytes take (2 cycles a byte)
    Congestion lone;
    lone.init(nap.cc, Congestion::stamp_shift(hz), 0);
    CHECK(lone.rate_bps() == 4e9);
    CHECK(lone.step_bytes() == 64 * 1024);
    lone.sent(0, 500000);
    CHECK(lone.next_send() == 1'000'000);
    lone.sent(late, 450000);
    CHECK(lone.next_send() == late - 250'000 + 900'000);
    for (const CongestionConfig& cfg : {poll.cc, nap.cc}) {
        Congestion p;
        p.init(cfg, Congestion::stamp_shift(hz), 0);
        TxPaths paths; // a sprayed session, where the lcore naps: as where it polls
        paths.init(2, 49152, hz, Congestion::stamp_shift(hz));
        paths.bind(&p, cfg);
        CHECK(p.step_bytes() == 10000);
        p.sent(0, 500000);
        p.sent(late, 450000);
        CHECK(p.next_send() == late - 50'000 + 900'000);
    }
    CongestionConfig s100 = nap.cc;
    s100.start_bps = 100e6; // 3125 bytes a step: about the 3000-byte floor
    Congestion slow;
    slow.init(s100, Congestion::stamp_shift(hz), 0);
    CHECK(slow.step_bytes() == 3125);
}

// A session's flow i: its ids, key, stride and tag keys come from what the
// two ends agreed, each side under its own direction's key (the receive
// side verifies the peer's tx key, which this end holds as rx_data_key).
TEST_CASE("session flows: flow i's receive and send specs from the session and its link", "[engine]") {
    SessionLink link;
    link.data_version = kVersion2;
    link.tx_data_key = {1, 2};
    link.rx_data_key = {3, 4};
    link.data_auth = true;
    for (int k = 0; k < 16; k++) {
        link.tx_auth_h[k] = static_cast<uint8_t>(k);
        link.rx_auth_h[k] = static_cast<uint8_t>(100 + k);
    }
    link.rails = 3;
    Session s;
    s.params.nflows = 4;
    s.params.mtu = 1500;
    s.params.ring_size = 16;
    s.params.max_msg = 65536;
    s.params.key = 0xABC;
    s.params.version = kVersion2;
    s.params.overrides.push_back({2, 0x222});
    s.local_base = 100;
    s.peer_base = 700;
    s.peer = {0x0A000002, 47474};
    s.peer_mac = {{2, 0, 0, 0, 0, 2}};
    s.link = &link;
    int ring = 0; // only its address is carried
    auto* cr = reinterpret_cast<CompletionRing*>(&ring);

    RecvFlowSpec rs = engine::recv_spec(s, 2, 900, cr, nullptr);
    CHECK(rs.id == 900);
    CHECK(rs.ring == cr);
    CHECK(rs.key == 0x222); // flow 2's own key
    CHECK(rs.peer_flow == 702);
    CHECK(rs.stride == stride_for_mtu(1500, kVersion2));
    CHECK(rs.link == &link);
    CHECK(rs.auth.version == kVersion2);
    CHECK(rs.auth.key == SipKey{3, 4});
    CHECK(rs.auth.data_auth);
    CHECK(rs.auth.auth_h[5] == 105);
    CHECK(engine::recv_spec(s, 1, 901, cr, nullptr, false).link == nullptr); // nobody to acknowledge to
    CHECK(engine::recv_spec(s, 1, 901, cr, nullptr).key == 0xABC);
    Session plain = s; // no link: no session agreed, untagged
    plain.link = nullptr;
    CHECK(engine::recv_spec(plain, 1, 901, cr, nullptr).auth.version == kVersion);

    const rte_ether_addr mac{{2, 0, 0, 0, 0, 1}};
    const Addressing a = engine::address_to(s, mac, 0x0A000001);
    CHECK(a.dst_ip == 0x0A000002);
    CHECK(a.src_ip == 0x0A000001);
    CHECK(a.udp_port == 47474);
    CHECK(a.dst_mac.addr_bytes[5] == 2);
    CHECK(a.src_mac.addr_bytes[5] == 1);
    SendFlowSpec sp;
    REQUIRE(engine::send_spec(s, 2, 8, a, 1, sp));
    CHECK(sp.id == 102);
    CHECK(sp.tx.id == 702);
    CHECK(sp.tx.key == 0x222);
    CHECK(sp.tx.ring_mask == 7);
    CHECK(sp.tx.version == kVersion2);
    CHECK(sp.tx.tag_key == SipKey{1, 2});
    CHECK(sp.tx.data_auth);
    CHECK(sp.ring_size == 8);
    CHECK(sp.max_msg == 65536);
    CHECK(sp.reliable);
    CHECK(sp.link == &link);
    CHECK(sp.paths == 3); // a path per rail at least
    REQUIRE(engine::send_spec(s, 0, 8, a, 5, sp));
    CHECK(sp.paths == 5);
    CHECK(sp.tx.key == 0xABC);
    CHECK_FALSE(engine::send_spec(s, 0, 6, a, 1, sp)); // a window TxFlow cannot mask
}

TEST_CASE("nap_due: an idle lcore naps once idle longer than its spin, or while a pacer holds it", "[engine]") {
    const uint64_t us = 2000; // cycles per us (a 2 GHz TSC)
    // --mode service: the spin is one nap, 50 us.
    CHECK_FALSE(engine::nap_due(40 * us, 50 * us, 0, 50 * us));
    CHECK_FALSE(engine::nap_due(50 * us, 50 * us, 0, 50 * us));
    CHECK(engine::nap_due(51 * us, 50 * us, 0, 50 * us));
    // The other modes' 1 ms: 500 us idle still polls.
    CHECK_FALSE(engine::nap_due(500 * us, 1000 * us, 0, 50 * us));
    CHECK(engine::nap_due(1001 * us, 1000 * us, 0, 50 * us));
    // A pacer's wait over two naps: at once, whatever the spin.
    CHECK(engine::nap_due(0, 1000 * us, 101 * us, 50 * us));
    CHECK_FALSE(engine::nap_due(0, 1000 * us, 100 * us, 50 * us));
}

TEST_CASE("idle_nap_us: the base nap, then an eighth of the quiet so far, up to 250 us and half a pacer's wait", "[engine]") {
    const uint64_t ms = 2000000; // cycles per ms (a 2 GHz TSC)
    // Idle for 1 ms, --idle-sleep-us 50: an eighth of 1 ms is 125 us.
    CHECK(engine::idle_nap_us(50, ms, ms) == 125);
    // Less than 8 x the base so far: the base.
    CHECK(engine::idle_nap_us(50, ms / 5, ms) == 50);
    CHECK(engine::idle_nap_us(50, 400 * ms / 1000, ms) == 50);
    CHECK(engine::idle_nap_us(50, 408 * ms / 1000, ms) == 51);
    // Long quiet: the cap, never more.
    CHECK(engine::idle_nap_us(50, 2 * ms, ms) == 250);
    CHECK(engine::idle_nap_us(50, 1000 * ms, ms) == 250);
    CHECK(engine::kMaxIdleNapUs == 250);
    // A base at or above the cap is the nap, whatever the quiet.
    CHECK(engine::idle_nap_us(250, 1000 * ms, ms) == 250);
    CHECK(engine::idle_nap_us(1000, 0, ms) == 1000);
    CHECK(engine::idle_nap_us(1000, 1000 * ms, ms) == 1000);
    // A pacer that holds the tx role: at most half its wait, never under
    // the base.
    CHECK(engine::idle_nap_us(50, 10 * ms, ms, ms / 5) == 100);
    CHECK(engine::idle_nap_us(50, 10 * ms, ms, 10 * ms) == 250);
    CHECK(engine::idle_nap_us(50, 10 * ms, ms, ms / 20) == 50);
    CHECK(engine::idle_nap_us(50, ms, ms, ms) == 125);
}
