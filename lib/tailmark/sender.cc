#include "tailmark/sender.h"
#include "tailmark/sender_flow.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include <rte_mbuf_dyn.h>
#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <rte_ring_elem.h>

namespace tailmark {

using namespace sender_detail;

const char* to_string(FailReason r) {
    switch (r) {
    case FailReason::None: return "ok";
    case FailReason::RetryLimit: return "retry_limit";
    case FailReason::ReceiverRestarted: return "receiver_restarted";
    case FailReason::PeerTimeout: return "peer_timeout";
    case FailReason::Closed: return "closed";
    case FailReason::Refused: return "refused";
    }
    return "?";
}

SendFlow* Sender::make_flow(const SendFlowSpec& spec, int socket) {
    if (spec.ring_size == 0 || (spec.ring_size & (spec.ring_size - 1)) != 0)
        return nullptr;
    void* mem = rte_zmalloc_socket("tm_send_flow", sizeof(SendFlow), 64, socket);
    if (mem == nullptr)
        return nullptr;
    auto* f = new (mem) SendFlow();
    f->spec = spec;
    f->mask = spec.ring_size - 1;
    f->out = static_cast<OutMsg*>(rte_zmalloc_socket("tm_send_recs", sizeof(OutMsg) * spec.ring_size, 64, socket));
    if (f->out == nullptr) {
        free_flow(f);
        return nullptr;
    }
    if (spec.paths > 1 && spec.reliable) {
        const GroupPlan most = plan_group(spec.max_msg, spec.tx.stride);
        f->path_pkts = most.ok() ? most.pkt_count : 0;
        f->path_of = f->path_pkts ? static_cast<uint8_t*>(rte_zmalloc_socket(
                                        "tm_send_paths", size_t(spec.ring_size) * f->path_pkts, 64, socket))
                                  : nullptr;
        if (f->path_pkts != 0 && f->path_of == nullptr) {
            free_flow(f);
            return nullptr;
        }
    }
    f->submitted = f->sent = f->acked = f->released = f->reported = spec.first_msg_id;
    return f;
}

void Sender::free_flow(SendFlow* f) {
    if (f == nullptr)
        return;
    if (f->out != nullptr)
        for (uint32_t m = f->reported; m != f->submitted; m++)
            let_go(f->out[m & f->mask]);
    rte_free(f->out);
    rte_free(f->path_of);
    f->~SendFlow();
    rte_free(f);
}

Sender::FlowView Sender::view(const SendFlow* f) {
    FlowView v;
    v.id = f->spec.id;
    v.submitted = peek(f->submitted);
    v.sent = peek(f->sent);
    v.acked = peek(f->acked);
    v.released = peek(f->released);
    v.failed = peek(f->failed);
    v.retx_pkts = peek(f->retx_pkts);
    v.failed_msgs = peek(f->failed_msgs);
    // Relaxed reads of the owner's doubles and words: a summary's figures.
    v.cc_rate_bps = f->cc ? f->cc->rate_bps() : 0;
    v.cc_srtt = f->cc ? f->cc->srtt() : 0;
    v.cc_base_rtt = f->cc ? f->cc->base_rtt() : 0;
    return v;
}

Sender::Sender(const SenderConfig& cfg)
    : cfg_(cfg), marker_(cfg.pool, PayloadMode::Copy), marker_zc_(cfg.pool, PayloadMode::ZeroCopy),
      tx_(cfg.port, cfg.queue, cfg.stall), pend_(tx_.slots()), stash_(cfg.pool) {
    marker_.set_udp_checksum(cfg.udp_checksum, cfg.udp_checksum_offload);
    marker_zc_.set_udp_checksum(cfg.udp_checksum, cfg.udp_checksum_offload);
    pcfg_.udp_port = cfg.udp_port;
    pcfg_.verify_udp_checksum = cfg.udp_checksum;
    if (cfg_.cc.tsc_hz == 0)
        cfg_.cc.tsc_hz = rte_get_tsc_hz();
    stamp_shift_ = Congestion::stamp_shift(cfg_.cc.tsc_hz);
    cc_.resize(cfg.max_flows < kMaxCcSessions ? (cfg.max_flows ? cfg.max_flows : 1) : kMaxCcSessions);
    if (cfg_.burst == 0 || cfg_.burst > TxMarker::kMaxBurst)
        cfg_.burst = TxMarker::kMaxBurst;
    table_ = static_cast<SendFlow**>(rte_zmalloc_socket("tm_send_table", sizeof(SendFlow*) * 65536, 64, cfg.socket));
    flows_.reserve(cfg.max_flows);
    jobs_cap_ = cfg.jobs ? cfg.jobs : 1;
    jobs_.resize(jobs_cap_ + 1);
    jobs_begun_.resize(jobs_cap_ + 1);
    comp_.resize(rte_align32pow2(cfg.completions ? cfg.completions : 1)); // a mask, not a division, per message
    char name[RTE_RING_NAMESIZE];
    snprintf(name, sizeof(name), "%s_wi", cfg.name); // set-up only
    wire_in_ = rte_ring_create(name, 1024, cfg.socket, RING_F_SC_DEQ);
    snprintf(name, sizeof(name), "%s_li", cfg.name); // set-up only
    local_in_ = rte_ring_create_elem(name, sizeof(Control), 1024, cfg.socket, RING_F_SC_DEQ);
    snprintf(name, sizeof(name), "%s_co", cfg.name); // set-up only
    ctl_out_ = rte_ring_create(name, 1024, cfg.socket, RING_F_SC_DEQ);
    cfg_.rails = std::clamp<uint32_t>(cfg_.rails, 1, kMaxRails);
    for (uint32_t r = 1; r < cfg_.rails; r++) {
        rail_tx_[r] = std::make_unique<TxBurst>(cfg_.rail_ports[r], cfg_.queue, cfg_.stall);
        // A MAC of its own, or control packets cannot be told apart (a
        // multicast address matches no source: they stay on rail 0).
        rail_mac_[r] = cfg_.rail_macs[r];
        if (rte_is_zero_ether_addr(&rail_mac_[r]) || rte_is_same_ether_addr(&rail_mac_[r], &cfg_.rail_macs[0]))
            rail_mac_[r] = {{0x01, 0, 0, 0, 0, 0}};
    }
    if (cfg_.rails > 1) // every rail's packets, the first's too, are split off a round built here
        pend_ = rail_buf_;
    if (cfg_.paths > 1)
        path_slots_.resize(cfg.max_flows < kMaxPathSessions ? (cfg.max_flows ? cfg.max_flows : 1) : kMaxPathSessions);
    ok_ = table_ != nullptr && wire_in_ != nullptr && local_in_ != nullptr && ctl_out_ != nullptr;
}

Sender::~Sender() {
    rte_mbuf* m;
    while (ctl_out_ && rte_ring_dequeue(ctl_out_, reinterpret_cast<void**>(&m)) == 0)
        rte_pktmbuf_free(m);
    while (wire_in_ && rte_ring_dequeue(wire_in_, reinterpret_cast<void**>(&m)) == 0)
        rte_pktmbuf_free(m);
    rte_ring_free(wire_in_);
    rte_ring_free(local_in_);
    rte_ring_free(ctl_out_);
    rte_free(table_);
}

void Sender::count_drop(DropReason r) { bump(ctr_.drops[index(r)]); }

// --- flows ------------------------------------------------------------------

bool Sender::install(SendFlow* f) {
    if (!ok_ || f == nullptr || table_[f->spec.id] != nullptr || flows_.size() >= cfg_.max_flows)
        return false;
    f->index = static_cast<uint32_t>(flows_.size());
    flows_.push_back(f); // reserved: no allocation
    table_[f->spec.id] = f;
    const SessionLink* link = f->spec.link;
    CcSlot* cs = cfg_.cc.enabled && f->spec.reliable && link != nullptr && !link->local_peer &&
                         f->spec.local_released == nullptr
                     ? cc_for(link, f->spec.tx.stride + f->spec.tx.overhead())
                     : nullptr;
    f->cc = cs != nullptr ? &cs->cc : nullptr;
    f->turn = cs != nullptr ? &cs->turn : nullptr;
    f->paths = f->path_of != nullptr && f->spec.reliable && link != nullptr && !link->local_peer &&
                       f->spec.local_released == nullptr
                   ? paths_for(link, *f)
                   : nullptr;
    if (f->paths != nullptr && f->cc != nullptr) // its paths' rates make the session's (tx_paths.h)
        f->paths->bind(f->cc, cfg_.cc);
    return true;
}

// The session's controller, shared by its flows here; a fresh one for the
// session's first flow (slots: one per flow at most, so one is free), whose
// frames (the largest: a stride's payload and its headers) set its step.
Sender::CcSlot* Sender::cc_for(const SessionLink* link, uint32_t frame_bytes) {
    CcSlot* free_slot = nullptr;
    for (CcSlot& c : cc_) {
        if (c.users != 0 && c.link == link) {
            c.users++;
            return &c;
        }
        if (c.users == 0 && free_slot == nullptr)
            free_slot = &c;
    }
    if (free_slot == nullptr) {
        bump(ctr_.cc_no_slot); // more sessions than controllers: this one goes unpaced
        return nullptr;
    }
    free_slot->link = link;
    free_slot->users = 1;
    CongestionConfig cc = cfg_.cc;
    cc.frame_bytes = frame_bytes;
    free_slot->cc.init(cc, stamp_shift_, 0);
    free_slot->turn.end();
    return free_slot;
}

SendFlow* Sender::remove(uint16_t id) {
    SendFlow* f = table_ ? table_[id] : nullptr;
    if (f == nullptr || f->reported != f->submitted || f->active)
        return nullptr;
    // Requests for it may still be queued: emptied, so that a flow installed
    // later under the same id does not take them for its own.
    if (job_on_ && job_.flow == id)
        job_on_ = false;
    for (uint32_t k = 0; k < job_count_; k++) {
        Nack& j = jobs_[(job_head_ + k) % jobs_.size()];
        if (j.flow == id)
            j.nranges = 0; // stale when its turn comes
    }
    table_[id] = nullptr;
    if (f->turn != nullptr && f->turn->holder == f) // its session's next flow takes the turn
        f->turn->end();
    if (f->cc != nullptr) // the slot outlives it: view() may still read the session's last rate
        for (CcSlot& c : cc_)
            if (&c.cc == f->cc)
                c.users--;
    if (f->paths != nullptr) // so does this one: the summary reads its paths
        for (PathSlot& p : path_slots_)
            if (&p.paths == f->paths)
                p.users--;
    SendFlow* last = flows_.back();
    flows_[f->index] = last;
    last->index = f->index;
    flows_.pop_back();
    if (rr_ >= flows_.size())
        rr_ = 0;
    return f;
}

void Sender::fail(uint16_t id, FailReason why) {
    SendFlow* f = table_ ? table_[id] : nullptr;
    if (f != nullptr)
        fail_flow(*f, why);
}

void Sender::fail_link(const SessionLink* link, FailReason why) {
    for (SendFlow* f : flows_)
        if (f->spec.link == link)
            fail_flow(*f, why);
}

// Gives the flow up: nothing more is sent; what it owed is reported failed
// (retire), the first reason stays.
void Sender::fail_flow(SendFlow& f, FailReason why) {
    // Nothing owed (every message reported): closing it fails nothing.
    if (f.failed != FailReason::None || (f.reported == f.submitted && !f.active))
        return;
    // A local peer's last releases count first: what its consumer released
    // before the end is delivered, not failed (a remote peer's are known only
    // from its ACKs, which it sends before its CLOSE).
    if (f.spec.local_released != nullptr) {
        sync_local(f);
        if (f.reported == f.submitted && !f.active)
            return;
    }
    publish(f.failed, why);
    if (f.active) { // cut short: its remaining packets are never built
        f.active = false;
        active_--;
        f.unrecorded = false; // nothing to report of it: it reports nothing
    }
    f.deadline = 0;
    retire(f);
}

// --- submit -------------------------------------------------------------------

uint32_t Sender::credit(uint16_t id) const {
    const SendFlow* f = table_ ? table_[id] : nullptr;
    if (f == nullptr || f->failed != FailReason::None)
        return 0;
    // Records live until reported, and (reliable) the receiver takes
    // msg_ids below released + ring size: reported <= released.
    return f->spec.ring_size - (f->submitted - f->reported);
}

int Sender::submit(uint16_t id, const Message& m, uint64_t cookie) {
    SendFlow* f = table_ ? table_[id] : nullptr;
    if (f == nullptr)
        return -ENOENT;
    if (f->failed != FailReason::None)
        return -EPIPE;
    const uint64_t len = m.length();
    if (len > f->spec.max_msg || !plan_group(len, f->spec.tx.stride).ok())
        return -EMSGSIZE;
    if (f->submitted - f->reported >= f->spec.ring_size)
        return -EAGAIN;
    enqueue(*f, m, len, cookie);
    return 0;
}

// A message the source produced that cannot be sent (larger than the
// peer's region): counted, and its bytes handed back at once. Sources check
// lengths themselves; this is the backstop, so no buffer is ever lost.
void Sender::refuse(const Message& m) {
    bump(ctr_.source_refused);
    if (m.chain != nullptr) {
        rte_pktmbuf_free(m.chain);
    } else if (m.shinfo != nullptr && rte_mbuf_ext_refcnt_read(m.shinfo) == 0) {
        m.shinfo->free_cb(const_cast<uint8_t*>(m.bytes.data()), m.shinfo->fcb_opaque);
    }
}


// --- completions ----------------------------------------------------------------

// Reports, in msg_id order, what is done: delivered (released by the remote
// consumer), sent (unreliable), or everything outstanding once failed. Bytes
// are let go here. A full completion queue leaves the rest for later.
void Sender::retire(SendFlow& f) {
    const bool failed = f.failed != FailReason::None;
    const uint32_t upto = failed ? f.submitted : f.spec.reliable ? f.released : f.sent;
    while (f.reported != upto) {
        if (f.spec.report && comp_count_ == comp_.size()) {
            backlog_ = true; // poll() comes back for the rest
            break;
        }
        OutMsg& o = f.out[f.reported & f.mask];
        let_go(o);
        const SendStatus st = failed ? SendStatus::Failed : f.spec.reliable ? SendStatus::Delivered : SendStatus::Sent;
        if (f.spec.report) {
            SendCompletion& c = comp_[(comp_head_ + comp_count_) & (comp_.size() - 1)];
            c = {o.cookie, f.spec.user, o.msg_id, f.spec.id, st, failed ? f.failed : FailReason::None};
            comp_count_++;
        }
        if (failed) {
            bump(ctr_.failed);
            publish(f.failed_msgs, f.failed_msgs + 1);
            if (!before(f.reported, f.sent)) // queued, never started
                queued_--;
        } else if (st == SendStatus::Delivered) {
            bump(ctr_.delivered);
        }
        publish(f.reported, f.reported + 1);
    }
}

uint32_t Sender::take_completions(SendCompletion* out, uint32_t max) {
    uint32_t n = 0;
    while (n < max && comp_count_ > 0) {
        out[n++] = comp_[comp_head_];
        comp_head_ = (comp_head_ + 1) & static_cast<uint32_t>(comp_.size() - 1);
        comp_count_--;
    }
    return n;
}

// --- control intake -------------------------------------------------------------

// The packets of msg_id that have gone out, which a NACK of it may name: the
// whole group once it is sent, those cut so far while it is being cut; 0
// once it is released, not yet sent, or its record holds another message.
uint32_t Sender::sent_pkts(const SendFlow& f, uint32_t msg_id) const {
    const bool cutting = f.active && !f.unrecorded && msg_id == f.sent;
    if (before(msg_id, f.released) || !(before(msg_id, f.sent) || cutting))
        return 0;
    const OutMsg& o = f.out[msg_id & f.mask];
    if (o.msg_id != msg_id)
        return 0;
    return cutting ? f.next_pkt : o.pkt_count;
}

namespace {
// The frames a NACK asks for, in bytes, for congestion control's loss
// figure (a range of count 0 runs to its group's end).
uint64_t nacked_bytes(const SendFlow& f, const Nack& n) {
    const OutMsg& o = f.out[n.msg_id & f.mask];
    const uint32_t group = o.msg_id == n.msg_id ? o.pkt_count : 0;
    uint64_t pkts = 0;
    for (uint32_t i = 0; i < n.nranges && i < kMaxNackRanges; i++) {
        const NackRange& r = n.ranges[i];
        pkts += r.count != 0 ? r.count : (group > r.first ? group - r.first : 1);
    }
    return pkts * (f.spec.tx.stride + f.spec.tx.overhead());
}

// When the NACKed message's packets had all gone out: its LAST's time, or
// now while it is still going out (its slot's time is then another's).
uint64_t nacked_sent(const SendFlow& f, const Nack& n, uint64_t now) {
    const OutMsg& o = f.out[n.msg_id & f.mask];
    return o.msg_id == n.msg_id && before(n.msg_id, f.sent) ? o.sent_tsc : now;
}
} // namespace

DropReason Sender::apply(SendFlow& f, const Control& c, uint64_t now, bool wire) {
    SessionLink* link = f.spec.link;
    if (link == nullptr || !f.spec.reliable)
        return DropReason::Control;
    if (c.sender_epoch != link->local_epoch || c.receiver_epoch != link->peer_epoch)
        return DropReason::ControlStale; // another incarnation of the session: not news
    // Of this incarnation, authentic: each number once. A replayed ACK would
    // refresh the peer's liveness, feed congestion control a stale echo, or
    // (a NACK) ask for a retransmission and count as a loss.
    if (wire && !f.ctl_win.take(c.seq))
        return DropReason::ControlReplayed;
    if (f.failed != FailReason::None)
        return DropReason::FlowFailed;
    // Nothing beyond what was sent can be acknowledged, nor released beyond
    // what completed: such a packet is no receiver's of ours. Each cursor
    // against sent: msg_ids compare modulo 2^32, which orders no more than
    // half the circle, so released <= acked <= sent checked pairwise let a
    // released cursor 2^31 ahead of an acked one far behind through, past
    // sent (fuzz_ctl: repro_ack_released_past_sent).
    if (before(f.sent, c.acked_upto) || before(f.sent, c.released_upto) || before(c.acked_upto, c.released_upto))
        return DropReason::ControlMalformed;
    link->peer_ctl_tsc.store(now, std::memory_order_relaxed);
    if (before(f.acked, c.acked_upto))
        publish(f.acked, c.acked_upto);
    if (before(f.released, c.released_upto)) {
        publish(f.released, c.released_upto);
        retire(f);
    }
    if (f.cc != nullptr && c.hold_ns != kNoEcho) {
        bump(ctr_.cc_samples);
        on_cc_event(f.cc->on_echo(now, c.echo, c.hold_ns));
    }
    if (f.paths != nullptr)
        path_feedback(f, c, now);
    if (c.nack) {
        // Only what is news in it: no loss counted twice (the session's nor a
        // path's), no packets resent twice.
        const Nack n = f.nacks.news(c.n, c.hold_ns != kNoEcho, c.echo, now, stamp_shift_);
        if (n.nranges == 0) {
            bump(ctr_.nacks_early);
        } else {
            if (!push_job(n))
                return DropReason::NackQueueFull;
            f.nacks.took(n, now);
            if (f.cc != nullptr)
                f.cc->on_loss(nacked_bytes(f, n), nacked_sent(f, n, now));
            if (f.paths != nullptr)
                paths_lost(f, n, now);
        }
        bump(ctr_.nacks_rx);
    } else {
        bump(ctr_.acks_rx);
    }
    return DropReason::None;
}

void Sender::sync_local(SendFlow& f) {
    const uint32_t released = __atomic_load_n(f.spec.local_released, __ATOMIC_ACQUIRE);
    const uint32_t acked = __atomic_load_n(f.spec.local_acked, __ATOMIC_ACQUIRE);
    if (before(f.acked, acked) && !before(f.sent, acked))
        publish(f.acked, acked);
    if (before(f.released, released) && !before(f.acked, released)) {
        publish(f.released, released);
        retire(f);
    }
}

DropReason Sender::on_control(const Control& c, uint64_t now) {
    SendFlow* f = table_ ? table_[c.n.flow] : nullptr;
    const DropReason r = f ? apply(*f, c, now, false) : DropReason::UnknownFlow;
    if (r != DropReason::None)
        count_drop(r);
    return r;
}

// The time an ACK waited in this host before us (this lcore descheduled, or
// busy with a burst of sends) is no queue on the path: it joins the
// receiver's hold, so congestion control's RTT sample is the path's. Seen
// on 2 vCPUs: samples of 3-4 ms, 3.1-4.1 ms of it the ACK's wait here.
inline void Sender::held_here(const rte_mbuf* m, Control& c, uint64_t now) const {
    if (cfg_.arrival_field < 0 || c.hold_ns == kNoEcho)
        return;
    const uint64_t at = *RTE_MBUF_DYNFIELD(m, cfg_.arrival_field, const uint64_t*);
    if (at == 0 || at >= now || now - at >= cfg_.cc.tsc_hz) // none, or not a wait (clocks at odds, over 1 s)
        return;
    const uint64_t ns = (now - at) * 1000000000ull / cfg_.cc.tsc_hz + c.hold_ns;
    c.hold_ns = ns < kNoEcho ? static_cast<uint32_t>(ns) : kNoEcho - 1;
}

DropReason Sender::on_wire_control(const rte_mbuf* m, uint64_t now) {
    ParsedPacket p;
    DropReason r = parse_packet(m, pcfg_, p);
    if (r == DropReason::None) {
        if (!p.is_control() || p.is_session()) {
            r = DropReason::Control;
        } else {
            SendFlow* f = table_ ? table_[p.hdr.flow] : nullptr;
            if (f == nullptr || f->spec.link == nullptr) {
                r = DropReason::UnknownFlow;
            } else {
                Control c;
                r = parse_ack(m, p, f->spec.link->key, c); // the MAC before anything is believed
                if (r == DropReason::None) {
                    held_here(m, c, now);
                    r = apply(*f, c, now, true);
                }
                if (r == DropReason::None)
                    bump(ctr_.ctl_packets);
            }
        }
    }
    if (r != DropReason::None)
        count_drop(r);
    return r;
}

// --- spraying (tx_paths.h) ------------------------------------------------------------

// The session's path state, shared by its flows here; a fresh one, its
// ports from this flow's, for the session's first flow.
TxPaths* Sender::paths_for(const SessionLink* link, const SendFlow& f) {
    PathSlot* free_slot = nullptr;
    for (PathSlot& p : path_slots_) {
        if (p.users != 0 && p.link == link) {
            p.users++;
            return &p.paths;
        }
        if (p.users == 0 && free_slot == nullptr)
            free_slot = &p;
    }
    if (free_slot == nullptr)
        return nullptr; // more sprayed sessions than slots: this one keeps one path
    const auto* udp = reinterpret_cast<const rte_udp_hdr*>(f.spec.tx.l2l4 + kEthLen + kIpLen);
    free_slot->link = link;
    free_slot->users = 1;
    free_slot->paths.init(std::min(f.spec.paths, cfg_.paths), rte_be_to_cpu_16(udp->src_port), cfg_.cc.tsc_hz,
                          stamp_shift_, std::min<uint32_t>(link->rails, cfg_.rails));
    return &free_slot->paths;
}

// A run of packets of m about to be built: its path (the port into the
// flow's template, the path into the stamp's low bits), and k cut to what
// one path takes in a row (one packet for a dead path's probe).
uint32_t Sender::aim(SendFlow& f, TxMessage& m, uint32_t& k, uint32_t avoid, uint64_t now) {
    TxPaths& paths = *f.paths;
    const uint32_t p = paths.choose(now, avoid);
    k = std::min(k, paths.dead(p) ? 1u : TxPaths::kRun);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(f.spec.tx.l2l4 + kEthLen + kIpLen);
    udp->src_port = rte_cpu_to_be_16(paths.port(p));
    m.stamp = rte_cpu_to_be_16(paths.stamp(stamp_host_, p));
    if (unlikely(paths.rails() > 1) && paths.rail(p) != f.rail) { // another rail's addresses
        f.rail = static_cast<uint8_t>(paths.rail(p));
        f.spec.link->rail[f.rail].write(f.spec.tx.l2l4);
        f.spec.tx.ip_sum = rte_raw_cksum(f.spec.tx.l2l4 + kEthLen, kIpLen);
    }
    return p;
}

// --- rails ----------------------------------------------------------------------------

// The round's packets, each into its rail's queue, in order (a queue
// that is full, its link down, frees them: its paths count the loss, as a
// link's would), and every queue tried at once.
void Sender::split_rails(uint32_t n, uint64_t now) {
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t r = rail_of_[i];
        rail_of_[i] = 0;
        if (!rail_q(r).push(pend_[i])) {
            rte_pktmbuf_free(pend_[i]);
            bump(rail_full_);
        }
    }
    for (uint32_t r = 0; r < cfg_.rails; r++)
        rail_q(r).flush(now);
}

