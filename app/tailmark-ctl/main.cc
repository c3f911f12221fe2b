// tailmark-ctl: ask a running `tailmarkd --mode service` how it is doing,
// over its control socket (TM_MSG_STATUS, <tailmark/channel_abi.h>).
// Plain sockets and the channel's header: no DPDK, no client library.
//
//   tailmark-ctl [--socket PATH | --instance NAME] [--json] [--interval S [--count N]] [WHAT]
//   WHAT: status (everything, the default), sessions, apps, ports, drops
//
// --json prints the daemon's JSON (docs/operating.md has its schema): the
// whole object for `status`, the one member for the others. --interval
// repeats every S seconds (a fresh connection each time: a daemon that
// restarts is followed), clearing the screen on a terminal; with --json one
// compact document per line. Exit 0; 1 when the daemon cannot be asked
// (the reason on stderr); 2 for a bad command line.
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "tailmark/channel_abi.h"

namespace {

using namespace tailmark::channel;

constexpr const char* kDefaultSocket = "/run/tailmark/tailmarkd.sock";
constexpr int kReplyTimeoutMs = 5000;
constexpr uint64_t kMaxJson = 64ull << 20;

// --- a small JSON reader (the daemon's own output: objects, arrays, strings,
// numbers, true/false/null) ----------------------------------------------------

struct Value {
    enum Type { Null, Bool, Num, Str, Arr, Obj } type = Null;
    bool b = false;
    double num = 0;
    std::string text; // Str: the string; Num: the number as written
    std::vector<Value> arr;
    std::vector<std::pair<std::string, Value>> obj;

