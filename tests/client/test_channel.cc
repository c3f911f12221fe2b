// The channel end to end against the daemon's half of the protocol played
// by the test (fake_daemon.h): replies are queued on the socket before the
// call that reads them, so the library's blocking calls need no thread;
// the doorbell test has one, synchronised on the doorbell itself.
#include <catch2/catch.hpp>

#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "fake_daemon.h"
#include "tailmark/client.h"

namespace abi = tailmark::channel;
using tmtest::Attached;
using tmtest::SendSide;

namespace {

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const tm_message& m) { return {static_cast<const char*>(m.data), m.len}; }

// A connected session 42 with `nflows` flows (sq 4, cq 8 entries), max_msg 1000.
tm_session connect42(Attached& a, const SendSide& s) {
    a.d.connected(a.req++, 42, s, 64, 1000);
    tm_connect_opts o{};
    o.nflows = s.nflows;
    o.ring_size = 64;
    o.max_msg = 1000;
    tm_session sid = 0;
    REQUIRE(tm_connect(a.ch, "10.0.0.9", 7001, &o, &sid) == 0);
    REQUIRE(sid == 42);
    REQUIRE(a.d.recv().type() == abi::TM_MSG_CONNECT);
    return sid;
}

struct Recv {
    uint64_t stride = 0, bytes = 0;
    tmtest::Memfd mem;
    uint8_t* flow(uint16_t f) const { return mem.data() + f * stride; }
};

// An accepted session 77 on port 7000: `nflows` rings of 4 slots, max_msg 256.
Recv accept77(Attached& a, uint16_t nflows, tm_session_info* info = nullptr) {
    Recv r;
    r.mem = tmtest::make_recv(nflows, 4, 256, r.stride, r.bytes);
    a.d.accepted(77, 7000, nflows, 4, 256, r.stride, r.mem, r.bytes);
    tm_session_info i{};
    REQUIRE(tm_accept(a.ch, 1000, &i) == 1);
    REQUIRE(i.session == 77);
    if (info != nullptr)
        *info = i;
    return r;
}

// What the daemon would read in the doorbell's `want` once the app sleeps
// in wait() (the fake daemon's thread reads it then), with checks that the
// wait timed out after its whole 30 ms and left `sleeping` at 0.
template <class Wait>
uint64_t want_while_asleep(Attached& a, Wait&& wait) {
    std::atomic<uint64_t> want{0};
    std::thread daemon([&] {
        std::atomic_ref<uint32_t> sleeping(a.doorbell()->sleeping);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (sleeping.load() == 0)
            if (std::chrono::steady_clock::now() > until)
                return;
        want = std::atomic_ref<uint64_t>(a.doorbell()->want).load();
    });
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(wait(30) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(30));
    daemon.join();
    CHECK(a.doorbell()->sleeping == 0);
    return want.load();
}

} // namespace

TEST_CASE("channel: attach over the fake daemon", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    CHECK(tm_mtu(a.ch) == 1500);
    CHECK(tm_local_ipv4(a.ch) == 0xC6120002);
    CHECK(tm_max_flows(a.ch) == 8);
    const auto h = a.hello.as<abi::tm_msg_hello>();
    CHECK(std::string(h.name) == "tmtest");
    CHECK(h.arena_bytes == a.ch->arena.size());
    REQUIRE(a.hello.fds.size() == 1); // the arena; the wake fd came in WELCOME
    CHECK(a.doorbell()->sleeping == 0);
}

