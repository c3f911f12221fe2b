// A receive flow's life on the engine's pieces (lib/tailmark-engine), with
// the requests served as an rx lcore serves them between rounds: opened on
// one Receiver, moved to the Receiver its frames reach (RxMoves: two looks
// that agree, out of the old one, named the new one's, into it), and closed
// while a message is half in (its session ended mid-message): what came is
// not completed, what comes after is dropped as no one's, and every frame
// is freed exactly once. Real Receivers, real rings and mbufs; time by hand.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "fixtures.h"
#include "tailmark/engine/lcore.h"
#include "tailmark/engine/rx_moves.h"
#include "tailmark/receiver.h"

using namespace tailmark;
using engine::Request;

namespace {

constexpr uint16_t kId = 91;
constexpr uint32_t kKey = 0xBEEF01;
constexpr uint32_t kRing = 16;

// Two rx lcores (10 and 11), each a Receiver and a request/response ring
// pair, steered by hand-off through one RxMoves.
struct TwoLcores {
    tmtest::Pool pool;
    engine::RxMoves moves;
    std::unique_ptr<Receiver> rx[2];
    rte_ring* req[2] = {};
    rte_ring* resp[2] = {};
    const unsigned lcore[2] = {10, 11};

    TwoLcores() {
        std::string what;
        REQUIRE(moves.make(2, SOCKET_ID_ANY, 100, what));
        const std::string name = tmtest::unique_name("engf");
        for (uint8_t i = 0; i < 2; i++) {
            ReceiverConfig c;
            c.pool = pool.mp;
            moves.fill(c.routes);
            c.routes.nreceivers = 2;
            c.routes.self = i;
            const std::string n = name + "r" + std::to_string(i);
            c.name = n.c_str();
            rx[i] = std::make_unique<Receiver>(c);
            REQUIRE(rx[i]->ok());
            req[i] = rte_ring_create_elem((n + "q").c_str(), sizeof(Request), 64, SOCKET_ID_ANY,
                                          RING_F_SP_ENQ | RING_F_SC_DEQ);
            resp[i] = rte_ring_create_elem((n + "p").c_str(), sizeof(Request), 64, SOCKET_ID_ANY,
                                           RING_F_SP_ENQ | RING_F_SC_DEQ);
            REQUIRE(req[i] != nullptr);
            REQUIRE(resp[i] != nullptr);
        }
        moves.set_receivers({rx[0].get(), rx[1].get()}, {lcore[0], lcore[1]});
    }
    ~TwoLcores() {
        rx[0].reset();
        rx[1].reset();
        moves.release();
        for (int i = 0; i < 2; i++) {
            rte_ring_free(req[i]);
            rte_ring_free(resp[i]);
        }
    }
    int at(unsigned l) const { return l == lcore[0] ? 0 : 1; }
    // The control thread posts r to lcore l; the lcore serves its ring
    // (between two rounds); the control thread takes the answer.
    Request roundtrip(unsigned l, Request r) {
        const int i = at(l);
        REQUIRE(rte_ring_sp_enqueue_elem(req[i], &r, sizeof(r)) == 0);
        CHECK(engine::serve_requests(req[i], resp[i], [](Request& x) { x.ok = false; }));
        Request a{};
        REQUIRE(rte_ring_sc_dequeue_elem(resp[i], &a, sizeof(a)) == 0);
        return a;
    }
};

} // namespace

