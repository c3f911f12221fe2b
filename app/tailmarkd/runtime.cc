#include "runtime.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_random.h>
#include <rte_ring_elem.h>

#include "bench/generator.h"
#include "bench/source.h"
#include "service/service.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

constexpr uint64_t kDrainUs = 500000;       // after a stop request, finish in-flight messages for 0.5 s
constexpr uint64_t kControlUs = 100;        // control loop period
constexpr uint64_t kCloseUs = 20000;        // CLOSE packets leave within this before the lcores stop
constexpr unsigned kRequestRing = 4096;     // requests per lcore in flight
constexpr uint64_t kConsumerStallUs = 1000000; // --consumer-lcores none: a flow is stalled after 1 s without a release
constexpr uint64_t kGenBudget = 512ull << 20;  // generator buffers per tx lcore, at most (bytes)

std::string lcore_list() {
    std::string s;
    unsigned l;
    RTE_LCORE_FOREACH(l) {
        if (!s.empty())
            s += ',';
        s += std::to_string(l);
    }
    return s;
}

std::string mac_str(const rte_ether_addr& m) {
    char b[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(b, sizeof(b), &m);
    return b;
}

} // namespace

// The engine's settings, from the daemon's options (cc.max_mbps: from the
// port once it is open, cc_max_mbps()).
engine::EngineConfig engine_config(const Options& o) {
    engine::EngineConfig c;
    c.udp_port = o.udp_port;
    c.udp_checksum = o.udp_checksum;
    c.burst = o.burst;
    c.tx_quantum = o.tx_quantum;
    c.rto_us = o.rto_us;
    c.rto_max_us = o.rto_max_us;
    c.retry_limit = o.retry_limit;
    c.nack_delay_us = o.nack_delay_us;
    c.stream_min = o.stream_min;
    c.completion = o.completion;
    c.cc.enabled = o.cc;
    c.cc.target_us = o.cc_target_us;
    c.cc.start_mbps = o.cc_start_mbps;
    c.cc.max_mbps = o.cc_max_mbps;
    c.cc.ack_feedback_us = o.ack_feedback_us;
    c.idle_sleep_us = static_cast<uint32_t>(o.idle_sleep_us);
    c.paths = static_cast<uint32_t>(o.paths);
    return c;
}

namespace {

FailReason fail_reason(SessionEnd e) {
    switch (e) {
    case SessionEnd::PeerReset: return FailReason::ReceiverRestarted;
    case SessionEnd::PeerTimeout: return FailReason::PeerTimeout;
    case SessionEnd::Refused:
    case SessionEnd::BadAccept: return FailReason::Refused;
    default: return FailReason::Closed;
    }
}

} // namespace

Runtime::Runtime(const Options& opt, StopRequest& stop) : opt_(opt), stop_(stop) {}

Runtime::~Runtime() {
    teardown();
}

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

// --- set-up -----------------------------------------------------------------

bool Runtime::plan_lcores(SetupError& e) {
    unsigned def = rte_get_next_lcore(static_cast<unsigned>(-1), 1, 0);
    if (def >= RTE_MAX_LCORE)
        def = rte_get_main_lcore();
    auto take = [&](const std::vector<unsigned>& given, const char* opt, std::vector<unsigned>& out) {
        out = given.empty() ? std::vector<unsigned>{def} : given;
        for (unsigned l : out) {
            if (!rte_lcore_is_enabled(l)) {
                e = {2, std::string(opt) + ": lcore " + std::to_string(l) +
                            " is not enabled (EAL -l/--lcores gives " + lcore_list() + ")"};
                return false;
            }
        }
        return true;
    };
    if (!take(opt_.tx_lcores, "--tx-lcores", tx_lcores_) ||
        !take(opt_.rx_lcores, "--rx-lcores", rx_lcores_) ||
        !take(opt_.consumer_lcores, "--consumer-lcores", cons_lcores_))
        return false;
    if (opt_.external_consumer) {
        if (opt_.completion == CompletionMode::Packet) {
            e = {2, "--consumer-lcores none: a consumer process needs --completion message"};
            return false;
        }
        cons_lcores_.clear(); // the flows' rings are consumed by another process
    }
    if (opt_.mode == Mode::Send) {
        if (!opt_.consumer_lcores.empty())
            TM_LOG(WARNING, app, "--consumer-lcores: nothing to consume in send mode; ignored");
        cons_lcores_.clear();
    }
    return true;
}

// Ports, pools and flow steering: planned and opened by drivers/port_plan.h.
bool Runtime::open_ports(SetupError& e) {
    drivers::PortNeeds n;
    n.tx_port = opt_.tx_port;
    n.rx_port = opt_.rx_port;
    n.tx_lcores = static_cast<uint16_t>(tx_lcores_.size());
    n.rx_lcores = static_cast<uint16_t>(rx_lcores_.size());
    n.mtu = opt_.mtu;
    n.loopback = opt_.mode == Mode::Loopback;
    n.send_only = opt_.mode == Mode::Send;
    n.l4_checksum = opt_.udp_checksum;
    n.local_loop = opt_.mode == Mode::Service;
    drivers::PortSet ps;
    drivers::PortError pe;
    const bool ok = drivers::open_ports(n, ps, pe);
    // Kept, opened or not: teardown() closes the ports, then frees the pools.
    pools_ = std::move(ps.pools);
    tx_pool_ = ps.tx_pool;
    rx_pool_ = ps.rx_pool;
    tx_port_ = std::move(ps.tx_port);
    rx_port_owned_ = std::move(ps.rx_port_owned);
    rx_port_ = ps.rx_port;
    local_port_ = std::move(ps.local_port);
    tx_socket_ = ps.tx_socket;
    rx_socket_ = ps.rx_socket;
    tx_nq_ = ps.tx_nq;
    steer_by_queue_ = ps.steer_by_queue;
    rss_ = ps.rss;
    handoff_ = ps.handoff;
    if (!ok)
        e = {pe.exit_code, pe.message};
    return ok;
}

// The engines: a Sender per tx queue, a Receiver per rx queue, the consumer
// contexts, and the rings between them. No flow yet: sessions bring them.
bool Runtime::make_engines(SetupError& e) {
    auto oom = [&](const std::string& what) {
        e = {1, "out of memory: " + what + " (raise EAL -m)"};
        return false;
    };
    mac_ = opt_.src_mac_set ? opt_.src_mac : tx_port_->mac();
    ecfg_.cc.max_mbps = cc_max_mbps(); // --cc-max-mbps, else the port's link speed
    sender_of_ = static_cast<uint8_t*>(rte_malloc("tm_sender_of", 65536, 64));
    if (sender_of_ == nullptr)
        return oom("ACK routes");
    memset(sender_of_, kNoSender, 65536);
    allocs_.push_back(sender_of_);
    control_in_ = rte_ring_create("tm_ctl_in", 4096, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (control_in_ == nullptr)
        return oom("control ring");

    // tx: lcore t owns the tx queues q with q % T == t, one Sender each.
    const auto T = static_cast<uint32_t>(tx_lcores_.size());
    for (uint32_t t = 0; t < T; t++) {
        TxCtx* c = socket_new<TxCtx>(tx_socket_);
        if (c == nullptr)
            return oom("tx context");
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
            return oom("request rings");
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
            return oom("sender " + std::to_string(q));
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
            return oom("in-memory loopback sender " + std::to_string(r));
        }
        s->set_source(svc_source, c);
        senders_.push_back(s);
        sender_lcore_.push_back(c->lcore);
        wire_in_.push_back(s->wire_inbox());
        local_in_.push_back(s->local_inbox());
        c->senders.push_back(s);
    }

    // The generator's buffers: each tx lcore's flows may hold up to a window
    // of messages each until they are delivered, within a memory budget, but
    // at least one per flow (fewer stop nothing: a flow waits for a buffer).
    if (opt_.mode != Mode::Recv && opt_.mode != Mode::Service && !opt_.fixed_payload && !opt_.replay) {
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
                return oom("generator buffers (" + std::to_string(n) + " x " + std::to_string(size) +
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

    if (handoff_) { // the moves' tables and rings (lib/tailmark-engine)
        std::string what;
        if (!rx_moves_.make(static_cast<uint32_t>(rx_lcores_.size()), rx_socket_, tsc_hz_ / 200, what)) // every 5 ms
            return oom(what);
    }

    // rx: lcore r polls rx queue r with a Receiver.
    for (uint32_t r = 0; r < rx_lcores_.size(); r++) {
        RxCtx* c = socket_new<RxCtx>(rx_socket_);
        if (c == nullptr)
            return oom("rx context");
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
                return oom("fault shim");
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
            return oom("receiver " + std::to_string(r));
        }
        receivers_.push_back(rcv);
        c->receiver = rcv;
        LcoreCtx* l = lcore_ctx(c->lcore);
        if (l == nullptr)
            return oom("request rings");
        l->rx = c;
    }
    if (handoff_) {
        std::vector<unsigned> rx_lcores;
        for (const RxCtx* c : rxs_)
            rx_lcores.push_back(c->lcore);
        rx_moves_.set_receivers(receivers_, std::move(rx_lcores));
    }

    // consumers
    for (uint32_t k = 0; k < cons_lcores_.size(); k++) {
        ConsCtx* c = socket_new<ConsCtx>(rx_socket_);
        if (c == nullptr)
            return oom("consumer context");
        conss_.push_back(c);
        c->plane = &plane_;
        c->lcore = cons_lcores_[k];
        c->hist.clear();
        c->flows.reserve(16384);
        LcoreCtx* l = lcore_ctx(c->lcore);
        if (l == nullptr)
            return oom("request rings");
        l->cons = c;
        if (opt_.trace_slow_ns != 0) { // the consumer's lcore records its iterations
            traces_.push_back(std::make_unique<SlowTrace>(opt_.trace_slow_ns * tsc_hz_ / 1000000000, 4096));
            c->trace = l->trace = traces_.back().get();
        }
    }
    // The main lcore runs the control loop, and its roles if it has any.
    if (lcore_ctx(rte_get_main_lcore()) == nullptr)
        return oom("request rings");

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
    return true;
}

// The flows this process configures itself (loopback, send): the shell's
// and the summary's flows 0..N-1, filled in when the session is up. recv
// adds flows as sessions arrive.
bool Runtime::make_registry(SetupError& e) {
    flows_.reserve(kMaxRegistry);
    if (opt_.mode == Mode::Recv || opt_.mode == Mode::Service)
        return true; // flows come with sessions
    const GroupPlan plan = plan_group(opt_.msg_size, stride_for_mtu(opt_.mtu));
    for (uint32_t i = 0; i < opt_.flows; i++) {
        FlowCtx* f = socket_new<FlowCtx>(rx_socket_);
        if (f == nullptr) {
            e = {1, "out of memory: flow contexts"};
            return false;
        }
        f->index = i;
        f->gen_id = static_cast<uint16_t>(i);
        f->ring_size = opt_.ring_size;
        f->pkts_per_msg = plan.pkt_count;
        flows_.push_back(f);
    }
    nflows_.store(static_cast<uint32_t>(flows_.size()), std::memory_order_release);
    return true;
}

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
    // Which rx lcore sees this flow's data: net_ring loopback steers by
    // queue (id % R); RSS hashes the data's 5-tuple; hand-off deals flows
    // out (id % R) and the rx lcores pass each other the rest.
    const auto R = static_cast<uint32_t>(rxs_.size());
    uint32_t owner = 0;
    if (steer_by_queue_ || handoff_) {
        owner = id % R;
    } else if (R > 1 && rss_) {
        const int q = rx_port_->rss_queue_of(s.peer.ip, opt_.src_ip, TxFlow::source_port(id), opt_.udp_port);
        if (q < 0 || static_cast<uint32_t>(q) >= R) {
            err = "flow " + std::to_string(f.index) + ": RSS queue unknown";
            return false;
        }
        owner = static_cast<uint32_t>(q);
    }
    RecvFlowSpec rs;
    rs.id = id;
    rs.ring = f.ring.get();
    rs.key = s.params.key_of(i);
    rs.stride = stride;
    if (s.link != nullptr) { // version 2: the peer's packets tagged under the link's key
        rs.auth = {s.link->rx_data_key, s.params.version};
        rs.auth.data_auth = s.link->data_auth;
        memcpy(rs.auth.auth_h, s.link->rx_auth_h, sizeof(rs.auth.auth_h));
    } else { // --flow-control off: no session, untagged
        rs.auth = {SipKey{}, kVersion};
    }
    rs.peer_flow = static_cast<uint16_t>(s.peer_base + i);
    rs.link = opt_.replay ? nullptr : s.link; // --replay: ready-made packets, nobody to acknowledge to
    rs.pkt_cq = f.pkt_cq;
    f.receiver = receivers_[owner];
    f.recv_lcore = rxs_[owner]->lcore;
    if (handoff_) { // before the flow exists anywhere: no data of it can arrive yet
        rx_moves_.place(f, id, static_cast<uint8_t>(owner), rs.auth);
        f.remove_after_move = nullptr;
    }
    f.recv = Receiver::make_flow(rs, rx_socket_);
    if (f.recv == nullptr) {
        err = "out of memory: receive state of flow " + std::to_string(f.index);
        return false;
    }
    (void)a;
    if (!conss_.empty()) {
        ConsCtx* c = conss_[f.index % conss_.size()];
        f.cons_ctx = c;
        auto* cf = socket_new<ConsFlow>(rx_socket_);
        if (cf == nullptr) {
            err = "out of memory: consumer state";
            return false;
        }
        cf->f = &f;
        cf->ring = f.ring.get();
        cf->pkt_cq = f.pkt_cq;
        cf->next = f.ring->released();
        if (f.pkt_cq != nullptr) {
            cf->slots = static_cast<PktSlot*>(rte_zmalloc_socket("tm_pkt_slots", sizeof(PktSlot) * s.params.ring_size, 64,
                                                                 rx_socket_));
            if (cf->slots == nullptr) {
                socket_delete(cf);
                err = "out of memory: packet mode slots";
                return false;
            }
        }
        if (opt_.replay || opt_.fixed_payload) { // the bytes every message carries, compared in place
            cf->expect_len = ConsFlow::kExpectMax;
            cf->expect = static_cast<uint8_t*>(rte_malloc_socket("tm_expect", cf->expect_len, 64, rx_socket_));
            if (cf->expect == nullptr) {
                socket_delete(cf);
                err = "out of memory: consumer state";
                return false;
            }
            generate(f.gen_id, 0, cf->expect, cf->expect_len);
        }
        f.cons = cf;
    }
    return true;
}

