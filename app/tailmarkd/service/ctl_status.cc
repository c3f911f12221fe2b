// tailmark-ctl's STATUS: the snapshot (status.h) and its answer.
#include "drivers/port_stats.h"
#include "internal.h"

namespace tailmark::app {

// The daemon as operators see it (status.h). On the control loop: reads the
// flows as FlowWatch (lib/tailmark-engine) keeps them, and the counters as the summary does.
StatusSnapshot Service::status_snapshot(uint64_t now) const {
    const Options& o = options();
    const double hz = static_cast<double>(h_.tsc_hz);
    StatusSnapshot st;
    st.pid = static_cast<uint32_t>(getpid());
    st.version = TAILMARK_VERSION;
    st.abi = kChannelAbi;
    st.abi_minor = kChannelAbiMinor;
    st.mode = to_string(o.mode);
    st.control_socket = path_;
    st.local_ip = ip_to_string(o.src_ip);
    st.udp_port = o.udp_port;
    st.mtu = o.mtu;
    st.zero_copy = zero_copy_;
    st.uptime_s = double(now - opened_tsc_) / hz;
    auto port = [&](uint16_t id, const char* role) {
        StatusPort p;
        p.id = id;
        p.role = role;
        char name[RTE_ETH_NAME_MAX_LEN] = "?";
        rte_eth_dev_get_name_by_port(id, name);
        p.name = name;
        rte_eth_dev_info info;
        if (rte_eth_dev_info_get(id, &info) == 0 && info.driver_name != nullptr)
            p.driver = info.driver_name;
        rte_eth_link link{};
        if (rte_eth_link_get_nowait(id, &link) == 0) {
            p.link_up = link.link_status == RTE_ETH_LINK_UP;
            p.speed_mbps = link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : link.link_speed;
        }
        rte_eth_stats es{};
        if (drivers::port_stats(id, &es) == 0) {
            p.rx_packets = es.ipackets;
            p.tx_packets = es.opackets;
            p.rx_bytes = es.ibytes;
            p.tx_bytes = es.obytes;
            p.rx_missed = es.imissed;
            p.rx_errors = es.ierrors;
            p.tx_errors = es.oerrors;
            p.rx_nombuf = es.rx_nombuf;
        }
        st.ports.push_back(p);
    };
    port(o.tx_port, "data");
    if (o.rx_port != o.tx_port)
        port(o.rx_port, "data");
    for (const Options::Rail& r : o.rails)
        port(r.port, "rail");
    if (h_.node.local_port_id() >= 0)
        port(static_cast<uint16_t>(h_.node.local_port_id()), "local");
    for (const auto& ap : apps_) {
        const SvcApp& a = *ap;
        if (!a.hello || a.dead)
            continue;
        StatusApp x;
        x.id = a.id;
        x.name = a.name;
        x.pid = a.pid;
        x.uid = a.uid;
        x.gid = a.gid;
        x.sessions = static_cast<uint32_t>(a.sessions.size());
        for (const auto& [svc, who] : listeners_)
            if (who == &a)
                x.listening.push_back(svc);
        x.zero_copy = a.zero_copy;
        x.arena_bytes = a.arena.len;
        x.wakes = a.bell != nullptr ? __atomic_load_n(&a.bell->wakes, __ATOMIC_RELAXED) : 0;
        st.apps.push_back(std::move(x));
    }
    for (const auto& sp : sessions_) {
        const SvcSession& ss = *sp;
        StatusSession x;
        x.id = ss.sid;
        x.app = ss.app != nullptr ? ss.app->id : 0;
        x.role = ss.connector ? "connector" : "acceptor";
        x.peer = to_string(ss.peer);
        x.service = ss.port;
        x.state = ss.s != nullptr ? to_string(ss.s->state) : ss.gone ? "ended" : "closing";
        x.end = to_string(ss.end);
        x.flows = ss.nflows;
        x.ring_size = ss.s != nullptr ? ss.s->params.ring_size : ss.ring_size;
        x.max_msg = ss.s != nullptr ? ss.s->params.max_msg : ss.max_msg;
        if (ss.a != nullptr) {
            if (ss.a->up_tsc != 0)
                x.up_s = double((ss.a->down_tsc ? ss.a->down_tsc : now) - ss.a->up_tsc) / hz;
            for (const FlowCtx* f : ss.a->ctxs()) {
                if (ss.connector) {
                    const Sender::FlowView v = engine::Sessions::send_view(*f);
                    x.sent += v.sent;
                    x.acked += v.acked;
                    x.released += v.released;
                    x.retransmitted += v.retx_pkts;
                    x.rate_mbps = std::max(x.rate_mbps, v.cc_rate_bps / 1e6);
                    x.srtt_us = std::max(x.srtt_us, double(v.cc_srtt) * 1e6 / hz);
                    x.base_rtt_us = std::max(x.base_rtt_us, double(v.cc_base_rtt) * 1e6 / hz);
                    x.msgs_per_s += h_.watch.rate_sent(f->index);
                } else {
                    x.released += engine::Sessions::released_of(*f);
                    x.acked += engine::Sessions::acked_of(*f);
                    x.msgs_per_s += h_.watch.rate_done(f->index);
                }
            }
        }
        for (const SvcSendFlow* f : ss.send) {
            x.delivered += peek(f->ctr.delivered);
            x.failed += peek(f->ctr.failed);
        }
        st.sessions.push_back(std::move(x));
    }
    const DropCounters d = h_.node.drops();
    for (size_t i = 0; i < kDropReasonCount; i++) {
        st.drops.emplace_back(std::string(kDropReasonNames[i]), d[i]);
        st.drops_total += d[i];
    }
    st.tx_dropped = h_.node.engine().stats().tx_dropped;
    const SvcCounters c = counters();
    for (const auto& [name, field] : kSvcCounterFields)
        st.service.emplace_back(name, c.*field);
    return st;
}

// STATUS: the snapshot's JSON (at most 50 ms old: a client asking in a loop
// costs the control loop one snapshot per 50 ms) in a sealed memfd, then the
// connection is closed quietly: it said no HELLO and holds nothing.
void Service::on_status(SvcApp& app, const tm_msg_status& m, uint64_t now) {
    if (status_cache_.empty() || now - status_tsc_ > h_.tsc_hz / 20) {
        status_cache_ = status_json(status_snapshot(now));
        status_tsc_ = now;
    }
    const int fd = memfd_create("tailmark-status", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    size_t done = 0;
    while (fd >= 0 && done < status_cache_.size()) {
        const ssize_t n = write(fd, status_cache_.data() + done, status_cache_.size() - done);
        if (n <= 0)
            break;
        done += static_cast<size_t>(n);
    }
    if (fd < 0 || done != status_cache_.size() ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        reply_error(app, m.h.req_id, errno ? errno : EIO, std::string("status memfd: ") + strerror(errno));
    } else {
        tm_msg_status_reply r{};
        r.h = {TM_MSG_STATUS_REPLY, sizeof(r), m.h.req_id};
        r.abi = kChannelAbi;
        r.minor = kChannelAbiMinor;
        r.json_bytes = done;
        send_msg(app, &r, sizeof(r), fd);
    }
    if (fd >= 0)
        close(fd);
    app.dead = true; // one STATUS per connection; reap() lets it go
    close(app.fd);
    app.fd = -1;
    app.outq.clear();
}

} // namespace tailmark::app