TEST_CASE("channel: CONNECT, send into the submission ring, completions back", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(2, 4, 8);
    a.d.connected(2, 42, s, 64, 1000);
    tm_connect_opts o{};
    o.nflows = 2;
    o.max_msg = 1000;
    o.timeout_ms = 3000;
    tm_session sid = 0;
    REQUIRE(tm_connect(a.ch, "10.0.0.9", 7001, &o, &sid) == 0);
    CHECK(sid == 42);
    const tmtest::Msg cm = a.d.recv();
    REQUIRE(cm.type() == abi::TM_MSG_CONNECT);
    const auto c = cm.as<abi::tm_msg_connect>();
    CHECK(c.h.req_id == 2);
    CHECK(c.ip == 0x0a000009);
    CHECK(c.service == 7001);
    CHECK(c.nflows == 2);
    CHECK(c.ring_size == 64); // the default
    CHECK(c.max_msg == 1000);
    CHECK(c.timeout_ms == 3000);
    CHECK(c.has_secret == 0);
    tm_session_info info{};
    REQUIRE(tm_session_get_info(a.ch, 42, &info) == 0);
    CHECK(info.nflows == 2);
    CHECK(info.max_msg == 1000);
    CHECK(info.peer_ip == 0x0a000009);
    CHECK(tm_session_state(a.ch, 42) == 0);

    auto* b = static_cast<uint8_t*>(tm_buf_alloc(a.ch, 1000));
    REQUIRE(b != nullptr);
    CHECK(tm_send(a.ch, 42, 0, b, 1000, 11) == 0);
    CHECK(tm_send(a.ch, 42, 0, b, 0, 12) == 0); // the 0-byte message
    abi::tm_sqe e{};
    REQUIRE(s.pop_sqe(0, e));
    CHECK(e.offset == static_cast<uint64_t>(b - a.ch->arena.base()));
    CHECK(e.len == 1000);
    CHECK(e.cookie == 11);
    REQUIRE(s.pop_sqe(0, e));
    CHECK(e.len == 0);
    CHECK(e.cookie == 12);

    // Refused before the ring.
    CHECK(tm_send(a.ch, 42, 0, b, 1001, 1) == -EMSGSIZE);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("max_msg is 1000"));
    int local = 0;
    CHECK(tm_send(a.ch, 42, 0, &local, 4, 1) == -EINVAL);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("not inside the channel's arena"));
    uint8_t* end = a.ch->arena.base() + a.ch->arena.size();
    CHECK(tm_send(a.ch, 42, 0, end - 10, 11, 1) == -EINVAL); // runs past its end
    CHECK(tm_send(a.ch, 42, 0, end - 10, 10, 1) == 0);       // ends at its end
    CHECK(tm_send(a.ch, 42, 2, b, 10, 1) == -EINVAL);        // no flow 2
    CHECK(tm_send(a.ch, 43, 0, b, 10, 1) == -ENOENT);
    REQUIRE(s.pop_sqe(0, e));

    // Full: -EAGAIN, never blocking.
    for (int i = 0; i < 4; ++i)
        REQUIRE(tm_send(a.ch, 42, 1, b, 8, 100 + i) == 0);
    CHECK(tm_send(a.ch, 42, 1, b, 8, 104) == -EAGAIN);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("submission ring is full"));
    REQUIRE(s.pop_sqe(1, e));
    CHECK(e.cookie == 100);
    CHECK(tm_send(a.ch, 42, 1, b, 8, 104) == 0);

    // Completions of both flows, each flow's in order.
    REQUIRE(s.push_cqe(0, abi::tm_cqe{11, 0, abi::TM_DELIVERED, 0, 0}));
    REQUIRE(s.push_cqe(0, abi::tm_cqe{12, 1, abi::TM_FAILED, abi::TM_FAIL_RETRY_LIMIT, 0}));
    REQUIRE(s.push_cqe(1, abi::tm_cqe{100, 0, abi::TM_DELIVERED, 0, 0}));
    tm_completion out[8];
    REQUIRE(tm_poll_completions(a.ch, out, 8) == 3);
    int seen0 = 0, seen1 = 0;
    for (int i = 0; i < 3; ++i) {
        CHECK(out[i].session == 42);
        if (out[i].flow == 0) {
            CHECK(out[i].cookie == (seen0 == 0 ? 11u : 12u));
            CHECK(out[i].msg_id == static_cast<uint32_t>(seen0));
            CHECK(out[i].status == (seen0 == 0 ? TM_DELIVERED : TM_FAILED));
            CHECK(out[i].reason == (seen0 == 0 ? TM_FAIL_NONE : TM_FAIL_RETRY_LIMIT));
            ++seen0;
        } else {
            CHECK(out[i].cookie == 100);
            ++seen1;
        }
    }
    CHECK((seen0 == 2 && seen1 == 1));
    CHECK(tm_poll_completions(a.ch, out, 8) == 0);
    CHECK(tm_poll_completions(a.ch, out, 0) == -EINVAL);
    tm_buf_free(a.ch, b);
}