// Hands a flow's receive side to its lcores.
void Runtime::post_recv(FlowCtx& f, AppSession& a) {
    post(f.recv_lcore, {Request::Op::AddRecv, false, FailReason::None, f.recv_id, f.index, f.receiver, f.recv, &a});
    a.pending++;
    if (f.cons != nullptr) {
        post(f.cons_ctx->lcore,
             {kAddCons, false, FailReason::None, f.recv_id, f.index, f.cons_ctx, f.cons, &a});
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

// --flow-control off: no peer to agree with (a sink such as net_null), so
// no session: the flows are configured here, unreliable, and installed
// before the lcores start.
bool Runtime::make_unconnected(SetupError& e) {
    Addressing addr;
    addr.src_mac = mac_;
    addr.dst_mac = opt_.dst_mac_set ? opt_.dst_mac : rx_port_->mac();
    addr.src_ip = opt_.src_ip;
    addr.dst_ip = opt_.mode == Mode::Loopback ? opt_.src_ip : opt_.dst_ip;
    addr.udp_port = opt_.udp_port;
    Session fake;
    fake.params.mtu = opt_.mtu;
    fake.params.ring_size = opt_.ring_size;
    fake.params.max_msg = static_cast<uint32_t>(opt_.msg_size);
    fake.params.key = opt_.key;
    fake.params.version = kVersion; // no session, no data key: untagged
    fake.peer = {addr.dst_ip, opt_.udp_port};
    for (const auto& [i, k] : opt_.flow_keys)
        fake.params.overrides.push_back({i, k});
    auto a = std::make_unique<AppSession>();
    for (uint32_t i = 0; i < opt_.flows; i++) {
        FlowCtx& f = *flows_[i];
        f.send_id = static_cast<uint16_t>(i);
        SendFlowSpec sp;
        sp.id = f.send_id;
        if (!TxFlow::make(sp.tx, static_cast<uint16_t>(i), opt_.key_of(static_cast<uint16_t>(i)), opt_.ring_size,
                          opt_.mtu, addr)) {
            e = {2, "--mtu: " + std::to_string(opt_.mtu) + " leaves no room for a packet"};
            return false;
        }
        sp.ring_size = opt_.ring_size;
        sp.max_msg = opt_.msg_size;
        sp.reliable = false;
        sp.report = false;
        const uint32_t si = sender_for(static_cast<uint16_t>(i), static_cast<uint16_t>(i));
        if (opt_.mode == Mode::Loopback) {
            std::string err;
            fake.peer_base = 0;
            if (!make_recv_flow(f, *a, fake, static_cast<uint16_t>(i), static_cast<uint16_t>(i), err)) {
                e = {2, err};
                return false;
            }
            post_recv(f, *a);
        }
        if (opt_.replay) { // no credits without a peer: the packets' reference counts pace it
            if (!make_replay(f, sp.tx, nullptr, si, *a)) {
                e = {2, "--replay: the ready-made packets do not fit (lower --ring-size, or raise EAL -m)"};
                return false;
            }
            continue;
        }
        sp.user = gen_flow(f, txs_[si % txs_.size()]);
        if (sp.user == nullptr) {
            e = {1, "out of memory: generator state (--payload fixed: a message per flow)"};
            return false;
        }
        f.sender = senders_[si];
        f.send = Sender::make_flow(sp, tx_socket_);
        if (f.send == nullptr || !f.sender->install(f.send)) {
            e = {1, "out of memory: send state"};
            return false;
        }
    }
    // Installed directly: the lcores have not started.
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++)
        if (lcores_[l] != nullptr)
            serve_requests(*lcores_[l]);
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        Request r;
        while (lcores_[l] != nullptr && rte_ring_sc_dequeue_elem(lcores_[l]->resp, &r, sizeof(r)) == 0)
            if (!r.ok) {
                e = {1, "flow set-up refused by an lcore"};
                return false;
            }
    }
    a->stage = AppSession::Stage::Live;
    for (FlowCtx* f : flows_)
        a->flows.push_back(f), f->session = f->send_session = f->recv_session = a.get();
    add_session(std::move(a));
    return true;
}

bool Runtime::setup(SetupError& e) {
    tsc_hz_ = rte_get_tsc_hz();
    deferred_.set_delay(tsc_hz_); // what other threads may read goes a second later
    ecfg_ = engine_config(opt_);
    // A released flow id waits out the peer timeout (and a second) before
    // it names another flow: see flow_ids.h.
    const uint64_t quarantine = tsc_hz_ * (opt_.peer_timeout_ms + 1000) / 1000;
    send_ids_.set_quarantine(quarantine);
    recv_ids_.set_quarantine(quarantine);
    DataPlaneConfig& dp = plane_.cfg;
    dp.mode = opt_.mode;
    dp.msg_size = opt_.msg_size;
    dp.sizes = opt_.msg_sizes.empty() ? nullptr : opt_.msg_sizes.data();
    dp.nsizes = static_cast<uint32_t>(opt_.msg_sizes.size());
    dp.messages = opt_.messages;
    dp.ring_size = opt_.ring_size;
    dp.flows = opt_.flows;
    dp.verify = opt_.verify;
    dp.fixed_payload = opt_.fixed_payload;
    dp.replay = opt_.replay;
    dp.pace_cycles = opt_.rate > 0 ? static_cast<uint64_t>(double(tsc_hz_) * opt_.flows / opt_.rate) : 0;
    dp.late_cycles = tsc_hz_ / 1000000;
    plane_.burst.store(opt_.burst);
    plane_.completion.store(static_cast<uint8_t>(opt_.completion));
    if (opt_.secret_set) {
        secret_ = opt_.secret;
    } else if (opt_.mode == Mode::Loopback) {
        secret_ = {rte_rand(), rte_rand()}; // a session with itself: nobody else needs it
    } else {
        TM_LOG(WARNING, app, "--insecure: control packets are authenticated with a well-known all-zero key; "
                             "anyone on the path can forge ACKs and end sessions");
    }
    if (!plan_lcores(e) || !open_ports(e) || !make_engines(e) || !make_registry(e))
        return false;
    if (opt_.mode == Mode::Service) {
        service_ = std::make_unique<Service>(*this);
        if (!service_->open(e))
            return false;
    }
    if (!opt_.flow_control && !make_unconnected(e))
        return false;
    failed_logged_.assign(flows_.size(), false);
    std::string lc;
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        const LcoreCtx* c = lcores_[l];
        if (c == nullptr || !c->any())
            continue;
        lc += ' ';
        lc += std::to_string(l);
        lc += c->tx ? ":tx" : ":";
        lc += c->rx ? "+rx" : "";
        lc += c->cons ? "+consumer" : "";
    }
    TM_LOG(INFO, app,
           "mode %s, %u flows x %" PRIu64 " messages of %" PRIu64 " B, ring %u, MTU %u, completion %s, "
           "steering %s, %s; lcores%s; %s %s",
           to_string(opt_.mode), opt_.flows, opt_.messages, opt_.msg_size, opt_.ring_size, opt_.mtu,
           to_string(opt_.completion), steering_name(),
           opt_.flow_control ? "sessions" : "no session (--flow-control off)", lc.c_str(), mac_str(mac_).c_str(),
           to_string(Endpoint{opt_.src_ip, opt_.udp_port}).c_str());
    return true;
}

// --- sessions -------------------------------------------------------------------

FlowParams Runtime::proposal() const {
    FlowParams p;
    p.nflows = static_cast<uint16_t>(opt_.flows);
    p.mtu = opt_.mtu;
    p.ring_size = opt_.ring_size;
    p.max_msg = static_cast<uint32_t>(opt_.msg_size);
    p.key = opt_.key;
    // Keys configured (--key, [flow.N] key=): both ends must hold the same, a
    // difference is a mismatch, said so. Otherwise the acceptor draws them.
    p.keys_given = opt_.key_set || !opt_.flow_keys.empty();
    p.version = static_cast<uint8_t>(opt_.data_version);
    p.data_auth = opt_.data_auth;
    for (const auto& [i, k] : opt_.flow_keys)
        p.overrides.push_back({i, k});
    return p;
}

AppSession* Runtime::app_session(uint16_t sid) {
    for (auto& a : app_sessions_)
        if (a->s != nullptr && a->id == sid)
            return a.get();
    return nullptr;
}

void Runtime::post(unsigned lcore, const Request& r) {
    LcoreCtx* l = lcores_[lcore];
    // Sized for every flow of several sessions at once; a full ring is a
    // bug of ours, not a condition to wait out on the control thread.
    Request copy = r;
    if (l == nullptr || rte_ring_sp_enqueue_elem(l->req, &copy, sizeof(copy)) != 0)
        TM_LOG(ERR, app, "lcore %u: request ring full; request %d for flow %u lost", lcore, static_cast<int>(r.op),
               r.index);
}

void Runtime::start_sessions(uint64_t now) {
    if (!opt_.flow_control || opt_.mode == Mode::Service) // service: the applications open them
        return;
    const uint16_t service = opt_.service;
    if (opt_.mode != Mode::Send)
        sessions_->listen(service, secret_, [this](Session& s, const FlowParams& p) { return decide(s, p); });
    if (opt_.mode == Mode::Recv)
        return;
    const int base = send_ids_.alloc(opt_.flows, now);
    const Endpoint peer = opt_.mode == Mode::Loopback ? Endpoint{opt_.src_ip, opt_.udp_port}
                                                      : Endpoint{opt_.dst_ip, opt_.udp_port};
    Session* s = base < 0 ? nullptr
                          : sessions_->connect(peer, service, secret_, proposal(), static_cast<uint16_t>(base),
                                               opt_.dst_mac_set ? &opt_.dst_mac : nullptr, now);
    if (s == nullptr) {
        TM_LOG(ERR, app, "cannot start a session (no flow ids or session slots)");
        stop(now, "session_failed");
        return;
    }
    TM_LOG(INFO, app, "connecting to %s (service %u)%s", to_string(peer).c_str(), service,
           s->state == SessionState::Resolving ? ", resolving its MAC by ARP" : "");
}

