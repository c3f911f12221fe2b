#include "tailmark/receiver.h"

#include <cstdio>
#include <cstring>
#include <new>

#include <rte_mbuf_dyn.h>
#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_ring_elem.h>

namespace tailmark {

namespace {
inline void bump(uint64_t& c, uint64_t n = 1) { __atomic_store_n(&c, c + n, __ATOMIC_RELAXED); }
constexpr uint32_t kMaxRecvFlows = RxPlacer::kMaxFlows;
} // namespace

struct RecvFlow {
    RecvFlowSpec spec;
    RxPlacer::FlowRx* rx = nullptr;
    uint32_t batch = 1;          // ACK at once after this many
    uint32_t released_sent = 0;  // the cursors of the last ACK sent
    uint32_t acked_sent = 0;
    uint64_t ack_tsc = 0;
    uint64_t echo_sent_tsc = 0;  // arrival of the packet the last ACK echoed
    uint64_t ctl_seq = 0;        // the number of the flow's last ACK or NACK on the wire (control.h's seq)
};

uint16_t Receiver::id_of(const RecvFlow* f) { return f->spec.id; }
const uint32_t* Receiver::acked_word(const RecvFlow* f) { return RxPlacer::acked_word(f->rx); }
uint32_t Receiver::released_sent(const RecvFlow* f) { return __atomic_load_n(&f->released_sent, __ATOMIC_ACQUIRE); }
const RecvFlowSpec& Receiver::spec_of(const RecvFlow* f) { return f->spec; }

RecvFlow* Receiver::make_flow(const RecvFlowSpec& spec, int socket) {
    void* mem = rte_zmalloc_socket("tm_recv_flow", sizeof(RecvFlow), 64, socket);
    if (mem == nullptr)
        return nullptr;
    auto* f = new (mem) RecvFlow();
    f->spec = spec;
    f->rx = RxPlacer::prepare_flow(spec.id, spec.ring, spec.key, spec.stride, socket, spec.auth);
    if (f->rx == nullptr) {
        free_flow(f);
        return nullptr;
    }
    f->released_sent = f->acked_sent = spec.ring->released();
    return f;
}

void Receiver::free_flow(RecvFlow* f) {
    if (f == nullptr)
        return;
    RxPlacer::destroy_flow(f->rx);
    f->~RecvFlow();
    rte_free(f);
}

Receiver::Receiver(const ReceiverConfig& cfg) : cfg_(cfg), placer_(cfg.parser, cfg.socket) {
    if (cfg_.tsc_hz == 0)
        cfg_.tsc_hz = rte_get_tsc_hz();
    placer_.set_mode(cfg.mode);
    placer_.set_stream_min(cfg.stream_min);
    placer_.set_nack_delay(cfg.nack_delay);
    flows_.reserve(kMaxRecvFlows);
    acking_.reserve(kMaxRecvFlows);
    char name[RTE_RING_NAMESIZE];
    snprintf(name, sizeof(name), "%s_nq", cfg.name); // set-up only
    nack_q_ = rte_ring_create_elem(name, sizeof(Nack), 1024, cfg.socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
    table_ = static_cast<RecvFlow**>(rte_zmalloc_socket("tm_recv_table", sizeof(RecvFlow*) * 65536, 64, cfg.socket));
    ok_ = nack_q_ != nullptr && table_ != nullptr && cfg.pool != nullptr;
    if (cfg_.routes.rx_owner != nullptr) {
        if (cfg_.routes.handoff_in == nullptr || cfg_.routes.self >= cfg_.routes.nreceivers)
            ok_ = false;
        else
            placer_.set_handoff(cfg_.routes.rx_owner, cfg_.routes.self, cfg_.routes.rx_arrived, cfg_.routes.auth_of);
    }
    hold_limit_ = kHoldLimitUs * cfg_.tsc_hz / 1000000;
}

Receiver::~Receiver() {
    // The flows are the caller's: it removes and frees them.
    rte_ring_free(nack_q_);
    rte_free(table_);
}

bool Receiver::install(RecvFlow* f) {
    if (!ok_ || f == nullptr || table_[f->spec.id] != nullptr || flows_.size() == flows_.capacity())
        return false;
    if (!placer_.install(f->rx))
        return false;
    placer_.set_nack_ring(f->spec.id, f->spec.link ? nack_q_ : nullptr);
    if (f->spec.pkt_cq)
        placer_.set_packet_completion_ring(f->spec.id, f->spec.pkt_cq);
    const uint32_t div = cfg_.ack_batch_div ? cfg_.ack_batch_div : 1;
    f->batch = f->spec.ring->size() / div ? f->spec.ring->size() / div : 1;
    table_[f->spec.id] = f;
    flows_.push_back(f); // reserved: no allocation
    if (f->spec.link != nullptr && !f->spec.link->local_peer)
        acking_.push_back(f); // a sender in this process reads the cursors itself
    return true;
}

RecvFlow* Receiver::remove(uint16_t id) {
    RecvFlow* f = table_ ? table_[id] : nullptr;
    if (f == nullptr)
        return nullptr;
    placer_.uninstall(id);
    table_[id] = nullptr;
    for (std::vector<RecvFlow*>* v : {&flows_, &acking_})
        for (size_t i = 0; i < v->size(); i++)
            if ((*v)[i] == f) {
                (*v)[i] = v->back();
                v->pop_back();
                break;
            }
    if (rr_ >= acking_.size())
        rr_ = 0;
    return f;
}

// A frame the placer kept: data of a flow another Receiver holds goes to
// that one; an ACK or NACK to the Sender of its flow id; the rest (SESSION,
// ARP) to the control plane.
void Receiver::route(rte_mbuf* m, uint64_t now) {
    rte_ring* to = cfg_.routes.control;
    const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
    if (eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_IPV4)) { // parse_packet accepted it: a tailmark header follows
        WireHeader wh;
        const auto* h = static_cast<const WireHeader*>(rte_pktmbuf_read(m, kEthLen + kIpLen + kUdpLen, kHeaderLen, &wh));
        constexpr uint8_t kControl = static_cast<uint8_t>(Flags::Ack) | static_cast<uint8_t>(Flags::Nack) |
                                     static_cast<uint8_t>(Flags::Session);
        if (h != nullptr && (h->flags & kControl) == 0 && cfg_.routes.rx_owner != nullptr) {
            // Data: the placer kept it because another Receiver holds its flow.
            const uint8_t o = __atomic_load_n(&cfg_.routes.rx_owner[rte_be_to_cpu_16(h->flow)], __ATOMIC_RELAXED);
            bool hold = false;
            if (o == cfg_.routes.self) { // named ours, not installed yet: moving here, or removed
                if (hold_since_ == 0)
                    hold_since_ = now;
                hold = now - hold_since_ < hold_limit_;
                held_now_ = true;
            }
            if (o >= cfg_.routes.nreceivers || (o == cfg_.routes.self && !hold)) { // removed since
                bump(ctr_.drops[index(DropReason::UnknownFlow)]);
                rte_pktmbuf_free(m);
            } else if (rte_ring_mp_enqueue(cfg_.routes.handoff_in[o], m) != 0) {
                bump(ctr_.drops[index(DropReason::HandoffBacklog)]); // lost here: the sender's NACK/RTO recovers it
                rte_pktmbuf_free(m);
            } else {
                bump(ctr_.handed_out);
                if (hold)
                    bump(ctr_.held);
            }
            return;
        }
        if (h != nullptr && (h->flags & static_cast<uint8_t>(Flags::Session)) == 0) {
            const uint8_t s = cfg_.routes.sender_of ? cfg_.routes.sender_of[rte_be_to_cpu_16(h->flow)] : kNoSender;
            if (s >= cfg_.routes.nsenders) {
                bump(ctr_.drops[index(DropReason::UnknownFlow)]);
                rte_pktmbuf_free(m);
                return;
            }
            to = cfg_.routes.wire_in[s];
            if (cfg_.arrival_field >= 0) // its wait here, until its Sender takes it, is this host's
                *RTE_MBUF_DYNFIELD(m, cfg_.arrival_field, uint64_t*) = arrived_;
        }
    }
    if (to == nullptr || rte_ring_mp_enqueue(to, m) != 0) {
        bump(ctr_.drops[index(to ? DropReason::ControlBacklog : DropReason::Control)]);
        rte_pktmbuf_free(m);
        return;
    }
    bump(ctr_.routed);
}

void Receiver::rx_burst(rte_mbuf** pkts, uint16_t n, uint64_t now, uint64_t since) {
    arrived_ = since != 0 && since < now ? since : now;
    placer_.set_arrival_floor(arrived_);
    constexpr uint16_t kChunk = 256;
    rte_mbuf* keep[kChunk];
    uint16_t nkeep = 0;
    while (n > 0) {
        const uint16_t k = n > kChunk ? kChunk : n;
        placer_.rx_burst_route(pkts, k, now, keep, nkeep);
        for (uint16_t i = 0; i < nkeep; i++)
            route(keep[i], now);
        pkts += k;
        n = static_cast<uint16_t>(n - k);
    }
}

// One ACK or NACK to the flow's sender: in memory when it is in this
// process, else authenticated on the wire. False when it could not go (the
// cursors stay unsent, so the next poll tries again).
bool Receiver::emit(RecvFlow& f, Control& c, uint64_t now) {
    SessionLink* link = f.spec.link;
    c.n.flow = f.spec.peer_flow;
    c.sender_epoch = link->peer_epoch;
    c.receiver_epoch = link->local_epoch;
    uint16_t stamp = 0, port = 0;
    uint64_t arrived = 0;
    uint32_t rail = 0;
    if (!link->local_peer && placer_.echo_of(f.spec.id, stamp, arrived, port) && now >= arrived) {
        const uint64_t ns = (now - arrived) * 1000000000ull / cfg_.tsc_hz; // < 2^64 for holds under ~2 s at 4 GHz
        c.echo = stamp;
        c.hold_ns = ns < kNoEcho ? static_cast<uint32_t>(ns) : kNoEcho - 1;
        f.echo_sent_tsc = arrived;
        // The peer is alive: its data came (authenticated, version 2), which
        // keeps the session up while its control packets' rail is down.
        if (arrived > link->peer_data_tsc.load(std::memory_order_relaxed))
            link->peer_data_tsc.store(arrived, std::memory_order_relaxed);
        if (unlikely(link->rails > 1))
            rail = rail_of(port, link->rails);
    } else {
        c.echo = 0;
        c.hold_ns = kNoEcho;
    }
    bool ok;
    if (link->local_peer) {
        const uint8_t s = cfg_.routes.sender_of ? cfg_.routes.sender_of[c.n.flow] : kNoSender;
        ok = s < cfg_.routes.nsenders &&
             rte_ring_mp_enqueue_elem(cfg_.routes.local_in[s], &c, sizeof(Control)) == 0;
    } else {
        c.seq = ++f.ctl_seq; // a number lost with its packet leaves a gap, which the window takes
        rte_mbuf* m;
        if (likely(rail == 0)) {
            m = build_ack(cfg_.pool, link->l2l4, link->key, c);
        } else { // back by the rail the newest packet came by: its addresses
            alignas(8) uint8_t t[sizeof(link->l2l4)];
            memcpy(t, link->l2l4, sizeof(t));
            link->rail[rail].write(t);
            m = build_ack(cfg_.pool, t, link->key, c);
        }
        ok = m != nullptr && cfg_.routes.ctl_out != nullptr && rte_ring_mp_enqueue(cfg_.routes.ctl_out, m) == 0;
        if (!ok && m != nullptr)
            rte_pktmbuf_free(m);
    }
    if (!ok) {
        bump(ctr_.ctl_lost);
        return false;
    }
    link->ack_tx_tsc.store(now, std::memory_order_relaxed);
    bump(c.nack ? ctr_.nacks_tx : ctr_.acks_tx);
    if (!link->local_peer)
        bump(ctr_.ctl_packets);
    return true;
}

// Data arrived since the flow's last echo, and the sender has heard no ACK
// of its session for ack_feedback: its congestion control needs a fresh RTT
// sample. Per session, not per flow: a session has one controller, which
// takes one sample per interval, and per flow a session of N flows sent N
// times the ACKs (4 flows through tailmark-cat: 15.6 k ACKs/s against 4 k for
// one, every one built, signed and taken on the lcores that move the data).
inline bool Receiver::feedback_due(const RecvFlow& f, uint64_t now) const {
    if (cfg_.ack_feedback == 0 || now - f.spec.link->ack_tx_tsc.load(std::memory_order_relaxed) < cfg_.ack_feedback)
        return false;
    uint16_t stamp;
    uint64_t arrived;
    return placer_.echo_of(f.spec.id, stamp, arrived) && arrived != f.echo_sent_tsc;
}

bool Receiver::poll(uint64_t now) {
    bool work = false;
    if (cfg_.routes.rx_owner != nullptr) {
        // Placed here, or passed on again if the flow moved meanwhile, or held
        // while it moves in; a frame cannot circle for long: the holding has
        // a time limit, and a flow moves only once its frames keep arriving
        // elsewhere.
        constexpr unsigned kBurst = 32;
        rte_mbuf* pkts[kBurst];
        const unsigned n = rte_ring_sc_dequeue_burst(cfg_.routes.handoff_in[cfg_.routes.self],
                                                     reinterpret_cast<void**>(pkts), kBurst, nullptr);
        held_now_ = false;
        if (n != 0) {
            bump(ctr_.handed_in, n);
            placer_.learn_arrivals(false); // they arrived elsewhere
            rx_burst(pkts, static_cast<uint16_t>(n), now);
            placer_.learn_arrivals(true);
            work = true;
        }
        if (!held_now_)
            hold_since_ = 0; // nothing held this turn: the next hold starts its own clock
    }
    placer_.poll(now);
    // NACKs of the gap scan and of the placer's immediate answers, each with
    // the cursors (a NACK is an ACK too).
    Control c;
    while (rte_ring_sc_dequeue_elem(nack_q_, &c.n, sizeof(Nack)) == 0) {
        RecvFlow* f = table_[c.n.flow];
        if (f == nullptr || f->spec.link == nullptr)
            continue; // removed since
        c.nack = true;
        c.released_upto = f->spec.ring->released();
        placer_.sync_released(f->spec.id);
        c.acked_upto = placer_.acked_upto(f->spec.id); // after: released <= acked
        work |= emit(*f, c, now);
    }
    // ACKs, round robin over a bounded number of flows per poll.
    const uint32_t nflows = static_cast<uint32_t>(acking_.size());
    const uint32_t visit = nflows < cfg_.ack_scan ? nflows : cfg_.ack_scan;
    for (uint32_t i = 0; i < visit; i++) {
        if (rr_ >= nflows)
            rr_ = 0;
        RecvFlow& f = *acking_[rr_++];
        const uint32_t released = f.spec.ring->released();
        placer_.sync_released(f.spec.id);
        const uint32_t acked = placer_.acked_upto(f.spec.id); // after: released <= acked
        const uint32_t adv_r = released - f.released_sent, adv_a = acked - f.acked_sent;
        const uint32_t adv = adv_r > adv_a ? adv_r : adv_a;
        const bool asked = placer_.take_ack_request(f.spec.id);
        if (!(asked || adv >= f.batch || (adv != 0 && now - f.ack_tsc >= cfg_.ack_min) || feedback_due(f, now)))
            continue;
        c.nack = false;
        c.n.nranges = 0;
        c.released_upto = released;
        c.acked_upto = acked;
        if (emit(f, c, now)) {
            __atomic_store_n(&f.released_sent, released, __ATOMIC_RELEASE); // released_sent() reads it
            f.acked_sent = acked;
            f.ack_tsc = now;
            work = true;
        }
    }
    return work;
}

} // namespace tailmark
