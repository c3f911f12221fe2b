#include "runtime.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#ifdef TAILMARK_HAVE_VDEV_INIT
#include <rte_bus_vdev.h>
#endif
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_random.h>
#include <rte_ring_elem.h>
#include <rte_timer.h>

#include "generator.h"
#include "signals.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

constexpr uint64_t kTxStallUs = 250000;     // give up a partial burst after 250 ms without progress
constexpr uint64_t kAckMinUs = 20;          // recv: ACK an advanced cursor within 20 us
constexpr uint64_t kAckKeepaliveUs = 1000;  // recv: one ACK per flow per ms regardless
constexpr uint64_t kDrainUs = 500000;       // after a stop request, finish in-flight messages for 0.5 s
constexpr uint64_t kControlUs = 100;        // control loop period
constexpr uint32_t kFinalAcks = 20;         // recv: the final cursor is ACKed this often (1 ms apart) before exit
constexpr unsigned kNackQueue = 1024;       // retransmission requests queued per tx queue
constexpr uint64_t kConsumerStallUs = 1000000; // --consumer-lcores none: a flow is stalled after 1 s without a release

// Objects on a NUMA socket (rte_zmalloc_socket + placement new).
template <class T, class... A>
T* socket_new(int socket, A&&... a) {
    void* p = rte_zmalloc_socket("tailmarkd", sizeof(T), alignof(T) < 64 ? 64 : alignof(T), socket);
    return p ? new (p) T(std::forward<A>(a)...) : nullptr;
}
template <class T>
void socket_delete(T* p) {
    if (p) {
        p->~T();
        rte_free(p);
    }
}
template <class T>
T* socket_array(size_t n, int socket) {
    void* p = rte_zmalloc_socket("tailmarkd", sizeof(T) * (n ? n : 1), 64, socket);
    if (p == nullptr)
        return nullptr;
    T* a = static_cast<T*>(p);
    for (size_t i = 0; i < n; i++)
        new (&a[i]) T();
    return a;
}

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

uint32_t round_pow2_minus1(uint64_t n) {
    uint64_t p = 1;
    while (p - 1 < n)
        p <<= 1;
    return static_cast<uint32_t>(p - 1);
}

std::string mac_str(const rte_ether_addr& m) {
    char b[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(b, sizeof(b), &m);
    return b;
}

} // namespace