// A listener's decision on a CONNECT: this process's configuration is the
// contract (the generator's messages and the verification depend on it), so
// a sender configured otherwise is refused, the setting named.
AcceptDecision Runtime::decide(Session& s, const FlowParams& p) {
    AcceptDecision d;
    auto refuse = [&](RefuseReason r, uint64_t ours, uint64_t theirs, uint16_t index = 0) {
        d.reason = r;
        d.expected = ours;
        d.got = theirs;
        d.index = index;
        TM_LOG(WARNING, app, "session from %s refused: %s (ours %" PRIu64 ", theirs %" PRIu64 "%s)",
               to_string(s.peer).c_str(), to_string(r), ours, theirs,
               r == RefuseReason::Key ? (", flow " + std::to_string(index)).c_str() : "");
        return d;
    };
    if (p.nflows != opt_.flows)
        return refuse(RefuseReason::Flows, opt_.flows, p.nflows);
    // recv takes a sender whose messages are smaller (the 64 B session next to
    // a bulk one, into one receiver); its messages are all that size.
    if (p.max_msg > opt_.msg_size || (p.max_msg != opt_.msg_size && opt_.mode != Mode::Recv))
        return refuse(RefuseReason::MsgSize, opt_.msg_size, p.max_msg);
    if (p.ring_size != opt_.ring_size)
        return refuse(RefuseReason::RingSize, opt_.ring_size, p.ring_size);
    const uint32_t mtu = std::min(p.mtu, opt_.mtu);
    if (!plan_group(p.max_msg, stride_for_mtu(mtu, p.version)).ok())
        return refuse(RefuseReason::Mtu, opt_.mtu, p.mtu);
    const bool keys_here = opt_.key_set || !opt_.flow_keys.empty();
    if (p.keys_given && keys_here)
        for (uint16_t i = 0; i < p.nflows; i++)
            if (p.key_of(i) != opt_.key_of(i))
                return refuse(RefuseReason::Key, opt_.key_of(i), p.key_of(i), i);
    const int base = recv_ids_.alloc(p.nflows, rte_rdtsc());
    if (base < 0)
        return refuse(RefuseReason::NoRoom, 65536, p.nflows);
    d.agreed = proposal();
    d.agreed.version = p.version; // the session table's choice (1 with a peer in this process)
    d.agreed.mtu = mtu;
    d.agreed.max_msg = p.max_msg;
    d.agreed.keys_given = false;
    if (p.keys_given && !keys_here) { // the connector's configured keys
        d.agreed.key = p.key;
        d.agreed.overrides = p.overrides;
    } else if (!keys_here) { // nobody chose: drawn, never 0
        d.agreed.key = static_cast<uint32_t>(rte_rand()) | 1u;
        d.agreed.overrides.clear();
    }
    d.local_base = static_cast<uint16_t>(base);
    d.defer = true; // ACCEPT once the lcores hold the flows: nothing that follows it is dropped
    s.params = d.agreed;
    s.local_base = d.local_base;

    auto a = AppSession::of(s, false);
    std::string err;
    bool ok = true;
    const GroupPlan plan = plan_group(p.max_msg, stride_for_mtu(mtu, p.version));
    for (uint16_t i = 0; i < p.nflows && ok; i++) {
        FlowCtx* f;
        if (opt_.mode == Mode::Loopback) {
            f = flows_[i];
        } else {
            f = socket_new<FlowCtx>(rx_socket_);
            if (f == nullptr || !add_flow(f, rte_rdtsc())) {
                socket_delete(f);
                ok = false;
                break;
            }
            f->gen_id = i;
            f->ring_size = opt_.ring_size;
            f->pkts_per_msg = plan.pkt_count;
            f->fixed_len = p.max_msg < opt_.msg_size ? p.max_msg : 0;
        }
        f->recv_session = a.get();
        if (opt_.mode == Mode::Recv)
            f->session = a.get();
        a->flows.push_back(f);
        ok = make_recv_flow(*f, *a, s, static_cast<uint16_t>(base + i), i, err);
    }
    if (!ok) { // undo: nothing reached an lcore
        for (FlowCtx* f : a->flows) {
            free_recv(*f);
            if (opt_.mode != Mode::Loopback) // loopback's flows are its own, made once
                abandon_flow(*f);
        }
        publish_flows();
        recv_ids_.unuse(static_cast<uint32_t>(base), p.nflows); // refused: no packet carried them
        TM_LOG(ERR, app, "session from %s: %s", to_string(s.peer).c_str(), err.empty() ? "out of memory" : err.c_str());
        d = AcceptDecision{};
        d.reason = RefuseReason::NoRoom;
        return d;
    }
    for (FlowCtx* f : a->flows)
        post_recv(*f, *a);
    publish_flows();
    TM_LOG(INFO, app, "session %u from %s (service %u): %u flows, ids %u..%u, MTU %u, data v%u%s%s", s.id,
           to_string(s.peer).c_str(), s.service, p.nflows, base, base + p.nflows - 1, mtu, unsigned(s.params.version),
           s.params.data_auth ? " with --data-auth" : "", s.local_peer ? " (this process: cursors in memory)" : "");
    add_session(std::move(a));
    return d;
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
    return peer != nullptr ? local_sender_for(*peer, wire, i) : sender_for(wire, i);
}

// The one place a session's send flow is opened, for the generator and the
// service alike: its SendFlow made for the peer's flow id (the ACKs come
// back with ours), its ACK route set, and the install posted to the
// Sender's lcore. A peer in this process is credited through its
// Receiver's words, not ACKs. False: out of memory (nothing posted).
bool Runtime::open_send(FlowCtx& f, AppSession& a, const Session& s, uint16_t i, uint32_t si, const SendOpen& o) {
    f.send_id = static_cast<uint16_t>(s.local_base + i);
    const auto wire = static_cast<uint16_t>(s.peer_base + i);
    SendFlowSpec sp;
    sp.id = f.send_id;
    TxFlow::make(sp.tx, wire, s.params.key_of(i), o.ring_size, s.params.mtu, address_to(s), s.link->data_version,
                 s.link->tx_data_key, s.link->data_auth ? s.link->tx_auth_h : nullptr); // the MTU fits
    sp.ring_size = o.ring_size;
    sp.max_msg = s.params.max_msg;
    sp.reliable = true;
    sp.report = o.report;
    sp.payload = o.payload;
    sp.paths = ecfg_.paths;
    sp.link = s.link;
    if (const FlowCtx* peer = local_peer_flow(s, i); peer != nullptr && peer->recv != nullptr) {
        sp.local_acked = Receiver::acked_word(peer->recv);
        sp.local_released = peer->ring->released_word();
    }
    sp.user = o.user;
    f.sender = senders_[si];
    f.send_lcore = sender_lcore_[si];
    f.send = Sender::make_flow(sp, tx_socket_);
    if (f.send == nullptr)
        return false;
    __atomic_store_n(&sender_of_[f.send_id], static_cast<uint8_t>(si), __ATOMIC_RELEASE); // ACKs find it
    post(f.send_lcore, {Request::Op::AddSend, false, FailReason::None, f.send_id, f.index, f.sender, f.send, &a});
    a.pending++;
    return true;
}

// The connector's flows, once the session is up: the generator's messages
// go to the peer's flow ids (open_send).
void Runtime::install_send(AppSession& a, Session& s) {
    for (uint16_t i = 0; i < s.params.nflows; i++) {
        FlowCtx& f = *flows_[i];
        f.session = f.send_session = &a;
        a.flows.push_back(&f);
        const uint32_t si = send_queue_for(s, i);
        SendOpen o;
        o.ring_size = s.params.ring_size;
        // The generator counts; send mode takes a completion per message for
        // its delivery latency (submit to the peer's release).
        o.report = opt_.mode == Mode::Send;
        o.user = gen_flow(f, txs_[si % txs_.size()]);
        if (o.user == nullptr) {
            TM_LOG(ERR, app, "out of memory: generator state of flow %u", i);
            continue;
        }
        if (!open_send(f, a, s, i, si, o))
            TM_LOG(ERR, app, "out of memory: send state of flow %u", i);
    }
}

// The least distance, in bytes, between two consecutive ready-made groups.
constexpr uint32_t kReplayGap = 4096;

// --replay: one flow as ready-made packet groups (ring_size sets of one
// message's content, built once), re-stamped per message on the tx lcore.
// `ring`: the receiving side's, whose cursor gives the credits (null: none,
// --flow-control off).
bool Runtime::make_replay(FlowCtx& f, const TxFlow& tx, const CompletionRing* ring, uint32_t si, AppSession& a) {
    std::vector<uint8_t> buf(opt_.msg_size ? opt_.msg_size : 1);
    generate(f.gen_id, 0, buf.data(), opt_.msg_size);
    TxMessage m;
    m.bytes = {buf.data(), static_cast<size_t>(opt_.msg_size)};
    m.plan = plan_group(m.length(), tx.stride);
    const uint32_t n = m.plan.pkt_count;
    // The packets' own pool: a free makes a packet reusable (ReplayPool),
    // with room for the guards below and the marker's bulk takes.
    const uint32_t room = rte_pktmbuf_data_room_size(tx_pool_) - RTE_PKTMBUF_HEADROOM;
    const uint32_t obj = static_cast<uint32_t>(rte_mempool_calc_obj_size(sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM + room,
                                                                         0, nullptr));
    const uint32_t guard = (kReplayGap + obj - 1) / obj;
    std::string err;
    auto pool = drivers::ReplayPool::create("tm_replay_" + std::to_string(replay_pools_.size()),
                                            (n + guard) * opt_.ring_size + 2 * TxMarker::kMaxBurst, room, tx_socket_,
                                            err);
    if (pool == nullptr) {
        TM_LOG(ERR, app, "--replay: %s; lower --ring-size, or raise EAL -m", err.c_str());
        return false;
    }
    drivers::ReplayPool& rp = *pool;
    replay_pools_.push_back(std::move(pool));
    TxMarker marker(rp.get(), PayloadMode::Copy);
    marker.prepare(tx, m);
    // The packets, then where each one's stamps go: one block.
    const size_t npkts = static_cast<size_t>(n) * opt_.ring_size;
    const size_t stamps_at = RTE_ALIGN_CEIL(sizeof(rte_mbuf*) * npkts, RTE_CACHE_LINE_SIZE);
    auto* pkts = static_cast<rte_mbuf**>(
        rte_zmalloc_socket("tm_replay", stamps_at + sizeof(ReplayStamp) * npkts, 64, tx_socket_));
    auto* r = socket_new<ReplayFlow>(tx_socket_);
    if (pkts == nullptr || r == nullptr) {
        TM_LOG(ERR, app, "--replay: out of memory");
        rte_free(pkts);
        socket_delete(r);
        return false;
    }
    auto* stamps = reinterpret_cast<ReplayStamp*>(reinterpret_cast<uint8_t*>(pkts) + stamps_at);
    allocs_.push_back(r);
    replay_pkts_.push_back(pkts);
    // Consecutive groups at least a page apart: the pool hands out adjacent
    // objects, and guard objects, left unused, go between two groups. The
    // receiver's hardware prefetchers, streaming through one group, would
    // otherwise fetch the next group's lines while this lcore re-stamps them,
    // and each such line crossed the cores twice: rx64 1.27x with the gap.
    // Within a group the packets stay adjacent (a 64 KiB message is read as
    // one stream: spacing every packet a page apart cost rx64k 12%).
    std::vector<void*> guards(guard * opt_.ring_size);
    for (uint32_t set = 0; set < opt_.ring_size; set++) {
        if (guard != 0 && rte_mempool_get_bulk(rp.get(), guards.data() + set * guard, guard) != 0) {
            TM_LOG(ERR, app, "--replay: the packet pool is short of its guards");
            return false;
        }
        for (uint32_t first = 0; first < n; first += kMaxBurst) {
            const uint32_t cnt = n - first < kMaxBurst ? n - first : kMaxBurst;
            bool ok = marker.build(tx, m, first, cnt, pkts + set * n + first) >= 0;
            for (uint32_t k = 0; ok && k < cnt; k++)
                ok = pkts[set * n + first + k]->nb_segs == 1;
            if (!ok) {
                TM_LOG(ERR, app, "--replay: %u x %u ready packets per flow do not fit the mbuf pool (or are not "
                                 "single-segment); lower --ring-size", opt_.ring_size, n);
                return false;
            }
        }
    }
    if (!guards.empty()) // back into the pool, as spares
        rte_mempool_put_bulk(rp.get(), guards.data(), static_cast<unsigned>(guards.size()));
    // Every packet built: from now on a free makes one reusable.
    rp.seal(pkts, n * opt_.ring_size);
    for (size_t i = 0; i < npkts; i++) {
        uint8_t* d = rte_pktmbuf_mtod(pkts[i], uint8_t*);
        stamps[i].msg_id = d + kEthLen + kIpLen + kUdpLen + offsetof(WireHeader, msg_id);
        stamps[i].trailer = i % n == n - 1 ? d + pkts[i]->data_len - kTrailerLen : nullptr;
    }
    r->pkts = pkts;
    r->stamps = stamps;
    r->pool = &rp;
    r->plan = m.plan;
    r->ring = ring;
    TxCtx* c = txs_[si % txs_.size()];
    // replay_run's back-to-back stamps only where no other lcore reads the packets.
    r->own_lcore = std::all_of(rx_lcores_.begin(), rx_lcores_.end(), [&](unsigned l) { return l == c->lcore; });
    // id: the queue's place among the tx lcore's senders
    post(c->lcore, {kAddReplay, false, FailReason::None, static_cast<uint16_t>(si / txs_.size()), f.index, c,
                    r, &a});
    a.pending++;
    return true;
}

