// The engines, made once at set-up: a Sender per tx queue, a Receiver per
// rx queue, the consumers, the lcores' contexts and rings, the session table.
#include "runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_ring_elem.h>

#include "bench/generator.h"
#include "bench/source.h"
#include "service/service.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

constexpr unsigned kRequestRing = 4096;     // requests per lcore in flight
constexpr uint64_t kGenBudget = 512ull << 20;  // generator buffers per tx lcore, at most (bytes)

// An allocation failed: exit code 1, and what to do about it.
bool oom(SetupError& e, const std::string& what) {
    e = {1, "out of memory: " + what + " (raise EAL -m)"};
    return false;
}

} // namespace

LcoreCtx* Runtime::lcore_ctx(unsigned l) {
    if (lcores_[l] == nullptr) {
        LcoreCtx* c = socket_new<LcoreCtx>(static_cast<int>(rte_lcore_to_socket_id(l)));
        if (c == nullptr)
            return nullptr;
        c->plane = &plane_;
        c->lcore = l;
        c->idle_sleep_us = ecfg_.idle_sleep_us;
        c->idle_after = rte_get_tsc_hz() / 1000;
        char name[RTE_RING_NAMESIZE];
        snprintf(name, sizeof(name), "tm_req_%u", l);
        c->req = rte_ring_create_elem(name, sizeof(Request), kRequestRing, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        snprintf(name, sizeof(name), "tm_resp_%u", l);
        c->resp = rte_ring_create_elem(name, sizeof(Request), kRequestRing, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        lcores_[l] = c;
        if (c->req == nullptr || c->resp == nullptr)
            return nullptr;
    }
    return lcores_[l];
}

// The engines: a Sender per tx queue, a Receiver per rx queue, the consumer
// contexts, and the rings between them. No flow yet: sessions bring them.
bool Runtime::make_engines(SetupError& e) {
    mac_ = opt_.src_mac_set ? opt_.src_mac : tx_port_->mac();
    ecfg_.cc.max_mbps = cc_max_mbps(); // --cc-max-mbps, else the port's link speed
    sender_of_ = static_cast<uint8_t*>(rte_malloc("tm_sender_of", 65536, 64));
    if (sender_of_ == nullptr)
        return oom(e, "ACK routes");
    memset(sender_of_, kNoSender, 65536);
    allocs_.push_back(sender_of_);
    control_in_ = rte_ring_create("tm_ctl_in", 4096, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (control_in_ == nullptr)
        return oom(e, "control ring");
    if (!make_senders(e) || !make_gen_bufs(e) || !make_receivers(e) || !make_consumers(e))
        return false;
    // The main lcore runs the control loop, and its roles if it has any.
    if (lcore_ctx(rte_get_main_lcore()) == nullptr)
        return oom(e, "request rings");
    make_session_table();
    return true;
}

// tx: lcore t owns the tx queues q with q % T == t, one Sender each; then
// the in-memory loopback's Senders.
bool Runtime::make_senders(SetupError& e) {
    const auto T = static_cast<uint32_t>(tx_lcores_.size());
    for (uint32_t t = 0; t < T; t++) {
        TxCtx* c = socket_new<TxCtx>(tx_socket_);
        if (c == nullptr)
            return oom(e, "tx context");
        txs_.push_back(c);
        c->plane = &plane_;
        c->lcore = tx_lcores_[t];
        c->delivery_latency = opt_.mode == Mode::Send;
        if (opt_.mode == Mode::Service)
            c->set_sink(svc_complete_burst, c); // into the applications' completion rings
        else if (c->delivery_latency)
            c->set_sink(gen_delivered, c);      // each delivery a latency sample
        c->hist.clear();
        LcoreCtx* l = lcore_ctx(c->lcore);
        if (l == nullptr)
            return oom(e, "request rings");
        l->tx = c;
    }
    for (uint16_t q = 0; q < tx_nq_; q++) {
        TxCtx* c = txs_[q % T];
        char name[24];
        snprintf(name, sizeof(name), "tm_s%u", q);
        SenderConfig sc = engine::sender_config(ecfg_, tsc_hz_, false);
        sc.port = tx_port_->id();
        sc.queue = q;
        sc.pool = tx_pool_;
        sc.udp_checksum_offload = tx_port_->tx_udp_checksum();
        sc.max_flows = 65536 / tx_nq_ + 1;
        sc.name = name;
        sc.socket = tx_socket_;
        auto* s = new (std::nothrow) Sender(sc);
        if (s == nullptr || !s->ok()) {
            delete s;
            return oom(e, "sender " + std::to_string(q));
        }
        if (opt_.mode == Mode::Service)
            s->set_source(svc_source, c); // the applications' submissions
        else if (!opt_.replay)
            // Batched where the generator can batch: not into its one
            // scratch buffer (--flow-control off), nor paced, nor the shell's.
            s->set_source(gen_source, c,
                          (opt_.fixed_payload || opt_.flow_control) && opt_.rate == 0 && !opt_.interactive
                              ? gen_source_many
                              : nullptr);
        senders_.push_back(s);
        sender_lcore_.push_back(c->lcore);
        wire_in_.push_back(s->wire_inbox());
        local_in_.push_back(s->local_inbox());
        c->senders.push_back(s);
        if (opt_.replay) {
            ReplayQueue rq;
            rq.q = std::make_unique<TxBurst>(sc.port, q, sc.stall);
            rq.flows.reserve(opt_.flows);
            c->replay.push_back(std::move(rq));
        }
    }
    port_senders_ = static_cast<uint32_t>(senders_.size());
    // The in-memory loopback's Senders, one per queue (rx lcore r's), dealt
    // over the tx lcores like the port's. Nothing to pace (no path is
    // shared) and nothing to checksum (memory, not a wire).
    for (uint16_t r = 0; local_port_ && r < local_port_->nb_txq(); r++) {
        TxCtx* c = txs_[r % T];
        char name[24];
        snprintf(name, sizeof(name), "tm_l%u", r);
        SenderConfig sc = engine::sender_config(ecfg_, tsc_hz_, true);
        sc.port = local_port_->id();
        sc.queue = r;
        sc.pool = tx_pool_;
        sc.max_flows = 65536 / tx_nq_ + 1;
        sc.name = name;
        sc.socket = tx_socket_;
        auto* s = new (std::nothrow) Sender(sc);
        if (s == nullptr || !s->ok()) {
            delete s;
            return oom(e, "in-memory loopback sender " + std::to_string(r));
        }
        s->set_source(svc_source, c);
        senders_.push_back(s);
        sender_lcore_.push_back(c->lcore);
        wire_in_.push_back(s->wire_inbox());
        local_in_.push_back(s->local_inbox());
        c->senders.push_back(s);
    }
    return true;
}

// The generator's buffers: each tx lcore's flows may hold up to a window
// of messages each until they are delivered, within a memory budget, but
// at least one per flow (fewer stop nothing: a flow waits for a buffer).
bool Runtime::make_gen_bufs(SetupError& e) {
    if (opt_.mode != Mode::Recv && opt_.mode != Mode::Service && !opt_.fixed_payload && !opt_.replay) {
        const auto T = static_cast<uint32_t>(tx_lcores_.size());
        const uint64_t size = RTE_ALIGN_CEIL(opt_.msg_size ? opt_.msg_size : 1, 64);
        for (TxCtx* c : txs_) {
            const uint64_t nflows = (opt_.flows + T - 1) / T;
            uint64_t n = std::min<uint64_t>(nflows * opt_.ring_size, std::max<uint64_t>(kGenBudget / size, nflows));
            n = std::max<uint64_t>(n, 1);
            c->buf_size = size;
            auto* bufs = static_cast<GenBuf*>(rte_zmalloc_socket("tm_gen_bufs", sizeof(GenBuf) * n, 64, tx_socket_));
            auto* mem = static_cast<uint8_t*>(rte_malloc_socket("tm_gen_data", size * n, 64, tx_socket_));
            if (bufs == nullptr || mem == nullptr) {
                rte_free(bufs);
                rte_free(mem);
                return oom(e, "generator buffers (" + std::to_string(n) + " x " + std::to_string(size) +
                              " B: flows x --ring-size x --msg-size)");
            }
            allocs_.push_back(bufs);
            allocs_.push_back(mem);
            for (uint64_t i = 0; i < n; i++) {
                GenBuf& b = bufs[i];
                b.data = mem + i * size;
                b.owner = c;
                b.shinfo.free_cb = gen_buf_free;
                b.shinfo.fcb_opaque = &b;
                rte_mbuf_ext_refcnt_set(&b.shinfo, 0); // the Sender's hold is the first reference
                b.next = c->free_bufs;
                c->free_bufs = &b;
            }
        }
    }
    return true;
}

// rx: a Receiver per rx lcore, and with hand-off the moves between them.
bool Runtime::make_receivers(SetupError& e) {
    if (handoff_) { // the moves' tables and rings (lib/tailmark-engine)
        std::string what;
        if (!rx_moves_.make(static_cast<uint32_t>(rx_lcores_.size()), rx_socket_, tsc_hz_ / 200, what)) // every 5 ms
            return oom(e, what);
    }

    // rx: lcore r polls rx queue r with a Receiver.
    for (uint32_t r = 0; r < rx_lcores_.size(); r++) {
        RxCtx* c = socket_new<RxCtx>(rx_socket_);
        if (c == nullptr)
            return oom(e, "rx context");
        rxs_.push_back(c);
        c->plane = &plane_;
        c->lcore = rx_lcores_[r];
        c->port = rx_port_->id();
        c->queue = static_cast<uint16_t>(r);
        if (local_port_) {
            c->local_port = local_port_->id();
            c->local_queue = static_cast<uint16_t>(r);
        }
        if (opt_.fault_set || opt_.interactive) {
            char name[RTE_RING_NAMESIZE];
            snprintf(name, sizeof(name), "tm_fault_%u", r);
            auto* shim = new (std::nothrow) drivers::FaultShim(opt_.fault, name);
            if (shim == nullptr)
                return oom(e, "fault shim");
            shims_.push_back(shim);
            const rte_eth_rxtx_callback* cb = shim->attach_rx(c->port, c->queue);
            if (cb == nullptr) {
                e = {1, "--fault: cannot attach the fault shim to port " + std::to_string(c->port) + " rx queue " +
                            std::to_string(c->queue) + ": " + rte_strerror(rte_errno)};
                return false;
            }
            shim_cbs_.push_back(cb);
            fault_spec_ = opt_.fault;
        }
        char name[24];
        snprintf(name, sizeof(name), "tm_r%u", r);
        ReceiverConfig rc = engine::receiver_config(ecfg_, tsc_hz_);
        rc.pool = tx_pool_;
        rc.routes.sender_of = sender_of_;
        rc.routes.wire_in = wire_in_.data();
        rc.routes.local_in = local_in_.data();
        rc.routes.nsenders = static_cast<uint32_t>(senders_.size());
        rc.routes.control = control_in_;
        rc.routes.ctl_out = senders_[r % port_senders_]->ctl_out(); // ACKs to remote peers: the port's
        if (handoff_) {
            rx_moves_.fill(rc.routes);
            rc.routes.nreceivers = static_cast<uint32_t>(rx_lcores_.size());
            rc.routes.self = static_cast<uint8_t>(r);
        }
        rc.name = name;
        rc.socket = rx_socket_;
        auto* rcv = new (std::nothrow) Receiver(rc);
        if (rcv == nullptr || !rcv->ok()) {
            delete rcv;
            return oom(e, "receiver " + std::to_string(r));
        }
        receivers_.push_back(rcv);
        c->receiver = rcv;
        LcoreCtx* l = lcore_ctx(c->lcore);
        if (l == nullptr)
            return oom(e, "request rings");
        l->rx = c;
    }
    if (handoff_) {
        std::vector<unsigned> rx_lcores;
        for (const RxCtx* c : rxs_)
            rx_lcores.push_back(c->lcore);
        rx_moves_.set_receivers(receivers_, std::move(rx_lcores));
    }
    return true;
}

// The consumers: a context per --consumer-lcores lcore (and its slow trace).
bool Runtime::make_consumers(SetupError& e) {
    for (uint32_t k = 0; k < cons_lcores_.size(); k++) {
        ConsCtx* c = socket_new<ConsCtx>(rx_socket_);
        if (c == nullptr)
            return oom(e, "consumer context");
        conss_.push_back(c);
        c->plane = &plane_;
        c->lcore = cons_lcores_[k];
        c->hist.clear();
        c->flows.reserve(16384);
        LcoreCtx* l = lcore_ctx(c->lcore);
        if (l == nullptr)
            return oom(e, "request rings");
        l->cons = c;
        if (opt_.trace_slow_ns != 0) { // the consumer's lcore records its iterations
            traces_.push_back(std::make_unique<SlowTrace>(opt_.trace_slow_ns * tsc_hz_ / 1000000000, 4096));
            c->trace = l->trace = traces_.back().get();
        }
    }
    return true;
}

// The session table: this end's addresses and timers, the data versions
// it serves, and where its packets go.
void Runtime::make_session_table() {
    SessionTable::Config tc;
    tc.pool = tx_pool_;
    tc.mac = mac_;
    tc.rx_mac = opt_.mode == Mode::Loopback && !opt_.dst_mac_set ? rx_port_->mac() : mac_;
    if (opt_.mode == Mode::Loopback && opt_.dst_mac_set)
        tc.rx_mac = opt_.dst_mac;
    tc.self = {opt_.src_ip, opt_.udp_port};
    tc.netmask = opt_.src_netmask();
    tc.gateway = opt_.gateway;
    tc.hz = tsc_hz_;
    tc.keepalive_us = opt_.keepalive_ms * 1000;
    tc.peer_timeout_us = opt_.peer_timeout_ms * 1000;
    tc.connect_timeout_us = opt_.connect_timeout_ms * 1000;
    // Data version 2 (a keyed tag on every data packet) offered and required;
    // a peer offering only 1 is served with --data-version 1 or --insecure.
    tc.max_version = static_cast<uint8_t>(opt_.data_version);
    tc.min_version = opt_.insecure || opt_.data_version == 1 ? kVersion : kVersion2;
    tc.data_auth = opt_.data_auth;
    if (tc.min_version == kVersion && opt_.mode != Mode::Loopback)
        TM_LOG(NOTICE, app, "data version 1 sessions are served (%s): their data packets carry no tag, so any "
               "host that reaches this port can place bytes in them", opt_.insecure ? "--insecure" : "--data-version 1");
    rte_ring* out = senders_[0]->ctl_out();
    // With the in-memory loopback, a session packet to this daemon's own
    // address goes straight back to the control loop, as if received.
    rte_ring* self_in = local_port_ ? control_in_ : nullptr;
    const rte_be32_t self_ip = rte_cpu_to_be_32(opt_.src_ip);
    sessions_ = std::make_unique<SessionTable>(
        tc,
        [out, self_in, self_ip](rte_mbuf* m) {
            rte_ring* to = out;
            if (self_in != nullptr && rte_pktmbuf_data_len(m) >= kEthLen + kIpLen &&
                rte_pktmbuf_mtod_offset(m, const rte_ipv4_hdr*, kEthLen)->dst_addr == self_ip)
                to = self_in;
            if (rte_ring_mp_enqueue(to, m) == 0)
                return true;
            rte_pktmbuf_free(m);
            return false;
        },
        [this](Session& s) { on_session(s); });
}

} // namespace tailmark::app
