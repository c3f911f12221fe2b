// The ports: each --vdev's driver and interface, each PCI device's binding,
// the IOMMU, and the IOVA mode zero copy needs.
#include "preflight_internal.h"

#include <dirent.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace tailmark::app::preflight_checks {

namespace {

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

} // namespace

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
        // drivers/port_plan.cc's rule: past the 1518-byte frame af_packet
        // reports, its ring frame holds frame + 80 bytes and is a multiple
        // of 512.
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

namespace {

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

} // namespace

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

} // namespace tailmark::app::preflight_checks