// The generator's state for a flow (its Sender's per-flow user pointer),
// made once: --payload fixed writes message 0's bytes here.
GenFlow* Runtime::gen_flow(FlowCtx& f, TxCtx* c) {
    if (f.gen != nullptr)
        return f.gen;
    auto* g = socket_new<GenFlow>(tx_socket_);
    if (g == nullptr)
        return nullptr;
    allocs_.push_back(g);
    g->f = &f;
    g->c = c;
    if (opt_.fixed_payload) {
        g->fixed = static_cast<uint8_t*>(rte_malloc_socket("tm_fixed", opt_.msg_size ? opt_.msg_size : 1, 64, tx_socket_));
        if (g->fixed == nullptr)
            return nullptr;
        allocs_.push_back(g->fixed);
        generate(f.gen_id, 0, g->fixed, opt_.msg_size);
    } else if (!opt_.flow_control) {
        // Unreliable, copy mode: nothing is ever resent, and the Sender asks
        // for a flow's next message only once the last one's packets were
        // built (copied). One buffer per flow serves: no hold, no pool.
        g->scratch = static_cast<uint8_t*>(rte_malloc_socket("tm_scratch", opt_.msg_size ? opt_.msg_size : 1, 64,
                                                             tx_socket_));
        if (g->scratch == nullptr)
            return nullptr;
        allocs_.push_back(g->scratch);
    }
    f.gen = g;
    return g;
}

// The sender of a flow: net_ring loopback sends a flow on the queue its
// receiving rx lcore polls; elsewhere flows take turns over the senders.
uint32_t Runtime::sender_for(uint16_t wire, uint16_t i) const {
    // The port's Senders only: the in-memory loopback's carry a peer of this process (local_sender_for).
    return steer_by_queue_ ? wire % static_cast<uint32_t>(rxs_.size()) : i % port_senders_;
}

uint32_t Runtime::local_sender_for(const FlowCtx& peer_recv, uint16_t wire, uint16_t i) const {
    if (!local_port_)
        return sender_for(wire, i);
    for (uint32_t r = 0; r < receivers_.size(); r++)
        if (receivers_[r] == peer_recv.receiver)
            return port_senders_ + r;
    return port_senders_ + wire % static_cast<uint32_t>(receivers_.size());
}

Addressing Runtime::address_to(const Session& s) const {
    Addressing addr;
    addr.src_mac = mac_;
    addr.dst_mac = s.peer_mac;
    addr.src_ip = opt_.src_ip;
    addr.dst_ip = s.peer.ip;
    addr.udp_port = s.peer.port;
    return addr;
}

void Runtime::install_replay(AppSession& a, Session& s) {
    AppSession* peer_side = app_session(s.peer_id);
    for (uint16_t i = 0; i < s.params.nflows; i++) {
        FlowCtx& f = *flows_[i];
        f.session = f.send_session = &a;
        a.flows.push_back(&f);
        const uint16_t wire = static_cast<uint16_t>(s.peer_base + i);
        TxFlow tx;
        TxFlow::make(tx, wire, s.params.key_of(i), s.params.ring_size, s.params.mtu, address_to(s), s.link->data_version,
                     s.link->tx_data_key, s.link->data_auth ? s.link->tx_auth_h : nullptr);
        if (peer_side != nullptr && i < peer_side->flows.size())
            make_replay(f, tx, peer_side->flows[i]->ring.get(), sender_for(wire, i), a);
    }
}

// The session table's news: a session is up, or it ended. Never forget()
// here: the table is still using the session.
void Runtime::on_session(Session& s) {
    const uint64_t now = rte_rdtsc();
    if (service_) { // every session is an application's
        service_->on_session(s, now);
        return;
    }
    AppSession* a = app_session(s.id);
    if (s.state == SessionState::Established) {
        if (!s.connector) {
            if (a != nullptr && a->stage == AppSession::Stage::Installing) {
                a->stage = AppSession::Stage::Live;
                a->up_tsc = now;
            }
            return;
        }
        if (a != nullptr)
            return;
        a = &add_session(AppSession::of(s, true));
        TM_LOG(INFO, app, "session %u to %s up: %u flows, peer's ids %u.., MTU %u, ring %u, data v%u%s%s", s.id,
               to_string(s.peer).c_str(), s.params.nflows, s.peer_base, s.params.mtu, s.params.ring_size,
               unsigned(s.params.version), s.params.data_auth ? " with --data-auth" : "",
               s.local_peer ? " (this process)" : "");
        if (opt_.replay)
            install_replay(*a, s);
        else
            install_send(*a, s);
        if (a->pending == 0)
            a->stage = AppSession::Stage::Live;
        return;
    }
    if (s.state != SessionState::Ended)
        return;
    if (a == nullptr) {
        if (!s.connector)
            return; // refused, or never installed
        // A connector that never came up: say why, and end the run.
        std::string why;
        const std::string peer = to_string(s.peer);
        switch (s.end) {
        case SessionEnd::Refused:
        case SessionEnd::BadAccept: {
            refused_ = true;
            const uint64_t theirs = s.refuse_expected, ours = s.refuse_got;
            switch (s.refuse) {
            case RefuseReason::MsgSize:
                why = "--msg-size " + std::to_string(ours) + " is not the receiver's " + std::to_string(theirs);
                break;
            case RefuseReason::RingSize:
                why = "--ring-size " + std::to_string(ours) + " is not the receiver's " + std::to_string(theirs);
                break;
            case RefuseReason::Flows:
                why = "--flows " + std::to_string(ours) + " is not the receiver's " + std::to_string(theirs);
                break;
            case RefuseReason::Mtu:
                why = "--mtu " + std::to_string(ours) + " leaves no room for a packet at the receiver's " +
                      std::to_string(theirs);
                break;
            case RefuseReason::Key: {
                char b[128];
                snprintf(b, sizeof(b), "--key of flow %u: 0x%" PRIx64 " is not the receiver's 0x%" PRIx64, s.refuse_index,
                         ours, theirs);
                why = b;
                break;
            }
            default:
                why = std::string(to_string(s.refuse));
                break;
            }
            fprintf(stderr, "tailmarkd: %s refused the session: %s\n", peer.c_str(), why.c_str());
            exit_reason_ = "refused";
            break;
        }
        case SessionEnd::NoAnswer:
            fprintf(stderr,
                    "tailmarkd: no answer from %s within %" PRIu64 " ms (is a receiver listening on service %u, "
                    "with the same --secret?)\n",
                    peer.c_str(), opt_.connect_timeout_ms, s.service);
            exit_reason_ = "no_answer";
            break;
        case SessionEnd::ArpFailed:
            if (const uint32_t hop = sessions_->next_hop(s.peer.ip); hop != s.peer.ip)
                fprintf(stderr, "tailmarkd: the gateway %s (towards %s) did not answer ARP (check --gateway, or the link)\n",
                        ip_to_string(hop).c_str(), peer.c_str());
            else
                fprintf(stderr,
                        "tailmarkd: %s did not answer ARP (check the link; a peer on another subnet needs --src-ip "
                        "IP/LEN and --gateway, or --dst-mac)\n",
                        peer.c_str());
            exit_reason_ = "arp_failed";
            break;
        default:
            fprintf(stderr, "tailmarkd: session to %s ended: %s\n", peer.c_str(), to_string(s.end));
            exit_reason_ = to_string(s.end);
            break;
        }
        fflush(stderr);
        stop(now, exit_reason_.c_str());
        return;
    }
    a->end = s.end;
    a->down_tsc = now;
    if (s.end == SessionEnd::PeerClosed || s.end == SessionEnd::Closed || s.end == SessionEnd::Replaced)
        TM_LOG(INFO, app, "session %u %s %s ended: %s", s.id, s.connector ? "to" : "from", to_string(s.peer).c_str(),
               to_string(s.end));
    else
        TM_LOG(WARNING, app, "session %u %s %s ended: %s", s.id, s.connector ? "to" : "from",
               to_string(s.peer).c_str(), to_string(s.end));
    detach(*a, now);
}

void Runtime::post_remove_recv(FlowCtx& f, AppSession& a, FailReason why) {
    post(f.recv_lcore, {Request::Op::RemoveRecv, false, why, f.recv_id, f.index, f.receiver, nullptr, &a});
}

// A move between Receivers is over (done or not): the removal its session's
// end left waiting, if any, goes now.
void Runtime::end_move(FlowCtx& f, bool ok) {
    rx_moves_.moved_in(f, ok);
    if (f.remove_after_move != nullptr) {
        AppSession* s = f.remove_after_move;
        f.remove_after_move = nullptr;
        post_remove_recv(f, *s, f.remove_why);
    }
}

// Hand-off steering: the port spreads frames by a hash this process cannot
// compute, but one flow's frames keep to one queue (af_packet's fanout
// hashes the 5-tuple). A flow whose frames have come in on the same other
// rx lcore at two looks in a row moves to that lcore's Receiver: out of its
// Receiver, its owner entry changed, into the new one. Meanwhile its frames
// are held on the new Receiver's ring (Receiver::route), so nothing is
// dropped; every frame after that is placed where it arrives.
void Runtime::rebalance(uint64_t now) {
    if (!rx_moves_.due(now))
        return;
    for (FlowCtx* f : flows_) {
        if (f->recv == nullptr || f->moving || f->detach_pending != 0 || f->detached)
            continue; // not installed, moving already, or its session is ending
        Request out;
        if (rx_moves_.look(*f, f->index, out))
            post(f->recv_lcore, out);
    }
}