Runtime::~Runtime() {
    teardown();
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

bool Runtime::open_ports(SetupError& e) {
    // The embedded default: loopback on net_ring0 when no port was given.
#ifdef TAILMARK_HAVE_VDEV_INIT
    if (rte_eth_dev_count_avail() == 0 && opt_.mode == Mode::Loopback) {
        TM_LOG(NOTICE, app, "no ports: creating net_ring0 (loopback)");
        if (rte_vdev_init("net_ring0", nullptr) != 0) {
            e = {1, "no ports, and net_ring0 could not be created: pass --vdev=..."};
            return false;
        }
    }
#endif
    rte_eth_dev_info txi, rxi;
    std::string err;
    if (!drivers::Port::info(opt_.tx_port, txi, err)) {
        e = {2, "--tx-port: " + err};
        return false;
    }
    if (!drivers::Port::info(opt_.rx_port, rxi, err)) {
        e = {2, "--rx-port: " + err};
        return false;
    }
    const bool same = opt_.tx_port == opt_.rx_port;
    const std::string rx_driver = rxi.driver_name ? rxi.driver_name : "";
    const auto R = static_cast<uint16_t>(rx_lcores_.size());
    const auto T = static_cast<uint16_t>(tx_lcores_.size());
    // Flow steering. net_ring loops tx queue q back to rx queue q, so in
    // loopback each flow is sent on the queue of the rx lcore that owns it.
    // Elsewhere, several rx lcores need RSS (flows are then placed where the
    // port's hash sends them).
    steer_by_queue_ = opt_.mode == Mode::Loopback && same && rx_driver == "net_ring";
    uint16_t rx_nrxq = R, rx_ntxq = 1, tx_nrxq = 1;
    if (steer_by_queue_) {
        tx_nq_ = R;
        rx_ntxq = R;
        if (T > R)
            TM_LOG(WARNING, app, "net_ring loopback uses one tx queue per rx lcore: %u of the %u tx lcores idle",
                   T - R, T);
    } else {
        tx_nq_ = T;
        if (R > 1 && opt_.mode != Mode::Send) {
            const uint64_t want = RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4;
            if ((rxi.flow_type_rss_offloads & want) == 0 || rxi.reta_size == 0) {
                e = {2, "--rx-lcores: port " + std::to_string(opt_.rx_port) + " (" + rx_driver +
                            ") has no RSS to spread flows over " + std::to_string(R) +
                            " rx queues; give one rx lcore"};
                return false;
            }
            rss_ = true;
        }
    }
    if (same)
        rx_ntxq = tx_nq_;
    // What the ports cannot do is a configuration error (exit 2), caught
    // before anything is opened.
    auto queues_fit = [&](const rte_eth_dev_info& i, uint16_t port, uint16_t nrx, uint16_t ntx) {
        if (nrx > i.max_rx_queues) {
            e = {2, "--rx-lcores: port " + std::to_string(port) + " (" + i.driver_name + ") has " +
                        std::to_string(i.max_rx_queues) + " rx queue(s), " + std::to_string(nrx) + " needed"};
            return false;
        }
        if (ntx > i.max_tx_queues) {
            e = {2, "--tx-lcores: port " + std::to_string(port) + " (" + i.driver_name + ") has " +
                        std::to_string(i.max_tx_queues) + " tx queue(s), " + std::to_string(ntx) + " needed"};
            return false;
        }
        if (opt_.mtu < i.min_mtu || opt_.mtu > i.max_mtu) {
            e = {2, "--mtu: " + std::to_string(opt_.mtu) + " is outside port " + std::to_string(port) + "'s [" +
                        std::to_string(i.min_mtu) + ", " + std::to_string(i.max_mtu) + "]"};
            return false;
        }
        return true;
    };
    if (same ? !queues_fit(rxi, opt_.rx_port, rx_nrxq, rx_ntxq)
             : !queues_fit(txi, opt_.tx_port, tx_nrxq, tx_nq_) || !queues_fit(rxi, opt_.rx_port, rx_nrxq, rx_ntxq))
        return false;

    // Pools: one per NUMA socket in use, every frame in one segment.
    tx_socket_ = drivers::port_socket(opt_.tx_port);
    rx_socket_ = drivers::port_socket(opt_.rx_port);
    const uint32_t room = std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM,
                                             RTE_ALIGN_CEIL(opt_.mtu + kEthLen + 4, 64));
    const uint64_t queues = same ? uint64_t(rx_nrxq) + rx_ntxq : uint64_t(tx_nrxq) + tx_nq_ + rx_nrxq + rx_ntxq;
    const uint64_t want = queues * 1024 * 2 + uint64_t(rte_lcore_count()) * 512 + 8192;
    for (int sock : {tx_socket_, rx_socket_}) {
        bool have = false;
        for (auto& p : pools_)
            have = have || p->socket() == sock;
        if (have)
            continue;
        auto pool = drivers::Mempool::create("tm_pool_s" + std::to_string(sock), round_pow2_minus1(want),
                                             room, sock, err);
        if (!pool) {
            e = {1, err + " (raise EAL -m)"};
            return false;
        }
        pools_.push_back(std::move(pool));
    }
    for (auto& p : pools_) {
        if (p->socket() == tx_socket_ && tx_pool_ == nullptr)
            tx_pool_ = p->get();
        if (p->socket() == rx_socket_ && rx_pool_ == nullptr)
            rx_pool_ = p->get();
    }
    if (tx_pool_ == nullptr)
        tx_pool_ = pools_.front()->get();
    if (rx_pool_ == nullptr)
        rx_pool_ = pools_.front()->get();

    drivers::PortSetup ps;
    ps.mtu = opt_.mtu;
    ps.rss = rss_;
    if (same) {
        ps.nb_rxq = rx_nrxq;
        ps.nb_txq = rx_ntxq;
        ps.pool = rx_pool_;
        tx_port_ = drivers::Port::open(opt_.tx_port, ps, err);
        if (!tx_port_) {
            e = {1, err};
            return false;
        }
        rx_port_ = tx_port_.get();
    } else {
        ps.nb_rxq = tx_nrxq;
        ps.nb_txq = tx_nq_;
        ps.rss = false;
        ps.pool = tx_pool_;
        tx_port_ = drivers::Port::open(opt_.tx_port, ps, err);
        if (!tx_port_) {
            e = {1, err};
            return false;
        }
        ps.nb_rxq = rx_nrxq;
        ps.nb_txq = rx_ntxq;
        ps.rss = rss_;
        ps.pool = rx_pool_;
        rx_port_owned_ = drivers::Port::open(opt_.rx_port, ps, err);
        if (!rx_port_owned_) {
            e = {1, err};
            return false;
        }
        rx_port_ = rx_port_owned_.get();
    }
    if (rss_ && !rx_port_->rss_active()) {
        e = {1, "port " + std::to_string(opt_.rx_port) +
                    ": RSS is on but its key or RETA cannot be read, so flows cannot be assigned to rx lcores; "
                    "give one rx lcore"};
        return false;
    }
    return true;
}

