#include <catch2/catch.hpp>

#include <cstring>

#include <rte_udp.h>

#include "fixtures.h"
#include "tailmark/control.h"
#include "tailmark/packet_parser.h"
#include "tailmark/siphash.h"

using namespace tailmark;
using R = DropReason;

namespace {

constexpr uint32_t kHdrOff = kEthLen + kIpLen + kUdpLen; // tailmark header in the frame
const SipKey kKey{0x0706050403020100ull, 0x0F0E0D0C0B0A0908ull};
const SipKey kOther{0x0706050403020100ull, 0x0F0E0D0C0B0A0909ull}; // one bit off

uint16_t be16_at(const std::vector<uint8_t>& f, size_t off) {
    rte_be16_t v;
    memcpy(&v, f.data() + off, 2);
    return rte_be_to_cpu_16(v);
}
uint32_t be32_at(const std::vector<uint8_t>& f, size_t off) {
    rte_be32_t v;
    memcpy(&v, f.data() + off, 4);
    return rte_be_to_cpu_32(v);
}
uint64_t be64_at(const std::vector<uint8_t>& f, size_t off) {
    rte_be64_t v;
    memcpy(&v, f.data() + off, 8);
    return rte_be_to_cpu_64(v);
}
void put_be16(std::vector<uint8_t>& f, size_t off, uint16_t x) {
    const rte_be16_t v = rte_cpu_to_be_16(x);
    memcpy(f.data() + off, &v, 2);
}
void put_be32(std::vector<uint8_t>& f, size_t off, uint32_t x) {
    const rte_be32_t v = rte_cpu_to_be_32(x);
    memcpy(f.data() + off, &v, 4);
}

uint32_t body_len_of(const std::vector<uint8_t>& f) {
    return be16_at(f, kEthLen + kIpLen + offsetof(rte_udp_hdr, dgram_len)) - kUdpLen - kHeaderLen;
}

// Recomputes the MAC (header + body before it) with `key`: what a forger
// who knew the key could do, so a mutation reaches the checks behind it.
void resign(std::vector<uint8_t>& f, const SipKey& key = kKey) {
    const uint32_t covered = kHeaderLen + body_len_of(f) - kMacLen;
    const rte_be64_t mac = rte_cpu_to_be_64(siphash24(key, {f.data() + kHdrOff, covered}));
    memcpy(f.data() + kHdrOff + covered, &mac, 8);
}

// Sets the body to `body` bytes (truncating or zero-extending), lengths and
// the IPv4 checksum consistent, re-signed.
void set_body_len(std::vector<uint8_t>& f, uint32_t body) {
    f.resize(kFrameOverhead + body);
    tmtest::hdr_of(f)->pay_len = rte_cpu_to_be_16(static_cast<uint16_t>(body));
    tmtest::ip_of(f)->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(kIpLen + kUdpLen + kHeaderLen + body));
    reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen)->dgram_len =
        rte_cpu_to_be_16(static_cast<uint16_t>(kUdpLen + kHeaderLen + body));
    tmtest::fix_ip_checksum(f);
    if (body >= kMacLen)
        resign(f);
}

rte_mbuf* chain_of(rte_mempool* mp, const std::vector<uint8_t>& bytes, size_t split) {
    const auto mid = bytes.begin() + static_cast<std::ptrdiff_t>(split);
    rte_mbuf* a = tmtest::mbuf_of(mp, std::vector<uint8_t>(bytes.begin(), mid));
    rte_mbuf* b = tmtest::mbuf_of(mp, std::vector<uint8_t>(mid, bytes.end()));
    if (rte_pktmbuf_chain(a, b) != 0)
        throw std::runtime_error("chain");
    return a;
}

struct Result {
    R frame = R::None;   // parse_packet
    R control = R::None; // parse_ack (only when the frame was accepted)
    bool is_control = false;
    ParsedPacket p;
    Control c;
};

Result parse_mbuf(const rte_mbuf* m, const SipKey& key = kKey) {
    Result r;
    r.frame = parse_packet(m, ParserConfig{}, r.p);
    if (r.frame == R::None) {
        r.is_control = r.p.is_control();
        r.control = parse_ack(m, r.p, key, r.c);
    }
    return r;
}

Result parse_bytes(rte_mempool* mp, const std::vector<uint8_t>& f, const SipKey& key = kKey) {
    rte_mbuf* m = tmtest::mbuf_of(mp, f);
    Result r = parse_mbuf(m, key);
    rte_pktmbuf_free(m);
    return r;
}

Control ack(uint32_t released, uint32_t acked, uint32_t s_epoch, uint32_t r_epoch = 0x5EC0) {
    Control c;
    c.nack = false;
    c.released_upto = released;
    c.acked_upto = acked;
    c.sender_epoch = s_epoch;
    c.receiver_epoch = r_epoch;
    c.seq = 0x0102030405060708ull; // the flow's control packets' number (any but 0)
    return c;
}

