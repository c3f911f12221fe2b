// Set-up and teardown: the order the run is built in (lcores, ports,
// engines, flows) and the order it is taken apart in.
#include "runtime.h"

#include <cinttypes>
#include <cstdio>
#include <string>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_malloc.h>
#include <rte_random.h>
#include <rte_ring_elem.h>

#include "bench/bench.h"
#include "service/service.h"
#include "telemetry/stats_line.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

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
    c.idle_spin_us = static_cast<uint32_t>(o.idle_spin_us);
    c.paths = static_cast<uint32_t>(o.paths);
    return c;
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
    for (const Options::Rail& r : opt_.rails)
        n.rails.push_back(r.port);
    engine::NodeError ne;
    if (node_.open_ports(n, ne)) // kept, opened or not: teardown() closes them
        return true;
    e = {ne.exit_code, ne.message};
    return false;
}

bool Runtime::setup(SetupError& e) {
    tsc_hz_ = rte_get_tsc_hz();
    ecfg_ = engine_config(opt_);
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
    if (opt_.mode != Mode::Service) // before the engines: it gives the Senders their source
        bench_ = std::make_unique<Bench>(*this);
    if (!plan_lcores(e) || !open_ports(e) || !make_engines(e) || (bench_ && !bench_->make_flows(e)))
        return false;
    if (opt_.mode == Mode::Service) {
        service_ = std::make_unique<Service>(ServiceHost{node_, watch_, opt_, secret_, tsc_hz_});
        if (!service_->open(e))
            return false;
    }
    if (!opt_.flow_control && !bench_->make_unconnected(e))
        return false;
    stats_line_ = std::make_unique<StatsLine>(*this);
    engine::FlowWatchConfig wc;
    wc.hz = tsc_hz_;
    wc.send_side = opt_.mode != Mode::Recv;
    wc.consumer_process = opt_.external_consumer && opt_.mode != Mode::Send;
    wc.cc_max_mbps = cc_max_mbps();
    wc.cc_target_us = opt_.cc_target_us;
    watch_.configure(wc);
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
    // The service runs no generator: its flows, counts and sizes are the
    // applications', so the line names where they attach instead.
    std::string what;
    if (opt_.mode == Mode::Service) {
        what = "applications on " + opt_.control_socket + " (at most " + std::to_string(opt_.svc_max_apps) + ")";
    } else {
        char buf[160];
        snprintf(buf, sizeof buf, "%u flows x %" PRIu64 " messages of %" PRIu64 " B, ring %u", opt_.flows,
                 opt_.messages, opt_.msg_size, opt_.ring_size);
        what = buf;
    }
    TM_LOG(INFO, app, "mode %s, %s, MTU %u, completion %s, steering %s, %s; lcores%s; %s %s", to_string(opt_.mode),
           what.c_str(), opt_.mtu, to_string(opt_.completion), steering_name(),
           opt_.flow_control ? "sessions" : "no session (--flow-control off)", lc.c_str(), mac_str(mac_).c_str(),
           to_string(Endpoint{opt_.src_ip, opt_.udp_port}).c_str());
    return true;
}

// --- teardown ---------------------------------------------------------------

void Runtime::teardown() {
    // 1. lcores: stopped and joined by run(); make sure of it.
    if (launched_) {
        plane_.phase.store(static_cast<int>(Phase::Stop));
        node_.stop();
        launched_ = false;
    }
    // 2. the fault shims (lcores joined: no callback in flight), then the
    //    ports: stop and close (their own rx callbacks go with them).
    node_.close_ports();
    // 3. what the data plane used: the engine first (and every flow still
    //    installed: f->recv nulled), then the flows (the Senders' records
    //    let go of the generator's buffers), replay packets, contexts.
    node_.free_engine();
    for (engine::SessionFlow* sf : reg_) {
        FlowCtx* f = static_cast<FlowCtx*>(sf);
        f->send = nullptr; // the engine's once installed (install_send)
        flows().free_recv(*f); // its receive half, consumer and rings (the sessions came before any flow)
        rte_ring_free(f->send_q);
        f->send_q = nullptr;
        rte_free(f->sizes);
        f->sizes = nullptr;
        socket_delete(f);
    }
    reg_.clear();
    node_.free_sessions(); // the sessions' records, the session links
    // The applications' memory: the Senders and the ports let go of every
    // mbuf that referenced an arena.
    service_.reset();
    for (TxCtx* c : txs_)
        socket_delete(c);
    txs_.clear();
    for (LcoreCtx*& l : lcores_) {
        if (l == nullptr)
            continue;
        socket_delete(l); // its rings were the engine's
        l = nullptr;
    }
    bench_.reset(); // the generator's buffers and state, the replay's packets and their pools
    // 4. pools last: the closed ports returned their mbufs.
    node_.free_pools();
}

} // namespace tailmark::app
