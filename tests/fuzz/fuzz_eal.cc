#include "fuzz_eal.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

namespace tmfuzz {

void env_failure(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tailmark fuzz: harness set-up failed: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (rte_errno %d: %s)\n", rte_errno, rte_strerror(rte_errno));
    va_end(ap);
    fflush(stderr);
    abort();
}

void init_eal(const char* argv0) {
    std::vector<std::string> eal = {argv0};
    const char* env = getenv("TAILMARK_EAL");
    std::istringstream in(env ? env : "--no-huge -m 512");
    bool no_huge = false;
    for (std::string w; in >> w;) {
        no_huge = no_huge || w == "--no-huge";
        eal.push_back(w);
    }
    if (!no_huge)
        eal.push_back("--huge-unlink"); // no hugepage files left behind, even after a crash
    for (const char* a : {"--no-pci", "--no-telemetry", "-l", "0", "--log-level=lib.eal:error"})
        eal.push_back(a);
    eal.push_back("--file-prefix=tm_fuzz_" + std::to_string(getpid()));
    std::vector<char*> eargv;
    for (auto& s : eal)
        eargv.push_back(s.data());
    if (rte_eal_init(static_cast<int>(eargv.size()), eargv.data()) < 0)
        env_failure("rte_eal_init (TAILMARK_EAL='%s')", env ? env : "");
}

// EAL leaves its runtime directory (/var/run/dpdk/<prefix>) behind; this
// process's prefix is its own, so the target removes it once EAL is done
// (cleanup_eal, from its atexit handler).
void cleanup_eal() {
    static const std::string runtime_dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    std::error_code ec;
    if (runtime_dir.find("tm_fuzz_") != std::string::npos)
        std::filesystem::remove_all(runtime_dir, ec);
}

} // namespace tmfuzz
