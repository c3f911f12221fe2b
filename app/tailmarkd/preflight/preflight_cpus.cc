// The CPUs of -l: online, within this process's affinity, holding
// tailmarkd's own lcore options, and who else keeps them busy.
#include "preflight_internal.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>

namespace tailmark::app::preflight_checks {

namespace {

// One thread of another process: its CPU time (ticks), the CPU it last ran
// on, its process and name.
struct TaskSample {
    uint64_t ticks;
    int cpu;
    int pid;
    std::string comm;
};

// Every other process's threads, from /proc/PID/task/TID/stat, by thread id.
std::map<long, TaskSample> sample_tasks() {
    std::map<long, TaskSample> m;
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
}

} // namespace

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
    const auto a = sample_tasks();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const auto b = sample_tasks();
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

} // namespace tailmark::app::preflight_checks