TEST_CASE("channel: completions are taken from the flows in turn", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(2, 4, 8);
    connect42(a, s);
    for (uint32_t i = 0; i < 3; ++i) {
        REQUIRE(s.push_cqe(0, abi::tm_cqe{i, i, abi::TM_DELIVERED, 0, 0}));
        REQUIRE(s.push_cqe(1, abi::tm_cqe{100 + i, i, abi::TM_DELIVERED, 0, 0}));
    }
    std::string order;
    tm_completion c;
    for (int i = 0; i < 6; ++i) {
        REQUIRE(tm_poll_completions(a.ch, &c, 1) == 1);
        order += std::to_string(c.flow);
    }
    CHECK(order == "010101");
}

TEST_CASE("channel: ACCEPTED, messages in place, release, recv_any round-robin", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    Recv r;
    r.mem = tmtest::make_recv(2, 4, 256, r.stride, r.bytes);
    a.d.accepted(77, 7000, 2, 4, 256, r.stride, r.mem, r.bytes);
    CHECK(tm_wait(a.ch, 1000) == 1); // a session waits in tm_accept
    tm_session_info info{};
    REQUIRE(tm_accept(a.ch, 0, &info) == 1);
    CHECK(info.session == 77);
    CHECK(info.port == 7000);
    CHECK(info.nflows == 2);
    CHECK(info.peer_ip == 0x0a000002);
    CHECK(info.peer_port == 4242);
    CHECK(info.ring_size == 4);
    CHECK(info.max_msg == 256);
    CHECK(tm_accept(a.ch, 0, &info) == 0);
    CHECK(tm_wait(a.ch, 0) == 0);

    tm_message m{};
    CHECK(tm_recv(a.ch, 77, 0, &m) == 0);
    tmtest::complete(r.flow(0), 0, bytes("a0"));
    tmtest::complete(r.flow(0), 1, bytes("a1"));
    tmtest::complete(r.flow(1), 0, bytes("b0"));
    tmtest::complete(r.flow(1), 1, bytes("b1"));
    CHECK(tm_wait(a.ch, 0) == 1);
    std::string got;
    for (int i = 0; i < 4; ++i) {
        REQUIRE(tm_recv_any(a.ch, &m) == 1);
        CHECK(m.session == 77);
        got += text(m) + " ";
        REQUIRE(tm_release(a.ch, &m) == 0);
    }
    CHECK(got == "a0 b0 a1 b1 ");
    CHECK(tm_recv_any(a.ch, &m) == 0);
    CHECK(tmtest::released(r.flow(0)) == 2);
    CHECK(tmtest::released(r.flow(1)) == 2);

    // In place: the data pointer is the ring's region.
    tmtest::complete(r.flow(1), 2, bytes("in place"));
    tmtest::complete(r.flow(1), 3, bytes("next"));
    REQUIRE(tm_recv(a.ch, 77, 1, &m) == 1);
    // (our mapping of the memfd is not the library's: change the region through ours, read it through m)
    const auto* hdr = reinterpret_cast<const tailmark::RingHeader*>(r.flow(1));
    memcpy(r.flow(1) + hdr->regions_offset + 2 * hdr->region_stride, "IN", 2);
    CHECK(text(m) == "IN place");
    CHECK(m.msg_id == 2);
    CHECK(m.flow == 1);
    tm_message m2{};
    REQUIRE(tm_recv(a.ch, 77, 1, &m2) == 1);
    CHECK(tm_release(a.ch, &m2) == -EINVAL); // before m
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("out of order"));
    CHECK(tm_release(a.ch, &m) == 0);
    CHECK(tm_release(a.ch, &m2) == 0);
    CHECK(tmtest::released(r.flow(1)) == 4);

    CHECK(tm_recv(a.ch, 77, 2, &m) == -EINVAL);
    CHECK(tm_send(a.ch, 77, 0, a.ch->arena.base(), 1, 0) == -EINVAL); // accepted: it only receives
    CHECK(tm_recv(a.ch, 5, 0, &m) == -ENOENT);
}