bool Runtime::make_flows(SetupError& e) {
    const uint32_t n = opt_.flows;
    flows_ = socket_array<FlowCtx>(n, rx_socket_);
    if (flows_ == nullptr) {
        e = {1, "out of memory (flow contexts)"};
        return false;
    }
    Addressing addr;
    addr.src_mac = opt_.src_mac_set ? opt_.src_mac : tx_port_->mac();
    if (opt_.dst_mac_set)
        addr.dst_mac = opt_.dst_mac;
    else if (opt_.mode == Mode::Loopback)
        addr.dst_mac = rx_port_->mac();
    else
        memset(&addr.dst_mac, 0xFF, sizeof(addr.dst_mac));
    addr.src_ip = opt_.src_ip;
    addr.dst_ip = opt_.dst_ip;
    addr.udp_port = opt_.udp_port;
    TM_LOG(INFO, app, "addressing: %s -> %s, UDP port %u", mac_str(addr.src_mac).c_str(),
           mac_str(addr.dst_mac).c_str(), opt_.udp_port);

    const uint32_t stride = stride_for_mtu(opt_.mtu);
    const GroupPlan plan = plan_group(opt_.msg_size, stride);
    const bool receives = opt_.mode != Mode::Send;
    // Per-packet rings: in packet mode, and in a shell run, which may switch
    // to packet mode (`set completion`).
    const bool packet_mode = opt_.completion == CompletionMode::Packet || switchable();
    const auto R = static_cast<uint32_t>(rx_lcores_.size());
    const auto T = static_cast<uint32_t>(tx_lcores_.size());

    for (uint32_t i = 0; i < n; i++) {
        FlowCtx& f = flows_[i];
        f.id = static_cast<uint16_t>(i);
        f.key = opt_.key_of(f.id);
        f.ring_size = opt_.ring_size;
        f.pkts_per_msg = plan.pkt_count;
        if (!TxFlow::make(f.tx, f.id, f.key, opt_.ring_size, opt_.mtu, addr)) {
            e = {2, "--mtu: " + std::to_string(opt_.mtu) + " leaves no room for a packet"};
            return false;
        }
        f.txq = static_cast<uint16_t>(steer_by_queue_ ? i % R : i % T);
        if (steer_by_queue_ || R == 1 || !receives) {
            f.rx_owner = static_cast<uint16_t>(steer_by_queue_ ? i % R : 0);
        } else {
            // RSS: the queue the port hashes this flow's data packets to.
            const uint32_t sip = opt_.mode == Mode::Recv ? opt_.dst_ip : opt_.src_ip;
            const uint32_t dip = opt_.mode == Mode::Recv ? opt_.src_ip : opt_.dst_ip;
            const int q = rx_port_->rss_queue_of(sip, dip, TxFlow::source_port(f.id), opt_.udp_port);
            if (q < 0 || static_cast<uint32_t>(q) >= R) {
                e = {1, "flow " + std::to_string(i) + ": RSS queue unknown"};
                return false;
            }
            f.rx_owner = static_cast<uint16_t>(q);
        }
        if (!receives)
            continue;
        auto ring = CompletionRing::create(f.id, opt_.ring_size, opt_.msg_size, rx_socket_);
        if (!ring) {
            const double mib = double(opt_.ring_size) * double(RTE_ALIGN_CEIL(opt_.msg_size ? opt_.msg_size : 1, 4096)) /
                               (1 << 20);
            e = {2, "--ring-size/--msg-size: the completion ring of flow " + std::to_string(i) + " needs " +
                        std::to_string(static_cast<uint64_t>(mib + 0.5)) + " MiB (" +
                        rte_strerror(rte_errno) + "); lower them, or raise EAL -m"};
            return false;
        }
        f.ring = ring.get();
        rings_.push_back(std::move(ring));
        if (packet_mode) {
            // Room for every packet of a full window: the placer never finds it full.
            const uint64_t cap = uint64_t(opt_.ring_size) * plan.pkt_count + kMaxBurst;
            char name[RTE_RING_NAMESIZE];
            snprintf(name, sizeof(name), "tm_cq_%u", i);
            f.pkt_cq = rte_ring_create_elem(name, sizeof(PacketCompletion), static_cast<unsigned>(cap),
                                            rx_socket_, RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
            if (f.pkt_cq == nullptr) {
                e = {2, "--completion packet: per-packet completion ring of flow " + std::to_string(i) + " (" +
                            std::to_string(cap) + " entries): " + rte_strerror(rte_errno) +
                            "; lower --ring-size, or raise EAL -m"};
                return false;
            }
            cqs_.push_back(f.pkt_cq);
        }
    }
    return true;
}

bool Runtime::make_contexts(SetupError& e) {
    const uint32_t n = opt_.flows;
    const bool receives = opt_.mode != Mode::Send;
    const auto T = static_cast<uint32_t>(tx_lcores_.size());
    auto oom = [&](const char* what) {
        e = {1, std::string("out of memory: ") + what + " (raise EAL -m)"};
        return false;
    };

    // tx: lcore t owns the tx queues q with q % T == t, and the flows sent on them.
    for (uint32_t t = 0; t < T; t++) {
        TxCtx* c = socket_new<TxCtx>(tx_socket_, tx_pool_);
        if (c == nullptr)
            return oom("tx context");
        txs_.push_back(c);
        c->lcore = tx_lcores_[t];
        c->port = tx_port_->id();
        c->marker.set_udp_checksum(opt_.udp_checksum);
        std::vector<uint16_t> qs;
        for (uint16_t q = 0; q < tx_nq_; q++)
            if (q % T == t)
                qs.push_back(q);
        c->nqueues = static_cast<uint32_t>(qs.size());
        c->queues = socket_array<TxQueueCtx>(qs.size(), tx_socket_);
        if (c->queues == nullptr)
            return oom("tx queues");
        allocs_.push_back(c->queues);
        uint32_t owned = 0;
        for (size_t k = 0; k < qs.size(); k++) {
            TxQueueCtx& q = c->queues[k];
            q.queue = qs[k];
            for (uint32_t i = 0; i < n; i++)
                q.nflows += flows_[i].txq == q.queue;
            // Retransmission requests: from the placers and rx lcores (many
            // producers) and this lcore's timers, to this lcore.
            char name[RTE_RING_NAMESIZE];
            snprintf(name, sizeof(name), "tm_nack_%u", static_cast<unsigned>(q.queue));
            q.nack_q = rte_ring_create_elem(name, sizeof(Nack), kNackQueue, tx_socket_, RING_F_SC_DEQ);
            if (q.nack_q == nullptr)
                return oom("retransmission request ring");
            cqs_.push_back(q.nack_q);
            if (opt_.mode != Mode::Recv) {
                q.scratch = static_cast<uint8_t*>(
                    rte_malloc_socket("tm_tx_retx", opt_.msg_size ? opt_.msg_size : 64, 64, tx_socket_));
                if (q.scratch == nullptr)
                    return oom("retransmission buffer (--msg-size)");
                allocs_.push_back(q.scratch);
                const uint64_t turn = std::min<uint64_t>(opt_.msg_size ? opt_.msg_size : 64, opt_.tx_quantum);
                q.turn_buf = static_cast<uint8_t*>(rte_malloc_socket("tm_tx_turn", turn, 64, tx_socket_));
                if (q.turn_buf == nullptr)
                    return oom("tx message buffer (--tx-quantum)");
                allocs_.push_back(q.turn_buf);
            }
            q.flows = socket_array<TxFlowState>(q.nflows, tx_socket_);
            if (q.flows == nullptr)
                return oom("tx flow state");
            allocs_.push_back(q.flows);
            uint32_t j = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (flows_[i].txq != q.queue)
                    continue;
                TxFlowState& s = q.flows[j++];
                s.f = &flows_[i];
                s.c = c;
                s.q = &q;
                flows_[i].nack_q = q.nack_q;
                rte_timer_init(&s.timer);
                if (opt_.mode != Mode::Recv) {
                    flows_[i].txs = &s;
                    s.out = socket_array<OutMsg>(opt_.ring_size, tx_socket_);
                    if (s.out == nullptr)
                        return oom("tx message records (--ring-size)");
                    allocs_.push_back(s.out);
                    s.buf = static_cast<uint8_t*>(
                        rte_malloc_socket("tm_tx_msg", opt_.msg_size ? opt_.msg_size : 64, 64, tx_socket_));
                    if (s.buf == nullptr)
                        return oom("tx message buffers (flows x --msg-size)");
                    allocs_.push_back(s.buf);
                    if (opt_.fixed_payload) // every message a prefix of these bytes
                        generate(flows_[i].id, 0, s.buf, opt_.msg_size);
                }
            }
            owned += q.nflows;
        }
        if (owned == 0)
            TM_LOG(WARNING, app, "tx lcore %u has no flow to send", c->lcore);
        roles_[c->lcore].tx = c;
    }

    // rx: lcore r polls rx queue r.
    for (uint32_t r = 0; r < rx_lcores_.size(); r++) {
        RxCtx* c = socket_new<RxCtx>(rx_socket_);
        if (c == nullptr)
            return oom("rx context");
        rxs_.push_back(c);
        c->lcore = rx_lcores_[r];
        c->port = rx_port_->id();
        c->queue = static_cast<uint16_t>(r);
        c->index = static_cast<uint16_t>(r);
        c->pcfg.udp_port = opt_.udp_port;
        c->pcfg.verify_udp_checksum = opt_.udp_checksum;
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
        if (receives) {
            auto* p = new (std::nothrow) RxPlacer(c->pcfg, rx_socket_);
            if (p == nullptr)
                return oom("rx placer");
            placers_.push_back(p);
            c->placer = p;
            p->set_mode(opt_.completion);
            p->set_nack_delay(tsc_hz_ * opt_.nack_delay_us / 1000000);
            uint32_t owned = 0;
            for (uint32_t i = 0; i < n; i++) {
                FlowCtx& f = flows_[i];
                if (f.rx_owner != r)
                    continue;
                if (!p->add_flow(f.id, f.ring, f.key, stride_for_mtu(opt_.mtu)))
                    return oom("rx placer flow state");
                if (f.pkt_cq)
                    p->set_packet_completion_ring(f.id, f.pkt_cq);
                p->set_nack_ring(f.id, f.nack_q);
                f.placer = p;
                owned++;
            }
            if (owned == 0)
                TM_LOG(WARNING, app, "rx lcore %u owns no flow", c->lcore);
        }
        roles_[c->lcore].rx = c;
    }

    // consumers: flow f goes to consumer f % C.
    const auto C = static_cast<uint32_t>(cons_lcores_.size());
    for (uint32_t k = 0; k < C && receives; k++) {
        ConsCtx* c = socket_new<ConsCtx>(rx_socket_);
        if (c == nullptr)
            return oom("consumer context");
        conss_.push_back(c);
        c->lcore = cons_lcores_[k];
        c->hist.clear();
        for (uint32_t i = 0; i < n; i++)
            c->nflows += i % C == k;
        c->flows = socket_array<ConsFlowState>(c->nflows, rx_socket_);
        if (c->flows == nullptr)
            return oom("consumer flow state");
        allocs_.push_back(c->flows);
        uint32_t j = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (i % C != k)
                continue;
            ConsFlowState& s = c->flows[j++];
            s.f = &flows_[i];
            if (opt_.completion == CompletionMode::Packet || switchable()) {
                s.slots = socket_array<PktSlot>(opt_.ring_size, rx_socket_);
                if (s.slots == nullptr)
                    return oom("packet mode slots");
                allocs_.push_back(s.slots);
            }
        }
        if (c->nflows == 0)
            TM_LOG(WARNING, app, "consumer lcore %u owns no flow", c->lcore);
        roles_[c->lcore].cons = c;
    }
    return true;
}

