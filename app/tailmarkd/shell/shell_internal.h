// Shared by shell.cc (thread, signals) and shell_commands.cc (the commands).
#pragma once

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <cmdline.h>
#include <cmdline_parse.h>

#include "run/runtime.h"

namespace tailmark::app {

// One shell's state, owned by its Shell (shell.h).
struct ShellState {
    Runtime* rt = nullptr;               // set while the shell runs
    const Options* opt = nullptr;
    std::vector<uint64_t> requested;     // per flow: messages asked for with `send` (shell thread)
    std::thread thread;
    pthread_t tid{};
    std::atomic<bool> started{false};
    std::atomic<bool> thread_done{false};
    std::atomic<cmdline*> cl{nullptr};   // the prompt, for the signal handler
    cmdline* stdin_cl = nullptr;         // freed by Shell::stop (cmdline_stdin_exit)
    struct sigaction old_int{}, old_term{}, old_usr1{};
    bool handlers = false;
};

// The running shell (null when none): librte_cmdline's command callbacks and
// the signal handlers take no context of their own, so they find it here.
// Set by Shell::start before the thread and the handlers, cleared after both.
extern ShellState* g_shell;

cmdline_parse_ctx_t* shell_context();
// Per flow: the `send` ring and the message-length records (FlowCtx::send_q,
// FlowCtx::sizes). Before the lcores are launched / after they are joined.
bool shell_attach_channels(ShellState& sh, std::string& err);
void shell_detach_channels(ShellState& sh);

} // namespace tailmark::app
