// Deferred free: what other threads may still be reading (a flow's
// Receiver state, its completion ring, a SendFlow the shell or telemetry
// looks at) is freed only once `delay` TSC cycles have passed since it
// was let go. The control thread's only: no lock. Never on the fast path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

namespace tailmark::engine {

class DeferredFree {
public:
    explicit DeferredFree(uint64_t delay = 0) : delay_(delay) {}
    void set_delay(uint64_t delay) { delay_ = delay; }
    uint64_t delay() const { return delay_; }

    // fn runs at the first run(t) with t - now >= delay (or run_all).
    void later(uint64_t now, std::function<void()> fn) { q_.emplace_back(now, std::move(fn)); }
    // Runs, oldest first, every entry due at `now`; returns how many ran.
    size_t run(uint64_t now) { return take(now, false); }
    // Runs every entry, due or not (teardown, once no other thread reads).
    size_t run_all() { return take(0, true); }
    size_t pending() const { return q_.size(); }

private:
    size_t take(uint64_t now, bool all);

    uint64_t delay_;
    std::deque<std::pair<uint64_t, std::function<void()>>> q_; // oldest first
};

} // namespace tailmark::engine
