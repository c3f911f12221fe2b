// The sender half of the protocol, one engine per tx queue (so per lcore):
// it owns its flows' credits, outstanding messages, retransmission timers,
// NACK service and ACK intake, cuts and marks messages (TxMarker) and bursts
// them out.
//
//   sender.submit(flow, message, cookie);   // queued; sent in round robin
//   sender.poll(now);                        // intake, timers, retransmissions, new data, tx
//   sender.take_completions(out, n);         // per cookie: delivered, or failed with a reason
//
// A message's bytes belong to the application until the Sender reports the
// message done: the Sender holds a reference (an mbuf chain's, or one on the
// application's rte_mbuf_ext_shared_info) until the receiver's consumer
// released it, and a retransmission resends those bytes. "Delivered" is only
// ever reported on an authenticated ACK of the session's peer.
//
// One thread (the owner lcore) calls everything but make_flow/free_flow and
// the inbox rings, which other lcores fill. Time comes in as an argument:
// no clock is read inside, so tests drive it exactly.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tailmark/congestion.h"
#include "tailmark/control.h"
#include "tailmark/drop_reason.h"
#include "tailmark/nack_filter.h"
#include "tailmark/packet_parser.h"
#include "tailmark/replay_window.h"
#include "tailmark/session_link.h"
#include "tailmark/tx_burst.h"
#include "tailmark/tx_marker.h"
#include "tailmark/tx_paths.h"

namespace tailmark {

// One application message.
struct Message {
    std::span<const uint8_t> bytes;             // contiguous bytes, or
    rte_mbuf* chain = nullptr;                  // an mbuf chain, whose reference the Sender takes
    // With bytes: the owner's shared info. The Sender holds one reference
    // until the message is done (its free_cb then runs when the last goes);
    // nullptr: the bytes outlive the flow (the application says so).
    rte_mbuf_ext_shared_info* shinfo = nullptr;
    // Zero copy: the IOVA of bytes[0] if the owner DMA-mapped the memory
    // itself (RTE_BAD_IOVA: DPDK looks it up).
    rte_iova_t iova = RTE_BAD_IOVA;