// A round may be built: every rail's queue took what it had, or is stuck
// (a stall freed its packets and its PMD took nothing since: its link is
// down, and waiting for it would stop the rails that live).
bool Sender::rails_ready(uint64_t now) {
    bool ready = true;
    for (uint32_t r = 0; r < cfg_.rails; r++) {
        TxBurst& q = rail_q(r);
        ready &= q.flush(now) || q.stuck();
    }
    return ready;
}

uint64_t Sender::rail_dropped() const {
    uint64_t n = __atomic_load_n(&rail_full_, __ATOMIC_RELAXED);
    for (uint32_t r = 1; r < cfg_.rails; r++)
        n += rail_tx_[r]->dropped();
    return n;
}

// Packets [first, first + k) of msg_id went by path p.
void Sender::carried(SendFlow& f, uint32_t msg_id, uint32_t first, uint32_t k, uint32_t p, bool retx) {
    uint8_t* rec = f.path_rec(msg_id);
    for (uint32_t i = first; i < first + k; i++)
        rec[i] = static_cast<uint8_t>(p);
    if (f.paths->dead(p))
        f.paths->note_probe(p, f.spec.id, msg_id, first);
    f.paths->sent(p, k, retx);
}

// An authentic ACK's or NACK's news of the paths: the echo's RTT sample,
// and whether a dead path's probe arrived (its message acknowledged while
// the packet's record still names the probed path: not NACKed and sent
// again elsewhere).
void Sender::path_feedback(SendFlow& f, const Control& c, uint64_t now) {
    TxPaths& paths = *f.paths;
    if (c.hold_ns != kNoEcho)
        paths.on_echo(now, c.echo, c.hold_ns);
    if (paths.probing()) {
        for (uint32_t p = 0; p < paths.count(); p++) {
            const TxPaths::Probe& pr = paths.probe(p);
            if (!pr.pending || pr.flow != f.spec.id || !before(pr.msg_id, f.acked))
                continue;
            const OutMsg& o = f.out[pr.msg_id & f.mask];
            // A record reused since: the message was released, so it arrived
            // whole, and (unknown which copy) the probe counts as through.
            const bool arrived = o.msg_id != pr.msg_id || f.path_rec(pr.msg_id)[pr.pkt] == p;
            paths.probe_done(now, p, arrived);
        }
    }
}

