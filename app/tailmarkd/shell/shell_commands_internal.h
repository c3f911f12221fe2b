// Shared by the shell's command files (shell_commands.cc, shell_show.cc):
// the running shell's handles, the output macro, the `show` commands.
#pragma once

#include <cstdint>
#include <cstdio>

#include <cmdline.h>
#include <cmdline_parse.h>

#include "shell_internal.h"

namespace tailmark::app::shell_cmd {

inline ShellState& sh() { return *g_shell; }
inline Runtime& rt() { return *sh().rt; }
inline const Options& opt() { return rt().options(); }
inline Plane& plane() { return rt().plane(); }
// Flows the shell addresses: the configured ones (loopback, send), or every
// session's so far (recv).
inline uint32_t nflows() { return rt().flow_count(); }

// Commands print to stdout, as testpmd's do (a command file's cmdline has no
// output fd of its own), flushed so that the output and the prompt keep their order.
#define OUT(...) ((void)cl, printf(__VA_ARGS__), fflush(stdout))

// A command's `data` when its optional last token was given (show
// completions F N, wait idle S).
extern int kWithN;

// shell_show.cc: the `show` and `clear` commands, listed in the context.
extern cmdline_parse_inst_t cmd_port_stats;
extern cmdline_parse_inst_t cmd_port_info;
extern cmdline_parse_inst_t cmd_show_flow;
extern cmdline_parse_inst_t cmd_show_compl;
extern cmdline_parse_inst_t cmd_show_compl_n_inst;
extern cmdline_parse_inst_t cmd_show_drops;
extern cmdline_parse_inst_t cmd_show_config;
extern cmdline_parse_inst_t cmd_show_lcores;

} // namespace tailmark::app::shell_cmd
