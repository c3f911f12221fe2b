// The shell: thread, channels and signals (see shell.h). The commands are in
// shell_commands.cc.
#include "shell.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include <cmdline.h>
#include <cmdline_socket.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "shell_internal.h"
#include "signals.h"

namespace tailmark::app {

Runtime* g_shell_rt = nullptr;
std::vector<uint64_t> g_shell_requested;

namespace {

const Options* g_opt = nullptr;
std::thread g_thread;
pthread_t g_tid;
std::atomic<bool> g_started{false};
std::atomic<bool> g_thread_done{false};
std::atomic<cmdline*> g_cl{nullptr}; // the prompt, for the signal handler
cmdline* g_stdin_cl = nullptr;       // freed by shell_stop (cmdline_stdin_exit)
struct sigaction g_old_int, g_old_term, g_old_usr1;
bool g_handlers = false;

// SIGINT/SIGTERM: the daemon's handler (counts the request), then the prompt quits.
void chain(const struct sigaction& old, int sig) {
    if (old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL)
        old.sa_handler(sig);
}
void on_quit_signal(int sig) {
    chain(sig == SIGINT ? g_old_int : g_old_term, sig);
    if (cmdline* cl = g_cl.load(std::memory_order_acquire))
        cmdline_quit(cl);
}
// SIGUSR1, sent to the shell thread only by shell_stop: interrupts its read().
void on_wake(int) {}

bool install_handlers() {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: a blocked read() returns EINTR
    sa.sa_handler = on_quit_signal;
    if (sigaction(SIGINT, &sa, &g_old_int) != 0)
        return false;
    if (sigaction(SIGTERM, &sa, &g_old_term) != 0) {
        sigaction(SIGINT, &g_old_int, nullptr);
        return false;
    }
    sa.sa_handler = on_wake;
    if (sigaction(SIGUSR1, &sa, &g_old_usr1) != 0) {
        sigaction(SIGINT, &g_old_int, nullptr);
        sigaction(SIGTERM, &g_old_term, nullptr);
        return false;
    }
    g_handlers = true;
    return true;
}

void restore_handlers() {
    if (!g_handlers)
        return;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
    sigaction(SIGUSR1, &g_old_usr1, nullptr);
    g_handlers = false;
}

void shell_main() {
    const Options& opt = *g_opt;
    if (!opt.cmdline_file.empty()) {
        // cmdline_file_new's cmdline has no output (s_out -1): the parser's
        // own errors (Command not found, Bad arguments) and the echo of each
        // command would be lost. The same, with stdout as the output.
        const int fd = open(opt.cmdline_file.c_str(), O_RDONLY);
        cmdline* cl = fd < 0 ? nullptr : cmdline_new(shell_context(), "tailmark> ", fd, STDOUT_FILENO);
        if (cl == nullptr) {
            fprintf(stderr, "tailmarkd: --cmdline-file %s: cannot open: %s\n", opt.cmdline_file.c_str(),
                    strerror(errno));
            if (fd >= 0)
                close(fd);
        } else {
            cmdline_interact(cl);
            cmdline_free(cl); // closes the file
            printf("\n");
            fflush(stdout);
        }
    }
    if (opt.interactive && g_quit_requests.load(std::memory_order_acquire) == 0) {
        cmdline* cl = cmdline_stdin_new(shell_context(), "tailmark> ");
        if (cl == nullptr) {
            fprintf(stderr, "tailmarkd: -i: cannot start the shell on stdin\n");
        } else {
            g_stdin_cl = cl;
            g_cl.store(cl, std::memory_order_release);
            cmdline_interact(cl); // until quit, EOF, a signal, or shell_stop
        }
        // quit, EOF (a pipe's end, ctrl-D): the same clean shutdown as SIGTERM.
        int zero = 0;
        g_quit_requests.compare_exchange_strong(zero, 1, std::memory_order_acq_rel);
    }
    g_thread_done.store(true, std::memory_order_release);
}

} // namespace

bool shell_start(Runtime& rt, const Options& opt, std::string& err) {
    if (!opt.interactive && opt.cmdline_file.empty())
        return true;
    g_shell_rt = &rt;
    g_opt = &opt;
    if (opt.interactive && !opt.stats_period_set)
        rt.set_stats_period(0); // no stats lines under the prompt unless asked (--stats-period, set stats-period)
    if (!shell_attach_channels(err))
        return false;
    if (opt.interactive)
        rt.plane().gen_on.store(0, std::memory_order_relaxed); // -i: the generator waits for `start`
    if (!install_handlers()) {
        err = std::string("-i: sigaction: ") + strerror(errno);
        shell_detach_channels();
        return false;
    }
    g_thread_done.store(false);
    g_thread = std::thread([] {
        shell_main();
    });
    g_tid = g_thread.native_handle();
    g_started.store(true);
    return true;
}

void shell_stop() {
    if (!g_started.exchange(false))
        return;
    // The thread may block in read() on the terminal or a pipe: quit the
    // prompt and interrupt the read until it is out (a wake-up sent while it
    // was between reads is lost, hence the repeat).
    while (!g_thread_done.load(std::memory_order_acquire)) {
        if (cmdline* cl = g_cl.load(std::memory_order_acquire))
            cmdline_quit(cl);
        pthread_kill(g_tid, SIGUSR1);
        rte_delay_us_sleep(10000);
    }
    g_thread.join();
    g_cl.store(nullptr, std::memory_order_release);
    restore_handlers();
    if (g_stdin_cl != nullptr) {
        cmdline_stdin_exit(g_stdin_cl); // the terminal's settings back, and freed
        g_stdin_cl = nullptr;
        printf("\n");
    }
    shell_detach_channels();
    g_shell_rt = nullptr;
}

} // namespace tailmark::app
