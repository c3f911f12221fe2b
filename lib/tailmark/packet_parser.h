// Frame-level validation of a received packet against the wire format.
// Flow-level checks (key, slot, window, region) belong to RxPlacer, which
// knows the flow; everything decidable from the frame alone is here.
#pragma once

#include <cstdint>

#include <rte_mbuf.h>

#include "tailmark/drop_reason.h"
#include "tailmark/wire.h"

namespace tailmark {

struct ParserConfig {
    uint16_t udp_port = kDefaultUdpPort;
    bool verify_ip_checksum = true;   // in software when the NIC gave no verdict
    bool verify_udp_checksum = false; // non-zero checksums; the trailer CRC covers payload
};

struct ParsedPacket {
    Header hdr;
    Trailer trailer;          // valid only when is_last()
    uint32_t payload_off = 0; // byte offset of the payload in the frame
    uint32_t body_len = 0;    // UDP payload after the Header (control packets)
    uint16_t ip_id = 0;       // IPv4 identification, network order: a data packet's send stamp
    uint64_t tag = 0;         // version 2 data packets: the keyed tag after the header (data_tag.h)

    bool is_last() const { return has(hdr.flags, Flags::Last); }
    // ACK, NACK or SESSION: never data (the parser refuses them with LAST).
    bool is_control() const {
        return has(hdr.flags, Flags::Ack) || has(hdr.flags, Flags::Nack) || has(hdr.flags, Flags::Session);
    }
    bool is_session() const { return has(hdr.flags, Flags::Session); }
};

// Returns DropReason::None and fills `out` when the frame is a well-formed
// tailmark packet: version 1, or a version 2 data packet (its tag read, not
// checked: that takes the flow's key, RxPlacer's). Control packets are
// version 1 in every session. Works on chained mbufs; never reads past pkt_len.
DropReason parse_packet(const rte_mbuf* m, const ParserConfig& cfg, ParsedPacket& out);

} // namespace tailmark
