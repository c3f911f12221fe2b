// The run's summary (summary.h's Results), made from Runtime's public views
// after the run or between two control rounds: the engines' counters, the
// ports', each flow's and each session's row, and the verdict (whether the
// run did what was asked). Compiled into tailmarkd with the other parts
// that read the Runtime (meson.build).
#pragma once

#include "summary.h"

namespace tailmark::app {

class Runtime;
struct FlowCtx;

class RunSummary {
public:
    explicit RunSummary(const Runtime& rt) : rt_(rt) {}
    Results make() const;
    // A flow's row (the summary's per_flow, and what a forgotten flow adds to the totals).
    Results::Flow flow_row(const FlowCtx& f) const;

private:
    void ports(Results& r) const;
    void sum_engine_counters(Results& r) const;
    void sum_cycles(Results& r, uint64_t completed) const;
    void merge_latency(Results& r) const;
    void add_flow_rows(Results& r) const;
    void add_session_rows(Results& r) const;
    void verdict(Results& r, uint64_t sends) const;

    const Runtime& rt_;
};

} // namespace tailmark::app
