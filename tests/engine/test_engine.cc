// A whole Engine (engine.h) on a net_ring port whose tx ring is its rx ring,
// its roles on lcore 1 (the runner's -l 0-1): flows opened before launch,
// messages sent and consumed, flows closed and their removal answered, the
// lcores stopped; exact counts, and every mbuf back in its pool. Then a
// send flow closed while its window is full: every message it owed is
// reported failed (Closed), none delivered.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ring.h>

#include "drivers/port.h"
#include "fixtures.h"
#include "tailmark/engine/engine.h"

using namespace tailmark;
using engine::FlowState;
using engine::Request;

namespace {

constexpr uint16_t kId = 5;
constexpr uint32_t kRing = 8;
constexpr uint32_t kMtu = 1500;
constexpr uint64_t kMax = 9000;

// One ethdev over one rte_ring, both its rx and its tx queue: what it sends
// it receives (net_ring0's loopback), opened by drivers::Port (rx TSC stamp).
struct LoopPort {
    std::string name = tmtest::unique_name("englp");
    rte_ring* r = nullptr;
    std::unique_ptr<drivers::Port> port;
    explicit LoopPort(rte_mempool* mp) {
        r = rte_ring_create(name.c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        REQUIRE(r != nullptr);
        const int id = rte_eth_from_rings(name.c_str(), &r, 1, &r, 1, rte_socket_id());
        REQUIRE(id >= 0);
        drivers::PortSetup s;
        s.pool = mp;
        std::string err;
        port = drivers::Port::open(static_cast<uint16_t>(id), s, err);
        INFO(err);
        REQUIRE(port != nullptr);
    }
    ~LoopPort() {
        port.reset(); // stopped and closed
        rte_vdev_uninit(("net_ring_" + name).c_str());
        rte_mbuf* m;
        while (rte_ring_dequeue(r, reinterpret_cast<void**>(&m)) == 0)
            rte_pktmbuf_free(m);
        rte_ring_free(r);
    }
};

// Message i of the test: its length, and its bytes.
uint64_t len_of(uint32_t i) { return i % 3 == 0 ? 100 : i % 3 == 1 ? 3000 : kMax; }
uint8_t byte_of(uint32_t i, uint64_t k) { return static_cast<uint8_t>(i * 29 + k * 13); }

struct Source {
    uint32_t messages = 0;
    std::vector<uint8_t> bufs = std::vector<uint8_t>(kRing * kMax);
    std::atomic<uint32_t> asked{0};
};
bool source(void* ctx, void*, uint32_t msg_id, Message& m, uint64_t& cookie) {
    auto& s = *static_cast<Source*>(ctx);
    if (msg_id >= s.messages)
        return false;
    uint8_t* b = s.bufs.data() + (msg_id % kRing) * kMax;
    for (uint64_t k = 0; k < len_of(msg_id); k++)
        b[k] = byte_of(msg_id, k);
    m.bytes = {b, static_cast<size_t>(len_of(msg_id))};
    cookie = msg_id;
    s.asked.fetch_add(1, std::memory_order_relaxed);
    return true;
}

struct Outcome {
    std::atomic<uint64_t> delivered{0}, failed{0}, closed{0};
};
void sink(void* ctx, const SendCompletion* d, uint32_t n) {
    auto& o = *static_cast<Outcome*>(ctx);
    for (uint32_t i = 0; i < n; i++) {
        (d[i].status == SendStatus::Delivered ? o.delivered : o.failed).fetch_add(1);
        if (d[i].reason == FailReason::Closed)
            o.closed.fetch_add(1);
    }
}

// The Engine and what its flows use, one port, roles on lcore 1.
struct Rig {
    tmtest::Pool pool;
    LoopPort lp{pool.mp};
    Source src;
    Outcome out;
    std::unique_ptr<CompletionRing> ring = tmtest::make_ring(kId, kRing, kMax);
    std::unique_ptr<engine::Engine> e;
    uint64_t hz = rte_get_tsc_hz();

