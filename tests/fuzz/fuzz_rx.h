// libFuzzer harness for the complete rx path (issue 6, item 1): raw frames go
// through tailmark::RxPlacer::process (parse, flow checks, placement,
// completion) on real rte_mbufs from a real mempool, into real completion
// rings. fuzz_rx.cc holds the target, replay_main.cc a main() that replays a
// corpus without libFuzzer (and writes the seed corpus).
//
// Input format (everything big-endian):
//
//   byte 0          run configuration, kCfg* bits
//   then records    [ctl: 1 B][len: 2 B][frame: len & kLenMask bytes] ...
//
// A short final record takes whatever bytes are left. Each record is one frame.
// `ctl` asks the harness to repair parts of the frame before it is sent
// (so that mutations of one field are not all rejected by another), picks the
// mbuf segmentation and rx offload flags, and drives the consumer side.
// The two top bits of `len` are flags too.
//
// State (rings, placer) is created afresh for every input, so an input is a
// self-contained scenario and replays deterministically.
#pragma once

#include <cstddef>
#include <cstdint>

#include <rte_mempool.h>

#include "replay.h"
#include "tailmark/drop_reason.h"

namespace tmfuzz {

// Flows the harness registers: small rings and regions, so that windows wrap
// and region bounds are reached with small frames. Region sizes that are not
// multiples of 4 KiB leave padding up to the region stride; the harness
// checks that padding (and everything else in the ring) after every frame.
struct FlowSpec {
    uint16_t id;
    uint32_t ring_size;
    uint64_t region_size;
    uint32_t key;
    uint32_t mtu; // agreed at set-up, like the key: the receiver checks offsets against its stride
};
inline constexpr FlowSpec kFlows[] = {
    {0, 4, 8192, 0x5EC2E700, 1500},
    {1, 4, 5000, 0x5EC2E701, 1500},
    {2, 2, 1000, 0x5EC2E702, 1500},
    {3, 8, 12000, 0x5EC2E703, 1500},
    {4, 2, 12000, 0x5EC2E704, 9000}, // jumbo frames
    {65535, 1, 64, 0x5EC2E7FF, 1500},
};
inline constexpr size_t kNumFlows = sizeof(kFlows) / sizeof(kFlows[0]);
inline constexpr uint16_t kAltUdpPort = 4791;

// Byte 0: configuration of the run.
inline constexpr uint8_t kCfgVerifyUdp = 0x01;  // ParserConfig::verify_udp_checksum
inline constexpr uint8_t kCfgNoIpVerify = 0x02; // ParserConfig::verify_ip_checksum = false
inline constexpr uint8_t kCfgPacketMode = 0x04; // CompletionMode::Packet, per-flow rte_rings
inline constexpr uint8_t kCfgAltPort = 0x08;    // udp_port = kAltUdpPort
inline constexpr uint8_t kCfgVlanOnGood = 0x10; // frames sent with kOlGood also say RX_VLAN_STRIPPED
inline constexpr uint8_t kCfgStream = 0x20;     // RxPlacer::set_stream_min(kStreamMin): flows 0, 3 and 4 stream
inline constexpr uint64_t kStreamMin = 8192;

// Record ctl bits, applied in this order: lengths, trailer, IP checksum.
inline constexpr uint8_t kCtlFixLen = 0x01;     // IP total length, UDP length, pay_len from the frame size
inline constexpr uint8_t kCtlFixTrailer = 0x02; // magic, reserved, flag, slot, key, msg_len, pkt_count and a CRC
                                                // that matches the region once this frame is placed
inline constexpr uint8_t kCtlFixIpCsum = 0x04;  // recompute the IPv4 header checksum
inline constexpr uint8_t kCtlOlShift = 3;       // 2 bits: rx offload flags, kOl*
inline constexpr uint8_t kCtlSegShift = 5;      // 2 bits: segmentation, kSeg*
inline constexpr uint8_t kCtlConsume = 0x80;    // consumer polls and releases, before the frame

inline constexpr uint8_t kOlNone = 0;       // no NIC verdict: software checks
inline constexpr uint8_t kOlGood = 1;       // IP and L4 checksum good
inline constexpr uint8_t kOlL4Bad = 2;      // IP good, L4 bad
inline constexpr uint8_t kOlIpBad = 3;      // IP bad, L4 good

inline constexpr uint8_t kSegNatural = 0;   // segments filled to the data room (2 KiB)
inline constexpr uint8_t kSeg64 = 1;        // 64-byte segments
inline constexpr uint8_t kSegTiny = 2;      // ten 7-byte segments, then natural
inline constexpr uint8_t kSegHalves = 3;    // split at the middle

// len field: low 14 bits are the frame length, the top two are flags.
inline constexpr uint16_t kLenMask = 0x3FFF;
inline constexpr uint16_t kLenBurst = 0x4000;  // feed through rx_burst (which frees) instead of process
inline constexpr uint16_t kLenGiveUp = 0x8000; // before the frame, the consumer releases the oldest
                                               // unreleased message of every flow, completed or not

constexpr uint8_t ctl(uint8_t fix, uint8_t ol = kOlNone, uint8_t seg = kSegNatural,
                      bool consume = false) {
    return static_cast<uint8_t>(fix | (ol << kCtlOlShift) | (seg << kCtlSegShift) |
                                (consume ? kCtlConsume : 0));
}

// What the last input did, for the seed generator's self-check.
struct RunStats {
    uint64_t frames = 0;
    uint64_t placed = 0;
    uint64_t completions = 0;       // slot writes seen by the harness
    uint64_t packet_completions = 0;
    uint64_t consumed = 0;          // messages the consumer read and released
    uint64_t discarded = 0;         // placed packets whose state a later LAST threw away
    tailmark::DropCounters drops{};
};
const RunStats& last_stats();

// The mbuf pool the harness uses (for the seed generator's TxMarker).
rte_mempool* pool();

} // namespace tmfuzz
