// Why a received packet was dropped. Every malformed, hostile or unexpected
// packet maps to exactly one reason and is counted under it.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tailmark {

#define TAILMARK_DROP_REASONS(X)                                                            \
    X(FrameTooShort, "frame_too_short")       /* shorter than Eth+IPv4+UDP+Header */       \
    X(VlanTagged, "vlan_tagged")              /* 802.1Q / QinQ frame */                    \
    X(NotIpv4, "not_ipv4")                    /* other EtherType */                        \
    X(IpBadVersion, "ip_bad_version")         /* IPv4 header version field != 4 */         \
    X(IpOptions, "ip_options")                /* IHL != 5 */                               \
    X(IpFragment, "ip_fragment")              /* MF set or fragment offset != 0 */         \
    X(IpNoDf, "ip_no_df")                     /* DF clear */                               \
    X(IpBadLength, "ip_bad_length")           /* total length vs frame */                  \
    X(IpBadChecksum, "ip_bad_checksum")                                                     \
    X(NotUdp, "not_udp")                                                                    \
    X(WrongPort, "wrong_udp_port")                                                          \
    X(UdpBadLength, "udp_bad_length")         /* UDP length vs IP length */                \
    X(UdpBadChecksum, "udp_bad_checksum")     /* non-zero checksum that does not verify */ \
    X(BadVersion, "bad_version")              /* tailmark version != 1 */                  \
    X(BadFlags, "bad_flags")                  /* unknown bit or impossible combination */  \
    X(PayLenMismatch, "pay_len_mismatch")     /* pay_len vs UDP length */                  \
    X(EmptyPacket, "empty_packet")            /* non-LAST packet with no payload */        \
    X(BadMagic, "bad_magic")                                                                \
    X(BadReserved, "bad_reserved")                                                          \
    X(BadFlag, "bad_flag")                    /* trailer flag != msg_id + 1 */             \
    X(BadPktCount, "bad_pkt_count")           /* 0, or LAST not at index pkt_count-1 */    \
    X(BadOffset, "bad_offset")                /* offset off the group geometry */          \
    X(UnknownFlow, "unknown_flow")                                                          \
    X(BadKey, "bad_key")                                                                    \
    X(BadSlot, "bad_slot")                    /* slot != msg_id mod ring */                \
    X(MsgTooLarge, "msg_too_large")           /* msg_len beyond the slot's region */       \
    X(OutsideRegion, "outside_region")        /* offset + pay_len beyond the region */     \
    X(OutsideWindow, "outside_window")        /* msg_id outside the credits granted */     \
    X(PktIdxRange, "pkt_idx_out_of_range")    /* pkt_idx >= pkt_count */                   \
    X(Duplicate, "duplicate")                 /* packet already placed */                  \
    X(AlreadyCompleted, "already_completed")  /* packet of a completed message */          \
    X(ConflictingLast, "conflicting_last")    /* a second, different LAST */               \
    X(LengthMismatch, "length_mismatch")      /* all packets in, bytes != msg_len */       \
    X(CrcMismatch, "crc_mismatch")            /* message discarded */                      \
    X(DataBadTag, "data_bad_tag")             /* version 2: the keyed tag does not verify */ \
    X(Control, "control_unhandled")           /* control packet no one here takes */      \
    X(CompletionQueueFull, "completion_queue_full") /* packet mode: consumer behind */ \
    X(ControlMalformed, "control_malformed")  /* control body: length, ranges, fields */  \
    X(ControlBadAuth, "control_bad_auth")     /* control packet whose MAC fails */        \
    X(ControlStale, "control_stale")          /* authentic, of another incarnation */     \
    X(ControlReplayed, "control_replayed")    /* authentic, its number taken before or too old */ \
    X(NackQueueFull, "nack_queue_full")       /* sender: retransmission requests backlog */ \
    X(FlowFailed, "flow_failed")              /* control packet of a flow given up */     \
    X(UnknownSession, "unknown_session")      /* session packet for no session/listener */ \
    X(ArpNotOurs, "arp_not_ours")             /* ARP for another address, or malformed */ \
    X(ControlBacklog, "control_backlog")      /* control frame: its owner's queue is full */ \
    X(HandoffBacklog, "handoff_backlog")      /* data of another rx lcore's flow: its queue is full */

enum class DropReason : uint8_t {
#define X(name, str) name,
    TAILMARK_DROP_REASONS(X)
#undef X
    Count,
    None = 0xFF, // not dropped
};

inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::Count);

inline constexpr std::array<std::string_view, kDropReasonCount> kDropReasonNames = {
#define X(name, str) str,
    TAILMARK_DROP_REASONS(X)
#undef X
};

constexpr std::string_view to_string(DropReason r) {
    return r == DropReason::None ? "none" : kDropReasonNames[static_cast<size_t>(r)];
}

constexpr size_t index(DropReason r) { return static_cast<size_t>(r); }

// Counters of one lcore, indexed by reason. Owned and written by that lcore only.
using DropCounters = std::array<uint64_t, kDropReasonCount>;

} // namespace tailmark