    const Value& operator[](const char* k) const {
        static const Value none;
        for (const auto& [key, v] : obj)
            if (key == k)
                return v;
        return none;
    }
    double n() const { return type == Num ? num : 0; }
    uint64_t u() const { return type == Num ? static_cast<uint64_t>(num) : 0; }
    std::string s() const { return type == Str ? text : type == Num ? text : type == Bool ? (b ? "true" : "false") : "-"; }
};

class Parser {
public:
    explicit Parser(const std::string& t) : t_(t) {}
    bool parse(Value& v, std::string& err) {
        if (!value(v) || (ws(), p_ != t_.size())) {
            err = "malformed JSON at byte " + std::to_string(p_);
            return false;
        }
        return true;
    }

private:
    void ws() {
        while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\r' || t_[p_] == '\t'))
            p_++;
    }
    bool lit(const char* w) {
        const size_t n = strlen(w);
        if (t_.compare(p_, n, w) != 0)
            return false;
        p_ += n;
        return true;
    }
    bool str(std::string& out) {
        if (p_ >= t_.size() || t_[p_] != '"')
            return false;
        p_++;
        while (p_ < t_.size() && t_[p_] != '"') {
            char c = t_[p_++];
            if (c == '\\') {
                if (p_ >= t_.size())
                    return false;
                c = t_[p_++];
                switch (c) {
                case 'n': out.push_back('\n'); break;
                case 't': out.push_back('\t'); break;
                case 'r': out.push_back('\r'); break;
                case 'b': out.push_back('\b'); break;
                case 'f': out.push_back('\f'); break;
                case 'u': {
                    if (p_ + 4 > t_.size())
                        return false;
                    const unsigned cp = static_cast<unsigned>(strtoul(t_.substr(p_, 4).c_str(), nullptr, 16));
                    p_ += 4;
                    out.push_back(cp < 0x80 ? static_cast<char>(cp) : '?');
                    break;
                }
                default: out.push_back(c);
                }
            } else {
                out.push_back(c);
            }
        }
        if (p_ >= t_.size())
            return false;
        p_++;
        return true;
    }
    bool value(Value& v) {
        ws();
        if (p_ >= t_.size())
            return false;
        const char c = t_[p_];
        if (c == '{') {
            v.type = Value::Obj;
            p_++;
            ws();
            if (p_ < t_.size() && t_[p_] == '}')
                return ++p_, true;
            for (;;) {
                ws();
                std::string k;
                if (!str(k))
                    return false;
                ws();
                if (p_ >= t_.size() || t_[p_++] != ':')
                    return false;
                Value x;
                if (!value(x))
                    return false;
                v.obj.emplace_back(std::move(k), std::move(x));
                ws();
                if (p_ < t_.size() && t_[p_] == ',') {
                    p_++;
                    continue;
                }
                return p_ < t_.size() && t_[p_++] == '}';
            }
        }
        if (c == '[') {
            v.type = Value::Arr;
            p_++;
            ws();
            if (p_ < t_.size() && t_[p_] == ']')
                return ++p_, true;
            for (;;) {
                Value x;
                if (!value(x))
                    return false;
                v.arr.push_back(std::move(x));
                ws();
                if (p_ < t_.size() && t_[p_] == ',') {
                    p_++;
                    continue;
                }
                return p_ < t_.size() && t_[p_++] == ']';
            }
        }
        if (c == '"') {
            v.type = Value::Str;
            return str(v.text);
        }
        if (lit("true")) {
            v.type = Value::Bool;
            v.b = true;
            return true;
        }
        if (lit("false")) {
            v.type = Value::Bool;
            return true;
        }
        if (lit("null"))
            return true;
        const char* start = t_.c_str() + p_;
        char* end = nullptr;
        v.num = strtod(start, &end);
        if (end == start)
            return false;
        v.type = Value::Num;
        v.text.assign(start, static_cast<size_t>(end - start));
        p_ += static_cast<size_t>(end - start);
        return true;
    }
    const std::string& t_;
    size_t p_ = 0;
};

void write_json(const Value& v, std::string& out) {
    switch (v.type) {
    case Value::Null: out += "null"; break;
    case Value::Bool: out += v.b ? "true" : "false"; break;
    case Value::Num: out += v.text; break;
    case Value::Str:
        out.push_back('"');
        for (const unsigned char c : v.text) {
            if (c == '"' || c == '\\') {
                out.push_back('\\');
                out.push_back(static_cast<char>(c));
            } else if (c < 0x20) {
                char b[8];
                snprintf(b, sizeof(b), "\\u%04x", c);
                out += b;
            } else {
                out.push_back(static_cast<char>(c));
            }
        }
        out.push_back('"');
        break;
    case Value::Arr:
        out.push_back('[');
        for (size_t i = 0; i < v.arr.size(); i++) {
            if (i)
                out.push_back(',');
            write_json(v.arr[i], out);
        }
        out.push_back(']');
        break;
    case Value::Obj:
        out.push_back('{');
        for (size_t i = 0; i < v.obj.size(); i++) {
            if (i)
                out.push_back(',');
            Value k;
            k.type = Value::Str;
            k.text = v.obj[i].first;
            write_json(k, out);
            out.push_back(':');
            write_json(v.obj[i].second, out);
        }
        out.push_back('}');
        break;
    }
}

// --- asking the daemon ---------------------------------------------------------

bool ask(const std::string& path, std::string& json, std::string& err) {
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err = std::string("socket: ") + strerror(errno);
        return false;
    }
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof(sa.sun_path)) {
        close(fd);
        err = path + ": longer than a Unix socket path may be";
        return false;
    }
    memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
        const int e = errno;
        close(fd);
        err = "cannot connect to " + path + ": " + strerror(e) +
              (e == ENOENT || e == ECONNREFUSED ? " (is tailmarkd --mode service running? systemctl status 'tailmarkd@*')"
               : e == EACCES                    ? " (the socket is its --allow-group's: run as a member, or as root)"
                                                : "");
        return false;
    }
    tm_msg_status m{};
    m.h = {TM_MSG_STATUS, sizeof(m), 1};
    m.abi = kChannelAbi;
    m.minor = kChannelAbiMinor;
    if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(m))) {
        err = std::string("send: ") + strerror(errno);
        close(fd);
        return false;
    }
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, kReplyTimeoutMs) <= 0) {
        close(fd);
        err = path + ": no answer within " + std::to_string(kReplyTimeoutMs / 1000) + " s";
        return false;
    }
    alignas(8) uint8_t buf[kMaxMsg];
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{buf, sizeof(buf)};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    const ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    close(fd);
    int jfd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int x;
                memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (jfd < 0)
                    jfd = x;
                else
                    close(x);
            }
        }
    auto fail = [&](std::string e) {
        if (jfd >= 0)
            close(jfd);
        err = std::move(e);
        return false;
    };
    if (n < static_cast<ssize_t>(sizeof(tm_msg_header)))
        return fail(path + ": the daemon closed the connection without an answer");
    tm_msg_header h;
    memcpy(&h, buf, sizeof(h));
    if (h.type == TM_MSG_ERROR && n >= static_cast<ssize_t>(sizeof(tm_msg_error))) {
        tm_msg_error e;
        memcpy(&e, buf, sizeof(e));
        e.text[sizeof(e.text) - 1] = '\0';
        std::string t = path + ": refused: " + e.text;
        if (e.err == EPROTO)
            t += " (a daemon older than channel ABI " + std::to_string(kChannelAbi) + "." +
                 std::to_string(kChannelAbiMinor) + ", which has no STATUS)";
        return fail(t);
    }
    if (h.type != TM_MSG_STATUS_REPLY || n < static_cast<ssize_t>(sizeof(tm_msg_status_reply)) || jfd < 0)
        return fail(path + ": unexpected answer (message type " + std::to_string(h.type) + ")");
    tm_msg_status_reply r;
    memcpy(&r, buf, sizeof(r));
    if (r.json_bytes == 0 || r.json_bytes > kMaxJson)
        return fail(path + ": a status of " + std::to_string(r.json_bytes) + " bytes");
    json.assign(r.json_bytes, '\0');
    size_t got = 0;
    while (got < r.json_bytes) {
        const ssize_t k = pread(jfd, json.data() + got, r.json_bytes - got, static_cast<off_t>(got));
        if (k <= 0)
            return fail(path + ": reading the status memfd: " + (k < 0 ? strerror(errno) : "short"));
        got += static_cast<size_t>(k);
    }
    close(jfd);
    return true;
}