// --replay: ring_size ready-made packet groups per flow, of message 0's
// content (the CRC32C is the same for every msg_id; the consumer compares
// every byte with message 0's).
bool Runtime::make_replay(SetupError& e) {
    g_dp.replay = opt_.replay;
    if (!opt_.replay)
        return true;
    for (TxCtx* c : txs_) {
        for (uint32_t k = 0; k < c->nqueues; k++) {
            TxQueueCtx& q = c->queues[k];
            for (uint32_t j = 0; j < q.nflows; j++) {
                TxFlowState& s = q.flows[j];
                generate(s.f->id, 0, s.buf, opt_.msg_size);
                TxMessage m;
                m.bytes = {s.buf, static_cast<size_t>(opt_.msg_size)};
                c->marker.prepare(s.f->tx, m);
                const uint32_t n = m.plan.pkt_count;
                s.replay_plan = m.plan;
                s.replay = static_cast<rte_mbuf**>(
                    rte_zmalloc_socket("tm_replay", sizeof(rte_mbuf*) * n * opt_.ring_size, 64, tx_socket_));
                if (s.replay == nullptr) {
                    e = {1, "--replay: out of memory"};
                    return false;
                }
                replays_.push_back(&s);
                for (uint32_t set = 0; set < opt_.ring_size; set++)
                    for (uint32_t first = 0; first < n; first += kMaxBurst) {
                        const uint32_t cnt = n - first < kMaxBurst ? n - first : kMaxBurst;
                        if (c->marker.build(s.f->tx, m, first, cnt, s.replay + set * n + first) < 0) {
                            e = {2, "--replay: " + std::to_string(opt_.ring_size) + " x " + std::to_string(n) +
                                        " ready packets per flow do not fit the mbuf pool; lower --ring-size"};
                            return false;
                        }
                        for (uint32_t i = 0; i < cnt; i++)
                            if (s.replay[set * n + first + i]->nb_segs != 1) {
                                e = {2, "--replay: packets must be single-segment (--mtu)"};
                                return false;
                            }
                    }
            }
        }
    }
    return true;
}

