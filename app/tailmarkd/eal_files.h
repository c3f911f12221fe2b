// What EAL leaves on disk after rte_eal_cleanup: its hugepage files
// (<hugetlbfs mount>/<prefix>map_<n>, which keep their pages allocated) and
// its runtime directory (/var/run/dpdk/<prefix>). A daemon that exits
// cleanly removes both, so the next run -- with any --file-prefix -- finds
// every hugepage free. (A new primary with the same prefix would reclaim
// them itself; one with another prefix would not.)
#pragma once

#include <string>

namespace tailmark::app {

// Call after rte_eal_cleanup with the value rte_eal_get_runtime_dir() had.
// Returns the number of hugepage files removed.
int remove_eal_files(const std::string& runtime_dir);

} // namespace tailmark::app
