// The stats line (--stats-period, the shell's `set stats-period`): the
// run's totals and rates over the last period, from the Runtime's public
// views, on stdout.
#include "telemetry/stats_line.h"

#include <cinttypes>
#include <cstdio>

#include "run/runtime.h"
#include "service/service.h"

namespace tailmark::app {

void StatsLine::print(uint64_t now) {
    const Runtime::Stats t = rt_.stats();
    const Options& o = rt_.options();
    const uint64_t hz = rt_.tsc_hz();
    if (last_tsc_ == 0)
        last_tsc_ = rt_.times().launch;
    const double dt = double(now - last_tsc_) / double(hz);
    const double el = double(now - rt_.times().launch) / double(hz);
    // Service mode's totals are its live flows': a session that ended takes
    // its counts with it, and a period's difference would wrap (a line read
    // msgs_per_s=18445782852671762432). Such a period counts nothing.
    auto since = [](uint64_t now_v, uint64_t then_v) { return now_v > then_v ? now_v - then_v : 0; };
    const uint64_t dmsg = o.mode == Mode::Send ? since(t.sent, last_.sent) : since(t.completed, last_.completed);
    const uint64_t dpkt = o.mode == Mode::Recv ? since(t.pkts_rx, last_.pkts_rx) : since(t.pkts_tx, last_.pkts_tx);
    const double gbps = double(since(t.bytes, last_.bytes)) * 8 / dt / 1e9;
    printf("stats t=%.2f", el);
    // The service verifies nothing (its applications' bytes are theirs),
    // and it counts its attached applications.
    if (rt_.service() != nullptr)
        printf(" apps=%u sent=%" PRIu64 " completed=%" PRIu64, rt_.service()->apps(), t.sent, t.completed);
    else
        printf(" sent=%" PRIu64 " completed=%" PRIu64 " verified=%" PRIu64 " verify_errors=%" PRIu64, t.sent,
               t.completed, t.verified, t.verify_errors);
    printf(" msgs_per_s=%.0f gbps=%.3f mpps=%.3f packets_tx=%" PRIu64 " packets_rx=%" PRIu64 " drops=%" PRIu64
           " tx_dropped=%" PRIu64,
           double(dmsg) / dt, gbps, double(dpkt) / dt / 1e6, t.pkts_tx, t.pkts_rx, t.drops, t.tx_dropped);
    const uint64_t base = o.mode == Mode::Recv ? t.completion_writes : t.sent;
    const uint64_t in_flight = base > t.completed ? base - t.completed : 0;
    uint32_t up = 0;
    for (const auto& a : rt_.app_sessions())
        up += a->stage == AppSession::Stage::Live;
    printf(" in_flight=%" PRIu64 " retransmits=%" PRIu64 " stalled=%u", in_flight, t.retx,
           rt_.flows_stalled());
    if (o.exit_when_done && o.messages != 0)
        printf(" done_pct=%.1f", 100.0 * double(t.completed) /
                                     double(o.messages * o.flows * (o.mode == Mode::Recv ? o.sessions : 1)));
    printf(" sessions=%u", up);
    // The fastest session's congestion controller: what paces the sender now.
    double cc_bps = 0, srtt_us = 0;
    for (uint32_t i = 0; i < rt_.flow_count(); i++) {
        const FlowCtx* f = &rt_.flow_at(i);
        if (f->forgotten || (f->send == nullptr && !f->detached && o.mode == Mode::Recv))
            continue;
        const Sender::FlowView v = rt_.send_view(*f);
        if (v.cc_rate_bps > cc_bps) {
            cc_bps = v.cc_rate_bps;
            srtt_us = double(v.cc_srtt) * 1e6 / double(hz);
        }
    }
    if (cc_bps > 0)
        printf(" cc_mbps=%.1f srtt_us=%.0f", cc_bps / 1e6, srtt_us);
    printf("\n");
    fflush(stdout);
    last_ = t;
    last_tsc_ = now;
}

} // namespace tailmark::app