Control nack(uint32_t msg_id, std::vector<NackRange> ranges, uint32_t released = 0x100, uint32_t acked = 0x104,
             uint32_t s_epoch = 0x7E57, uint32_t r_epoch = 0x5EC0) {
    Control c = ack(released, acked, s_epoch, r_epoch);
    c.nack = true;
    c.n.msg_id = msg_id;
    c.n.nranges = static_cast<uint16_t>(ranges.size());
    for (size_t i = 0; i < ranges.size() && i < kMaxNackRanges; i++)
        c.n.ranges[i] = ranges[i];
    return c;
}

std::vector<uint8_t> frame_of(rte_mempool* mp, const TxFlow& flow, Control c, const SipKey& key = kKey) {
    c.n.flow = flow.id;
    rte_mbuf* m = build_ack(mp, flow.l2l4, key, c);
    if (m == nullptr)
        throw std::runtime_error("build_ack");
    auto f = tmtest::flat(m);
    rte_pktmbuf_free(m);
    return f;
}

void check_same_nack(const Nack& got, const Nack& want) {
    CHECK(got.msg_id == want.msg_id);
    REQUIRE(got.nranges == want.nranges);
    for (uint32_t i = 0; i < want.nranges; i++) {
        INFO("range " << i);
        CHECK(got.ranges[i].first == want.ranges[i].first);
        CHECK(got.ranges[i].count == want.ranges[i].count);
    }
}

} // namespace

TEST_CASE("ACK round trip: cursors, epochs and flow come back exactly, the MAC over header and body", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(0x1234, 0xC0FFEE, 16);
    Control c = ack(0x01020304, 0x05060708, 0x0A0B0C0D, 0x11223344);
    c.n.flow = 0x1234;
    c.n.nranges = 7; // ignored for an ACK: it carries no ranges

    rte_mbuf* m = build_ack(pool.mp, flow.l2l4, kKey, c);
    REQUIRE(m != nullptr);
    CHECK(rte_pktmbuf_pkt_len(m) == kFrameOverhead + kAckBodyLen);
    CHECK(kAckBodyLen == 40);
    Result r = parse_mbuf(m);
    REQUIRE(r.frame == R::None);
    CHECK(r.is_control);
    CHECK(r.p.hdr.version == kVersion);
    CHECK(r.p.hdr.flags == Flags::Ack);
    CHECK(r.p.hdr.flow == 0x1234);
    CHECK(r.p.hdr.msg_id == 0x05060708); // the ACK's header names acked_upto
    CHECK(r.p.hdr.pkt_idx == 0);
    CHECK(r.p.hdr.offset == 0);
    CHECK(r.p.hdr.pay_len == kAckBodyLen);
    REQUIRE(r.control == R::None);
    CHECK_FALSE(r.c.nack);
    CHECK(r.c.released_upto == 0x01020304);
    CHECK(r.c.acked_upto == 0x05060708);
    CHECK(r.c.sender_epoch == 0x0A0B0C0D);
    CHECK(r.c.receiver_epoch == 0x11223344);
    CHECK(r.c.n.flow == 0x1234);
    CHECK(r.c.n.nranges == 0);
    CHECK(r.c.hold_ns == kNoEcho); // nothing echoed
    CHECK(r.c.echo == 0);
    CHECK(r.c.seq == 0x0102030405060708ull);

    // The body, byte for byte (control.h): big-endian cursors, epochs, no echo, the number, then the MAC.
    auto f = tmtest::flat(m);
    CHECK(be32_at(f, kFrameOverhead + 0) == 0x01020304);
    CHECK(be32_at(f, kFrameOverhead + 4) == 0x05060708);
    CHECK(be32_at(f, kFrameOverhead + 8) == 0x0A0B0C0D);
    CHECK(be32_at(f, kFrameOverhead + 12) == 0x11223344);
    CHECK(be16_at(f, kFrameOverhead + 16) == 0);
    CHECK(be16_at(f, kFrameOverhead + 18) == 0);
    CHECK(be32_at(f, kFrameOverhead + 20) == 0xFFFFFFFF);
    CHECK(be64_at(f, kFrameOverhead + 24) == 0x0102030405060708ull);
    CHECK(be64_at(f, kFrameOverhead + 32) == siphash24(kKey, {f.data() + kHdrOff, kHeaderLen + 32}));
    CHECK(rte_ipv4_cksum(tmtest::ip_of(f)) == 0);
    rte_pktmbuf_free(m);
    CHECK(pool.avail() == start);
}

