#include "telemetry/telemetry.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_telemetry.h>

#include "run/context.h"
#include "run/runtime.h"
#include "service/service.h"
#include "tailmark/log.h"

namespace tailmark::app {

namespace {

std::mutex g_mu;                // telemetry thread vs. attach/detach (never the data plane)
const Runtime* g_rt = nullptr;  // under g_mu
bool g_registered = false;      // under g_mu

// The one place that adds a u64 to a dict (rte_tel_data_add_dict_u64 was
// renamed after 22.11). Every add is checked: false when the dict is full or
// the key is invalid.
bool put(rte_tel_data* d, const char* key, uint64_t v) {
    return rte_tel_data_add_dict_u64(d, key, v) == 0;
}
bool put_str(rte_tel_data* d, const char* key, const char* v) {
    return rte_tel_data_add_dict_string(d, key, v) == 0;
}

} // namespace

// Read-only views of the Runtime's counters (its public views).
struct TelemetryViews {
    static int stats(const Runtime& rt, rte_tel_data* d) {
        const Runtime::Stats t = rt.stats();
        const Options& o = rt.options();
        const uint64_t requested = o.messages * o.flows;
        const uint64_t base = o.mode == Mode::Recv ? t.completion_writes : t.sent;
        bool ok = rte_tel_data_start_dict(d) == 0;
        ok = ok && put_str(d, "mode", to_string(o.mode));
        ok = ok && put_str(d, "completion_mode", to_string(rt.completion()));
        ok = ok && put(d, "flows", o.flows);
        ok = ok && put(d, "msg_size", o.msg_size);
        ok = ok && put(d, "messages_per_flow", o.messages);
        ok = ok && put(d, "messages_requested", requested);
        ok = ok && put(d, "messages_sent", t.sent);
        ok = ok && put(d, "messages_completed", t.completed);
        ok = ok && put(d, "messages_acked", t.acked);
        ok = ok && put(d, "messages_verified", t.verified);
        ok = ok && put(d, "verify_errors", t.verify_errors);
        ok = ok && put(d, "completion_writes", t.completion_writes);
        ok = ok && put(d, "packets_tx", t.pkts_tx);
        ok = ok && put(d, "packets_rx", t.pkts_rx);
        ok = ok && put(d, "packets_local", t.pkts_local); // in memory: between applications of this daemon
        ok = ok && put(d, "bytes_local", t.bytes_local);
        ok = ok && put(d, "bytes_payload", t.bytes);
        ok = ok && put(d, "drops_total", t.drops);
        ok = ok && put(d, "tx_dropped", t.tx_dropped);
        ok = ok && put(d, "retransmits", t.retx);
        ok = ok && put(d, "in_flight", base > t.completed ? base - t.completed : 0);
        ok = ok && put(d, "flows_stalled", rt.flows_stalled());
        ok = ok && put(d, "external_consumer", o.external_consumer);
        ok = ok && put(d, "done", requested != 0 && t.completed == requested);
        return ok ? 0 : -ENOSPC;
    }

    static int flow(const Runtime& rt, const char* params, rte_tel_data* d) {
        if (params == nullptr || *params == '\0')
            return -EINVAL;
        char* end = nullptr;
        errno = 0;
        const unsigned long id = strtoul(params, &end, 10);
        if (errno != 0 || end == params || *end != '\0' || id >= rt.flow_count())
            return -EINVAL;
        const FlowCtx& f = rt.flow_at(static_cast<uint32_t>(id));
        const bool ext = rt.options().external_consumer;
        const Sender::FlowView v = rt.send_view(f);
        bool ok = rte_tel_data_start_dict(d) == 0;
        ok = ok && put(d, "flow", f.index);
        ok = ok && put(d, "session", f.session ? f.session->id : 0);
        ok = ok && put(d, "send_id", f.send_id);
        ok = ok && put(d, "recv_id", f.recv_id);
        ok = ok && put(d, "ring_size", f.ring_size);
        ok = ok && put(d, "pkts_per_msg", f.pkts_per_msg);
        ok = ok && put(d, "sent", v.sent);
        ok = ok && put(d, "acked", v.acked);
        ok = ok && put(d, "retransmits", v.retx_pkts);
        ok = ok && put_str(d, "failed", to_string(v.failed));
        ok = ok && put(d, "consumed", f.consumed.load(std::memory_order_relaxed));
        ok = ok && put(d, "credit", v.released);
        if (f.recv_session != nullptr) { // a receive side: live, or as it was when its session ended
            const uint32_t rel = rt.released_of(f);
            ok = ok && put(d, "released", rel);
            ok = ok && put(d, "next_complete", f.ring != nullptr && f.ring->poll(rel) != nullptr);
            ok = ok && put_str(d, "memzone", ring_name(f.recv_id).c_str());
        }
        // Messages per second over the last second (sent; done: delivered or consumed).
        ok = ok && put(d, "rate_sent_msgs", static_cast<uint64_t>(rt.rate_sent(static_cast<uint32_t>(id)) + 0.5));
        ok = ok && put(d, "rate_done_msgs", static_cast<uint64_t>(rt.rate_done(static_cast<uint32_t>(id)) + 0.5));
        ok = ok && put_str(d, "consumer", ext ? "external" : "lcore");
        ok = ok && put(d, "stalled", ext ? rt.stalled(static_cast<uint32_t>(id)) : 0);
        return ok ? 0 : -ENOSPC;
    }