// Takes a session's flows back from the lcores: a sender's are failed first
// (whatever they still owed is reported failed), then removed; a receiver's
// removed from the Receiver and the consumer. Freed as the answers come.
void Runtime::detach(AppSession& a, uint64_t now) {
    (void)now;
    if (a.stage == AppSession::Stage::Detaching || a.stage == AppSession::Stage::Gone)
        return;
    a.stage = AppSession::Stage::Detaching;
    const FailReason why = fail_reason(a.end);
    for (FlowCtx* f : a.flows) {
        if (a.connector && f->send_session == &a && f->send != nullptr) {
            post(f->send_lcore, {Request::Op::FailSend, false, why, f->send_id, f->index, f->sender, nullptr, &a});
            post(f->send_lcore, {Request::Op::RemoveSend, false, why, f->send_id, f->index, f->sender, nullptr, &a});
            a.pending += 2;
        }
        if (!a.connector && f->recv_session == &a && f->recv != nullptr) {
            if (f->moving) { // posted once the flow is in its new Receiver
                f->remove_after_move = &a;
                f->remove_why = why;
            } else {
                post_remove_recv(*f, a, why);
            }
            f->detach_pending++;
            a.pending++;
            if (f->cons != nullptr) {
                post(f->cons_ctx->lcore,
                     {kRemoveCons, false, why, f->recv_id, f->index, f->cons_ctx, f->cons, &a});
                f->detach_pending++;
                a.pending++;
            }
        }
    }
    if (a.pending == 0)
        a.stage = AppSession::Stage::Gone;
}

void Runtime::on_response(const Request& r, uint64_t now) {
    FlowCtx* f = r.index < flows_.size() ? flows_[r.index] : nullptr;
    auto* a = static_cast<AppSession*>(r.session);
    switch (r.op) {
    case Request::Op::RemoveSend:
        if (!r.ok) { // still owes completions: ask again
            retry_.push_back(r);
            return;
        }
    {
        auto* sf = static_cast<SendFlow*>(r.obj);
        f->last_send = Sender::view(sf);
        f->detached = true;
        f->send = nullptr;
        __atomic_store_n(&sender_of_[f->send_id], kNoSender, __ATOMIC_RELEASE);
        const uint16_t id = f->send_id;
        later(now, [this, sf, id] {
            Sender::free_flow(sf);
            send_ids_.release(id, 1, rte_rdtsc());
        });
        break;
    }
    case Request::Op::RemoveRecv: {
        // Not found there (a move that could not finish): the flow is in no
        // Receiver, so the one it was made with is freed all the same.
        auto* rf = r.obj != nullptr ? static_cast<RecvFlow*>(r.obj) : f->recv;
        if (!r.ok)
            TM_LOG(ERR, app, "flow %u: not in the Receiver of rx lcore %u at removal", r.index, f->recv_lcore);
        f->last_acked = *Receiver::acked_word(rf);
        f->last_released = f->ring ? f->ring->released() : 0;
        f->recv = nullptr;
        if (handoff_)
            rx_moves_.removed(*f, f->last_owner, f->last_arrived);
        later(now, [rf] { Receiver::free_flow(rf); });
        break;
    }
    case kRemoveCons:
        break;
    case Request::Op::MoveRecvOut: // out of the old Receiver: name the new one, then into it
        if (!r.ok || f == nullptr) {
            TM_LOG(ERR, app, "flow %u: the move between rx lcores found it gone", r.index);
            if (f != nullptr)
                end_move(*f, false);
            return;
        }
    {
        Request in;
        rx_moves_.moved_out(*f, r, in);
        post(f->recv_lcore, in);
        return;
    }
    case Request::Op::MoveRecvIn:
        if (f == nullptr)
            return;
        if (!r.ok)
            TM_LOG(ERR, app, "flow %u: rx lcore %u refused it", r.index, f->recv_lcore);
        end_move(*f, r.ok);
        return;
    default:
        if (!r.ok)
            TM_LOG(ERR, app, "lcore refused request %d for flow %u", static_cast<int>(r.op), r.index);
        break;
    }
    if (f != nullptr && (r.op == Request::Op::RemoveRecv || r.op == kRemoveCons) && --f->detach_pending == 0) {
        // Neither the Receiver nor the consumer holds the ring any more.
        f->last_released = f->ring ? f->ring->released() : f->last_released;
        f->last_gave_up = f->ring ? f->ring->gave_up() : f->last_gave_up;
        ConsFlow* cf = f->cons;
        if (cf != nullptr) {
            f->cons_completed = cf->completed;
            f->cons_verified = cf->verified;
            f->cons_errors = cf->verify_errors;
            f->cons = nullptr;
        }
        rte_ring* cq = f->pkt_cq;
        f->pkt_cq = nullptr;
        CompletionRing* ring = f->ring.release();
        f->ring_gone = true;
        f->detached = true;
        const uint16_t id = f->recv_id;
        // Other threads (the shell, telemetry) may still be reading these:
        // freed a second later. The id goes back with its memzone's name.
        later(now, [this, cf, cq, ring, id] {
            socket_delete(cf);
            rte_ring_free(cq);
            delete ring;
            recv_ids_.release(id, 1, rte_rdtsc());
        });
    }
    if (a == nullptr || a->pending == 0)
        return;
    if (--a->pending != 0)
        return;
    if (a->stage == AppSession::Stage::Installing) {
        if (!a->connector)
            sessions_->accept_ready(a->s, now); // the ACCEPT: the flows are in place
        else
            a->stage = AppSession::Stage::Live;
        if (start_tsc_ == 0 && a->connector)
            start_tsc_ = now;
        if (start_tsc_ == 0 && opt_.mode == Mode::Recv)
            start_tsc_ = now;
    } else if (a->stage == AppSession::Stage::Detaching) {
        a->stage = AppSession::Stage::Gone;
    }
    if (service_ && a->svc != nullptr)
        service_->on_stage(*a, now);
}

void Runtime::later(uint64_t now, std::function<void()> fn) { deferred_.later(now, std::move(fn)); }

void Runtime::take_responses(uint64_t now) {
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        LcoreCtx* c = lcores_[l];
        if (c == nullptr)
            continue;
        Request r;
        while (rte_ring_sc_dequeue_elem(c->resp, &r, sizeof(r)) == 0)
            on_response(r, now);
    }
    if (!retry_.empty()) {
        std::vector<Request> again;
        again.swap(retry_);
        for (const Request& r : again) {
            const FlowCtx& f = *flows_[r.index];
            post(f.send_lcore, r);
        }
    }
}

// --- run and control ----------------------------------------------------------

void Runtime::run() {
    const unsigned main_lcore = rte_get_main_lcore();
    launch_tsc_ = rte_rdtsc();
    deadline_tsc_ = opt_.duration > 0 ? launch_tsc_ + static_cast<uint64_t>(opt_.duration * double(tsc_hz_)) : 0;
    last_stats_tsc_ = launch_tsc_;
    const uint64_t period = static_cast<uint64_t>(stats_period_.load() * double(tsc_hz_));
    next_stats_ = period ? launch_tsc_ + period : 0;
    launched_ = true;
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        if (l == main_lcore || lcores_[l] == nullptr || !lcores_[l]->any())
            continue;
        int rc = rte_eal_remote_launch(lcore_main, lcores_[l], l);
        if (rc != 0) {
            TM_LOG(ERR, app, "lcore %u: launch failed (%d)", l, rc);
            plane_.phase.store(static_cast<int>(Phase::Stop));
            exit_reason_ = "launch_failed";
        }
    }
    if (!opt_.flow_control)
        start_tsc_ = launch_tsc_;
    start_sessions(rte_rdtsc());
    LcoreCtx& mine = *lcores_[main_lcore];
    const uint64_t ctrl = tsc_hz_ * kControlUs / 1000000;
    uint64_t next_ctrl = 0;
    uint64_t prev = rte_rdtsc();
    while (plane_.phase_now() != Phase::Stop) {
        serve_requests(mine);
        if (mine.any())
            run_roles_timed(mine, prev); // prev: the TSC it ended at
        else
            rte_delay_us_sleep(kControlUs);
        const uint64_t now = mine.any() ? prev : rte_rdtsc();
        if (now >= next_ctrl) {
            control(now);
            next_ctrl = now + ctrl;
        }
    }
    rte_eal_mp_wait_lcore();
    if (end_tsc_ == 0)
        end_tsc_ = rte_rdtsc();
}

void Runtime::begin_drain(uint64_t now, const char* reason) {
    if (exit_reason_.empty())
        exit_reason_ = reason;
    if (opt_.mode == Mode::Recv) { // a receiver cannot know what is still in flight
        stop(now, reason);
        return;
    }
    TM_LOG(INFO, app, "%s: draining (no new messages; up to %" PRIu64 " ms for those in flight)", reason,
           kDrainUs / 1000);
    drain_start_ = now;
    drain_deadline_ = now + tsc_hz_ * kDrainUs / 1000000;
    plane_.phase.store(static_cast<int>(Phase::Drain), std::memory_order_relaxed);
}

void Runtime::stop(uint64_t now, const char* reason) {
    if (exit_reason_.empty())
        exit_reason_ = reason;
    if (end_tsc_ == 0)
        end_tsc_ = work_end_tsc_ ? work_end_tsc_ : now;
    plane_.phase.store(static_cast<int>(Phase::Stop), std::memory_order_relaxed);
}

// The work is over: the sessions this process opened are closed (a CLOSE
// to each peer, sent before the lcores stop), then everything stops.
void Runtime::close_and_stop(uint64_t now, const char* reason) {
    if (exit_reason_.empty())
        exit_reason_ = reason;
    if (closing_)
        return;
    closing_ = true;
    if (end_tsc_ == 0)
        end_tsc_ = work_end_tsc_ ? work_end_tsc_ : now;
    plane_.phase.store(static_cast<int>(Phase::Drain), std::memory_order_relaxed);
    close_sessions(now);
    close_deadline_ = now + tsc_hz_ * kCloseUs / 1000000;
}

void Runtime::close_sessions(uint64_t now) {
    if (service_) { // the applications are told, and every session is closed
        service_->shutdown(now);
        for (Session* s : sessions_->sessions())
            if (s->state != SessionState::Ended)
                sessions_->close(s, now);
        return;
    }
    for (Session* s : sessions_->sessions())
        if (s->connector && s->state == SessionState::Established)
            sessions_->close(s, now);
}

// Congestion control's ceiling: --cc-max-mbps, else the tx port's link speed.
uint64_t Runtime::cc_max_mbps() const {
    if (opt_.cc_max_mbps != 0)
        return opt_.cc_max_mbps;
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(tx_port_->id(), &link) == 0 && link.link_speed != RTE_ETH_SPEED_NUM_NONE &&
        link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
        return link.link_speed;
    return 100000;
}

bool Runtime::senders_busy() const {
    for (const Sender* s : senders_)
        if (s->busy() != 0)
            return true;
    return false;
}

Sender::FlowView Runtime::send_view(const FlowCtx& f) const {
    if (f.send != nullptr)
        return Sender::view(f.send);
    return f.last_send;
}

uint32_t Runtime::released_of(const FlowCtx& f) const {
    if (f.ring)
        return f.ring->released();
    // A receive side whose session ended keeps its ring's last cursor; the
    // sender's view is only a sender's (as in acked_of).
    if (f.send != nullptr || (f.detached && opt_.mode == Mode::Send))
        return send_view(f).released;
    return f.last_released;
}

uint32_t Runtime::acked_of(const FlowCtx& f) const {
    if (f.recv != nullptr)
        return *Receiver::acked_word(f.recv);
    if (f.send != nullptr || (f.detached && opt_.mode == Mode::Send))
        return send_view(f).acked;
    return f.last_acked;
}

