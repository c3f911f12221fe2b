// tailmark wire format, version 1 (shared/spec/wire-format.md).
//
//   Ethernet II | IPv4 (IHL=5, DF) | UDP | Header (16 B) | payload | [Trailer (32 B), LAST only]
//
// WireHeader / WireTrailer are the bytes as they sit in the frame (big-endian);
// Header / Trailer are the host-order values. encode()/decode() are the only
// places that convert, so every other file works with plain integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

namespace tailmark {

inline constexpr uint8_t kVersion = 1;
// Version 2 (wire-format.md): a data packet's header is followed by an
// 8-byte keyed tag (data_tag.h); control packets keep version 1's framing
// (their own MAC and sequence number).
inline constexpr uint8_t kVersion2 = 2;
inline constexpr uint32_t kTagLen = 8;
inline constexpr uint16_t kDefaultUdpPort = 47474;
inline constexpr uint32_t kMagic = 0x544D4B31; // "TMK1"

// Bits of Header::flags.
enum class Flags : uint8_t {
    None = 0x00,
    Last = 0x01, // ends the message group, carries the trailer
    Ack = 0x02,  // reliability control packets
    Nack = 0x04,
    Retx = 0x08, // a retransmitted copy
    Session = 0x10, // session control: handshake, keep-alive, reset, close (control.h)
};
inline constexpr uint8_t kKnownFlags = 0x1F;

constexpr Flags operator|(Flags a, Flags b) {
    return static_cast<Flags>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
constexpr bool has(Flags set, Flags bit) {
    return (static_cast<uint8_t>(set) & static_cast<uint8_t>(bit)) != 0;
}

struct WireHeader {
    uint8_t version;
    uint8_t flags;
    rte_be16_t flow;
    rte_be32_t msg_id;
    rte_be16_t pkt_idx;
    rte_be16_t pay_len;
    rte_be32_t offset;
} __rte_packed;

struct WireTrailer {
    rte_be64_t flag;
    rte_be32_t slot;
    rte_be32_t key;
    rte_be32_t msg_len;
    rte_be16_t pkt_count;
    rte_be16_t reserved;
    rte_be32_t crc32c;
    rte_be32_t magic;
} __rte_packed;

static_assert(std::is_standard_layout_v<WireHeader> && std::is_trivially_copyable_v<WireHeader>);
static_assert(sizeof(WireHeader) == 16);
static_assert(offsetof(WireHeader, version) == 0);
static_assert(offsetof(WireHeader, flags) == 1);
static_assert(offsetof(WireHeader, flow) == 2);
static_assert(offsetof(WireHeader, msg_id) == 4);
static_assert(offsetof(WireHeader, pkt_idx) == 8);
static_assert(offsetof(WireHeader, pay_len) == 10);
static_assert(offsetof(WireHeader, offset) == 12);

static_assert(std::is_standard_layout_v<WireTrailer> && std::is_trivially_copyable_v<WireTrailer>);
static_assert(sizeof(WireTrailer) == 32);
static_assert(offsetof(WireTrailer, flag) == 0);
static_assert(offsetof(WireTrailer, slot) == 8);
static_assert(offsetof(WireTrailer, key) == 12);
static_assert(offsetof(WireTrailer, msg_len) == 16);
static_assert(offsetof(WireTrailer, pkt_count) == 20);
static_assert(offsetof(WireTrailer, reserved) == 22);
static_assert(offsetof(WireTrailer, crc32c) == 24);
static_assert(offsetof(WireTrailer, magic) == 28);

inline constexpr uint32_t kHeaderLen = sizeof(WireHeader);
inline constexpr uint32_t kTrailerLen = sizeof(WireTrailer);
inline constexpr uint32_t kEthLen = sizeof(rte_ether_hdr);
inline constexpr uint32_t kIpLen = sizeof(rte_ipv4_hdr); // IHL=5, no options
inline constexpr uint32_t kUdpLen = sizeof(rte_udp_hdr);
// Bytes in front of the payload in every frame: Eth + IPv4 + UDP + Header.
inline constexpr uint32_t kFrameOverhead = kEthLen + kIpLen + kUdpLen + kHeaderLen;
static_assert(kFrameOverhead == 58);
// A data packet's header bytes in a session of `version` (the tag included).
constexpr uint32_t header_len(uint8_t version) { return version == kVersion2 ? kHeaderLen + kTagLen : kHeaderLen; }
constexpr uint32_t frame_overhead(uint8_t version) { return kEthLen + kIpLen + kUdpLen + header_len(version); }

struct Header {
    uint8_t version = kVersion;
    Flags flags = Flags::None;
    uint16_t flow = 0;
    uint32_t msg_id = 0;
    uint16_t pkt_idx = 0;
    uint16_t pay_len = 0;
    uint32_t offset = 0;

    bool operator==(const Header&) const = default;
};

struct Trailer {
    uint64_t flag = 0;
    uint32_t slot = 0;
    uint32_t key = 0;
    uint32_t msg_len = 0;
    uint16_t pkt_count = 0;
    uint16_t reserved = 0;
    uint32_t crc32c = 0;
    uint32_t magic = kMagic;

    bool operator==(const Trailer&) const = default;
};

static_assert(sizeof(Trailer) == sizeof(WireTrailer) && offsetof(Trailer, slot) == 8 &&
              offsetof(Trailer, msg_len) == 16 && offsetof(Trailer, pkt_count) == 20 &&
              offsetof(Trailer, crc32c) == 24 && offsetof(Trailer, magic) == 28); // decode_into's shuffle

// Version 1: the designated identifier of message msg_id (never 0).
constexpr uint64_t flag_for(uint32_t msg_id) { return static_cast<uint64_t>(msg_id) + 1; }

inline void encode(const Header& h, WireHeader* w) {
    w->version = h.version;
    w->flags = static_cast<uint8_t>(h.flags);
    w->flow = rte_cpu_to_be_16(h.flow);
    w->msg_id = rte_cpu_to_be_32(h.msg_id);
    w->pkt_idx = rte_cpu_to_be_16(h.pkt_idx);
    w->pay_len = rte_cpu_to_be_16(h.pay_len);
    w->offset = rte_cpu_to_be_32(h.offset);
}

inline Header decode(const WireHeader* w) {
    Header h;
    h.version = w->version;
    h.flags = static_cast<Flags>(w->flags);
    h.flow = rte_be_to_cpu_16(w->flow);
    h.msg_id = rte_be_to_cpu_32(w->msg_id);
    h.pkt_idx = rte_be_to_cpu_16(w->pkt_idx);
    h.pay_len = rte_be_to_cpu_16(w->pay_len);
    h.offset = rte_be_to_cpu_32(w->offset);
    return h;
}

inline void encode(const Trailer& t, WireTrailer* w) {
    w->flag = rte_cpu_to_be_64(t.flag);
    w->slot = rte_cpu_to_be_32(t.slot);
    w->key = rte_cpu_to_be_32(t.key);
    w->msg_len = rte_cpu_to_be_32(t.msg_len);
    w->pkt_count = rte_cpu_to_be_16(t.pkt_count);
    w->reserved = rte_cpu_to_be_16(t.reserved);
    w->crc32c = rte_cpu_to_be_32(t.crc32c);
    w->magic = rte_cpu_to_be_32(t.magic);
}

// In place: the parser's copy, as one 32-byte store where the CPU can
// (the Trailer has the wire's field order; one shuffle swaps each field's
// bytes). The placer copies the whole Trailer (s.trailer = p.trailer) with
// one 32-byte load right after; built from eight narrower stores, that load
// cannot be forwarded and waits for them to reach the cache: about 150 TSC
// cycles on every LAST packet, most of the 64 B rx path (bench.sh --stages).
[[gnu::always_inline]] inline void decode_into(const WireTrailer* w, Trailer& t) {
#if defined(__AVX2__)
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    const __m256i swap = _mm256_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 11, 10, 9, 8, 15, 14, 13, 12, // flag slot key
                                          3, 2, 1, 0, 5, 4, 7, 6, 11, 10, 9, 8, 15, 14, 13, 12); // len count rsv crc magic
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&t), _mm256_shuffle_epi8(v, swap));
#else
    t.flag = rte_be_to_cpu_64(w->flag);
    t.slot = rte_be_to_cpu_32(w->slot);
    t.key = rte_be_to_cpu_32(w->key);
    t.msg_len = rte_be_to_cpu_32(w->msg_len);
    t.pkt_count = rte_be_to_cpu_16(w->pkt_count);
    t.reserved = rte_be_to_cpu_16(w->reserved);
    t.crc32c = rte_be_to_cpu_32(w->crc32c);
    t.magic = rte_be_to_cpu_32(w->magic);