    Rig() {
        REQUIRE(rte_lcore_is_enabled(1));
        engine::EngineConfig cfg;
        cfg.rto_us = 200000; // a descheduled lcore is no loss: no retransmission
        cfg.rto_max_us = 1000000;
        cfg.retry_limit = 8;
        cfg.cc.enabled = false;
        engine::EngineHost h;
        h.tx_port = h.rx_port = lp.port->id();
        h.tx_lcores = {1};
        h.rx_lcores = {1};
        h.pool = pool.mp;
        h.socket = SOCKET_ID_ANY;
        engine::EngineError err;
        e = engine::Engine::create(cfg, h, err);
        INFO(err.message());
        REQUIRE(e != nullptr);
        e->sender(0).set_source(source, &src);
        e->tx_role(0).set_sink(sink, &out);
    }
    // Flow kId's two ends, the send side credited in memory by the receive
    // side's cumulative ACK word.
    RecvFlowSpec recv_spec() const {
        RecvFlowSpec rs;
        rs.id = kId;
        rs.ring = ring.get();
        rs.key = 0x5E5E;
        rs.stride = stride_for_mtu(kMtu);
        rs.peer_flow = kId;
        return rs;
    }
    SendFlowSpec send_spec(const uint32_t* acked) const {
        SendFlowSpec ss;
        Addressing a = tmtest::test_addr();
        a.dst_ip = a.src_ip;
        REQUIRE(TxFlow::make(ss.tx, kId, 0x5E5E, kRing, kMtu, a));
        ss.id = kId;
        ss.ring_size = kRing;
        ss.max_msg = kMax;
        ss.local_acked = acked;
        ss.local_released = ring->released_word();
        return ss;
    }
    // Both ends of flow kId in this process, credited in memory.
    void open() {
        REQUIRE(e->open_recv(recv_spec(), 0));
        CHECK(e->recv_state(kId) == FlowState::Open); // not launched: in at once
        const SendFlowSpec ss = send_spec(e->recv_acked_word(kId));
        REQUIRE(ss.local_acked != nullptr);
        REQUIRE(e->open_send(ss, 0));
        CHECK(e->send_state(kId) == FlowState::Open);
        CHECK_FALSE(e->open_send(ss, 0)); // the id is open
    }
    template <class Done>
    bool tick_until(Done&& done, double secs = 5) {
        const uint64_t end = rte_rdtsc() + static_cast<uint64_t>(secs * double(hz));
        while (!done()) {
            if (rte_rdtsc() > end)
                return false;
            e->tick(rte_rdtsc());
        }
        return true;
    }
    void close() {
        REQUIRE(e->close_send(kId));
        REQUIRE(e->close_recv(kId));
        CHECK_FALSE(e->close_send(kId)); // closing already
        REQUIRE(tick_until([&] {
            return e->send_state(kId) == FlowState::Closed && e->recv_state(kId) == FlowState::Closed;
        }));
    }
};

uint64_t packets_of(uint32_t messages) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < messages; i++)
        n += plan_group(len_of(i), stride_for_mtu(kMtu)).pkt_count;
    return n;
}

} // namespace

// A host the engine cannot run on is said as such, not as a lack of memory
// (the daemon's advice for that is more EAL memory).
TEST_CASE("engine: create refuses a host it cannot run on, and says why", "[engine]") {
    tmtest::Pool pool;
    LoopPort lp{pool.mp};
    engine::EngineConfig cfg;
    engine::EngineHost h;
    h.tx_port = h.rx_port = lp.port->id();
    h.pool = pool.mp;
    h.socket = SOCKET_ID_ANY;
    h.tx_queues = 2;
    h.tx_lcores = {1, 1};
    h.rx_lcores = {1};
    engine::EngineError err;
    CHECK(engine::Engine::create(cfg, h, err) == nullptr);
    CHECK_FALSE(err.out_of_memory);
    CHECK(err.message() == "engine: tx lcore 1 given twice");
    h.tx_lcores = {1};
    h.rx_lcores = {RTE_MAX_LCORE - 1};
    err = {};
    CHECK(engine::Engine::create(cfg, h, err) == nullptr);
    CHECK_FALSE(err.out_of_memory);
    CHECK(err.message() == "engine: rx lcore " + std::to_string(RTE_MAX_LCORE - 1) + " is not enabled");
    h.rx_lcores = {1};
    h.pool = nullptr;
    err = {};
    CHECK(engine::Engine::create(cfg, h, err) == nullptr);
    CHECK(err.message() == "engine: a pool, a tx queue, a tx lcore and an rx lcore are needed");
    h.pool = pool.mp;
    err = {};
    auto e = engine::Engine::create(cfg, h, err); // the same host, mended: made
    CHECK(e != nullptr);
    CHECK(err.what.empty());
}