TEST_CASE("ACK and NACK echo a send stamp and its hold time exactly", "[control]") {
    tmtest::Pool pool(1023);
    TxFlow flow = tmtest::make_flow(9, 1, 8);
    Control c = ack(3, 5, 7);
    c.echo = 0xBEEF;
    c.hold_ns = 123456789;
    auto f = frame_of(pool.mp, flow, c);
    CHECK(be16_at(f, kFrameOverhead + 18) == 0xBEEF);
    CHECK(be32_at(f, kFrameOverhead + 20) == 123456789);
    Result r = parse_bytes(pool.mp, f);
    REQUIRE(r.control == R::None);
    CHECK(r.c.echo == 0xBEEF);
    CHECK(r.c.hold_ns == 123456789);
    Control n = nack(4, {{2, 3}}, 1, 3, 7);
    n.echo = 1;
    n.hold_ns = 0;
    f = frame_of(pool.mp, flow, n);
    CHECK(be16_at(f, kFrameOverhead + 32) == 2); // the ranges follow the echo and the number
    r = parse_bytes(pool.mp, f);
    REQUIRE(r.control == R::None);
    CHECK(r.c.echo == 1);
    CHECK(r.c.hold_ns == 0);
    CHECK(r.c.n.ranges[0].first == 2);
    CHECK(r.c.n.ranges[0].count == 3);
}

TEST_CASE("NACK round trip with 1 and kMaxNackRanges ranges, and from chained mbufs", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(42, 0xABCDEF, 8);

    SECTION("one range, count 0: from `first` to the end of the group") {
        const auto f = frame_of(pool.mp, flow, nack(0xDEADBEEF, {{17, 0}}, 0xDEADBEE0, 0xDEADBEE8, 3, 4));
        CHECK(f.size() == kFrameOverhead + kAckBodyLen + 4);
        Result r = parse_bytes(pool.mp, f);
        REQUIRE(r.frame == R::None);
        CHECK(r.p.hdr.flags == Flags::Nack);
        CHECK(r.p.hdr.msg_id == 0xDEADBEEF); // the NACK's header names the message
        REQUIRE(r.control == R::None);
        CHECK(r.c.nack);
        CHECK(r.c.released_upto == 0xDEADBEE0);
        CHECK(r.c.acked_upto == 0xDEADBEE8);
        CHECK(r.c.sender_epoch == 3);
        CHECK(r.c.receiver_epoch == 4);
        CHECK(r.c.n.flow == 42);
        CHECK(be16_at(f, kFrameOverhead + 16) == 1);
        CHECK(be16_at(f, kFrameOverhead + 32) == 17);
        CHECK(be16_at(f, kFrameOverhead + 34) == 0);
        CHECK(be64_at(f, kFrameOverhead + 36) == siphash24(kKey, {f.data() + kHdrOff, kHeaderLen + 36}));
    }
    SECTION("kMaxNackRanges ranges, the last one to the end") {
        std::vector<NackRange> rs;
        for (uint16_t i = 0; i < kMaxNackRanges - 1; i++)
            rs.push_back({static_cast<uint16_t>(1 + 3 * i), static_cast<uint16_t>(1 + (i % 2))});
        rs.push_back({65534, 0});
        Control c = nack(7, rs, 1, 5, 0xFFFFFFFF, 9);
        const auto f = frame_of(pool.mp, flow, c);
        CHECK(f.size() == kFrameOverhead + kMaxAckBodyLen);
        Result r = parse_bytes(pool.mp, f);
        REQUIRE(r.control == R::None);
        CHECK(r.c.n.nranges == kMaxNackRanges);
        check_same_nack(r.c.n, c.n);
        CHECK(r.c.n.ranges[31].first == 65534);
        CHECK(r.c.n.ranges[31].count == 0);
    }
    SECTION("a NACK parses from a chained mbuf, split at every byte") {
        Control c = nack(9, {{0, 2}, {5, 1}, {8, 0}});
        auto f = frame_of(pool.mp, flow, c);
        for (size_t split = 1; split < f.size(); split++) {
            INFO("split " << split);
            rte_mbuf* m = chain_of(pool.mp, f, split);
            Result r = parse_mbuf(m);
            REQUIRE(r.frame == R::None);
            REQUIRE(r.control == R::None);
            check_same_nack(r.c.n, c.n);
            rte_pktmbuf_free(m);
        }
    }
    CHECK(pool.avail() == start);
}