TEST_CASE("channel: an ACCEPTED whose ring is not what it says is refused and closed", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    Recv r;
    r.mem = tmtest::make_recv(2, 4, 256, r.stride, r.bytes);
    reinterpret_cast<tailmark::RingHeader*>(r.flow(1))->version = 99;
    a.d.accepted(78, 7000, 2, 4, 256, r.stride, r.mem, r.bytes);
    tm_session_info info{};
    CHECK(tm_accept(a.ch, 1000, &info) == -EPROTO);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("session 78 flow 1") && Catch::Contains("layout version 99"));
    const tmtest::Msg m = a.d.recv();
    REQUIRE(m.type() == abi::TM_MSG_CLOSE);
    CHECK(m.as<abi::tm_msg_close>().session == 78);
    CHECK(tm_session_state(a.ch, 78) == -ENOENT);
    // The channel itself is fine: the next session is taken.
    Recv ok = accept77(a, 1);
    CHECK(tm_session_state(a.ch, 77) == 0);

    // A geometry that does not fit its memfd.
    a.d.accepted(79, 7000, 4, 4, 256, r.stride, r.mem, r.bytes * 2);
    CHECK(tm_accept(a.ch, 1000, &info) == -EPROTO);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("memfd holds"));
}

TEST_CASE("channel: tm_close of a connected session: OK, ENDED, completions until drained", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    REQUIRE(s.push_cqe(0, abi::tm_cqe{5, 0, abi::TM_FAILED, abi::TM_FAIL_CLOSED, 0}));
    a.d.ok(a.req);
    a.d.ended(42, abi::TM_END_CLOSED);
    CHECK(tm_close(a.ch, 42) == 0);
    const tmtest::Msg m = a.d.recv();
    REQUIRE(m.type() == abi::TM_MSG_CLOSE);
    CHECK(m.header().req_id == a.req);
    CHECK(m.as<abi::tm_msg_close>().session == 42);
    CHECK(tm_session_state(a.ch, 42) == TM_END_CLOSED); // held: a completion is left
    CHECK(tm_send(a.ch, 42, 0, a.ch->arena.base(), 1, 0) == -EPIPE);
    CHECK(tm_close(a.ch, 42) == 0); // again: nothing to do
    tm_completion c{};
    REQUIRE(tm_poll_completions(a.ch, &c, 1) == 1);
    CHECK(c.status == TM_FAILED);
    CHECK(c.reason == TM_FAIL_CLOSED);
    CHECK(tm_poll_completions(a.ch, &c, 1) == 0);
    CHECK(tm_session_state(a.ch, 42) == -ENOENT); // drained: gone
}

TEST_CASE("channel: tm_close of an accepted session drops it at once", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    Recv r = accept77(a, 1);
    a.d.ok(a.req);
    a.d.ended(77, abi::TM_END_CLOSED);
    CHECK(tm_close(a.ch, 77) == 0);
    CHECK(a.d.recv().type() == abi::TM_MSG_CLOSE);
    CHECK(tm_session_state(a.ch, 77) == -ENOENT);
    tm_message m{};
    CHECK(tm_recv(a.ch, 77, 0, &m) == -ENOENT);
    CHECK(tm_recv_any(a.ch, &m) == 0);
}