    uint64_t length() const { return chain ? rte_pktmbuf_pkt_len(chain) : bytes.size(); }
};

// Why a flow (and every message it still owed) was given up.
enum class FailReason : uint8_t {
    None = 0,
    RetryLimit = 1,        // retransmission timeouts in a row without progress
    ReceiverRestarted = 2, // the peer reset the session: it lost what it held
    PeerTimeout = 3,       // the peer fell silent
    Closed = 4,            // closed here before it was delivered
    Refused = 5,           // the session was refused
};
const char* to_string(FailReason r);

enum class SendStatus : uint8_t {
    Delivered, // the remote consumer released it (reliable flows)
    Failed,    // never confirmed; `reason` says why
    Sent,      // handed to the NIC (unreliable flows: nothing more is known)
};

struct SendCompletion {
    uint64_t cookie;
    void* user; // the flow's SendFlowSpec::user
    uint32_t msg_id;
    uint16_t flow;
    SendStatus status;
    FailReason reason;
};

struct SendFlowSpec {
    uint16_t id = 0;          // this end's id: ACKs and NACKs arrive with it
    TxFlow tx;                // to the peer: its flow id, the key, its ring mask, the stride
    uint32_t ring_size = 0;   // the receiver's completion slots: the credit window
    uint64_t max_msg = 0;     // the receiver's region
    bool reliable = true;     // false: no credits, no retransmission (a sink, e.g. net_null)
    bool report = true;       // a completion per message (false: counters only)
    // Copy: the payload is copied into the packets (the application may
    // write the next message at once); ZeroCopy: the packets reference the
    // application's bytes (extbuf over its shared info; they must be DMA
    // reachable: rte_extmem_register).
    PayloadMode payload = PayloadMode::Copy;
    SessionLink* link = nullptr;   // reliable flows: epochs, MAC key, liveness
    // The peer is in this process (loopback): its receiver's cumulative ACK
    // and consumer cursor, read where the sender needs them (a flow's turn,
    // its timer) instead of ACKs: no control packet per message.
    const uint32_t* local_acked = nullptr;
    const uint32_t* local_released = nullptr;
    uint32_t first_msg_id = 0;     // where msg_id starts (0 on the wire; tests start near 2^32)
    // --paths: spray its data over this many UDP source ports, the session's
    // (tx_paths.h). 1: the flow's one port, as before. Takes effect on a
    // reliable flow to a remote peer, in a Sender whose config allows it.
    uint32_t paths = 1;
    void* user = nullptr;          // the application's, handed to its source
};

struct SenderConfig {
    uint16_t port = 0;
    uint16_t queue = 0;
    uint16_t udp_port = kDefaultUdpPort; // ACKs and NACKs arrive on it
    rte_mempool* pool = nullptr; // headers and copies
    bool udp_checksum = false;
    bool udp_checksum_offload = false; // the tx queue fills it (RTE_ETH_TX_OFFLOAD_UDP_CKSUM)
    uint32_t burst = 32;
    uint64_t tx_quantum = 1 << 20;  // payload bytes one flow sends per round-robin turn, at most (new_data: a turn also ends with the message that completes a burst)
    uint64_t rto = 0;               // cycles: first retransmission timeout
    uint64_t rto_max = 0;
    uint32_t retry_limit = 8;
    uint64_t stall = 0;             // cycles a partial burst may make no progress before it is dropped
    uint32_t max_flows = 4096;      // installed at once
    uint32_t completions = 4096;    // completion queue entries
    uint32_t jobs = 1024;           // retransmission requests queued
    const char* name = "tm_snd";    // prefix of its rings' names (unique per Sender)
    int socket = 0;
    // Congestion control, per session (flows with a remote peer; a peer in
    // this process has no path to share). tsc_hz 0: rte_get_tsc_hz().
    CongestionConfig cc;
    // The most paths a flow of this Sender sprays over (SendFlowSpec::paths):
    // above 1, path state for kMaxPathSessions sessions is allocated.
    uint32_t paths = 1;
    // Rails (session_link.h): rail r's packets leave by port rail_ports[r],
    // queue `queue` (rail 0: `port`). A sprayed session's path p leaves by
    // rail p % (the rails both ends have).
    uint32_t rails = 1;
    uint16_t rail_ports[kMaxRails]{};
    // Each rail's source MAC: a control packet from it (an ACK a Receiver
    // built for that rail) leaves by that rail.
    rte_ether_addr rail_macs[kMaxRails]{};
    // The mbuf dynamic field where a wire ACK carries the earliest it may
    // have arrived (ReceiverConfig::arrival_field; -1: none): its wait in
    // this host (the rx ring, the inbox) counts as hold, not as path.
    int arrival_field = -1;
};

struct SenderCounters {
    uint64_t msgs_sent = 0;   // messages whose every packet was built and queued
    uint64_t bytes_sent = 0;  // their payload
    uint64_t ctl_tx = 0;      // control packets handed over by others (ctl_out), queued to the PMD
    uint64_t alloc_fail = 0;  // bursts postponed: mbuf pool empty
    uint64_t retx_pkts = 0;   // data packets sent again (flag RETX)
    uint64_t retx_reqs = 0;   // requests served (at least one packet sent): NACKs and timer probes
    uint64_t probes = 0;      // LAST packets re-sent by the timer
    uint64_t rto_expired = 0; // expiries counted toward the retry limit
    uint64_t stale_reqs = 0;  // requests for messages no longer owed
    uint64_t acks_rx = 0;     // authentic ACKs taken (wire or local)
    uint64_t nacks_rx = 0;    // authentic NACKs taken
    uint64_t nacks_early = 0; // of them, none of whose packets was news: asked for by an earlier NACK,
                              // and sent after the newest packet this one had seen (NackFilter)
    uint64_t ctl_packets = 0; // of them, as packets (not a local receiver's records)
    uint64_t delivered = 0;   // messages delivered (reliable)
    uint64_t failed = 0;      // messages failed
    uint64_t source_refused = 0; // messages the source produced that could not be sent (bytes handed back)
    uint64_t zero_copy_pkts = 0; // data packets (first copies and retransmitted) built by the zero-copy marker:
                                 // their payload referenced where the application wrote it, never copied
    // Congestion control (all sessions of this Sender)
    uint64_t cc_samples = 0;   // RTT samples taken from ACK/NACK echoes
    uint64_t cc_increases = 0;
    uint64_t cc_decreases = 0; // for queueing delay above the target
    uint64_t cc_loss_decreases = 0; // for a loss with the delay agreeing
    uint64_t cc_timeouts = 0;  // rate halved by a retransmission timeout
    uint64_t cc_paced = 0;     // turns a flow waited for its session's pacer
    uint64_t cc_no_slot = 0;   // flows of a session beyond kMaxCcSessions: not congestion-controlled
    DropCounters drops{};     // control packets refused
};

// A flow as the Sender keeps it (opaque outside sender.cc).
struct SendFlow;

// The turn of one paced session's round robin: the flow that holds it and
// what it sent in it. A paced flow's turn goes on over its pacer's steps
// (the same whole messages up to a quantum as an unpaced flow's), and the
// session's other flows wait for its end. Turns of one pacing step put every
// flow's message in flight at once, each taking nflows times as long: 4
// flows through a 200 Mbit/s tbf had a p99 latency of 215 ms at 1 MiB (54 ms
// in whole turns), and tailmark-cat --flows 4 ran at 0.85 of --flows 1 (1.02).
struct PacedTurn {
    const SendFlow* holder = nullptr; // nullptr: the next flow with a message takes it
    uint64_t bytes = 0;
    uint32_t pkts = 0;
    void end() { *this = PacedTurn{}; }
};

// The per-message source hook: called when the round robin reaches a flow
// with nothing queued and credit left, so a generator can produce its next
// message just in time. True with msg and cookie filled.
using SendSource = bool (*)(void* ctx, void* flow_user, uint32_t msg_id, Message& msg, uint64_t& cookie);

// What every message of a batch fits: one packet's bytes, copied.
struct SourceLimits {
    uint64_t max_len = 0;     // bytes, contiguous (no chain)
    bool no_shinfo = false;   // no shared info (nothing would hold it)
};
// The batched source hook (optional, beside SendSource): the flow's next
// messages, msg_ids first, first + 1, ..., at most `max`, into msgs and
// cookies. Either every message it returns fits `lim`, or it returns one
// message, any: a message that does not fit comes alone, first in its
// batch, and the Sender takes it as SendSource's. So the Sender never holds
// a message it asked for and cannot send in the same run. Returns how many.
// Used for runs of one-packet messages: a call per burst instead of per
// message (the generator at 64 B: a tenth of the tx path was its calls).
using SendSourceMany = uint32_t (*)(void* ctx, void* flow_user, uint32_t first, uint32_t max,
                                    const SourceLimits& lim, Message* msgs, uint64_t* cookies);

class Sender {
public:
    // A zero-copy flow's messages up to this many bytes are copied into the
    // packets: attaching them costs a payload mbuf, a trailer mbuf and
    // atomics on the shared info per packet, more than copying a few hundred
    // bytes. The Sender's record holds the bytes until delivery either way,
    // so retransmissions find them. No packet ever references such a
    // message's bytes: a source whose bytes outlive the flow may give it no
    // shared info (nothing but the record would hold it).
    static constexpr uint64_t kCopyBreak = 512;

