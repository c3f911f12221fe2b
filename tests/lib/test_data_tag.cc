// Version 2 (wire-format.md): a keyed tag on every data packet. The sender's
// packets carry it after the header (every build path: one mbuf, chained
// copies, zero copy), computed here independently from the frame's bytes;
// a receiver's version 2 flow places only packets whose tag verifies, and
// learns nothing (echo, completion) from any other; the payload, not under
// the tag, is held to the tagged trailer's CRC32C.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <rte_cycles.h>

#include "fixtures.h"
#include "tailmark/crc32c.h"
#include "tailmark/data_tag.h"
#include "tailmark/rx_placer.h"

using namespace tailmark;
using R = DropReason;

namespace {

const SipKey kTagKey{0x1122334455667788ull, 0x99AABBCCDDEEFF00ull};
const SipKey kWrongKey{0x1122334455667788ull, 0x99AABBCCDDEEFF01ull}; // one bit off
constexpr uint32_t kMtu = 1500;
constexpr uint32_t kHdr = kEthLen + kIpLen + kUdpLen; // the tailmark header in the frame

uint16_t next_flow() {
    static uint16_t id = 900;
    return id++;
}

TxFlow v2_flow(uint16_t id, uint32_t key, uint32_t ring, const SipKey& tag_key = kTagKey) {
    TxFlow f;
    REQUIRE(TxFlow::make(f, id, key, ring, kMtu, tmtest::test_addr(), kVersion2, tag_key));
    return f;
}

// Every packet of a message of `data`, built by a marker of `mode` (chained:
// the message as an mbuf chain of 1000-byte segments).
std::vector<rte_mbuf*> build_all(rte_mempool* mp, const TxFlow& flow, uint32_t msg_id, const std::vector<uint8_t>& data,
                                 PayloadMode mode, bool chained, rte_mbuf_ext_shared_info* sh) {
    TxMarker tx(mp, mode);
    TxMessage m;
    m.msg_id = msg_id;
    rte_mbuf* chain = nullptr;
    if (chained) {
        for (size_t off = 0; off < data.size(); off += 1000) {
            const size_t n = std::min<size_t>(1000, data.size() - off);
            rte_mbuf* s = tmtest::mbuf_of(mp, std::vector<uint8_t>(data.begin() + off, data.begin() + off + n));
            if (chain == nullptr)
                chain = s;
            else
                REQUIRE(rte_pktmbuf_chain(chain, s) == 0);
        }
        m.chain = chain;
    } else {
        m.bytes = data;
        m.shinfo = sh;
    }
    REQUIRE(tx.prepare(flow, m));
    std::vector<rte_mbuf*> out(m.plan.pkt_count);
    for (uint32_t first = 0; first < m.plan.pkt_count;) {
        const uint32_t n = std::min<uint32_t>(TxMarker::kMaxBurst, m.plan.pkt_count - first);
        REQUIRE(tx.build(flow, m, first, n, out.data() + first) == static_cast<int>(n));
        first += n;
    }
    if (chain != nullptr)
        rte_pktmbuf_free(chain); // the packets hold their own references
    return out;
}

// The tag a frame must carry, computed from its bytes alone.
uint64_t expected_tag(const std::vector<uint8_t>& f, const SipKey& key) {
    const uint16_t udp_len = static_cast<uint16_t>(f[kEthLen + kIpLen + 4] << 8 | f[kEthLen + kIpLen + 5]);
    const bool last = (f[kHdr + 1] & static_cast<uint8_t>(Flags::Last)) != 0;
    std::vector<uint8_t> in(f.begin() + kHdr, f.begin() + kHdr + kHeaderLen);
    if (last) {
        const size_t end = kEthLen + kIpLen + udp_len;
        in.insert(in.end(), f.begin() + static_cast<long>(end - kTrailerLen), f.begin() + static_cast<long>(end));
    }
    return siphash24(key, in);
}

uint64_t be64(const std::vector<uint8_t>& f, size_t at) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++)
        v = v << 8 | f[at + i];
    return v;
}

struct Held {
    rte_mbuf_ext_shared_info sh{};
    Held() {
        sh.free_cb = [](void*, void*) {};
        rte_mbuf_ext_refcnt_set(&sh, 1);
    }
};

} // namespace

