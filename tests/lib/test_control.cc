#include <catch2/catch.hpp>

#include <cstring>

#include <rte_udp.h>

#include "fixtures.h"
#include "tailmark/control.h"
#include "tailmark/crc32c.h"
#include "tailmark/packet_parser.h"

using namespace tailmark;
using R = DropReason;

namespace {

constexpr uint32_t kHdrOff = kEthLen + kIpLen + kUdpLen; // tailmark header in the frame

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
void put_be16(std::vector<uint8_t>& f, size_t off, uint16_t x) {
    const rte_be16_t v = rte_cpu_to_be_16(x);
    memcpy(f.data() + off, &v, 2);
}
void put_be32(std::vector<uint8_t>& f, size_t off, uint32_t x) {
    const rte_be32_t v = rte_cpu_to_be_32(x);
    memcpy(f.data() + off, &v, 4);
}

// UDP payload length after the tailmark header, from the frame's UDP header.
uint32_t body_len_of(const std::vector<uint8_t>& f) {
    return be16_at(f, kEthLen + kIpLen + offsetof(rte_udp_hdr, dgram_len)) - kUdpLen - kHeaderLen;
}

// Recomputes the control CRC32C (header + body before the CRC), so a mutation
// reaches the checks behind the CRC.
void resign(std::vector<uint8_t>& f) {
    const uint32_t covered = kHeaderLen + body_len_of(f) - kControlCrcLen;
    put_be32(f, kHdrOff + covered, crc32c({f.data() + kHdrOff, covered}));
}

// Sets the body to `body` bytes (truncating or zero-extending), with pay_len,
// IPv4 and UDP lengths and the IPv4 checksum consistent, and re-signs it.
void set_body_len(std::vector<uint8_t>& f, uint32_t body) {
    f.resize(kFrameOverhead + body);
    tmtest::hdr_of(f)->pay_len = rte_cpu_to_be_16(static_cast<uint16_t>(body));
    tmtest::ip_of(f)->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(kIpLen + kUdpLen + kHeaderLen + body));
    reinterpret_cast<rte_udp_hdr*>(f.data() + kEthLen + kIpLen)->dgram_len =
        rte_cpu_to_be_16(static_cast<uint16_t>(kUdpLen + kHeaderLen + body));
    tmtest::fix_ip_checksum(f);
    if (body >= kControlCrcLen)
        resign(f);
}

// Two segments: bytes [0, split) and [split, end).
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
    R control = R::None; // parse_control (only when the frame was accepted)
    bool is_control = false;
    ParsedPacket p;
    Control c;
};

Result parse_mbuf(const rte_mbuf* m) {
    Result r;
    r.frame = parse_packet(m, ParserConfig{}, r.p);
    if (r.frame == R::None) {
        r.is_control = r.p.is_control();
        r.control = parse_control(m, r.p, r.c);
    }
    return r;
}

Result parse_bytes(rte_mempool* mp, const std::vector<uint8_t>& f) {
    rte_mbuf* m = tmtest::mbuf_of(mp, f);
    Result r = parse_mbuf(m);
    rte_pktmbuf_free(m);
    return r;
}

Control ack(uint32_t released, uint32_t acked, uint32_t epoch) {
    Control c;
    c.nack = false;
    c.released_upto = released;
    c.acked_upto = acked;
    c.epoch = epoch;
    return c;
}

Control nack(uint32_t msg_id, std::vector<NackRange> ranges, uint32_t released = 0x100,
             uint32_t acked = 0x104, uint32_t epoch = 0x7E57) {
    Control c;
    c.nack = true;
    c.released_upto = released;
    c.acked_upto = acked;
    c.epoch = epoch;
    c.n.msg_id = msg_id;
    c.n.nranges = static_cast<uint16_t>(ranges.size());
    for (size_t i = 0; i < ranges.size() && i < kMaxNackRanges; i++)
        c.n.ranges[i] = ranges[i];
    return c;
}

