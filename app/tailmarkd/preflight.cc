#include "preflight.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "options.h"

namespace tailmark::app {

namespace {

enum class St { Ok, Warn, Fail };

struct Report {
    FILE* out;
    int ok = 0, warn = 0, fail = 0;
    void item(St s, const std::string& what, const std::string& text, const std::string& fix = {}) {
        const char* tag = s == St::Ok ? "ok" : s == St::Warn ? "warn" : "FAIL";
        (s == St::Ok ? ok : s == St::Warn ? warn : fail)++;
        fprintf(out, "%-5s %-10s %s\n", tag, what.c_str(), text.c_str());
        if (!fix.empty()) {
            // One "fix:" line per command (a fix of several steps has several).
            std::istringstream ss(fix);
            std::string line;
            bool first = true;
            while (std::getline(ss, line)) {
                fprintf(out, "%-16s %s %s\n", "", first ? "fix:" : "    ", line.c_str());
                first = false;
            }
        }
        fflush(out);
    }
};

std::string trim(std::string s) {
    while (!s.empty() && isspace(static_cast<unsigned char>(s.back())))
        s.pop_back();
    size_t b = 0;
    while (b < s.size() && isspace(static_cast<unsigned char>(s[b])))
        b++;
    return s.substr(b);
}

bool read_text(const std::string& path, std::string& out) {
    std::ifstream f(path);
    if (!f)
        return false;
    std::stringstream ss;
    ss << f.rdbuf();
    out = trim(ss.str());
    return true;
}

bool read_u64(const std::string& path, uint64_t& v) {
    std::string s;
    if (!read_text(path, s) || s.empty())
        return false;
    char* end = nullptr;
    errno = 0;
    v = strtoull(s.c_str(), &end, 0);
    return errno == 0 && end != s.c_str();
}

bool exists(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

std::string base_name(const std::string& p) {
    const size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

// readlink of a sysfs link's last component ("" when none).
std::string link_name(const std::string& p) {
    char buf[512];
    const ssize_t n = readlink(p.c_str(), buf, sizeof(buf) - 1);
    if (n <= 0)
        return {};
    buf[n] = '\0';
    return base_name(buf);
}

// "0-3,5" -> {0,1,2,3,5}; false on anything else.
bool parse_cpu_list(const std::string& s, std::vector<unsigned>& out) {
    std::stringstream ss(s);
    std::string item;
    if (trim(s).empty())
        return false;
    while (std::getline(ss, item, ',')) {
        item = trim(item);
        char* end = nullptr;
        const unsigned long a = strtoul(item.c_str(), &end, 10);
        if (end == item.c_str())
            return false;
        unsigned long b = a;
        if (*end == '-') {
            const char* p = end + 1;
            b = strtoul(p, &end, 10);
            if (end == p || b < a)
                return false;
        }
        if (*end != '\0' || b > 4096)
            return false;
        for (unsigned long c = a; c <= b; c++)
            out.push_back(static_cast<unsigned>(c));
    }
    return true;
}

std::string cpu_list_str(const std::vector<unsigned>& v) {
    std::string r;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1)
            j++;
        if (!r.empty())
            r.push_back(',');
        r.append(std::to_string(v[i]));
        if (j > i) {
            r.push_back('-');
            r.append(std::to_string(v[j]));
        }
        i = j + 1;
    }
    return r.empty() ? "none" : r;
}

struct Mount {
    std::string dev, dir, type, opts;
};
std::vector<Mount> mounts() {
    std::vector<Mount> v;
    std::ifstream f("/proc/mounts");
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream ss(line);
        Mount m;
        if (ss >> m.dev >> m.dir >> m.type >> m.opts)
            v.push_back(m);
    }
    return v;
}

// A devargs string "name,k=v,k2=v2" split.
struct DevArgs {
    std::string name;
    std::map<std::string, std::string> kv;
};
DevArgs split_devargs(const std::string& s) {
    DevArgs d;
    std::stringstream ss(s);
    std::string item;
    bool first = true;
    while (std::getline(ss, item, ',')) {
        if (first) {
            d.name = trim(item);
            first = false;
            continue;
        }
        const size_t eq = item.find('=');
        if (eq == std::string::npos)
            d.kv[trim(item)] = "";
        else
            d.kv[trim(item.substr(0, eq))] = trim(item.substr(eq + 1));
    }
    return d;
}

uint64_t kv_u64(const DevArgs& d, const char* k, uint64_t def) {
    auto it = d.kv.find(k);
    if (it == d.kv.end() || it->second.empty())
        return def;
    return strtoull(it->second.c_str(), nullptr, 0);
}

// The vdev drivers tailmarkd is used with, by name prefix (EAL matches a
// vdev's name against its drivers' names and aliases the same way).
struct VdevKind {
    const char* prefix;
    const char* driver; // DPDK's driver name
    const char* lib;    // its plugin
    const char* deb;    // the Debian package that ships it
};
constexpr VdevKind kVdevs[] = {
    {"net_af_xdp", "net_af_xdp", "librte_net_af_xdp", "librte-net-af-xdp23"},
    {"eth_af_xdp", "net_af_xdp", "librte_net_af_xdp", "librte-net-af-xdp23"},
    {"net_af_packet", "net_af_packet", "librte_net_af_packet", "librte-net-af-packet23"},
    {"eth_af_packet", "net_af_packet", "librte_net_af_packet", "librte-net-af-packet23"},
    {"net_ring", "net_ring", "librte_net_ring", "librte-net-ring23"},
    {"eth_ring", "net_ring", "librte_net_ring", "librte-net-ring23"},
    {"net_null", "net_null", "librte_net_null", "librte-net-null23"},
    {"eth_null", "net_null", "librte_net_null", "librte-net-null23"},
    {"net_tap", "net_tap", "librte_net_tap", "librte-net-tap23"},
    {"net_pcap", "net_pcap", "librte_net_pcap", "librte-net-pcap23"},
    {"net_memif", "net_memif", "librte_net_memif", "librte-net-memif23"},
};

const VdevKind* vdev_kind(const std::string& name) {
    for (const VdevKind& k : kVdevs)
        if (name.rfind(k.prefix, 0) == 0)
            return &k;
    return nullptr;
}

// The PMD plugin directories EAL loads from (Debian: /usr/lib/<triplet>/dpdk/pmds-23.0).
std::vector<std::string> pmd_dirs() {
    std::vector<std::string> v;
    glob_t g{};
    if (glob("/usr/lib/*/dpdk/pmds-*", GLOB_ONLYDIR, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++)
            v.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    return v;
}

// Drivers whose AF_XDP sockets can run in zero-copy mode (kernel 6.x).
bool xdp_zero_copy_driver(const std::string& drv) {
    static const std::set<std::string> k = {"ice", "i40e", "ixgbe", "igc", "igb", "mlx5_core", "stmmac",
                                            "ixgbevf", "idpf", "virtio_net", "bnxt_en", "iavf"};
    return k.count(drv) != 0;
}

std::string fmt_mode(mode_t m) {
    char b[8];
    snprintf(b, sizeof(b), "%04o", static_cast<unsigned>(m & 07777));
    return b;
}

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

// --- the items -------------------------------------------------------------------

// What the run asks of EAL's memory when -m is not given: tailmarkd's pools
// and rings (the default loopback's four flows: about 50 MiB of DPDK heap;
// a service's sessions more), with room to spare.
constexpr uint64_t kDefaultNeedMb = 256;

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

struct PortPlan {
    bool any = false;         // a port was named (vdev or PCI)
    bool pci = false;         // a PCI port will be probed
    bool all_virtual = true;  // every port on the vdev bus
    bool vfio = false, uio = false, kernel_bound = false;
    bool pinning = false;     // VFIO or AF_XDP: pinned memory
    bool no_multiseg = false; // a port that sends no chained mbufs (net_af_xdp): service mode copies
};

std::string iface_fix_up(const std::string& i) { return "ip link set dev " + i + " up"; }

// A kernel interface an af_packet or af_xdp port drives: exists, up, its MTU.
bool check_iface(Report& r, const std::string& what, const std::string& iface, const Options* o, uint32_t& ifmtu) {
    const std::string d = "/sys/class/net/" + iface;
    if (iface.empty()) {
        r.item(St::Fail, what, "no iface= given", "--vdev=" + what + ",iface=<interface>");
        return false;
    }
    if (!exists(d)) {
        r.item(St::Fail, what, "interface " + iface + " does not exist (in this network namespace)",
               "ip link show   (the names here), or run in the namespace that has it: ip netns exec NS tailmarkd ...");
        return false;
    }
    uint64_t flags = 0, mtu = 0;
    read_u64(d + "/flags", flags);
    read_u64(d + "/mtu", mtu);
    ifmtu = static_cast<uint32_t>(mtu);
    if ((flags & 1) == 0) { // IFF_UP
        r.item(St::Fail, what, "interface " + iface + " is down", iface_fix_up(iface));
        return false;
    }
    if (o != nullptr && mtu != 0 && o->mtu > mtu) {
        r.item(St::Fail, "mtu", "--mtu " + std::to_string(o->mtu) + " is above " + iface + "'s MTU " +
                                    std::to_string(mtu) + ": frames that large never arrive",
               "ip link set dev " + iface + " mtu " + std::to_string(o->mtu) + "   (and its peer's)\nor --mtu " +
                   std::to_string(mtu));
        return false;
    }
    return true;
}

void check_vdev(Report& r, const std::string& arg, const Options* o, PortPlan& plan) {
    const DevArgs d = split_devargs(arg);
    const VdevKind* k = vdev_kind(d.name);
    plan.any = true;
    if (k == nullptr) {
        r.item(St::Warn, "port", "--vdev " + d.name + ": a driver preflight does not know; not checked");
        return;
    }
    const std::vector<std::string> dirs = pmd_dirs();
    bool have = dirs.empty(); // no plugin directory: a static DPDK, nothing to look for
    for (const std::string& dir : dirs)
        have = have || exists(dir + "/" + k->lib + ".so");
    if (!have) {
        r.item(St::Fail, "port", "--vdev " + d.name + ": the " + k->driver + " driver (" + k->lib +
                                     ".so) is not installed in " + dirs[0],
               std::string("apt-get install ") + k->deb);
        return;
    }
    const std::string drv = k->driver;
    if (drv == "net_af_packet") {
        const std::string iface = d.kv.count("iface") ? d.kv.at("iface") : "";
        uint32_t ifmtu = 0;
        if (!check_iface(r, "port", iface, o, ifmtu))
            return;
        const uint64_t framesz = kv_u64(d, "framesz", 2048);
        const uint32_t mtu = o != nullptr ? o->mtu : 1500;
        const uint64_t frame = mtu + 14;
        // runtime.cc's rule: past the 1518-byte frame af_packet reports, its
        // ring frame holds frame + 80 bytes and is a multiple of 512.
        if (frame > 1518 && (framesz < frame + 80 || framesz % 512 != 0)) {
            const uint64_t want = (frame + 80 + 511) / 512 * 512;
            r.item(St::Fail, "mtu", "--mtu " + std::to_string(mtu) + " needs net_af_packet's framesz >= " +
                                        std::to_string(want) + ", in steps of 512 (it is " + std::to_string(framesz) + ")",
                   "--vdev=" + d.name + ",iface=" + iface + ",framesz=" + std::to_string(want) +
                       ",blocksz=" + std::to_string(want * 8) + "\nor --mtu 1500");
            return;
        }
        r.item(St::Ok, "port", "--vdev " + d.name + ": net_af_packet on " + iface + " (up, MTU " +
                                   std::to_string(ifmtu) + "), frames of " + std::to_string(framesz) + " B: --mtu " +
                                   std::to_string(mtu) + " fits");
        return;
    }
    if (drv == "net_af_xdp") {
        plan.pinning = plan.no_multiseg = true;
        const std::string iface = d.kv.count("iface") ? d.kv.at("iface") : "";
        uint32_t ifmtu = 0;
        if (!check_iface(r, "port", iface, o, ifmtu))
            return;
        const uint64_t q0 = kv_u64(d, "start_queue", 0), nq = kv_u64(d, "queue_count", 1);
        unsigned rxq = 0;
        if (DIR* dir = opendir(("/sys/class/net/" + iface + "/queues").c_str())) {
            while (dirent* de = readdir(dir))
                rxq += strncmp(de->d_name, "rx-", 3) == 0;
            closedir(dir);
        }
        if (rxq != 0 && q0 + nq > rxq) {
            r.item(St::Fail, "port", "--vdev " + d.name + ": queues " + std::to_string(q0) + ".." +
                                         std::to_string(q0 + nq - 1) + " of " + iface + ", which has " +
                                         std::to_string(rxq) + " rx queue(s)",
                   "ethtool -L " + iface + " combined " + std::to_string(q0 + nq) + "\nor start_queue=0,queue_count=" +
                       std::to_string(std::min<uint64_t>(nq, rxq)));
            return;
        }
        // One AF_XDP frame is one page: DPDK 22.11's net_af_xdp takes an MTU
        // of 3542 at most (no XDP multi-buffer); an interface may allow less
        // under XDP (veth: about 3500).
        constexpr uint32_t kXdpMaxMtu = 3542;
        const uint32_t mtu = o != nullptr ? o->mtu : 1500;
        if (mtu > kXdpMaxMtu) {
            r.item(St::Fail, "mtu", "--mtu " + std::to_string(mtu) + ": net_af_xdp's frames are one page: MTU " +
                                        std::to_string(kXdpMaxMtu) + " at most",
                   "--mtu " + std::to_string(std::min(kXdpMaxMtu, ifmtu ? ifmtu : kXdpMaxMtu)) +
                       "   (and ip link set dev " + iface + " mtu " + std::to_string(kXdpMaxMtu) + " or less)");
            return;
        }
        const std::string kdrv = link_name("/sys/class/net/" + iface + "/device/driver");
        const std::string drvname = kdrv.empty() ? (exists("/sys/class/net/" + iface + "/device") ? "?" : "virtual") : kdrv;
        const bool zc = !d.kv.count("force_copy") && xdp_zero_copy_driver(kdrv);
        r.item(St::Ok, "port", "--vdev " + d.name + ": net_af_xdp on " + iface + " (driver " + drvname + ", up, MTU " +
                                   std::to_string(ifmtu) + "), queues " + std::to_string(q0) + ".." +
                                   std::to_string(q0 + nq - 1) + " of " + std::to_string(rxq) + "; " +
                                   (zc ? "zero copy where the driver's XDP takes it" : "copy mode (" + drvname +
                                         " has no AF_XDP zero copy)"));
        bool bpffs = false;
        for (const Mount& m : mounts())
            bpffs = bpffs || (m.type == "bpf" && m.dir == "/sys/fs/bpf");
        if (!bpffs)
            r.item(St::Warn, "bpffs", "/sys/fs/bpf is not mounted: libxdp loads one XDP program per interface "
                                      "(no sharing with other XDP users; it warns, and it works)",
                   "mount -t bpf bpf /sys/fs/bpf");
        return;
    }
    if (drv == "net_tap") {
        r.item(St::Ok, "port", "--vdev " + d.name + ": net_tap (a kernel tap interface it creates)");
        return;
    }
    r.item(St::Ok, "port", "--vdev " + d.name + ": " + drv + " (virtual, no NIC)");
}

bool iommu_on(unsigned& groups) {
    groups = 0;
    if (DIR* d = opendir("/sys/kernel/iommu_groups")) {
        while (dirent* e = readdir(d))
            groups += e->d_name[0] != '.';
        closedir(d);
    }
    return groups != 0;
}

bool noiommu_mode() {
    std::string v;
    return read_text("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode", v) && (v == "Y" || v == "1");
}

bool dpdk_pci_driver(const std::string& drv) {
    return drv == "vfio-pci" || drv == "uio_pci_generic" || drv == "igb_uio";
}
bool bifurcated_driver(const std::string& drv) { return drv == "mlx5_core" || drv == "mlx4_core"; }

void check_pci(Report& r, const std::string& arg, PortPlan& plan) {
    const std::string bdf = split_devargs(arg).name;
    std::string full = bdf;
    if (std::count(full.begin(), full.end(), ':') == 1)
        full = "0000:" + full;
    const std::string d = "/sys/bus/pci/devices/" + full;
    plan.any = plan.pci = true;
    plan.all_virtual = false;
    if (!exists(d)) {
        r.item(St::Fail, "port", "-a " + bdf + ": no such PCI device", "lspci -D -d ::0200   (the network devices)");
        return;
    }
    const std::string drv = link_name(d + "/driver");
    if (drv.empty()) {
        r.item(St::Fail, "port", "-a " + bdf + ": bound to no driver",
               "modprobe vfio-pci && dpdk-devbind.py --bind=vfio-pci " + bdf);
        return;
    }
    if (bifurcated_driver(drv)) {
        r.item(St::Ok, "port", "-a " + bdf + ": " + drv + " (bifurcated: DPDK and the kernel share it)");
        return;
    }
    if (!dpdk_pci_driver(drv)) {
        plan.kernel_bound = true;
        std::string ifname;
        if (DIR* nd = opendir((d + "/net").c_str())) {
            while (dirent* e = readdir(nd))
                if (e->d_name[0] != '.')
                    ifname = e->d_name;
            closedir(nd);
        }
        r.item(St::Fail, "port", "-a " + bdf + ": bound to the kernel's " + drv +
                                     (ifname.empty() ? "" : " (" + ifname + ")") + ": DPDK cannot drive it",
               (ifname.empty() ? "" : "ip link set dev " + ifname + " down && ") +
                   std::string("dpdk-devbind.py --bind=vfio-pci ") + bdf +
                   (ifname.empty() ? "" : "\nor keep it in the kernel and use AF_XDP: --vdev=net_af_xdp0,iface=" + ifname));
        return;
    }
    if (drv == "vfio-pci") {
        plan.vfio = plan.pinning = true;
        const std::string group = link_name(d + "/iommu_group");
        if (!exists("/dev/vfio/vfio")) {
            r.item(St::Fail, "port", "-a " + bdf + ": vfio-pci, but /dev/vfio/vfio is missing", "modprobe vfio-pci");
            return;
        }
        if (!group.empty() && !exists("/dev/vfio/" + group) && !exists("/dev/vfio/noiommu-" + group)) {
            r.item(St::Fail, "port", "-a " + bdf + ": vfio-pci, but its group /dev/vfio/" + group + " is missing",
                   "dpdk-devbind.py --bind=vfio-pci " + bdf + "   (again, so the group is made)");
            return;
        }
        r.item(St::Ok, "port", "-a " + bdf + ": vfio-pci (IOMMU group " + (group.empty() ? "none" : group) + ")");
        return;
    }
    plan.uio = true;
    r.item(St::Warn, "port", "-a " + bdf + ": " + drv + ": DMA at physical addresses (no IOMMU protection; root only)",
           "dpdk-devbind.py --bind=vfio-pci " + bdf + "   (with the IOMMU on)");
}

// No port named: EAL probes every PCI device bound to a DPDK driver, and
// tailmarkd's loopback makes net_ring0 when there is none.
void check_default_ports(Report& r, const EalView& e, const Options* o, PortPlan& plan) {
    std::vector<std::string> found;
    if (!e.no_pci)
        if (DIR* d = opendir("/sys/bus/pci/devices")) {
            while (dirent* de = readdir(d)) {
                if (de->d_name[0] == '.')
                    continue;
                const std::string drv = link_name(std::string("/sys/bus/pci/devices/") + de->d_name + "/driver");
                if (dpdk_pci_driver(drv)) {
                    found.push_back(std::string(de->d_name) + " (" + drv + ")");
                    plan.pci = plan.any = true;
                    plan.all_virtual = false;
                    plan.vfio = plan.vfio || drv == "vfio-pci";
                    plan.uio = plan.uio || drv != "vfio-pci";
                    plan.pinning = plan.pinning || drv == "vfio-pci";
                }
            }
            closedir(d);
        }
    if (!found.empty()) {
        std::string l;
        for (const std::string& f : found)
            l += (l.empty() ? "" : ", ") + f;
        r.item(St::Ok, "port", "no port named: EAL probes the PCI devices bound to DPDK: " + l);
        return;
    }
    if (o == nullptr || o->mode == Mode::Loopback) {
        r.item(St::Ok, "port", "no port named: tailmarkd makes net_ring0, a loopback in memory (no NIC)");
        return;
    }
    r.item(St::Fail, "port", std::string("--mode ") + to_string(o->mode) + " and no port: nothing to send on",
           "a NIC the kernel keeps: --vdev=net_af_xdp0,iface=<if>,start_queue=0,queue_count=1   (docs/operating.md)\n"
           "or a NIC for DPDK alone: dpdk-devbind.py --bind=vfio-pci <pci address>, then -a <pci address>");
}

void check_iommu(Report& r, const PortPlan& plan) {
    unsigned groups = 0;
    const bool on = iommu_on(groups);
    if (!plan.pci) {
        r.item(St::Ok, "iommu", std::string("no PCI port: not needed (IOMMU ") +
                                    (on ? "on, " + std::to_string(groups) + " groups" : "off") + ")");
        return;
    }
    if (plan.vfio && !on && !noiommu_mode()) {
        r.item(St::Fail, "iommu", "vfio-pci without an IOMMU: the kernel refuses the device",
               "boot with intel_iommu=on iommu=pt (AMD: amd_iommu=on iommu=pt)\n"
               "or, without one (no DMA protection): modprobe vfio enable_unsafe_noiommu_mode=1");
        return;
    }
    if (!on) {
        r.item(St::Warn, "iommu", std::string("off") + (noiommu_mode() ? " (VFIO's unsafe no-IOMMU mode)" : "") +
                                      ": DMA at physical addresses, IOVA as PA",
               "boot with intel_iommu=on iommu=pt (AMD: amd_iommu=on iommu=pt)");
        return;
    }
    r.item(St::Ok, "iommu", "on (" + std::to_string(groups) + " groups)");
}

void check_iova(Report& r, const EalView& e, const Options* o, const PortPlan& plan) {
    if (e.iova_mode == "pa" && geteuid() != 0) {
        r.item(St::Fail, "iova", "--iova-mode=pa needs root (physical addresses from /proc/self/pagemap)",
               "run as root, or --iova-mode=va (vfio-pci with the IOMMU on)");
        return;
    }
    const bool service = o != nullptr && o->mode == Mode::Service;
    if (!service) {
        r.item(St::Ok, "iova", "zero copy from applications' arenas is --mode service's; not used here");
        return;
    }
    if (o->svc_zero_copy == Options::ZeroCopy::Off) {
        r.item(St::Ok, "iova", "--zero-copy off: every message copied into mbufs");
        return;
    }
    if (plan.no_multiseg) {
        r.item(St::Ok, "iova", "messages copied into mbufs: net_af_xdp sends no multi-segment mbufs (it copies "
                               "each frame into its own memory anyway)");
        return;
    }
    if (plan.all_virtual) {
        r.item(St::Ok, "iova", "zero copy: every port is virtual (no DMA at IOVAs)");
        return;
    }
    unsigned groups = 0;
    const bool va = e.iova_mode == "va" || (e.iova_mode.empty() && plan.vfio && !plan.uio && iommu_on(groups));
    if (va) {
        r.item(St::Ok, "iova", "zero copy: IOVA as VA (vfio-pci with the IOMMU)");
        return;
    }
    r.item(St::Warn, "iova", "IOVA as PA (" + std::string(plan.uio ? "a uio driver" : "no IOMMU") +
                                 "): applications' messages are copied into mbufs, not sent in place",
           "bind the port to vfio-pci with the IOMMU on, and add --iova-mode=va");
}

void check_socket(Report& r, const Options* o) {
    if (o == nullptr || o->mode != Mode::Service) {
        r.item(St::Ok, "socket", std::string("no control socket (--mode ") + (o ? to_string(o->mode) : "?") + ")");
        return;
    }
    const std::string path = o->control_socket;
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            r.item(St::Fail, "socket", path + " exists and is not a socket", "rm " + path + "   (or --control-socket another path)");
            return;
        }
        const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        memcpy(sa.sun_path, path.c_str(), std::min(path.size() + 1, sizeof(sa.sun_path)));
        const bool live = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
        if (fd >= 0)
            close(fd);
        if (live) {
            r.item(St::Fail, "socket", path + " is in use by a running daemon",
                   "tailmark-ctl --socket " + path + " status   (what it serves)\n"
                   "systemctl stop tailmarkd@<name>, or --control-socket another path");
            return;
        }
    }
    if (stat(dir.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            r.item(St::Fail, "socket", dir + " is not a directory", "--control-socket a path in a directory");
            return;
        }
        if (access(dir.c_str(), W_OK | X_OK) != 0) {
            r.item(St::Fail, "socket", dir + " is not writable by uid " + std::to_string(geteuid()) +
                                           ": the socket cannot be made there",
                   "chown " + std::to_string(geteuid()) + " " + dir + "   (systemd: RuntimeDirectory=tailmark)");
            return;
        }
        if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
            r.item(St::Warn, "socket", dir + " (mode " + fmt_mode(st.st_mode) +
                                           ") is writable by every user: any of them can replace the socket",
                   "chmod 0750 " + dir);
            return;
        }
        const group* g = getgrgid(st.st_gid);
        r.item(St::Ok, "socket", path + ": in " + dir + " (mode " + fmt_mode(st.st_mode) + ", group " +
                                     (g ? g->gr_name : std::to_string(st.st_gid)) + ")");
        return;
    }
    std::string up = dir;
    while (!up.empty() && stat(up.c_str(), &st) != 0) {
        const size_t s = up.rfind('/');
        up = s == std::string::npos || s == 0 ? (s == 0 ? "/" : ".") : up.substr(0, s);
        if (up == "/" || up == ".")
            break;
    }
    if (access(up.c_str(), W_OK | X_OK) != 0) {
        r.item(St::Fail, "socket", dir + " does not exist, and " + up + " is not writable by uid " +
                                       std::to_string(geteuid()),
               "mkdir -p " + dir + " && chmod 0750 " + dir + "   (systemd: RuntimeDirectory=tailmark)");
        return;
    }
    r.item(St::Ok, "socket", path + ": " + dir + " is made at start (mode 0750, the first --allow-group's)");
}