TEST_CASE("engine: a whole Engine opens a flow, sends, closes it and stops", "[engine]") {
    {
        Rig g;
        const unsigned avail = g.pool.avail();
        g.src.messages = 20; // more than the window: credits come back as the consumer releases
        g.open();
        REQUIRE(g.e->launch());
        uint32_t next = 0, intact = 0;
        REQUIRE(g.tick_until([&] {
            for (const CompletionSlot* s; next < g.src.messages && (s = g.ring->poll(next)) != nullptr; next++) {
                const auto got = g.ring->message(s);
                bool ok = got.size() == len_of(next);
                for (size_t k = 0; ok && k < got.size(); k++)
                    ok = got[k] == byte_of(next, k);
                intact += ok ? 1 : 0;
                REQUIRE(g.ring->release(next));
            }
            return next == g.src.messages && g.out.delivered.load() + g.out.failed.load() == g.src.messages;
        }));
        CHECK(intact == 20);
        g.close();
        g.e->stop();
        CHECK_FALSE(g.e->launched());
        CHECK(g.e->send_state(kId) == FlowState::Closed);
        CHECK(g.e->recv_state(kId) == FlowState::Closed);

        const engine::Engine::Stats st = g.e->stats();
        CHECK(g.out.delivered.load() == 20);
        CHECK(g.out.failed.load() == 0);
        CHECK(st.msgs_sent == 20);
        CHECK(st.delivered == 20);
        CHECK(st.failed == 0);
        CHECK(st.completions == 20);
        CHECK(st.completed == 20);
        CHECK(st.retx_pkts == 0);
        CHECK(st.pkts_tx == packets_of(20));
        CHECK(st.pkts_rx == packets_of(20));
        CHECK(st.placed == packets_of(20));
        CHECK(st.acks_tx == 0); // credited in memory: no ACK packet
        CHECK(st.drops == 0);
        CHECK(g.src.asked.load() == 20);
        Sender::FlowView v{};
        REQUIRE(g.e->send_view(kId, v));
        CHECK(v.submitted == 20);
        CHECK(v.sent == 20);
        CHECK(v.released == 20);
        CHECK(v.failed == FailReason::None);
        g.e.reset(); // every mbuf the engine held goes back
        CHECK(g.pool.avail() == avail);
    }
}

TEST_CASE("engine: a send flow closed with its window full fails what it owed", "[engine]") {
    Rig g;
    const unsigned avail = g.pool.avail();
    g.src.messages = 1000;
    g.open();
    REQUIRE(g.e->launch());
    // Nothing is consumed: the window (kRing messages) fills and stays full.
    REQUIRE(g.tick_until([&] { return g.e->stats().completed == kRing && g.e->stats().msgs_sent == kRing; }));
    rte_delay_us_sleep(20000); // no more comes: the credits are spent
    CHECK(g.e->stats().msgs_sent == kRing);
    CHECK(g.src.asked.load() == kRing);
    g.close();
    REQUIRE(g.tick_until([&] { return g.out.failed.load() == kRing; }));
    g.e->stop();
    CHECK(g.out.delivered.load() == 0);
    CHECK(g.out.closed.load() == kRing);
    const engine::Engine::Stats st = g.e->stats();
    CHECK(st.failed == kRing);
    CHECK(st.delivered == 0);
    CHECK(st.drops == 0);
    Sender::FlowView v{};
    REQUIRE(g.e->send_view(kId, v));
    CHECK(v.failed == FailReason::Closed);
    CHECK(v.released == 0);
    g.e.reset(); // every mbuf the engine held goes back
    CHECK(g.pool.avail() == avail);
}