    // Every flow's rates at once (a starved flow is a zero among its
    // peers): two arrays indexed by flow, messages per second over the
    // last second, sent and done (delivered or consumed).
    static int rates(const Runtime& rt, rte_tel_data* d) {
        const uint32_t n = rt.flow_count();
        bool ok = rte_tel_data_start_dict(d) == 0;
        for (const bool sent : {true, false}) {
            rte_tel_data* a = rte_tel_data_alloc();
            ok = ok && a != nullptr && rte_tel_data_start_array(a, RTE_TEL_U64_VAL) == 0;
            for (uint32_t i = 0; ok && i < n; i++) {
                const double r = sent ? rt.rate_sent(i) : rt.rate_done(i);
                ok = rte_tel_data_add_array_u64(a, static_cast<uint64_t>(r + 0.5)) == 0;
            }
            if (!ok || rte_tel_data_add_dict_container(d, sent ? "sent_msgs" : "done_msgs", a, 0) != 0) {
                rte_tel_data_free(a);
                ok = false;
            }
        }
        return ok ? 0 : -ENOSPC;
    }

    // The service's handling of the applications' submissions (the
    // summary's `service` object, live). Not in service mode: null.
    static int service(const Runtime& rt, rte_tel_data* d) {
        if (!rt.service())
            return -ENOTSUP;
        uint32_t sessions = 0;
        const SvcCounters c = rt.service()->counters(&sessions);
        bool ok = rte_tel_data_start_dict(d) == 0;
        ok = ok && put(d, "sessions", sessions);
        for (const auto& [name, field] : kSvcCounterFields)
            ok = ok && put(d, name, c.*field);
        return ok ? 0 : -ENOSPC;
    }

    static int drops(const Runtime& rt, rte_tel_data* d) {
        const DropCounters sum = rt.drops();
        uint64_t total = 0;
        bool ok = rte_tel_data_start_dict(d) == 0;
        for (size_t i = 0; i < kDropReasonCount && ok; i++) {
            const std::string k(kDropReasonNames[i]);
            ok = put(d, k.c_str(), sum[i]);
            total += sum[i];
        }
        ok = ok && put(d, "total", total);
        return ok ? 0 : -ENOSPC;
    }