// --- printing --------------------------------------------------------------------

std::string human_bytes(double b) {
    const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    char s[32];
    snprintf(s, sizeof(s), i ? "%.1f %s" : "%.0f %s", b, u[i]);
    return s;
}

void print_daemon(const Value& d) {
    const Value& x = d["daemon"];
    printf("tailmarkd %s, pid %s, --mode %s, up %.0f s: %s udp %s, MTU %s, %s; socket %s (channel ABI %s.%s)\n",
           x["version"].s().c_str(), x["pid"].s().c_str(), x["mode"].s().c_str(), x["uptime_s"].n(),
           x["local_ip"].s().c_str(), x["udp_port"].s().c_str(), x["mtu"].s().c_str(),
           x["zero_copy"].b ? "zero copy" : "messages copied", x["control_socket"].s().c_str(), x["abi"].s().c_str(),
           x["abi_minor"].s().c_str());
}

void print_ports(const Value& d) {
    printf("ports\n  %-4s %-20s %-14s %-5s %-10s %12s %12s %10s %8s %8s %8s\n", "PORT", "NAME", "DRIVER", "ROLE",
           "LINK", "RX-PKTS", "TX-PKTS", "RX-MISSED", "RX-ERR", "TX-ERR", "NOMBUF");
    for (const Value& p : d["ports"].arr) {
        char link[32];
        if (p["link_up"].b)
            snprintf(link, sizeof(link), p["speed_mbps"].u() ? "up %lug" : "up", p["speed_mbps"].u() / 1000);
        else
            snprintf(link, sizeof(link), "down");
        printf("  %-4s %-20s %-14s %-5s %-10s %12s %12s %10s %8s %8s %8s\n", p["port"].s().c_str(),
               p["name"].s().c_str(), p["driver"].s().c_str(), p["role"].s().c_str(), link,
               p["rx_packets"].s().c_str(), p["tx_packets"].s().c_str(), p["rx_missed"].s().c_str(),
               p["rx_errors"].s().c_str(), p["tx_errors"].s().c_str(), p["rx_nombuf"].s().c_str());
    }
}

