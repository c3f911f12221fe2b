// How a stop reaches the control loop. SIGINT/SIGTERM (signals.h), the
// shell's `quit` or the end of its input, and main (a shell that failed to
// start) each make a request here; Runtime::control reads them: the first
// drains (no new messages, those in flight finish), a second stops at once.
// One object, owned by main and handed to the Runtime, so that nothing the
// engine reads is a global; the signal handler, which takes no argument,
// reaches it through the one pointer install_signal_handlers was given.
// Lock-free atomics only: safe in a signal handler.
#pragma once

#include <atomic>

namespace tailmark::app {

class StopRequest {
public:
    // A signal's request (from its handler).
    void signal(int sig) {
        last_signal_.store(sig, std::memory_order_relaxed);
        requests_.fetch_add(1, std::memory_order_release);
    }
    // The shell's quit: a drain, unless a request was made already.
    void drain() {
        int zero = 0;
        requests_.compare_exchange_strong(zero, 1, std::memory_order_acq_rel);
    }
    // Stop at once, draining nothing.
    void now() { requests_.store(2); }

    // 0: none; 1: drain; 2 or more: stop at once.
    int requests() const { return requests_.load(std::memory_order_acquire); }
    // The last signal's number; 0 when none came (the shell's quit).
    int last_signal() const { return last_signal_.load(); }

private:
    std::atomic<int> requests_{0};
    std::atomic<int> last_signal_{0};
    static_assert(std::atomic<int>::is_always_lock_free);
};

} // namespace tailmark::app
