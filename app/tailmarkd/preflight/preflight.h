// tailmarkd --check [EAL args] -- [options]: preflight. Reads the same
// arguments a real start takes and looks at the host as EAL and tailmarkd
// would, without initialising EAL (nothing is taken: no hugepage, no port,
// no socket): hugepages (mounted, free, enough for -m), memlock, each port
// with its driver and the IOMMU/VFIO state, the IOVA mode zero copy needs,
// the MTU against the port (and net_af_packet's frame size), the control
// socket's directory, the secret's file and mode, and the CPUs of -l (do
// they exist, may this process run there, are other busy processes there).
//
// One line per item: "ok", "warn" or "FAIL", the item, what was found, and
// for anything wrong a "fix:" line with the command that fixes it. Exit 0
// when nothing would stop a real start (warnings allowed), 1 otherwise.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace tailmark::app {

// argv as main() got it, with "--check" taken out (argv[0] kept).
int run_preflight(int argc, char** argv, FILE* out);

// The parts of the EAL command line preflight looks at (exposed for tests).
struct EalView {
    std::vector<unsigned> cpus;      // -l, -c, --lcores: the CPUs the lcores run on
    bool cpus_given = false;
    std::string lcore_arg;           // as given, for messages
    bool no_huge = false;
    uint64_t mem_mb = 0;             // -m, or --socket-mem summed (0: not given)
    std::string huge_dir;            // --huge-dir
    std::vector<std::string> vdevs;  // --vdev values
    std::vector<std::string> allow;  // -a/--allow PCI addresses (devargs cut off)
    bool no_pci = false;
    std::string iova_mode;           // --iova-mode
    std::string file_prefix = "rte"; // --file-prefix
    std::string error;               // an argument this could not read
};
EalView parse_eal_view(const std::vector<std::string>& eal);

} // namespace tailmark::app
