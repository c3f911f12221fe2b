// The stats line, one per --stats-period: messages, rates, packets, drops,
// retransmissions, stalls, sessions and the fastest congestion
// controller's rate, from the Runtime's public views.
#pragma once

#include <cstdint>

#include "run/runtime.h"

namespace tailmark::app {

class StatsLine {
public:
    explicit StatsLine(const Runtime& rt) : rt_(rt) {}
    // The line for the period that ends at `now` (the control thread's).
    void print(uint64_t now);

private:
    const Runtime& rt_;
    Runtime::Stats last_{}; // at the last line
    uint64_t last_tsc_ = 0;
};

} // namespace tailmark::app
