// Memory for EAL: hugepages mounted, writable and free for -m, and the
// memlock limit that pinned (VFIO, AF_XDP) and locked memory counts against.
#include "preflight_internal.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace tailmark::app::preflight_checks {

namespace {

bool cap_ipc_lock() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("CapEff:", 0) == 0) {
            const uint64_t caps = strtoull(line.c_str() + 7, nullptr, 16);
            return (caps >> 14) & 1; // CAP_IPC_LOCK
        }
    return false;
}

// What the run asks of EAL's memory when -m is not given: tailmarkd's pools
// and rings (the default loopback's four flows: about 50 MiB of DPDK heap;
// a service's sessions more), with room to spare.
constexpr uint64_t kDefaultNeedMb = 256;

} // namespace

void check_hugepages(Report& r, const EalView& e) {
    const uint64_t need = e.mem_mb != 0 ? e.mem_mb : kDefaultNeedMb;
    const std::string need_s = std::to_string(need) + " MiB" + (e.mem_mb != 0 ? " (-m)" : " (the default run)");
    if (e.no_huge) {
        r.item(St::Warn, "hugepages", "--no-huge: EAL runs on " + std::to_string(e.mem_mb ? e.mem_mb : 64) +
                                          " MiB of anonymous memory: slower, and no secondary process "
                                          "(tailmark-consumer, dpdk-dumpcap) can attach",
               "drop --no-huge once hugepages are reserved (see the hugepages item without it)");
        return;
    }
    uint64_t def_kb = 2048;
    {
        std::ifstream f("/proc/meminfo");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("Hugepagesize:", 0) == 0)
                def_kb = strtoull(line.c_str() + 13, nullptr, 10);
    }
    struct HMount {
        std::string dir;
        uint64_t kb;
    };
    std::vector<HMount> hm;
    for (const Mount& m : mounts()) {
        if (m.type != "hugetlbfs")
            continue;
        uint64_t kb = def_kb;
        const size_t p = m.opts.find("pagesize=");
        if (p != std::string::npos) {
            char* end = nullptr;
            kb = strtoull(m.opts.c_str() + p + 9, &end, 10);
            if (*end == 'M')
                kb <<= 10;
            else if (*end == 'G')
                kb <<= 20;
        }
        hm.push_back({m.dir, kb});
    }
    const std::string sys = "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(def_kb) + "kB/nr_hugepages";
    const uint64_t want_pages = (need * 1024 + def_kb - 1) / def_kb;
    if (!e.huge_dir.empty()) {
        auto it = std::find_if(hm.begin(), hm.end(), [&](const HMount& m) { return m.dir == e.huge_dir; });
        if (it == hm.end()) {
            r.item(St::Fail, "hugepages", "--huge-dir " + e.huge_dir + " is not a hugetlbfs mount point" +
                                              (hm.empty() ? std::string(" (none is mounted)")
                                                          : " (hugetlbfs is mounted on " + hm[0].dir + ")"),
                   "mkdir -p " + e.huge_dir + " && mount -t hugetlbfs nodev " + e.huge_dir +
                       "\nor drop --huge-dir" + (hm.empty() ? std::string() : " (EAL finds " + hm[0].dir + " itself)"));
            return;
        }
        hm = {*it};
    }
    if (hm.empty()) {
        r.item(St::Fail, "hugepages", "no hugetlbfs is mounted: EAL has nowhere to map hugepages from",
               "mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages\n"
               "or run without hugepages (slower): --no-huge -m 1024");
        return;
    }
    // Free pages of each mounted size; DPDK uses them all.
    uint64_t free_mb = 0, total_pages = 0;
    std::string where;
    for (const HMount& m : hm) {
        const std::string d = "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(m.kb) + "kB/";
        uint64_t nr = 0, fr = 0;
        read_u64(d + "nr_hugepages", nr);
        read_u64(d + "free_hugepages", fr);
        free_mb += fr * m.kb / 1024;
        total_pages += nr;
        if (!where.empty())
            where += ", ";
        where += std::to_string(fr) + " of " + std::to_string(nr) + " " +
                 (m.kb >= 1024 * 1024 ? std::to_string(m.kb >> 20) + " GiB" : std::to_string(m.kb >> 10) + " MiB") +
                 " pages free on " + m.dir;
        if (geteuid() != 0 && access(m.dir.c_str(), W_OK | X_OK) != 0) {
            r.item(St::Fail, "hugepages", m.dir + " is not writable by uid " + std::to_string(geteuid()) +
                                              ": EAL cannot create its hugepage files there",
                   "run as root, or: chown " + std::to_string(geteuid()) + " " + m.dir);
            return;
        }
    }
    if (free_mb < need) {
        const uint64_t short_pages = (need - free_mb) * 1024 / def_kb + 1;
        uint64_t nr = 0;
        read_u64(sys, nr);
        r.item(St::Fail, "hugepages",
               where + ": " + std::to_string(free_mb) + " MiB free, this run needs " + need_s +
                   (total_pages == 0 ? ": none is reserved" : ""),
               "echo " + std::to_string(std::max(nr + short_pages, want_pages)) + " > " + sys +
                   "   (for good: vm.nr_hugepages in /etc/sysctl.d/)\n"
                   "files of dead DPDK processes keep pages: ls " + hm[0].dir + "; rm " + hm[0].dir +
                   "/<prefix>map_* of prefixes no process runs\n"
                   "or run without hugepages (slower): --no-huge -m 1024");
        return;
    }
    r.item(St::Ok, "hugepages", where + ": " + std::to_string(free_mb) + " MiB free, this run needs " + need_s);
}

void check_memlock(Report& r, const EalView& e, bool pinning) {
    rlimit rl{};
    getrlimit(RLIMIT_MEMLOCK, &rl);
    const bool cap = cap_ipc_lock();
    auto mib = [](rlim_t v) {
        return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v >> 20) + " MiB";
    };
    if (cap || rl.rlim_cur == RLIM_INFINITY) {
        r.item(St::Ok, "memlock", std::string("RLIMIT_MEMLOCK ") + mib(rl.rlim_cur) +
                                      (cap ? ", and CAP_IPC_LOCK (no limit applies)" : ""));
        return;
    }
    const uint64_t need = (e.mem_mb != 0 ? e.mem_mb : kDefaultNeedMb) << 20;
    const std::string fix = "ulimit -l unlimited   (a shell; systemd: LimitMEMLOCK=infinity, as tailmarkd@.service has)\n"
                            "or /etc/security/limits.d/tailmark.conf: <user> - memlock unlimited";
    if (rl.rlim_cur < need) {
        r.item(pinning ? St::Fail : St::Warn, "memlock",
               "RLIMIT_MEMLOCK " + mib(rl.rlim_cur) + " without CAP_IPC_LOCK: " +
                   (pinning ? "VFIO and AF_XDP pin the memory they DMA to, " + std::to_string(need >> 20) + " MiB here"
                            : "hugepage memory is locked as it is used"),
               fix);
        return;
    }
    r.item(St::Ok, "memlock", "RLIMIT_MEMLOCK " + mib(rl.rlim_cur));
}

} // namespace tailmark::app::preflight_checks
