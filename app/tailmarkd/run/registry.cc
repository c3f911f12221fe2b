// The daemon's part of the flow registry (engine::FlowRegistry, kept
// through engine::Sessions; what is kept beside each slot is FlowWatch's):
// a forgotten session's flows' counts folded into the summary's totals. A daemon that
// serves sessions for months (--mode service, or recv with --sessions)
// keeps the last --keep-ended ended sessions; an older one's flows' slots
// serve new flows.
#include <cstring>

#include "bench/results.h"
#include "runtime.h"

namespace tailmark::app {

void Runtime::forget_ended(uint64_t now) {
    // loopback and send: a fixed set of flows, made once.
    if (opt_.mode != Mode::Recv && opt_.mode != Mode::Service)
        return;
    flows().forget_ended(now, opt_.keep_ended);
}

// A forgotten session's flow: its failure, and with an external consumer
// its released messages, stay in the summary's totals.
void Runtime::forgetting(const FlowCtx& f) {
    const Results::Flow x = RunSummary(*this).flow_row(f);
    if (std::strcmp(x.state, "ok") != 0) {
        forgotten_.flows_failed++;
        forgotten_.messages_failed += x.failed;
    }
    if (opt_.external_consumer) { // the totals count its released messages
        forgotten_.completed += x.released;
        forgotten_.bytes += plane_.cfg.bytes_of(static_cast<uint32_t>(x.released));
    }
}

} // namespace tailmark::app