    explicit Sender(const SenderConfig& cfg);
    ~Sender();
    Sender(const Sender&) = delete;
    Sender& operator=(const Sender&) = delete;
    bool ok() const { return ok_; } // rings and tables were allocated

    // Any thread: allocate or free a flow's state (records for ring_size
    // messages), so the owner lcore never allocates.
    static SendFlow* make_flow(const SendFlowSpec& spec, int socket);
    static void free_flow(SendFlow* f);

    // --- the owner lcore ---
    bool install(SendFlow* f);        // false: id taken, or max_flows reached
    // Takes a flow out once everything it owed was reported; nullptr while
    // it still has messages in flight or completions to report (fail it
    // first, then ask again).
    SendFlow* remove(uint16_t id);
    // Takes in every control packet waiting in the inboxes. Before failing a
    // flow because its session ended: the peer's last ACK came before its
    // CLOSE (one tx ring, in order), but the ACK went to this Sender's inbox
    // and the CLOSE to the control loop, which may be quicker to ask for the
    // failure; what the peer's consumer released is then delivered, not failed.
    void hear_all(uint64_t now);
    void fail(uint16_t id, FailReason why);
    void fail_link(const SessionLink* link, FailReason why); // every flow of a session

    // 0, or -ENOENT (no such flow), -EPIPE (failed), -EAGAIN (no credit:
    // the window is full), -EMSGSIZE (larger than the peer's region, or a
    // group too large for the stride).
    int submit(uint16_t id, const Message& m, uint64_t cookie);
    // Messages that may be submitted now without -EAGAIN.
    uint32_t credit(uint16_t id) const;
    void set_source(SendSource fn, void* ctx, SendSourceMany many = nullptr) {
        source_ = fn;
        source_many_ = many;
        source_ctx_ = ctx;
    }