// An application that makes its flows itself and keeps its own record of
// where a receive flow is (the daemon's FlowCtx): install_send and
// install_recv take them, the record is the engine's from the install to
// the removal, and every answer comes back once, with the application's
// tag (its flow index, its session); its own ops are answered the same way.
TEST_CASE("engine: the application's flows keep its record and its tag in every answer", "[engine]") {
    Rig g;
    const unsigned avail = g.pool.avail();
    g.src.messages = 12;
    int session = 0; // the application's session: only its address matters
    const engine::FlowTag tag{7, &session};
    std::vector<Request> answers;
    g.e->set_answers([&](const Request& r, uint64_t) { answers.push_back(r); });
    auto count = [&](Request::Op op) {
        size_t n = 0;
        for (const Request& r : answers)
            n += r.op == op ? 1 : 0;
        return n;
    };
    auto tagged = [&] {
        for (const Request& r : answers)
            if (r.index != tag.index || r.session != &session)
                return false;
        return true;
    };

    const RecvFlowSpec rs = g.recv_spec();
    RecvFlow* rf = Receiver::make_flow(rs, SOCKET_ID_ANY);
    REQUIRE(rf != nullptr);
    engine::RecvPlace place;
    REQUIRE(g.e->install_recv(rf, kId, rs.auth, 0, &place, tag));
    // Not launched: in at once, answered at once, the record filled.
    CHECK(g.e->recv_state(kId) == FlowState::Open);
    CHECK(place.recv == rf);
    CHECK(place.recv_id == kId);
    CHECK(place.receiver == &g.e->receiver(0));
    CHECK(place.recv_lcore == 1);
    const SendFlowSpec ss = g.send_spec(Receiver::acked_word(rf));
    SendFlow* sf = Sender::make_flow(ss, SOCKET_ID_ANY);
    REQUIRE(sf != nullptr);
    REQUIRE(g.e->install_send(sf, kId, 0, tag));
    CHECK(g.e->send_state(kId) == FlowState::Open);
    SendFlow* again = Sender::make_flow(ss, SOCKET_ID_ANY);
    CHECK_FALSE(g.e->install_send(again, kId, 0, tag)); // the id is open: nothing taken
    Sender::free_flow(again);
    CHECK(answers.size() == 2);
    CHECK(count(Request::Op::AddRecv) == 1);
    CHECK(count(Request::Op::AddSend) == 1);

    REQUIRE(g.e->launch());
    // The application's own op: the engine's loop has no handler for it
    // and refuses it, answered with its tag all the same.
    REQUIRE(g.e->post_app(1, {Request::Op::App3, true, FailReason::None, kId, tag.index, nullptr, nullptr, &session}));
    CHECK_FALSE(g.e->post_app(1, {Request::Op::AddSend, false, FailReason::None, kId, 0, nullptr, nullptr, nullptr}));
    uint32_t next = 0;
    REQUIRE(g.tick_until([&] {
        for (const CompletionSlot* s; next < g.src.messages && (s = g.ring->poll(next)) != nullptr; next++)
            REQUIRE(g.ring->release(next));
        return next == g.src.messages && g.out.delivered.load() == g.src.messages && count(Request::Op::App3) == 1;
    }));
    for (const Request& r : answers)
        if (r.op == Request::Op::App3)
            CHECK_FALSE(r.ok);
    REQUIRE(g.e->close_send(kId));
    REQUIRE(g.e->close_recv(kId));
    REQUIRE(g.tick_until([&] { return count(Request::Op::RemoveSend) == 1 && count(Request::Op::RemoveRecv) == 1; }));
    g.e->stop();
    CHECK(count(Request::Op::FailSend) == 1);
    CHECK(answers.size() == 6);
    CHECK(tagged());
    for (const Request& r : answers) {
        if (r.op == Request::Op::RemoveSend)
            CHECK(r.obj == sf); // the flow as it left, readable until the engine frees it
        if (r.op == Request::Op::RemoveRecv)
            CHECK(r.obj == rf);
    }
    CHECK(place.recv == nullptr); // out: the engine let go of it
    CHECK(g.e->send_state(kId) == FlowState::Closed);
    CHECK(g.e->recv_state(kId) == FlowState::Closed);

    // A flow still installed when the engine goes is freed by it, and the
    // application's record says so.
    RecvFlow* rf2 = Receiver::make_flow(rs, SOCKET_ID_ANY);
    REQUIRE(rf2 != nullptr);
    REQUIRE(g.e->install_recv(rf2, kId, rs.auth, 0, &place, tag));
    CHECK(place.recv == rf2);
    g.e.reset();
    CHECK(place.recv == nullptr);
    CHECK(g.pool.avail() == avail);
}

