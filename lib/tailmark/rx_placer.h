// The receiver: validates packets, places each payload at its offset in the
// slot's receive region, tracks which packets of a message are in, and writes
// the completion slot once the LAST packet's trailer is valid, every byte is
// placed, and the CRC32C matches.
//
// One RxPlacer belongs to one rx lcore. It is never shared: its counters and
// per-slot state are written by that lcore only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <rte_mbuf.h>

#include "tailmark/completion_ring.h"
#include "tailmark/drop_reason.h"
#include "tailmark/packet_parser.h"
#include "tailmark/siphash.h"

namespace tailmark {

// A flow's data version and, for version 2, the key of its packets' tags
// (data_tag.h) and, with --data-auth, the POLYVAL key their tags cover the
// payload with. Version 0: no such flow.
struct FlowAuth {
    SipKey key{};
    uint8_t version = 0;
    bool data_auth = false;
    uint8_t auth_h[16]{};
    // A flow whose frames never leave this process: they come only over the
    // in-memory loopback between two of its applications. Nothing to prove,
    // as for its version 1: no CRC32C is checked (nor made while copying).
    // A frame of it from a port is no flow's (unknown_flow), and does not
    // move it (set_handoff's arrivals).
    bool loopback = false;
};

enum class CompletionMode : uint8_t {
    Message, // one completion write per message (tailmark)
    Packet,  // one completion write per data packet (the conventional baseline)
};

struct RxCounters {
    uint64_t packets = 0;     // seen by the placer
    uint64_t placed = 0;      // payloads written to a region
    uint64_t bytes = 0;       // payload bytes placed
    uint64_t streamed = 0;    // of placed: by streaming stores (set_stream_min)
    uint64_t completions = 0; // completion slot writes (messages)
    uint64_t packet_completions = 0; // per-packet completion writes (packet mode)
    uint64_t retx = 0;        // data packets flagged RETX (well-formed, any outcome)
    uint64_t nacks = 0;       // retransmission requests (Nack records) emitted
    uint64_t nack_q_full = 0; // ... postponed: the request queue was full
    // Packets once placed whose state was thrown away: a LAST that
    // contradicts them, or a retransmitted LAST replacing a conflicting one.
    // Retransmission rebuilds the message. Not drops: those packets were placed.
    uint64_t discarded = 0;
    DropCounters drops{};

    uint64_t dropped() const {
        uint64_t n = 0;
        for (uint64_t d : drops)
            n += d;
        return n;
    }
};

// Per-packet completion record (packet mode): what a conventional transport
// hands its consumer for every packet.
struct PacketCompletion {
    uint32_t msg_id;
    uint16_t pkt_idx;
    uint16_t pkt_count; // from the trailer on the LAST packet, 0 on the others
    uint32_t offset;
    uint32_t len;
    uint64_t rx_tsc;    // when the packet arrived (the burst's TSC)
};
static_assert(sizeof(PacketCompletion) == 24); // rte_ring elements: a multiple of 4

class RxPlacer {
public:
    static constexpr size_t kMaxFlows = 16384; // installed at once
    RxPlacer(const ParserConfig& cfg, int socket_id);
    ~RxPlacer();
    RxPlacer(const RxPlacer&) = delete;
    RxPlacer& operator=(const RxPlacer&) = delete;

    // A flow's receive state, allocated on any thread (prepare_flow) and
    // handed to the owner lcore (install), so the data path never allocates.
    // The ring must outlive it. `stride` is the sender's payload bytes per
    // full packet (stride_for_mtu of the agreed MTU), agreed like the key:
    // with it the receiver checks every packet's offset against the group
    // geometry, so packets cannot overlap and a byte count proves every byte
    // was placed. nullptr on bad arguments or no memory.
    struct FlowRx;
    // `auth`: version 1 (nothing to check, the default) or version 2 with its
    // tag key: then a packet places nothing unless it is version 2 and its
    // tag verifies (data_bad_tag), and nothing it carries is learnt from.
    static FlowRx* prepare_flow(uint16_t flow, CompletionRing* ring, uint32_t key, uint32_t stride, int socket_id,
                                const FlowAuth& auth = {{}, kVersion});
    static void destroy_flow(FlowRx* f);
    bool install(FlowRx* f);        // false: the id is taken
    FlowRx* uninstall(uint16_t flow); // the caller destroys it
    // prepare_flow + install (set-up on one thread, and tests).
    bool add_flow(uint16_t flow, CompletionRing* ring, uint32_t key, uint32_t stride, const FlowAuth& auth = {{}, kVersion});

