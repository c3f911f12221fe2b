// The engines, made once at set-up: a Sender per tx queue, a Receiver per
// rx queue, the lcores' contexts and rings, the session table; the
// benchmark's consumers (bench/bench_consumers.cc).
#include "runtime.h"

#include <algorithm>

#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_ring_elem.h>

#include "bench/bench.h"
#include "service/service.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

// An allocation failed: exit code 1, and what to do about it.
bool oom(SetupError& e, const std::string& what) {
    e = {1, "out of memory: " + what + " (raise EAL -m)"};
    return false;
}

} // namespace

// The daemon's context of lcore l: its roles, and the engine's request
// rings of that lcore (every lcore with a role has them).
LcoreCtx* Runtime::lcore_ctx(unsigned l) {
    if (lcores_[l] == nullptr) {
        const engine::Lcore* el = eng().lcore(l);
        if (el == nullptr)
            return nullptr;
        LcoreCtx* c = socket_new<LcoreCtx>(static_cast<int>(rte_lcore_to_socket_id(l)));
        if (c == nullptr)
            return nullptr;
        c->plane = &plane_;
        c->lcore = l;
        c->idle_sleep_us = ecfg_.idle_sleep_us;
        c->idle_after = el->idle_after;
        c->idle_spin = el->idle_spin;
        c->req = el->req;
        c->resp = el->resp;
        lcores_[l] = c;
    }
    return lcores_[l];
}

// The engines: the engine (lib/tailmark-engine) makes a Sender per tx queue
// (and per in-memory loopback queue), a Receiver per rx queue, the request
// rings, the ACK routes and the moves between rx lcores; the daemon brings
// its tx roles (TxCtx) and its consumers. No flow yet: sessions bring them.
bool Runtime::make_engines(SetupError& e) {
    mac_ = opt_.src_mac_set ? opt_.src_mac : ports().tx_port->mac();
    ecfg_.cc.max_mbps = cc_max_mbps(); // --cc-max-mbps, else the port's link speed
    if (!make_senders(e) || (bench_ && !bench_->make_gen_bufs(e)) || !make_receivers(e) ||
        (bench_ && !bench_->make_consumers(cons_lcores_, e)))
        return false;
    // The main lcore runs the control loop, and its roles if it has any.
    if (lcore_ctx(rte_get_main_lcore()) == nullptr)
        return oom(e, "request rings");
    make_session_table();
    return true;
}

// tx: the daemon's tx roles, lcore t owning the tx queues q with
// q % T == t; the engine, which gives them a Sender each (then the
// in-memory loopback's); the Senders' message sources.
bool Runtime::make_senders(SetupError& e) {
    const auto T = static_cast<uint32_t>(tx_lcores_.size());
    engine::EngineHost h;
    for (uint32_t t = 0; t < T; t++) {
        TxCtx* c = socket_new<TxCtx>(tx_socket());
        if (c == nullptr)
            return oom(e, "tx context");
        txs_.push_back(c);
        h.tx_roles.push_back(c);
        c->plane = &plane_;
        c->hist.clear();
        if (opt_.mode == Mode::Service)
            c->set_sink(svc_complete_burst, c); // into the applications' completion rings
        else
            bench_->attach_tx(*c);
    }
    h.tx_lcores = tx_lcores_;
    h.rx_lcores = rx_lcores_;
    h.app_lcores = cons_lcores_;
    h.tsc_hz = tsc_hz_;
    h.plane = &plane_;
    engine::NodeError ne; // the port side of h is the node's
    if (!node_.make_engine(ecfg_, h, ne)) {
        e = {ne.exit_code, ne.message};
        return false;
    }
    const auto& ss = eng().senders();
    const uint32_t port_senders = eng().port_senders();
    for (uint32_t q = 0; q < ss.size(); q++) {
        TxCtx* c = txs_[q % T];
        Sender* s = ss[q];
        if (opt_.mode == Mode::Service || q >= port_senders)
            s->set_source(svc_source, static_cast<engine::Switches*>(&plane_)); // the applications' submissions
        else
            bench_->attach_sender(q, *s, *c);
    }
    for (TxCtx* c : txs_) {
        LcoreCtx* l = lcore_ctx(c->lcore);
        if (l == nullptr)
            return oom(e, "request rings");
        l->tx = c;
    }
    return true;
}

// rx: the engine's Receiver per rx lcore (and with hand-off the moves
// between them); the fault shims in front of their queues.
bool Runtime::make_receivers(SetupError& e) {
    engine::NodeError ne;
    if ((opt_.fault_set || opt_.interactive) && !node_.attach_faults(opt_.fault, ne)) {
        e = {ne.exit_code, ne.message};
        return false;
    }
    for (RxCtx* c : eng().rx_ctxs()) {
        LcoreCtx* l = lcore_ctx(c->lcore);
        if (l == nullptr)
            return oom(e, "request rings");
        l->rx = c;
    }
    return true;
}

// The session table: this end's addresses and timers, the data versions
// it serves, and where its packets go.
void Runtime::make_session_table() {
    SessionTable::Config tc;
    tc.mac = mac_;
    tc.rx_mac = opt_.mode == Mode::Loopback && !opt_.dst_mac_set ? rx_mac() : mac_;
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
    for (size_t i = 0; i < opt_.rails.size(); i++)
        tc.rails[i].ip = opt_.rails[i].ip; // their MACs: the rail ports' (the node's)
    if (tc.min_version == kVersion && opt_.mode != Mode::Loopback)
        TM_LOG(NOTICE, app, "data version 1 sessions are served (%s): their data packets carry no tag, so any "
               "host that reaches this port can place bytes in them", opt_.insecure ? "--insecure" : "--data-version 1");
    // The sessions' flows on the engine: their specs from this end's
    // addresses, a per-packet ring with each receive half where packet
    // completion is or may be switched on, --replay's unacknowledged.
    engine::SessionsConfig sc;
    sc.src_ip = opt_.src_ip;
    sc.mac = mac_;
    sc.udp_port = opt_.udp_port;
    sc.paths = ecfg_.paths;
    sc.pkt_cq = opt_.completion == CompletionMode::Packet || switchable();
    sc.acknowledge = !opt_.replay;
    // A released flow id waits out the peer timeout (and a second) before
    // it names another flow: see flow_ids.h.
    sc.id_quarantine = tsc_hz_ * (opt_.peer_timeout_ms + 1000) / 1000;
    // The node wires them: the table sends through the engine (with the
    // in-memory loopback, a packet to this daemon's own address straight
    // back to the control loop) and takes its control frames; the lcores'
    // answers go to the sessions' flows.
    node_.make_sessions(tc, sc, reg_, [this](Session& s) { on_session(s); }, hooks());
}

} // namespace tailmark::app