void print_apps(const Value& d) {
    printf("apps (%zu)\n  %-4s %-20s %-8s %-6s %-8s %-12s %-10s %s\n", d["apps"].arr.size(), "ID", "NAME", "PID",
           "UID", "SESSIONS", "LISTENING", "ARENA", "TX");
    for (const Value& a : d["apps"].arr) {
        std::string ls;
        for (const Value& p : a["listening"].arr) {
            if (!ls.empty())
                ls.push_back(',');
            ls.append(p.s());
        }
        printf("  %-4s %-20s %-8s %-6s %-8s %-12s %-10s %s\n", a["id"].s().c_str(), a["name"].s().c_str(),
               a["pid"].s().c_str(), a["uid"].s().c_str(), a["sessions"].s().c_str(), ls.empty() ? "-" : ls.c_str(),
               human_bytes(a["arena_bytes"].n()).c_str(), a["zero_copy"].b ? "zero copy" : "copied");
    }
}

void print_sessions(const Value& d) {
    printf("sessions (%zu)\n  %-5s %-4s %-9s %-21s %-6s %-11s %-5s %10s %10s %9s %8s %10s %10s %7s\n",
           d["sessions"].arr.size(), "ID", "APP", "ROLE", "PEER", "PORT", "STATE", "FLOWS", "RATE-MBPS", "MSG/S",
           "RTT-US", "RETX", "SENT", "DELIVERED", "FAILED");
    for (const Value& s : d["sessions"].arr) {
        const bool conn = s["role"].s() == "connector";
        char rate[32], rtt[32];
        snprintf(rate, sizeof(rate), conn && s["rate_mbps"].n() > 0 ? "%.1f" : "-", s["rate_mbps"].n());
        snprintf(rtt, sizeof(rtt), conn && s["srtt_us"].n() > 0 ? "%.1f" : "-", s["srtt_us"].n());
        std::string state = s["state"].s();
        if (s["end"].s() != "none" && !s["end"].s().empty())
            state += "(" + s["end"].s() + ")";
        printf("  %-5s %-4s %-9s %-21s %-6s %-11s %-5s %10s %10.0f %9s %8s %10s %10s %7s\n", s["id"].s().c_str(),
               s["app"].s().c_str(), s["role"].s().c_str(), s["peer"].s().c_str(), s["service"].s().c_str(),
               state.c_str(), s["flows"].s().c_str(), rate, s["msgs_per_s"].n(), rtt,
               conn ? s["retransmitted"].s().c_str() : "-", conn ? s["sent"].s().c_str() : s["released"].s().c_str(),
               conn ? s["delivered"].s().c_str() : "-", conn ? s["failed"].s().c_str() : "-");
    }
}

void print_drops(const Value& d) {
    const Value& x = d["drops"];
    printf("drops: total %s, tx_dropped %s\n", x["total"].s().c_str(), x["tx_dropped"].s().c_str());
    for (const auto& [k, v] : x["by_reason"].obj)
        if (v.u() != 0)
            printf("  %-24s %s\n", k.c_str(), v.s().c_str());
    std::string svc;
    for (const auto& [k, v] : d["service"].obj)
        if (v.u() != 0 && k.rfind("refused", 0) == 0)
            svc += "  " + k + " " + v.s();
    if (!svc.empty())
        printf("connections refused:%s\n", svc.c_str());
}