    static int lcores(const Runtime& rt, rte_tel_data* d) {
        bool ok = rte_tel_data_start_dict(d) == 0;
        ok = ok && put(d, "tsc_hz", rte_get_tsc_hz());
        ok = ok && put_str(d, "rx_steering", rt.steering_name());
        const std::vector<Results::RxLane> lanes = rt.rx_lanes();
        const unsigned main_lcore = rte_get_main_lcore();
        for (unsigned l = 0; l < RTE_MAX_LCORE && ok; l++) {
            const LcoreCtx* lc = rt.lcores()[l];
            if ((lc == nullptr || !lc->any()) && l != main_lcore)
                continue;
            const LcoreCtx none{};
            const LcoreCtx& r = lc ? *lc : none;
            std::string roles = l == main_lcore ? "control" : "";
            for (const auto& [has, name] : {std::pair{r.tx != nullptr, "tx"}, std::pair{r.rx != nullptr, "rx"},
                                            std::pair{r.cons != nullptr, "consumer"}}) {
                if (!has)
                    continue;
                if (!roles.empty())
                    roles.push_back('+');
                roles.append(name);
            }
            rte_tel_data* c = rte_tel_data_alloc();
            if (c == nullptr)
                return -ENOMEM;
            const LcoreCycles& cy = r.cycles;
            bool cok = rte_tel_data_start_dict(c) == 0;
            cok = cok && put(c, "lcore", l);
            cok = cok && put_str(c, "roles", roles.c_str());
            cok = cok && put(c, "busy_cycles", peek(cy.busy));
            cok = cok && put(c, "idle_cycles", peek(cy.idle));
            for (const Results::RxLane& x : lanes) // its rx queue: steering's per-lcore view
                if (x.lcore == l) {
                    cok = cok && put(c, "rx_queue", x.queue);
                    cok = cok && put(c, "rx_packets", x.packets_rx);
                    cok = cok && put(c, "placed", x.placed);
                    cok = cok && put(c, "handed_out", x.handed_out);
                    cok = cok && put(c, "handed_in", x.handed_in);
                }
            const std::string key = "lcore_" + std::to_string(l);
            if (!cok || rte_tel_data_add_dict_container(d, key.c_str(), c, 0) != 0) {
                rte_tel_data_free(c);
                ok = false;
            }
        }
        return ok ? 0 : -ENOSPC;
    }
};

namespace {

template <int (*F)(const Runtime&, const char*, rte_tel_data*)>
int guarded(const char*, const char* params, rte_tel_data* d) {
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_rt == nullptr)
        return -EAGAIN; // not running (set-up or teardown)
    return F(*g_rt, params, d);
}

int stats_cb(const Runtime& rt, const char*, rte_tel_data* d) { return TelemetryViews::stats(rt, d); }
int flow_cb(const Runtime& rt, const char* p, rte_tel_data* d) { return TelemetryViews::flow(rt, p, d); }
int drops_cb(const Runtime& rt, const char*, rte_tel_data* d) { return TelemetryViews::drops(rt, d); }
int rates_cb(const Runtime& rt, const char*, rte_tel_data* d) { return TelemetryViews::rates(rt, d); }
int lcores_cb(const Runtime& rt, const char*, rte_tel_data* d) { return TelemetryViews::lcores(rt, d); }
int service_cb(const Runtime& rt, const char*, rte_tel_data* d) { return TelemetryViews::service(rt, d); }

} // namespace

bool telemetry_attach(const Runtime& rt) {
    std::lock_guard<std::mutex> lk(g_mu);
    g_rt = &rt;
    if (g_registered)
        return true;
    struct Cmd {
        const char* name;
        telemetry_cb cb;
        const char* help;
    };
    const Cmd cmds[] = {
        {"/tailmark/stats", guarded<stats_cb>, "tailmark totals: messages, packets, bytes, drops. No parameters."},
        {"/tailmark/flow", guarded<flow_cb>, "One flow's state. Parameter: flow id."},
        {"/tailmark/drops", guarded<drops_cb>, "tailmark drop counts by reason. No parameters."},
        {"/tailmark/rates", guarded<rates_cb>,
         "tailmark per-flow messages per second over the last second, sent and done, by flow. No parameters."},
        {"/tailmark/lcores", guarded<lcores_cb>, "tailmark lcores: roles, busy and idle TSC cycles. No parameters."},
        {"/tailmark/service", guarded<service_cb>,
         "tailmark --mode service: sessions, submissions taken, completions delivered or failed. No parameters."},
    };
    bool ok = true;
    for (const Cmd& c : cmds) {
        const int rc = rte_telemetry_register_cmd(c.name, c.cb, c.help);
        if (rc != 0) {
            TM_LOG(WARNING, app, "telemetry: cannot register %s (%d)", c.name, rc);
            ok = false;
        }
    }
    g_registered = true;
    return ok;
}

void telemetry_detach() {
    std::lock_guard<std::mutex> lk(g_mu);
    g_rt = nullptr;
}

} // namespace tailmark::app