    // One round: control intake (the inbox rings), timers, retransmissions,
    // others' control packets, new data, and the burst to the PMD. True when
    // it did any work.
    bool poll(uint64_t now);
    // ACK/NACK intake done directly (tests; poll() drains the inboxes).
    DropReason on_wire_control(const rte_mbuf* m, uint64_t now);
    DropReason on_control(const Control& c, uint64_t now); // a local receiver's: trusted

    uint32_t take_completions(SendCompletion* out, uint32_t max);

    // Rings others fill: ACK/NACK frames (MP/SC; the Sender verifies them),
    // a local receiver's Control records (MP/SC), and control packets to
    // transmit before data (MP/SC; ACKs and NACKs of local receivers,
    // session packets of the control plane).
    rte_ring* wire_inbox() const { return wire_in_; }
    rte_ring* local_inbox() const { return local_in_; }
    rte_ring* ctl_out() const { return ctl_out_; }

    const SenderCounters& counters() const { return ctr_; }
    // Accepted by the PMDs (every rail's): data, retransmissions, others' control.
    uint64_t pkts_tx() const {
        uint64_t n = tx_.pkts_tx();
        for (uint32_t r = 1; r < cfg_.rails; r++)
            n += rail_tx_[r]->pkts_tx();
        return n;
    }
    // Freed after a stalled partial burst, and the other rails' packets
    // freed at their full or stuck queue (rail_dropped).
    uint64_t tx_dropped() const { return tx_.dropped() + rail_dropped(); }
    // Rail r's packets accepted by its port.
    uint64_t rail_pkts_tx(uint32_t r) const {
        return r == 0 ? tx_.pkts_tx() : r < cfg_.rails ? rail_tx_[r]->pkts_tx() : 0;
    }
    uint64_t rail_dropped() const;
    uint16_t port() const { return cfg_.port; }
    uint16_t queue() const { return cfg_.queue; }
    uint32_t flows() const { return static_cast<uint32_t>(flows_.size()); }
    // Messages in progress, queued or packets pending (the control loop's drain).
    uint32_t busy() const { return __atomic_load_n(&busy_, __ATOMIC_RELAXED); }
    // After a poll that sent nothing because every session with data waited
    // for its pacer: when the earliest may send (0: not held by a pacer).
    // The owner lcore may sleep until then instead of spinning.
    uint64_t paced_until() const { return paced_until_; }
    void set_burst(uint32_t b) { __atomic_store_n(&cfg_.burst, b, __ATOMIC_RELAXED); }

