// Control packets of the reliability protocol: the receiver's ACK (flags
// 0x02) and NACK (flags 0x04). The wire format leaves their body to the
// project; this is it (restated in the README).
//
//   Ethernet | IPv4 | UDP (dst = the data port) | Header | body
//   Header: version 1, flags ACK or NACK, flow, msg_id (ACK: acked_upto;
//           NACK: the message it names), pkt_idx 0, pay_len = body length,
//           offset 0.
//   body, big-endian:
//     0  u32 released_upto  consumer cursor: every msg_id below it was
//                           completed, verified and released. Credits: the
//                           sender may have msg_id < released_upto + ring.
//     4  u32 acked_upto     cumulative ACK: every msg_id below it completed
//                           (all bytes placed, CRC32C matched). Coalesces the
//                           ACKs of every message up to it.
//     8  u32 epoch          the receiver's incarnation (non-zero). A new value
//                           means the receiver restarted: what it had not
//                           released is gone.
//    12  u16 nranges        NACK: missing-packet ranges that follow; ACK: 0
//    14  u16 reserved       0
//    16  nranges x {u16 first, u16 count}   packets [first, first + count) of
//                           message msg_id are missing; count 0: from first
//                           to the end of the group (the LAST is missing too,
//                           so the receiver does not know where it ends).
//    ..  u32 crc32c         CRC32C of the tailmark header and the body before
//                           it. A control packet steers retransmission and
//                           frees the sender's state: a corrupted one must
//                           never be believed (data has the trailer CRC).
//
// Every NACK carries the same three cursors as an ACK, so a NACK is an ACK too.
#pragma once

#include <cstdint>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "tailmark/drop_reason.h"
#include "tailmark/packet_parser.h"
#include "tailmark/tx_marker.h"

namespace tailmark {

struct NackRange {
    uint16_t first;
    uint16_t count; // 0: to the end of the group
};

inline constexpr uint32_t kMaxNackRanges = 32;
inline constexpr uint32_t kControlFixedLen = 16;
inline constexpr uint32_t kControlCrcLen = 4;
inline constexpr uint32_t kAckBodyLen = kControlFixedLen + kControlCrcLen; // 20
inline constexpr uint32_t kMaxControlBodyLen = kAckBodyLen + 4 * kMaxNackRanges;

// One retransmission request for one message: what a NACK carries, and what
// travels, in memory, from the code that detects a gap (the receiver's placer,
// the sender's ACK reader, the sender's retransmission timer) to the tx lcore
// that acts on it (an SP or MP / SC rte_ring; 136 bytes, a multiple of 4).
struct Nack {
    uint16_t flow;
    uint16_t nranges;
    uint32_t msg_id;
    NackRange ranges[kMaxNackRanges];
};
static_assert(sizeof(Nack) % 4 == 0);

struct Control {
    bool nack = false; // else ACK
    uint32_t released_upto = 0;
    uint32_t acked_upto = 0;
    uint32_t epoch = 0;
    Nack n{}; // n.flow: the flow (both kinds); the rest: NACK only
};

// Builds a control packet from a flow's L2-L4 template (own address -> peer).
// nullptr when the pool is empty.
rte_mbuf* build_control(rte_mempool* pool, const TxFlow& tmpl, const Control& c);

// Decodes the body of a packet parse_packet() accepted as control. None, or
// ControlMalformed (length, range count, reserved bits) or ControlBadCrc.
DropReason parse_control(const rte_mbuf* m, const ParsedPacket& p, Control& out);

} // namespace tailmark