// Builds, flattens and frees a control packet.
std::vector<uint8_t> frame_of(rte_mempool* mp, const TxFlow& flow, const Control& c) {
    rte_mbuf* m = build_control(mp, flow, c);
    if (m == nullptr)
        throw std::runtime_error("build_control");
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

TEST_CASE("ACK round trip: cursors, epoch and flow come back exactly", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(0x1234, 0xC0FFEE, 16);
    Control c = ack(0x01020304, 0x05060708, 0x0A0B0C0D);
    c.n.nranges = 7; // ignored for an ACK: it carries no ranges

    rte_mbuf* m = build_control(pool.mp, flow, c);
    REQUIRE(m != nullptr);
    CHECK(rte_pktmbuf_pkt_len(m) == kFrameOverhead + kAckBodyLen);
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
    CHECK(r.p.body_len == kAckBodyLen);
    REQUIRE(r.control == R::None);
    CHECK_FALSE(r.c.nack);
    CHECK(r.c.released_upto == 0x01020304);
    CHECK(r.c.acked_upto == 0x05060708);
    CHECK(r.c.epoch == 0x0A0B0C0D);
    CHECK(r.c.n.flow == 0x1234);
    CHECK(r.c.n.msg_id == 0x05060708);
    CHECK(r.c.n.nranges == 0);

    // The body, byte for byte (control.h): big-endian cursors, then the CRC.
    auto f = tmtest::flat(m);
    CHECK(be32_at(f, kFrameOverhead + 0) == 0x01020304);
    CHECK(be32_at(f, kFrameOverhead + 4) == 0x05060708);
    CHECK(be32_at(f, kFrameOverhead + 8) == 0x0A0B0C0D);
    CHECK(be16_at(f, kFrameOverhead + 12) == 0);
    CHECK(be16_at(f, kFrameOverhead + 14) == 0);
    CHECK(be32_at(f, kFrameOverhead + 16) == crc32c({f.data() + kHdrOff, kHeaderLen + 16}));
    CHECK(tmtest::ip_of(f)->hdr_checksum != 0);
    CHECK(rte_ipv4_cksum(tmtest::ip_of(f)) == 0);
    rte_pktmbuf_free(m);
    CHECK(pool.avail() == start);
}

TEST_CASE("NACK round trip with 1 and kMaxNackRanges ranges", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(42, 0xABCDEF, 8);

    SECTION("one range, count 0: from `first` to the end of the group") {
        Control c = nack(0xDEADBEEF, {{17, 0}}, 0xDEADBEE0, 0xDEADBEE8, 3);
        rte_mbuf* m = build_control(pool.mp, flow, c);
        REQUIRE(m != nullptr);
        CHECK(rte_pktmbuf_pkt_len(m) == kFrameOverhead + kAckBodyLen + 4);
        Result r = parse_mbuf(m);
        REQUIRE(r.frame == R::None);
        CHECK(r.p.hdr.flags == Flags::Nack);
        CHECK(r.p.hdr.msg_id == 0xDEADBEEF); // the NACK's header names the message
        CHECK(r.p.hdr.flow == 42);
        REQUIRE(r.control == R::None);
        CHECK(r.c.nack);
        CHECK(r.c.released_upto == 0xDEADBEE0);
        CHECK(r.c.acked_upto == 0xDEADBEE8);
        CHECK(r.c.epoch == 3);
        CHECK(r.c.n.flow == 42);
        check_same_nack(r.c.n, c.n);
        auto f = tmtest::flat(m);
        CHECK(be16_at(f, kFrameOverhead + 12) == 1);
        CHECK(be16_at(f, kFrameOverhead + 16) == 17);
        CHECK(be16_at(f, kFrameOverhead + 18) == 0);
        CHECK(be32_at(f, kFrameOverhead + 20) == crc32c({f.data() + kHdrOff, kHeaderLen + 20}));
        rte_pktmbuf_free(m);
    }
    SECTION("kMaxNackRanges ranges, the last one to the end") {
        std::vector<NackRange> rs;
        for (uint16_t i = 0; i < kMaxNackRanges - 1; i++)
            rs.push_back({static_cast<uint16_t>(1 + 3 * i), static_cast<uint16_t>(1 + (i % 2))});
        rs.push_back({65534, 0});
        Control c = nack(7, rs, 1, 5, 0xFFFFFFFF);
        rte_mbuf* m = build_control(pool.mp, flow, c);
        REQUIRE(m != nullptr);
        CHECK(rte_pktmbuf_pkt_len(m) == kFrameOverhead + kMaxControlBodyLen);
        Result r = parse_mbuf(m);
        REQUIRE(r.frame == R::None);
        CHECK(r.p.body_len == kMaxControlBodyLen);
        REQUIRE(r.control == R::None);
        CHECK(r.c.nack);
        CHECK(r.c.released_upto == 1);
        CHECK(r.c.acked_upto == 5);
        CHECK(r.c.epoch == 0xFFFFFFFF);
        CHECK(r.c.n.flow == 42);
        CHECK(r.c.n.nranges == kMaxNackRanges);
        check_same_nack(r.c.n, c.n);
        CHECK(r.c.n.ranges[0].first == 1);
        CHECK(r.c.n.ranges[0].count == 1);
        CHECK(r.c.n.ranges[30].first == 91);
        CHECK(r.c.n.ranges[30].count == 1);
        CHECK(r.c.n.ranges[31].first == 65534);
        CHECK(r.c.n.ranges[31].count == 0);
        rte_mbuf_sanity_check(m, 1);
        rte_pktmbuf_free(m);
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
            CHECK(r.c.epoch == 0x7E57);
            check_same_nack(r.c.n, c.n);
            rte_pktmbuf_free(m);
        }
    }
    CHECK(pool.avail() == start);
}

