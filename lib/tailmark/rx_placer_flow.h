// The RxPlacer's private state, shared by its two files (rx_placer.cc: the
// packet path, completion, the cumulative ACK and the gap scan;
// rx_placer_flows.cc: the flow table). Not installed: nothing outside the
// placer sees inside a FlowRx.
#pragma once

#include <cstdint>

#include <rte_ring.h>

#include "tailmark/completion_ring.h"
#include "tailmark/polyval.h"
#include "tailmark/rx_placer.h"
#include "tailmark/siphash.h"
#include "tailmark/stream_copy.h"
#include "tailmark/wire.h"

namespace tailmark {

namespace rx_placer_detail {
enum class SlotState : uint8_t { Idle, Receiving, Completed };

// Receive state of one slot: which packets of the message in it are placed.
// A plain bitset, not rte_bitmap: resetting must cost the message's size,
// not the capacity (a 64-byte message must not clear 8 KiB of bits).
struct SlotRx {
    uint32_t msg_id;
    SlotState state;
    bool have_last;
    uint16_t pkt_count; // from the trailer, once the LAST is in
    uint32_t received;  // distinct packets placed
    uint32_t hi_idx;    // highest pkt_idx placed + 1
    uint64_t bytes;     // payload bytes placed
    uint64_t max_end;   // highest offset + pay_len placed
    Trailer trailer;
    uint64_t* seen;     // FlowRx::max_pkts bits
    uint64_t progress_tsc; // last packet placed (or the slot started waiting)
    uint64_t nack_tsc;     // last NACK for it
    uint8_t nacks;         // NACKs so far: the back-off exponent
    bool discarded;        // its bytes failed the CRC (or length): wanted again whole
    // CRC32C of the bytes [0, crc_upto), computed while copying the packets
    // that arrived in offset order; the rest is checksummed at completion.
    uint32_t crc_state;
    uint32_t crc_upto;
};
} // namespace rx_placer_detail

struct RxPlacer::FlowRx {
    CompletionRing* ring;
    uint32_t key;
    uint32_t mask;
    uint64_t region_size;
    uint32_t stride;   // payload bytes of every full packet of a group
    uint32_t max_pkts; // the most packets a group that fits the region has
    uint16_t id;
    rte_ring* pkt_cq;  // packet mode
    rte_ring* nack_q;  // reliability: retransmission requests
    rx_placer_detail::SlotRx* slots;
    uint64_t* bits;
    // The consumer's cursor as last read: a lower bound of it, since it only
    // moves forward. A message outside [released_seen, released_seen + ring
    // size) needs a fresh read; one inside, see place().
    const uint32_t* released_word;
    const uint32_t* gave_up_word;
    uint32_t released_seen;
    uint32_t gave_up_seen;
    uint32_t cum;      // every msg_id below it completed
    uint32_t hi_msg;   // one past the highest msg_id any packet was placed for
    bool any;          // hi_msg is valid
    bool owned;        // made by add_flow: the placer frees it (install()ed flows are the caller's)
    uint16_t echo;     // IPv4 identification of the newest packet placed (network order): its send stamp
    uint64_t echo_tsc; // when it arrived (0: nothing placed yet)
    uint16_t echo_port; // the port it came in on (rails: the ACK goes back by its rail)
    uint8_t version;   // its session's data version: 2, every packet tagged under tag_key
    bool data_auth;    // --data-auth: the tag covers the payload, through auth_key
    bool loopback;     // FlowAuth::loopback: no CRC32C checked; frames from a port are not its
    // A slot's crc_upto when it starts: 0, or (no CRC) past any offset, so
    // that no packet takes the copy that checksums.
    uint32_t crc_from;
    SipKey tag_key;
    alignas(64) uint32_t acked;   // cum, published (atomic) for the ACK sender
    uint32_t ack_req;             // atomic: a RETX came for a completed message
    PolyvalKey auth_key; // data_auth (256 bytes, read only by a packet of this flow)
};

// Here, not in rx_placer.cc: a completion's flag (write_completion) and a
// flow leaving (uninstall) both fence, and both stay inlined.
[[gnu::always_inline]] inline void RxPlacer::fence_streamed() {
    if (streamed_) {
        stream_fence();
        streamed_ = false;
    }
}

} // namespace tailmark
