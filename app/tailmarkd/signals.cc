#include "signals.h"

#include <pthread.h>

#include <csignal>
#include <cstring>

namespace tailmark::app {

std::atomic<int> g_quit_requests{0};
std::atomic<int> g_last_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

namespace {
void on_signal(int sig) {
    g_last_signal.store(sig, std::memory_order_relaxed);
    g_quit_requests.fetch_add(1, std::memory_order_release);
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

bool install_signal_handlers() {
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
