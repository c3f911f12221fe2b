// tailmarkd --check: the EAL arguments read as EAL would, the items run in
// order, and the verdict.
#include "preflight.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "options/options.h"
#include "preflight_internal.h"

namespace tailmark::app {

using namespace preflight_checks;

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
