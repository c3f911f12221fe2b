// tailmark's rte_telemetry commands (read with DPDK's dpdk-telemetry.py):
//   /tailmark/stats    totals (the summary's counters, live)
//   /tailmark/flow,F   one flow's state (cursors, window, stalled)
//   /tailmark/drops    drop counts by reason
//   /tailmark/lcores   roles and busy/idle TSC cycles per lcore
// The callbacks run on DPDK's telemetry thread and only read counters. They
// see a Runtime between telemetry_attach() and telemetry_detach() (under a
// mutex the data plane never takes); outside that they answer an error.
#pragma once

namespace tailmark::app {

class Runtime;

// Registers the commands (once per process) and points them at rt.
// False when rte_telemetry refused a registration (logged).
bool telemetry_attach(const Runtime& rt);
// Before the Runtime's teardown: the commands stop reading it.
void telemetry_detach();

} // namespace tailmark::app
