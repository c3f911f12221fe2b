// The daemon's lcores: the engine's loop (lib/tailmark-engine,
// engine::run_lcore) over the daemon's roles (LcoreCtx: tx with the
// generator and --replay, the engine's rx, the verifying consumer), and the
// benchmark's own requests (bench/lcore_ops.cc).
#include "context.h"
#include "signals.h"

namespace tailmark::app {

bool serve_requests(LcoreCtx& l) {
    return engine::serve_requests(l.req, l.resp, apply_bench_op);
}

int lcore_main(void* arg) {
    LcoreCtx& l = *static_cast<LcoreCtx*>(arg);
    block_async_signals_on_lcore();
    return engine::run_lcore(l, apply_bench_op);
}

} // namespace tailmark::app