bool Runtime::setup(SetupError& e) {
    tsc_hz_ = rte_get_tsc_hz();
    if (rte_timer_subsystem_init() < 0 && rte_errno != EALREADY) {
        e = {1, std::string("rte_timer_subsystem_init: ") + rte_strerror(rte_errno)};
        return false;
    }
    timers_ = true;
    if (!plan_lcores(e) || !open_ports(e) || !make_flows(e) || !make_contexts(e) || !make_replay(e))
        return false;
    seen_released_.assign(opt_.flows, 0);
    failed_logged_.assign(opt_.flows, false);
    moved_tsc_.assign(opt_.flows, 0);
    stalled_.reset(new std::atomic<bool>[opt_.flows]);
    for (uint32_t i = 0; i < opt_.flows; i++)
        stalled_[i].store(false, std::memory_order_relaxed);
    g_dp.mode = opt_.mode;
    g_dp.completion = opt_.completion;
    g_dp.msg_size = opt_.msg_size;
    g_dp.sizes = opt_.msg_sizes.empty() ? nullptr : opt_.msg_sizes.data();
    g_dp.nsizes = static_cast<uint32_t>(opt_.msg_sizes.size());
    g_dp.messages = opt_.messages;
    g_dp.ring_size = opt_.ring_size;
    g_dp.burst = opt_.burst;
    g_dp.tx_quantum = opt_.tx_quantum;
    g_dp.flow_control = opt_.flow_control;
    g_dp.flows = flows_;
    g_dp.nflows = opt_.flows;
    g_dp.stall_cycles = tsc_hz_ * kTxStallUs / 1000000;
    g_dp.ack_min_cycles = tsc_hz_ * kAckMinUs / 1000000;
    g_dp.ack_keepalive_cycles = tsc_hz_ * kAckKeepaliveUs / 1000000;
    g_dp.ack_batch = opt_.ring_size >= 4 ? opt_.ring_size / 4 : 1;
    g_dp.epoch = static_cast<uint32_t>(rte_rand()) | 1u; // never 0
    g_dp.rto_cycles = tsc_hz_ * opt_.rto_us / 1000000;
    g_dp.rto_max_cycles = tsc_hz_ * opt_.rto_max_us / 1000000;
    g_dp.retry_limit = opt_.retry_limit;
    g_dp.verify = opt_.verify;
    g_dp.fixed_payload = opt_.fixed_payload;
    g_dp.pace_cycles = opt_.rate > 0 ? static_cast<uint64_t>(double(tsc_hz_) * opt_.flows / opt_.rate) : 0;

    std::string lc;
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        if (!roles_[l].any())
            continue;
        lc += ' ';
        lc += std::to_string(l);
        lc += roles_[l].tx ? ":tx" : ":";
        lc += roles_[l].rx ? "+rx" : "";
        lc += roles_[l].cons ? "+consumer" : "";
    }
    TM_LOG(INFO, app,
           "mode %s, %u flows x %" PRIu64 " messages of %" PRIu64 " B (%u packets each), ring %u, MTU %u, "
           "completion %s, steering %s; lcores%s",
           to_string(opt_.mode), opt_.flows, opt_.messages, opt_.msg_size, flows_[0].pkts_per_msg,
           opt_.ring_size, opt_.mtu, to_string(opt_.completion),
           steer_by_queue_ ? "by queue (net_ring)" : rss_ ? "RSS" : "single rx queue", lc.c_str());
    return true;
}

// --- run and control ----------------------------------------------------------

void Runtime::run() {
    const unsigned main_lcore = rte_get_main_lcore();
    start_tsc_ = rte_rdtsc();
    deadline_tsc_ = opt_.duration > 0 ? start_tsc_ + static_cast<uint64_t>(opt_.duration * double(tsc_hz_)) : 0;
    last_stats_tsc_ = start_tsc_;
    const uint64_t period = static_cast<uint64_t>(stats_period_.load() * double(tsc_hz_)); // the shell may change it
    next_stats_ = period ? start_tsc_ + period : 0;
    launched_ = true;
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        if (l == main_lcore || !roles_[l].any())
            continue;
        int rc = rte_eal_remote_launch(lcore_main, &roles_[l], l);
        if (rc != 0) {
            TM_LOG(ERR, app, "lcore %u: launch failed (%d)", l, rc);
            g_phase.store(static_cast<int>(Phase::Stop));
            exit_reason_ = "launch_failed";
        }
    }
    const LcoreRoles& mine = roles_[main_lcore];
    const uint64_t ctrl = tsc_hz_ * kControlUs / 1000000;
    uint64_t next_ctrl = 0;
    LcoreCycles& cy = g_lcore_cycles[main_lcore];
    uint64_t prev = rte_rdtsc();
    while (phase() != Phase::Stop) {
        if (mine.any()) {
            run_roles_timed(mine, cy, prev);
        } else {
            rte_delay_us_sleep(kControlUs);
        }
        const uint64_t now = rte_rdtsc();
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
    g_phase.store(static_cast<int>(Phase::Drain), std::memory_order_relaxed);
}

void Runtime::stop(uint64_t now, const char* reason) {
    if (exit_reason_.empty())
        exit_reason_ = reason;
    if (end_tsc_ == 0)
        end_tsc_ = now;
    g_phase.store(static_cast<int>(Phase::Stop), std::memory_order_relaxed);
}