TEST_CASE("every single-bit flip of a control packet, MAC included, is refused", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(5, 1, 8);
    for (const Control& c : {ack(10, 12, 2), nack(12, {{1, 1}, {3, 2}, {9, 0}}, 10, 12, 2)}) {
        INFO((c.nack ? "NACK" : "ACK"));
        const auto base = frame_of(pool.mp, flow, c);
        REQUIRE(parse_bytes(pool.mp, base).control == R::None);
        uint32_t bad_auth = 0, frame_drop = 0;
        for (size_t byte = kHdrOff; byte < base.size(); byte++) {
            for (int bit = 0; bit < 8; bit++) {
                INFO("byte " << byte << " bit " << bit);
                auto f = base;
                f[byte] ^= static_cast<uint8_t>(1u << bit);
                Result r = parse_bytes(pool.mp, f);
                if (r.frame != R::None) {
                    frame_drop++;
                    continue;
                }
                // Accepted as a frame: the MAC check refuses it (or, when a
                // length field went, the length check before it).
                CHECK((r.control == R::ControlBadAuth || r.control == R::ControlMalformed));
                bad_auth += r.control == R::ControlBadAuth;
            }
        }
        CHECK(bad_auth > 8 * (base.size() - kHdrOff) * 3 / 4); // nearly all: the MAC covers every byte
        CHECK(frame_drop > 0);                                  // the version byte, unknown flag bits
    }
    CHECK(pool.avail() == start);
}

TEST_CASE("a control packet signed with another key is refused, whatever it says", "[control]") {
    tmtest::Pool pool(1023);
    TxFlow flow = tmtest::make_flow(5, 1, 8);
    for (const Control& c : {ack(10, 12, 2), nack(12, {{1, 1}}, 10, 12, 2)}) {
        const auto forged = frame_of(pool.mp, flow, c, kOther);
        CHECK(parse_bytes(pool.mp, forged).control == R::ControlBadAuth);
        CHECK(parse_bytes(pool.mp, forged, kOther).control == R::None); // its own key: fine
    }
    // Zero key, all-ones key, and the right key with the MAC bytes zeroed.
    for (const SipKey& k : {SipKey{0, 0}, SipKey{~0ull, ~0ull}})
        CHECK(parse_bytes(pool.mp, frame_of(pool.mp, flow, ack(1, 1, 1), k)).control == R::ControlBadAuth);
    auto f = frame_of(pool.mp, flow, ack(1, 1, 1));
    memset(f.data() + f.size() - kMacLen, 0, kMacLen);
    CHECK(parse_bytes(pool.mp, f).control == R::ControlBadAuth);
}

TEST_CASE("a control body inconsistent with itself is malformed, even correctly signed", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(6, 1, 8);
    const auto base = frame_of(pool.mp, flow, nack(4, {{1, 1}, {3, 0}}, 2, 4, 1));
    REQUIRE(body_len_of(base) == kAckBodyLen + 8);
    REQUIRE(parse_bytes(pool.mp, base).control == R::None);

    // nranges says 1 or 3, the body holds 2.
    for (uint16_t n : {uint16_t(1), uint16_t(3), uint16_t(kMaxNackRanges), uint16_t(0xFFFF)}) {
        INFO("nranges " << n);
        auto f = base;
        put_be16(f, kFrameOverhead + 16, n);
        resign(f);
        CHECK(parse_bytes(pool.mp, f).control == R::ControlMalformed);
    }
    // Bodies shorter than the fixed part and MAC, not whole ranges, or too long.
    for (uint32_t body : {8u, kAckBodyLen - 1, kAckBodyLen + 2, kMaxAckBodyLen + 4}) {
        INFO("body " << body);
        auto f = base;
        set_body_len(f, body);
        Result r = parse_bytes(pool.mp, f);
        REQUIRE(r.frame == R::None);
        CHECK(r.control == R::ControlMalformed);
    }
    // pay_len disagrees with the UDP length.
    {
        auto f = base;
        tmtest::hdr_of(f)->pay_len = rte_cpu_to_be_16(kAckBodyLen + 4);
        resign(f);
        CHECK(parse_bytes(pool.mp, f).control == R::ControlMalformed);
    }
    // Epoch 0 on either side; ACK and NACK at once; RETX; SESSION with ACK.
    for (const Control& c : {ack(1, 2, 0), ack(1, 2, 3, 0), nack(2, {{0, 0}}, 1, 2, 0)})
        CHECK(parse_bytes(pool.mp, frame_of(pool.mp, flow, c)).control == R::ControlMalformed);
    // Number 0 (numbers start at 1: a window never takes 0).
    for (Control c : {ack(1, 2, 3), nack(2, {{0, 0}}, 1, 2, 3)}) {
        c.seq = 0;
        CHECK(parse_bytes(pool.mp, frame_of(pool.mp, flow, c)).control == R::ControlMalformed);
    }
    const auto a = frame_of(pool.mp, flow, ack(1, 2, 3));
    auto with = [&](const std::vector<uint8_t>& b, auto fn) {
        auto f = b;
        fn(f);
        resign(f);
        return parse_bytes(pool.mp, f);
    };
    auto flags = [](Flags fl) { return [fl](auto& f) { tmtest::hdr_of(f)->flags = static_cast<uint8_t>(fl); }; };
    CHECK(with(a, flags(Flags::Ack | Flags::Nack)).control == R::ControlMalformed);
    CHECK(with(a, flags(Flags::Ack | Flags::Retx)).control == R::ControlMalformed);
    CHECK(with(a, flags(Flags::Ack | Flags::Session)).control == R::ControlMalformed);
    CHECK(with(a, flags(Flags::Ack | Flags::Last)).frame == R::BadFlags);
    // An echo without a hold time (kNoEcho says there is none).
    CHECK(with(a, [](auto& f) { put_be16(f, kFrameOverhead + 18, 1); }).control == R::ControlMalformed);
    CHECK(with(a, [](auto& f) { tmtest::hdr_of(f)->pkt_idx = RTE_BE16(1); }).control == R::ControlMalformed);
    CHECK(with(a, [](auto& f) { tmtest::hdr_of(f)->offset = RTE_BE32(4); }).control == R::ControlMalformed);
    // An ACK's header msg_id is its acked_upto.
    CHECK(with(a, [](auto& f) { tmtest::hdr_of(f)->msg_id = RTE_BE32(3); }).control == R::ControlMalformed);
    CHECK(pool.avail() == start);
}