// A receive flow its Receiver refuses (here: the id is in it already,
// installed behind the engine's back; in a run, a Receiver that holds
// RxPlacer::kMaxFlows): the engine frees it, the application's record says
// it is in no Receiver, and the refusal is answered with the tag.
TEST_CASE("engine: a receive flow its Receiver refuses is freed and answered", "[engine]") {
    Rig g;
    const unsigned avail = g.pool.avail();
    int session = 0;
    const engine::FlowTag tag{3, &session};
    std::vector<Request> answers;
    g.e->set_answers([&](const Request& r, uint64_t) { answers.push_back(r); });
    const RecvFlowSpec rs = g.recv_spec();
    RecvFlow* first = Receiver::make_flow(rs, SOCKET_ID_ANY);
    REQUIRE(first != nullptr);
    REQUIRE(g.e->receiver(0).install(first)); // not launched: this thread may
    RecvFlow* second = Receiver::make_flow(rs, SOCKET_ID_ANY);
    REQUIRE(second != nullptr);
    engine::RecvPlace place;
    REQUIRE(g.e->install_recv(second, kId, rs.auth, 0, &place, tag)); // posted (answered at once)
    CHECK(g.e->recv_state(kId) == FlowState::Refused);
    CHECK(place.recv == nullptr);
    CHECK(g.e->recv_acked_word(kId) == nullptr);
    REQUIRE(answers.size() == 1);
    CHECK(answers[0].op == Request::Op::AddRecv);
    CHECK_FALSE(answers[0].ok);
    CHECK(answers[0].index == tag.index);
    CHECK(answers[0].session == &session);
    CHECK_FALSE(g.e->close_recv(kId)); // nothing to close
    CHECK(g.e->receiver(0).remove(kId) == first);
    Receiver::free_flow(first);
    g.e.reset();
    CHECK(g.pool.avail() == avail);
}

// A Receiver's room: each receive flow installed takes one, a refused one
// gives it back, a closed one too once its removal is answered. At the
// last one, the count and the Receiver agree: room 0, and the next flow is
// the one it refuses (what an application refuses a session on).
TEST_CASE("engine: recv_room counts a Receiver's flows, to the last one it takes", "[engine]") {
    Rig g;
    const auto cap = static_cast<uint32_t>(RxPlacer::kMaxFlows);
    REQUIRE(g.e->recv_room(0) == cap);
    CHECK(g.e->min_recv_room() == cap);
    CHECK(g.e->recv_room(1) == 0); // no such Receiver
    RecvFlowSpec rs = g.recv_spec();
    for (uint32_t id = 1; id <= cap; id++) {
        rs.id = static_cast<uint16_t>(id);
        RecvFlow* f = Receiver::make_flow(rs, SOCKET_ID_ANY);
        REQUIRE(f != nullptr);
        REQUIRE(g.e->install_recv(f, rs.id, rs.auth, 0)); // not launched: in at once
        if (id == 1)
            CHECK(g.e->recv_room(0) == cap - 1);
    }
    CHECK(g.e->recv_state(static_cast<uint16_t>(cap)) == FlowState::Open);
    CHECK(g.e->recv_room(0) == 0);
    CHECK(g.e->min_recv_room() == 0);
    rs.id = static_cast<uint16_t>(cap + 1);
    RecvFlow* extra = Receiver::make_flow(rs, SOCKET_ID_ANY);
    REQUIRE(extra != nullptr);
    REQUIRE(g.e->install_recv(extra, rs.id, rs.auth, 0)); // posted; the Receiver refuses it (and it is freed)
    CHECK(g.e->recv_state(rs.id) == FlowState::Refused);
    CHECK(g.e->recv_room(0) == 0);
    REQUIRE(g.e->close_recv(1)); // answered at once
    CHECK(g.e->recv_state(1) == FlowState::Closed);
    CHECK(g.e->recv_room(0) == 1);
    CHECK_FALSE(g.e->close_recv(1));
    CHECK(g.e->recv_room(0) == 1);
}

