// Control packets: everything that is not data. The wire format leaves their
// bodies to the project; this is them (restated in the README). Every control
// packet is authenticated: its last 8 bytes are a SipHash-2-4 MAC, keyed by
// the session's 128-bit secret, over the tailmark header and the body before
// the MAC. The secret never travels; a packet whose MAC fails is never believed.
//
//   Ethernet | IPv4 | UDP (dst = the peer's port) | Header | body | MAC (8 B)
//   Header: version 1, flags ACK (0x02), NACK (0x04) or SESSION (0x10),
//           exactly one of them; pkt_idx 0, offset 0, pay_len = body + MAC.
//
// ACK / NACK (receiver -> sender, one flow). Header: flow = the sender's own
// id for the flow (each end names its flows; a packet carries the id its
// destination gave), msg_id = acked_upto (ACK) or the message named (NACK).
//    0  u32 released_upto  consumer cursor: every msg_id below it was
//                          completed and released. Credits: the sender may
//                          have msg_id < released_upto + ring size out.
//    4  u32 acked_upto     cumulative ACK: every msg_id below it completed
//    8  u32 sender_epoch   the session's epochs: a packet of another
//   12  u32 receiver_epoch incarnation of the session is stale, not news
//   16  u16 nranges        NACK: 1..32 ranges follow; ACK: 0
//   18  u16 echo           the IPv4 identification of the newest data packet
//                          of the flow placed here: the sender's send stamp
//                          (congestion control's RTT sample)
//   20  u32 hold_ns        nanoseconds from that packet's arrival to this
//                          packet; 0xFFFFFFFF: no echo (nothing placed yet)
//   24  u64 seq            the flow's ACKs and NACKs numbered 1, 2, 3, ...:
//                          the sender takes each number once (ReplayWindow),
//                          so a recorded ACK or NACK replayed is refused
//   32  nranges x {u16 first, u16 count}: packets [first, first + count) of
//                          msg_id are missing; count 0: to the end of the group
//
// SESSION (handshake, keep-alive, reset, close). Header: flow = the
// destination's session id (0 in a CONNECT: it has none yet), msg_id 0.
//    0  u8  type           CONNECT 1, ACCEPT 2, REFUSE 3, KEEPALIVE 4, RESET 5,
//                          CLOSE 6, RETRY 7
//    1  u8  flags          KEEPALIVE: 0x01 answer me, 0x02 an answer
//    2  u16 service        the listener (a port number) the session belongs to
//    4  u16 src_session    the sender of this packet's id for the session
//    6  u16 reserved       0
//    8  u32 src_epoch      its epoch for the session (random, never 0)
//   12  u32 dst_epoch      the destination's epoch (0 in a CONNECT)
//   16  u64 nonce          CONNECT, KEEPALIVE: fresh; ACCEPT, REFUSE, RESET,
//                          RETRY and a KEEPALIVE answer echo the one they answer
//   24  u64 seq            this end's session packets numbered 1, 2, 3, ...:
//                          the peer takes each once (ReplayWindow); CONNECT,
//                          REFUSE, RESET and RETRY, which answer or open no
//                          session state, are fresh by their nonce instead
//   CONNECT, ACCEPT:
//   32  u64 cookie         CONNECT: the acceptor's RETRY token, echoed (0:
//                          none yet); ACCEPT: 0
//   40  u16 nflows         flows of the session
//   42  u16 flow_base      the sender's first flow id: flow i is flow_base + i
//                          (CONNECT: the connector's, for ACKs; ACCEPT: the
//                          acceptor's, for data)
//   44  u32 mtu            CONNECT: the connector's; ACCEPT: agreed (the smaller)
//   48  u32 ring_size      completion slots per flow
//   52  u32 max_msg        the largest message (each slot's receive region)
//   56  u32 key            the flows' completion key
//   60  u16 key_flags      CONNECT: 0x01 the keys are given, the acceptor must hold the same
//   62  u16 noverrides     per-flow keys that differ from `key`:
//   64  u16 data_version   CONNECT: the highest data version the connector
//                          speaks (1, or 2: a keyed tag on every data packet);
//                          ACCEPT: the one the acceptor took
//   66  u16 data_flags     0x0001 data authentication (--data-auth): the
//                          tag covers the payload too (version 2 only);
//                          CONNECT: asked for; ACCEPT: taken
//   68  u8  nrails         the sender's rails beyond its first (--rails), 0..3
//   69  u8  0, u16 0       reserved
//   72  u64 key_nonce      ACCEPT: the acceptor's fresh nonce, which with the
//                          CONNECT's derives the session's data keys; CONNECT: 0
//   80  noverrides x {u16 flow index, u16 0, u32 key}
//   then nrails x {u32 IPv4 address, u8 MAC[6], u16 0}: rail 1, 2, ... of
//                          the sender of the packet (its rail 0 is the
//                          address the packet comes from)
//   RETRY (acceptor -> connector: prove you receive at your address):
//   32  u64 cookie         a token the acceptor can check without keeping
//                          anything: a keyed hash of the CONNECT's source
//                          address and port, session, epoch and nonce, and
//                          the time; the CONNECT that echoes it opens the session
//   REFUSE, RESET:
//   32  u16 reason         RefuseReason
//   34  u16 index          the flow a key mismatch is about
//   36  u32 reserved       0
//   40  u64 expected       the refuser's value of the setting
//   48  u64 got            the value it was offered
#pragma once

