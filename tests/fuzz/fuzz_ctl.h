// libFuzzer harness for the control packets (issue 36, item 5): SESSION and
// ARP frames through tailmark::SessionTable::on_frame, the handshake's both
// ends (a listener, and a session the table connects), and ACK and NACK
// frames through Sender::on_wire_control, for a flow with messages in
// flight on a net_ring port. Time is explicit (1 cycle = 1 ns); polls of
// the table and the sender run when a record says so. fuzz_ctl.cc holds the
// target; replay_main.cc the replay binary, ctl_corpus_gen.cc its seeds.
//
// Input format (everything big-endian):
//
//   byte 0          run configuration, kCfg* bits
//   then records    [ctl: 1 B][len: 2 B][frame: len & kLenMask bytes] ...
//
// Each record is one Ethernet frame from the wire, to the table or (kCtlSender)
// to the sender; an empty one is no frame, only its time step (and, with
// kCtlSender, the sender started). `ctl` asks the harness to repair the frame first, in this
// order: echo, seq, lengths, MAC; the MAC last, over what the others wrote.
// The harness holds every secret, so a repaired packet is authentic: the
// fuzzer gets past the MAC into the state machines, while records without
// kCtlFixMac explore the refusals. Echoed values are those a peer learns from
// the packets the table or the sender sent it (their ids, epochs, nonces, the
// RETRY's cookie), never more.
//
// State (the table, the sender, time, the random seed) is created afresh for
// every input: an input replays deterministically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mempool.h>

#include "replay.h"
#include "tailmark/drop_reason.h"
#include "tailmark/siphash.h"
#include "tailmark/wire.h"