TEST_CASE("version 2: every build path tags every packet, the tag after the header, the payload after it",
          "[datatag]") {
    tmtest::Pool pool(16383);
    const TxFlow flow = v2_flow(next_flow(), 0xC0FFEE, 16);
    CHECK(flow.stride == kMtu - kIpLen - kUdpLen - kHeaderLen - kTagLen); // 1448: the tag takes 8 bytes of it
    CHECK(flow.overhead() == kFrameOverhead + kTagLen);
    Held held;
    struct Way {
        const char* name;
        PayloadMode mode;
        bool chained;
    };
    for (const Way w : {Way{"copy, one mbuf", PayloadMode::Copy, false}, Way{"copy, chained", PayloadMode::Copy, true},
                        Way{"zero copy", PayloadMode::ZeroCopy, false}, Way{"zero copy, chained", PayloadMode::ZeroCopy, true}}) {
        for (const size_t len : {size_t(0), size_t(100), size_t(1448), size_t(1448 * 3 - 20), size_t(20000)}) {
            INFO(w.name << ", " << len << " bytes");
            const auto data = tmtest::pattern(len, static_cast<uint32_t>(len + 1));
            auto pkts = build_all(pool.mp, flow, 7, data, w.mode, w.chained, &held.sh);
            const GroupPlan plan = plan_group(len, flow.stride);
            REQUIRE(pkts.size() == plan.pkt_count);
            std::vector<uint8_t> got(len);
            for (uint32_t i = 0; i < pkts.size(); i++) {
                const auto f = tmtest::flat(pkts[i]);
                INFO("packet " << i);
                CHECK(f[kHdr] == kVersion2);
                CHECK(be64(f, kHdr + kHeaderLen) == expected_tag(f, kTagKey));
                ParsedPacket p;
                REQUIRE(parse_packet(pkts[i], ParserConfig{}, p) == R::None);
                CHECK(p.hdr.version == kVersion2);
                CHECK(p.tag == expected_tag(f, kTagKey));
                CHECK(p.payload_off == kFrameOverhead + kTagLen);
                CHECK(p.hdr.pay_len == plan.len_of(i));
                if (p.hdr.pay_len != 0) // a 0-byte message: got.data() is null
                    std::memcpy(got.data() + p.hdr.offset, f.data() + p.payload_off, p.hdr.pay_len);
                if (p.is_last())
                    CHECK(p.trailer.crc32c == crc32c(data));
            }
            CHECK(got == data);
            tmtest::free_all(pkts);
        }
    }
    CHECK(pool.avail() == 16383);
}