TEST_CASE("channel: a session that ended by itself is closed without asking the daemon", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    Recv r = accept77(a, 1);
    tmtest::complete(r.flow(0), 0, bytes("before the end"));
    a.d.ended(77, abi::TM_END_PEER_CLOSED);
    CHECK(tm_wait(a.ch, 1000) == 1);
    CHECK(tm_session_state(a.ch, 77) == TM_END_PEER_CLOSED);
    tm_message m{};
    REQUIRE(tm_recv(a.ch, 77, 0, &m) == 1); // what completed before ENDED is still there
    CHECK(text(m) == "before the end");
    CHECK(tm_release(a.ch, &m) == 0);
    CHECK(tm_close(a.ch, 77) == 0);
    CHECK(a.d.recv(50).type() == 0); // no CLOSE sent
}

TEST_CASE("channel: events that come while a request waits are kept for later", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    Recv r;
    r.mem = tmtest::make_recv(1, 4, 256, r.stride, r.bytes);
    a.d.accepted(77, 7000, 1, 4, 256, r.stride, r.mem, r.bytes);
    a.d.ended(77, abi::TM_END_PEER_TIMEOUT); // before it is even taken
    a.d.ended(1234, abi::TM_END_CLOSED);     // nobody's: ignored
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    tm_session_info info{};
    REQUIRE(tm_accept(a.ch, 0, &info) == 1);
    CHECK(info.session == 77);
    CHECK(tm_session_state(a.ch, 77) == TM_END_PEER_TIMEOUT);
    CHECK(tm_session_state(a.ch, 42) == 0);
}

TEST_CASE("channel: ENDED marks the session, and tm_wait reports it once", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    CHECK(tm_wait(a.ch, 0) == 0);
    a.d.ended(42, abi::TM_END_PEER_RESET);
    CHECK(tm_wait(a.ch, 2000) == 1);
    CHECK(tm_session_state(a.ch, 42) == TM_END_PEER_RESET);
    CHECK(tm_wait(a.ch, 0) == 0);
    CHECK(tm_send(a.ch, 42, 0, a.ch->arena.base(), 1, 0) == -EPIPE);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("peer restarted"));
}

TEST_CASE("channel: tm_wait sleeps on the doorbell and a byte in the daemon's wake pipe wakes it", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);

    // Nothing: a timeout, `sleeping` back at 0 afterwards.
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(tm_wait(a.ch, 30) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(30));
    CHECK(a.doorbell()->sleeping == 0);

    // The daemon's side of the protocol: it sees `sleeping`, puts a
    // completion in, swaps `sleeping` to 0 and writes one byte into the pipe.
    const int wake = a.wake_w.get();
    std::atomic<bool> rang{false};
    std::thread daemon([&] {
        std::atomic_ref<uint32_t> sleeping(a.doorbell()->sleeping);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (sleeping.load() == 0)
            if (std::chrono::steady_clock::now() > until)
                return; // the test fails below, without hanging
        s.push_cqe(0, abi::tm_cqe{9, 0, abi::TM_DELIVERED, 0, 0});
        if (sleeping.exchange(0) == 1) {
            const uint8_t one = 1;
            (void)!write(wake, &one, 1);
            rang = true;
        }
    });
    const int rc = tm_wait(a.ch, 10000);
    daemon.join();
    CHECK(rc == 1);
    CHECK(rang);
    CHECK(a.doorbell()->sleeping == 0);
    tm_completion c{};
    REQUIRE(tm_poll_completions(a.ch, &c, 1) == 1);
    CHECK(c.cookie == 9);
    // The pipe was drained: the next wait sleeps again (and times out).
    CHECK(tm_wait(a.ch, 20) == 0);
}