TEST_CASE("build_ack refuses more than kMaxNackRanges ranges, a NACK without one, and an empty pool", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(9, 1, 8);
    Control c = nack(1, {{0, 0}});
    for (uint16_t nr : {uint16_t(0), uint16_t(kMaxNackRanges + 1), uint16_t(0xFFFF)}) {
        c.n.nranges = nr;
        CHECK(build_ack(pool.mp, flow.l2l4, kKey, c) == nullptr);
        CHECK(pool.avail() == start);
    }
    c.n.nranges = kMaxNackRanges;
    rte_mbuf* m = build_ack(pool.mp, flow.l2l4, kKey, c);
    CHECK(m != nullptr);
    rte_pktmbuf_free(m);
    tmtest::Pool tiny(1);
    rte_mbuf* hold = rte_pktmbuf_alloc(tiny.mp);
    REQUIRE(hold != nullptr);
    CHECK(build_ack(tiny.mp, flow.l2l4, kKey, ack(1, 1, 1)) == nullptr);
    rte_pktmbuf_free(hold);
    CHECK(tiny.avail() == 1);
    CHECK(pool.avail() == start);
}

// --- session packets -------------------------------------------------------

namespace {

SessionMsg connect_msg() {
    SessionMsg s;
    s.type = SessionType::Connect;
    s.service = 4747;
    s.src_session = 3;
    s.src_epoch = 0xC0DEC0DE;
    s.nonce = 0x0102030405060708ull;
    s.seq = 0x1112131415161718ull;
    s.cookie = 0x2122232425262728ull;
    s.nflows = 4;
    s.flow_base = 100;
    s.mtu = 1500;
    s.ring_size = 64;
    s.max_msg = 8192;
    s.key = 0x7A11C0DE;
    s.key_flags = kKeysGiven;
    s.noverrides = 2;
    s.overrides[0] = {1, 0x22222222};
    s.overrides[1] = {3, 0x33333333};
    s.data_version = 2;
    return s;
}

struct SessionResult {
    R r = R::None;
    bool auth = false;
    SessionMsg m;
};

SessionResult read_bytes(rte_mempool* mp, const std::vector<uint8_t>& f, const SipKey& key = kKey) {
    SessionResult out;
    rte_mbuf* m = tmtest::mbuf_of(mp, f);
    ParsedPacket p;
    out.r = parse_packet(m, ParserConfig{}, p);
    if (out.r == R::None) {
        if (!p.is_session()) {
            out.r = R::Control;
        } else {
            SessionFrame raw;
            out.r = read_session(m, p, raw, out.m);
            out.auth = out.r == R::None && authentic(raw, key);
        }
    }
    rte_pktmbuf_free(m);
    return out;
}

// A session packet as built (its seq 0 made 1 unless zero_seq: 0 is never a number).
std::vector<uint8_t> session_frame(rte_mempool* mp, SessionMsg s, const SipKey& key = kKey, bool zero_seq = false) {
    if (s.seq == 0 && !zero_seq)
        s.seq = 1;
    TxFlow flow = tmtest::make_flow(1, 1, 8);
    rte_mbuf* m = build_session(mp, flow.l2l4, key, s);
    if (m == nullptr)
        throw std::runtime_error("build_session");
    auto f = tmtest::flat(m);
    rte_pktmbuf_free(m);
    return f;
}

} // namespace

