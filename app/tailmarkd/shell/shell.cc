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

namespace tailmark::app {

ShellState* g_shell = nullptr;

namespace {

// SIGINT/SIGTERM: the daemon's handler (a stop request), then the prompt quits.
void chain(const struct sigaction& old, int sig) {
    if (old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL)
        old.sa_handler(sig);
}
void on_quit_signal(int sig) {
    ShellState& sh = *g_shell; // set before the handlers, cleared after them
    chain(sig == SIGINT ? sh.old_int : sh.old_term, sig);
    if (cmdline* cl = sh.cl.load(std::memory_order_acquire))
        cmdline_quit(cl);
}
// SIGUSR1, sent to the shell thread only by Shell::stop: interrupts its read().
void on_wake(int) {}

bool install_handlers(ShellState& sh) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: a blocked read() returns EINTR
    sa.sa_handler = on_quit_signal;
    if (sigaction(SIGINT, &sa, &sh.old_int) != 0)
        return false;
    if (sigaction(SIGTERM, &sa, &sh.old_term) != 0) {
        sigaction(SIGINT, &sh.old_int, nullptr);
        return false;
    }
    sa.sa_handler = on_wake;
    if (sigaction(SIGUSR1, &sa, &sh.old_usr1) != 0) {
        sigaction(SIGINT, &sh.old_int, nullptr);
        sigaction(SIGTERM, &sh.old_term, nullptr);
        return false;
    }
    sh.handlers = true;
    return true;
}

void restore_handlers(ShellState& sh) {
    if (!sh.handlers)
        return;
    sigaction(SIGINT, &sh.old_int, nullptr);
    sigaction(SIGTERM, &sh.old_term, nullptr);
    sigaction(SIGUSR1, &sh.old_usr1, nullptr);
    sh.handlers = false;
}

void shell_main(ShellState& sh) {
    const Options& opt = *sh.opt;
    StopRequest& stop = sh.rt->stop_request();
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
    if (opt.interactive && stop.requests() == 0) {
        cmdline* cl = cmdline_stdin_new(shell_context(), "tailmark> ");
        if (cl == nullptr) {
            fprintf(stderr, "tailmarkd: -i: cannot start the shell on stdin\n");
        } else {
            sh.stdin_cl = cl;
            sh.cl.store(cl, std::memory_order_release);
            cmdline_interact(cl); // until quit, EOF, a signal, or Shell::stop
        }
        // quit, EOF (a pipe's end, ctrl-D): the same clean shutdown as SIGTERM.
        stop.drain();
    }
    sh.thread_done.store(true, std::memory_order_release);
}

} // namespace

Shell::Shell() : st_(std::make_unique<ShellState>()) {}

Shell::~Shell() {
    stop();
    if (g_shell == st_.get())
        g_shell = nullptr;
}

bool Shell::start(Runtime& rt, const Options& opt, std::string& err) {
    if (!opt.interactive && opt.cmdline_file.empty())
        return true;
    ShellState& sh = *st_;
    sh.rt = &rt;
    sh.opt = &opt;
    g_shell = &sh;
    if (opt.interactive && !opt.stats_period_set)
        rt.set_stats_period(0); // no stats lines under the prompt unless asked (--stats-period, set stats-period)
    if (!shell_attach_channels(sh, err))
        return false;
    if (opt.interactive)
        rt.plane().gen_on.store(0, std::memory_order_relaxed); // -i: the generator waits for `start`
    if (!install_handlers(sh)) {
        err = std::string("-i: sigaction: ") + strerror(errno);
        shell_detach_channels(sh);
        return false;
    }
    sh.thread_done.store(false);
    sh.thread = std::thread([&sh] {
        shell_main(sh);
    });
    sh.tid = sh.thread.native_handle();
    sh.started.store(true);
    return true;
}

void Shell::stop() {
    ShellState& sh = *st_;
    if (!sh.started.exchange(false))
        return;
    // The thread may block in read() on the terminal or a pipe: quit the
    // prompt and interrupt the read until it is out (a wake-up sent while it
    // was between reads is lost, hence the repeat).
    while (!sh.thread_done.load(std::memory_order_acquire)) {
        if (cmdline* cl = sh.cl.load(std::memory_order_acquire))
            cmdline_quit(cl);
        pthread_kill(sh.tid, SIGUSR1);
        rte_delay_us_sleep(10000);
    }
    sh.thread.join();
    sh.cl.store(nullptr, std::memory_order_release);
    restore_handlers(sh);
    if (sh.stdin_cl != nullptr) {
        cmdline_stdin_exit(sh.stdin_cl); // the terminal's settings back, and freed
        sh.stdin_cl = nullptr;
        printf("\n");
    }
    shell_detach_channels(sh);
    sh.rt = nullptr;
    g_shell = nullptr;
}

} // namespace tailmark::app