    // Packet mode: per-packet completions are pushed here (single producer).
    void set_packet_completion_ring(uint16_t flow, struct rte_ring* r);
    // May change while the rx lcore runs (the shell's `set completion`, with
    // nothing in flight): a relaxed atomic, read once per packet.
    void set_mode(CompletionMode m) { __atomic_store_n(&mode_, static_cast<uint8_t>(m), __ATOMIC_RELAXED); }
    CompletionMode mode() const { return static_cast<CompletionMode>(__atomic_load_n(&mode_, __ATOMIC_RELAXED)); }

    // Flows whose region slots hold at least `bytes` (0: none) are placed
    // with streaming stores (stream_copy.h), around the caches, in message
    // mode: their consumer reads them on another core, or too late for them
    // to be in a cache. Set before the rx lcore runs.
    void set_stream_min(uint64_t bytes) { stream_min_ = bytes; }
    uint64_t stream_min() const { return stream_min_; }

    // Reliability (control.h). Gap detection for this flow: retransmission
    // requests (Nack records) go to `q` (an rte_ring of sizeof(Nack)
    // elements; this placer is one of its producers).
    void set_nack_ring(uint16_t flow, struct rte_ring* q);
    // A message still incomplete after `delay` cycles without progress is
    // NACKed; again after 2x, 4x ... 64x that. 0: no NACK at all.
    void set_nack_delay(uint64_t cycles) {
        nack_delay_ = cycles;
        next_scan_ = 0;
    }
    // Cumulative ACK: every msg_id below it completed (CRC matched). Any lcore.
    uint32_t acked_upto(uint16_t flow) const;
    // The same, as a word another lcore of this process reads (acquire).
    static const uint32_t* acked_word(const FlowRx* f);
    // The send stamp (IPv4 identification) of the newest packet placed for
    // the flow and when it arrived: the ACK echoes it (congestion control's
    // RTT). False before the first. The owner lcore.
    bool echo_of(uint16_t flow, uint16_t& stamp, uint64_t& arrived) const;
    bool echo_of(uint16_t flow, uint16_t& stamp, uint64_t& arrived, uint16_t& port) const;
    // The earliest a burst's packets may have arrived, at most the burst's
    // own rx TSC (0: that TSC; Receiver::rx_burst sets it for each burst):
    // the last poll that left the queue empty, when the lcore was
    // away since (descheduled; engine::rx_step). Until this poll they may
    // have waited in this host's rx ring: endpoint delay, not the path's.
    // The echo's arrival is taken as this floor, so the ACK's hold carries
    // that wait and the sender's congestion control does not read it as a
    // queue (Swift's split of endpoint and fabric delay; af_packet in DPDK
    // 22.11 gives no rx timestamp to say when a packet really came).
    void set_arrival_floor(uint64_t tsc) { floor_ = tsc; }
    // True once after a retransmitted packet came for a message already
    // completed: the sender missed an ACK, send one now. Any lcore.
    bool take_ack_request(uint16_t flow);
    // Gap scan, at most every delay/2: call from the rx lcore's loop.
    void poll(uint64_t now_tsc) {
        if (now_tsc >= next_scan_)
            scan(now_tsc);
    }
    // Messages the consumer released without their completing (it gave them
    // up) count as acknowledged: the cumulative ACK catches up with the
    // cursor, NACKs or not.
    void sync_released(uint16_t flow);

    // Processes and frees a whole burst.
    void rx_burst(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc);
    // The same, but frames that are not data for a placer - ACK, NACK and
    // SESSION packets, and ARP - go to keep[] (not counted, not freed) for
    // the caller to route. keep must hold n.
    void rx_burst_route(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc, rte_mbuf** keep, uint16_t& nkeep);

