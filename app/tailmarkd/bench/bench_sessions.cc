// The benchmark's sessions (bench.h): the proposal, the connector's
// session and the listener's decision, and what each session's news means
// to the run (its flows installed, its end, a connector that never came up).
#include "bench/bench.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <rte_cycles.h>
#include <rte_random.h>

#include "run/runtime.h"
#include "tailmark/log.h"

namespace tailmark::app {

// The generator's and the consumers' settings, which every lcore reads
// (the Plane's cfg: --mode service has no generator and leaves them unset).
Bench::Bench(Runtime& rt) : rt_(rt), opt_(rt.options()) {
    const uint64_t hz = rt.tsc_hz();
    DataPlaneConfig& dp = rt.plane().cfg;
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
    dp.pace_cycles = opt_.rate > 0 ? static_cast<uint64_t>(double(hz) * opt_.flows / opt_.rate) : 0;
    dp.late_cycles = hz / 1000000;
}

Bench::~Bench() {
    for (rte_mbuf** pkts : replay_pkts_) // the packets are their pool's, freed with it below
        rte_free(pkts);
    for (void* p : allocs_)
        rte_free(p);
    replay_pools_.clear();
    for (ConsCtx* c : conss_) // the lcores that ran them are gone
        socket_delete(c);
}

// What the connector proposes, and the listener agrees to: the run's settings.
FlowParams Bench::proposal() const {
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

void Bench::start(uint64_t now) {
    if (!opt_.flow_control)
        return;
    const uint16_t service = opt_.service;
    if (opt_.mode != Mode::Send)
        rt_.sessions().listen(service, rt_.secret(), [this](Session& s, const FlowParams& p) { return decide(s, p); });
    if (opt_.mode == Mode::Recv)
        return;
    const int base = rt_.flows().send_ids().alloc(opt_.flows, now);
    const Endpoint peer = opt_.mode == Mode::Loopback ? Endpoint{opt_.src_ip, opt_.udp_port}
                                                      : Endpoint{opt_.dst_ip, opt_.udp_port};
    Session* s = base < 0 ? nullptr
                          : rt_.sessions().connect(peer, service, rt_.secret(), proposal(), static_cast<uint16_t>(base),
                                               opt_.dst_mac_set ? &opt_.dst_mac : nullptr, now);
    if (s == nullptr) {
        TM_LOG(ERR, app, "cannot start a session (no flow ids or session slots)");
        rt_.stop_run(now, "session_failed");
        return;
    }
    TM_LOG(INFO, app, "connecting to %s (service %u)%s", to_string(peer).c_str(), service,
           s->state == SessionState::Resolving ? ", resolving its MAC by ARP" : "");
}

// A listener's decision on a CONNECT: this process's configuration is the
// contract (the generator's messages and the verification depend on it), so
// a sender configured otherwise is refused, the setting named.
AcceptDecision Bench::decide(Session& s, const FlowParams& p) {
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
    if (p.nflows > rt_.recv_room()) // some would be refused by a full Receiver: their data dropped
        return refuse(RefuseReason::NoRoom, rt_.recv_room(), p.nflows);
    const int base = rt_.flows().recv_ids().alloc(p.nflows, rte_rdtsc());
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
            f = &rt_.flow_at(i);
        } else {
            f = socket_new<FlowCtx>(rt_.rx_socket());
            if (f == nullptr || !rt_.flows().add_flow(f, rte_rdtsc())) {
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
        ok = rt_.flows().make_recv(*f, *a, s, static_cast<uint16_t>(base + i), i, err);
    }
    if (!ok) { // undo: nothing reached an lcore
        for (FlowCtx* f : a->ctxs()) {
            rt_.flows().free_recv(*f);
            if (opt_.mode != Mode::Loopback) // loopback's flows are its own, made once
                rt_.flows().abandon(*f);
        }
        rt_.flows().publish();
        rt_.flows().recv_ids().unuse(static_cast<uint32_t>(base), p.nflows); // refused: no packet carried them
        TM_LOG(ERR, app, "session from %s: %s", to_string(s.peer).c_str(), err.empty() ? "out of memory" : err.c_str());
        d = AcceptDecision{};
        d.reason = RefuseReason::NoRoom;
        return d;
    }
    for (FlowCtx* f : a->ctxs())
        rt_.flows().post_recv(*f, *a);
    rt_.flows().publish();
    TM_LOG(INFO, app, "session %u from %s (service %u): %u flows, ids %u..%u, MTU %u, data v%u%s%s", s.id,
           to_string(s.peer).c_str(), s.service, p.nflows, base, base + p.nflows - 1, mtu, unsigned(s.params.version),
           s.params.data_auth ? " with --data-auth" : "", s.local_peer ? " (this process: cursors in memory)" : "");
    rt_.flows().add_session(std::move(a));
    return d;
}

// The session table's news: a session is up (the connector's flows go in;
// the listener's were in before its ACCEPT), or it ended (its flows are
// taken back). Never forget() here: the table is still using the session.
void Bench::on_session(Session& s, uint64_t now) {
    AppSession* a = rt_.app_session(s.id);
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
        a = &app_of(rt_.flows().add_session(AppSession::of(s, true)));
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
        if (s.connector) // never came up: the run ends
            say_why(s, now);
        return; // refused, or never installed
    }
    a->end = s.end;
    a->down_tsc = now;
    if (s.end == SessionEnd::PeerClosed || s.end == SessionEnd::Closed || s.end == SessionEnd::Replaced)
        TM_LOG(INFO, app, "session %u %s %s ended: %s", s.id, s.connector ? "to" : "from", to_string(s.peer).c_str(),
               to_string(s.end));
    else
        TM_LOG(WARNING, app, "session %u %s %s ended: %s", s.id, s.connector ? "to" : "from",
               to_string(s.peer).c_str(), to_string(s.end));
    rt_.flows().detach(*a, now);
}

// A connector that never came up: why, on stderr (the operator's first
// question), and the run ends.
void Bench::say_why(const Session& s, uint64_t now) {
    const char* reason = "";
    std::string why;
    const std::string peer = to_string(s.peer);
    switch (s.end) {
    case SessionEnd::Refused:
    case SessionEnd::BadAccept: {
        rt_.set_refused();
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
        reason = "refused";
        break;
    }
    case SessionEnd::NoAnswer:
        fprintf(stderr,
                "tailmarkd: no answer from %s within %" PRIu64 " ms (is a receiver listening on service %u, "
                "with the same --secret?)\n",
                peer.c_str(), opt_.connect_timeout_ms, s.service);
        reason = "no_answer";
        break;
    case SessionEnd::ArpFailed:
        if (const uint32_t hop = rt_.sessions().next_hop(s.peer.ip); hop != s.peer.ip)
            fprintf(stderr, "tailmarkd: the gateway %s (towards %s) did not answer ARP (check --gateway, or the link)\n",
                    ip_to_string(hop).c_str(), peer.c_str());
        else
            fprintf(stderr,
                    "tailmarkd: %s did not answer ARP (check the link; a peer on another subnet needs --src-ip "
                    "IP/LEN and --gateway, or --dst-mac)\n",
                    peer.c_str());
        reason = "arp_failed";
        break;
    default:
        fprintf(stderr, "tailmarkd: session to %s ended: %s\n", peer.c_str(), to_string(s.end));
        reason = to_string(s.end);
        break;
    }
    fflush(stderr);
    rt_.stop_run(now, reason);
}

} // namespace tailmark::app