#endif
}
inline Trailer decode(const WireTrailer* w) {
    Trailer t;
    decode_into(w, t);
    return t;
}

// How a message is cut into packets. `stride` is the largest payload a packet
// can carry (MTU - IPv4 - UDP - Header). Every packet but the LAST carries
// exactly `stride` bytes at offset pkt_idx * stride; the LAST carries the tail.
// When the tail leaves no room for the 32-byte trailer, the trailer travels in
// an extra LAST packet with pay_len 0 at offset msg_len.
struct GroupPlan {
    uint32_t msg_len = 0;
    uint32_t stride = 0;
    uint32_t pkt_count = 0; // 0: the message cannot be sent (too many packets, bad stride)
    uint32_t last_len = 0;  // payload bytes of the LAST packet

    bool ok() const { return pkt_count != 0; }
    bool is_last(uint32_t idx) const { return idx + 1 == pkt_count; }
    uint32_t offset_of(uint32_t idx) const {
        return is_last(idx) ? msg_len - last_len : idx * stride;
    }
    uint32_t len_of(uint32_t idx) const {
        if (is_last(idx))
            return last_len;
        uint32_t left = msg_len - idx * stride;
        return left < stride ? left : stride;
    }
};

inline constexpr uint32_t kMaxPktsPerMessage = 65535; // pkt_count is 16 bits

