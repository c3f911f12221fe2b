#include "config_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include <rte_cfgfile.h>

namespace tailmark::app {

bool read_ini(const std::string& path, std::vector<IniEntry>& out, std::string& err) {
    {
        std::ifstream probe(path);
        if (!probe) {
            err = "cannot open " + path + ": " + strerror(errno);
            return false;
        }
    }
    rte_cfgfile* cfg = rte_cfgfile_load(path.c_str(), 0);
    if (cfg == nullptr) {
        err = "cannot parse " + path + " (INI: [section] lines, name = value, ';' comments)";
        return false;
    }
    const int nsec = rte_cfgfile_num_sections(cfg, nullptr, 0);
    std::vector<std::unique_ptr<char[]>> bufs;
    std::vector<char*> names;
    for (int i = 0; i < nsec; i++) {
        bufs.emplace_back(new char[CFG_NAME_LEN]());
        names.push_back(bufs.back().get());
    }
    if (nsec > 0 && rte_cfgfile_sections(cfg, names.data(), nsec) != nsec) {
        rte_cfgfile_close(cfg);
        err = "cannot list the sections of " + path;
        return false;
    }
    for (int i = 0; i < nsec; i++) {
        const int n = rte_cfgfile_section_num_entries(cfg, names[i]);
        if (n < 0)
            continue;
        std::vector<rte_cfgfile_entry> entries(static_cast<size_t>(n));
        const int got = rte_cfgfile_section_entries(cfg, names[i], entries.data(), n);
        for (int j = 0; j < got; j++) {
            // The listing gives the names (so unknown ones can be refused);
            // each value is read with rte_cfgfile_get_entry.
            const char* name = entries[static_cast<size_t>(j)].name;
            const char* value = rte_cfgfile_get_entry(cfg, names[i], name);
            out.push_back({names[i], name, value ? value : ""});
        }
    }
    rte_cfgfile_close(cfg);
    return true;
}

} // namespace tailmark::app
