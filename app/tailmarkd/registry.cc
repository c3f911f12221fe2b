// The flow registry and the sessions the daemon tracks: slots handed out,
// published to the other threads, and given back when an ended session is
// forgotten. A daemon that serves sessions for months (--mode service, or
// recv with --sessions) would otherwise keep every flow it ever had: a
// FlowCtx in hugepage memory per flow (its latency histogram alone is 4 KiB),
// scans that grow with the daemon's age, and no session at all once 65536
// flows had come and gone. So the summary, the shell and telemetry keep the
// last --keep-ended ended sessions; an older one's counts are folded into
// the totals, and its flows' slots serve new flows (engine::FlowRegistry
// holds the slots; here is what the daemon keeps beside each).
#include <cstring>

#include "bench/results.h"
#include "runtime.h"
#include "service/service.h"

namespace tailmark::app {

bool Runtime::add_flow(FlowCtx* f, uint64_t now) {
    FlowCtx* old = nullptr;
    if (!flows_.add(f, f->index, old))
        return false;
    const uint32_t i = f->index;
    if (i < failed_logged_.size())
        failed_logged_[i] = false;
    if (i < floor_since_.size())
        floor_since_[i] = 0;
    if (i < seen_released_.size())
        seen_released_[i] = moved_tsc_[i] = 0;
    stalled_[i].store(false, std::memory_order_relaxed);
    if (old != nullptr) // the shell and telemetry had a second to let go of it
        later(now, [old] { socket_delete(old); });
    return true;
}

void Runtime::abandon_flow(FlowCtx& f) {
    f.session = f.send_session = f.recv_session = nullptr;
    f.detached = true;
    f.forgotten = true;
    flows_.release(f.index);
}

void Runtime::publish_flows() {
    flows_.publish();
    failed_logged_.resize(flows_.size(), false);
}

AppSession& Runtime::add_session(std::unique_ptr<AppSession> a) {
    a->index = next_session_index_++;
    app_sessions_.push_back(std::move(a));
    return *app_sessions_.back();
}

// Ended, its flows out of every lcore, the session table and the service
// done with it: nothing but the registry refers to it any more.
bool Runtime::forgettable(const AppSession& a) const {
    if (a.stage != AppSession::Stage::Gone || a.s != nullptr || a.svc != nullptr || a.pending != 0)
        return false;
    for (const FlowCtx* f : a.flows)
        if (f->send != nullptr || f->recv != nullptr || f->cons != nullptr || f->ring || f->detach_pending != 0 ||
            f->moving || (f->send_session != nullptr && f->send_session != &a) ||
            (f->recv_session != nullptr && f->recv_session != &a))
            return false;
    return true;
}

void Runtime::forget_ended(uint64_t now) {
    // loopback and send: a fixed set of flows, made once.
    if (opt_.mode != Mode::Recv && opt_.mode != Mode::Service)
        return;
    size_t ended = 0;
    for (const auto& a : app_sessions_)
        ended += forgettable(*a);
    for (size_t k = 0; k < app_sessions_.size() && ended > opt_.keep_ended;) {
        AppSession* a = app_sessions_[k].get();
        if (!forgettable(*a)) {
            k++;
            continue;
        }
        for (FlowCtx* f : a->flows) {
            const Results::Flow x = RunSummary(*this).flow_row(*f);
            if (std::strcmp(x.state, "ok") != 0) {
                forgotten_.flows_failed++;
                forgotten_.messages_failed += x.failed;
            }
            if (opt_.external_consumer) { // the totals count its released messages
                forgotten_.completed += x.released;
                forgotten_.bytes += bytes_released(static_cast<uint32_t>(x.released));
            }
            abandon_flow(*f);
        }
        app_sessions_[k].release();
        app_sessions_.erase(app_sessions_.begin() + static_cast<std::ptrdiff_t>(k));
        later(now, [a] { delete a; }); // telemetry may be reading a flow's session
        forgotten_.sessions++;
        ended--;
    }
}

} // namespace tailmark::app