#include <cstdint>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "tailmark/drop_reason.h"
#include "tailmark/packet_parser.h"
#include "tailmark/session_link.h"
#include "tailmark/siphash.h"
#include "tailmark/wire.h"

namespace tailmark {

struct NackRange {
    uint16_t first;
    uint16_t count; // 0: to the end of the group
};

// One past the range's last packet among the first `limit` of its group.
inline uint32_t range_end(const NackRange& r, uint32_t limit) {
    return r.count == 0 || r.first + uint32_t(r.count) > limit ? limit : r.first + uint32_t(r.count);
}

inline constexpr uint32_t kMaxNackRanges = 32;
inline constexpr uint32_t kMacLen = 8;
inline constexpr uint32_t kAckFixedLen = 32;
inline constexpr uint32_t kAckBodyLen = kAckFixedLen + kMacLen; // 32: an ACK
inline constexpr uint32_t kNoEcho = 0xFFFFFFFF; // hold_ns of a packet that echoes nothing
inline constexpr uint32_t kMaxAckBodyLen = kAckBodyLen + 4 * kMaxNackRanges;

// One retransmission request for one message: what a NACK carries, and what
// travels, in memory, from the code that detects a gap (the receiver's placer,
// the sender's timer) to the code that serves it (136 bytes, a multiple of 4).
struct Nack {
    uint16_t flow;
    uint16_t nranges;
    uint32_t msg_id;
    NackRange ranges[kMaxNackRanges];
};
static_assert(sizeof(Nack) % 4 == 0);

// An ACK or a NACK, decoded. n.flow is the destination flow (the sender's id).
struct Control {
    bool nack = false; // else ACK
    uint32_t released_upto = 0;
    uint32_t acked_upto = 0;
    uint32_t sender_epoch = 0;
    uint32_t receiver_epoch = 0;
    uint32_t hold_ns = kNoEcho; // the echo's age at the receiver (kNoEcho: none)
    uint16_t echo = 0;          // a data packet's send stamp (its IPv4 identification)
    uint64_t seq = 0;           // the flow's control packets' number (wire only; 0 in memory)
    Nack n{};
};
static_assert(sizeof(Control) % 4 == 0);

// Builds an ACK or NACK from the session's L2-L4 template (own address ->
// peer). nullptr when the pool is empty or the ranges do not fit.
rte_mbuf* build_ack(rte_mempool* pool, const uint8_t (&l2l4)[kEthLen + kIpLen + kUdpLen], const SipKey& key,
                    const Control& c);

// Reads an ACK/NACK that parse_packet() accepted as control: ControlMalformed
// (lengths, ranges, reserved, flags), ControlBadAuth (the MAC, with `key`),
// else None with `out` filled. The MAC is checked before any field is believed.
DropReason parse_ack(const rte_mbuf* m, const ParsedPacket& p, const SipKey& key, Control& out);

// --- sessions ---------------------------------------------------------------

enum class SessionType : uint8_t { Connect = 1, Accept = 2, Refuse = 3, Keepalive = 4, Reset = 5, Close = 6, Retry = 7 };
const char* to_string(SessionType t);

inline constexpr uint8_t kKeepaliveAsk = 0x01;    // answer me (a liveness probe)
inline constexpr uint8_t kKeepaliveAnswer = 0x02; // the answer
inline constexpr uint16_t kKeysGiven = 0x01;
// data_flags: --data-auth, the version 2 tag covers the payload too (data_tag.h).
inline constexpr uint16_t kDataAuth = 0x0001;

// Why a session was refused or reset. A REFUSE names the setting with both
// sides' values, so the refused side can say exactly what differs.
enum class RefuseReason : uint16_t {
    None = 0,
    NoListener = 1,   // nobody listens on that service
    Flows = 2,        // number of flows
    MsgSize = 3,      // the largest message
    RingSize = 4,     // completion slots per flow
    Mtu = 5,          // the agreed MTU leaves no room for a packet
    Key = 6,          // a flow's completion key (index: the flow)
    NoRoom = 7,       // the acceptor has no flow ids or memory for it
    UnknownSession = 8, // RESET: the peer holds no such session (it restarted)
    Closed = 9,       // RESET: the session was closed or replaced
    Busy = 10,        // the listener takes no more sessions
    Version = 11,     // the data version: the refuser's least, the one offered
};
const char* to_string(RefuseReason r);

struct KeyOverride {
    uint16_t index;
    uint32_t key;
};
inline constexpr uint32_t kMaxKeyOverrides = 128; // 8 bytes each: a CONNECT stays under 1200 bytes

struct SessionMsg {
    SessionType type = SessionType::Keepalive;
    uint8_t flags = 0;
    uint16_t service = 0;
    uint16_t dst_session = 0; // the header's flow field
    uint16_t src_session = 0;
    uint32_t src_epoch = 0;
    uint32_t dst_epoch = 0;
    uint64_t nonce = 0;
    uint64_t seq = 0;
    uint64_t cookie = 0; // CONNECT (echoed), RETRY
    // CONNECT, ACCEPT
    uint16_t nflows = 0;
    uint16_t flow_base = 0;
    uint32_t mtu = 0;
    uint32_t ring_size = 0;
    uint32_t max_msg = 0;
    uint32_t key = 0;
    uint16_t key_flags = 0;
    uint16_t noverrides = 0;
    uint16_t data_version = kVersion; // CONNECT: offered (the highest); ACCEPT: taken
    uint16_t data_flags = 0;          // kDataAuth: CONNECT: offered; ACCEPT: taken
    uint64_t key_nonce = 0;           // ACCEPT: the acceptor's, for the data keys
    KeyOverride overrides[kMaxKeyOverrides]{};
    // The sender's rails beyond its first (rail 1, 2, ...).
    uint8_t nrails = 0;
    RailAddress rails[kMaxRails - 1]{};
    // REFUSE, RESET
    RefuseReason reason = RefuseReason::None;
    uint16_t index = 0;
    uint64_t expected = 0;
    uint64_t got = 0;
};

inline constexpr uint32_t kSessionFixedLen = 32;
uint32_t session_body_len(const SessionMsg& s); // MAC included

rte_mbuf* build_session(rte_mempool* pool, const uint8_t (&l2l4)[kEthLen + kIpLen + kUdpLen], const SipKey& key,
                        const SessionMsg& s);

// A session packet in two steps, since the key depends on what it says (the
// service names the listener; the session id names the session): read()
// decodes without believing (ControlMalformed), then authentic() checks the
// MAC with the key the claimed session or listener holds.
struct SessionFrame {
    uint8_t bytes[kHeaderLen + kSessionFixedLen + 48 + 8 * kMaxKeyOverrides + 12 * (kMaxRails - 1) + kMacLen];
    uint32_t len = 0; // header + body, MAC included
};
DropReason read_session(const rte_mbuf* m, const ParsedPacket& p, SessionFrame& raw, SessionMsg& out);
bool authentic(const SessionFrame& raw, const SipKey& key);

} // namespace tailmark
