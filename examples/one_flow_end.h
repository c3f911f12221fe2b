// One end of a session of one flow on an engine::Node, as
// examples/engine_session.cc runs it and tests/engine/test_engine_node.cc
// too: a port the application opened, handed to the node; the session
// table and the sessions' flows wired by it; the connector's send flow
// opened once the session is up; the acceptor's receive flow made and
// installed before its ACCEPT; both taken back when the session ends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mempool.h>

#include "drivers/port.h"
#include "tailmark/engine/node.h"
#include "tailmark/session.h"

namespace tailmark::example {

struct OneFlowEnd {
    uint32_t ip;
    rte_ether_addr mac;
    engine::Node node;
    engine::FlowRegistry<engine::SessionFlow> reg{16};
    std::vector<std::unique_ptr<engine::SessionFlow>> made; // the flow records, ours
    engine::SessionRec* rec = nullptr;  // the session, once up (connector) or accepted
    engine::SessionFlow* flow = nullptr; // its one flow

    OneFlowEnd(uint32_t addr, rte_ether_addr m) : ip(addr), mac(m) {}
    engine::Engine& e() { return node.engine(); }
    SessionTable& table() { return node.table(); }
    engine::Sessions& flows() { return node.sessions(); }

    // Port port_id (ours: started here, with the rx TSC stamp), handed to
    // the node. False: `err` says why.
    bool adopt(uint16_t port_id, rte_mempool* pool, std::string& err) {
        drivers::PortSetup setup;
        setup.pool = pool;
        drivers::PortSet ps;
        ps.tx_port = drivers::Port::open(port_id, setup, err);
        if (ps.tx_port == nullptr)
            return false;
        ps.rx_port = ps.tx_port.get();
        ps.tx_pool = ps.rx_pool = pool;
        ps.tx_socket = ps.rx_socket = static_cast<int>(rte_socket_id());
        node.adopt_ports(std::move(ps));
        return true;
    }
    // The table and the sessions' flows, wired by the node; tc brings the
    // caller's settings (data_auth, keep-alives), its addresses are ours.
    void wire(SessionTable::Config tc, uint16_t service, SessionTable::Notify notify) {
        tc.mac = tc.rx_mac = mac;
        tc.self = {ip, service};
        engine::SessionsConfig sc;
        sc.src_ip = ip;
        sc.mac = mac;
        sc.udp_port = service;
        sc.id_quarantine = rte_get_tsc_hz();
        node.make_sessions(tc, sc, reg, std::move(notify));
    }
    // A record for a new flow, numbered in the registry (null: full).
    engine::SessionFlow* new_flow(uint64_t now) {
        made.push_back(std::make_unique<engine::SessionFlow>());
        return flows().add_flow(made.back().get(), now) ? made.back().get() : nullptr;
    }
    // The connector's session is up: its record and its one send flow, to
    // the peer's flow (report: each message's outcome to the tx role's
    // sink). False: no record, or the flow could not be opened.
    bool open_send(Session& s, bool report, uint64_t now) {
        auto r = std::make_unique<engine::SessionRec>();
        r->take(s, true);
        engine::SessionFlow* f = new_flow(now);
        if (f == nullptr)
            return false;
        f->session = f->send_session = r.get();
        r->flows.push_back(f);
        engine::Sessions::SendOpen o;
        o.ring_size = s.params.ring_size;
        o.report = report;
        if (!flows().open_send(*f, *r, s, 0, flows().send_queue_for(s, 0), o))
            return false;
        flows().publish();
        flow = f;
        rec = &flows().add_session(std::move(r));
        return true;
    }
    // The acceptor's answer to a proposal that `fits` (the caller's test,
    // besides one flow and room for it): the session as proposed, its
    // receive flow made and installed before the ACCEPT, which
    // engine::Sessions sends once it is in. Refused otherwise (err: why,
    // when the flow could not be made).
    AcceptDecision accept(Session& s, const FlowParams& p, bool fits, uint64_t now, std::string& err) {
        AcceptDecision d;
        const int base = rec == nullptr ? flows().recv_ids().alloc(1, now) : -1;
        if (p.nflows != 1 || !fits || base < 0) {
            d.reason = RefuseReason::Flows;
            return d;
        }
        d.agreed = p;
        d.local_base = static_cast<uint16_t>(base);
        d.defer = true; // ACCEPT once the flow is in place
        s.params = d.agreed;
        s.local_base = d.local_base;
        auto r = std::make_unique<engine::SessionRec>();
        r->take(s, false);
        engine::SessionFlow* f = new_flow(now);
        if (f != nullptr) {
            f->session = f->recv_session = r.get();
            r->flows.push_back(f);
        }
        if (f == nullptr || !flows().make_recv(*f, *r, s, d.local_base, 0, err)) {
            d = AcceptDecision{};
            d.reason = RefuseReason::NoRoom;
            return d;
        }
        flows().post_recv(*f, *r);
        flows().publish();
        flow = f;
        rec = &flows().add_session(std::move(r));
        return d;
    }
    // The session ended (either end's CLOSE): its flows taken back.
    void ended(Session& s, uint64_t now) {
        if (engine::SessionRec* a = flows().session(s.id); a != nullptr) {
            a->end = s.end;
            flows().detach(*a, now);
        }
    }
    // The node's order: the lcores joined, the port closed, the engine (its
    // deferred frees reach the flows' ids), the sessions' records and the
    // table; then our flow records.
    void close() {
        node.stop();
        node.close_ports();
        node.free_engine();
        node.free_sessions();
        made.clear();
    }
};

} // namespace tailmark::example