bool Runtime::done() const {
    if (opt_.messages == 0)
        return false;
    const uint32_t m = static_cast<uint32_t>(opt_.messages);
    for (uint32_t i = 0; i < opt_.flows; i++) {
        const FlowCtx& f = flows_[i];
        if (failed(f))
            continue; // given up: reported, nothing more to wait for
        switch (opt_.mode) {
        case Mode::Loopback: // plus the messages the shell's `send` asked for (--cmdline-file)
            if (f.consumed.load(std::memory_order_acquire) !=
                m + static_cast<uint32_t>(f.sends_requested.load(std::memory_order_acquire)))
                return false;
            break;
        case Mode::Recv:
            if (f.consumed.load(std::memory_order_acquire) != m ||
                f.final_acks.load(std::memory_order_relaxed) < kFinalAcks)
                return false;
            break;
        case Mode::Send:
            if (f.sent.load(std::memory_order_acquire) != m)
                return false;
            if (opt_.flow_control && f.credit.load(std::memory_order_acquire) != m)
                return false;
            break;
        }
    }
    for (const TxCtx* t : txs_)
        if (__atomic_load_n(&t->busy, __ATOMIC_RELAXED) != 0)
            return false;
    return true;
}

bool Runtime::drained() const {
    for (const TxCtx* t : txs_)
        if (__atomic_load_n(&t->busy, __ATOMIC_RELAXED) != 0)
            return false;
    for (uint32_t i = 0; i < opt_.flows; i++) {
        const FlowCtx& f = flows_[i];
        if (failed(f))
            continue;
        const uint32_t sent = f.sent.load(std::memory_order_acquire);
        if (opt_.mode == Mode::Loopback && f.consumed.load(std::memory_order_acquire) != sent)
            return false;
        if (opt_.mode == Mode::Send && opt_.flow_control && f.credit.load(std::memory_order_acquire) != sent)
            return false;
    }
    return true;
}

void Runtime::control(uint64_t now) {
    const int q = g_quit_requests.load(std::memory_order_acquire);
    if (q >= 2) {
        stop(now, "signal");
    } else if (q == 1 && phase() == Phase::Run) {
        const int sig = g_last_signal.load(); // 0: the shell's quit (or the end of its input)
        if (sig != 0)
            TM_LOG(NOTICE, app, "signal %d", sig);
        else
            TM_LOG(NOTICE, app, "quit (shell)");
        begin_drain(now, sig ? "signal" : "quit");
    }
    if (phase() == Phase::Run && deadline_tsc_ && now >= deadline_tsc_)
        begin_drain(now, "duration");
    if (opt_.external_consumer && opt_.mode != Mode::Send)
        watch_flows(now);
    for (uint32_t i = 0; i < opt_.flows && opt_.mode != Mode::Recv; i++) {
        const uint32_t why = flows_[i].failed.load(std::memory_order_acquire);
        if (why != 0 && !failed_logged_[i]) {
            failed_logged_[i] = true;
            const uint32_t rel = released_of(flows_[i]);
            TM_LOG(WARNING, app, "flow %u failed (%s): messages from %u on are not confirmed", i,
                   to_string(static_cast<FlowFailure>(why)), rel);
        }
    }
    if (phase() == Phase::Run && opt_.exit_when_done && !lingering_ && done()) {
        if (opt_.linger) { // final counters stay readable (telemetry) until a signal
            lingering_ = true;
            exit_reason_ = "done";
            end_tsc_ = now;
            TM_LOG(NOTICE, app, "done; --linger: waiting for a signal");
        } else {
            stop(now, "done");
        }
    }
    if (phase() == Phase::Drain) {
        if (drained())
            stop(now, exit_reason_.c_str());
        else if (now >= drain_deadline_)
            stop(drain_start_, exit_reason_.c_str()); // rates: no traffic after the drain began
    }
    // The period may change at run time (shell: `set stats-period`).
    const uint64_t period = static_cast<uint64_t>(stats_period_.load(std::memory_order_relaxed) * double(tsc_hz_));
    if (period == 0)
        next_stats_ = 0;
    else if (next_stats_ == 0 || next_stats_ > now + period)
        next_stats_ = now + period;
    if (next_stats_ && now >= next_stats_ && phase() != Phase::Stop) {
        print_stats(now);
        while (next_stats_ <= now)
            next_stats_ += period;
    }
}

// The external consumer's released cursors become the flows' consumed
// counters (done(), drained(), ACKs in recv mode read those). A flow whose
// oldest unreleased message is complete while the cursor has not moved for
// kConsumerStallUs is stalled: reported, never overwritten (the placer's
// window ends at released + ring size).
void Runtime::watch_flows(uint64_t now) {
    const uint64_t limit = tsc_hz_ * kConsumerStallUs / 1000000;
    uint32_t n = 0;
    for (uint32_t i = 0; i < opt_.flows; i++) {
        FlowCtx& f = flows_[i];
        if (f.ring == nullptr)
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
                TM_LOG(WARNING, app, "flow %u stalled: message %u is complete, the consumer released nothing for %" PRIu64
                       " ms", i, rel, kConsumerStallUs / 1000);
            else
                TM_LOG(NOTICE, app, "flow %u resumed at message %u", i, rel);
        }
        n += st;
    }
    nstalled_.store(n, std::memory_order_relaxed);
}

