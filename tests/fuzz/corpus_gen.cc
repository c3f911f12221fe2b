// The seed corpus (fuzz_rx_replay --write-corpus DIR): valid messages built
// with tailmark::TxMarker, and one input per malformed or hostile case, made
// by mutating valid frames. Deterministic: the same binary writes the same
// files. Each seed is run once as it is written, and must complete exactly the
// messages it says and count the drop reasons it names, and no other.
// `fuzz_rx_replay --check-seeds DIR` (the test fuzz_seeds) runs every seed
// the same way and checks that DIR holds exactly the bytes generated.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include <rte_ip.h>
#include <rte_mbuf.h>

#include "fuzz_rx.h"
#include "seed_files.h"
#include "tailmark/tx_marker.h"
#include "tailmark/wire.h"

using namespace tailmark;

namespace tmfuzz {
namespace {

using Bytes = std::vector<uint8_t>;
using R = DropReason;

constexpr size_t IP = kEthLen, UDP = kEthLen + kIpLen, HDR = UDP + kUdpLen, PAY = kFrameOverhead;
// Trailer fields, from the trailer's start.
constexpr size_t T_FLAG = 0, T_SLOT = 8, T_KEY = 12, T_LEN = 16, T_COUNT = 20, T_RES = 22, T_MAGIC = 28;
// Header fields, from the header's start.
constexpr size_t H_VER = 0, H_FLAGS = 1, H_FLOW = 2, H_IDX = 8, H_OFF = 12;

[[noreturn]] void die(const char* what) {
    fprintf(stderr, "corpus generator: %s\n", what);
    exit(2);
}

Bytes pattern(size_t n, uint32_t seed) {
    Bytes v(n);
    uint32_t x = seed * 2654435761u + 1;
    for (auto& b : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<uint8_t>(x);
    }
    return v;
}

uint16_t get16(const Bytes& f, size_t o) { return static_cast<uint16_t>(f[o] << 8 | f[o + 1]); }
void set16(Bytes& f, size_t o, uint32_t v) {
    f[o] = static_cast<uint8_t>(v >> 8);
    f[o + 1] = static_cast<uint8_t>(v);
}
void set32(Bytes& f, size_t o, uint32_t v) {
    for (int i = 0; i < 4; i++)
        f[o + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void set64(Bytes& f, size_t o, uint64_t v) {
    set32(f, o, static_cast<uint32_t>(v >> 32));
    set32(f, o + 4, static_cast<uint32_t>(v));
}

size_t trailer(const Bytes& f) { return UDP + get16(f, UDP + 4) - kTrailerLen; }

void ipck(Bytes& f) {
    const size_t ihl = (f[IP] & 0x0F) * 4u;
    f[IP + 10] = f[IP + 11] = 0;
    uint16_t ck = static_cast<uint16_t>(~rte_raw_cksum(&f[IP], ihl));
    memcpy(&f[IP + 10], &ck, 2);
}

// IP and UDP lengths and pay_len from the frame size, then the IP checksum.
void fix_lens(Bytes& f) {
    set16(f, IP + 2, f.size() - kEthLen);
    set16(f, UDP + 4, f.size() - UDP);
    const bool last = f[HDR + H_FLAGS] & static_cast<uint8_t>(Flags::Last);
    set16(f, HDR + 10, f.size() - PAY - (last ? kTrailerLen : 0));
    ipck(f);
}

const FlowSpec* spec_of(uint16_t id) {
    for (const FlowSpec& s : kFlows)
        if (s.id == id)
            return &s;
    return nullptr;
}

TxFlow txflow(uint16_t id, uint32_t mtu = 0, uint16_t port = kDefaultUdpPort) {
    const FlowSpec* s = spec_of(id);
    if (mtu == 0)
        mtu = s ? s->mtu : 1500;
    Addressing a;
    a.src_mac = {{0x02, 0, 0, 0, 0, 1}};
    a.dst_mac = {{0x02, 0, 0, 0, 0, 2}};
    a.src_ip = RTE_IPV4(198, 18, 0, 1);
    a.dst_ip = RTE_IPV4(198, 18, 0, 2);
    a.udp_port = port;
    TxFlow f;
    if (!TxFlow::make(f, id, s ? s->key : 0x0BADC0DE, s ? s->ring_size : 4, mtu, a))
        die("TxFlow::make");
    return f;
}

Bytes flat(const rte_mbuf* m) {
    Bytes v(rte_pktmbuf_pkt_len(m));
    const void* p = rte_pktmbuf_read(m, 0, static_cast<uint32_t>(v.size()), v.data());
    if (p == nullptr)
        die("rte_pktmbuf_read");
    if (p != v.data())
        memcpy(v.data(), p, v.size());
    return v;
}

// Every packet of a message, as flat frames, in group order.
std::vector<Bytes> group(const TxFlow& f, uint32_t msg_id, const Bytes& data) {
    TxMarker tx(pool(), PayloadMode::Copy);
    TxMessage m;
    m.msg_id = msg_id;
    m.bytes = data;
    if (!tx.prepare(f, m))
        die("prepare");
    std::vector<Bytes> out;
    for (uint32_t first = 0; first < m.plan.pkt_count;) {
        uint32_t n = std::min<uint32_t>(TxMarker::kMaxBurst, m.plan.pkt_count - first);
        rte_mbuf* mb[TxMarker::kMaxBurst];
        if (tx.build(f, m, first, n, mb) != static_cast<int>(n))
            die("build");
        for (uint32_t i = 0; i < n; i++) {
            out.push_back(flat(mb[i]));
            rte_pktmbuf_free(mb[i]);
        }
        first += n;
    }
    return out;
}

Bytes single(const TxFlow& f, uint32_t msg_id, const Bytes& data) {
    auto g = group(f, msg_id, data);
    if (g.size() != 1)
        die("not a single-packet message");
    return g[0];
}

struct In {
    Bytes b;
    explicit In(uint8_t cfg = 0) { b.push_back(cfg); }
    In& add(const Bytes& f, uint8_t c = 0, uint16_t len_flags = 0) {
        if (f.size() > kLenMask)
            die("frame too long for a record");
        b.push_back(c);
        const uint16_t l = static_cast<uint16_t>(f.size() | len_flags);
        b.push_back(static_cast<uint8_t>(l >> 8));
        b.push_back(static_cast<uint8_t>(l));
        b.insert(b.end(), f.begin(), f.end());
        return *this;
    }
    In& add(const std::vector<Bytes>& g, std::initializer_list<size_t> order, uint8_t c = 0) {
        for (size_t i : order)
            add(g.at(i), c);
        return *this;
    }
};

struct Seed {
    std::string name;
    Bytes input;
    uint64_t completions;
    std::vector<R> drops;         // each counted at least once, and no other reason
    int64_t packet_completions = -1;
    uint64_t discarded = 0;       // placed packets thrown away by a contradicting LAST (RxCounters)
};

// The flows' standard messages. 3212 bytes at MTU 1500 (stride 1456) is a
// 3-packet group: 1456 + 1456 + 300 with the trailer.
const Bytes kSmall = pattern(200, 1);
const Bytes kThree = pattern(3212, 2);

// Valid traffic on another flow after a malformed frame: it must complete.
In& and_valid(In& in) { return in.add(single(txflow(3), 0, pattern(100, 99))); }

// One malformed single-packet frame of flow 0, msg 0, then valid traffic.
Seed bad(const std::string& name, R reason, void (*mutate)(Bytes&), uint8_t cfg = 0,
         uint8_t c = 0) {
    Bytes f = single(txflow(0), 0, kSmall);
    mutate(f);
    In in(cfg);
    in.add(f, c);
    and_valid(in);
    return {name, in.b, 1, {reason}};
}

std::vector<Seed> seeds() {
    std::vector<Seed> s;
    const TxFlow f0 = txflow(0), f1 = txflow(1), f2 = txflow(2), f3 = txflow(3), fx = txflow(65535);

    // ---- valid traffic ----
    s.push_back({"valid_single_flow0", In().add(single(f0, 0, pattern(500, 10))).b, 1, {}});
    s.push_back({"valid_single_flow1", In().add(single(f1, 0, pattern(1000, 11))).b, 1, {}});
    s.push_back({"valid_single_flow2", In().add(single(f2, 0, pattern(900, 12))).b, 1, {}});
    s.push_back({"valid_single_flow3", In().add(single(f3, 0, pattern(1400, 13))).b, 1, {}});
    s.push_back({"valid_single_flow65535", In().add(single(fx, 0, pattern(32, 14))).b, 1, {}});
    s.push_back({"valid_empty_message", In().add(single(f0, 0, {})).b, 1, {}});
    {
        auto g = group(f0, 0, kThree);
        s.push_back({"valid_3pkt_in_order", In().add(g, {0, 1, 2}).b, 1, {}});
        s.push_back({"valid_3pkt_reversed", In().add(g, {2, 1, 0}).b, 1, {}});
        s.push_back({"valid_3pkt_duplicates", In().add(g, {1, 1, 0, 1, 2, 0, 2}).b, 1,
                     {R::Duplicate, R::AlreadyCompleted}});
        s.push_back({"valid_3pkt_seg64", In().add(g, {0, 1, 2}, ctl(0, kOlNone, kSeg64)).b, 1, {}});
        s.push_back({"valid_3pkt_segtiny", In().add(g, {2, 0, 1}, ctl(0, kOlNone, kSegTiny)).b, 1, {}});
        s.push_back({"valid_3pkt_seghalves", In().add(g, {1, 2, 0}, ctl(0, kOlNone, kSegHalves)).b, 1, {}});
        s.push_back({"valid_3pkt_offload_good", In().add(g, {0, 2, 1}, ctl(0, kOlGood)).b, 1, {}});
        s.push_back({"valid_3pkt_packet_mode", In(kCfgPacketMode).add(g, {0, 1, 2}).b, 0, {}, 3});
        s.push_back({"valid_3pkt_streamed", In(kCfgStream).add(g, {0, 1, 2}).b, 1, {}});
        s.push_back({"valid_3pkt_streamed_reversed_segtiny",
                     In(kCfgStream).add(g, {2, 1, 0}, ctl(0, kOlNone, kSegTiny)).b, 1, {}});
        In burst;
        for (size_t i : {2, 0, 1})
            burst.add(g[i], 0, kLenBurst);
        s.push_back({"valid_3pkt_rx_burst", burst.b, 1, {}});
    }
    {
        auto g = group(f0, 0, pattern(2912, 3)); // two full packets, the trailer alone
        s.push_back({"valid_exact_stride_empty_last", In().add(g, {2, 0, 1}).b, 1, {}});
        auto h = group(f0, 0, pattern(1456 + 1440, 4)); // tail leaves no room: tail, then empty LAST
        s.push_back({"valid_tail_then_empty_last", In().add(h, {0, 2, 1}).b, 1, {}});
    }
    {
        In in;
        for (uint32_t m = 0; m < 10; m++)
            in.add(single(f0, m, pattern(200, 20 + m)), ctl(0, kOlNone, kSegNatural, m > 0));
        s.push_back({"valid_window_advances_with_consumer", in.b, 10, {}});
        In one;
        for (uint32_t m = 0; m < 3; m++)
            one.add(single(fx, m, pattern(40, 40 + m)), ctl(0, kOlNone, kSegNatural, m > 0));
        s.push_back({"valid_ring_of_one", one.b, 3, {}});
    }
    {
        auto a = group(f0, 0, kThree), b = group(f1, 0, pattern(3212, 5));
        In in;
        in.add(a[0]).add(b[2]).add(single(f3, 0, pattern(700, 6))).add(a[2]).add(b[0]).add(b[1]).add(a[1]);
        s.push_back({"valid_interleaved_flows", in.b, 3, {}});
        // The same with flows 0 and 3 streamed, flow 1 (a 5000-byte region) not.
        Bytes streamed = in.b;
        streamed[0] = kCfgStream;
        s.push_back({"valid_interleaved_flows_streamed", streamed, 3, {}});
    }
    s.push_back({"valid_jumbo_chained", In().add(single(txflow(4), 0, pattern(8000, 7))).b, 1, {}});
    {
        Bytes f = single(f0, 0, kSmall);
        f.insert(f.end(), 20, 0); // Ethernet padding after the UDP datagram
        s.push_back({"valid_ethernet_padding", In().add(f).b, 1, {}});
    }
    {
        Bytes f = single(f0, 0, kSmall);
        set16(f, UDP + 6, 0);
        auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(&f[IP]);
        uint16_t ck = rte_ipv4_udptcp_cksum(ip, &f[UDP]);
        memcpy(&f[UDP + 6], &ck, 2);
        s.push_back({"valid_udp_checksum_verified", In(kCfgVerifyUdp).add(f).b, 1, {}});
    }
    {
        In in(kCfgAltPort);
        in.add(single(txflow(0, 1500, kAltUdpPort), 0, kSmall));
        in.add(single(f1, 0, kSmall)); // default port: not ours in this run
        s.push_back({"valid_alt_port", in.b, 1, {R::WrongPort}});
    }
    {
        // The harness repairs: payload changed, lengths, trailer CRC, IP checksum recomputed.
        Bytes f = single(f0, 0, pattern(300, 8));
        f[PAY + 7] ^= 0x55;
        f.resize(f.size() - 40);
        s.push_back({"valid_harness_repairs", In().add(f, ctl(kCtlFixLen | kCtlFixTrailer | kCtlFixIpCsum)).b,
                     1, {}});
    }
    {
        // Every repair on every packet: mutated lengths, offsets and payloads of
        // multi-packet messages still reach completion (the trailer CRC follows
        // the region when the LAST arrives last), so the fuzzer can explore
        // packet geometry.
        constexpr uint8_t all = ctl(kCtlFixLen | kCtlFixTrailer | kCtlFixIpCsum);
        s.push_back({"valid_3pkt_all_repairs", In().add(group(f0, 0, kThree), {1, 0, 2}, all).b, 1, {}});
        In in;
        for (uint32_t m = 0; m < 3; m++) {
            auto g = group(f3, m, pattern(2000, 60 + m)); // 1456 + 544 with the trailer
            in.add(g[0], static_cast<uint8_t>(all | (m > 0 ? kCtlConsume : 0))).add(g[1], all);
        }
        s.push_back({"valid_flow3_messages_all_repairs", in.b, 3, {}});
    }
    {
        auto g = group(f0, 0, kThree);
        In in;
        and_valid(in);
        in.add(g[0]);
        in.add(single(f0, 4, kSmall), 0, kLenGiveUp); // msg 0 given up: slot 0 goes to msg 4
        in.add(g[1]);                                 // msg 0 is behind the window now
        s.push_back({"valid_consumer_gives_up", in.b, 2, {R::OutsideWindow}});
    }

    // ---- malformed frames, one per drop reason ----
    // Cut inside Ethernet, IPv4 or UDP (shorter than all the headers), then
    // inside the tailmark header (the IP total length claims more).
    for (size_t cut : {0, 10, 30, 41, 50, 57}) {
        Bytes f = single(f0, 0, kSmall);
        f.resize(cut);
        In in;
        in.add(f);
        and_valid(in);
        s.push_back({"bad_truncated_" + std::to_string(cut), in.b, 1,
                     {cut < 41 ? R::FrameTooShort : R::IpBadLength}});
    }
    {
        Bytes f = single(f0, 0, kSmall);
        f.resize(f.size() - 10); // into the trailer; lengths still claim it
        In in;
        in.add(f);
        and_valid(in);
        s.push_back({"bad_truncated_trailer", in.b, 1, {R::IpBadLength}});
    }
    s.push_back(bad("bad_vlan", R::VlanTagged, [](Bytes& f) {
        const uint8_t tag[] = {0x81, 0x00, 0x00, 0x07};
        f.insert(f.begin() + 12, tag, tag + 4);
    }));
    s.push_back(bad("bad_qinq", R::VlanTagged, [](Bytes& f) {
        const uint8_t tag[] = {0x88, 0xA8, 0x00, 0x07, 0x81, 0x00, 0x00, 0x08};
        f.insert(f.begin() + 12, tag, tag + 8);
    }));
    s.push_back(bad("bad_vlan_stripped", R::VlanTagged, [](Bytes&) {}, kCfgVlanOnGood, ctl(0, kOlGood)));
    s.push_back(bad("bad_not_ipv4", R::NotIpv4, [](Bytes& f) { set16(f, 12, 0x86DD); }));
    s.push_back(bad("bad_ip_version", R::IpBadVersion, [](Bytes& f) {
        f[IP] = 0x65;
        ipck(f);
    }));
    s.push_back(bad("bad_ip_options", R::IpOptions, [](Bytes& f) {
        const uint8_t nops[] = {1, 1, 1, 0};
        f.insert(f.begin() + UDP, nops, nops + 4);
        f[IP] = 0x46;
        set16(f, IP + 2, get16(f, IP + 2) + 4);
        ipck(f);
    }));
    s.push_back(bad("bad_ip_fragment_mf", R::IpFragment, [](Bytes& f) {
        set16(f, IP + 6, 0x6000);
        ipck(f);
    }));
    s.push_back(bad("bad_ip_fragment_offset", R::IpFragment, [](Bytes& f) {
        set16(f, IP + 6, 0x4010);
        ipck(f);
    }));
    s.push_back(bad("bad_ip_no_df", R::IpNoDf, [](Bytes& f) {
        set16(f, IP + 6, 0);
        ipck(f);
    }));
    s.push_back(bad("bad_ip_length", R::IpBadLength, [](Bytes& f) {
        set16(f, IP + 2, get16(f, IP + 2) + 1);
        ipck(f);
    }));
    s.push_back(bad("bad_ip_checksum", R::IpBadChecksum, [](Bytes& f) { f[IP + 10] ^= 0xFF; }));
    s.push_back(bad("bad_ip_checksum_offload", R::IpBadChecksum, [](Bytes&) {}, 0, ctl(0, kOlIpBad)));
    s.push_back(bad("bad_not_udp", R::NotUdp, [](Bytes& f) {
        f[IP + 9] = 6;
        ipck(f);
    }));
    s.push_back(bad("bad_wrong_port", R::WrongPort, [](Bytes& f) { set16(f, UDP + 2, 47475); }));
    s.push_back(bad("bad_udp_length", R::UdpBadLength, [](Bytes& f) { set16(f, UDP + 4, get16(f, UDP + 4) - 1); }));
    s.push_back(bad("bad_udp_checksum", R::UdpBadChecksum, [](Bytes& f) { set16(f, UDP + 6, 0x1234); },
                    kCfgVerifyUdp));
    s.push_back(bad("bad_udp_checksum_offload", R::UdpBadChecksum,
                    [](Bytes& f) { set16(f, UDP + 6, 0x1234); }, 0, ctl(0, kOlL4Bad)));
    s.push_back(bad("bad_version", R::BadVersion, [](Bytes& f) { f[HDR + H_VER] = 3; })); // 2 is a version now
    s.push_back(bad("bad_unknown_flag_bit", R::BadFlags, [](Bytes& f) { f[HDR + H_FLAGS] |= 0x10; }));
    s.push_back(bad("bad_last_and_ack", R::BadFlags, [](Bytes& f) { f[HDR + H_FLAGS] = 0x03; }));
    s.push_back(bad("bad_pay_len", R::PayLenMismatch, [](Bytes& f) { set16(f, HDR + 10, get16(f, HDR + 10) + 1); }));
    s.push_back(bad("bad_magic", R::BadMagic, [](Bytes& f) { f[trailer(f) + T_MAGIC + 3] ^= 1; }));
    s.push_back(bad("bad_reserved", R::BadReserved, [](Bytes& f) { set16(f, trailer(f) + T_RES, 1); }));
    s.push_back(bad("bad_zero_flag", R::BadFlag, [](Bytes& f) { set64(f, trailer(f) + T_FLAG, 0); }));
    s.push_back(bad("bad_flag", R::BadFlag, [](Bytes& f) { set64(f, trailer(f) + T_FLAG, 2); }));
    s.push_back(bad("bad_pkt_count_zero", R::BadPktCount, [](Bytes& f) { set16(f, trailer(f) + T_COUNT, 0); }));
    s.push_back(bad("bad_last_offset", R::BadOffset, [](Bytes& f) { set32(f, HDR + H_OFF, 1); }));
    s.push_back(bad("bad_msg_len", R::BadOffset, [](Bytes& f) { set32(f, trailer(f) + T_LEN, 100000); }));
    s.push_back(bad("bad_unknown_flow", R::UnknownFlow, [](Bytes& f) { set16(f, HDR + H_FLOW, 9); }));
    s.push_back(bad("bad_key", R::BadKey, [](Bytes& f) { f[trailer(f) + T_KEY + 3] ^= 1; }));
    s.push_back(bad("bad_slot", R::BadSlot, [](Bytes& f) { set32(f, trailer(f) + T_SLOT, 1); }));
    s.push_back(bad("bad_slot_out_of_range", R::BadSlot, [](Bytes& f) { set32(f, trailer(f) + T_SLOT, 1000000); }));
    s.push_back(bad("bad_outside_window", R::OutsideWindow, [](Bytes& f) {
        f = single(txflow(0), 4, kSmall); // ring of 4, nothing released
    }));
    s.push_back(bad("bad_crc", R::CrcMismatch, [](Bytes& f) { f[PAY + 10] ^= 1; }));
    {
        Bytes f = single(f2, 0, pattern(1200, 30)); // region of 1000
        In in;
        in.add(f);
        and_valid(in);
        s.push_back({"bad_msg_too_large", in.b, 1, {R::MsgTooLarge}});
    }
    {
        Bytes f = group(f0, 0, kThree)[1]; // offset 1456, into flow 2's 1000-byte region
        set16(f, HDR + H_FLOW, 2);
        In in;
        in.add(f);
        and_valid(in);
        s.push_back({"bad_outside_region", in.b, 1, {R::OutsideRegion}});
    }
    {
        Bytes f = group(f0, 0, kThree)[0];
        f[HDR + H_FLAGS] = 0x02; // ACK: no reliability peer here
        In in;
        in.add(f);
        and_valid(in);
        s.push_back({"bad_control_ack", in.b, 1, {R::Control}});
    }
    {
        Bytes f = group(f0, 0, kThree)[0];
        f.resize(PAY);
        fix_lens(f);
        In in;
        in.add(f);
        and_valid(in);
        s.push_back({"bad_empty_data_packet", in.b, 1, {R::EmptyPacket}});
    }
    {
        Bytes f = single(f0, 0, kSmall);
        In in;
        in.add(f, ctl(0, kOlNone, kSegNatural, true)).add(f, ctl(0, kOlNone, kSegNatural, true));
        // Released, so behind the window: dropped, never completed twice (the
        // placer reads the consumer's cursor when its cached one does not
        // answer: repro_window_completion_after_release).
        s.push_back({"bad_replay_after_release", in.b, 1, {R::OutsideWindow}});
        In again;
        again.add(f).add(f);
        s.push_back({"bad_already_completed", again.b, 1, {R::AlreadyCompleted}});
    }
    {
        Bytes good = single(f0, 0, kSmall), bad = good;
        bad[PAY + 3] ^= 0x80;
        In in;
        in.add(bad).add(good);
        s.push_back({"bad_crc_then_retransmission", in.b, 1, {R::CrcMismatch}});
    }
    {
        auto g = group(f0, 0, kThree);
        Bytes other = g[2];
        other[trailer(other) + 24] ^= 1; // a different CRC
        In in;
        in.add(g, {0, 2}).add(other).add(g, {1});
        s.push_back({"bad_conflicting_last", in.b, 1, {R::ConflictingLast}});
        s.push_back({"bad_last_alone", In().add(g, {2}).b, 0, {}});
        Bytes far = g[0];
        set16(far, HDR + H_IDX, 3); // at its place in the geometry, past pkt_count
        set32(far, HDR + H_OFF, 3 * 1456);
        s.push_back({"bad_pkt_idx_after_last", In().add(g, {2}).add(far).add(g, {0, 1}).b, 1,
                     {R::PktIdxRange}});
        Bytes beyond = g[1];
        set32(beyond, HDR + H_OFF, 3000);
        s.push_back({"bad_offset_after_last", In().add(g, {2}).add(beyond).add(g, {0, 1}).b, 1,
                     {R::BadOffset}});
        // A packet at index 4 before the LAST (which says 3 packets): nothing
        // can refuse it yet, so it is placed; the LAST then finds state that
        // does not fit its geometry and discards it (RxCounters::discarded,
        // not a drop), and the message completes from its own packets.
        Bytes early = g[0];
        set16(early, HDR + H_IDX, 4);
        set32(early, HDR + H_OFF, 4 * 1456);
        Seed geo{"bad_geometry_before_last_discarded", In().add(early).add(g, {2, 0, 1}).b, 1, {}};
        geo.discarded = 1;
        s.push_back(geo);
        Bytes shorter = g[1];
        shorter.resize(shorter.size() - 100);
        fix_lens(shorter);
        s.push_back({"bad_length_mismatch", In().add(g, {0}).add(shorter).add(g, {2}).b, 0,
                     {R::LengthMismatch}});
    }

    // ---- regressions: bugs this harness found in lib/ (issue 6), fixed in RxPlacer::place ----
    {
        // Window: the consumer gives msg 0 up (releases it) after its first
        // packet; the late packets still complete it, after the release.
        // The placer used a cached cursor that lagged the consumer's, so msg 0
        // still looked inside [released, +ring). Now: outside the window.
        auto g = group(f0, 0, kThree);
        In in;
        in.add(g[0]).add(g[1], 0, kLenGiveUp).add(g[2]);
        // (libFuzzer's first find was simpler still: msg 0 given up before any
        // packet of it arrived, then it arrives whole.)
        s.push_back({"repro_window_completion_after_release", in.b, 0, {R::OutsideWindow}});
    }
    {
        // Gap: msg 0 completes and is released; msg 4 reuses its slot. Its
        // packet 1 claims offset 0 (overlapping packet 0) instead of 1456, so
        // bytes [1456, 2912) of msg 4 are never placed; the sender knows they
        // still hold msg 0's bytes and sends a CRC over that. The placer counted
        // distinct packets and bytes, not coverage, and completed msg 4 over
        // stale bytes. Now packets must sit at pkt_idx * stride: bad_offset.
        Bytes a = kThree, b = pattern(3212, 50);
        Bytes m4 = b;
        std::copy(a.begin() + 1456, a.begin() + 2912, m4.begin() + 1456);
        auto g0 = group(f0, 0, a);
        auto g4 = group(f0, 4, m4);
        Bytes overlap = g4[0];
        set16(overlap, HDR + H_IDX, 1);
        In in;
        in.add(g0, {0, 1, 2});
        in.add(g4[0], ctl(0, kOlNone, kSegNatural, true)).add(overlap).add(g4[2]);
        s.push_back({"repro_gap_overlapping_packets", in.b, 1, {R::BadOffset}});
    }
    return s;
}

std::string file_name(const Seed& sd) {
    return sd.name.rfind("repro_", 0) == 0 ? sd.name : "seed_" + sd.name;
}

// Runs one seed and says whether it did what its name says: exactly its
// completions (and packet completions, where given) and discarded packets,
// every drop reason it names counted, and no reason it does not name.
bool behaves(const Seed& sd) {
    LLVMFuzzerTestOneInput(sd.input.data(), sd.input.size());
    const RunStats& st = last_stats();
    bool ok = st.completions == sd.completions && st.discarded == sd.discarded;
    if (sd.packet_completions >= 0)
        ok = ok && st.packet_completions == static_cast<uint64_t>(sd.packet_completions);
    for (size_t i = 0; i < kDropReasonCount; i++) {
        bool named = false;
        for (R r : sd.drops)
            named = named || index(r) == i;
        ok = ok && (st.drops[i] > 0) == named;
    }
    if (!ok) {
        fprintf(stderr, "seed %s does not behave as named: %llu completions (want %llu), %llu discarded (want %llu)",
                sd.name.c_str(), static_cast<unsigned long long>(st.completions),
                static_cast<unsigned long long>(sd.completions), static_cast<unsigned long long>(st.discarded),
                static_cast<unsigned long long>(sd.discarded));
        if (sd.packet_completions >= 0)
            fprintf(stderr, ", %llu packet completions (want %lld)",
                    static_cast<unsigned long long>(st.packet_completions),
                    static_cast<long long>(sd.packet_completions));
        fprintf(stderr, "; drops:");
        for (size_t i = 0; i < kDropReasonCount; i++)
            if (st.drops[i])
                fprintf(stderr, " %s=%llu", kDropReasonNames[i].data(), static_cast<unsigned long long>(st.drops[i]));
        fprintf(stderr, " (want:");
        for (R r : sd.drops)
            fprintf(stderr, " %s", kDropReasonNames[index(r)].data());
        fprintf(stderr, "%s)\n", sd.drops.empty() ? " none" : "");
    }
    return ok;
}

std::vector<SeedFile> seed_files() {
    std::vector<SeedFile> v;
    for (Seed& sd : seeds()) {
        const std::string file = file_name(sd);
        Bytes b = sd.input;
        v.push_back({file, std::move(b), [sd = std::move(sd)] { return behaves(sd); }});
    }
    return v;
}

RunStats g_total; // replayed inputs, summed (tally)

} // namespace

int write_corpus(const char* dir) { return write_seed_files("fuzz_rx_replay", dir, seed_files()); }
int check_corpus(const char* dir) { return check_seed_files("fuzz_rx_replay", dir, seed_files()); }

void tally() {
    const RunStats& s = last_stats();
    g_total.frames += s.frames;
    g_total.placed += s.placed;
    g_total.completions += s.completions;
}

std::string totals() {
    char b[128];
    snprintf(b, sizeof(b), "%llu frames, %llu placed, %llu completions",
             static_cast<unsigned long long>(g_total.frames), static_cast<unsigned long long>(g_total.placed),
             static_cast<unsigned long long>(g_total.completions));
    return b;
}

} // namespace tmfuzz
