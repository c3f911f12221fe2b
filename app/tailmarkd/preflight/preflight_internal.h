// Shared by preflight's files: the report every item is written to, what
// the ports' items learn for the later ones, the host readers, the items.
#pragma once

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "options/options.h"
#include "preflight.h"

namespace tailmark::app::preflight_checks {

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

struct Mount {
    std::string dev, dir, type, opts;
};

struct PortPlan {
    bool any = false;         // a port was named (vdev or PCI)
    bool pci = false;         // a PCI port will be probed
    bool all_virtual = true;  // every port on the vdev bus
    bool vfio = false, uio = false, kernel_bound = false;
    bool pinning = false;     // VFIO or AF_XDP: pinned memory
    bool no_multiseg = false; // a port that sends no chained mbufs (net_af_xdp): service mode copies
};

// preflight_read.cc: the host's files, read (nothing is changed).
std::string trim(std::string s);
bool read_text(const std::string& path, std::string& out);
bool read_u64(const std::string& path, uint64_t& v);
bool exists(const std::string& p);
std::string link_name(const std::string& p); // readlink of a sysfs link's last component ("" when none)
bool parse_cpu_list(const std::string& s, std::vector<unsigned>& out); // "0-3,5" -> {0,1,2,3,5}
std::string cpu_list_str(const std::vector<unsigned>& v);
std::vector<Mount> mounts(); // /proc/mounts

// The items, one report line or more each, in run_preflight's order.
void check_hugepages(Report& r, const EalView& e);          // preflight_memory.cc
void check_vdev(Report& r, const std::string& arg, const Options* o, PortPlan& plan); // preflight_ports.cc
void check_pci(Report& r, const std::string& arg, PortPlan& plan);
void check_default_ports(Report& r, const EalView& e, const Options* o, PortPlan& plan);
void check_iommu(Report& r, const PortPlan& plan);
void check_iova(Report& r, const EalView& e, const Options* o, const PortPlan& plan);
void check_memlock(Report& r, const EalView& e, bool pinning); // preflight_memory.cc
void check_socket(Report& r, const Options* o);             // preflight_files.cc
void check_secret(Report& r, const Options* o, const std::string& parse_error);
void check_prefix(Report& r, const EalView& e);
void check_cpus(Report& r, const EalView& e, const Options* o); // preflight_cpus.cc

} // namespace tailmark::app::preflight_checks
