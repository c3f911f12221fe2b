// The receiver half of the protocol, one engine per rx queue (so per lcore):
// the placer (validation, placement, completion) plus the ACK/NACK
// scheduler that reports its cursors to each flow's sender.
//
//   receiver.rx_burst(pkts, n, now);  // data placed; ACK/NACK, SESSION and ARP frames routed
//   receiver.poll(now);               // gap scan (NACKs), ACKs when the cursors moved
//
// Frames that are not data go where they belong: an ACK or NACK to the
// Sender that owns its flow id (routes.sender_of), SESSION and ARP frames to
// the control plane. ACKs and NACKs leave authenticated (control.h) on a
// Sender's ctl_out ring, or, when the sender is in this process (loopback),
// as Control records straight to its local inbox.
//
// One thread (the owner lcore) calls everything but make_flow/free_flow.
// Time comes in as an argument.
#pragma once

#include <cstdint>
#include <vector>

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tailmark/completion_ring.h"
#include "tailmark/control.h"
#include "tailmark/rx_placer.h"
#include "tailmark/session_link.h"

namespace tailmark {

struct RecvFlowSpec {
    uint16_t id = 0;              // this end's id: data packets carry it
    CompletionRing* ring = nullptr;
    uint32_t key = 0;
    uint32_t stride = 0;          // of the agreed MTU
    uint16_t peer_flow = 0;       // the sender's id: ACKs and NACKs carry it
    SessionLink* link = nullptr;  // nullptr: nobody to acknowledge to
    rte_ring* pkt_cq = nullptr;   // packet mode: per-packet completions
    FlowAuth auth{{}, kVersion};  // its session's data version and (2) its tag key
};

// Where frames that are not data go. Static after set-up.
struct ReceiverRoutes {
    const uint8_t* sender_of = nullptr; // 65536 entries: a flow id's Sender (kNoSender: none)
    rte_ring* const* wire_in = nullptr; // per Sender: its ACK/NACK frames
    rte_ring* const* local_in = nullptr; // per Sender: Control records of local receivers
    uint32_t nsenders = 0;
    rte_ring* control = nullptr;        // SESSION and ARP frames, to the control plane
    rte_ring* ctl_out = nullptr;        // this receiver's ACKs and NACKs, to a Sender that transmits
    // Steering by hand-off, for ports that spread flows over rx queues by a
    // hash this process cannot compute (af_packet's fanout, a tap's queues):
    // a data frame of a flow another Receiver holds goes to that one's
    // handoff ring. rx_owner: 65536 entries, RxPlacer::kNoOwner for none;
    // nullptr: no hand-off (every flow's data reaches its own queue).
    const uint8_t* rx_owner = nullptr;
    rte_ring* const* handoff_in = nullptr; // per Receiver, by index (MP/SC)
    uint32_t nreceivers = 0;
    uint8_t self = 0;                      // this Receiver's index
    // Optional: where each flow's data arrives (RxPlacer::set_handoff), for
    // the control plane to move flows to the Receiver their frames reach. A
    // frame of a flow named this Receiver's but not installed here yet (it
    // is moving in) waits on this Receiver's own ring, for at most
    // kHoldLimitUs of continuous holding, then is dropped (unknown_flow).
    uint8_t* rx_arrived = nullptr;
    // With rx_owner: each flow's data version and tag key (RxPlacer::set_handoff).
    const FlowAuth* auth_of = nullptr;
};
inline constexpr uint8_t kNoSender = 0xFF;
// A flow moving between Receivers: how long its frames may wait for it. A
// move is two lcore requests and the control loop between them, each of
// which may wait for a CPU slice (ms) where lcores share CPUs.
inline constexpr uint64_t kHoldLimitUs = 50000;

struct ReceiverConfig {
    ParserConfig parser;
    rte_mempool* pool = nullptr; // ACK/NACK mbufs
    uint64_t nack_delay = 0;     // cycles a gap may be reordering before its NACK (0: no NACKs)
    uint64_t ack_min = 0;        // cycles: a moved cursor is ACKed within this
    uint32_t ack_batch_div = 4;  // ... and at once after ring size / div messages
    uint32_t ack_scan = 64;      // flows the ACK scheduler visits per poll
    // While data arrives, an ACK at least this often (cycles), echoing the
    // newest packet's send stamp: the sender's congestion control lives on
    // these RTT samples. 0: only when the cursors move.
    uint64_t ack_feedback = 0;
    uint64_t tsc_hz = 0;         // for the echo's hold time in ns (0: rte_get_tsc_hz())
    // The mbuf dynamic field of the rx TSC (drivers/rx_timestamp.h; -1:
    // none). ACK and NACK frames routed to a Sender carry there the earliest
    // they may have arrived (rx_burst's `since`), for the Sender to count
    // their wait in this host as such (SenderConfig::arrival_field).
    int arrival_field = -1;
    ReceiverRoutes routes;
    // Rails (session_link.h): rail r's port. An ACK or NACK goes back by
    // the rail its flow's newest packet came by (so a rail that fails takes
    // no acknowledgement with it, the first one included).
    uint32_t rails = 1;
    uint16_t rail_ports[kMaxRails]{};
    CompletionMode mode = CompletionMode::Message;
    uint64_t stream_min = 0;     // RxPlacer::set_stream_min (0: no streaming stores)
    const char* name = "tm_rcv"; // prefix of its rings' names (unique per Receiver)
    int socket = 0;
};

struct ReceiverCounters {
    uint64_t acks_tx = 0;     // ACKs sent (wire or local)
    uint64_t nacks_tx = 0;    // NACKs sent
    uint64_t ctl_packets = 0; // of them, as packets (not in memory to a local sender)
    uint64_t ctl_lost = 0;    // ACK/NACK not sent: no mbuf, or the ctl_out ring full (sent again later)
    uint64_t routed = 0;      // frames handed to a Sender or the control plane
    uint64_t handed_out = 0;  // data frames handed to the Receiver that holds their flow
    uint64_t handed_in = 0;   // ... and taken from the others (and its own ring)
    uint64_t held = 0;        // of handed_out: frames of a flow moving here, held on its own ring
    DropCounters drops{};     // routed frames refused: no owner, or its queue full
};

struct RecvFlow; // opaque outside receiver.cc

class Receiver {
public:
    explicit Receiver(const ReceiverConfig& cfg);
    ~Receiver();
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;
    bool ok() const { return ok_; }