bool Runtime::done() const {
    if (opt_.messages == 0)
        return false;
    const uint32_t m = static_cast<uint32_t>(opt_.messages);
    switch (opt_.mode) {
    case Mode::Service:
        return false; // serves until stopped
    case Mode::Recv: {
        if (sessions_complete_ < opt_.sessions)
            return false;
        // The senders confirm they heard the last release with a CLOSE.
        for (const auto& a : app_sessions_)
            if (a->complete && a->stage == AppSession::Stage::Live)
                return false;
        return true;
    }
    case Mode::Loopback:
    case Mode::Send:
        if (flows_.empty())
            return false;
        if (opt_.replay) { // no Sender flows: the ready-made packets' messages, consumed
            for (const FlowCtx* f : flows_)
                if (f->consumed.load(std::memory_order_acquire) != m)
                    return false;
            return true;
        }
        for (const FlowCtx* f : flows_) {
            const Sender::FlowView v = send_view(*f);
            if (f->send == nullptr && !f->detached && opt_.flow_control)
                return false; // not up yet
            if (v.failed != FailReason::None)
                continue; // given up: reported, nothing more to wait for
            const uint32_t want = m + static_cast<uint32_t>(f->sends_requested.load(std::memory_order_acquire));
            if (opt_.mode == Mode::Loopback ? f->consumed.load(std::memory_order_acquire) != want
                                            : (opt_.flow_control ? v.released : v.sent) != want)
                return false;
        }
        for (const Sender* s : senders_)
            if (s->busy() != 0)
                return false;
        return true;
    }
    return false;
}

bool Runtime::drained() const {
    for (const Sender* s : senders_)
        if (s->busy() != 0)
            return false;
    if (opt_.replay) { // every message the replay queued was consumed
        uint64_t queued = 0, consumed = 0;
        for (const TxCtx* c : txs_) {
            if (peek(c->replay_opened) != peek(c->replay_msgs))
                return false; // a message partly queued
            queued += peek(c->replay_msgs);
        }
        for (const FlowCtx* f : flows_)
            consumed += f->consumed.load(std::memory_order_acquire);
        return consumed == queued;
    }
    for (const FlowCtx* f : flows_) {
        const Sender::FlowView v = send_view(*f);
        if (v.failed != FailReason::None)
            continue;
        if (opt_.mode == Mode::Loopback && f->consumed.load(std::memory_order_acquire) != v.sent)
            return false;
        if (opt_.mode == Mode::Send && opt_.flow_control && v.released != v.sent)
            return false;
    }
    return true;
}

void Runtime::control(uint64_t now) {
    const int q = stop_.requests();
    if (q >= 2) {
        stop(now, "signal");
    } else if (q == 1 && plane_.phase_now() == Phase::Run && !closing_) {
        const int sig = stop_.last_signal(); // 0: the shell's quit (or the end of its input)
        if (sig != 0)
            TM_LOG(NOTICE, app, "signal %d", sig);
        else
            TM_LOG(NOTICE, app, "quit (shell)");
        begin_drain(now, sig ? "signal" : "quit");
    }
    if (plane_.phase_now() == Phase::Run && deadline_tsc_ && now >= deadline_tsc_ && !closing_)
        begin_drain(now, "duration");

    // The control plane's packets: handshakes, keep-alives, ARP.
    rte_mbuf* frames[32];
    const unsigned nf = rte_ring_sc_dequeue_burst(control_in_, reinterpret_cast<void**>(frames), 32, nullptr);
    for (unsigned i = 0; i < nf; i++)
        sessions_->on_frame(frames[i], now);
    sessions_->poll(now);
    take_responses(now);
    if (service_)
        service_->poll(now); // applications: requests, wake-ups, memory let go
    deferred_.run(now);
    // Sessions whose flows the lcores gave back, and those that never had any.
    for (Session* s : sessions_->sessions()) {
        if (s->state != SessionState::Ended)
            continue;
        AppSession* a = app_session(s->id);
        if (a != nullptr && a->stage != AppSession::Stage::Gone)
            continue;
        if (a != nullptr) {
            a->s = nullptr; // each flow's id went back with it
        } else if (s->connector) {
            send_ids_.release(s->local_base, s->params.nflows, now); // never installed (the CONNECT named them)
        }
        sessions_->forget(s);
    }
    if (opt_.external_consumer && opt_.mode != Mode::Send)
        watch_flows(now);
    rebalance(now);
    if (failed_logged_.size() < flows_.size())
        failed_logged_.resize(flows_.size(), false);
    if (floor_since_.size() < flows_.size())
        floor_since_.resize(flows_.size(), 0);
    // Every 10 ms, not every control round: each look reads every flow's
    // Sender state, lines its tx lcore writes per message, which then come
    // back to that lcore as misses (64 flows of 64 B messages in loopback:
    // 7% of the rate when it was every 100 us).
    const bool scan = now >= next_flow_scan_;
    if (scan)
        next_flow_scan_ = now + tsc_hz_ / 100;
    const double floor_bps = CongestionConfig{}.min_bps * 1.05;
    for (size_t i = 0; scan && i < flows_.size() && opt_.mode != Mode::Recv; i++) {
        const Sender::FlowView v = send_view(*flows_[i]);
        if (v.failed != FailReason::None && !failed_logged_[i]) {
            failed_logged_[i] = true;
            TM_LOG(WARNING, app, "flow %zu failed (%s): messages from %u on are not confirmed", i, to_string(v.failed),
                   v.released);
        }
        // Congestion control held at its floor for a second while the flow
        // has work (and not by --cc-max-mbps): say why that may be, once per
        // session (a delay-based controller cannot tell a queue from a
        // receiver waiting for a CPU).
        AppSession* a = flows_[i]->send_session;
        const bool floor = v.cc_rate_bps > 0 && v.cc_rate_bps <= floor_bps && v.submitted != v.released &&
                           (cc_max_mbps() == 0 || cc_max_mbps() * 1e6 > floor_bps) && a != nullptr && !a->floor_said;
        if (!floor) {
            floor_since_[i] = 0;
        } else if (floor_since_[i] == 0) {
            floor_since_[i] = now;
        } else if (now - floor_since_[i] > tsc_hz_) {
            a->floor_said = true;
            TM_LOG(WARNING, app,
                   "session %u to %s: congestion control has held it at the 1 Mbit/s floor for 1 s (smoothed RTT %.1f "
                   "ms, base %.1f ms, --cc-target-us %" PRIu64 "): a queue on the path, or busy threads sharing the "
                   "peers' CPUs with their lcores, whose scheduling delay reads as queueing; give the lcores cores of "
                   "their own or raise --cc-target-us above that delay",
                   a->index, to_string(a->peer).c_str(), double(v.cc_srtt) * 1e3 / double(tsc_hz_),
                   double(v.cc_base_rtt) * 1e3 / double(tsc_hz_), opt_.cc_target_us);
        }
    }
    if (now >= next_rates_) {
        update_rates(now);
        forget_ended(now); // once a second too
    }
    // recv: a session is complete once every flow consumed --messages.
    for (auto& a : app_sessions_) {
        if (a->connector || a->complete || opt_.messages == 0 || a->flows.empty())
            continue;
        bool all = true;
        for (const FlowCtx* f : a->flows)
            all = all && f->consumed.load(std::memory_order_acquire) >= opt_.messages;
        if (all) {
            a->complete = true;
            sessions_complete_++;
        }
    }
    const bool finished = done();
    if (finished && work_end_tsc_ == 0)
        work_end_tsc_ = now; // rates are over the time the work was in flight
    if (plane_.phase_now() == Phase::Run && opt_.exit_when_done && !lingering_ && finished && !closing_) {
        if (opt_.linger) { // final counters stay readable (telemetry) until a signal
            lingering_ = true;
            exit_reason_ = "done";
            end_tsc_ = now;
            close_sessions(now); // the counters are final from here on
            TM_LOG(NOTICE, app, "done; --linger: waiting for a signal");
        } else {
            close_and_stop(now, "done");
        }
    }
    if (plane_.phase_now() == Phase::Drain && !closing_) {
        if (drained())
            close_and_stop(now, exit_reason_.c_str());
        else if (now >= drain_deadline_)
            stop(drain_start_, exit_reason_.c_str()); // rates: no traffic after the drain began
    }
    if (closing_) { // the CLOSE packets are out (loopback: and in), or it is time
        bool out = true;
        for (const Sender* s : senders_)
            out = out && rte_ring_empty(s->ctl_out()) && s->busy() == 0;
        if (opt_.mode == Mode::Loopback)
            for (Session* s : sessions_->sessions())
                out = out && (s->state == SessionState::Ended || !s->local_peer);
        if (out || now >= close_deadline_)
            plane_.phase.store(static_cast<int>(Phase::Stop), std::memory_order_relaxed);
    }
    // The period may change at run time (shell: `set stats-period`).
    const uint64_t period = static_cast<uint64_t>(stats_period_.load(std::memory_order_relaxed) * double(tsc_hz_));
    if (period == 0)
        next_stats_ = 0;
    else if (next_stats_ == 0 || next_stats_ > now + period)
        next_stats_ = now + period;
    if (next_stats_ && now >= next_stats_ && plane_.phase_now() != Phase::Stop) {
        print_stats(now);
        while (next_stats_ <= now)
            next_stats_ += period;
    }
}

// Each flow's messages per second over the last second: sent, and done
// (send: delivered; otherwise consumed). Once a second: each look reads
// the flow's Sender state (see the 10 ms scan above).
void Runtime::update_rates(uint64_t now) {
    const double dt = rates_tsc_ != 0 ? double(now - rates_tsc_) / double(tsc_hz_) : 0;
    for (FlowCtx* f : flows_) {
        const uint32_t sent = f->send != nullptr || f->detached || opt_.mode != Mode::Recv ? send_view(*f).sent : 0;
        const uint32_t done = released_of(*f);
        if (dt > 0) {
            f->rate_sent.store(double(sent - f->rate_sent_seen) / dt, std::memory_order_relaxed);
            f->rate_done.store(double(done - f->rate_done_seen) / dt, std::memory_order_relaxed);
        }
        f->rate_sent_seen = sent;
        f->rate_done_seen = done;
    }
    rates_tsc_ = now;
    next_rates_ = now + tsc_hz_;
}

// The external consumer's released cursors become the flows' consumed
// counters. A flow whose oldest unreleased message is complete while the
// cursor has not moved for kConsumerStallUs is stalled: reported, never
// overwritten (the placer's window ends at released + ring size).
void Runtime::watch_flows(uint64_t now) {
    const uint64_t limit = tsc_hz_ * kConsumerStallUs / 1000000;
    if (seen_released_.size() < flows_.size()) {
        seen_released_.resize(flows_.size(), 0);
        moved_tsc_.resize(flows_.size(), 0);
    }
    uint32_t n = 0;
    for (size_t i = 0; i < flows_.size(); i++) {
        FlowCtx& f = *flows_[i];
        if (!f.ring)
            continue;
        const uint32_t rel = f.ring->released();
        f.consumed.store(rel, std::memory_order_release);
        if (rel != seen_released_[i] || moved_tsc_[i] == 0) {
            seen_released_[i] = rel;
            moved_tsc_[i] = now;
        }
        const bool waiting = f.ring->poll(rel) != nullptr;
        const bool st = waiting && now - moved_tsc_[i] >= limit;
        if (!waiting)
            moved_tsc_[i] = now;
        if (st != stalled_[i].load(std::memory_order_relaxed)) {
            stalled_[i].store(st, std::memory_order_relaxed);
            if (st)
                TM_LOG(WARNING, app, "flow %zu stalled: message %u is complete, the consumer released nothing for %" PRIu64
                       " ms", i, rel, kConsumerStallUs / 1000);
            else
                TM_LOG(NOTICE, app, "flow %zu resumed at message %u", i, rel);
        }
        n += st;
    }
    nstalled_.store(n, std::memory_order_relaxed);
}

DropCounters Runtime::drops() const {
    DropCounters d{};
    for (const Sender* s : senders_)
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(s->counters().drops[i]);
    for (const Receiver* r : receivers_)
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(r->placer().counters().drops[i]) + peek(r->counters().drops[i]);
    if (sessions_)
        for (size_t i = 0; i < kDropReasonCount; i++)
            d[i] += peek(sessions_->counters().drops[i]);
    return d;
}