TEST_CASE("engine: a flow opened, moved to the rx lcore its frames reach, closed mid-message", "[engine]") {
    TwoLcores e;
    const unsigned start = e.pool.avail();
    auto ring = tmtest::make_ring(kId, kRing, 64 * 1024);
    REQUIRE(ring != nullptr);
    const TxFlow tx = tmtest::make_flow(kId, kKey, kRing);
    std::vector<uint8_t> msg(5000); // 4 packets
    for (size_t i = 0; i < msg.size(); i++)
        msg[i] = static_cast<uint8_t>(i * 11 + 5);
    uint64_t t = 1'000'000;

    // Open: dealt to Receiver 0, named its owner before it is installed.
    engine::RecvPlace p;
    p.recv_id = kId;
    p.receiver = e.rx[0].get();
    p.recv_lcore = e.lcore[0];
    RecvFlowSpec sp;
    sp.id = kId;
    sp.ring = ring.get();
    sp.key = kKey;
    sp.stride = stride_for_mtu(1500);
    p.recv = Receiver::make_flow(sp, SOCKET_ID_ANY);
    REQUIRE(p.recv != nullptr);
    e.moves.place(p, kId, 0, FlowAuth{SipKey{}, kVersion});
    Request r = e.roundtrip(p.recv_lcore, {Request::Op::AddRecv, false, FailReason::None, kId, 7, p.receiver, p.recv});
    REQUIRE(r.ok);
    CHECK(e.moves.owner_of(kId) == 0);

    // Its frames come in on lcore 1: handed to 0, placed there, arrival 1.
    auto g0 = tmtest::build_group(e.pool.mp, tx, 0, msg);
    REQUIRE(g0.size() == 4);
    e.rx[1]->rx_burst(g0.data(), 4, t);
    e.rx[0]->poll(++t);
    CHECK(e.rx[1]->counters().handed_out == 4);
    REQUIRE(ring->poll(0) != nullptr);
    REQUIRE(ring->release(0));
    CHECK(e.moves.arrived_of(kId) == 1);

    // Move: the first look only notes where they came in; not due again
    // before the period; the second look agrees and asks for the move.
    Request out{};
    REQUIRE(e.moves.due(t));
    CHECK_FALSE(e.moves.look(p, 7, out));
    CHECK_FALSE(e.moves.due(t + 50));
    REQUIRE(e.moves.due(t + 100));
    REQUIRE(e.moves.look(p, 7, out));
    CHECK(p.moving);
    CHECK(out.op == Request::Op::MoveRecvOut);
    r = e.roundtrip(p.recv_lcore, out);
    REQUIRE(r.ok);
    CHECK(r.obj == p.recv);
    Request in{};
    e.moves.moved_out(p, r, in);
    CHECK(e.moves.owner_of(kId) == 1);
    CHECK(p.receiver == e.rx[1].get());
    CHECK(p.recv_lcore == e.lcore[1]);
    r = e.roundtrip(p.recv_lcore, in);
    REQUIRE(r.ok);
    e.moves.moved_in(p, r.ok);
    CHECK_FALSE(p.moving);
    CHECK(e.moves.moves() == 1);

    // Now placed where they arrive: nothing handed any more.
    auto g1 = tmtest::build_group(e.pool.mp, tx, 1, msg);
    e.rx[1]->rx_burst(g1.data(), 4, t += 200);
    CHECK(e.rx[1]->counters().handed_out == 4);
    CHECK(e.rx[1]->placer().counters().placed == 4);
    REQUIRE(ring->poll(1) != nullptr);
    REQUIRE(ring->release(1));
    // Looks that see it at home ask for nothing.
    REQUIRE(e.moves.due(t + 1000));
    CHECK_FALSE(e.moves.look(p, 7, out));

    // Close mid-message: half of message 2 is in when its session ends.
    auto g2 = tmtest::build_group(e.pool.mp, tx, 2, msg);
    e.rx[1]->rx_burst(g2.data(), 2, ++t);
    r = e.roundtrip(p.recv_lcore, {Request::Op::RemoveRecv, false, FailReason::Closed, kId, 7, p.receiver});
    REQUIRE(r.ok);
    CHECK(r.obj == p.recv);
    uint8_t last_owner = 0, last_arrived = 0;
    e.moves.removed(p, last_owner, last_arrived);
    CHECK(last_owner == 1);
    CHECK(last_arrived == 1);
    CHECK(e.moves.owner_of(kId) == RxPlacer::kNoOwner);
    // The rest comes after, on either lcore: no one's, dropped where it lands.
    e.rx[0]->rx_burst(g2.data() + 2, 1, ++t);
    e.rx[1]->rx_burst(g2.data() + 3, 1, ++t);
    e.rx[0]->poll(++t);
    e.rx[1]->poll(++t);
    CHECK(ring->poll(2) == nullptr); // never completed
    CHECK(e.rx[0]->placer().counters().drops[index(DropReason::UnknownFlow)] == 1);
    CHECK(e.rx[1]->placer().counters().drops[index(DropReason::UnknownFlow)] == 1);
    CHECK(e.rx[0]->counters().handed_out == 0);
    Receiver::free_flow(p.recv);
    p.recv = nullptr;
    CHECK(e.pool.avail() == start); // every frame freed exactly once
}

// Two engines of one process, each with hand-off: each RxMoves makes rings
// of its own (rte_ring names are process-wide; both were tm_ho_0 and
// tm_ho_1, and the second engine could not be made).
TEST_CASE("engine: two RxMoves in one process, each with its own hand-off rings", "[engine]") {
    engine::RxMoves a, b;
    std::string what;
    REQUIRE(a.make(2, SOCKET_ID_ANY, 100, what));
    const bool made = b.make(2, SOCKET_ID_ANY, 100, what);
    CHECK(made);
    if (made) {
        ReceiverRoutes ra, rb;
        a.fill(ra);
        b.fill(rb);
        CHECK(ra.handoff_in[0] != rb.handoff_in[0]);
        b.release();
    }
    a.release();
}