TEST_CASE("version 2: a flow places only packets whose tag verifies, and learns nothing from the others (issue 35)",
          "[datatag]") {
    tmtest::Pool pool(16383);
    const uint16_t id = next_flow();
    const uint32_t key = 0x5EC2E7;
    const TxFlow good = v2_flow(id, key, 8);
    auto ring = tmtest::make_ring(id, 8, 64 * 1024);
    REQUIRE(ring);
    RxPlacer placer{ParserConfig{}, SOCKET_ID_ANY};
    REQUIRE(placer.add_flow(id, ring.get(), key, good.stride, FlowAuth{kTagKey, kVersion2}));
    auto feed = [&](const std::vector<uint8_t>& f) {
        rte_mbuf* m = tmtest::mbuf_of(pool.mp, f);
        const R r = placer.process(m, rte_rdtsc());
        rte_pktmbuf_free(m);
        return r;
    };
    auto frames = [&](const TxFlow& fl, uint32_t msg_id, const std::vector<uint8_t>& data) {
        auto pkts = build_all(pool.mp, fl, msg_id, data, PayloadMode::Copy, false, nullptr);
        std::vector<std::vector<uint8_t>> v;
        for (rte_mbuf* m : pkts)
            v.push_back(tmtest::flat(m));
        tmtest::free_all(pkts);
        return v;
    };
    const auto data = tmtest::pattern(5000, 3); // 4 packets
    const auto genuine = frames(good, 0, data);
    REQUIRE(genuine.size() == 4);

    // What a forger without the key can send: the flow's version 1 packets
    // (the old format: no tag), version 2 packets tagged under another key,
    // and the genuine packets with a header or trailer field changed (the
    // tag left as it was, or zeroed).
    TxFlow v1;
    REQUIRE(TxFlow::make(v1, id, key, 8, kMtu, tmtest::test_addr()));
    uint64_t bad_version = 0, bad_tag = 0;
    for (const auto& f : frames(v1, 0, data)) {
        CHECK(feed(f) == R::BadVersion);
        bad_version++;
    }
    for (const auto& f : frames(v2_flow(id, key, 8, kWrongKey), 0, data)) {
        CHECK(feed(f) == R::DataBadTag);
        bad_tag++;
    }
    for (size_t i = 0; i < genuine.size(); i++) {
        // The low byte of msg_id, pkt_idx and offset; the tag zeroed; on the
        // LAST, the trailer's CRC32C, msg_len and key. What the parser can
        // judge from the frame alone (a LAST's flag, index, offset) it
        // refuses first; everything else meets the tag.
        const size_t fields[] = {kHdr + 7, kHdr + 9, kHdr + 15};
        for (size_t at : fields) {
            auto f = genuine[i];
            f[at] ^= 0x01;
            const R r = feed(f);
            INFO("packet " << i << " field at " << at << ": " << to_string(r));
            CHECK((r == R::DataBadTag || r == R::BadFlag || r == R::BadOffset || r == R::BadPktCount));
            bad_tag += r == R::DataBadTag;
        }
        auto z = genuine[i];
        std::memset(z.data() + kHdr + kHeaderLen, 0, kTagLen);
        CHECK(feed(z) == R::DataBadTag);
        bad_tag++;
        if (i + 1 == genuine.size()) { // the LAST: its trailer is under the tag too
            const size_t end = genuine[i].size() - kTrailerLen;
            for (size_t off : {size_t(24), size_t(16), size_t(12)}) { // crc32c, msg_len, key
                auto t = genuine[i];
                t[end + off + 3] ^= 0x01;
                const R r = feed(t);
                INFO("trailer byte " << off << ": " << to_string(r));
                CHECK((r == R::DataBadTag || r == R::BadOffset));
                bad_tag += r == R::DataBadTag;
            }
        }
    }
    CHECK(placer.counters().placed == 0);
    CHECK(placer.counters().completions == 0);
    CHECK(placer.counters().drops[index(R::BadVersion)] == bad_version);
    CHECK(placer.counters().drops[index(R::DataBadTag)] == bad_tag);
    CHECK(bad_tag >= genuine.size() * 2);
    uint16_t stamp = 0;
    uint64_t arrived = 0;
    CHECK_FALSE(placer.echo_of(id, stamp, arrived)); // nothing learnt from any of them
    CHECK_FALSE(ring->poll(0));

    // The genuine packets: placed, the message completes once, exact.
    for (const auto& f : genuine)
        CHECK(feed(f) == R::None);
    REQUIRE(ring->poll(0) != nullptr);
    auto got = ring->message(ring->poll(0));
    CHECK(std::vector<uint8_t>(got.begin(), got.end()) == data);
    CHECK(placer.counters().placed == 4);
    CHECK(placer.counters().completions == 1);
    CHECK(placer.echo_of(id, stamp, arrived));

    // The payload is not under the tag, but the trailer's CRC32C is: a
    // changed payload byte in a genuine packet of the next message places,
    // and the message is discarded at its LAST (crc_mismatch), never
    // completed with those bytes.
    auto next = frames(good, 1, data);
    next[1][kFrameOverhead + kTagLen + 10] ^= 0x40;
    for (const auto& f : next)
        feed(f);
    CHECK(placer.counters().drops[index(R::CrcMismatch)] == 1);
    CHECK_FALSE(ring->poll(1));
    CHECK(placer.counters().completions == 1);
}

namespace {

const uint8_t kAuthH[16] = {0x25, 0x62, 0x93, 0x47, 0x58, 0x92, 0x42, 0x76, 0x1d, 0x31, 0xf8, 0x26, 0xba, 0x4b, 0x75, 0x7b};

// --data-auth's tag, from a frame's bytes alone: SipHash over the header,
// the LAST's trailer and the POLYVAL (MAC form) of the payload, little endian.
uint64_t expected_auth_tag(const std::vector<uint8_t>& f, const SipKey& key) {
    const uint16_t udp_len = static_cast<uint16_t>(f[kEthLen + kIpLen + 4] << 8 | f[kEthLen + kIpLen + 5]);
    const bool last = (f[kHdr + 1] & static_cast<uint8_t>(Flags::Last)) != 0;
    const size_t end = kEthLen + kIpLen + udp_len;
    const size_t pay = kHdr + kHeaderLen + kTagLen;
    const size_t pay_end = last ? end - kTrailerLen : end;
    std::vector<uint8_t> in(f.begin() + kHdr, f.begin() + kHdr + kHeaderLen);
    if (last)
        in.insert(in.end(), f.begin() + static_cast<long>(end - kTrailerLen), f.begin() + static_cast<long>(end));
    PolyvalKey pk;
    polyval_key(pk, kAuthH);
    uint64_t poly[2];
    polyval_mac(pk, f.data() + pay, pay_end - pay, poly);
    for (int w = 0; w < 2; w++)
        for (int b = 0; b < 8; b++)
            in.push_back(static_cast<uint8_t>(poly[w] >> (8 * b)));
    return siphash24(key, in);
}

} // namespace

