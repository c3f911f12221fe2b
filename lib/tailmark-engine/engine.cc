// Engine: made once (Senders, Receivers, lcore contexts and their rings,
// the ACK routes), launched, stopped, and taken apart in the conventions'
// order: lcores joined first, then what they used.
#include "drivers/rx_timestamp.h"
#include "tailmark/engine/engine.h"

#include <cstdio>
#include <cstring>
#include <new>

#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_ring_elem.h>

#include "tailmark/engine/lcore_loop.h"

namespace tailmark::engine {

namespace {

constexpr unsigned kRequestRing = 4096; // requests per lcore in flight
constexpr unsigned kControlRing = 4096; // SESSION and ARP frames waiting for the control thread

// rte_eal_remote_launch's entry: the engine's loop; no application ops.
int lcore_entry(void* arg) {
    return run_lcore(*static_cast<Lcore*>(arg), [](Request& r) { r.ok = false; });
}

} // namespace

const char* to_string(FlowState s) {
    switch (s) {
    case FlowState::None: return "none";
    case FlowState::Opening: return "opening";
    case FlowState::Open: return "open";
    case FlowState::Closing: return "closing";
    case FlowState::Closed: return "closed";
    case FlowState::Refused: return "refused";
    }
    return "?";
}

Engine::Engine(const EngineConfig& cfg, const EngineHost& host)
    : cfg_(cfg), host_(host), lcores_(RTE_MAX_LCORE, nullptr) {}

std::unique_ptr<Engine> Engine::create(const EngineConfig& cfg, const EngineHost& host, EngineError& err) {
    if (host.pool == nullptr || host.tx_queues == 0 || host.tx_lcores.empty() || host.rx_lcores.empty()) {
        err = {false, "a pool, a tx queue, a tx lcore and an rx lcore are needed"};
        return nullptr;
    }
    if (host.tx_queues >= kNoSender || host.rx_lcores.size() >= RxPlacer::kNoOwner) {
        err = {false, "too many queues"};
        return nullptr;
    }
    for (unsigned l : host.tx_lcores)
        if (l >= RTE_MAX_LCORE || !rte_lcore_is_enabled(l)) {
            err = {false, "tx lcore " + std::to_string(l) + " is not enabled"};
            return nullptr;
        }
    for (unsigned l : host.rx_lcores)
        if (l >= RTE_MAX_LCORE || !rte_lcore_is_enabled(l)) {
            err = {false, "rx lcore " + std::to_string(l) + " is not enabled"};
            return nullptr;
        }
    std::unique_ptr<Engine> e(new (std::nothrow) Engine(cfg, host));
    if (e == nullptr) {
        err = {true, "engine"};
        return nullptr;
    }
    if (!e->make(err))
        return nullptr;
    return e;
}

Lcore* Engine::lcore_ctx(unsigned l) {
    if (lcores_[l] != nullptr)
        return lcores_[l];
    Lcore* c = socket_new<Lcore>(static_cast<int>(rte_lcore_to_socket_id(l)));
    if (c == nullptr)
        return nullptr;
    lcores_[l] = c;
    ctxs_.push_back(c);
    c->plane = plane_;
    c->lcore = l;
    c->idle_sleep_us = cfg_.idle_sleep_us;
    c->idle_after = tsc_hz_ / 1000;
    c->idle_spin = tsc_hz_ / 1000000 * cfg_.idle_spin_us;
    c->req = rte_ring_create_elem(name("q", l).c_str(), sizeof(Request), kRequestRing, SOCKET_ID_ANY,
                                  RING_F_SP_ENQ | RING_F_SC_DEQ);
    c->resp = rte_ring_create_elem(name("p", l).c_str(), sizeof(Request), kRequestRing, SOCKET_ID_ANY,
                                   RING_F_SP_ENQ | RING_F_SC_DEQ);
    return c->req != nullptr && c->resp != nullptr ? c : nullptr;
}

// A ring's or a Sender's or Receiver's name: DPDK's names are process-wide,
// so each carries this engine's address too (two engines in one process).
std::string Engine::name(const char* what, unsigned i) const {
    char b[RTE_RING_NAMESIZE];
    snprintf(b, sizeof(b), "tme_%s%u_%lx", what, i, reinterpret_cast<uintptr_t>(this) & 0xFFFFFF); // set-up only
    return b;
}

bool Engine::make(EngineError& err) {
    tsc_hz_ = host_.tsc_hz != 0 ? host_.tsc_hz : rte_get_tsc_hz();
    deferred_.set_delay(tsc_hz_); // what other threads may read goes a second later
    if (host_.plane != nullptr)
        plane_ = host_.plane;
    if (host_.rx_socket < 0)
        host_.rx_socket = host_.socket;
    plane_->burst.store(cfg_.burst);
    rx_tsc_field_ = drivers::rx_tsc_register(); // the rx callback's stamp (-1: none), for every role that reads it
    sender_of_ = static_cast<uint8_t*>(rte_malloc("tme_sender_of", 65536, 64));
    control_in_ = rte_ring_create(name("ctl", 0).c_str(), kControlRing, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (sender_of_ == nullptr || control_in_ == nullptr) {
        err = {true, "ACK routes, control ring"};
        return false;
    }
    memset(sender_of_, kNoSender, 65536);
    if (host_.rail_ports.size() >= kMaxRails || (!host_.rail_ports.empty() && host_.tx_port != host_.rx_port)) {
        err = {false,
               "at most " + std::to_string(kMaxRails - 1) + " rails beside the port, each sending and receiving"};
        return false;
    }
    if (!make_senders(err) || !make_receivers(err))
        return false;
    for (unsigned l : host_.app_lcores)
        if (lcore_ctx(l) == nullptr) {
            err = {true, "request rings"};
            return false;
        }
    // The main lcore's rings: tick() serves them if it holds a role.
    if (lcore_ctx(rte_get_main_lcore()) == nullptr) {
        err = {true, "request rings"};
        return false;
    }
    return true;
}

// tx: lcore t owns the tx queues q with q % T == t, one Sender each.
bool Engine::make_senders(EngineError& err) {
    const auto T = static_cast<uint32_t>(host_.tx_lcores.size());
    own_txs_ = host_.tx_roles.empty();
    if (!own_txs_ && host_.tx_roles.size() != T) {
        err = {false, "one tx role per tx lcore"};
        return false;
    }
    for (uint32_t t = 0; t < T; t++) {
        TxRole* c = own_txs_ ? socket_new<TxRole>(host_.socket) : host_.tx_roles[t];
        Lcore* l = c ? lcore_ctx(host_.tx_lcores[t]) : nullptr;
        if (c != nullptr)
            txs_.push_back(c);
        if (l == nullptr || l->tx != nullptr) {
            err = l ? EngineError{false, "tx lcore " + std::to_string(host_.tx_lcores[t]) + " given twice"}
                    : EngineError{true, "tx context"};
            return false;
        }
        c->lcore = host_.tx_lcores[t];
        l->tx = c;
    }
    for (uint16_t q = 0; q < host_.tx_queues; q++)
        if (!add_sender(*txs_[q % T], host_.tx_port, q, false, err))
            return false;
    port_senders_ = static_cast<uint32_t>(senders_.size());
    // The in-memory loopback's Senders, one per queue (rx lcore r's), dealt
    // over the tx lcores like the port's.
    for (uint16_t r = 0; host_.local_port >= 0 && r < host_.local_queues; r++)
        if (!add_sender(*txs_[r % T], static_cast<uint16_t>(host_.local_port), r, true, err))
            return false;
    return true;
}

// The rails' ports, rail 0 `first` (the port's own), into out; how many.
uint32_t Engine::rails_from(uint16_t first, uint16_t (&out)[kMaxRails]) const {
    out[0] = first;
    for (size_t i = 0; i < host_.rail_ports.size(); i++)
        out[i + 1] = host_.rail_ports[i];
    return 1 + static_cast<uint32_t>(host_.rail_ports.size());
}

// One Sender of port's queue q on role c's lcore, routed and listed; the
// in-memory loopback's (`local`) neither paces nor checksums (sender_config).
bool Engine::add_sender(TxRole& c, uint16_t port, uint16_t q, bool local, EngineError& err) {
    const std::string sname = name(local ? "l" : "s", q);
    SenderConfig sc = sender_config(cfg_, tsc_hz_, local);
    sc.port = port;
    sc.queue = q;
    sc.pool = host_.pool;
    if (!local) {
        sc.udp_checksum_offload = host_.tx_udp_checksum_offload;
        sc.arrival_field = rx_tsc_field_; // the ACKs' earliest arrival (Receiver::route)
        sc.rails = rails_from(port, sc.rail_ports);
        for (uint32_t i = 0; i < sc.rails; i++)
            rte_eth_macaddr_get(sc.rail_ports[i], &sc.rail_macs[i]);
        sc.paths = std::max(sc.paths, sc.rails); // a path per rail at least
    }
    sc.max_flows = 65536 / host_.tx_queues + 1;
    sc.name = sname.c_str();
    sc.socket = host_.socket;
    auto* s = new (std::nothrow) Sender(sc);
    if (s == nullptr || !s->ok()) {
        delete s;
        err = {true, (local ? "in-memory loopback sender " : "sender ") + std::to_string(q)};
        return false;
    }
    senders_.push_back(s);
    sender_lcore_.push_back(c.lcore);
    wire_in_.push_back(s->wire_inbox());
    local_in_.push_back(s->local_inbox());
    c.senders.push_back(s);
    return true;
}

// rx: lcore r polls rx queue r with a Receiver; with hand-off, the moves'
// tables and rings between them.
bool Engine::make_receivers(EngineError& err) {
    const auto R = static_cast<uint32_t>(host_.rx_lcores.size());
    if (std::string what; host_.handoff && !moves_.make(R, host_.rx_socket, tsc_hz_ / 200, what)) { // a look every 5 ms
        err = {true, what};
        return false;
    }
    for (uint32_t r = 0; r < R; r++) {
        RxCtx* c = socket_new<RxCtx>(host_.rx_socket);
        Lcore* l = c ? lcore_ctx(host_.rx_lcores[r]) : nullptr;
        if (c != nullptr)
            rxs_.push_back(c);
        if (l == nullptr || l->rx != nullptr) {
            err = l ? EngineError{false, "rx lcore " + std::to_string(host_.rx_lcores[r]) + " given twice"}
                    : EngineError{true, "rx context"};
            return false;
        }
        c->plane = plane_;
        c->lcore = host_.rx_lcores[r];
        c->port = host_.rx_port;
        c->queue = static_cast<uint16_t>(r);
        if (host_.local_port >= 0) {
            c->local_port = static_cast<uint16_t>(host_.local_port);
            c->local_queue = static_cast<uint16_t>(r);
        }
        c->rails = static_cast<uint8_t>(host_.rail_ports.size());
        for (uint32_t i = 0; i < c->rails; i++)
            c->rail_ports[i] = host_.rail_ports[i];
        l->rx = c;
        c->away = us_to_tsc(tsc_hz_, kAwayUs);
        c->rx_tsc_field = rx_tsc_field_;
        const std::string rname = name("r", r);
        ReceiverConfig rc = receiver_config(cfg_, tsc_hz_);
        rc.pool = host_.pool;
        rc.arrival_field = rx_tsc_field_;
        rc.routes.sender_of = sender_of_;
        rc.routes.wire_in = wire_in_.data();
        rc.routes.local_in = local_in_.data();
        rc.routes.nsenders = static_cast<uint32_t>(senders_.size());
        rc.routes.control = control_in_;
        rc.routes.ctl_out = senders_[r % port_senders_]->ctl_out(); // its ACKs and NACKs to remote peers: the port's
        rc.rails = rails_from(host_.rx_port, rc.rail_ports);
        if (host_.handoff) {
            moves_.fill(rc.routes);
            rc.routes.nreceivers = R;
            rc.routes.self = static_cast<uint8_t>(r);
        }
        rc.name = rname.c_str();
        rc.socket = host_.rx_socket;
        auto* rcv = new (std::nothrow) Receiver(rc);
        if (rcv == nullptr || !rcv->ok()) {
            delete rcv;
            err = {true, "receiver " + std::to_string(r)};
            return false;
        }
        receivers_.push_back(rcv);
        c->receiver = rcv;
    }
    held_.assign(receivers_.size(), 0);
    if (host_.handoff)
        moves_.set_receivers(receivers_, host_.rx_lcores);
    return true;
}

bool Engine::launch() {
    std::vector<void*> args(RTE_MAX_LCORE, nullptr);
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++)
        if (lcores_[l] != nullptr && lcores_[l]->any())
            args[l] = lcores_[l];
    return launch(lcore_entry, args.data());
}

bool Engine::launch(int (*entry)(void*), void* const* args) {
    if (launched_)
        return true;
    plane_->phase.store(static_cast<int>(Phase::Run));
    launched_ = true;
    app_loop_ = entry != lcore_entry;
    const unsigned main_lcore = rte_get_main_lcore();
    for (unsigned l = 0; l < RTE_MAX_LCORE; l++) {
        if (l == main_lcore || args[l] == nullptr)
            continue;
        if (rte_eal_remote_launch(entry, args[l], l) != 0) {
            stop();
            return false;
        }
        running_.push_back(l);
    }
    return true;
}

void Engine::stop() {
    plane_->phase.store(static_cast<int>(Phase::Stop));
    for (unsigned l : running_)
        rte_eal_wait_lcore(l);
    running_.clear();
    launched_ = false;
}

// Teardown: the lcores joined; what was let go; the engines (a Receiver's
// placer walks its installed flows as it goes: they must still be there);
// the flows still installed; rings, tables, contexts.
Engine::~Engine() {
    stop();
    deferred_.run_all();
    for (Sender* s : senders_)
        delete s;
    for (Receiver* r : receivers_)
        delete r;
    for (auto& [id, s] : sends_)
        Sender::free_flow(s.flow);
    for (auto& [id, r] : recvs_) { // an application's place may be gone once closed
        if (r.state != FlowState::Opening && r.state != FlowState::Open && r.state != FlowState::Closing)
            continue;
        Receiver::free_flow(r.p->recv);
        r.p->recv = nullptr;
    }
    moves_.release();
    rte_mbuf* m;
    while (control_in_ != nullptr && rte_ring_dequeue(control_in_, reinterpret_cast<void**>(&m)) == 0)
        rte_pktmbuf_free(m);
    rte_ring_free(control_in_);
    rte_free(sender_of_);
    if (own_txs_)
        for (TxRole* c : txs_)
            socket_delete(c);
    for (RxCtx* c : rxs_)
        socket_delete(c);
    for (Lcore* l : lcores_) {
        if (l == nullptr)
            continue;
        rte_ring_free(l->req);
        rte_ring_free(l->resp);
        socket_delete(l);
    }
}

std::function<bool(rte_mbuf*)> Engine::control_sender(uint32_t self_ip) const {
    rte_ring* out = senders_[0]->ctl_out();
    rte_ring* self_in = host_.local_port >= 0 ? control_in_ : nullptr;
    const rte_be32_t self = rte_cpu_to_be_32(self_ip);
    return [out, self_in, self](rte_mbuf* m) {
        rte_ring* to = out;
        if (self_in != nullptr && rte_pktmbuf_data_len(m) >= kEthLen + kIpLen &&
            rte_pktmbuf_mtod_offset(m, const rte_ipv4_hdr*, kEthLen)->dst_addr == self)
            to = self_in;
        if (rte_ring_mp_enqueue(to, m) == 0)
            return true;
        rte_pktmbuf_free(m);
        return false;
    };
}

} // namespace tailmark::engine
