// One flow's two halves as a session makes them, for the service and the
// benchmark alike: its receive side, its send side, its Sender.
#include "runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_ring_elem.h>

#include "bench/bench.h"
#include "tailmark/engine/session_flows.h"
#include "tailmark/log.h"

namespace tailmark::app {

// A flow's receive side: ring (memzone), per-packet ring, the Receiver's
// state and the consumer's; handed to the lcores by the caller.
bool Runtime::make_recv_flow(FlowCtx& f, AppSession& a, Session& s, uint16_t id, uint16_t i, std::string& err) {
    const uint32_t stride = stride_for_mtu(s.params.mtu, s.params.version);
    f.recv_id = id;
    if (!f.ring) // --mode service lays it out in the application's memory first
        f.ring = CompletionRing::create(id, s.params.ring_size, s.params.max_msg, rx_socket_);
    if (!f.ring) {
        const double mib = double(s.params.ring_size) * double(RTE_ALIGN_CEIL(s.params.max_msg ? s.params.max_msg : 1, 4096)) /
                           (1 << 20);
        err = "--ring-size/--msg-size: the completion ring of flow " + std::to_string(f.index) + " needs " +
              std::to_string(static_cast<uint64_t>(mib + 0.5)) + " MiB (" + rte_strerror(rte_errno) +
              "); lower them, or raise EAL -m";
        return false;
    }
    f.consumed.store(f.ring->released(), std::memory_order_relaxed);
    if (opt_.completion == CompletionMode::Packet || switchable()) {
        // Room for every packet of a full window: the placer never finds it full.
        const uint64_t cap = uint64_t(s.params.ring_size) * plan_group(s.params.max_msg, stride).pkt_count + kMaxBurst;
        char name[RTE_RING_NAMESIZE];
        snprintf(name, sizeof(name), "tm_cq_%u", id);
        f.pkt_cq = rte_ring_create_elem(name, sizeof(PacketCompletion), static_cast<unsigned>(cap), rx_socket_,
                                        RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
        if (f.pkt_cq == nullptr) {
            err = "--completion packet: per-packet completion ring of flow " + std::to_string(f.index) + " (" +
                  std::to_string(cap) + " entries): " + rte_strerror(rte_errno) + "; lower --ring-size, or raise EAL -m";
            return false;
        }
    }
    // Which rx lcore sees this flow's data (the engine's steering).
    const int owner = engine_->receiver_for(id, s.peer.ip, opt_.src_ip, opt_.udp_port);
    if (owner < 0) {
        err = "flow " + std::to_string(f.index) + ": RSS queue unknown";
        return false;
    }
    // --replay: ready-made packets, nobody to acknowledge to.
    const RecvFlowSpec rs = engine::recv_spec(s, i, id, f.ring.get(), f.pkt_cq, !opt_.replay);
    f.receiver = receivers()[owner]; // where post_recv installs it
    f.recv_lcore = rxs()[owner]->lcore;
    f.recv_auth = rs.auth;
    f.recv = Receiver::make_flow(rs, rx_socket_);
    if (f.recv == nullptr) {
        err = "out of memory: receive state of flow " + std::to_string(f.index);
        return false;
    }
    (void)a;
    return bench_ == nullptr || bench_->attach_consumer(f, s, err); // the verifying consumer's part
}

// Hands a flow's receive side to its lcores: its Receiver's through the
// engine (which keeps f as the flow's place), the consumer's as the
// daemon's own op. a.pending counts the answers to wait for.
void Runtime::post_recv(FlowCtx& f, AppSession& a) {
    a.pending++; // before: the engine answers at once before launch
    const int ri = engine_->receiver_index(f.receiver); // make_recv_flow's choice
    if (ri < 0 || !engine_->install_recv(f.recv, f.recv_id, f.recv_auth, static_cast<uint32_t>(ri), &f, {f.index, &a})) {
        a.pending--;
        TM_LOG(ERR, app, "flow %u: its receive side was not installed (request ring full)", f.index);
        return;
    }
    if (f.cons != nullptr) {
        post(f.cons_ctx->lcore, {kAddCons, false, FailReason::None, f.recv_id, f.index, f.cons_ctx, f.cons, &a});
        a.pending++;
    }
}

// Frees what make_recv_flow made (the lcores never had it, or gave it back).
void Runtime::free_recv(FlowCtx& f) {
    Receiver::free_flow(f.recv);
    f.recv = nullptr;
    if (f.cons != nullptr) {
        socket_delete(f.cons);
        f.cons = nullptr;
    }
    rte_ring_free(f.pkt_cq);
    f.pkt_cq = nullptr;
    f.ring.reset(); // the memzone
}

// A flow of a session of this process that flow i of session s sends to
// (its peer's flow i, loopback or two applications of the service), when
// that flow is made; else null.
AppSession* Runtime::local_peer_session(const Session& s) { return s.local_peer ? app_session(s.peer_id) : nullptr; }

FlowCtx* Runtime::local_peer_flow(const Session& s, uint16_t i) {
    AppSession* peer_side = local_peer_session(s);
    return peer_side != nullptr && i < peer_side->flows.size() ? peer_side->flows[i] : nullptr;
}

uint32_t Runtime::send_queue_for(const Session& s, uint16_t i) {
    const auto wire = static_cast<uint16_t>(s.peer_base + i);
    const FlowCtx* peer = local_peer_flow(s, i);
    // A peer in this process: over the in-memory loopback (where there is
    // one), to its flow's rx lcore.
    return peer != nullptr ? engine_->local_sender(peer->receiver, wire, i) : sender_for(wire, i);
}

// The one place a session's send flow is opened, for the generator and the
// service alike: its SendFlow made for the peer's flow id (the ACKs come
// back with ours), its ACK route set, and the install posted to the
// Sender's lcore (the engine's install_send). A peer in this process is
// credited through its Receiver's words, not ACKs. False: out of memory
// (nothing posted).
bool Runtime::open_send(FlowCtx& f, AppSession& a, const Session& s, uint16_t i, uint32_t si, const SendOpen& o) {
    SendFlowSpec sp;
    engine::send_spec(s, i, o.ring_size, address_to(s), ecfg_.paths, sp); // the session's MTU fits
    f.send_id = sp.id;
    sp.report = o.report;
    sp.payload = o.payload;
    if (const FlowCtx* peer = local_peer_flow(s, i); peer != nullptr && peer->recv != nullptr) {
        sp.local_acked = Receiver::acked_word(peer->recv);
        sp.local_released = peer->ring->released_word();
    }
    sp.user = o.user;
    return install_send(f, a, sp, si);
}

bool Runtime::install_send(FlowCtx& f, AppSession& a, const SendFlowSpec& sp, uint32_t si) {
    f.sender = senders()[si];
    f.send_lcore = engine_->sender_lcore(si);
    f.send = Sender::make_flow(sp, tx_socket_); // the daemon's threads read its view (send_view)
    if (f.send == nullptr)
        return false;
    a.pending++; // before: the engine answers at once before launch
    if (!engine_->install_send(f.send, f.send_id, si, {f.index, &a})) {
        a.pending--;
        Sender::free_flow(f.send);
        f.send = nullptr;
        return false;
    }
    return true;
}

// The sender of a flow: net_ring loopback sends a flow on the queue its
// receiving rx lcore polls; elsewhere flows take turns over the senders.
uint32_t Runtime::sender_for(uint16_t wire, uint16_t i) const { return engine_->sender_for(wire, i); }

Addressing Runtime::address_to(const Session& s) const { return engine::address_to(s, mac_, opt_.src_ip); }

} // namespace tailmark::app
