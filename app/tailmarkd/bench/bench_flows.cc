// The benchmark's flows (bench.h): the ones loopback and send configure
// (numbered at set-up), the generator's send flows, --replay's ready-made
// packets, and --flow-control off's flows, made before launch.
#include "bench/bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <rte_malloc.h>

#include "bench/generator.h"
#include "bench/source.h"
#include "run/runtime.h"
#include "tailmark/engine/session_flows.h"
#include "tailmark/log.h"

namespace tailmark::app {

// The least distance, in bytes, between two consecutive ready-made groups.
constexpr uint32_t kReplayGap = 4096;

bool Bench::make_flows(SetupError& e) {
    if (opt_.mode == Mode::Recv)
        return true;
    const GroupPlan plan = plan_group(opt_.msg_size, stride_for_mtu(opt_.mtu));
    for (uint32_t i = 0; i < opt_.flows; i++) {
        FlowCtx* f = socket_new<FlowCtx>(rt_.rx_socket());
        if (f == nullptr || !rt_.flows().add_flow(f, 0)) { // slot i: nothing was given back yet
            socket_delete(f);
            e = {1, "out of memory: flow contexts"};
            return false;
        }
        f->gen_id = static_cast<uint16_t>(i);
        f->ring_size = opt_.ring_size;
        f->pkts_per_msg = plan.pkt_count;
    }
    rt_.flows().publish();
    return true;
}

// The connector's flows, once the session is up: the generator's messages
// go to the peer's flow ids (open_send).
void Bench::install_send(AppSession& a, Session& s) {
    for (uint16_t i = 0; i < s.params.nflows; i++) {
        FlowCtx& f = rt_.flow_at(i);
        f.session = f.send_session = &a;
        a.flows.push_back(&f);
        const uint32_t si = rt_.flows().send_queue_for(s, i);
        Runtime::SendOpen o;
        o.ring_size = s.params.ring_size;
        // The generator counts; send mode takes a completion per message for
        // its delivery latency (submit to the peer's release).
        o.report = opt_.mode == Mode::Send;
        o.user = gen_flow(f, rt_.tx_for(si));
        if (o.user == nullptr) {
            TM_LOG(ERR, app, "out of memory: generator state of flow %u", i);
            continue;
        }
        if (!rt_.flows().open_send(f, a, s, i, si, o))
            TM_LOG(ERR, app, "out of memory: send state of flow %u", i);
    }
}

void Bench::install_replay(AppSession& a, Session& s) {
    AppSession* peer_side = rt_.app_session(s.peer_id);
    for (uint16_t i = 0; i < s.params.nflows; i++) {
        FlowCtx& f = rt_.flow_at(i);
        f.session = f.send_session = &a;
        a.flows.push_back(&f);
        const uint16_t wire = static_cast<uint16_t>(s.peer_base + i);
        TxFlow tx;
        engine::tx_flow(s, i, s.params.ring_size, rt_.flows().address_to(s), tx); // the session's MTU fits
        if (peer_side != nullptr && i < peer_side->flows.size())
            make_replay(f, tx, peer_side->flows[i]->ring.get(), rt_.engine().sender_for(wire, i), a);
    }
}

// --replay: one flow as ready-made packet groups (ring_size sets of one
// message's content, built once), re-stamped per message on the tx lcore.
// `ring`: the receiving side's, whose cursor gives the credits (null: none,
// --flow-control off).
bool Bench::make_replay(FlowCtx& f, const TxFlow& tx, const CompletionRing* ring, uint32_t si, AppSession& a) {
    std::vector<uint8_t> buf(opt_.msg_size ? opt_.msg_size : 1);
    generate(f.gen_id, 0, buf.data(), opt_.msg_size);
    TxMessage m;
    m.bytes = {buf.data(), static_cast<size_t>(opt_.msg_size)};
    m.plan = plan_group(m.length(), tx.stride);
    const uint32_t n = m.plan.pkt_count;
    // The packets' own pool: a free makes a packet reusable (ReplayPool),
    // with room for the guards below and the marker's bulk takes.
    const uint32_t room = rte_pktmbuf_data_room_size(rt_.tx_pool()) - RTE_PKTMBUF_HEADROOM;
    const uint32_t obj = static_cast<uint32_t>(rte_mempool_calc_obj_size(sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM + room,
                                                                         0, nullptr));
    const uint32_t guard = (kReplayGap + obj - 1) / obj;
    std::string err;
    auto pool = drivers::ReplayPool::create("tm_replay_" + std::to_string(replay_pools_.size()),
                                            (n + guard) * opt_.ring_size + 2 * TxMarker::kMaxBurst, room, rt_.tx_socket(),
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
        rte_zmalloc_socket("tm_replay", stamps_at + sizeof(ReplayStamp) * npkts, 64, rt_.tx_socket()));
    auto* r = socket_new<ReplayFlow>(rt_.tx_socket());
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
    TxCtx* c = rt_.tx_for(si);
    // replay_run's back-to-back stamps only where no other lcore reads the packets.
    r->own_lcore = std::all_of(rt_.rx_lcores().begin(), rt_.rx_lcores().end(), [&](unsigned l) { return l == c->lcore; });
    // id: the queue's place among the tx lcore's senders
    rt_.post(c->lcore, {kAddReplay, false, FailReason::None, static_cast<uint16_t>(si / rt_.ntx()), f.index, c, r, &a});
    a.pending++;
    return true;
}

// The generator's state for a flow (its Sender's per-flow user pointer),
// made once: --payload fixed writes message 0's bytes here.
GenFlow* Bench::gen_flow(FlowCtx& f, TxCtx* c) {
    if (f.gen != nullptr)
        return f.gen;
    auto* g = socket_new<GenFlow>(rt_.tx_socket());
    if (g == nullptr)
        return nullptr;
    allocs_.push_back(g);
    g->f = &f;
    g->c = c;
    if (opt_.fixed_payload) {
        g->fixed = static_cast<uint8_t*>(rte_malloc_socket("tm_fixed", opt_.msg_size ? opt_.msg_size : 1, 64, rt_.tx_socket()));
        if (g->fixed == nullptr)
            return nullptr;
        allocs_.push_back(g->fixed);
        generate(f.gen_id, 0, g->fixed, opt_.msg_size);
    } else if (!opt_.flow_control) {
        // Unreliable, copy mode: nothing is ever resent, and the Sender asks
        // for a flow's next message only once the last one's packets were
        // built (copied). One buffer per flow serves: no hold, no pool.
        g->scratch = static_cast<uint8_t*>(rte_malloc_socket("tm_scratch", opt_.msg_size ? opt_.msg_size : 1, 64,
                                                             rt_.tx_socket()));
        if (g->scratch == nullptr)
            return nullptr;
        allocs_.push_back(g->scratch);
    }
    f.gen = g;
    return g;
}

// --flow-control off: no peer to agree with (a sink such as net_null), so
// no session: the flows are configured here, unreliable, and installed
// before the lcores start.
bool Bench::make_unconnected(SetupError& e) {
    Addressing addr;
    addr.src_mac = rt_.mac();
    addr.dst_mac = opt_.dst_mac_set ? opt_.dst_mac : rt_.rx_mac();
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
    a->stage = AppSession::Stage::Live; // nothing waits on the answers (the engine's come at once)
    for (uint32_t i = 0; i < opt_.flows; i++) {
        FlowCtx& f = rt_.flow_at(i);
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
        const uint32_t si = rt_.engine().sender_for(static_cast<uint16_t>(i), static_cast<uint16_t>(i));
        if (opt_.mode == Mode::Loopback) {
            std::string err;
            fake.peer_base = 0;
            if (!rt_.flows().make_recv(f, *a, fake, static_cast<uint16_t>(i), static_cast<uint16_t>(i), err)) {
                e = {2, err};
                return false;
            }
            rt_.flows().post_recv(f, *a);
            if (f.recv == nullptr) {
                e = {1, "flow set-up refused by an lcore"};
                return false;
            }
        }
        if (opt_.replay) { // no credits without a peer: the packets' reference counts pace it
            if (!make_replay(f, sp.tx, nullptr, si, *a)) {
                e = {2, "--replay: the ready-made packets do not fit (lower --ring-size, or raise EAL -m)"};
                return false;
            }
            continue;
        }
        sp.user = gen_flow(f, rt_.tx_for(si));
        if (sp.user == nullptr) {
            e = {1, "out of memory: generator state (--payload fixed: a message per flow)"};
            return false;
        }
        if (!rt_.flows().install_send(f, *a, sp, si)) {
            e = {1, "out of memory: send state"};
            return false;
        }
        if (f.send == nullptr) { // refused (on_answer): the engine freed it
            e = {1, "flow set-up refused by an lcore"};
            return false;
        }
    }
    // The daemon's own ops (the consumers', the replay's), applied here:
    // the lcores have not started.
    if (!rt_.serve_before_launch()) {
        e = {1, "flow set-up refused by an lcore"};
        return false;
    }
    a->pending = 0;
    for (uint32_t i = 0; i < rt_.flow_count(); i++) {
        FlowCtx& f = rt_.flow_at(i);
        a->flows.push_back(&f);
        f.session = f.send_session = f.recv_session = a.get();
    }
    rt_.flows().add_session(std::move(a));
    return true;
}

} // namespace tailmark::app
