// How an application sleeps while the daemon works (channel_abi.h's
// tm_doorbell): tm_wait spins a few microseconds on its own checks, then
// sets `sleeping` (seq_cst), checks once more, and blocks in poll() on the
// wake fd (the read end of the daemon's pipe) and the socket. The daemon's
// control loop, seeing `sleeping`, looks at our rings and, once something
// is there, swaps it to 0 and writes a byte into the pipe. The re-check after setting `sleeping` is what
// makes a wake-up never lost: either we see the work, or the daemon sees us
// asleep after the work was there.
#pragma once

#include <cstdint>

#include "tailmark/channel_abi.h"
#include "fd.h"
#include "last_error.h"
#include "mapping.h"

namespace tailmark::client {

int64_t monotonic_ns();

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

class Doorbell {
public:
    static constexpr int64_t kSpinNs = 5000; // "briefly": a wake-up through the daemon costs about 1 ms

    // The control block and the wake fd WELCOME carried (the read end of
    // the daemon's pipe; the daemon writes its own end without blocking):
    // 0, or -EPROTO when the block is smaller than the doorbell or the fd
    // is no pipe.
    int map_control(Fd control, uint64_t control_bytes, Fd wake, LastError& err);
    int wake_fd() const { return wake_.get(); }
    const channel::tm_doorbell* block() const { return db_; }

    // tm_wait: until ready() (memory reads only, no side effects) or
    // timeout_ms (-1: none). pump() reads the socket when poll() says it
    // has something (events, or its end) and returns 0 or a negative errno.
    // 1: ready; 0: timed out; or pump()'s error.
    // want: what the daemon wakes us for (tm_doorbell.want; 0: anything).
    template <class Ready, class Pump>
    int wait(int sock, int timeout_ms, Ready&& ready, Pump&& pump, LastError& err, uint64_t want = 0);

private:
    // poll() on the wake fd and sock: sock's revents, or a negative errno.
    int sleep(int sock, int timeout_ms, LastError& err);
    void arm(uint64_t want);
    void disarm();

    Fd wake_;
    Fd control_fd_;
    Mapping control_;
    channel::tm_doorbell* db_ = nullptr;
};

template <class Ready, class Pump>
int Doorbell::wait(int sock, int timeout_ms, Ready&& ready, Pump&& pump, LastError& err, uint64_t want) {
    if (ready())
        return 1;
    if (timeout_ms == 0)
        return 0;
    const int64_t start = monotonic_ns();
    const int64_t deadline = timeout_ms > 0 ? start + static_cast<int64_t>(timeout_ms) * 1000000 : 0;
    for (unsigned i = 1;; ++i) { // the spin: memory checks, a clock read every 16 of them
        if (ready())
            return 1;
        cpu_relax();
        if (i % 16 == 0 && monotonic_ns() - start >= kSpinNs)
            break;
    }
    for (;;) {
        int wait_ms = -1;
        if (timeout_ms > 0) {
            const int64_t left = deadline - monotonic_ns();
            if (left <= 0)
                return ready() ? 1 : 0;
            wait_ms = static_cast<int>((left + 999999) / 1000000);
        }
        arm(want);
        if (ready()) {
            disarm();
            return 1;
        }
        const int revents = sleep(sock, wait_ms, err);
        disarm();
        if (revents < 0)
            return revents;
        if (revents != 0) {
            if (int rc = pump(); rc < 0)
                return rc;
        }
        if (ready())
            return 1;
    }
}

} // namespace tailmark::client
