// Results of a run: the summary JSON (--summary-json) and the human summary.
// With the benchmark harness (bench/): scripts/bench.sh reads the JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "options/options.h"
#include "service/counters.h"
#include "tailmark/drop_reason.h"
#include "tailmark/tx_paths.h"

namespace tailmark::app {

struct Results {
    Mode mode = Mode::Loopback;
    CompletionMode completion = CompletionMode::Message;
    uint32_t flows = 0;
    uint64_t msg_size = 0;
    uint64_t messages_per_flow = 0;
    uint64_t requested = 0;          // messages this process had to see through
    uint64_t messages_sent = 0;      // fully handed to tx (loopback, send)
    uint64_t messages_completed = 0; // seen complete by a consumer (send: acknowledged by the receiver)
    uint64_t messages_acked = 0;     // send: released_upto summed over flows
    uint64_t messages_verified = 0;
    uint64_t verify_errors = 0;
    uint64_t completion_writes = 0;  // message mode: slot writes; packet mode: per-packet completions
    uint64_t packets_tx = 0;         // accepted by the PMD (data and ACKs)
    uint64_t packets_rx = 0;         // returned by rx bursts (everything)
    // Of those, through the in-memory loopback (--mode service: sessions
    // between applications of this daemon); and what the port itself
    // counted (rte_eth_stats): frames that really went out and came in.
    uint64_t packets_local = 0;
    uint64_t bytes_local = 0; // the payload of those packets
    uint64_t packets_zero_copy = 0; // data packets whose payload was referenced in place (service: the arena), not copied
    uint64_t port_tx = 0, port_rx = 0, port_missed = 0; // missed: frames the port dropped for want of room
    uint64_t acks_tx = 0;
    uint64_t acks_rx = 0;
    uint64_t packets_placed = 0;
    uint64_t packets_streamed = 0; // of packets_placed: by streaming stores (--stream-min)
    uint64_t bytes_payload = 0;      // message payload: completed (loopback, recv) or sent (send)
    DropCounters drops{};
    // Reliability (tailmark/control.h). Sender side: what it retransmitted and
    // why; receiver side: what it asked for and what came back.
    struct Reliability {
        uint64_t retx_pkts = 0;   // data packets sent again (flag RETX)
        uint64_t retx_reqs = 0;   // requests served: NACKs and timer probes
        uint64_t probes = 0;      // LAST packets re-sent by the timer
        uint64_t rto_expired = 0; // timer expiries without progress
        uint64_t stale_reqs = 0;  // requests for messages no longer owed
        uint64_t nacks_tx = 0;    // NACK packets sent (recv)
        uint64_t nacks_rx = 0;    // NACK packets accepted (send)
        uint64_t nacks_early = 0; // of them, nothing new: their packets were on the way (send)
        uint64_t retx_rx = 0;     // RETX data packets that reached the placer
        uint64_t nack_reqs = 0;   // NACK requests the placers raised
    } rel;
    // Congestion control (tailmark/congestion.h), all sessions of the senders.
    struct Congestion {
        uint64_t samples = 0, increases = 0, decreases = 0, loss_decreases = 0, timeouts = 0, paced = 0;
        double rate_mbps = 0;   // the sessions' paced rates, summed, at the end
        double srtt_us = 0;     // the largest smoothed RTT of a session
        double base_rtt_us = 0; // ... and its base RTT
    } cc;
    // How data reaches its flow's rx lcore: "single" (one rx queue), "queue"
    // (net_ring loopback), "rss", "handoff"; and per rx lcore what its queue
    // brought, what it placed and what it passed on or took over.
    std::string steering = "single";
    std::string slow_json; // --trace-slow-ns: the "slow_messages" object (empty: off)
    struct RxLane {
        unsigned lcore = 0;
        uint16_t queue = 0;
        uint64_t packets_rx = 0, placed = 0, handed_out = 0, handed_in = 0, held = 0;
    };
    std::vector<RxLane> rx_lanes;
    uint64_t rx_moves = 0; // handoff: flows moved to the rx lcore their frames reach
    std::string udp_checksum_tx = "off"; // "offload" (the NIC fills it), "software", "off"
    std::string udp_checksum_rx = "off"; // "offload" (the NIC's verdict in the rx flags), "software", "off"
    // Per flow: messages sent, acknowledged (completed at the receiver) and
    // released (consumed); a failed flow's unreleased messages are failed.
    struct Flow {
        uint32_t index = 0; // its registry slot: the shell's `show flow F`, telemetry's /tailmark/flow,F
        uint64_t sent = 0, acked = 0, released = 0, failed = 0;
        const char* state = "ok";
        uint32_t session = 0; // recv: the session it belongs to (sessions[])
        uint64_t gave_up = 0; // releases of messages that never completed (the ring's give-up count)
        // handoff steering: the rx lcore index that held it last, and the one
        // its data last came in on (-1: none, or not hand-off steering)
        int rx_owner = -1, rx_arrived = -1;
        // Its latency (FlowLatency: the consumer's, or send's delivery
        // latency), ns; 0 without samples.
        uint64_t latency_samples = 0;
        double lat_p50_ns = 0, lat_p99_ns = 0;
    };
    std::vector<Flow> per_flow;
    // --paths: every path of every sprayed session, per Sender (tx_paths.h).
    struct Path {
        uint32_t sender = 0;
        tailmark::PathView v;
    };
    std::vector<Path> paths;
    // --rails: per rail (0: --tx-port), its port and what its port sent and
    // received (the port's own counters); and the packets the Senders freed
    // at a rail's full queue or after its stall (its link down).
    struct Rail {
        uint16_t port = 0;
        uint64_t port_tx = 0, port_rx = 0;
    };
    std::vector<Rail> rails;
    uint64_t rail_dropped = 0;
    // The flow registry (run/registry.cc): flows made over the run, slots it
    // holds (per_flow's rows and the forgotten ones' free slots), slots
    // given to a new flow, and the ended sessions forgotten (--keep-ended).
    struct Registry {
        uint64_t flows_made = 0, slots = 0, slots_reused = 0, sessions_forgotten = 0;
    } registry;
    // Sessions (lib/tailmark/session.h): each, and the control plane's counts.
    struct SessionSummary {
        uint32_t index = 0;
        uint16_t id = 0;
        std::string peer, role, state, end;
        uint32_t flows = 0;
        uint32_t data_version = 1; // 2: every data packet tagged
        bool data_auth = false;    // the tags cover the payloads
        bool complete = false;   // recv: every flow consumed --messages
        uint64_t released = 0;   // messages released (consumed) over its flows
        uint64_t completed = 0, verified = 0, verify_errors = 0; // its consumer's
    };
    std::vector<SessionSummary> sessions;
    struct SessionCounts {
        uint64_t tx = 0, rx = 0, arp_tx = 0, arp_rx = 0, established = 0, ended = 0, refused = 0;
        uint64_t ids_reused = 0; // flow ids (both ends' spaces) handed out again after their quarantine
    } sess;
    uint64_t control_tx = 0;     // control packets sent: ACKs, NACKs, session, ARP
    uint64_t control_rx = 0;     // control packets taken: authentic ACKs, NACKs and session packets, ARP answered or learnt
    uint64_t control_lost = 0;   // ACK/NACK the receiver could not send at once (sent again later)
    uint64_t discarded = 0;      // packets once placed whose message state was thrown away
    uint64_t gen_buf_waits = 0;  // the generator waited for a buffer (all in flight)
    SvcCounters svc; // --mode service: the applications' submissions
    // TSC cycles each role spent in iterations where it did work, per unit.
    double tx_cycles_per_packet = 0, rx_cycles_per_packet = 0, consumer_cycles_per_message = 0;
    uint64_t memory_bytes = 0; // DPDK heap (hugepages, or --no-huge memory) in use: pools, rings, regions
    uint32_t flows_failed = 0;
    uint64_t messages_failed = 0;
    uint64_t drops_total = 0;
    uint64_t tx_dropped = 0;         // packets freed after a stalled partial burst
    uint64_t tx_alloc_fail = 0;
    bool fault_shim = false;         // --fault (or -i): what the shim did to received packets
    drivers::FaultCounters fault{};
    double elapsed_s = 0;
    double msgs_per_s = 0;
    double mpps = 0;
    double gbps = 0;
    uint64_t latency_samples = 0;
    double lat_p50_ns = 0, lat_p99_ns = 0, lat_p999_ns = 0, lat_max_ns = 0;
    std::string exit_reason;         // done, signal, duration, stopped
    bool ok = false;                 // the exit-code verdict
};

void print_summary(const Results& r, FILE* out);
// Written to FILE.tmp, then renamed: a reader never sees half a file.
bool write_summary_json(const Results& r, const std::string& path, std::string& err);

} // namespace tailmark::app