    // Per flow, any thread (relaxed): for summaries and the shell.
    struct FlowView {
        uint16_t id;
        uint32_t submitted, sent, acked, released;
        FailReason failed;
        uint64_t retx_pkts;
        uint64_t failed_msgs;
        double cc_rate_bps;   // its session's paced rate (0: not congestion-controlled)
        uint64_t cc_srtt;     // cycles
        uint64_t cc_base_rtt; // cycles
    };
    static FlowView view(const SendFlow* f);
    // Every path of every sprayed session (--paths), into out; how many.
    // Plain reads of the owner's figures: for the summary, once it stopped.
    uint32_t path_views(PathView* out, uint32_t max) const;

private:
    void enqueue(SendFlow& f, const Message& m, uint64_t len, uint64_t cookie);
    void refuse(const Message& m);
    bool intake(uint64_t now);
    uint32_t serve_jobs(uint32_t burst, uint32_t n, uint64_t now);
    void held_here(const rte_mbuf* m, Control& c, uint64_t now) const;
    bool paced(SendFlow& f, uint64_t now);
    void pace(SendFlow& f, uint64_t now, uint32_t first, uint32_t k);
    void on_cc_event(CcEvent e);
    struct CcSlot;
    CcSlot* cc_for(const SessionLink* link, uint32_t frame_bytes);
    uint32_t new_data(uint32_t burst, uint32_t n, uint64_t now);
    bool accept(SendFlow& f, const Message& m, uint64_t cookie);
    template <bool recorded, bool batched>
    uint32_t one_run(SendFlow& f, uint32_t burst, uint32_t n, uint64_t now);
    template <bool recorded>
    uint32_t one_run(SendFlow& f, uint32_t burst, uint32_t n, uint64_t now) {
        return source_many_ != nullptr ? one_run<recorded, true>(f, burst, n, now)
                                       : one_run<recorded, false>(f, burst, n, now);
    }
    void sent_unrecorded(SendFlow& f);
    void begin_cut(SendFlow& f);
    void timers(uint64_t now);
    void on_timer(SendFlow& f, uint64_t now);
    void arm(SendFlow& f, uint64_t now, uint64_t ticks);
    void restart(SendFlow& f, uint64_t now);
    void retire(SendFlow& f);
    void fail_flow(SendFlow& f, FailReason why);
    DropReason apply(SendFlow& f, const Control& c, uint64_t now, bool wire);
    void sync_local(SendFlow& f);
    bool push_job(const Nack& n);
    bool start_job(uint64_t now);
    void park_job();
    void job_over(uint16_t flow);
    void next_turn();
    bool turn_over(const SendFlow& f, uint64_t bytes, uint32_t pkts, uint32_t burst) const;
    uint32_t message_sent(SendFlow& f, uint32_t burst, uint32_t n, uint64_t now);
    void end_turn_if_over(SendFlow& f, uint32_t burst);
    void prefetch_next() const;
    void fill_msg(SendFlow& f, const Message& m);
    void count_drop(DropReason r);
    // Spraying (tx_paths.h): the path of a run of packets, and what it carried.
    uint32_t aim(SendFlow& f, TxMessage& m, uint32_t& k, uint32_t avoid, uint64_t now);
    void carried(SendFlow& f, uint32_t msg_id, uint32_t first, uint32_t k, uint32_t path, bool retx);
    // Rails: packets pend_[first, first + k) leave by rail r (aim wrote its
    // addresses); split_rails hands each rail its own before a send.
    void to_rail(uint32_t first, uint32_t k, uint32_t r) {
        for (uint32_t i = first; i < first + k; i++)
            rail_of_[i] = static_cast<uint8_t>(r);
    }
    TxBurst& rail_q(uint32_t r) { return r == 0 ? tx_ : *rail_tx_[r]; } // rail r's queue
    void split_rails(uint32_t n, uint64_t now);
    bool rails_ready(uint64_t now);
    void path_feedback(SendFlow& f, const Control& c, uint64_t now);
    void paths_lost(SendFlow& f, const Nack& n, uint64_t now);
    uint32_t sent_pkts(const SendFlow& f, uint32_t msg_id) const;
    TxPaths* paths_for(const SessionLink* link, const SendFlow& f);