void check_secret(Report& r, const Options* o, const std::string& parse_error) {
    if (o == nullptr) { // the options did not parse, for the secret's sake
        std::string head = parse_error.substr(parse_error.find(": ") + 2); // "PATH is readable ..."
        const std::string path = head.substr(0, head.find(' '));
        std::string fix;
        if (parse_error.find("chmod 600") != std::string::npos)
            fix = "chmod 600 " + path + "   (and owned by the daemon's user: chown root: " + path + ")";
        else
            fix = "a file of 32 hex digits that only root reads:\n"
                  "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > FILE && chmod 600 FILE";
        r.item(St::Fail, "secret", parse_error, fix);
        return;
    }
    switch (o->secret_from) {
    case Options::SecretFrom::File: {
        struct stat st;
        if (stat(o->secret_file.c_str(), &st) == 0 && st.st_uid != geteuid()) {
            r.item(St::Warn, "secret", o->secret_file + " (mode " + fmt_mode(st.st_mode) + ") is owned by uid " +
                                           std::to_string(st.st_uid) + ", not this daemon's " + std::to_string(geteuid()),
                   "chown " + std::to_string(geteuid()) + " " + o->secret_file);
            return;
        }
        r.item(St::Ok, "secret", o->secret_file + ": mode " + fmt_mode(stat(o->secret_file.c_str(), &st) == 0 ? st.st_mode : 0) +
                                     ", its owner's alone");
        return;
    }
    case Options::SecretFrom::CommandLine:
        r.item(St::Warn, "secret", "--secret on the command line: every local user reads it in /proc/PID/cmdline "
                                   "until the daemon blanks it",
               "put it in a file only root reads (chmod 600) and pass --secret-file FILE");
        return;
    case Options::SecretFrom::Env: r.item(St::Ok, "secret", "from TAILMARK_SECRET"); return;
    case Options::SecretFrom::Config: r.item(St::Ok, "secret", "from the --config file (mode 0600)"); return;
    case Options::SecretFrom::None: break;
    }
    if (o->insecure)
        r.item(St::Warn, "secret", "--insecure: control packets carry a MAC anyone can compute",
               "a shared secret, the same file on both ends, then --secret-file /etc/tailmark/secret:\n"
               "umask 077; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' > /etc/tailmark/secret");
    else
        r.item(St::Ok, "secret", std::string("none needed (--mode ") + to_string(o->mode) + ")");
}