    // Any thread: allocate or free a flow's receive state.
    static RecvFlow* make_flow(const RecvFlowSpec& spec, int socket);
    static void free_flow(RecvFlow* f);

    // --- the owner lcore ---
    bool install(RecvFlow* f);
    RecvFlow* remove(uint16_t id);
    // Validates, places and frees data; routes (or drops and counts) the rest.
    // since: the earliest the burst may have arrived, the last poll that
    // left the queue empty (RxPlacer::set_arrival_floor; 0: none known).
    void rx_burst(rte_mbuf** pkts, uint16_t n, uint64_t now, uint64_t since = 0);
    // The same, for a burst of the in-memory loopback between applications
    // of this process: the only frames its flows take (FlowAuth::loopback).
    void rx_loopback_burst(rte_mbuf** pkts, uint16_t n, uint64_t now) {
        placer_.from_loopback(true);
        rx_burst(pkts, n, now);
        placer_.from_loopback(false);
    }
    // Data frames other Receivers handed over (placed as if received
    // here), NACKs (the placer's gap scan), then ACKs where the cursors
    // moved by a batch, or at all ack_min ago, or a retransmission asked for
    // one. True when it did anything.
    bool poll(uint64_t now);

    RxPlacer& placer() { return placer_; }
    const RxPlacer& placer() const { return placer_; }
    const ReceiverCounters& counters() const { return ctr_; }
    void set_mode(CompletionMode m) { placer_.set_mode(m); }

    static uint16_t id_of(const RecvFlow* f);
    // Its cumulative ACK, for a sender in this process (SendFlowSpec::local_acked).
    static const uint32_t* acked_word(const RecvFlow* f);
    // Any thread: the consumer cursor the last ACK carried (queued for the
    // wire). Equal to the ring's released(): the peer will hear of every
    // release (a session closed after that loses no delivery report).
    static uint32_t released_sent(const RecvFlow* f);
    static const RecvFlowSpec& spec_of(const RecvFlow* f);

private:
    bool emit(RecvFlow& f, Control& c, uint64_t now);
    bool feedback_due(const RecvFlow& f, uint64_t now) const;
    // The rail of rx port `port` (0: the first, or not a rail of the session's).
    uint32_t rail_of(uint16_t port, uint32_t rails) const {
        for (uint32_t r = 1; r < rails && r < cfg_.rails; r++)
            if (cfg_.rail_ports[r] == port)
                return r;
        return 0;
    }
    void route(rte_mbuf* m, uint64_t now);

    ReceiverConfig cfg_;
    RxPlacer placer_;
    bool ok_ = false;
    ReceiverCounters ctr_;
    rte_ring* nack_q_ = nullptr; // the placer's NACK requests (SP/SC, this lcore)
    RecvFlow** table_ = nullptr; // by id
    std::vector<RecvFlow*> flows_;
    std::vector<RecvFlow*> acking_; // flows with a remote sender: the ACK scheduler's round robin
    uint32_t rr_ = 0;
    uint64_t hold_since_ = 0;  // holding frames of a flow moving here since (0: not)
    uint64_t arrived_ = 0;     // the burst's earliest arrival (rx_burst), for the ACKs it routes
    uint64_t hold_limit_ = 0;  // kHoldLimitUs in TSC cycles
    bool held_now_ = false;    // this poll's drain held a frame again
};

} // namespace tailmark