TEST_CASE("session packets round trip: CONNECT, ACCEPT, REFUSE, KEEPALIVE, RESET, CLOSE, RETRY", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    SECTION("CONNECT with per-flow keys, byte for byte") {
        const SessionMsg c = connect_msg();
        const auto f = session_frame(pool.mp, c);
        CHECK(f.size() == kFrameOverhead + session_body_len(c));
        CHECK(session_body_len(c) == 32 + 48 + 16 + 8);
        CHECK(tmtest::hdr_of(const_cast<std::vector<uint8_t>&>(f))->flags == static_cast<uint8_t>(Flags::Session));
        CHECK(f[kFrameOverhead + 0] == 1); // CONNECT
        CHECK(be16_at(f, kFrameOverhead + 2) == 4747);
        CHECK(be16_at(f, kFrameOverhead + 4) == 3);
        CHECK(be32_at(f, kFrameOverhead + 8) == 0xC0DEC0DE);
        CHECK(be32_at(f, kFrameOverhead + 12) == 0);
        CHECK(be64_at(f, kFrameOverhead + 16) == 0x0102030405060708ull);
        CHECK(be64_at(f, kFrameOverhead + 24) == 0x1112131415161718ull); // seq
        CHECK(be64_at(f, kFrameOverhead + 32) == 0x2122232425262728ull); // cookie
        CHECK(be16_at(f, kFrameOverhead + 40) == 4);
        CHECK(be16_at(f, kFrameOverhead + 42) == 100);
        CHECK(be32_at(f, kFrameOverhead + 44) == 1500);
        CHECK(be32_at(f, kFrameOverhead + 48) == 64);
        CHECK(be32_at(f, kFrameOverhead + 52) == 8192);
        CHECK(be32_at(f, kFrameOverhead + 56) == 0x7A11C0DE);
        CHECK(be16_at(f, kFrameOverhead + 60) == kKeysGiven);
        CHECK(be16_at(f, kFrameOverhead + 62) == 2);
        CHECK(be16_at(f, kFrameOverhead + 64) == 2); // data version offered
        CHECK(be16_at(f, kFrameOverhead + 66) == 0);
        CHECK(be32_at(f, kFrameOverhead + 68) == 0);
        CHECK(be64_at(f, kFrameOverhead + 72) == 0); // key nonce: the ACCEPT's
        CHECK(be16_at(f, kFrameOverhead + 80) == 1);
        CHECK(be32_at(f, kFrameOverhead + 84) == 0x22222222);
        CHECK(be16_at(f, kFrameOverhead + 88) == 3);
        CHECK(be32_at(f, kFrameOverhead + 92) == 0x33333333);
        const auto r = read_bytes(pool.mp, f);
        REQUIRE(r.r == R::None);
        CHECK(r.auth);
        CHECK(r.m.type == SessionType::Connect);
        CHECK(r.m.service == 4747);
        CHECK(r.m.src_session == 3);
        CHECK(r.m.dst_session == 0);
        CHECK(r.m.src_epoch == 0xC0DEC0DE);
        CHECK(r.m.nonce == 0x0102030405060708ull);
        CHECK(r.m.seq == 0x1112131415161718ull);
        CHECK(r.m.cookie == 0x2122232425262728ull);
        CHECK(r.m.nflows == 4);
        CHECK(r.m.flow_base == 100);
        CHECK(r.m.mtu == 1500);
        CHECK(r.m.ring_size == 64);
        CHECK(r.m.max_msg == 8192);
        CHECK(r.m.key == 0x7A11C0DE);
        CHECK(r.m.key_flags == kKeysGiven);
        REQUIRE(r.m.noverrides == 2);
        CHECK(r.m.overrides[1].index == 3);
        CHECK(r.m.overrides[1].key == 0x33333333);
        CHECK_FALSE(read_bytes(pool.mp, f, kOther).auth);
    }
    SECTION("CONNECT and ACCEPT with rails: each rail's address and MAC after the overrides, byte for byte") {
        SessionMsg c = connect_msg();
        c.nrails = 2;
        c.rails[0] = {0x0A4F0101, {0x02, 0x11, 0x22, 0x33, 0x44, 0x55}};
        c.rails[1] = {0x0A4F0201, {0x02, 0x66, 0x77, 0x88, 0x99, 0xAA}};
        const auto f = session_frame(pool.mp, c);
        CHECK(session_body_len(c) == 32 + 48 + 16 + 2 * 12 + 8);
        CHECK(f[kFrameOverhead + 68] == 2); // nrails
        CHECK(f[kFrameOverhead + 69] == 0);
        CHECK(be16_at(f, kFrameOverhead + 70) == 0);
        CHECK(be32_at(f, kFrameOverhead + 96) == 0x0A4F0101);
        CHECK(f[kFrameOverhead + 100] == 0x02);
        CHECK(f[kFrameOverhead + 105] == 0x55);
        CHECK(be16_at(f, kFrameOverhead + 106) == 0);
        CHECK(be32_at(f, kFrameOverhead + 108) == 0x0A4F0201);
        CHECK(f[kFrameOverhead + 117] == 0xAA);
        const auto r = read_bytes(pool.mp, f);
        REQUIRE(r.r == R::None);
        CHECK(r.auth);
        REQUIRE(r.m.nrails == 2);
        CHECK(r.m.rails[0].ip == 0x0A4F0101);
        CHECK(memcmp(r.m.rails[0].mac, c.rails[0].mac, 6) == 0);
        CHECK(r.m.rails[1].ip == 0x0A4F0201);
        CHECK(memcmp(r.m.rails[1].mac, c.rails[1].mac, 6) == 0);
        CHECK(r.m.noverrides == 2); // still read right before them
        CHECK(r.m.overrides[1].key == 0x33333333);
    }
    SECTION("REFUSE names the setting and both values") {
        SessionMsg s;
        s.type = SessionType::Refuse;
        s.service = 9;
        s.src_session = 77;
        s.src_epoch = 5;
        s.dst_session = 3;
        s.dst_epoch = 0xC0DEC0DE;
        s.nonce = 42;
        s.reason = RefuseReason::MsgSize;
        s.index = 0;
        s.expected = 4096;
        s.got = 8192;
        const auto r = read_bytes(pool.mp, session_frame(pool.mp, s));
        REQUIRE(r.r == R::None);
        CHECK(r.auth);
        CHECK(r.m.type == SessionType::Refuse);
        CHECK(r.m.dst_session == 3);
        CHECK(r.m.reason == RefuseReason::MsgSize);
        CHECK(r.m.expected == 4096);
        CHECK(r.m.got == 8192);
    }
    SECTION("KEEPALIVE, RESET and CLOSE") {
        for (SessionType t : {SessionType::Keepalive, SessionType::Reset, SessionType::Close}) {
            SessionMsg s;
            s.type = t;
            s.flags = t == SessionType::Keepalive ? kKeepaliveAsk : 0;
            s.service = 1;
            s.src_session = 2;
            s.src_epoch = 3;
            s.dst_session = 4;
            s.dst_epoch = 5;
            s.nonce = 6;
            s.reason = t == SessionType::Reset ? RefuseReason::UnknownSession : RefuseReason::None;
            const auto r = read_bytes(pool.mp, session_frame(pool.mp, s));
            INFO(to_string(t));
            REQUIRE(r.r == R::None);
            CHECK(r.auth);
            CHECK(r.m.type == t);
            CHECK(r.m.flags == s.flags);
            CHECK(r.m.nonce == 6);
            CHECK(r.m.reason == s.reason);
        }
    }
    SECTION("RETRY: a token, from no session (src_session 0), byte for byte") {
        SessionMsg s;
        s.type = SessionType::Retry;
        s.service = 4747;
        s.src_session = 0;
        s.src_epoch = 0x0E0E0E0E;
        s.dst_session = 3;
        s.dst_epoch = 0xC0DEC0DE;
        s.nonce = 0x0102030405060708ull;
        s.seq = 1;
        s.cookie = 0xC00C1E5C00C1E5ull;
        const auto f = session_frame(pool.mp, s);
        CHECK(session_body_len(s) == 32 + 8 + 8);
        CHECK(f[kFrameOverhead + 0] == 7);
        CHECK(be16_at(f, kFrameOverhead + 4) == 0);
        CHECK(be64_at(f, kFrameOverhead + 32) == 0xC00C1E5C00C1E5ull);
        const auto r = read_bytes(pool.mp, f);
        REQUIRE(r.r == R::None);
        CHECK(r.auth);
        CHECK(r.m.type == SessionType::Retry);
        CHECK(r.m.src_session == 0);
        CHECK(r.m.dst_session == 3);
        CHECK(r.m.nonce == 0x0102030405060708ull);
        CHECK(r.m.cookie == 0xC00C1E5C00C1E5ull);
        // No token, or a RETRY that names a session of its own: malformed.
        s.cookie = 0;
        CHECK(read_bytes(pool.mp, session_frame(pool.mp, s)).r == R::ControlMalformed);
        s.cookie = 1;
        s.src_session = 9;
        CHECK(read_bytes(pool.mp, session_frame(pool.mp, s)).r == R::ControlMalformed);
    }
    CHECK(pool.avail() == start);
}