Runtime::Stats Runtime::stats() const {
    Stats t;
    for (uint32_t i = 0; i < senders_.size(); i++) {
        const Sender* s = senders_[i];
        const SenderCounters& c = s->counters();
        t.sent += peek(c.msgs_sent);
        t.pkts_tx += s->pkts_tx();
        if (i >= port_senders_)
            t.pkts_local += s->pkts_tx();
        t.tx_dropped += s->tx_dropped();
        t.retx += peek(c.retx_pkts);
        if (opt_.mode == Mode::Send || opt_.mode == Mode::Service) // service: the applications' payload sent
            t.bytes += peek(c.bytes_sent);
    }
    for (uint64_t d : drops())
        t.drops += d;
    for (const TxCtx* c : txs_) {
        t.sent += peek(c->replay_msgs);
        for (const ReplayQueue& rq : c->replay) {
            t.pkts_tx += rq.q->pkts_tx();
            t.tx_dropped += rq.q->dropped();
        }
    }
    for (const RxCtx* c : rxs_)
        t.pkts_rx += peek(c->pkts_rx);
    for (const Receiver* r : receivers_) {
        const RxCounters& rc = r->placer().counters();
        // One of the two is 0 unless the shell switched modes mid-run.
        t.completion_writes += peek(rc.packet_completions) + peek(rc.completions);
    }
    for (const ConsCtx* c : conss_) {
        t.completed += peek(c->completed);
        t.verified += peek(c->verified);
        t.verify_errors += peek(c->verify_errors);
        t.bytes += peek(c->bytes);
    }
    if (opt_.mode == Mode::Send && opt_.flow_control)
        for (const FlowCtx* f : flows_)
            t.acked += send_view(*f).released;
    if (opt_.mode == Mode::Send) {
        t.completed = t.acked;
    } else if (opt_.external_consumer) { // released by the consumer process (which verifies)
        const bool sizes_known = opt_.mode != Mode::Service; // the applications' messages have their own
        t.completed += forgotten_.completed;
        if (sizes_known)
            t.bytes = forgotten_.bytes;
        for (const FlowCtx* f : flows_) {
            if (f->forgotten)
                continue;
            const uint32_t rel = released_of(*f);
            t.completed += rel;
            if (sizes_known)
                t.bytes += bytes_released(rel);
        }
    }
    return t;
}

// Message i of a flow has the i-th size of the list, in turn (not the
// largest times the count).
uint64_t Runtime::bytes_released(uint32_t rel) const {
    if (plane_.cfg.nsizes == 0)
        return uint64_t(rel) * opt_.msg_size;
    uint64_t cycle = 0, b = 0;
    for (uint32_t k = 0; k < plane_.cfg.nsizes; k++)
        cycle += plane_.cfg.sizes[k];
    b += uint64_t(rel / plane_.cfg.nsizes) * cycle;
    for (uint32_t k = 0; k < rel % plane_.cfg.nsizes; k++)
        b += plane_.cfg.sizes[k];
    return b;
}

void Runtime::print_stats(uint64_t now) {
    const Stats t = stats();
    const double dt = double(now - last_stats_tsc_) / double(tsc_hz_);
    const double el = double(now - launch_tsc_) / double(tsc_hz_);
    // Service mode's totals are its live flows': a session that ended takes
    // its counts with it, and a period's difference would wrap (a line read
    // msgs_per_s=18445782852671762432). Such a period counts nothing.
    auto since = [](uint64_t now_v, uint64_t then_v) { return now_v > then_v ? now_v - then_v : 0; };
    const uint64_t dmsg = opt_.mode == Mode::Send ? since(t.sent, last_stats_.sent) : since(t.completed, last_stats_.completed);
    const uint64_t dpkt = opt_.mode == Mode::Recv ? since(t.pkts_rx, last_stats_.pkts_rx) : since(t.pkts_tx, last_stats_.pkts_tx);
    const double gbps = double(since(t.bytes, last_stats_.bytes)) * 8 / dt / 1e9;
    printf("stats t=%.2f sent=%" PRIu64 " completed=%" PRIu64 " verified=%" PRIu64 " verify_errors=%" PRIu64
           " msgs_per_s=%.0f gbps=%.3f mpps=%.3f packets_tx=%" PRIu64 " packets_rx=%" PRIu64 " drops=%" PRIu64
           " tx_dropped=%" PRIu64,
           el, t.sent, t.completed, t.verified, t.verify_errors, double(dmsg) / dt, gbps, double(dpkt) / dt / 1e6,
           t.pkts_tx, t.pkts_rx, t.drops, t.tx_dropped);
    const uint64_t base = opt_.mode == Mode::Recv ? t.completion_writes : t.sent;
    const uint64_t in_flight = base > t.completed ? base - t.completed : 0;
    uint32_t up = 0;
    for (const auto& a : app_sessions_)
        up += a->stage == AppSession::Stage::Live;
    printf(" in_flight=%" PRIu64 " retransmits=%" PRIu64 " stalled=%u", in_flight, t.retx,
           nstalled_.load(std::memory_order_relaxed));
    if (opt_.exit_when_done && opt_.messages != 0)
        printf(" done_pct=%.1f", 100.0 * double(t.completed) /
                                     double(opt_.messages * opt_.flows * (opt_.mode == Mode::Recv ? opt_.sessions : 1)));
    printf(" sessions=%u", up);
    // The fastest session's congestion controller: what paces the sender now.
    double cc_bps = 0, srtt_us = 0;
    for (const FlowCtx* f : flows_) {
        if (f->forgotten || (f->send == nullptr && !f->detached && opt_.mode == Mode::Recv))
            continue;
        const Sender::FlowView v = send_view(*f);
        if (v.cc_rate_bps > cc_bps) {
            cc_bps = v.cc_rate_bps;
            srtt_us = double(v.cc_srtt) * 1e6 / double(tsc_hz_);
        }
    }
    if (cc_bps > 0)
        printf(" cc_mbps=%.1f srtt_us=%.0f", cc_bps / 1e6, srtt_us);
    printf("\n");
    fflush(stdout);
    last_stats_ = t;
    last_stats_tsc_ = now;
}

// --- results ----------------------------------------------------------------

// Per rx lcore: its queue, what the queue brought, what it placed, what it
// passed to other rx lcores (hand-off) and took from them. Relaxed reads of
// the lcores' counters (the summary, telemetry).
std::vector<Results::RxLane> Runtime::rx_lanes() const {
    std::vector<Results::RxLane> v;
    for (size_t i = 0; i < rxs_.size() && i < receivers_.size(); i++) {
        const ReceiverCounters& c = receivers_[i]->counters();
        v.push_back({rxs_[i]->lcore, rxs_[i]->queue, peek(rxs_[i]->pkts_rx),
                     peek(receivers_[i]->placer().counters().placed), peek(c.handed_out), peek(c.handed_in),
                     peek(c.held)});
    }
    return v;
}

Results::Flow Runtime::flow_row(const FlowCtx& f) const {
    Results::Flow x;
    x.index = f.index;
    if (f.send != nullptr || f.detached || opt_.mode != Mode::Recv) {
        const Sender::FlowView v = send_view(f);
        x.sent = v.sent;
        if (opt_.mode == Mode::Send) {
            x.acked = v.acked;
            x.released = v.released;
        } else {
            x.acked = acked_of(f);
            x.released = released_of(f);
        }
        if (v.failed != FailReason::None && opt_.mode != Mode::Recv) {
            x.state = to_string(v.failed);
            // What it still owed: its messages not released, the ones
            // never sent included (--messages 0: those it had taken).
            // The service's flows carry the applications' messages, not --messages.
            const uint64_t quota = opt_.messages + f.sends_requested.load(std::memory_order_relaxed);
            x.failed = opt_.messages && opt_.mode != Mode::Service ? (quota > x.released ? quota - x.released : 0)
                                                                   : v.failed_msgs;
        }
    } else {
        x.acked = acked_of(f);
        x.released = released_of(f);
    }
    if (opt_.mode == Mode::Recv) {
        x.sent = 0;
        x.session = f.session ? f.session->index : 0;
    }
    x.gave_up = f.ring ? f.ring->gave_up() : f.last_gave_up;
    x.latency_samples = f.lat.samples();
    x.lat_p50_ns = double(f.lat.quantile(0.50)) * 1e9 / double(tsc_hz_);
    x.lat_p99_ns = double(f.lat.quantile(0.99)) * 1e9 / double(tsc_hz_);
    if (handoff_) {
        const uint8_t o = f.recv != nullptr ? rx_moves_.owner_of(f.recv_id) : f.last_owner;
        const uint8_t at = f.recv != nullptr ? rx_moves_.arrived_of(f.recv_id) : f.last_arrived;
        x.rx_owner = o == RxPlacer::kNoOwner ? -1 : o;
        x.rx_arrived = at == RxPlacer::kNoOwner ? -1 : at;
    }
    return x;
}