// The CPUs: online, in this process's affinity, and who else runs there.
void check_cpus(Report& r, const EalView& e, const Options* o) {
    std::string online_s;
    std::vector<unsigned> online;
    if (!read_text("/sys/devices/system/cpu/online", online_s) || !parse_cpu_list(online_s, online))
        online.clear();
    cpu_set_t aff;
    CPU_ZERO(&aff);
    sched_getaffinity(0, sizeof(aff), &aff);
    std::vector<unsigned> allowed;
    for (unsigned c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &aff))
            allowed.push_back(c);
    std::vector<unsigned> cpus = e.cpus;
    if (!e.cpus_given) {
        r.item(St::Warn, "cpus", "no -l: EAL makes an lcore of every CPU this process may use (" +
                                     cpu_list_str(allowed) + ") and polls the ones tailmarkd gives a role",
               "-l <cpus>, e.g. -l " + cpu_list_str(std::vector<unsigned>(allowed.begin(),
                                                                            allowed.begin() + std::min<size_t>(2, allowed.size()))));
        cpus = allowed;
    }
    bool bad = false;
    for (unsigned c : cpus) {
        if (!online.empty() && std::find(online.begin(), online.end(), c) == online.end()) {
            r.item(St::Fail, "cpus", e.lcore_arg + ": CPU " + std::to_string(c) +
                                         (exists("/sys/devices/system/cpu/cpu" + std::to_string(c))
                                              ? " is offline"
                                              : " does not exist") +
                                         " (online: " + cpu_list_str(online) + ")",
                   "-l " + cpu_list_str(std::vector<unsigned>(online.begin(),
                                                              online.begin() + std::min<size_t>(2, online.size()))) +
                       "   (CPUs that exist here)");
            bad = true;
        } else if (!CPU_ISSET(c, &aff)) {
            r.item(St::Fail, "cpus", e.lcore_arg + ": CPU " + std::to_string(c) +
                                         " is outside this process's CPU affinity (" + cpu_list_str(allowed) + ")",
                   "-l within " + cpu_list_str(allowed) + ", or widen the affinity (taskset, systemd CPUAffinity=, the cgroup's cpuset)");
            bad = true;
        }
    }
    if (bad)
        return;
    // tailmarkd's own lcore options within -l.
    if (o != nullptr && e.cpus_given) {
        for (const auto* v : {&o->tx_lcores, &o->rx_lcores, &o->consumer_lcores})
            for (unsigned l : *v)
                if (std::find(cpus.begin(), cpus.end(), l) == cpus.end()) {
                    r.item(St::Fail, "cpus", "lcore " + std::to_string(l) + " (--tx-/--rx-/--consumer-lcores) is not in " +
                                                 e.lcore_arg,
                           "-l " + cpu_list_str([&] {
                               std::vector<unsigned> u = cpus;
                               u.push_back(l);
                               std::sort(u.begin(), u.end());
                               return u;
                           }()));
                    return;
                }
    }
    // Busy threads of other processes on those CPUs: two looks 250 ms apart.
    struct T {
        uint64_t ticks;
        int cpu;
        int pid;
        std::string comm;
    };
    auto sample = [&]() {
        std::map<long, T> m;
        DIR* proc = opendir("/proc");
        if (proc == nullptr)
            return m;
        while (dirent* pe = readdir(proc)) {
            if (!isdigit(static_cast<unsigned char>(pe->d_name[0])))
                continue;
            const int pid = atoi(pe->d_name);
            if (pid == getpid())
                continue;
            DIR* td = opendir(("/proc/" + std::string(pe->d_name) + "/task").c_str());
            if (td == nullptr)
                continue;
            while (dirent* te = readdir(td)) {
                if (!isdigit(static_cast<unsigned char>(te->d_name[0])))
                    continue;
                std::string s;
                if (!read_text("/proc/" + std::string(pe->d_name) + "/task/" + te->d_name + "/stat", s))
                    continue;
                const size_t lp = s.find('('), rp = s.rfind(')');
                if (lp == std::string::npos || rp == std::string::npos)
                    continue;
                std::istringstream ss(s.substr(rp + 2));
                std::vector<std::string> f;
                std::string x;
                while (ss >> x)
                    f.push_back(x);
                if (f.size() < 37)
                    continue;
                // f[0] is field 3 (state): utime 14, stime 15, processor 39.
                m[atol(te->d_name)] = {strtoull(f[11].c_str(), nullptr, 10) + strtoull(f[12].c_str(), nullptr, 10),
                                       atoi(f[36].c_str()), pid, s.substr(lp + 1, rp - lp - 1)};
            }
            closedir(td);
        }
        closedir(proc);
        return m;
    };
    const auto a = sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const auto b = sample();
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    std::map<int, std::vector<std::pair<double, std::string>>> busy; // cpu -> (share, "pid N (comm)")
    for (const auto& [tid, t] : b) {
        auto it = a.find(tid);
        if (it == a.end())
            continue;
        const double share = double(t.ticks - it->second.ticks) / hz / 0.25;
        if (share >= 0.2 && std::find(cpus.begin(), cpus.end(), static_cast<unsigned>(t.cpu)) != cpus.end())
            busy[t.cpu].push_back({share, "pid " + std::to_string(t.pid) + " (" + t.comm + ")"});
    }
    std::string iso_s;
    std::vector<unsigned> iso;
    if (read_text("/sys/devices/system/cpu/isolated", iso_s) && !iso_s.empty())
        parse_cpu_list(iso_s, iso);
    if (busy.empty()) {
        r.item(St::Ok, "cpus", (e.cpus_given ? e.lcore_arg + ": CPUs " : "CPUs ") + cpu_list_str(cpus) +
                                   " online and allowed; no other busy process there" +
                                   (iso.empty() ? "" : " (isolated: " + cpu_list_str(iso) + ")"));
        return;
    }
    std::string text;
    for (auto& [cpu, v] : busy) {
        std::sort(v.rbegin(), v.rend());
        text += (text.empty() ? "" : "; ") + std::string("CPU ") + std::to_string(cpu) + ":";
        for (size_t i = 0; i < v.size() && i < 3; i++)
            text += " " + v[i].second + " " + std::to_string(static_cast<int>(v[i].first * 100 + 0.5)) + "%";
    }
    r.item(St::Warn, "cpus", "shared with other busy processes (a polling lcore and they slow each other): " + text,
           "keep the others off them: isolcpus=" + cpu_list_str(cpus) + " nohz_full=" + cpu_list_str(cpus) +
               " at boot, or systemd CPUAffinity= / taskset -p for the others\nor -l other CPUs");
}

