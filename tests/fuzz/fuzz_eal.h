// What every fuzz target's LLVMFuzzerInitialize does first: EAL, once per
// process, on one lcore with its own --file-prefix (TAILMARK_EAL: memory
// arguments, default --no-huge -m 512), its runtime directory removed at
// exit; and how a target says its set-up failed.
#pragma once

namespace tmfuzz {

// rte_eal_init for the fuzz binary `argv0`; aborts when it fails.
void init_eal(const char* argv0);
// rte_eal_cleanup, and the runtime directory removed: the target's atexit
// handler calls it last.
void cleanup_eal();

// The harness itself could not be set up (not a finding): says so, with
// rte_errno, and aborts.
[[noreturn]] __attribute__((format(printf, 1, 2))) void env_failure(const char* fmt, ...);

} // namespace tmfuzz