Results Runtime::results() const {
    Results r;
    const Stats t = stats();
    r.mode = opt_.mode;
    r.completion = completion();
    // Service: the flows the applications' sessions opened; their sizes are theirs.
    r.flows = opt_.mode == Mode::Service ? static_cast<uint32_t>(flows_made_) : opt_.flows;
    r.registry = {flows_made_, flows_.size(), slots_reused_, forgotten_.sessions};
    r.msg_size = opt_.mode == Mode::Service ? 0 : opt_.msg_size;
    r.messages_per_flow = opt_.messages;
    r.messages_sent = t.sent;
    r.messages_completed = t.completed;
    r.messages_acked = t.acked;
    r.messages_verified = t.verified;
    r.verify_errors = t.verify_errors;
    r.completion_writes = t.completion_writes;
    r.packets_tx = t.pkts_tx;
    r.packets_rx = t.pkts_rx;
    rte_eth_stats st;
    if (local_port_ && rte_eth_stats_get(local_port_->id(), &st) == 0)
        r.packets_local = st.opackets;
    if (tx_port_ && rte_eth_stats_get(tx_port_->id(), &st) == 0) {
        r.port_tx = st.opackets;
        r.port_rx = st.ipackets;
        r.port_missed = st.imissed;
    }
    if (rx_port_owned_ && rte_eth_stats_get(rx_port_owned_->id(), &st) == 0) {
        r.port_rx = st.ipackets;
        r.port_missed = st.imissed;
    }
    r.bytes_payload = t.bytes;
    r.tx_dropped = t.tx_dropped;
    r.fault_shim = !shims_.empty();
    if (opt_.udp_checksum) {
        r.udp_checksum_tx = tx_port_->tx_udp_checksum() ? "offload" : "software";
        r.udp_checksum_rx = rx_port_->rx_udp_checksum() ? "offload" : "software";
    }
    r.fault = fault_counters();
    r.steering = steering_name();
    r.rx_moves = rx_moves_.moves();
    if (!traces_.empty()) {
        std::vector<const SlowTrace*> t;
        for (const auto& p : traces_)
            t.push_back(p.get());
        r.slow_json = SlowTrace::to_json(t, tsc_hz_, opt_.trace_slow_ns,
                                         plan_group(opt_.msg_size, stride_for_mtu(opt_.mtu)).pkt_count);
    }
    r.rx_lanes = rx_lanes();
    for (uint32_t i = 0; i < senders_.size(); i++) {
        PathView pv[64];
        const uint32_t k = senders_[i]->path_views(pv, 64);
        for (uint32_t j = 0; j < k; j++)
            r.paths.push_back({i, pv[j]});
    }
    for (const Sender* s : senders_) {
        const SenderCounters& c = s->counters();
        r.acks_rx += c.acks_rx;
        r.tx_alloc_fail += c.alloc_fail;
        r.packets_zero_copy += c.zero_copy_pkts;
        r.rel.retx_pkts += c.retx_pkts;
        r.rel.retx_reqs += c.retx_reqs;
        r.rel.probes += c.probes;
        r.rel.rto_expired += c.rto_expired;
        r.rel.stale_reqs += c.stale_reqs;
        r.rel.nacks_rx += c.nacks_rx;
        r.rel.nacks_early += c.nacks_early;
        r.cc.samples += c.cc_samples;
        r.cc.increases += c.cc_increases;
        r.cc.decreases += c.cc_decreases;
        r.cc.loss_decreases += c.cc_loss_decreases;
        r.cc.timeouts += c.cc_timeouts;
        r.cc.paced += c.cc_paced;
    }
    r.drops = drops();
    for (const TxCtx* c : txs_)
        r.gen_buf_waits += peek(c->buf_waits);
    for (const Receiver* rc : receivers_) {
        const RxCounters& pc = rc->placer().counters();
        const ReceiverCounters& c = rc->counters();
        r.packets_placed += pc.placed;
        r.packets_streamed += pc.streamed;
        r.rel.retx_rx += pc.retx;
        r.rel.nack_reqs += pc.nacks;
        r.discarded += pc.discarded;
        r.acks_tx += c.acks_tx;
        r.rel.nacks_tx += c.nacks_tx;
        r.control_lost += c.ctl_lost;
    }
    if (sessions_) {
        const SessionCounters& sc = sessions_->counters();
        r.sess.tx = sc.tx;
        r.sess.rx = sc.rx;
        r.sess.arp_tx = sc.arp_tx;
        r.sess.arp_rx = sc.arp_rx;
        r.sess.established = sc.established;
        r.sess.ended = sc.ended;
        r.sess.refused = sc.refused;
    }
    r.sess.ids_reused = send_ids_.reused() + recv_ids_.reused();
    if (service_) {
        r.svc = service_->counters();
    }
    uint64_t ctl_tx = 0, ctl_rx = 0; // ACK/NACK packets (a local peer's go in memory)
    for (const Receiver* rc : receivers_)
        ctl_tx += rc->counters().ctl_packets;
    for (const Sender* s : senders_)
        ctl_rx += s->counters().ctl_packets;
    r.control_tx = ctl_tx + r.sess.tx + r.sess.arp_tx;
    r.control_rx = ctl_rx + r.sess.rx + r.sess.arp_rx;
    for (uint64_t d : r.drops)
        r.drops_total += d;
    uint64_t cy_tx = 0, cy_rx = 0, cy_cons = 0;
    for (const LcoreCtx* l : lcores_) {
        if (l == nullptr)
            continue;
        cy_tx += peek(l->cycles.tx);
        cy_rx += peek(l->cycles.rx);
        cy_cons += peek(l->cycles.cons);
    }
    if (r.packets_tx)
        r.tx_cycles_per_packet = double(cy_tx) / double(r.packets_tx);
    if (r.packets_rx)
        r.rx_cycles_per_packet = double(cy_rx) / double(r.packets_rx);
    if (t.completed)
        r.consumer_cycles_per_message = double(cy_cons) / double(t.completed);
    for (int sock = 0; sock < RTE_MAX_NUMA_NODES; sock++) {
        rte_malloc_socket_stats ms;
        if (rte_malloc_get_socket_stats(sock, &ms) == 0)
            r.memory_bytes += ms.heap_allocsz_bytes;
    }
    LatencyHist* h = static_cast<LatencyHist*>(rte_zmalloc("tm_hist", sizeof(LatencyHist), 64));
    if (h) {
        for (const ConsCtx* c : conss_)
            h->merge(c->hist);
        for (const TxCtx* c : txs_) // send mode: delivery latency
            h->merge(c->hist);
        const double ns = 1e9 / double(tsc_hz_);
        r.latency_samples = h->samples();
        r.lat_p50_ns = double(h->quantile(0.50)) * ns;
        r.lat_p99_ns = double(h->quantile(0.99)) * ns;
        r.lat_p999_ns = double(h->quantile(0.999)) * ns;
        r.lat_max_ns = double(h->max()) * ns;
        rte_free(h);
    }
    // Rates over the time work was in flight: from the first session up (the
    // start, without sessions) to when the work was done, or the stop.
    const uint64_t begin = start_tsc_ ? start_tsc_ : launch_tsc_;
    uint64_t end = end_tsc_ ? end_tsc_ : rte_rdtsc();
    if (work_end_tsc_ != 0 && work_end_tsc_ < end)
        end = work_end_tsc_;
    r.elapsed_s = begin && end > begin ? double(end - begin) / double(tsc_hz_) : 0;
    if (r.elapsed_s > 0) {
        r.msgs_per_s = double(opt_.mode == Mode::Send ? r.messages_sent : r.messages_completed) / r.elapsed_s;
        r.mpps = double(opt_.mode == Mode::Recv ? r.packets_rx : r.packets_tx) / r.elapsed_s / 1e6;
        r.gbps = double(r.bytes_payload) * 8 / r.elapsed_s / 1e9;
    }
    r.exit_reason = exit_reason_.empty() ? "stopped" : exit_reason_;

    uint64_t sends = 0;
    for (const FlowCtx* f : flows_)
        sends += f->sends_requested.load(std::memory_order_relaxed);
    r.flows_failed = static_cast<uint32_t>(forgotten_.flows_failed);
    r.messages_failed = forgotten_.messages_failed;
    for (const FlowCtx* f : flows_) {
        if (f->forgotten)
            continue;
        if (f->send != nullptr || f->detached || opt_.mode != Mode::Recv) {
            const Sender::FlowView v = send_view(*f);
            if (v.cc_rate_bps / 1e6 > r.cc.rate_mbps) { // the fastest session's controller
                r.cc.rate_mbps = v.cc_rate_bps / 1e6;
                r.cc.srtt_us = static_cast<double>(v.cc_srtt) * 1e6 / static_cast<double>(tsc_hz_);
                r.cc.base_rtt_us = static_cast<double>(v.cc_base_rtt) * 1e6 / static_cast<double>(tsc_hz_);
            }
        }
        const Results::Flow x = flow_row(*f);
        if (std::strcmp(x.state, "ok") != 0) {
            r.flows_failed++;
            r.messages_failed += x.failed;
        }
        r.per_flow.push_back(x);
    }
    for (const auto& a : app_sessions_) {
        Results::SessionSummary ss;
        ss.index = a->index;
        ss.id = a->id;
        ss.peer = to_string(a->peer);
        ss.role = a->connector ? "connector" : "acceptor";
        ss.state = a->stage == AppSession::Stage::Live ? "up" : a->stage == AppSession::Stage::Installing ? "installing"
                                                                                                            : "ended";
        ss.end = to_string(a->end);
        ss.flows = static_cast<uint32_t>(a->flows.size());
        ss.data_version = a->data_version;
        ss.data_auth = a->data_auth;
        ss.complete = a->complete;
        for (const FlowCtx* f : a->flows) {
            ss.released += released_of(*f);
            if (f->cons != nullptr) {
                ss.completed += peek(f->cons->completed);
                ss.verified += peek(f->cons->verified);
                ss.verify_errors += peek(f->cons->verify_errors);
            } else {
                ss.completed += f->cons_completed;
                ss.verified += f->cons_verified;
                ss.verify_errors += f->cons_errors;
            }
        }
        r.sessions.push_back(ss);
    }
    switch (opt_.mode) {
    case Mode::Loopback: // -i: the shell's `send` adds messages; every message sent is requested
        r.requested = opt_.messages && !opt_.interactive ? opt_.messages * opt_.flows + sends : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.messages_completed == r.requested &&
               (opt_.external_consumer || !opt_.verify || r.messages_verified == r.requested) && r.verify_errors == 0;
        break;
    case Mode::Recv:
        r.requested = opt_.messages * opt_.flows * opt_.sessions + sends;
        r.ok = r.verify_errors == 0 && (opt_.messages == 0 || sessions_complete_ >= opt_.sessions);
        break;
    case Mode::Send:
        r.requested = opt_.messages && !opt_.interactive ? opt_.messages * opt_.flows + sends : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.tx_dropped == 0 && r.flows_failed == 0 &&
               (!opt_.flow_control || r.messages_acked == r.requested) && !refused_;
        break;
    case Mode::Service: // the applications' messages: each learnt its own outcome
        r.requested = r.messages_sent;
        r.ok = r.tx_dropped == 0;
        break;
    }
    return r;
}

bool Runtime::set_completion(CompletionMode m, std::string& why) {
    if (!switchable()) {
        why = opt_.external_consumer ? "the consumer is another process (--consumer-lcores none)"
                                     : opt_.mode == Mode::Send ? "a sender has no receive side"
                                                               : "only a shell run (-i) can switch";
        return false;
    }
    for (Receiver* r : receivers_)
        r->set_mode(m);
    plane_.completion.store(static_cast<uint8_t>(m), std::memory_order_relaxed);
    return true;
}

bool Runtime::set_fault(const drivers::FaultSpec& spec) {
    if (shims_.empty())
        return false;
    bool ok = true;
    for (drivers::FaultShim* s : shims_)
        ok &= s->set(spec);
    if (ok)
        fault_spec_ = spec;
    return ok;
}

drivers::FaultCounters Runtime::fault_counters() const {
    drivers::FaultCounters t;
    for (const drivers::FaultShim* s : shims_) {
        const drivers::FaultCounters c = s->counters();
        t.seen += c.seen;
        t.dropped += c.dropped;
        t.duplicated += c.duplicated;
        t.reordered += c.reordered;
        t.corrupted += c.corrupted;
        t.arrived_retx += c.arrived_retx;
        t.arrived_nack += c.arrived_nack;
        t.passed += c.passed;
    }
    return t;
}

// --- teardown ---------------------------------------------------------------

void Runtime::teardown() {
    // 1. lcores: stopped and joined by run(); make sure of it.
    if (launched_) {
        plane_.phase.store(static_cast<int>(Phase::Stop));
        rte_eal_mp_wait_lcore();
        launched_ = false;
    }
    // 2. the fault shims (lcores joined: no callback in flight), then the
    //    ports: stop and close (their own rx callbacks go with them).
    for (size_t q = 0; q < shim_cbs_.size(); q++)
        if (rx_port_ != nullptr && rte_eth_remove_rx_callback(rx_port_->id(), static_cast<uint16_t>(q), shim_cbs_[q]) == 0)
            rte_free(const_cast<void*>(static_cast<const void*>(shim_cbs_[q])));
    shim_cbs_.clear();
    for (drivers::FaultShim* s : shims_)
        delete s;
    shims_.clear();
    local_port_.reset();
    rx_port_owned_.reset();
    tx_port_.reset();
    rx_port_ = nullptr;
    // 3. what the data plane used: engines first (a Receiver's placer walks
    //    its installed flows as it goes: they must still be there), then the
    //    flows (the Senders' records let go of the generator's buffers),
    //    replay packets, rings, contexts.
    deferred_.run_all();
    for (Sender* s : senders_)
        delete s;
    senders_.clear();
    for (Receiver* r : receivers_)
        delete r;
    receivers_.clear();
    for (FlowCtx* f : flows_) {
        Sender::free_flow(f->send);
        f->send = nullptr;
        free_recv(*f);
        rte_ring_free(f->send_q);
        f->send_q = nullptr;
        rte_free(f->sizes);
        f->sizes = nullptr;
        socket_delete(f);
    }
    flows_.clear();
    nflows_.store(0);
    app_sessions_.clear();
    sessions_.reset(); // the session links
    // The applications' memory: the Senders and the ports let go of every
    // mbuf that referenced an arena.
    service_.reset();
    for (rte_mbuf** pkts : replay_pkts_) // the packets are their pool's, freed with it below
        rte_free(pkts);
    replay_pkts_.clear();
    rte_mbuf* m;
    while (control_in_ != nullptr && rte_ring_dequeue(control_in_, reinterpret_cast<void**>(&m)) == 0)
        rte_pktmbuf_free(m);
    rte_ring_free(control_in_);
    control_in_ = nullptr;
    rx_moves_.release(); // the hand-off rings drained, and the tables
    for (TxCtx* c : txs_)
        socket_delete(c);
    txs_.clear();
    for (RxCtx* c : rxs_)
        socket_delete(c);
    rxs_.clear();
    for (ConsCtx* c : conss_)
        socket_delete(c);
    conss_.clear();
    for (LcoreCtx*& l : lcores_) {
        if (l == nullptr)
            continue;
        rte_ring_free(l->req);
        rte_ring_free(l->resp);
        socket_delete(l);
        l = nullptr;
    }
    for (void* p : allocs_)
        rte_free(p);
    allocs_.clear();
    // 4. pools last: the closed ports returned their mbufs.
    replay_pools_.clear();
    pools_.clear();
    tx_pool_ = rx_pool_ = nullptr;
}

} // namespace tailmark::app
