#include "eal_files.h"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace tailmark::app {

namespace {

std::vector<std::string> hugetlbfs_mounts() {
    std::vector<std::string> out;
    std::ifstream m("/proc/mounts");
    std::string line;
    while (std::getline(m, line)) {
        std::istringstream ss(line);
        std::string dev, dir, type;
        if (ss >> dev >> dir >> type && type == "hugetlbfs")
            out.push_back(dir);
    }
    return out;
}

// "<prefix>map_<digits>": exactly EAL's hugepage file names for this prefix.
bool is_hugefile(const char* name, const std::string& prefix) {
    if (strncmp(name, prefix.c_str(), prefix.size()) != 0)
        return false;
    const char* p = name + prefix.size();
    if (strncmp(p, "map_", 4) != 0)
        return false;
    p += 4;
    if (*p == '\0')
        return false;
    for (; *p; p++)
        if (!isdigit(static_cast<unsigned char>(*p)))
            return false;
    return true;
}

} // namespace

int remove_eal_files(const std::string& runtime_dir) {
    if (runtime_dir.empty())
        return 0;
    const size_t slash = runtime_dir.find_last_of('/');
    const std::string prefix = slash == std::string::npos ? runtime_dir : runtime_dir.substr(slash + 1);
    if (prefix.empty())
        return 0;
    int removed = 0;
    for (const std::string& dir : hugetlbfs_mounts()) {
        DIR* d = opendir(dir.c_str());
        if (d == nullptr)
            continue;
        while (dirent* e = readdir(d)) {
            if (is_hugefile(e->d_name, prefix) && unlink((dir + "/" + e->d_name).c_str()) == 0)
                removed++;
        }
        closedir(d);
    }
    // The runtime directory: config, sockets, fbarray files; all ours.
    if (DIR* d = opendir(runtime_dir.c_str())) {
        while (dirent* e = readdir(d)) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlink((runtime_dir + "/" + e->d_name).c_str());
        }
        closedir(d);
        rmdir(runtime_dir.c_str());
    }
    return removed;
}

} // namespace tailmark::app