    SenderConfig cfg_;
    bool ok_ = false;
    TxMarker marker_;    // copy: the payload into the packets
    TxMarker marker_zc_; // zero copy: the packets reference the application's bytes
    const TxMarker& marker(const SendFlow& f, const TxMessage& m) const;
    SenderCounters ctr_;
    SendFlow** table_ = nullptr; // by id, 65536 entries
    std::vector<SendFlow*> flows_; // the round robin (capacity max_flows: no allocation on install)
    static constexpr size_t kPrefetchFlows = 8; // next_turn fetches the next flow's state above this many
    uint32_t rr_ = 0;
    uint64_t turn_bytes_ = 0;
    uint32_t turn_pkts_ = 0;
    uint32_t active_ = 0;
    bool refused_ = false; // one_run's message was refused: the flow's turn ended
    uint32_t queued_ = 0; // submitted, not yet fully sent (all flows)
    uint32_t busy_ = 0;
    SendSource source_ = nullptr;
    SendSourceMany source_many_ = nullptr;
    void* source_ctx_ = nullptr;
    Message src_msgs_[TxMarker::kMaxBurst]; // one_run's batch from the source
    uint64_t src_cookies_[TxMarker::kMaxBurst];
    TxBurst tx_;
    rte_mbuf** pend_; // tx_'s slots (rails: rail_buf_)
    std::unique_ptr<TxBurst> rail_tx_[kMaxRails]; // rails 1..: their ports' queues
    rte_mbuf* rail_buf_[TxBurst::kMax];           // rails: where a round is built, then split
    uint8_t rail_of_[TxBurst::kMax]{};            // per pend_ slot: its rail (rails only; 0 between rounds)
    uint64_t rail_full_ = 0;                      // rails' packets freed: their queue was full
    rte_ether_addr rail_mac_[kMaxRails]{};        // each rail's port's MAC: a control packet from it leaves by it
    MbufStash stash_; // new data's mbufs, per round
    Control ctl_in_[16]; // intake's records (a buffer, not rebuilt every round)
    // Retransmission requests (NACKs, timer probes): a circular queue, in
    // order, served in order per session; a request its session's pacer
    // holds lets those behind it of other sessions go (start_job). One slot
    // more than cfg.jobs: room to put the request in service back (park_job).
    std::vector<Nack> jobs_;
    std::vector<uint8_t> jobs_begun_; // per slot: the request built packets already (a parked one)
    uint32_t job_head_ = 0, job_count_ = 0, jobs_cap_ = 1;
    uint64_t jobs_held_until_ = 0; // every queued request's pacer holds it until then (0: look)
    Nack job_{};
    bool job_on_ = false;
    bool job_fresh_ = false; // job_ has built no packet yet
    uint32_t job_r_ = 0, job_pos_ = 0, job_end_ = 0;
    uint32_t job_limit_ = 0; // packets of job_'s message that exist (sent)
    TxMessage job_msg_;
    // Completions not taken yet: a circular queue.
    std::vector<SendCompletion> comp_;
    uint32_t comp_head_ = 0, comp_count_ = 0;
    bool backlog_ = false; // a full completion queue stopped retire()
    uint64_t next_due_ = UINT64_MAX; // earliest retransmission timer
    rte_ring* wire_in_ = nullptr;
    rte_ring* local_in_ = nullptr;
    rte_ring* ctl_out_ = nullptr;
    ParserConfig pcfg_;
    // Congestion control: one per session with flows here, shared by them.
    struct CcSlot {
        const SessionLink* link = nullptr;
        uint32_t users = 0;
        Congestion cc;
        PacedTurn turn;
    };
    static constexpr uint32_t kMaxCcSessions = 256; // controllers per Sender (4 KiB of send history each)
    std::vector<CcSlot> cc_; // allocated at construction
    unsigned stamp_shift_ = 11;
    uint16_t stamp_ = 0;   // this round's send stamp (network order): every data packet's IPv4 ID
    uint16_t stamp_host_ = 0; // the same, host order (a sprayed packet's names its path)
    // Spraying: one path state per session with sprayed flows here.
    struct PathSlot {
        const SessionLink* link = nullptr;
        uint32_t users = 0;
        TxPaths paths;
    };
    static constexpr uint32_t kMaxPathSessions = 64;
    std::vector<PathSlot> path_slots_; // allocated at construction when cfg.paths > 1
    uint64_t paced_until_ = 0; // see paced_until()
};

} // namespace tailmark