TEST_CASE("every single-bit flip in the tailmark header and body is rejected", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(5, 1, 8);
    for (const Control& c : {ack(10, 12, 2), nack(12, {{1, 1}, {3, 2}, {9, 0}}, 10, 12, 2)}) {
        INFO((c.nack ? "NACK" : "ACK"));
        const auto base = frame_of(pool.mp, flow, c);
        REQUIRE(parse_bytes(pool.mp, base).control == R::None);
        uint32_t bad_crc = 0, malformed = 0, frame_drop = 0;
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
                // Accepted as a frame (control, or a data packet when the ACK /
                // NACK bit went): the control decoder must refuse it.
                CHECK((r.control == R::ControlBadCrc || r.control == R::ControlMalformed));
                bad_crc += r.control == R::ControlBadCrc;
                malformed += r.control == R::ControlMalformed;
            }
        }
        CHECK(bad_crc + malformed + frame_drop == 8 * (base.size() - kHdrOff));
        CHECK(bad_crc > 0);
        CHECK(frame_drop > 0); // the version byte, unknown flag bits
    }
    CHECK(pool.avail() == start);
}

TEST_CASE("a body length inconsistent with nranges is malformed", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(6, 1, 8);
    const auto base = frame_of(pool.mp, flow, nack(4, {{1, 1}, {3, 0}}, 2, 4, 1));
    REQUIRE(body_len_of(base) == kAckBodyLen + 8);
    REQUIRE(parse_bytes(pool.mp, base).control == R::None);

    // nranges says 1 or 3, the body holds 2 (CRC valid).
    for (uint16_t n : {uint16_t(1), uint16_t(3), uint16_t(kMaxNackRanges), uint16_t(0xFFFF)}) {
        INFO("nranges " << n);
        auto f = base;
        put_be16(f, kFrameOverhead + 12, n);
        resign(f);
        Result r = parse_bytes(pool.mp, f);
        REQUIRE(r.frame == R::None);
        CHECK(r.control == R::ControlMalformed);
    }
    // nranges 2, the body cut to one range, or grown by one (CRC valid).
    for (uint32_t body : {kAckBodyLen + 4, kAckBodyLen + 12, kAckBodyLen + 2}) {
        INFO("body " << body);
        auto f = base;
        set_body_len(f, body);
        Result r = parse_bytes(pool.mp, f);
        REQUIRE(r.frame == R::None);
        CHECK(r.control == R::ControlMalformed);
    }
    // Shorter than the fixed part plus CRC, longer than kMaxNackRanges ranges.
    for (uint32_t body : {0u, 4u, kAckBodyLen - 1, kMaxControlBodyLen + 4}) {
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
        Result r = parse_bytes(pool.mp, f);
        REQUIRE(r.frame == R::None);
        CHECK(r.control == R::ControlMalformed);
    }
    // A NACK with no range, an ACK with one.
    {
        auto f = frame_of(pool.mp, flow, nack(4, {{1, 1}}));
        put_be16(f, kFrameOverhead + 12, 0);
        set_body_len(f, kAckBodyLen);
        CHECK(parse_bytes(pool.mp, f).control == R::ControlMalformed);
        auto a = frame_of(pool.mp, flow, ack(1, 2, 3));
        set_body_len(a, kAckBodyLen + 4);
        put_be16(a, kFrameOverhead + 12, 1);
        resign(a);
        CHECK(parse_bytes(pool.mp, a).control == R::ControlMalformed);
    }
    CHECK(pool.avail() == start);
}