// A reader that takes its flows in a fixed turn (tailmark-cat --flows N)
// waits for the flow in turn. tm_wait returns at once while another flow
// holds a message, so such a loop spun on it, taking the CPU from the
// daemons; tm_wait_flow sleeps, and tells the daemon which flow wakes it.
TEST_CASE("channel: tm_wait_flow waits for its flow alone, and names it in the doorbell", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    Recv r = accept77(a, 2);
    tmtest::complete(r.flow(1), 0, bytes("flow one"));
    CHECK(tm_wait(a.ch, 0) == 1); // a level over every flow

    // Flow 1's message does not end the wait.
    CHECK(want_while_asleep(a, [&](int ms) { return tm_wait_flow(a.ch, 77, 0, ms); }) == abi::tm_want_flow(77, 0));

    CHECK(tm_wait_flow(a.ch, 77, 1, 0) == 1);
    tmtest::complete(r.flow(0), 0, bytes("flow zero"));
    CHECK(tm_wait_flow(a.ch, 77, 0, 1000) == 1);
    tm_message m{};
    REQUIRE(tm_recv(a.ch, 77, 0, &m) == 1);
    CHECK(text(m) == "flow zero");
    CHECK(tm_release(a.ch, &m) == 0);

    // tm_wait sleeps for anything again.
    tm_message m1{};
    REQUIRE(tm_recv(a.ch, 77, 1, &m1) == 1);
    CHECK(tm_release(a.ch, &m1) == 0);
    CHECK(tm_wait(a.ch, 10) == 0);
    CHECK(a.doorbell()->want == 0);

    // Its session's end ends it; what is not a receive flow is refused.
    CHECK(tm_wait_flow(a.ch, 77, 2, 0) == -EINVAL);
    CHECK(tm_wait_flow(a.ch, 78, 0, 0) == -ENOENT);
    a.d.ended(77, abi::TM_END_PEER_CLOSED);
    CHECK(tm_wait_flow(a.ch, 77, 0, 2000) == 1);
    CHECK(tm_session_state(a.ch, 77) == TM_END_PEER_CLOSED);
}

// An engine that waits for its sends to be delivered while a peer's piece
// of the next round sits in a ring (tailmark.torch) waits for completions,
// and for the one flow it can take now: tm_wait returned at once for that
// piece, every time, and the engine spun.
TEST_CASE("channel: tm_wait_sent waits for a completion or its flow, not another flow's message", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    Recv r = accept77(a, 2);
    tmtest::complete(r.flow(1), 0, bytes("next round"));
    CHECK(tm_wait(a.ch, 0) == 1); // a level over every flow

    // Flow 1's message ends neither form: completions alone, or with flow 0.
    CHECK(want_while_asleep(a, [&](int ms) { return tm_wait_sent(a.ch, 0, 0, ms); }) == abi::kWantSent);
    CHECK(want_while_asleep(a, [&](int ms) { return tm_wait_sent(a.ch, 77, 0, ms); }) ==
          (abi::kWantSent | abi::tm_want_flow(77, 0)));
    CHECK(tm_wait_sent(a.ch, 77, 1, 0) == 1); // its flow's message

    // A completion ends either form.
    REQUIRE(s.push_cqe(0, abi::tm_cqe{9, 0, abi::TM_DELIVERED, 0, 0}));
    CHECK(tm_wait_sent(a.ch, 0, 0, 1000) == 1);
    CHECK(tm_wait_sent(a.ch, 77, 0, 1000) == 1);
    tm_completion c{};
    REQUIRE(tm_poll_completions(a.ch, &c, 1) == 1);
    CHECK(c.cookie == 9);
    CHECK(tm_wait_sent(a.ch, 0, 0, 10) == 0);

    // Flow 0's message ends the wait that names it, not completions alone.
    tmtest::complete(r.flow(0), 0, bytes("this round"));
    CHECK(tm_wait_sent(a.ch, 77, 0, 1000) == 1);
    CHECK(tm_wait_sent(a.ch, 0, 0, 0) == 0);

    // What is not an accepted session's receive flow is refused; a
    // session's end ends it, once.
    CHECK(tm_wait_sent(a.ch, 77, 2, 0) == -EINVAL);
    CHECK(tm_wait_sent(a.ch, 42, 0, 0) == -EINVAL);
    CHECK(tm_wait_sent(a.ch, 78, 0, 0) == -ENOENT);
    a.d.ended(77, abi::TM_END_PEER_CLOSED);
    CHECK(tm_wait_sent(a.ch, 0, 0, 2000) == 1);
    CHECK(tm_wait_sent(a.ch, 0, 0, 10) == 0);
}

