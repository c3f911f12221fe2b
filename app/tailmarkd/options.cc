#include "options.h"

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

#include "config_file.h"
#include "tailmark/session.h"
#include "tailmark/tx_marker.h"

namespace tailmark::app {

const char* to_string(Mode m) {
    switch (m) {
    case Mode::Loopback: return "loopback";
    case Mode::Send: return "send";
    case Mode::Recv: return "recv";
    case Mode::Service: return "service";
    }
    return "?";
}

const char* to_string(CompletionMode m) {
    return m == CompletionMode::Packet ? "packet" : "message";
}

namespace {

using Err = std::string; // empty: fine

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
Err parse_u64(std::string_view sv, uint64_t& out, bool sizes = false) {
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

Err parse_range(std::string_view sv, uint64_t lo, uint64_t hi, uint64_t& out, bool sizes = false) {
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

struct OptDef {
    const char* name;
    const char* arg; // nullptr: a flag
    const char* help;
    Err (*set)(Options&, std::string_view);
};

#define U64_OPT(field, lo, hi, sizes)                                                     \
    [](Options& o, std::string_view v) -> Err {                                           \
        uint64_t x;                                                                       \
        Err e = parse_range(v, lo, hi, x, sizes);                                         \
        if (e.empty())                                                                    \
            o.field = static_cast<decltype(o.field)>(x);                                  \
        return e;                                                                         \
    }

const OptDef kOpts[] = {
    {"mode", "loopback|send|recv|service",
     "loopback: sender and receiver in one process (default); send/recv: two processes; service: no generator, "
     "applications send and receive through --control-socket (libtailmark-client)",
     [](Options& o, std::string_view v) -> Err {
         std::string s = trim(v);
         if (s == "loopback")
             o.mode = Mode::Loopback;
         else if (s == "send")
             o.mode = Mode::Send;
         else if (s == "recv")
             o.mode = Mode::Recv;
         else if (s == "service")
             o.mode = Mode::Service;
         else
             return "'" + s + "' is not one of loopback, send, recv, service";
         return {};
     }},
    {"control-socket", "PATH",
     "service mode: the Unix socket applications attach to (default /run/tailmark/tailmarkd.sock)",
     [](Options& o, std::string_view v) -> Err {
         o.control_socket = trim(v);
         if (o.control_socket.empty())
             return "empty path";
         if (o.control_socket.size() >= 108)
             return "longer than a Unix socket path may be (107 bytes)";
         return {};
     }},
    {"max-apps", "N", "service mode: applications attached at once (default 64)", U64_OPT(svc_max_apps, 1, 1024, false)},
    {"max-pending", "N",
     "service mode: connections that have not said HELLO yet, at once, apart from --max-apps; each is closed "
     "after 3 s without it (default 16)",
     U64_OPT(svc_max_pending, 1, 1024, false)},
    {"max-arena", "BYTES",
     "service mode: the largest arena an application may declare (suffixes k, M, G; default 1G): registering "
     "it with DPDK is the control loop's longest step (1 GiB of 4 KiB pages: about 20 ms; 4 GiB: 0.4 s)",
     U64_OPT(svc_max_arena, 4096, 64ull << 30, true)},
    {"allow-uid", "UID[,UID..]",
     "service mode: users (numbers or names) that may attach, read from the socket (SO_PEERCRED); default: the "
     "daemon's own",
     [](Options& o, std::string_view v) -> Err {
         o.svc_allow_uids_set = true;
         return parse_ids(v, false, o.svc_allow_uids);
     }},
    {"allow-group", "GID[,GID..]",
     "service mode: groups (numbers or names) whose members may attach (primary or supplementary group); the "
     "socket and its directory belong to the first; default: the daemon's group",
     [](Options& o, std::string_view v) -> Err {
         o.svc_allow_gids_set = true;
         return parse_ids(v, true, o.svc_allow_gids);
     }},
    {"zero-copy", "auto|off",
     "service mode: send from the applications' arenas without copying where the ports read them at their "
     "address (auto: IOVA as VA, or virtual devices only; the default), or always copy (off)",
     [](Options& o, std::string_view v) -> Err {
         const std::string t = trim(v);
         if (t == "auto")
             o.svc_zero_copy = Options::ZeroCopy::Auto;
         else if (t == "off")
             o.svc_zero_copy = Options::ZeroCopy::Off;
         else
             return "'" + t + "' is not auto or off";
         return {};
     }},
    {"max-session-mb", "MIB",
     "service mode: the most memory one session's rings may take, in MiB (ring size x largest message; default 1024)",
     U64_OPT(svc_max_session_mb, 1, 1 << 20, false)},
    {"flows", "N", "flows, each with its own completion ring and regions (1..4096)",
     U64_OPT(flows, 1, 4096, false)},
    {"msg-size", "BYTES[,BYTES..]",
     "message size of the built-in generator (suffixes k, M: 64, 4k, 1M); a list: sizes in turn, per message",
     [](Options& o, std::string_view v) -> Err {
         o.msg_sizes.clear();
         o.msg_size = 0;
         std::string all = trim(v);
         size_t at = 0;
         do {
             const size_t comma = all.find(',', at);
             const std::string one = all.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
             uint64_t x;
             if (Err e = parse_range(one, 0, UINT32_MAX, x, true); !e.empty())
                 return e;
             o.msg_sizes.push_back(x);
             o.msg_size = x > o.msg_size ? x : o.msg_size;
             at = comma == std::string::npos ? std::string::npos : comma + 1;
         } while (at != std::string::npos);
         if (o.msg_sizes.size() > 64)
             return "at most 64 sizes";
         if (o.msg_sizes.size() == 1)
             o.msg_sizes.clear();
         return {};
     }},
    {"messages", "N", "messages per flow (0 = until stopped); in recv mode, how many to expect per flow",
     U64_OPT(messages, 0, UINT32_MAX, false)},
    {"duration", "SEC", "time limit in seconds (0 = none); exit 1 if messages are still missing then",
     [](Options& o, std::string_view v) { return parse_seconds(v, o.duration); }},
    {"ring-size", "N", "completion slots per flow, a power of two (1..4096)",
     [](Options& o, std::string_view v) -> Err {
         uint64_t x;
         if (Err e = parse_range(v, 1, 4096, x); !e.empty())
             return e;
         if ((x & (x - 1)) != 0)
             return std::to_string(x) + " is not a power of two";
         o.ring_size = static_cast<uint32_t>(x);
         return {};
     }},
    {"mtu", "BYTES", "packet size cap: IPv4 total length of the largest frame (80..9702)",
     U64_OPT(mtu, 80, 9702, false)},
    {"completion", "message|packet",
     "message: one completion write per message (tailmark); packet: one per data packet (baseline)",
     [](Options& o, std::string_view v) -> Err {
         std::string s = trim(v);
         if (s == "message")
             o.completion = CompletionMode::Message;
         else if (s == "packet")
             o.completion = CompletionMode::Packet;
         else
             return "'" + s + "' is not one of message, packet";
         return {};
     }},
    {"tx-lcores", "LIST", "lcores running the generator and tx (e.g. 1 or 1,2 or 1-3)",
     [](Options& o, std::string_view v) { return parse_lcores(v, o.tx_lcores); }},
    {"rx-lcores", "LIST", "lcores running rx, placement and completion (one rx queue each)",
     [](Options& o, std::string_view v) { return parse_lcores(v, o.rx_lcores); }},
    {"consumer-lcores", "LIST|none",
     "lcores polling completions, verifying and releasing; none: a consumer process does (tailmark-consumer)",
     [](Options& o, std::string_view v) -> Err {
         o.external_consumer = trim(v) == "none";
         if (o.external_consumer) {
             o.consumer_lcores.clear();
             return {};
         }
         return parse_lcores(v, o.consumer_lcores);
     }},
    {"tx-port", "P", "port that sends (default 0)", U64_OPT(tx_port, 0, RTE_MAX_ETHPORTS - 1, false)},
    {"rx-port", "Q", "port that receives (default 0; in send/recv mode: --tx-port)",
     [](Options& o, std::string_view v) -> Err {
         uint64_t x;
         Err e = parse_range(v, 0, RTE_MAX_ETHPORTS - 1, x);
         if (e.empty()) {
             o.rx_port = static_cast<uint16_t>(x);
             o.rx_port_set = true;
         }
         return e;
     }},
    {"src-mac", "MAC", "source MAC of what this process sends (default: the tx port's)",
     [](Options& o, std::string_view v) -> Err {
         Err e = parse_mac(v, o.src_mac);
         o.src_mac_set = e.empty();
         return e;
     }},
    {"dst-mac", "MAC",
     "the peer's MAC (default: resolved by ARP from --dst-ip; this port's in loopback); --flow-control off "
     "needs it outside loopback (no session, no ARP)",
     [](Options& o, std::string_view v) -> Err {
         Err e = parse_mac(v, o.dst_mac);
         o.dst_mac_set = e.empty();
         return e;
     }},
    {"src-ip", "IPV4[/LEN]", "this process's IPv4 address, and with /LEN its subnet (default 198.18.0.1)",
     [](Options& o, std::string_view v) -> Err {
         const size_t slash = v.find('/');
         if (slash == std::string_view::npos) {
             o.src_prefix = 0;
             return parse_ip(v, o.src_ip);
         }
         uint64_t len;
         if (Err e = parse_range(v.substr(slash + 1), 1, 32, len, false); !e.empty())
             return "the prefix length: " + e;
         o.src_prefix = static_cast<uint8_t>(len);
         return parse_ip(v.substr(0, slash), o.src_ip);
     }},
    {"gateway", "IPV4",
     "the router for peers outside --src-ip's subnet (which it then needs: IP/LEN); its MAC by ARP (default: none, "
     "every peer on the link)",
     [](Options& o, std::string_view v) { return parse_ip(v, o.gateway); }},
    {"dst-ip", "IPV4", "the peer's IPv4 address (default 198.18.0.2)",
     [](Options& o, std::string_view v) { return parse_ip(v, o.dst_ip); }},
    {"udp-port", "PORT", "UDP destination port of every tailmark packet (default 47474)",
     U64_OPT(udp_port, 1, 65535, false)},
    {"key", "K", "the flows' completion key, hex (0x...) or decimal; [flow.N] key= overrides per flow (default: "
            "each session's acceptor draws one)",
     [](Options& o, std::string_view v) {
         o.key_set = true;
         return parse_key(v, o.key);
     }},
    {"stats-period", "SEC", "one stats line per period (0 = off; default 1, with -i 0)",
     [](Options& o, std::string_view v) {
         o.stats_period_set = true;
         return parse_seconds(v, o.stats_period);
     }},
    {"summary-json", "FILE", "write the results there at exit",
     [](Options& o, std::string_view v) -> Err {
         o.summary_json = trim(v);
         return o.summary_json.empty() ? "empty file name" : Err{};
     }},
    {"exit-when-done", nullptr, "stop once every message is completed and consumed",
     [](Options& o, std::string_view v) { return parse_bool(v, o.exit_when_done); }},
    {"linger", nullptr, "with --exit-when-done: once done, keep the final counters readable (telemetry) until a signal",
     [](Options& o, std::string_view v) { return parse_bool(v, o.linger); }},
    {"flow-control", "on|off",
     "off: the sender ignores credits (tx benchmarks on ports that never complete, e.g. net_null)",
     [](Options& o, std::string_view v) { return parse_bool(v, o.flow_control); }},
    {"burst", "N", "packets per rx/tx burst (1..64, default 32)", U64_OPT(burst, 1, 64, false)},
    {"tx-quantum", "BYTES",
     "payload a flow sends per round-robin turn before the next flow's turn (default 1M): messages up to it "
     "go out whole, larger ones interleave in pieces of it (fairness against the cache: every message in "
     "flight is another region and buffer in use)",
     U64_OPT(tx_quantum, 1, UINT32_MAX, true)},
    {"verify", "on|off",
     "on (default): the consumer regenerates every message and compares every byte; off: it only takes the "
     "completion and releases (to measure the completion's own cost)",
     [](Options& o, std::string_view v) { return parse_bool(v, o.verify); }},
    {"replay", "on|off",
     "loopback: tx resends ready-made packets of one message per flow (msg_id, flag and slot re-stamped) "
     "instead of generating each: the rx path becomes the bottleneck (benchmarks); no retransmission",
     [](Options& o, std::string_view v) { return parse_bool(v, o.replay); }},
    {"payload", "fresh|fixed",
     "fresh (default): the generator writes every message's own bytes before it is sent; fixed: each flow's "
     "messages all carry message 0's bytes, written once, as an application's ready data would be (tx "
     "benchmarks: the tx path without the generator; the consumer compares with message 0)",
     [](Options& o, std::string_view v) -> Err {
         const std::string t = trim(v);
         if (t == "fresh" || t == "fixed") {
             o.fixed_payload = t == "fixed";
             return {};
         }
         return "expected fresh or fixed";
     }},
    {"rate", "MSGS",
     "generator messages per second, all flows together, evenly paced (0 = as fast as credits allow; e.g. for "
     "latency at a given load)",
     [](Options& o, std::string_view v) -> Err {
         std::string t = trim(v);
         char* end = nullptr;
         errno = 0;
         const double x = strtod(t.c_str(), &end);
         if (t.empty() || errno != 0 || end == t.c_str() || *end != '\0' || !(x >= 0) || x > 1e9)
             return "'" + t + "' is not a rate in messages per second (0..1e9)";
         o.rate = x;
         return {};
     }},
    {"udp-checksum", "on|off",
     "on (default): fill the UDP checksum on tx (the NIC where the port offers it, else software) and verify it on "
     "rx, so a corrupted packet is dropped alone (and retransmitted) rather than failing its whole message's CRC; "
     "off: checksum 0, only the trailer's CRC32C covers the message (benchmarks)",
     [](Options& o, std::string_view v) { return parse_bool(v, o.udp_checksum); }},
    {"cc", "on|off",
     "congestion control per session (default on): a paced rate from the queueing delay ACKs echo, loss and "
     "timeouts as backstops; off: as fast as credits allow. Sessions with a peer in this process have none",
     [](Options& o, std::string_view v) { return parse_bool(v, o.cc); }},
    {"cc-target-us", "US", "congestion control: queueing delay tolerated above the path's base RTT (default 500)",
     U64_OPT(cc_target_us, 10, 1000000, false)},
    {"paths", "N",
     "spray each session's data packets over N UDP source ports (1..16; default 1: the flow's one port), so "
     "that ECMP spreads them over up to N paths; each path's RTT, loss and share are its own, a dead path "
     "gets only probes, and a retransmission goes by another path. The peer needs nothing new, but with "
     "several rx lcores its --steering must not be rss (use handoff)",
     U64_OPT(paths, 1, 16, false)},
    {"cc-start-mbps", "MBPS", "congestion control: a session's first rate in Mbit/s, then slow start (default 50)",
     U64_OPT(cc_start_mbps, 1, 400000, false)},
    {"cc-max-mbps", "MBPS", "congestion control: the highest rate in Mbit/s (default 0: the port's link speed)",
     U64_OPT(cc_max_mbps, 0, 400000, false)},
    {"ack-feedback-us", "US",
     "receiver: while data arrives, an ACK at least this often, echoing a send stamp for the sender's RTT "
     "(default 200; 0 = only when messages complete)",
     U64_OPT(ack_feedback_us, 0, 1000000, false)},
    {"secret", "HEX",
     "the session secret, 128 bits as 32 hex digits, the same on both ends: every control packet (handshake, "
     "ACK, NACK, keep-alive) carries a SipHash-2-4 MAC keyed by it; it never travels. send, recv and service "
     "need it (or --insecure); loopback makes up its own. On the command line every local user can read it in "
     "/proc/PID/cmdline until the daemon blanks it: pass it with --secret-file or TAILMARK_SECRET",
     [](Options& o, std::string_view v) -> Err {
         std::string err;
         if (!parse_secret_hex(trim(v), o.secret, err))
             return err.rfind("--secret: ", 0) == 0 ? err.substr(10) : err;
         o.secret_set = true;
         o.secret_from = Options::SecretFrom::Config; // the command line says so after
         o.secret_file.clear();
         return {};
     }},
    {"secret-file", "PATH",
     "the session secret (as --secret: 32 hex digits) from a file only its owner may read (mode 0600 or "
     "0400; anything wider is refused); the environment's TAILMARK_SECRET is the other way that is not "
     "visible to other users",
     [](Options& o, std::string_view v) -> Err {
         const std::string path = trim(v);
         if (path.empty())
             return "empty path";
         if (Err e = read_secret_file(path, o.secret); !e.empty())
             return e;
         o.secret_set = true;
         o.secret_from = Options::SecretFrom::File;
         o.secret_file = path;
         return {};
     }},
    {"insecure", nullptr,
     "send/recv without --secret: control packets are authenticated with an all-zero key anyone can use "
     "(said in the log); for tests on a private link only",
     [](Options& o, std::string_view v) { return parse_bool(v, o.insecure); }},
    {"data-version", "N", "the wire format's data version offered and taken: 2 (default), every data packet "
     "carries a keyed tag, so no host without the session's keys can place a byte; 1, untagged, taken from a peer "
     "only with this or --insecure (said in the log). Sessions between ends of one process are 1",
     U64_OPT(data_version, 1, 2, false)},
    {"data-auth", "on|off", "data authentication: every data packet's tag covers its payload too (a POLYVAL "
     "under a session key, hashed into the tag), so a host on the path cannot change a byte unseen. Asked for "
     "as a connector, required as an acceptor; either end's on makes the session's. Default off (its cost: "
     "docs/benchmarks.md)",
     [](Options& o, std::string_view v) { return parse_bool(v, o.data_auth); }},
    {"service", "PORT", "the listener a session names: recv listens on it, send connects to it (default 47474)",
     U64_OPT(service, 1, 65535, false)},
    {"sessions", "N", "recv: sender sessions to see through (each --flows x --messages) before --exit-when-done (default 1)",
     U64_OPT(sessions, 1, 4096, false)},
    {"keep-ended", "N",
     "recv, service: ended sessions the summary, the shell and telemetry keep (default 256); an older one's counts "
     "go into the totals, and its flows' memory and registry slots to new flows",
     U64_OPT(keep_ended, 0, 65536, false)},
    {"keepalive-ms", "MS", "a sender's liveness probe per session while connected (default 1000)",
     U64_OPT(keepalive_ms, 10, 3600000, false)},
    {"idle-sleep-us", "US", "an lcore idle for 1 ms sleeps this long per idle turn (0 = always poll, the default)",
     U64_OPT(idle_sleep_us, 0, 10000, false)},
    {"trace-slow-ns", "NS", "diagnostic: keep a timeline of the lcore's last iterations for each message whose "
     "completion latency exceeds NS, in the summary JSON's slow_messages (0 = off, the default)",
     U64_OPT(trace_slow_ns, 0, 1000000000, false)},
    {"peer-timeout-ms", "MS", "a session ends when its peer is silent this long (default 5000)",
     U64_OPT(peer_timeout_ms, 50, 3600000, false)},
    {"connect-timeout-ms", "MS", "send: give up when no ACCEPT or REFUSE comes within this (default 5000)",
     U64_OPT(connect_timeout_ms, 50, 3600000, false)},
    {"rto-us", "US", "first retransmission timeout in microseconds (default 5000); doubles per expiry",
     U64_OPT(rto_us, 10, 10000000, false)},
    {"rto-max-us", "US", "retransmission timeout cap in microseconds (default 200000)",
     U64_OPT(rto_max_us, 10, 60000000, false)},
    {"retry-limit", "N",
     "retransmission timeouts in a row without progress before a flow fails (default: as many as fill "
     "--peer-timeout-ms, 30 with the defaults)",
     U64_OPT(retry_limit, 0, 1000, false)},
    {"nack-delay-us", "US",
     "receiver: how long a gap may be reordering before it is NACKed, in microseconds (default 200; 0 = no NACKs)",
     U64_OPT(nack_delay_us, 0, 1000000, false)},
    {"stream-min", "BYTES",
     "receiver: flows whose region slots hold at least BYTES have their payload written with streaming stores, "
     "around the caches (default 0 = never)",
     U64_OPT(stream_min, 0, UINT64_MAX, true)},
    {"fault", "SPEC",
     "fault shim on the rx queues, for testing recovery: drop=R,dup=R,reorder=R,corrupt=R[,seed=N] "
     "(probabilities; omitted ones 0; with -i, `set fault` changes it)",
     [](Options& o, std::string_view v) -> Err {
         std::string err;
         if (!drivers::parse_fault_spec(trim(v), o.fault, err))
             return err;
         o.fault_set = true;
         return {};
     }},
    {"cmdline-file", "FILE", "run the shell commands in FILE at start (as testpmd); with -i the prompt follows",
     [](Options& o, std::string_view v) -> Err {
         o.cmdline_file = trim(v);
         return o.cmdline_file.empty() ? "empty file name" : Err{};
     }},
    {"config", "FILE", "INI file of options ([tailmark] name = value), per-flow keys ([flow.N] key = K) and EAL "
     "arguments ([eal] args = -l 0-1 --vdev=...; those on the command line after them)",
     [](Options& o, std::string_view v) -> Err {
         o.config_path = trim(v);
         return {};
     }},
    {"dump-config", nullptr, "print the effective options as an INI file and exit",
     [](Options& o, std::string_view v) { return parse_bool(v, o.dump_config); }},
    {"help", nullptr, "this text", nullptr},
};

const OptDef* find_opt(std::string_view name) {
    for (const OptDef& d : kOpts)
        if (name == d.name)
            return &d;
    return nullptr;
}

// Cross-option checks, after every source is applied.
Err validate(Options& o) {
    // Loopback's one session is with itself, and --flow-control off has none
    // (no keys agreed): version 1. The others' data version is --data-version.
    if (o.data_auth && o.data_version == 1)
        return "--data-auth on: needs data version 2 (it covers version 2's tag); drop --data-version 1";
    const bool v1 = o.mode == Mode::Loopback || !o.flow_control;
    const uint32_t stride = stride_for_mtu(o.mtu, v1 ? kVersion : static_cast<uint8_t>(o.data_version));
    if (!plan_group(o.msg_size, stride).ok())
        return "--msg-size: " + std::to_string(o.msg_size) + " B needs more than " +
               std::to_string(kMaxPktsPerMessage) + " packets at --mtu " + std::to_string(o.mtu);
    for (auto& [flow, k] : o.flow_keys) {
        (void)k;
        if (flow >= o.flows)
            return "[flow." + std::to_string(flow) + "]: flow " + std::to_string(flow) +
                   " does not exist with --flows " + std::to_string(o.flows);
    }
    if (o.mode == Mode::Service) {
        if (o.interactive || !o.cmdline_file.empty())
            return "--mode service: the interactive shell (-i, --cmdline-file) is not available in service mode";
        if (!o.flow_control)
            return "--flow-control: service mode needs it on (sessions)";
        if (o.completion != CompletionMode::Message)
            return "--completion: service mode delivers whole messages (message)";
        o.external_consumer = true; // the applications consume
    }
    if (o.replay && (o.mode != Mode::Loopback || !o.msg_sizes.empty() || o.interactive))
        return "--replay: loopback mode only, with one --msg-size and without -i";
    if (o.rto_max_us < o.rto_us)
        return "--rto-max-us: " + std::to_string(o.rto_max_us) + " is below --rto-us " + std::to_string(o.rto_us);
    if (o.mode != Mode::Loopback && !o.rx_port_set)
        o.rx_port = o.tx_port;
    if (o.mode != Mode::Loopback && o.flow_control && !o.secret_set && !o.insecure)
        return "--secret: send, recv and service modes need the session secret (32 hex digits, the same on both "
               "ends), or --insecure";
    if (o.mode == Mode::Send && !o.flow_control && !o.dst_mac_set)
        return "--dst-mac: --flow-control off has no session and so no ARP: give the destination MAC";
    if (o.mode == Mode::Recv && !o.flow_control)
        return "--flow-control: a receiver needs it on (it acknowledges what it takes)";
    if (o.keepalive_ms * 2 > o.peer_timeout_ms)
        return "--peer-timeout-ms: " + std::to_string(o.peer_timeout_ms) + " must be at least twice --keepalive-ms " +
               std::to_string(o.keepalive_ms);
    // A flow gives its peer as long as the session does: a peer whose CPU
    // was taken for a few seconds (an application beside it, a busy host)
    // keeps its flows. The old default, 8, gave up after about 1 s, so a
    // receiver stopped for 4 s failed its sender's flows although its
    // session lived (reliability.sh, case paused).
    if (o.retry_limit == Options::kRetryLimitAuto) {
        uint64_t waited = 0, rto = o.rto_us;
        o.retry_limit = 0;
        while (waited < o.peer_timeout_ms * 1000 && o.retry_limit < 1000) {
            waited += rto;
            rto = rto * 2 < o.rto_max_us ? rto * 2 : o.rto_max_us;
            o.retry_limit++;
        }
    }
    if (o.gateway != 0) {
        if (o.src_prefix == 0)
            return "--gateway: give --src-ip as IP/LEN, so that the peers on the link are known";
        const uint32_t mask = o.src_netmask();
        if ((o.gateway & mask) != (o.src_ip & mask) || o.gateway == o.src_ip)
            return "--gateway: " + ip_to_string(o.gateway) + " is not another address of --src-ip's subnet " +
                   ip_to_string(o.src_ip & mask) + "/" + std::to_string(o.src_prefix);
    }
    if (o.mode != Mode::Loopback && o.tx_port != o.rx_port)
        return "--rx-port: send and recv modes use one port for data and credits (--tx-port == --rx-port)";
    return {};
}

Err apply_ini(const std::string& path, Options& o) {
    std::vector<IniEntry> entries;
    std::string err;
    if (!read_ini(path, entries, err))
        return "--config: " + err;
    // A file that holds the secret is a secret file: its owner's alone.
    for (const IniEntry& e : entries) {
        struct stat st;
        if (e.section == "tailmark" && e.name == "secret" && stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
            char mode[8];
            snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
            return "--config: " + path + " holds the secret and is readable or writable by its group or others (mode " +
                   mode + "): chmod 600 it, or use secret-file";
        }
    }
    for (const IniEntry& e : entries) {
        const std::string where = " (" + path + ", [" + e.section + "] " + e.name + ")";
        if (e.section == "tailmark") {
            const OptDef* d = find_opt(e.name);
            if (d == nullptr || d->set == nullptr || e.name == "config" || e.name == "dump-config")
                return "--config: unknown option '" + e.name + "'" + where;
            if (Err x = d->set(o, e.value); !x.empty())
                return "--" + e.name + ": " + x + where;
        } else if (e.section.rfind("flow.", 0) == 0) {
            uint64_t flow;
            if (Err x = parse_range(e.section.substr(5), 0, 65535, flow); !x.empty())
                return "--config: section [" + e.section + "]: flow id " + x + where;
            if (e.name != "key")
                return "--config: [" + e.section + "]: unknown field '" + e.name + "' (only key)" + where;
            uint32_t k;
            if (Err x = parse_key(e.value, k); !x.empty())
                return "--config: [" + e.section + "] key: " + x + where;
            o.flow_keys[static_cast<uint16_t>(flow)] = k;
        } else if (e.section == "eal") {
            if (e.name != "args")
                return "--config: [eal]: unknown field '" + e.name + "' (only args)" + where;
            o.eal_args = trim(e.value);
        } else {
            return "--config: unknown section [" + e.section + "] (use [tailmark], [flow.N] or [eal])" + where;
        }
    }
    return {};
}

} // namespace

ParseResult parse_options(const std::vector<std::string>& args, Options& opt) {
    ParseResult r;
    auto error = [&](std::string msg) {
        r.action = ParseResult::Action::ExitError;
        r.error = std::move(msg);
        return r;
    };

    // Split into (definition, value) pairs first; -h/--help wins over everything.
    struct Item {
        const OptDef* def;
        std::string name, value;
    };
    std::vector<Item> items;
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& a = args[i];
        if (a == "-h" || a == "--help") {
            r.action = ParseResult::Action::ExitOk;
            return r;
        }
        if (a == "-i") {
            opt.interactive = true;
            continue;
        }
        if (a.rfind("--", 0) != 0 || a.size() == 2)
            return error("unexpected argument '" + a + "' (options start with --; see --help)");
        const std::string_view body = std::string_view(a).substr(2);
        const size_t eq = body.find('=');
        const bool has_value = eq != std::string_view::npos;
        const std::string name(body.substr(0, eq));
        const OptDef* d = find_opt(name);
        if (d == nullptr)
            return error("--" + name + ": unknown option (see --help)");
        std::string_view value = has_value ? body.substr(eq + 1) : std::string_view("1");
        if (d->arg != nullptr && !has_value) {
            if (i + 1 >= args.size())
                return error("--" + name + ": missing value " + d->arg);
            value = args[++i];
        }
        items.push_back({d, name, std::string(value)});
    }

    // Defaults < file < command line.
    for (const Item& it : items)
        if (it.name == "config")
            it.def->set(opt, it.value);
    if (!opt.config_path.empty())
        if (Err e = apply_ini(opt.config_path, opt); !e.empty())
            return error(e);
    // TAILMARK_SECRET: after the file, before the command line.
    if (const char* env = getenv("TAILMARK_SECRET"); env != nullptr && *env != '\0') {
        std::string err;
        if (!parse_secret_hex(trim(env), opt.secret, err))
            return error("TAILMARK_SECRET: " + (err.rfind("--secret: ", 0) == 0 ? err.substr(10) : err));
        opt.secret_set = true;
        opt.secret_from = Options::SecretFrom::Env;
        opt.secret_file.clear();
    }
    for (const Item& it : items) {
        if (it.name == "config")
            continue;
        if (Err e = it.def->set(opt, it.value); !e.empty())
            return error("--" + it.name + ": " + e);
        if (it.name == "secret")
            opt.secret_from = Options::SecretFrom::CommandLine;
    }
    if (Err e = validate(opt); !e.empty())
        return error(e);
    if (opt.dump_config)
        r.action = ParseResult::Action::ExitOk;
    return r;
}

void print_help(const char* prog) {
    printf("usage: %s [EAL args] -- [options]\n"
           "       %s --check [EAL args] -- [options]   preflight: is this host ready for that command line?\n\n"
           "Moves messages between ports with one completion flag per message.\n"
           "Example: %s --no-huge -m 1024 --no-pci --vdev=net_ring0 -l 0,1 -- --exit-when-done\n\n"
           "options (a command-line flag overrides --config; see config/*.ini):\n",
           prog, prog, prog);
    for (const OptDef& d : kOpts) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", d.name, d.arg ? " " : "", d.arg ? d.arg : "");
        printf("  %-32s %s\n", left, d.help);
    }
    printf("  %-32s %s\n", "-i",
           "interactive shell (tailmark> prompt; `help` lists the commands). The generator waits for `start`;");
    printf("  %-32s %s\n", "", "`send F SIZE COUNT` sends messages at any time; `quit` or EOF ends the run like SIGTERM");
    printf("\nexit codes: 0 every requested message completed and verified; 1 not (or a run-time\n"
           "failure); 2 bad configuration (one message on stderr names the option).\n");
}

std::vector<std::string> split_eal_args(const std::string& s) {
    std::vector<std::string> v;
    std::istringstream ss(s);
    std::string w;
    while (ss >> w)
        v.push_back(w);
    return v;
}

std::string dump_ini(const Options& o) {
    std::ostringstream s;
    auto sizes = [](const Options& x) {
        if (x.msg_sizes.empty())
            return std::to_string(x.msg_size);
        std::string r;
        for (uint64_t v : x.msg_sizes) {
            if (!r.empty())
                r.push_back(',');
            r.append(std::to_string(v));
        }
        return r;
    };
    auto lc = [](const std::vector<unsigned>& v) {
        std::string r;
        for (unsigned l : v) {
            if (!r.empty())
                r += ',';
            r += std::to_string(l);
        }
        return r;
    };
    auto ip = ip_to_string;
    auto mac = [](const rte_ether_addr& m) {
        char b[RTE_ETHER_ADDR_FMT_SIZE];
        rte_ether_format_addr(b, sizeof(b), &m);
        return std::string(b);
    };
    char key[16];
    snprintf(key, sizeof(key), "0x%08x", o.key);
    s << "[tailmark]\n"
      << "mode = " << to_string(o.mode) << "\n"
      << "flows = " << o.flows << "\n"
      << "msg-size = " << sizes(o) << "\n"
      << "messages = " << o.messages << "\n"
      << "duration = " << o.duration << "\n"
      << "ring-size = " << o.ring_size << "\n"
      << "mtu = " << o.mtu << "\n"
      << "completion = " << to_string(o.completion) << "\n";
    if (!o.tx_lcores.empty())
        s << "tx-lcores = " << lc(o.tx_lcores) << "\n";
    if (!o.rx_lcores.empty())
        s << "rx-lcores = " << lc(o.rx_lcores) << "\n";
    if (o.external_consumer)
        s << "consumer-lcores = none\n";
    else if (!o.consumer_lcores.empty())
        s << "consumer-lcores = " << lc(o.consumer_lcores) << "\n";
    s << "tx-port = " << o.tx_port << "\n"
      << "rx-port = " << o.rx_port << "\n";
    if (o.src_mac_set)
        s << "src-mac = " << mac(o.src_mac) << "\n";
    if (o.dst_mac_set)
        s << "dst-mac = " << mac(o.dst_mac) << "\n";
    s << "src-ip = " << ip(o.src_ip);
    if (o.src_prefix != 0)
        s << "/" << unsigned{o.src_prefix};
    s << "\n";
    if (o.gateway != 0)
        s << "gateway = " << ip(o.gateway) << "\n";
    s << "dst-ip = " << ip(o.dst_ip) << "\n"
      << "udp-port = " << o.udp_port << "\n";
    if (o.key_set)
        s << "key = " << key << "\n";
    s << "stats-period = " << o.stats_period << "\n";
    if (!o.summary_json.empty())
        s << "summary-json = " << o.summary_json << "\n";
    if (o.linger)
        s << "linger = 1\n";
    if (o.fault_set)
        s << "fault = " << o.fault.str() << "\n";
    s << "exit-when-done = " << (o.exit_when_done ? 1 : 0) << "\n"
      << "flow-control = " << (o.flow_control ? "on" : "off") << "\n"
      << "burst = " << o.burst << "\n"
      << "tx-quantum = " << o.tx_quantum << "\n"
      << "verify = " << (o.verify ? "on" : "off") << "\n"
      << "payload = " << (o.fixed_payload ? "fixed" : "fresh") << "\n"
      << "rate = " << o.rate << "\n"
      << "udp-checksum = " << (o.udp_checksum ? "on" : "off") << "\n"
      << "cc = " << (o.cc ? "on" : "off") << "\n"
      << "cc-target-us = " << o.cc_target_us << "\n"
      << "paths = " << o.paths << "\n"
      << "cc-start-mbps = " << o.cc_start_mbps << "\n"
      << "cc-max-mbps = " << o.cc_max_mbps << "\n"
      << "ack-feedback-us = " << o.ack_feedback_us << "\n"
      << "rto-us = " << o.rto_us << "\n"
      << "rto-max-us = " << o.rto_max_us << "\n"
      << "retry-limit = " << o.retry_limit << "\n"
      << "nack-delay-us = " << o.nack_delay_us << "\n"
      << "stream-min = " << o.stream_min << "\n"
      << "service = " << o.service << "\n"
      << "sessions = " << o.sessions << "\n"
      << "keep-ended = " << o.keep_ended << "\n"
      << "keepalive-ms = " << o.keepalive_ms << "\n"
      << "idle-sleep-us = " << o.idle_sleep_us << "\n"
      << "trace-slow-ns = " << o.trace_slow_ns << "\n"
      << "peer-timeout-ms = " << o.peer_timeout_ms << "\n"
      << "connect-timeout-ms = " << o.connect_timeout_ms << "\n";
    auto ids = [](const std::vector<uint32_t>& v) {
        std::string r;
        for (uint32_t x : v) {
            if (!r.empty())
                r.push_back(',');
            r.append(std::to_string(x));
        }
        return r;
    };
    if (o.mode == Mode::Service) {
        s << "control-socket = " << o.control_socket << "\n"
          << "max-apps = " << o.svc_max_apps << "\n"
          << "max-pending = " << o.svc_max_pending << "\n"
          << "max-session-mb = " << o.svc_max_session_mb << "\n"
          << "max-arena = " << o.svc_max_arena << "\n"
          << "zero-copy = " << (o.svc_zero_copy == Options::ZeroCopy::Off ? "off" : "auto") << "\n";
        if (o.svc_allow_uids_set)
            s << "allow-uid = " << ids(o.svc_allow_uids) << "\n";
        if (o.svc_allow_gids_set)
            s << "allow-group = " << ids(o.svc_allow_gids) << "\n";
    }
    // The secret itself never: only where it comes from.
    switch (o.secret_from) {
    case Options::SecretFrom::File: s << "secret-file = " << o.secret_file << "\n"; break;
    case Options::SecretFrom::Env: s << "; secret: from TAILMARK_SECRET (not printed)\n"; break;
    case Options::SecretFrom::CommandLine: s << "; secret: from --secret (not printed)\n"; break;
    case Options::SecretFrom::Config: s << "; secret: from the --config file (not printed)\n"; break;
    case Options::SecretFrom::None: break;
    }
    if (o.insecure)
        s << "insecure = 1\n";
    if (o.data_version != 2)
        s << "data-version = " << o.data_version << "\n";
    if (o.data_auth)
        s << "data-auth = on\n";
    for (auto& [flow, k] : o.flow_keys) {
        snprintf(key, sizeof(key), "0x%08x", k);
        s << "\n[flow." << flow << "]\nkey = " << key << "\n";
    }
    if (!o.eal_args.empty())
        s << "\n[eal]\nargs = " << o.eal_args << "\n";
    return s.str();
}

} // namespace tailmark::app