TEST_CASE("every single-bit flip of a CONNECT is refused or fails its MAC", "[control]") {
    tmtest::Pool pool(1023);
    const auto base = session_frame(pool.mp, connect_msg());
    uint32_t bad_auth = 0;
    for (size_t byte = kHdrOff; byte < base.size(); byte++)
        for (int bit = 0; bit < 8; bit++) {
            INFO("byte " << byte << " bit " << bit);
            auto f = base;
            f[byte] ^= static_cast<uint8_t>(1u << bit);
            const auto r = read_bytes(pool.mp, f);
            CHECK_FALSE((r.r == R::None && r.auth));
            bad_auth += r.r == R::None && !r.auth;
        }
    CHECK(bad_auth > 0);
}

TEST_CASE("malformed session bodies are refused before their MAC is looked at", "[control]") {
    tmtest::Pool pool(1023);
    auto signed_with = [&](auto fn) {
        auto f = session_frame(pool.mp, connect_msg());
        fn(f);
        resign(f);
        return read_bytes(pool.mp, f).r;
    };
    CHECK(signed_with([](auto& f) { f[kFrameOverhead] = 0; }) == R::ControlMalformed);      // type 0
    CHECK(signed_with([](auto& f) { f[kFrameOverhead] = 8; }) == R::ControlMalformed);      // type 8
    CHECK(signed_with([](auto& f) { f[kFrameOverhead + 1] = 1; }) == R::ControlMalformed);  // flags on a CONNECT
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 6, 1); }) == R::ControlMalformed); // reserved
    CHECK(signed_with([](auto& f) { put_be32(f, kFrameOverhead + 8, 0); }) == R::ControlMalformed); // src epoch 0
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 4, 0); }) == R::ControlMalformed); // src session 0
    CHECK(signed_with([](auto& f) { put_be32(f, kFrameOverhead + 12, 1); }) == R::ControlMalformed); // CONNECT with a dst
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 62, 3); }) == R::ControlMalformed); // overrides vs length
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 80, 4); }) == R::ControlMalformed); // override index >= nflows
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 64, 3); }) == R::ControlMalformed); // data version 3
    CHECK(signed_with([](auto& f) { f[kFrameOverhead + 79] = 1; }) == R::ControlMalformed);         // a CONNECT's key nonce
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 40, 0); }) == R::ControlMalformed); // no flows
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 42, 65534); }) == R::ControlMalformed); // ids past 65535
    CHECK(signed_with([](auto& f) { put_be16(f, kFrameOverhead + 60, 2); }) == R::ControlMalformed); // unknown key flag
    CHECK(signed_with([](auto& f) { memset(f.data() + kFrameOverhead + 24, 0, 8); }) == R::ControlMalformed); // seq 0
    CHECK(signed_with([](auto& f) { tmtest::hdr_of(f)->msg_id = RTE_BE32(1); }) == R::ControlMalformed);
    CHECK(signed_with([](auto& f) { f[kFrameOverhead + 68] = 1; }) == R::ControlMalformed); // a rail the length lacks
    CHECK(signed_with([](auto& f) { f[kFrameOverhead + 69] = 1; }) == R::ControlMalformed); // reserved
    // Rails: a fourth, an address 0, a multicast MAC, a reserved word set.
    auto with_rail = [&](auto fn) {
        SessionMsg c = connect_msg();
        c.nrails = 1;
        c.rails[0] = {0x0A4F0101, {0x02, 1, 2, 3, 4, 5}};
        auto f = session_frame(pool.mp, c);
        fn(f);
        resign(f);
        return read_bytes(pool.mp, f).r;
    };
    CHECK(with_rail([](auto&) {}) == R::None);
    CHECK(with_rail([](auto& f) { f[kFrameOverhead + 68] = 4; }) == R::ControlMalformed);
    CHECK(with_rail([](auto& f) { put_be32(f, kFrameOverhead + 96, 0); }) == R::ControlMalformed);
    CHECK(with_rail([](auto& f) { f[kFrameOverhead + 100] = 0x01; }) == R::ControlMalformed);
    CHECK(with_rail([](auto& f) { put_be16(f, kFrameOverhead + 106, 1); }) == R::ControlMalformed);
    // A KEEPALIVE must name its destination.
    SessionMsg k;
    k.type = SessionType::Keepalive;
    k.src_session = 1;
    k.src_epoch = 1;
    k.dst_session = 0;
    k.dst_epoch = 0;
    CHECK(read_bytes(pool.mp, session_frame(pool.mp, k)).r == R::ControlMalformed);
    k.dst_session = 2;
    k.dst_epoch = 2;
    k.flags = kKeepaliveAsk | kKeepaliveAnswer; // both at once
    CHECK(read_bytes(pool.mp, session_frame(pool.mp, k)).r == R::ControlMalformed);
    k.flags = kKeepaliveAnswer;
    CHECK(read_bytes(pool.mp, session_frame(pool.mp, k)).r == R::None);
}