TEST_CASE("channel: a full wake pipe is drained whole, and the next wait sleeps again", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    // The daemon's end, written until the pipe is full (its writes then
    // fail with EAGAIN: it never blocks on an application).
    const uint8_t bytes[4096] = {};
    size_t in = 0;
    for (ssize_t n; (n = write(a.wake_w.get(), bytes, sizeof(bytes))) > 0;)
        in += static_cast<size_t>(n);
    CHECK(errno == EAGAIN);
    CHECK(in >= 4096);
    // Something to wake for (the pipe says so at once), then nothing: the
    // wait that follows must sleep its whole timeout, so every byte went.
    s.push_cqe(0, abi::tm_cqe{5, 0, abi::TM_DELIVERED, 0, 0});
    CHECK(tm_wait(a.ch, 1000) == 1);
    tm_completion c{};
    REQUIRE(tm_poll_completions(a.ch, &c, 1) == 1);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(tm_wait(a.ch, 50) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(50));
    int left = -1;
    REQUIRE(ioctl(a.wake_w.get(), FIONREAD, &left) == 0);
    CHECK(left == 0);
}

TEST_CASE("channel: a socket message wakes tm_wait too", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    std::thread daemon([&] {
        std::atomic_ref<uint32_t> sleeping(a.doorbell()->sleeping);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (sleeping.load() == 0 && std::chrono::steady_clock::now() < until) {
        }
        a.d.ended(42, abi::TM_END_PEER_CLOSED);
    });
    const int rc = tm_wait(a.ch, 10000);
    daemon.join();
    CHECK(rc == 1);
    CHECK(tm_session_state(a.ch, 42) == TM_END_PEER_CLOSED);
}

TEST_CASE("channel: the daemon's ERROR for CONNECT, LISTEN; UNLISTEN", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    tm_session sid = 0;
    CHECK(tm_connect(a.ch, "10.0.0.300", 7000, nullptr, &sid) == -EINVAL); // never sent
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("'10.0.0.300' is not an IPv4 address"));
    tm_connect_opts o{};
    o.ring_size = 48;
    CHECK(tm_connect(a.ch, "10.0.0.9", 7000, &o, &sid) == -EINVAL);
    o = tm_connect_opts{};
    o.nflows = 9; // WELCOME said 8
    CHECK(tm_connect(a.ch, "10.0.0.9", 7000, &o, &sid) == -EINVAL);
    CHECK(a.d.recv(20).type() == 0);

    a.d.error(a.req++, ECONNREFUSED, "the peer refused: max_msg 1048576 > its 65536");
    CHECK(tm_connect(a.ch, "10.0.0.9", 7001, nullptr, &sid) == -ECONNREFUSED);
    CHECK(std::string(tm_last_error(a.ch)) == "CONNECT 10.0.0.9:7001: the peer refused: max_msg 1048576 > its 65536");
    const auto c = a.d.recv().as<abi::tm_msg_connect>();
    CHECK(c.ring_size == 64);       // defaults
    CHECK(c.max_msg == 1u << 20);
    CHECK(c.nflows == 1);

    a.d.ok(a.req++);
    const uint8_t secret[16] = {1, 2, 3};
    tm_listen_opts lo{};
    lo.max_flows = 4;
    lo.max_msg = 4096;
    lo.secret = secret;
    CHECK(tm_listen(a.ch, 7000, &lo) == 0);
    const auto l = a.d.recv().as<abi::tm_msg_listen>();
    CHECK(l.h.type == abi::TM_MSG_LISTEN);
    CHECK(l.service == 7000);
    CHECK(l.max_flows == 4);
    CHECK(l.max_msg == 4096);
    CHECK(l.has_secret == 1);
    CHECK(l.secret[2] == 3);

    a.d.error(a.req++, EBUSY, "port 7000 has a listener (app 3)");
    CHECK(tm_listen(a.ch, 7000, nullptr) == -EBUSY);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("LISTEN 7000: port 7000 has a listener"));
    a.d.recv();

    a.d.ok(a.req++);
    CHECK(tm_unlisten(a.ch, 7000) == 0);
    const auto u = a.d.recv().as<abi::tm_msg_listen>();
    CHECK(u.h.type == abi::TM_MSG_UNLISTEN);
    CHECK(u.service == 7000);
}