namespace {

// An ethdev over two rte_rings, each its queue pair's rx and tx (net_ring:
// tx queue q arrives on rx queue q), opened by drivers::Port.
struct TwoQueuePort {
    std::string name = tmtest::unique_name("eng2q");
    rte_ring* r[2]{};
    std::unique_ptr<drivers::Port> port;
    explicit TwoQueuePort(rte_mempool* mp) {
        for (int q = 0; q < 2; q++) {
            r[q] = rte_ring_create((name + std::to_string(q)).c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
            REQUIRE(r[q] != nullptr);
        }
        const int id = rte_eth_from_rings(name.c_str(), r, 2, r, 2, rte_socket_id());
        REQUIRE(id >= 0);
        drivers::PortSetup s;
        s.pool = mp;
        s.nb_rxq = s.nb_txq = 2;
        std::string err;
        port = drivers::Port::open(static_cast<uint16_t>(id), s, err);
        INFO(err);
        REQUIRE(port != nullptr);
    }
    ~TwoQueuePort() {
        port.reset();
        rte_vdev_uninit(("net_ring_" + name).c_str());
        for (rte_ring* q : r)
            rte_ring_free(q);
    }
};

} // namespace

// Where a flow goes, by the host's steering: two rx queues (rx lcores 1 and
// 0) and two tx queues. By id, flow id's data reaches queue id % 2 and a
// flow to the peer's flow `wire` goes by that queue's Sender; otherwise
// flows take turns over the Senders, and a receive flow is Receiver 0's
// unless RSS says otherwise (a port whose RSS is off cannot say: -1). A
// flow to a Receiver of this process goes by the in-memory loopback's
// Sender of that Receiver's queue.
TEST_CASE("engine: a flow's Receiver and Sender by the host's steering", "[engine]") {
    tmtest::Pool pool;
    TwoQueuePort wire{pool.mp}, local{pool.mp};
    auto make = [&](bool by_id, bool handoff, const drivers::Port* rss, bool with_local) {
        engine::EngineHost h;
        h.tx_port = h.rx_port = wire.port->id();
        h.tx_queues = 2;
        h.tx_lcores = {1};
        h.rx_lcores = {1, 0};
        h.pool = pool.mp;
        h.socket = SOCKET_ID_ANY;
        h.steer_by_id = by_id;
        h.handoff = handoff;
        h.rss_port = rss;
        if (with_local) {
            h.local_port = local.port->id();
            h.local_queues = 2;
        }
        engine::EngineError err;
        auto e = engine::Engine::create(engine::EngineConfig{}, h, err);
        INFO(err.message());
        REQUIRE(e != nullptr);
        return e;
    };
    {
        auto e = make(true, false, nullptr, true);
        REQUIRE(e->port_senders() == 2);
        REQUIRE(e->nsenders() == 4);
        CHECK(e->receiver_for(4, 0, 0, 47474) == 0);
        CHECK(e->receiver_for(7, 0, 0, 47474) == 1);
        CHECK(e->sender_for(9, 0) == 1); // the queue the peer's flow 9 is received on
        CHECK(e->sender_for(8, 1) == 0);
        CHECK(e->receiver_index(&e->receiver(1)) == 1);
        CHECK(e->receiver_index(nullptr) == -1);
        CHECK(e->local_sender(&e->receiver(1), 8, 0) == 3); // the loopback's, of Receiver 1's queue
        CHECK(e->local_sender(&e->receiver(0), 9, 0) == 2);
        CHECK(e->local_sender(nullptr, 9, 0) == 3); // not found: by the wire id
    }
    {
        auto e = make(false, false, nullptr, false);
        CHECK(e->receiver_for(7, 0, 0, 47474) == 0);
        CHECK(e->sender_for(9, 0) == 0); // in turn, by the flow's index
        CHECK(e->sender_for(9, 3) == 1);
        CHECK(e->local_sender(&e->receiver(1), 9, 3) == 1); // no loopback: the port's
    }
    {
        auto e = make(false, true, nullptr, false); // hand-off deals flows out by id
        CHECK(e->receiver_for(7, 0, 0, 47474) == 1);
        CHECK(e->receiver_for(6, 0, 0, 47474) == 0);
    }
    {
        auto e = make(false, false, wire.port.get(), false); // RSS off on this port: it cannot say
        CHECK(e->receiver_for(7, 0x0A000002, 0x0A000001, 47474) == -1);
    }
}
