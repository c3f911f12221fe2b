// INI configuration files, read with rte_cfgfile (usable before rte_eal_init).
//
//   [tailmark]          ; options, named as on the command line without "--"
//   mode = loopback
//   ring-size = 64
//   [flow.3]            ; per-flow settings
//   key = 0xdeadbeef
#pragma once

#include <string>
#include <vector>

namespace tailmark::app {

struct IniEntry {
    std::string section;
    std::string name;
    std::string value;
};

// All entries in file order (section by section). False with `err` set when
// the file cannot be read or parsed.
bool read_ini(const std::string& path, std::vector<IniEntry>& out, std::string& err);

} // namespace tailmark::app