// The payload of a full packet at this MTU: version 2's tag takes 8 bytes of it.
constexpr uint32_t stride_for_mtu(uint32_t mtu, uint8_t version = kVersion) {
    const uint32_t hl = header_len(version);
    return mtu > kIpLen + kUdpLen + hl + kTrailerLen ? mtu - kIpLen - kUdpLen - hl : 0;
}

constexpr GroupPlan plan_group(uint64_t msg_len, uint32_t stride) {
    GroupPlan p;
    p.stride = stride;
    p.msg_len = static_cast<uint32_t>(msg_len);
    if (stride <= kTrailerLen || stride > UINT16_MAX || msg_len > UINT32_MAX)
        return p;
    // 32-bit division (msg_len fits, checked above): a 64-bit divide costs
    // several times more, once per message on the tx fast path. A message
    // shorter than a stride (small messages: the common case) needs none.
    const uint32_t len32 = static_cast<uint32_t>(msg_len);
    const uint32_t full32 = len32 < stride ? 0 : len32 / stride;
    uint64_t full = full32; // packets carrying exactly `stride`
    uint64_t tail = len32 - full32 * stride;
    uint64_t count;
    if (tail == 0 && full > 0) { // ends on a stride boundary: last data packet is full
        count = full + 1;        // ...so the trailer needs its own packet
        tail = 0;
    } else if (tail + kTrailerLen > stride) {
        count = full + 2; // tail packet as data, then an empty LAST
        tail = 0;
    } else {
        count = full + 1; // tail and trailer share the LAST packet
    }
    if (count > kMaxPktsPerMessage)
        return p;
    p.pkt_count = static_cast<uint32_t>(count);
    p.last_len = static_cast<uint32_t>(tail);
    return p;
}

} // namespace tailmark