// A primary already running with this --file-prefix holds its config's lock.
void check_prefix(Report& r, const EalView& e) {
    const std::string base = geteuid() == 0 ? "/var/run/dpdk"
                             : getenv("XDG_RUNTIME_DIR") ? std::string(getenv("XDG_RUNTIME_DIR")) + "/dpdk"
                                                         : "/tmp/dpdk";
    const std::string cfg = base + "/" + e.file_prefix + "/config";
    const int fd = open(cfg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        struct flock l{};
        l.l_type = F_WRLCK;
        l.l_whence = SEEK_SET;
        const bool held = fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK;
        close(fd);
        if (held) {
            r.item(St::Fail, "prefix", "--file-prefix " + e.file_prefix + " is in use by a running DPDK process (pid " +
                                           std::to_string(l.l_pid) + ")",
                   "--file-prefix <another>   (each tailmarkd its own)");
            return;
        }
    }
    r.item(St::Ok, "prefix", "--file-prefix " + e.file_prefix + ": free (" + base + "/" + e.file_prefix + ")");
}

} // namespace

EalView parse_eal_view(const std::vector<std::string>& a) {
    EalView e;
    auto value = [&](size_t& i, const std::string& opt, std::string& out) {
        // "-l X", "-lX", "--opt X", "--opt=X"
        const std::string& s = a[i];
        if (s.size() > opt.size() && s.compare(0, opt.size(), opt) == 0) {
            out = s.substr(opt.size() + (s[opt.size()] == '=' ? 1 : 0));
            return true;
        }
        if (s == opt && i + 1 < a.size()) {
            out = a[++i];
            return true;
        }
        return false;
    };
    for (size_t i = 0; i < a.size(); i++) {
        std::string v;
        const std::string& s = a[i];
        if (s == "--no-huge") {
            e.no_huge = true;
        } else if (s == "--no-pci") {
            e.no_pci = true;
        } else if (s.rfind("--lcores", 0) == 0 && value(i, "--lcores", v)) {
            // "0-3", "(0-1)@2", "1@3,2@(4-5)": the CPUs after @, else the lcores themselves.
            e.cpus_given = true;
            e.lcore_arg = "--lcores " + v;
            std::string cpus;
            for (size_t p = 0; p < v.size();) {
                size_t q = p;
                int depth = 0;
                while (q < v.size() && (v[q] != ',' || depth > 0)) {
                    depth += v[q] == '(' ? 1 : v[q] == ')' ? -1 : 0;
                    q++;
                }
                std::string item = v.substr(p, q - p);
                const size_t at = item.find('@');
                std::string c = at == std::string::npos ? item : item.substr(at + 1);
                c.erase(std::remove(c.begin(), c.end(), '('), c.end());
                c.erase(std::remove(c.begin(), c.end(), ')'), c.end());
                cpus += (cpus.empty() ? "" : ",") + c;
                p = q + 1;
            }
            if (!parse_cpu_list(cpus, e.cpus))
                e.error = "--lcores " + v + ": not read";
        } else if (s.rfind("-l", 0) == 0 && s.rfind("--", 0) != 0 && value(i, "-l", v)) {
            e.cpus_given = true;
            e.lcore_arg = "-l " + v;
            if (!parse_cpu_list(v, e.cpus))
                e.error = "-l " + v + ": not a CPU list";
        } else if (s.rfind("-c", 0) == 0 && s.rfind("--", 0) != 0 && value(i, "-c", v)) {
            e.cpus_given = true;
            e.lcore_arg = "-c " + v;
            const uint64_t mask = strtoull(v.c_str(), nullptr, 16);
            for (unsigned c = 0; c < 64; c++)
                if ((mask >> c) & 1)
                    e.cpus.push_back(c);
        } else if (s.rfind("-m", 0) == 0 && s.rfind("--", 0) != 0 && value(i, "-m", v)) {
            e.mem_mb = strtoull(v.c_str(), nullptr, 10);
        } else if (s.rfind("--socket-mem", 0) == 0 && value(i, "--socket-mem", v)) {
            std::stringstream ss(v);
            std::string x;
            e.mem_mb = 0;
            while (std::getline(ss, x, ','))
                e.mem_mb += strtoull(x.c_str(), nullptr, 10);
        } else if (s.rfind("--huge-dir", 0) == 0 && value(i, "--huge-dir", v)) {
            while (v.size() > 1 && v.back() == '/')
                v.pop_back();
            e.huge_dir = v;
        } else if (s.rfind("--vdev", 0) == 0 && value(i, "--vdev", v)) {
            e.vdevs.push_back(v);
        } else if ((s.rfind("--allow", 0) == 0 && value(i, "--allow", v)) ||
                   (s.rfind("-a", 0) == 0 && s.rfind("--", 0) != 0 && value(i, "-a", v)) ||
                   (s.rfind("-w", 0) == 0 && s.rfind("--", 0) != 0 && value(i, "-w", v))) {
            e.allow.push_back(v);
        } else if (s.rfind("--iova-mode", 0) == 0 && value(i, "--iova-mode", v)) {
            e.iova_mode = v;
        } else if (s.rfind("--file-prefix", 0) == 0 && value(i, "--file-prefix", v)) {
            e.file_prefix = v;
        } else if (s == "--main-lcore" || s == "--log-level" || s == "--proc-type" || s == "-n" ||
                   s == "--base-virtaddr" || s == "-b" || s == "--block" || s == "-d" || s == "--telemetry" ||
                   s == "--mbuf-pool-ops-name" || s == "--trace") {
            i++; // an option with a separate value preflight does not use
        }
    }
    return e;
}