TEST_CASE("channel: a CONNECTED nobody waits for any more is closed again", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    a.d.connected(1, 99, s, 64, 1000); // a late reply (to request 1, long answered)
    CHECK(tm_wait(a.ch, 0) == 0);      // handled on the way: not an event
    const tmtest::Msg m = a.d.recv();
    REQUIRE(m.type() == abi::TM_MSG_CLOSE);
    CHECK(m.as<abi::tm_msg_close>().session == 99);
}

TEST_CASE("channel: the daemon goes away: -ECONNRESET from every call, no crash", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    Recv r = accept77(a, 1);
    void* b = tm_buf_alloc(a.ch, 64);
    REQUIRE(b != nullptr);
    a.d.fd.reset(); // the daemon dies
    CHECK(tm_wait(a.ch, -1) == -ECONNRESET);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("closed the connection"));
    tm_message m{};
    tm_completion c{};
    CHECK(tm_send(a.ch, 42, 0, b, 1, 0) == -ECONNRESET);
    CHECK(tm_poll_completions(a.ch, &c, 1) == -ECONNRESET);
    CHECK(tm_recv(a.ch, 77, 0, &m) == -ECONNRESET);
    CHECK(tm_recv_any(a.ch, &m) == -ECONNRESET);
    CHECK(tm_session_state(a.ch, 42) == -ECONNRESET);
    CHECK(tm_close(a.ch, 42) == -ECONNRESET);
    CHECK(tm_accept(a.ch, 0, nullptr) == -ECONNRESET);
    CHECK(tm_listen(a.ch, 1, nullptr) == -ECONNRESET);
    CHECK(tm_buf_alloc(a.ch, 64) == nullptr);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("closed the connection"));
    tm_buf_free(a.ch, b); // still fine: our memory
}

TEST_CASE("channel: a data-path loop that never waits still learns the daemon is gone", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    SendSide s = SendSide::make(1, 4, 8);
    connect42(a, s);
    a.d.fd.reset();
    tm_completion c{};
    int rc = 0, calls = 0;
    while (rc == 0 && calls < 5000) {
        rc = tm_poll_completions(a.ch, &c, 1);
        ++calls;
    }
    CHECK(rc == -ECONNRESET);
    CHECK(calls <= 1024);
}

TEST_CASE("channel: a daemon that sends a reply type as an event breaks the channel (-EPROTO)", "[channel]") {
    Attached a = tmtest::attach_fake();
    REQUIRE(a.rc == 0);
    a.d.ok(0);
    CHECK(tm_wait(a.ch, 1000) == -EPROTO);
    CHECK_THAT(tm_last_error(a.ch), Catch::Contains("OK as an event"));
    CHECK(tm_wait(a.ch, 0) == -EPROTO);
    CHECK(tm_buf_alloc(a.ch, 1) == nullptr);
}
