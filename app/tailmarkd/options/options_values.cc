// Option values from text: numbers with size suffixes, seconds, booleans,
// ids, keys, lcore lists, addresses, the secret file; each error says why.
#include "options_internal.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include <rte_ethdev.h>

namespace tailmark::app::option_parsing {

std::string trim(std::string_view s) {
    size_t b = 0, e = s.size();
    while (b < e && (s[b] == ' ' || s[b] == '\t'))
        b++;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r'))
        e--;
    return std::string(s.substr(b, e - b));
}

// Unsigned integer: decimal, or hex with 0x. With `sizes`, an optional
// binary suffix: k/K/KiB (1024), m/M/MiB, g/G/GiB.
Err parse_u64(std::string_view sv, uint64_t& out, bool sizes) {
    std::string s = trim(sv);
    if (s.empty())
        return "missing value";
    if (s[0] == '-' || s[0] == '+')
        return "'" + s + "' is not an unsigned number";
    int base = 10;
    size_t start = 0;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        start = 2;
    }
    errno = 0;
    char* end = nullptr;
    unsigned long long v = strtoull(s.c_str() + start, &end, base);
    if (errno != 0 || end == s.c_str() + start)
        return "'" + s + "' is not a number";
    std::string suf = end;
    uint64_t mul = 1;
    if (!suf.empty()) {
        if (!sizes || base == 16)
            return "'" + s + "' is not a number";
        if (suf == "k" || suf == "K" || suf == "KiB")
            mul = 1ull << 10;
        else if (suf == "m" || suf == "M" || suf == "MiB")
            mul = 1ull << 20;
        else if (suf == "g" || suf == "G" || suf == "GiB")
            mul = 1ull << 30;
        else
            return "'" + s + "': unknown suffix '" + suf + "' (k, M, G, KiB, MiB, GiB)";
    }
    if (v > UINT64_MAX / mul)
        return "'" + s + "' is too large";
    out = v * mul;
    return {};
}

Err parse_range(std::string_view sv, uint64_t lo, uint64_t hi, uint64_t& out, bool sizes) {
    uint64_t v;
    if (Err e = parse_u64(sv, v, sizes); !e.empty())
        return e;
    if (v < lo || v > hi)
        return std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    out = v;
    return {};
}

Err parse_seconds(std::string_view sv, double& out) {
    std::string s = trim(sv);
    errno = 0;
    char* end = nullptr;
    double v = strtod(s.c_str(), &end);
    if (s.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0)
        return "'" + s + "' is not a number of seconds >= 0";
    out = v;
    return {};
}

Err parse_bool(std::string_view sv, bool& out) {
    std::string s = trim(sv);
    if (s == "1" || s == "true" || s == "yes" || s == "on") {
        out = true;
        return {};
    }
    if (s == "0" || s == "false" || s == "no" || s == "off") {
        out = false;
        return {};
    }
    return "'" + s + "' is not a boolean (1/0, true/false, yes/no, on/off)";
}

// A list of users or groups, each a number or a name: "0,tailmark".
Err parse_ids(std::string_view sv, bool groups, std::vector<uint32_t>& out) {
    std::vector<uint32_t> v;
    std::string s = trim(sv);
    if (s.empty())
        return "empty list";
    size_t at = 0;
    while (at <= s.size()) {
        size_t comma = s.find(',', at);
        if (comma == std::string::npos)
            comma = s.size();
        const std::string item = trim(std::string_view(s).substr(at, comma - at));
        at = comma + 1;
        if (item.empty())
            return "empty item in '" + s + "'";
        uint64_t id;
        if (item.find_first_not_of("0123456789") == std::string::npos) {
            if (Err e = parse_range(item, 0, UINT32_MAX - 1, id); !e.empty())
                return e;
        } else if (groups) {
            const group* g = getgrnam(item.c_str()); // set-up only
            if (g == nullptr)
                return "no group '" + item + "'";
            id = g->gr_gid;
        } else {
            const passwd* p = getpwnam(item.c_str()); // set-up only
            if (p == nullptr)
                return "no user '" + item + "'";
            id = p->pw_uid;
        }
        v.push_back(static_cast<uint32_t>(id));
    }
    out = std::move(v);
    return {};
}