int run_preflight(int argc, char** argv, FILE* out) {
    int dash = argc;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            dash = i;
            break;
        }
    std::vector<std::string> eal(argv + 1, argv + dash), args;
    for (int i = dash + 1; i < argc; i++)
        args.emplace_back(argv[i]);
    Report r{out};
    fprintf(out, "tailmarkd --check: is this host ready for this command line? (nothing is started)\n");

    Options opt;
    const ParseResult pr = parse_options(args, opt);
    const Options* o = nullptr;
    if (pr.action == ParseResult::Action::ExitError) {
        const bool secret = pr.error.rfind("--secret-file", 0) == 0 || pr.error.find("holds the secret") != std::string::npos;
        if (secret) {
            check_secret(r, nullptr, pr.error);
            // The other items with the rest of the options: as if --insecure.
            std::vector<std::string> rest;
            for (size_t i = 0; i < args.size(); i++) {
                if (args[i] == "--secret-file") {
                    i++;
                    continue;
                }
                if (args[i].rfind("--secret-file=", 0) != 0)
                    rest.push_back(args[i]);
            }
            rest.push_back("--insecure");
            opt = Options{};
            if (parse_options(rest, opt).action != ParseResult::Action::ExitError)
                o = &opt;
        } else {
            r.item(St::Fail, "options", pr.error, "tailmarkd --help   (every option, with its range)");
        }
    } else {
        o = &opt;
        r.item(St::Ok, "options", std::string("--mode ") + to_string(opt.mode) + ", --mtu " + std::to_string(opt.mtu) +
                                      (opt.config_path.empty() ? "" : ", from " + opt.config_path));
    }

    // The --config file's [eal] args, then the command line's (as main() passes them).
    std::vector<std::string> all = split_eal_args(opt.eal_args);
    all.insert(all.end(), eal.begin(), eal.end());
    const EalView e = parse_eal_view(all);
    if (!e.error.empty())
        r.item(St::Fail, "eal", e.error, "see tailmarkd --help and DPDK's EAL parameters");
    check_hugepages(r, e);
    PortPlan plan;
    for (const std::string& v : e.vdevs)
        check_vdev(r, v, o, plan);
    for (const std::string& a : e.allow)
        check_pci(r, a, plan);
    if (!plan.any)
        check_default_ports(r, e, o, plan);
    check_iommu(r, plan);
    check_iova(r, e, o, plan);
    check_memlock(r, e, plan.pinning);
    check_socket(r, o);
    if (o != nullptr && pr.action != ParseResult::Action::ExitError)
        check_secret(r, o, {});
    check_prefix(r, e);
    check_cpus(r, e, o);

    fprintf(out, "tailmarkd --check: %d ok, %d warning(s), %d failure(s): %s\n", r.ok, r.warn, r.fail,
            r.fail ? "a real start would fail (fix the FAIL items above)" : "ready");
    return r.fail ? 1 : 0;
}

} // namespace tailmark::app