// The loss a NACK's news (NackFilter) names, each packet by the path it
// last went by. Only news: a repeat of the receiver's, asked before the
// retransmission could reach it, counted the same packets again, and in
// multipath.sh case a (CI 2026-12-07, f2ba8dd) its tails (the rest of a
// 1 MiB message each) found 15 of 16 paths dead.
void Sender::paths_lost(SendFlow& f, const Nack& n, uint64_t now) {
    const uint32_t limit = sent_pkts(f, n.msg_id);
    if (limit == 0)
        return;
    const uint8_t* rec = f.path_rec(n.msg_id);
    for (uint32_t r = 0; r < n.nranges && r < kMaxNackRanges; r++)
        for (uint32_t i = n.ranges[r].first, end = range_end(n.ranges[r], limit); i < end; i++)
            f.paths->on_lost(now, rec[i], 1);
}

uint32_t Sender::path_views(PathView* out, uint32_t max) const {
    uint32_t k = 0;
    for (uint32_t s = 0; s < path_slots_.size(); s++) {
        const PathSlot& slot = path_slots_[s];
        if (slot.link == nullptr)
            continue;
        for (uint32_t p = 0; p < slot.paths.count() && k < max; p++) {
            out[k] = slot.paths.view(p);
            out[k++].session = s;
        }
    }
    return k;
}

} // namespace tailmark
