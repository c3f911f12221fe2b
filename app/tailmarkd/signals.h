// SIGINT/SIGTERM: installed with sigaction, without SA_RESTART. The handler
// only makes a request on the daemon's StopRequest (async-signal-safe); the
// control loop turns the first into a drain and the second into an
// immediate stop.
#pragma once

#include "stop_request.h"

namespace tailmark::app {

// False (errno set) when sigaction fails. The handlers request on `stop`,
// which outlives them (main's).
bool install_signal_handlers(StopRequest& stop);

// Blocks SIGIO and the real-time signals in the calling lcore thread.
// net_tap asks the kernel for a signal (F_SETOWN + F_SETSIG: SIGRTMIN+1 in
// 22.11, queued once per packet) on every packet its fds receive, and counts
// them in a handler. Process-directed, they land on the main thread first: in
// a packet storm the main lcore spends its time in that handler and the
// control loop starves (a run that never stops). Blocked on the lcores, they
// go to EAL's control threads, which only wait in syscalls.
void block_async_signals_on_lcore();

} // namespace tailmark::app