TEST_CASE("epoch 0, ACK+NACK, RETX and non-zero fixed fields are refused", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(8, 1, 8);

    // Epoch 0 is never a receiver's incarnation.
    for (const Control& c : {ack(1, 2, 0), nack(2, {{0, 0}}, 1, 2, 0)}) {
        Result r = parse_bytes(pool.mp, frame_of(pool.mp, flow, c));
        REQUIRE(r.frame == R::None);
        CHECK(r.control == R::ControlMalformed);
    }

    const auto a = frame_of(pool.mp, flow, ack(1, 2, 3));
    const auto n = frame_of(pool.mp, flow, nack(2, {{0, 1}}, 1, 2, 3));
    auto with = [&](const std::vector<uint8_t>& base, auto fn) {
        auto f = base;
        fn(f);
        resign(f);
        return parse_bytes(pool.mp, f);
    };
    auto flags = [](Flags fl) {
        return [fl](std::vector<uint8_t>& f) { tmtest::hdr_of(f)->flags = static_cast<uint8_t>(fl); };
    };
    for (const auto* base : {&a, &n}) {
        // Both kinds at once, or a "retransmitted" control packet.
        Result both = with(*base, flags(Flags::Ack | Flags::Nack));
        REQUIRE(both.frame == R::None);
        CHECK(both.control == R::ControlMalformed);
        Result retx = with(*base, flags((base == &a ? Flags::Ack : Flags::Nack) | Flags::Retx));
        REQUIRE(retx.frame == R::None);
        CHECK(retx.control == R::ControlMalformed);
        // LAST with a control bit: the parser refuses it already.
        CHECK(with(*base, flags((base == &a ? Flags::Ack : Flags::Nack) | Flags::Last)).frame == R::BadFlags);
        // The reserved u16, pkt_idx and offset must be 0.
        CHECK(with(*base, [](auto& f) { put_be16(f, kFrameOverhead + 14, 1); }).control == R::ControlMalformed);
        CHECK(with(*base, [](auto& f) { tmtest::hdr_of(f)->pkt_idx = RTE_BE16(1); }).control ==
              R::ControlMalformed);
        CHECK(with(*base, [](auto& f) { tmtest::hdr_of(f)->offset = RTE_BE32(4); }).control ==
              R::ControlMalformed);
    }
    // An ACK's header msg_id is its acked_upto.
    CHECK(with(a, [](auto& f) { tmtest::hdr_of(f)->msg_id = RTE_BE32(3); }).control == R::ControlMalformed);
    // ...a NACK's is the message it names (free), re-signed it is accepted.
    Result other = with(n, [](auto& f) { tmtest::hdr_of(f)->msg_id = RTE_BE32(77); });
    CHECK(other.control == R::None);
    CHECK(other.c.n.msg_id == 77);
    CHECK(pool.avail() == start);
}

TEST_CASE("build_control refuses more than kMaxNackRanges ranges", "[control]") {
    tmtest::Pool pool(1023);
    const unsigned start = pool.avail();
    TxFlow flow = tmtest::make_flow(9, 1, 8);
    Control c = nack(1, {{0, 0}});
    for (uint16_t nr : {uint16_t(kMaxNackRanges + 1), uint16_t(1000), uint16_t(0xFFFF)}) {
        c.n.nranges = nr;
        CHECK(build_control(pool.mp, flow, c) == nullptr);
        CHECK(pool.avail() == start);
    }
    c.n.nranges = kMaxNackRanges;
    rte_mbuf* m = build_control(pool.mp, flow, c);
    CHECK(m != nullptr);
    rte_pktmbuf_free(m);

    // An empty pool: nullptr, nothing leaked.
    tmtest::Pool tiny(1);
    rte_mbuf* hold = rte_pktmbuf_alloc(tiny.mp);
    REQUIRE(hold != nullptr);
    CHECK(build_control(tiny.mp, flow, ack(1, 1, 1)) == nullptr);
    rte_pktmbuf_free(hold);
    CHECK(tiny.avail() == 1);
    CHECK(pool.avail() == start);
}