Runtime::Totals Runtime::totals() const {
    Totals t;
    for (const TxCtx* c : txs_) {
        t.sent += peek(c->msgs_sent);
        t.pkts_tx += peek(c->pkts_tx);
        t.tx_dropped += peek(c->tx_dropped);
        t.retx += peek(c->retx_pkts);
        if (opt_.mode == Mode::Send)
            t.bytes += peek(c->bytes_tx);
    }
    for (const RxCtx* c : rxs_) {
        t.pkts_rx += peek(c->pkts_rx);
        for (uint64_t d : c->drops)
            t.drops += peek(d);
        if (c->placer) {
            const RxCounters& rc = c->placer->counters();
            for (const uint64_t& d : rc.drops)
                t.drops += peek(d);
            // One of the two is 0 unless the shell switched modes mid-run.
            t.completion_writes += peek(rc.packet_completions) + peek(rc.completions);
        }
    }
    for (const ConsCtx* c : conss_) {
        t.completed += peek(c->completed);
        t.verified += peek(c->verified);
        t.verify_errors += peek(c->verify_errors);
        t.bytes += peek(c->bytes);
    }
    if (opt_.mode == Mode::Send && opt_.flow_control)
        for (uint32_t i = 0; i < opt_.flows; i++)
            t.acked += flows_[i].credit.load(std::memory_order_relaxed);
    if (opt_.mode == Mode::Send)
        t.completed = t.acked;
    else if (opt_.external_consumer) // released by the consumer process (which verifies)
        for (uint32_t i = 0; i < opt_.flows; i++)
            t.completed += flows_[i].ring ? flows_[i].ring->released() : 0;
    if (opt_.external_consumer && opt_.mode != Mode::Send)
        t.bytes = t.completed * opt_.msg_size; // every message is msg_size (the consumer checks it)
    return t;
}

void Runtime::print_stats(uint64_t now) {
    const Totals t = totals();
    const double dt = double(now - last_stats_tsc_) / double(tsc_hz_);
    const double el = double(now - start_tsc_) / double(tsc_hz_);
    const uint64_t dmsg = (opt_.mode == Mode::Send ? t.sent - last_stats_.sent : t.completed - last_stats_.completed);
    const uint64_t dpkt = opt_.mode == Mode::Recv ? t.pkts_rx - last_stats_.pkts_rx : t.pkts_tx - last_stats_.pkts_tx;
    const double gbps = double(t.bytes - last_stats_.bytes) * 8 / dt / 1e9;
    printf("stats t=%.2f sent=%" PRIu64 " completed=%" PRIu64 " verified=%" PRIu64 " verify_errors=%" PRIu64
           " msgs_per_s=%.0f gbps=%.3f mpps=%.3f packets_tx=%" PRIu64 " packets_rx=%" PRIu64 " drops=%" PRIu64
           " tx_dropped=%" PRIu64,
           el, t.sent, t.completed, t.verified, t.verify_errors, double(dmsg) / dt, gbps,
           double(dpkt) / dt / 1e6, t.pkts_tx, t.pkts_rx, t.drops, t.tx_dropped);
    // Appended to the same line: in flight, retransmitted packets, stalled
    // flows, percent done.
    const uint64_t base = opt_.mode == Mode::Recv ? t.completion_writes : t.sent;
    const uint64_t in_flight = base > t.completed ? base - t.completed : 0;
    printf(" in_flight=%" PRIu64 " retransmits=%" PRIu64 " stalled=%u", in_flight, t.retx,
           nstalled_.load(std::memory_order_relaxed));
    if (opt_.exit_when_done && opt_.messages != 0)
        printf(" done_pct=%.1f", 100.0 * double(t.completed) / double(opt_.messages * opt_.flows));
    printf("\n");
    fflush(stdout);
    last_stats_ = t;
    last_stats_tsc_ = now;
}

// --- results ----------------------------------------------------------------

