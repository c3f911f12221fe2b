// The interactive shell (-i) and --cmdline-file, on librte_cmdline as in
// testpmd: one cmdline_parse_inst_t per command (shell.cc), the prompt
// `tailmark> ` (cmdline_stdin_new, cmdline_interact, cmdline_stdin_exit), a
// command file first when given (cmdline_file_new). Input from a pipe works
// like a terminal; EOF ends the run like `quit`.
//
// The shell runs in its own thread; the main lcore keeps running the control
// loop (Runtime::run) and the data plane keeps running on its lcores. The
// shell only reads counters, and talks to the data plane through single
// atomic stores (start/stop, burst, stats period) and one SP/SC rte_ring per
// flow (`send F SIZE COUNT`), never through a lock the data plane takes.
//
// Signals: SIGINT/SIGTERM keep their handler (a stop request) and also
// cmdline_quit the prompt. `quit` requests a stop like SIGTERM (the
// Runtime's StopRequest).
//
// Its state (thread, prompt, the handlers it replaced, what the commands
// keep) is the Shell's own (ShellState, shell_internal.h). One shell runs at
// a time: librte_cmdline's callbacks and the signal handlers take no context,
// so they reach the running one through one pointer.
#pragma once

#include <memory>
#include <string>

namespace tailmark::app {

class Runtime;
struct Options;
struct ShellState;

class Shell {
public:
    Shell();
    ~Shell(); // stop()
    Shell(const Shell&) = delete;
    Shell& operator=(const Shell&) = delete;

    // With -i or --cmdline-file: sets up the shell's channels to the data
    // plane and starts the shell thread. Call after Runtime::setup, before
    // Runtime::run. False with `err` when something could not be set up.
    bool start(Runtime& rt, const Options& opt, std::string& err);

    // After Runtime::run returned (lcores joined): wakes and joins the shell
    // thread, restores the terminal and the signal handlers, frees the
    // channels. Idempotent; a no-op when the shell was not started.
    void stop();

private:
    std::unique_ptr<ShellState> st_;
};

} // namespace tailmark::app
