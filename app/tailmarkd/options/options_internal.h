// Shared by the option sources (options.cc, options_table.cc, options_ini.cc):
// the value parsers and the option table's entries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <rte_ether.h>

#include "options.h"
#include "tailmark/siphash.h"

namespace tailmark::app::option_parsing {

using Err = std::string; // empty: fine

// options_values.cc: each fills `out` or returns why it could not.
std::string trim(std::string_view s);
Err parse_u64(std::string_view sv, uint64_t& out, bool sizes = false);
Err parse_range(std::string_view sv, uint64_t lo, uint64_t hi, uint64_t& out, bool sizes = false);
Err parse_seconds(std::string_view sv, double& out);
Err parse_bool(std::string_view sv, bool& out);
Err parse_ids(std::string_view sv, bool groups, std::vector<uint32_t>& out);
Err read_secret_file(const std::string& path, SipKey& key);
Err parse_key(std::string_view sv, uint32_t& out);
Err parse_lcores(std::string_view sv, std::vector<unsigned>& out);
Err parse_mac(std::string_view sv, rte_ether_addr& out);
Err parse_ip(std::string_view sv, uint32_t& out);

// options_table.cc: one option, and the table's entry by name (null: none).
struct OptDef {
    const char* name;
    const char* arg; // nullptr: a flag
    const char* help;
    Err (*set)(Options&, std::string_view);
};
const OptDef* find_opt(std::string_view name);

// options_ini.cc: a --config file's entries applied to `o`.
Err apply_ini(const std::string& path, Options& o);

} // namespace tailmark::app::option_parsing