Results Runtime::results() const {
    Results r;
    const Totals t = totals();
    r.mode = opt_.mode;
    r.completion = completion();
    r.flows = opt_.flows;
    r.msg_size = opt_.msg_size;
    r.messages_per_flow = opt_.messages;
    r.messages_sent = t.sent;
    r.messages_completed = t.completed;
    r.messages_acked = t.acked;
    r.messages_verified = t.verified;
    r.verify_errors = t.verify_errors;
    r.completion_writes = t.completion_writes;
    r.packets_tx = t.pkts_tx;
    r.packets_rx = t.pkts_rx;
    r.bytes_payload = t.bytes;
    r.tx_dropped = t.tx_dropped;
    r.fault_shim = !shims_.empty();
    r.fault = fault_counters();
    for (const TxCtx* c : txs_) {
        r.acks_tx += c->acks_tx;
        r.tx_alloc_fail += c->alloc_fail;
        r.rel.retx_pkts += c->retx_pkts;
        r.rel.retx_reqs += c->retx_reqs;
        r.rel.probes += c->probes;
        r.rel.rto_expired += c->rto_expired;
        r.rel.stale_reqs += c->stale_reqs;
        r.rel.nacks_tx += c->nacks_tx;
    }
    LatencyHist* h = static_cast<LatencyHist*>(rte_zmalloc("tm_hist", sizeof(LatencyHist), 64));
    for (const RxCtx* c : rxs_) {
        r.acks_rx += c->acks_rx;
        r.rel.nacks_rx += c->nacks_rx;
        for (size_t i = 0; i < kDropReasonCount; i++)
            r.drops[i] += c->drops[i];
        if (c->placer) {
            const RxCounters& rc = c->placer->counters();
            r.packets_placed += rc.placed;
            r.rel.retx_rx += rc.retx;
            r.rel.nack_reqs += rc.nacks;
            for (size_t i = 0; i < kDropReasonCount; i++)
                r.drops[i] += rc.drops[i];
        }
    }
    for (uint64_t d : r.drops)
        r.drops_total += d;
    uint64_t cy_tx = 0, cy_rx = 0, cy_cons = 0;
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        cy_tx += peek(g_lcore_cycles[l].tx);
        cy_rx += peek(g_lcore_cycles[l].rx);
        cy_cons += peek(g_lcore_cycles[l].cons);
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
    if (h) {
        for (const ConsCtx* c : conss_)
            h->merge(c->hist);
        const double ns = 1e9 / double(tsc_hz_);
        r.latency_samples = h->samples();
        r.lat_p50_ns = double(h->quantile(0.50)) * ns;
        r.lat_p99_ns = double(h->quantile(0.99)) * ns;
        r.lat_p999_ns = double(h->quantile(0.999)) * ns;
        r.lat_max_ns = double(h->max()) * ns;
        rte_free(h);
    }
    const uint64_t end = end_tsc_ ? end_tsc_ : rte_rdtsc();
    r.elapsed_s = start_tsc_ ? double(end - start_tsc_) / double(tsc_hz_) : 0;
    if (r.elapsed_s > 0) {
        r.msgs_per_s = double(opt_.mode == Mode::Send ? r.messages_sent : r.messages_completed) / r.elapsed_s;
        r.mpps = double(opt_.mode == Mode::Recv ? r.packets_rx : r.packets_tx) / r.elapsed_s / 1e6;
        r.gbps = double(r.bytes_payload) * 8 / r.elapsed_s / 1e9;
    }
    r.exit_reason = exit_reason_.empty() ? "stopped" : exit_reason_;

    uint64_t per_flow_total = opt_.messages * opt_.flows;
    for (uint32_t i = 0; flows_ && i < opt_.flows; i++) // the shell's `send`s (--cmdline-file)
        per_flow_total += flows_[i].sends_requested.load(std::memory_order_relaxed);
    for (uint32_t i = 0; flows_ && i < opt_.flows; i++) {
        const FlowCtx& f = flows_[i];
        Results::Flow x;
        const uint64_t quota = opt_.messages + f.sends_requested.load(std::memory_order_relaxed);
        x.sent = f.sent.load(std::memory_order_acquire);
        if (opt_.mode == Mode::Send) {
            x.acked = f.acked.load(std::memory_order_acquire);
            x.released = f.credit.load(std::memory_order_acquire);
        } else {
            x.acked = f.placer ? f.placer->acked_upto(f.id) : 0;
            x.released = f.ring ? f.ring->released() : 0;
        }
        const auto why = static_cast<FlowFailure>(f.failed.load(std::memory_order_acquire));
        if (why != FlowFailure::None) {
            x.state = to_string(why);
            x.failed = quota > x.released ? quota - x.released : 0;
            r.flows_failed++;
            r.messages_failed += x.failed;
        }
        r.per_flow.push_back(x);
    }
    switch (opt_.mode) {
    case Mode::Loopback: // -i: the shell's `send` adds messages; every message sent is requested
        r.requested = opt_.messages && !opt_.interactive ? per_flow_total : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.messages_completed == r.requested &&
               (opt_.external_consumer || !opt_.verify || r.messages_verified == r.requested) &&
               r.verify_errors == 0;
        break;
    case Mode::Recv:
        r.requested = per_flow_total;
        r.ok = r.verify_errors == 0 && (opt_.messages == 0 || (r.messages_completed == r.requested &&
                                                                (opt_.external_consumer || !opt_.verify ||
                                                                 r.messages_verified == r.requested)));
        break;
    case Mode::Send:
        r.requested = opt_.messages && !opt_.interactive ? per_flow_total : r.messages_sent;
        r.ok = r.messages_sent == r.requested && r.tx_dropped == 0 && r.flows_failed == 0 &&
               (!opt_.flow_control || r.messages_acked == r.requested);
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
    for (RxPlacer* p : placers_)
        p->set_mode(m);
    __atomic_store_n(reinterpret_cast<uint8_t*>(&g_dp.completion), static_cast<uint8_t>(m), __ATOMIC_RELAXED);
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
    }
    return t;
}

// --- teardown ---------------------------------------------------------------

void Runtime::teardown() {
    // 1. lcores: stopped and joined by run(); make sure of it.
    if (launched_) {
        g_phase.store(static_cast<int>(Phase::Stop));
        rte_eal_mp_wait_lcore();
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
    rx_port_owned_.reset();
    tx_port_.reset();
    rx_port_ = nullptr;
    // 3. what the data plane used: replay packets, timers, placers, rings, memzones, contexts.
    for (TxFlowState* s : replays_) {
        for (uint32_t i = 0; s->replay && i < s->replay_plan.pkt_count * opt_.ring_size; i++)
            if (s->replay[i] != nullptr)
                rte_pktmbuf_free(s->replay[i]);
        rte_free(s->replay);
        s->replay = nullptr;
    }
    replays_.clear();
    for (TxCtx* c : txs_)
        for (uint32_t k = 0; k < c->nqueues; k++)
            for (uint32_t j = 0; j < c->queues[k].nflows; j++)
                rte_timer_stop(&c->queues[k].flows[j].timer); // lcores joined: none runs
    if (timers_) {
        rte_timer_subsystem_finalize();
        timers_ = false;
    }
    for (RxPlacer* p : placers_)
        delete p;
    placers_.clear();
    for (rte_ring* r : cqs_)
        rte_ring_free(r);
    cqs_.clear();
    rings_.clear(); // CompletionRing frees its memzone
    for (TxCtx* c : txs_)
        socket_delete(c);
    txs_.clear();
    for (RxCtx* c : rxs_)
        socket_delete(c);
    rxs_.clear();
    for (ConsCtx* c : conss_)
        socket_delete(c);
    conss_.clear();
    for (void* p : allocs_)
        rte_free(p);
    allocs_.clear();
    if (flows_) {
        for (uint32_t i = 0; i < opt_.flows; i++)
            flows_[i].~FlowCtx();
        rte_free(flows_);
        flows_ = nullptr;
    }
    // 4. pools last: the closed ports returned their mbufs.
    pools_.clear();
    tx_pool_ = rx_pool_ = nullptr;
}

} // namespace tailmark::app

namespace tailmark::app {

const char* to_string(FlowFailure f) {
    switch (f) {
    case FlowFailure::None:
        return "none";
    case FlowFailure::RetryLimit:
        return "retry_limit";
    case FlowFailure::ReceiverRestarted:
        return "receiver_restarted";
    }
    return "?";
}

} // namespace tailmark::app
