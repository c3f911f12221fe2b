// Reading the host without changing it: /proc and /sys files, links,
// CPU lists, mounts.
#include "preflight_internal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tailmark::app::preflight_checks {

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

namespace {

std::string base_name(const std::string& p) {
    const size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

} // namespace

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

} // namespace tailmark::app::preflight_checks
