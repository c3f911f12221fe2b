// tailmarkd [EAL args] -- [options]
//
// Parse the options (before EAL: a bad configuration costs no hugepage
// files), initialise EAL, set everything up, run the lcores, then tear down
// in the conventions' order: lcores joined, ports stopped and closed, pdump
// uninitialised, memzones freed, rte_eal_cleanup.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include <rte_eal.h>
#include <rte_log.h>
#include <rte_errno.h>
#include <rte_pdump.h>

#include "bench/summary.h"
#include "eal_files.h"
#include "options/options.h"
#include "preflight/preflight.h"
#include "run/runtime.h"
#include "shell/shell.h"
#include "signals.h"
#include "telemetry/telemetry.h"
#include "tailmark/log.h"

using namespace tailmark::app;

namespace {

// The secret, once parsed, is blanked where other processes could read it:
// --secret's value in our arguments (/proc/PID/cmdline, every local user)
// and TAILMARK_SECRET in our environment (/proc/PID/environ, our uid).
void hide_secret(int argc, char** argv, int dash, const Options& opt) {
    auto blank = [](char* p) {
        for (; *p != '\0'; p++)
            *p = 'x';
    };
    for (int i = dash + 1; i < argc; i++) {
        if (strcmp(argv[i], "--secret") == 0 && i + 1 < argc)
            blank(argv[++i]);
        else if (strncmp(argv[i], "--secret=", 9) == 0)
            blank(argv[i] + 9);
    }
    if (char* env = getenv("TAILMARK_SECRET"); env != nullptr) {
        blank(env);
        unsetenv("TAILMARK_SECRET");
    }
    if (opt.secret_from == Options::SecretFrom::CommandLine)
        fprintf(stderr, "tailmarkd: warning: --secret on the command line was readable by every local user in "
                        "/proc/%d/cmdline until now; pass it with --secret-file or TAILMARK_SECRET\n",
                static_cast<int>(getpid()));
}

} // namespace

int main(int argc, char** argv) {
    // tailmarkd --check [EAL args] -- [options]: preflight, no EAL (preflight.h).
    if (argc > 1 && strcmp(argv[1], "--check") == 0) {
        std::vector<char*> v{argv[0]};
        v.insert(v.end(), argv + 2, argv + argc);
        const int rc = run_preflight(static_cast<int>(v.size()), v.data(), stdout);
        int dash = argc;
        for (int i = 2; i < argc; i++)
            if (strcmp(argv[i], "--") == 0) {
                dash = i;
                break;
            }
        Options blank;
        hide_secret(argc, argv, dash, blank);
        return rc;
    }
    // EAL arguments before "--", ours after it.
    int dash = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            dash = i;
            break;
        }
    }
    std::vector<std::string> args;
    for (int i = dash + 1; i < argc; i++)
        args.emplace_back(argv[i]);
    if (dash == argc && argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        args.emplace_back("--help");

    Options opt;
    ParseResult pr = parse_options(args, opt);
    hide_secret(argc, argv, dash, opt);
    if (pr.action == ParseResult::Action::ExitError) {
        fprintf(stderr, "tailmarkd: %s\n", pr.error.c_str());
        return 2;
    }
    if (pr.action == ParseResult::Action::ExitOk) {
        if (opt.dump_config)
            fputs(dump_ini(opt).c_str(), stdout);
        else
            print_help("tailmarkd");
        return 0;
    }

    // The --config file's [eal] args first: the command line's override them.
    std::vector<std::string> ini_eal = split_eal_args(opt.eal_args);
    std::vector<char*> eal_argv{argv[0]};
    for (std::string& a : ini_eal)
        eal_argv.push_back(a.data());
    eal_argv.insert(eal_argv.end(), argv + 1, argv + dash);
    const int eal_argc = static_cast<int>(eal_argv.size());
    eal_argv.push_back(nullptr);
    // DPDK's default log stream writes each line to stderr and to syslog:
    // under systemd the journal took both, every line twice. stderr alone
    // (journald, a terminal or a test's log file reads it).
    rte_openlog_stream(stderr);
    if (rte_eal_init(eal_argc, eal_argv.data()) < 0) {
        fprintf(stderr, "tailmarkd: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    block_async_signals_on_lcore(); // after EAL created its control threads, which take them
    // The run's stop request: signals, the shell and this function ask on it,
    // the Runtime reads it. Static: the handlers may run until the process ends.
    static StopRequest stop;
    if (!install_signal_handlers(stop)) {
        fprintf(stderr, "tailmarkd: sigaction: %s\n", strerror(errno));
        const std::string runtime_dir = rte_eal_get_runtime_dir();
        rte_eal_cleanup();
        remove_eal_files(runtime_dir);
        return 1;
    }
    const bool pdump = rte_pdump_init() == 0; // dpdk-dumpcap --file-prefix=... can capture

    int rc = 0;
    {
        Runtime rt(opt, stop);
        SetupError e;
        if (!rt.setup(e)) {
            fprintf(stderr, "tailmarkd: %s\n", e.message.c_str());
            fflush(stdout);
            rc = e.exit_code;
        } else {
            telemetry_attach(rt); // /tailmark/* for dpdk-telemetry.py; a refusal is logged, not fatal
            std::string shell_err;
            Shell shell;
            const bool shell_ok = shell.start(rt, opt, shell_err); // -i, --cmdline-file: the shell thread
            if (!shell_ok) {
                fprintf(stderr, "tailmarkd: %s\n", shell_err.c_str());
                stop.now(); // the run stops at once
            }
            rt.run(); // returns with every lcore joined
            shell.stop(); // the prompt ends and the terminal is restored before the summary
            const Results r = rt.results();
            print_summary(r, stdout);
            if (!opt.summary_json.empty()) {
                std::string err;
                if (!write_summary_json(r, opt.summary_json, err)) {
                    fprintf(stderr, "tailmarkd: --summary-json: %s\n", err.c_str());
                    rc = 1;
                }
            }
            rc = r.ok && rc == 0 && shell_ok ? 0 : 1;
            if (rt.refused_exit() != 0) // the peer refused our settings: a configuration error
                rc = rt.refused_exit();
        }
        telemetry_detach(); // the commands stop reading rt before it is torn down
        rt.teardown(); // ports stopped and closed, rings and memzones freed
    }
    if (pdump)
        rte_pdump_uninit();
    const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    remove_eal_files(runtime_dir); // hugepage files and /var/run/dpdk/<prefix>
    return rc;
}