namespace tmfuzz::ctl {

// This end (the table, the sender) and its peer (the fuzzer).
inline constexpr uint32_t kIp = RTE_IPV4(198, 18, 0, 1);
inline constexpr uint32_t kPeerIp = RTE_IPV4(198, 18, 0, 2);
inline constexpr uint16_t kPort = tailmark::kDefaultUdpPort;
inline constexpr rte_ether_addr kMac = {{0x02, 0, 0, 0, 0, 0x0a}};
inline constexpr rte_ether_addr kPeerMac = {{0x02, 0, 0, 0, 0, 0x0b}};

// The table listens on kService with kListenKey (its sessions take that key)
// and, unless kCfgNoConnect, connects to the peer at set-up with kConnKey.
inline constexpr uint16_t kService = 4242;
inline constexpr tailmark::SipKey kListenKey{0x1111111111111111ull, 0x2222222222222222ull};
inline constexpr tailmark::SipKey kConnKey{0x3333333333333333ull, 0x4444444444444444ull};
// The connector's proposal.
inline constexpr uint16_t kConnFlows = 2;
inline constexpr uint32_t kConnMtu = 9000;
inline constexpr uint32_t kConnRing = 64;
inline constexpr uint32_t kConnMaxMsg = 4096;
inline constexpr uint32_t kConnKeyValue = 0xA1A1A1A1;
inline constexpr uint16_t kConnBase = 10;
// The listener's decision: refuses more than kMaxFlows flows (no_room), a
// ring size that is not a power of two up to 4096 (ring_size), a message
// above 1 MiB (msg_size), given keys other than kAcceptKeyValue (key);
// accepts with the MTU down to 1500, its flow ids from kAcceptBase.
inline constexpr uint16_t kMaxFlows = 8;
inline constexpr uint32_t kAcceptKeyValue = 0xB2B2B2B2;
inline constexpr uint16_t kAcceptBase = 100;

// The sender's flow: ACKs and NACKs name kFlow, its data goes to kPeerFlow.
// It starts at the first kCtlSender record with every credit used
// (kFlowRing messages, sent by a poll); more follow as credits come back,
// kMaxMsgs in all. Message i is kMsgSizes[i % 6] bytes.
inline constexpr uint16_t kFlow = 5;
inline constexpr uint16_t kPeerFlow = 70;
inline constexpr uint32_t kFlowRing = 8;
inline constexpr uint32_t kMaxMsgs = 24;
inline constexpr uint32_t kStride = tailmark::stride_for_mtu(1500);
inline constexpr uint32_t kMsgSizes[] = {100, 3000, 0, 2 * kStride, 1, kStride};
inline constexpr tailmark::SipKey kAckKey{0x5555555555555555ull, 0x6666666666666666ull};
inline constexpr uint32_t kSenderEpoch = 0x51E00001; // the session's epochs, as the flow's link holds them
inline constexpr uint32_t kReceiverEpoch = 0x7EE20002;

// Byte 0: configuration of the run.
inline constexpr uint8_t kCfgNoConnect = 0x01;  // the table only listens
inline constexpr uint8_t kCfgDefer = 0x02;      // the listener defers: accept_ready() after the record
inline constexpr uint8_t kCfgDataAuth = 0x04;   // Config::data_auth (the acceptor requires it, the connector asks)
inline constexpr uint8_t kCfgV1 = 0x08;         // data version 1 only (max_version = min_version = 1)
inline constexpr uint8_t kCfgSmallTable = 0x10; // max_sessions = 2 (else 4)
inline constexpr uint8_t kCfgKeysGiven = 0x20;  // the connector's keys are given (the acceptor must hold them)
inline constexpr uint8_t kCfgCc = 0x40;         // the sender's congestion control on
inline constexpr uint8_t kCfgArp = 0x80;        // the connector resolves the peer's MAC by ARP

// Record ctl bits.
inline constexpr uint8_t kCtlFixLen = 0x01;  // IPv4 total length, UDP length, pay_len; the IPv4 checksum
inline constexpr uint8_t kCtlFixMac = 0x02;  // the MAC, with the key its destination holds
// Echo (zeros filled, other values kept). SESSION: a CONNECT's cookie (the
// latest RETRY's); the destination session and epoch, its service, the
// peer's own id and epoch as the table knows them, and the nonce the type
// must echo (CONNECT's for ACCEPT, REFUSE, RETRY; the latest probe's for a
// KEEPALIVE answer or RESET; a KEEPALIVE probe's sequence, upper half).
// ACK/NACK: flow and epochs; the cursors, acked_upto, released_upto and a
// NACK's msg_id, are taken relative to the sender's released cursor
// (value + released), and a NACK's nranges follows its length.
inline constexpr uint8_t kCtlFixEcho = 0x04;
inline constexpr uint8_t kCtlFixSeq = 0x08;  // a fresh number: above every one its destination took
inline constexpr uint8_t kCtlAcceptor = 0x10; // SESSION echo: the newest acceptor session (else the connector's)
inline constexpr uint8_t kCtlStepShift = 5;   // 2 bits: time steps before the frame, then polls
inline constexpr uint8_t kCtlSender = 0x80;   // the frame goes to the sender (else the table)

inline constexpr uint8_t kStepNone = 0;
inline constexpr uint8_t kStepShort = 1; // +100 us (a tenth of the sender's retransmission timeout)
inline constexpr uint8_t kStepSec = 2;  // +1 s (a keep-alive)
inline constexpr uint8_t kStepLong = 3; // +6 s (past the peer, connect and cookie timeouts)

// len field: the low 15 bits are the frame's length. A frame longer than an
// mbuf's data room (1920 bytes) is chained; kLenSplit chains any frame, cut
// at its middle.
inline constexpr uint16_t kLenMask = 0x7FFF;
inline constexpr uint16_t kLenSplit = 0x8000;

constexpr uint8_t ctl(uint8_t fix, uint8_t step = kStepNone) {
    return static_cast<uint8_t>(fix | (step << kCtlStepShift));
}

// What the last input did, for the seed generator's self-check.
struct RunStats {
    uint64_t records = 0;
    std::string sent;  // the table's packets in order: "connect retry accept keepalive_answer arp ..."
    std::string ends;  // sessions' ends in order: "peer_closed replaced ..."
    uint32_t accepted = 0;  // acceptor sessions made (each from a CONNECT with a valid cookie)
    uint32_t confirmed = 0; // of them, confirmed by the connector
    uint64_t established = 0, refused = 0; // the table's counters
    uint64_t acks = 0, nacks = 0, delivered = 0, failed = 0, retx_pkts = 0; // the sender's
    tailmark::DropCounters drops{}; // the table's and the sender's
};
const RunStats& last_stats();

// The mbuf pool the harness uses (for the seed generator's builders).
rte_mempool* pool();

} // namespace tmfuzz::ctl