    // Steering by hand-off (ports whose hash this process cannot compute):
    // owner_of[flow id] names the placer that holds each flow (65536
    // entries, kNoOwner: none; written by the control plane before a flow is
    // installed). rx_burst_route then also keeps the data frames of flows
    // another placer holds, and those of a flow named this placer's that is
    // not installed yet (moving here), for the caller to hand over or hold.
    // arrived_at[flow id] (optional) learns where each flow's data comes in:
    // each placer writes its index there when it differs, so the control
    // plane can move a flow to the placer its frames reach.
    // auth_of[flow id] (65536 entries, version 0: none; written by the
    // control plane before a flow is installed anywhere): where a flow's
    // data arrives is learnt only from a packet that verifies (version 2),
    // so a forger cannot move a flow between placers. nullptr: every
    // packet is learnt from (version 1 only).
    static constexpr uint8_t kNoOwner = 0xFF;
    void set_handoff(const uint8_t* owner_of, uint8_t self, uint8_t* arrived_at = nullptr,
                     const FlowAuth* auth_of = nullptr) {
        owner_of_ = owner_of;
        self_ = self;
        arrived_at_ = arrived_at;
        learn_ = arrived_at;
        auth_of_ = auth_of;
    }
    // Off while the caller processes frames another placer handed over:
    // where those arrived was learned there.
    void learn_arrivals(bool on) { learn_ = on ? arrived_at_ : nullptr; }
    // The bursts that follow came over the in-memory loopback (true) or a
    // port (false, the default): FlowAuth::loopback's flows take only the former.
    void from_loopback(bool on) { from_loopback_ = on; }

    // Processes one packet and leaves it to the caller. Returns None when the
    // payload was placed (whether or not it completed a message).
    DropReason process(const rte_mbuf* m, uint64_t now_tsc);

    const RxCounters& counters() const { return ctr_; }
    RxCounters& counters() { return ctr_; }

private:
    static bool in_window(FlowRx& f, uint32_t msg_id);
    // The completion mode is a template argument, read once per burst: the
    // packet-mode baseline costs message mode no branch per packet.
    template <CompletionMode kMode>
    DropReason place(FlowRx& f, const rte_mbuf* m, const ParsedPacket& p, uint64_t now_tsc);
    // place's stages (rx_placer.cc: one function unless -Dstage_profile).
    static DropReason check_geometry(const FlowRx& f, const ParsedPacket& p);
    static DropReason check_window(FlowRx& f, const Header& h, bool retx);
    static void fetch_for_writing(const FlowRx& f, uint32_t msg_id, uint64_t bytes);
    template <CompletionMode kMode>
    bool streams(const FlowRx& f) const; // message mode only
    void fence_streamed(); // streaming stores so far, before any store after it
    void place_streamed(FlowRx& f, uint32_t slot_idx, const rte_mbuf* m, const ParsedPacket& p);
    template <CompletionMode kMode>
    DropReason claim(FlowRx& f, const ParsedPacket& p, uint64_t now_tsc);
    template <CompletionMode kMode>
    DropReason process_as(const rte_mbuf* m, uint64_t now_tsc, bool route);
    template <CompletionMode kMode>
    void burst_as(rte_mbuf** pkts, uint16_t n, uint64_t now_tsc, rte_mbuf** keep, uint16_t* nkeep);
    void catch_up(FlowRx& f);
    template <CompletionMode kMode>
    void complete(FlowRx& f, uint32_t slot_idx, uint64_t now_tsc);
    void write_completion(FlowRx& f, uint32_t slot_idx, uint32_t msg_id, const Trailer& t, uint64_t now_tsc);
    void advance(FlowRx& f);
    // tail: also ask for everything past the highest packet seen.
    void nack(FlowRx& f, uint32_t slot_idx, uint64_t now_tsc, bool tail);
    void scan(uint64_t now_tsc);

    ParserConfig cfg_;
    int socket_;
    uint8_t mode_ = static_cast<uint8_t>(CompletionMode::Message);
    RxCounters ctr_;
    uint64_t stream_min_ = 0;
    bool streamed_ = false; // streaming stores since the last fence
    uint64_t nack_delay_ = 0;
    uint64_t next_scan_ = 0;
    FlowRx** table_ = nullptr; // indexed by flow id, 65536 entries
    const uint8_t* owner_of_ = nullptr; // set_handoff
    const FlowAuth* auth_of_ = nullptr; // set_handoff
    bool from_loopback_ = false;        // from_loopback
    uint8_t* arrived_at_ = nullptr;
    uint8_t* learn_ = nullptr; // arrived_at_, or null while processing handed-over frames
    uint64_t floor_ = 0;       // set_arrival_floor
    uint8_t self_ = kNoOwner;
    std::vector<FlowRx*> flows_;
};

} // namespace tailmark
