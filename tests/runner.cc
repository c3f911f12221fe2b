// Catch2 v2 runner: starts EAL once, runs the session, cleans EAL up.
// EAL arguments come from TAILMARK_EAL (scripts/test.sh sets it from the
// hugepage check); each run gets its own --file-prefix.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <rte_eal.h>

int main(int argc, char** argv) {
    std::vector<std::string> eal = {argv[0]};
    const char* env = getenv("TAILMARK_EAL");
    std::istringstream in(env ? env : "--no-huge -m 512");
    for (std::string w; in >> w;)
        eal.push_back(w);
    eal.push_back("--no-pci");
    eal.push_back("-l");
    eal.push_back("0-1");
    eal.push_back("--log-level=lib.eal:error");
    eal.push_back("--file-prefix=tm_unit_" + std::to_string(getpid()));
    std::vector<char*> eargv;
    for (auto& s : eal)
        eargv.push_back(s.data());
    if (rte_eal_init(static_cast<int>(eargv.size()), eargv.data()) < 0) {
        fprintf(stderr, "unit tests: rte_eal_init failed (EAL args: %s)\n", env ? env : "default");
        return 2;
    }
    int rc = Catch::Session().run(argc, argv);
    rte_eal_cleanup();
    return rc;
}