void usage(FILE* f) {
    fprintf(f,
            "usage: tailmark-ctl [--socket PATH | --instance NAME] [--json] [--interval S [--count N]] [WHAT]\n"
            "  WHAT          status (default: all of the below), sessions, apps, ports, drops\n"
            "  --socket PATH the daemon's --control-socket (default %s; $TAILMARK_SOCKET)\n"
            "  --instance N  the systemd instance tailmarkd@N: /run/tailmark/N.sock\n"
            "  --json        the daemon's JSON (schema: docs/operating.md); `status` the whole object, else the member\n"
            "  --interval S  again every S seconds, like watch(1) (--json: one document per line)\n"
            "  --count N     with --interval: stop after N (default: until interrupted)\n"
            "exit: 0; 1 the daemon could not be asked (why on stderr); 2 a bad command line\n",
            kDefaultSocket);
}

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

} // namespace

int main(int argc, char** argv) {
    std::string path = getenv("TAILMARK_SOCKET") ? getenv("TAILMARK_SOCKET") : kDefaultSocket;
    std::string what = "status";
    bool json = false;
    double interval = 0;
    long count = 0;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto val = [&](const char* name) -> const char* {
            if (i + 1 >= argc) {
                fprintf(stderr, "tailmark-ctl: %s needs a value\n", name);
                exit(2);
            }
            return argv[++i];
        };
        if (a == "--socket") {
            path = val("--socket");
        } else if (a == "--instance") {
            path = std::string("/run/tailmark/") + val("--instance") + ".sock";
        } else if (a == "--json") {
            json = true;
        } else if (a == "--interval") {
            char* end = nullptr;
            const char* v = val("--interval");
            interval = strtod(v, &end);
            if (end == v || *end != '\0' || !(interval >= 0.1 && interval <= 86400)) {
                fprintf(stderr, "tailmark-ctl: --interval: '%s' is not a number of seconds in [0.1, 86400]\n", v);
                return 2;
            }
        } else if (a == "--count") {
            char* end = nullptr;
            const char* v = val("--count");
            count = strtol(v, &end, 10);
            if (end == v || *end != '\0' || count < 1) {
                fprintf(stderr, "tailmark-ctl: --count: '%s' is not a positive number\n", v);
                return 2;
            }
        } else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (a == "status" || a == "sessions" || a == "apps" || a == "ports" || a == "drops") {
            what = a;
        } else {
            fprintf(stderr, "tailmark-ctl: unknown argument '%s'\n", a.c_str());
            usage(stderr);
            return 2;
        }
    }
    if (count != 0 && interval == 0) {
        fprintf(stderr, "tailmark-ctl: --count goes with --interval\n");
        return 2;
    }
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    const bool tty = isatty(STDOUT_FILENO) != 0;
    for (long round = 0; !g_stop; round++) {
        std::string text, err;
        Value doc;
        if (!ask(path, text, err) || !Parser(text).parse(doc, err)) {
            fprintf(stderr, "tailmark-ctl: %s\n", err.c_str());
            if (interval == 0)
                return 1;
        } else if (json) {
            std::string out;
            if (what == "status" && interval == 0)
                out = text;
            else
                write_json(what == "status" ? doc : doc[what.c_str()], out), out.push_back('\n');
            fputs(out.c_str(), stdout);
        } else {
            if (interval != 0) {
                if (tty)
                    fputs("\033[H\033[2J", stdout);
                char when[32];
                const time_t t = time(nullptr);
                strftime(when, sizeof(when), "%F %T", localtime(&t));
                printf("--- %s (every %g s)\n", when, interval);
            }
            if (what == "status")
                print_daemon(doc);
            if (what == "status" || what == "ports")
                print_ports(doc);
            if (what == "status" || what == "apps")
                print_apps(doc);
            if (what == "status" || what == "sessions")
                print_sessions(doc);
            if (what == "status" || what == "drops")
                print_drops(doc);
        }
        fflush(stdout);
        if (interval == 0 || (count != 0 && round + 1 >= count))
            break;
        timespec ts{static_cast<time_t>(interval), static_cast<long>((interval - std::floor(interval)) * 1e9)};
        while (!g_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return 0;
}
