#include "signals.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace tailmark::app {

namespace {
// Where the handler's requests go: a handler takes no argument.
std::atomic<StopRequest*> g_stop{nullptr};
static_assert(std::atomic<StopRequest*>::is_always_lock_free);

void on_signal(int sig) {
    if (StopRequest* s = g_stop.load(std::memory_order_acquire))
        s->signal(sig);
}
} // namespace

void block_async_signals_on_lcore() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGIO);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        sigaddset(&s, sig);
    pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

bool install_signal_handlers(StopRequest& stop) {
    g_stop.store(&stop, std::memory_order_release);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: blocking calls return EINTR
    // A write into a pipe or socket whose reader is gone (an application
    // killed, or one that closed its end of the wake pipe on purpose) is
    // EPIPE, said where it happens: never a signal that ends the daemon and
    // every application on the host with it.
    struct sigaction ign;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    return sigaction(SIGINT, &sa, nullptr) == 0 && sigaction(SIGTERM, &sa, nullptr) == 0 &&
           sigaction(SIGPIPE, &ign, nullptr) == 0;
}

} // namespace tailmark::app