// A secret file: 32 hex digits (whitespace around them ignored), in a
// regular file only its owner may read or write (as ssh wants of its keys).
Err read_secret_file(const std::string& path, SipKey& key) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return "cannot open " + path + ": " + strerror(errno);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return path + ": not a regular file";
    }
    if ((st.st_mode & 077) != 0) {
        close(fd);
        char mode[8];
        snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return path + " is readable or writable by its group or others (mode " + mode +
               "): chmod 600 it (the secret lets anyone who has it forge control packets)";
    }
    char buf[128];
    const ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n < 0)
        return "cannot read " + path + ": " + strerror(errno);
    std::string text(buf, static_cast<size_t>(n));
    size_t b = 0, e = text.size();
    while (b < e && isspace(static_cast<unsigned char>(text[b])))
        b++;
    while (e > b && isspace(static_cast<unsigned char>(text[e - 1])))
        e--;
    std::string err;
    const bool ok = parse_secret_hex(std::string_view(text).substr(b, e - b), key, err);
    explicit_bzero(buf, sizeof(buf));
    explicit_bzero(text.data(), text.size());
    if (!ok)
        return path + ": " + (err.rfind("--secret: ", 0) == 0 ? err.substr(10) : err);
    return {};
}

// The completion key: hex with 0x, decimal, or bare hex digits (deadbeef).
Err parse_key(std::string_view sv, uint32_t& out) {
    std::string s = trim(sv);
    uint64_t v;
    Err e = parse_u64(s, v);
    if (!e.empty()) {
        bool hex = !s.empty() && s.size() <= 8;
        for (char c : s)
            hex = hex && isxdigit(static_cast<unsigned char>(c));
        if (!hex)
            return "'" + s + "' is not a key (hex with 0x, or decimal)";
        v = strtoull(s.c_str(), nullptr, 16);
    }
    if (v > UINT32_MAX)
        return "'" + s + "' does not fit in 32 bits";
    out = static_cast<uint32_t>(v);
    return {};
}

// "1,3-5" -> {1,3,4,5}
Err parse_lcores(std::string_view sv, std::vector<unsigned>& out) {
    std::string s = trim(sv);
    std::vector<unsigned> v;
    std::set<unsigned> seen;
    std::stringstream ss(s);
    std::string item;
    if (s.empty())
        return "empty lcore list";
    while (std::getline(ss, item, ',')) {
        item = trim(item);
        uint64_t a, b;
        size_t dash = item.find('-');
        Err e = dash == std::string::npos ? parse_range(item, 0, RTE_MAX_LCORE - 1, a)
                                          : parse_range(item.substr(0, dash), 0, RTE_MAX_LCORE - 1, a);
        if (!e.empty())
            return "lcore list '" + s + "': " + e;
        b = a;
        if (dash != std::string::npos) {
            e = parse_range(item.substr(dash + 1), 0, RTE_MAX_LCORE - 1, b);
            if (!e.empty() || b < a)
                return "lcore list '" + s + "': bad range '" + item + "'";
        }
        for (uint64_t l = a; l <= b; l++) {
            if (!seen.insert(static_cast<unsigned>(l)).second)
                return "lcore list '" + s + "': lcore " + std::to_string(l) + " twice";
            v.push_back(static_cast<unsigned>(l));
        }
    }
    out = std::move(v);
    return {};
}

Err parse_mac(std::string_view sv, rte_ether_addr& out) {
    std::string s = trim(sv);
    if (rte_ether_unformat_addr(s.c_str(), &out) != 0)
        return "'" + s + "' is not a MAC address (xx:xx:xx:xx:xx:xx)";
    return {};
}

Err parse_ip(std::string_view sv, uint32_t& out) {
    std::string s = trim(sv);
    in_addr a;
    if (inet_pton(AF_INET, s.c_str(), &a) != 1)
        return "'" + s + "' is not an IPv4 address";
    out = ntohl(a.s_addr);
    return {};
}

} // namespace tailmark::app::option_parsing
