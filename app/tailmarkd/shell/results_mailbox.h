// The shell's way to the run's results while the run goes on. Only the
// control thread adds and forgets sessions and flows, so it computes them
// between its rounds (answer(), one atomic load when nobody asked), and the
// shell's thread polls for the answer: the control thread never waits on
// the shell. Before the loop starts, the asker waits; after it ended,
// nothing changes the tables any more and the asker computes them itself.
#pragma once

#include <atomic>
#include <cstdint>

#include <rte_cycles.h>

namespace tailmark::app {

template <class T>
class ResultsMailbox {
public:
    // The control thread.
    void loop_started() { loop_.store(1, std::memory_order_release); }
    void loop_ended() { loop_.store(2, std::memory_order_release); }
    template <class Make>
    void answer(Make&& make) {
        if (asked_.load(std::memory_order_acquire) != 1)
            return;
        box_ = make();
        asked_.store(2, std::memory_order_release);
    }

    // The asking thread. False: no answer within timeout_s.
    template <class Make>
    bool ask(T& out, Make&& make, double timeout_s) {
        const uint64_t end = rte_rdtsc() + static_cast<uint64_t>(timeout_s * double(rte_get_tsc_hz()));
        asked_.store(1, std::memory_order_release);
        for (;;) {
            if (asked_.load(std::memory_order_acquire) == 2) {
                out = box_;
                asked_.store(0, std::memory_order_release);
                return true;
            }
            if (loop_.load(std::memory_order_acquire) == 2) { // no control loop any more: nothing changes
                asked_.store(0, std::memory_order_release);
                out = make();
                return true;
            }
            if (rte_rdtsc() >= end) {
                // Withdrawn; an answer written meanwhile is overwritten by the next ask.
                int asked = 1;
                asked_.compare_exchange_strong(asked, 0, std::memory_order_acq_rel);
                return false;
            }
            rte_delay_us_sleep(1000);
        }
    }

private:
    std::atomic<int> loop_{0};  // 0 not started, 1 running, 2 ended
    std::atomic<int> asked_{0}; // 0 none, 1 asked, 2 answered
    T box_{};
};

} // namespace tailmark::app