TEST_CASE("--data-auth: every build path tags header, trailer and payload; a changed payload byte places nothing",
          "[datatag]") {
    tmtest::Pool pool(16383);
    const uint16_t id = next_flow();
    const uint32_t key = 0xA07;
    TxFlow flow;
    REQUIRE(TxFlow::make(flow, id, key, 8, kMtu, tmtest::test_addr(), kVersion2, kTagKey, kAuthH));
    CHECK(flow.data_auth);
    CHECK(flow.stride == 1448); // the same framing as version 2 without it
    Held held;
    for (const PayloadMode mode : {PayloadMode::Copy, PayloadMode::ZeroCopy}) {
        for (const bool chained : {false, true}) {
            for (const size_t len : {size_t(0), size_t(100), size_t(1448 * 3 - 20), size_t(20000)}) {
                INFO((mode == PayloadMode::Copy ? "copy" : "zero copy") << (chained ? ", chained, " : ", ") << len);
                const auto data = tmtest::pattern(len, static_cast<uint32_t>(len + 5));
                auto pkts = build_all(pool.mp, flow, 3, data, mode, chained, &held.sh);
                for (uint32_t i = 0; i < pkts.size(); i++) {
                    const auto f = tmtest::flat(pkts[i]);
                    INFO("packet " << i);
                    CHECK(be64(f, kHdr + kHeaderLen) == expected_auth_tag(f, kTagKey));
                    CHECK(be64(f, kHdr + kHeaderLen) != expected_tag(f, kTagKey));
                }
                tmtest::free_all(pkts);
            }
        }
    }

    // The placer: a flow with --data-auth places the genuine packets; one
    // payload bit changed in transit is refused at its packet (data_bad_tag),
    // before a byte is placed, where without --data-auth only the message's
    // CRC32C would catch it (and a rewrite that keeps the CRC not at all).
    auto ring = tmtest::make_ring(id, 8, 64 * 1024);
    REQUIRE(ring);
    RxPlacer placer{ParserConfig{}, SOCKET_ID_ANY};
    FlowAuth auth{kTagKey, kVersion2};
    auth.data_auth = true;
    std::memcpy(auth.auth_h, kAuthH, 16);
    REQUIRE(placer.add_flow(id, ring.get(), key, flow.stride, auth));
    auto feed = [&](const std::vector<uint8_t>& f) {
        rte_mbuf* m = tmtest::mbuf_of(pool.mp, f);
        const R r = placer.process(m, rte_rdtsc());
        rte_pktmbuf_free(m);
        return r;
    };
    const auto data = tmtest::pattern(5000, 9); // 4 packets
    auto pkts = build_all(pool.mp, flow, 0, data, PayloadMode::Copy, false, nullptr);
    std::vector<std::vector<uint8_t>> genuine;
    for (rte_mbuf* m : pkts)
        genuine.push_back(tmtest::flat(m));
    tmtest::free_all(pkts);
    REQUIRE(genuine.size() == 4);
    uint64_t bad = 0;
    for (size_t i = 0; i < genuine.size(); i++) {
        for (size_t at : {size_t(0), size_t(17), genuine[i].size() - kHdr - kHeaderLen - kTagLen -
                                                    (i + 1 == genuine.size() ? kTrailerLen : 0) - 1}) {
            auto f = genuine[i];
            f[kHdr + kHeaderLen + kTagLen + at] ^= 0x10; // a payload byte: first, inside, last
            INFO("packet " << i << " payload byte " << at);
            CHECK(feed(f) == R::DataBadTag);
            bad++;
        }
    }
    // The same packets tagged without --data-auth (a peer that did not agree to it).
    TxFlow plain = v2_flow(id, key, 8);
    auto plain_pkts = build_all(pool.mp, plain, 0, data, PayloadMode::Copy, false, nullptr);
    for (rte_mbuf* m : plain_pkts) {
        CHECK(feed(tmtest::flat(m)) == R::DataBadTag);
        bad++;
    }
    tmtest::free_all(plain_pkts);
    CHECK(placer.counters().placed == 0);
    CHECK(placer.counters().drops[index(R::DataBadTag)] == bad);
    CHECK(placer.counters().drops[index(R::CrcMismatch)] == 0);
    for (const auto& f : genuine)
        CHECK(feed(f) == R::None);
    REQUIRE(ring->poll(0) != nullptr);
    auto got = ring->message(ring->poll(0));
    CHECK(std::vector<uint8_t>(got.begin(), got.end()) == data);
    CHECK(placer.counters().placed == 4);
    CHECK(pool.avail() == 16383);
}
