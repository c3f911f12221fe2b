// tailmark-cat: netcat for tailmark, through a running `tailmarkd --mode
// service`, on libtailmark-client's C++ header only.
//
//   tailmark-cat [--socket PATH | --instance NAME] --listen [PORT] > FILE
//   tailmark-cat [--socket PATH | --instance NAME] --connect IP[:PORT] < FILE
//
// The stream goes message by message (--msg-size bytes each, the last one
// shorter); a 0-byte message marks its end. The sender exits 0 once every
// message, the end marker included, was reported DELIVERED (the receiving
// application released it, after writing it out); the receiver exits 0
// after the end marker. With several flows, message k goes on flow
// k mod flows and the receiver reads the flows in the same turn.
//
// Exit codes: 0 done, 1 the transfer failed, 2 usage or configuration.
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tailmark/client.hpp>

namespace {

constexpr uint16_t kDefaultPort = 7000;
constexpr uint64_t kDefaultMsgSize = 1u << 20;
constexpr uint32_t kDefaultRing = 64;
constexpr int kEndWaitMs = 10000; // receiver: the sender's close after the end marker

enum Exit { kOk = 0, kFailed = 1, kUsage = 2 };

const char kUsageText[] =
    "usage: tailmark-cat [--socket PATH | --instance NAME] --listen [PORT] > FILE\n"
    "       tailmark-cat [--socket PATH | --instance NAME] --connect IP[:PORT] < FILE\n"
    "\n"
    "Sends stdin to, or receives stdout from, another tailmark-cat through a running\n"
    "`tailmarkd --mode service` (its Unix socket: --socket, else $TAILMARK_SOCKET,\n"
    "else " TM_DEFAULT_SOCKET ").\n"
    "\n"
    "  --listen [PORT]     accept one session on PORT (default 7000), write its stream to stdout\n"
    "  --connect IP[:PORT] open a session to IP's listener on PORT (default 7000), send stdin\n"
    "  --socket PATH       the daemon's socket\n"
    "  --instance NAME     the systemd instance tailmarkd@NAME: /run/tailmark/NAME.sock\n"
    "  --msg-size N        bytes per message, suffixes K, M (default 1M; receiver: the largest accepted)\n"
    "  --flows N           flows of the session, messages striped over them (default 1;\n"
    "                      receiver: the most accepted)\n"
    "  --ring N            each flow's ring, a power of two (default 64; the sender keeps\n"
    "                      N messages in flight over all its flows; receiver: the largest accepted)\n"
    "  --timeout MS        give up connecting after MS (default: the daemon's)\n"
    "  --quiet             no progress line on stderr\n"
    "  --help              this text\n"
    "\n"
    "A 0-byte message ends the stream. Exit: 0 done, 1 transfer failed, 2 usage (or the peer refused a setting).\n";

[[noreturn]] void die(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void die(int code, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tailmark-cat: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

// --- options -----------------------------------------------------------------

struct Options {
    bool listen = false, connect = false, quiet = false;
    std::string socket;
    std::string ip;
    uint16_t port = kDefaultPort;
    uint64_t msg_size = kDefaultMsgSize;
    uint32_t flows = 1, ring = kDefaultRing, timeout_ms = 0;
    bool msg_size_set = false, flows_set = false, ring_set = false;
};

std::optional<uint64_t> parse_u64(std::string_view s, uint64_t max) {
    if (s.empty() || s.size() > 20)
        return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10)
            return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v > max)
        return std::nullopt;
    return v;
}

// N, NK, NM (1024-based).
std::optional<uint64_t> parse_size(std::string_view s) {
    uint64_t mult = 1;
    if (!s.empty()) {
        switch (s.back()) {
        case 'k': case 'K': mult = 1ull << 10; break;
        case 'm': case 'M': mult = 1ull << 20; break;
        case 'g': case 'G': mult = 1ull << 30; break;
        }
        if (mult != 1)
            s.remove_suffix(1);
    }
    const auto v = parse_u64(s, UINT32_MAX);
    if (!v || *v * mult > UINT32_MAX)
        return std::nullopt;
    return *v * mult;
}

uint16_t parse_port(std::string_view s, const char* opt) {
    const auto v = parse_u64(s, 65535);
    if (!v || *v == 0)
        die(kUsage, "%s: '%.*s' is not a port (1-65535)", opt, static_cast<int>(s.size()), s.data());
    return static_cast<uint16_t>(*v);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        std::optional<std::string_view> inline_val;
        if (a.starts_with("--"))
            if (const size_t eq = a.find('='); eq != std::string_view::npos) {
                inline_val = a.substr(eq + 1);
                a = a.substr(0, eq);
            }
        const std::string name(a);
        auto value = [&]() -> std::string_view {
            if (inline_val)
                return *inline_val;
            if (i + 1 >= argc)
                die(kUsage, "%s needs a value (see --help)", name.c_str());
            return argv[++i];
        };
        if (a == "--help" || a == "-h") {
            fputs(kUsageText, stdout);
            exit(kOk);
        } else if (a == "--quiet" || a == "-q") {
            o.quiet = true;
        } else if (a == "--listen" || a == "-l") {
            o.listen = true;
            if (inline_val)
                o.port = parse_port(*inline_val, "--listen");
            else if (i + 1 < argc && argv[i + 1][0] != '-') // the port is optional
                o.port = parse_port(argv[++i], "--listen");
        } else if (a == "--connect" || a == "-c") {
            o.connect = true;
            std::string_view v = value();
            if (const size_t colon = v.rfind(':'); colon != std::string_view::npos) {
                o.port = parse_port(v.substr(colon + 1), "--connect");
                v = v.substr(0, colon);
            }
            o.ip = std::string(v);
            in_addr tmp;
            if (inet_pton(AF_INET, o.ip.c_str(), &tmp) != 1)
                die(kUsage, "--connect: '%s' is not an IPv4 address (IP[:PORT])", o.ip.c_str());
        } else if (a == "--socket") {
            o.socket = std::string(value());
            if (o.socket.empty())
                die(kUsage, "--socket: an empty path");
        } else if (a == "--instance") {
            const std::string_view v = value();
            if (v.empty() || v.find('/') != std::string_view::npos)
                die(kUsage, "--instance: '%.*s' is not an instance name", static_cast<int>(v.size()), v.data());
            o.socket = "/run/tailmark/" + std::string(v) + ".sock";
        } else if (a == "--msg-size") {
            const std::string_view v = value();
            const auto s = parse_size(v);
            if (!s || *s == 0)
                die(kUsage, "--msg-size: '%.*s' is not a size from 1 to 4G (N, NK, NM)", static_cast<int>(v.size()),
                    v.data());
            o.msg_size = *s;
            o.msg_size_set = true;
        } else if (a == "--flows") {
            const std::string_view v = value();
            const auto n = parse_u64(v, 65535);
            if (!n || *n == 0)
                die(kUsage, "--flows: '%.*s' is not a number from 1 to 65535", static_cast<int>(v.size()), v.data());
            o.flows = static_cast<uint32_t>(*n);
            o.flows_set = true;
        } else if (a == "--ring") {
            const std::string_view v = value();
            const auto n = parse_u64(v, 1u << 24);
            if (!n || *n == 0 || (*n & (*n - 1)) != 0)
                die(kUsage, "--ring: '%.*s' is not a power of two up to 2^24", static_cast<int>(v.size()), v.data());
            o.ring = static_cast<uint32_t>(*n);
            o.ring_set = true;
        } else if (a == "--timeout") {
            const std::string_view v = value();
            const auto n = parse_u64(v, UINT32_MAX);
            if (!n)
                die(kUsage, "--timeout: '%.*s' is not a number of milliseconds", static_cast<int>(v.size()),
                    v.data());
            o.timeout_ms = static_cast<uint32_t>(*n);
        } else {
            die(kUsage, "unknown option '%s' (see --help)", argv[i]);
        }
    }
    if (o.listen == o.connect)
        die(kUsage, "give one of --listen [PORT] or --connect IP[:PORT] (see --help)");
    if (o.connect && static_cast<uint64_t>(o.flows) * o.ring * ((o.msg_size + 63) / 64 * 64) > (64ull << 30))
        die(kUsage, "--flows x --ring x --msg-size: more than 64 GiB of send buffers");
    return o;
}

// --- progress ----------------------------------------------------------------

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One \r-updated line on stderr, at most 4 times a second.
class Progress {
public:
    Progress(bool quiet, const char* verb, std::optional<uint64_t> total)
        : quiet_(quiet), verb_(verb), total_(total), start_(now_s()) {}

    void update(uint64_t bytes) {
        if (quiet_)
            return;
        const double t = now_s();
        if (t - last_ < 0.25)
            return;
        last_ = t;
        print(bytes, t, false);
    }
    void finish(uint64_t bytes) {
        if (!quiet_)
            print(bytes, now_s(), true);
    }
    // Before another line on stderr: end the progress line.
    void interrupt() {
        if (!quiet_ && last_ > 0)
            fputc('\n', stderr);
        last_ = 0;
    }

private:
    void print(uint64_t bytes, double t, bool final) {
        const double el = t - start_;
        const double rate = el > 0 ? static_cast<double>(bytes) / el / 1e6 : 0;
        char eta[32] = "";
        if (total_ && !final && rate > 0 && *total_ >= bytes) {
            const auto s = static_cast<uint64_t>(static_cast<double>(*total_ - bytes) / (rate * 1e6));
            snprintf(eta, sizeof(eta), ", ETA %" PRIu64 ":%02" PRIu64, s / 60, s % 60);
        }
        char of[32] = "";
        if (total_)
            snprintf(of, sizeof(of), " of %.1f MB", static_cast<double>(*total_) / 1e6);
        char took[32] = "";
        if (final)
            snprintf(took, sizeof(took), " in %.2f s", el);
        // Trailing blanks: a shorter line must cover the longer one before it.
        fprintf(stderr, "\r%s %.1f MB%s, %.1f MB/s%s%s%s", verb_, static_cast<double>(bytes) / 1e6, of, rate, eta,
                took, final ? "    \n" : "    ");
        fflush(stderr);
    }

    bool quiet_;
    const char* verb_;
    std::optional<uint64_t> total_;
    double start_;
    double last_ = 0;
};

// --- sender ------------------------------------------------------------------

// Up to len bytes of fd into p: fewer only at end of file. -1 on error.
// While a pipe stays quiet, quiet() runs every kQuietMs: a sender whose
// producer is idle still learns that its session failed (and exits), instead
// of sitting in read() until the next byte or the end of its input.
constexpr int kQuietMs = 100;
template <class Quiet>
ssize_t read_full(int fd, std::byte* p, size_t len, bool watch, Quiet&& quiet) {
    size_t got = 0;
    while (got < len) {
        if (watch) {
            pollfd pfd{fd, POLLIN, 0};
            const int r = poll(&pfd, 1, kQuietMs);
            if (r < 0 && errno != EINTR)
                return -1;
            if (r <= 0) {
                quiet();
                continue;
            }
        }
        const ssize_t n = read(fd, p + got, len - got);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(got);
}

int attach(tailmark::Channel& ch, const Options& o, size_t arena_bytes) {
    tailmark::AttachOptions ao;
    ao.socket_path = o.socket;
    ao.arena_bytes = arena_bytes;
    ao.name = "tailmark-cat";
    if (ch.attach(ao) < 0)
        die(kFailed, "attach: %s", ch.error().data());
    return 0;
}

// The session to the listener, as --flows, --ring and --msg-size ask; its
// agreed settings.
tm_session_info connect(tailmark::Channel& ch, const Options& o, tailmark::Session& s) {
    tailmark::ConnectOptions co;
    co.nflows = static_cast<uint16_t>(o.flows);
    co.ring_size = o.ring;
    co.max_msg = static_cast<uint32_t>(o.msg_size);
    co.timeout_ms = o.timeout_ms;
    if (int rc = ch.connect(o.ip, o.port, co, s); rc < 0)
        // A refusal is a mismatch of settings, like a bad option: exit 2,
        // the daemon's line names the setting and both values.
        die(rc == -EINVAL || rc == -EMSGSIZE || rc == -ECONNREFUSED ? kUsage : kFailed, "%s",
            ch.error().data()); // names CONNECT ip:port
    tm_session_info info{};
    if (s.info(info) < 0)
        die(kFailed, "session: %s", ch.error().data());
    return info;
}

// nbuf buffers of msg bytes in the arena, all free (the first on top).
void alloc_buffers(tailmark::Channel& ch, size_t nbuf, size_t msg, std::vector<tailmark::Buffer>& bufs,
                   std::vector<uint32_t>& free_list) {
    bufs.reserve(nbuf);
    for (size_t i = 0; i < nbuf; ++i) {
        bufs.push_back(ch.alloc(msg));
        if (!bufs.back())
            die(kFailed, "buffer %zu of %zu: %s", i, nbuf, ch.error().data());
        free_list.push_back(static_cast<uint32_t>(nbuf - 1 - i));
    }
}

// The sender's state: its buffers in the arena, what is in flight, and the
// input's end.
struct StreamOut {
    StreamOut(tailmark::Channel& c, tailmark::Session& session, Progress& p) : ch(c), s(session), progress(p) {}
    tailmark::Channel& ch;
    tailmark::Session& s;
    Progress& progress;
    std::vector<tailmark::Buffer> bufs;
    std::vector<size_t> lens;
    std::vector<uint32_t> free_list;
    std::vector<tm_completion> comps;
    size_t msg = 0;
    uint16_t nflows = 1;
    bool watch = false; // stdin is no regular file: watch the daemon while it is quiet
    uint64_t next_msg = 0, delivered = 0, inflight = 0;
    bool eof = false, end_sent = false;
    int cur = -1; // a filled buffer the submission ring had no room for yet
    size_t cur_len = 0;

    // The completions the daemon has: each DELIVERED frees its buffer; a
    // failure ends the stream (exit 1).
    int take_completions() {
        const int n = ch.poll_completions(comps);
        if (n < 0)
            die(kFailed, "completions: %s", ch.error().data());
        for (int i = 0; i < n; ++i) {
            const tm_completion& c = comps[static_cast<size_t>(i)];
            if (c.cookie >= bufs.size())
                die(kFailed, "a completion for buffer %" PRIu64 " of %zu (the daemon's rings are broken)", c.cookie,
                    bufs.size());
            if (c.status != TM_DELIVERED) {
                progress.interrupt();
                die(kFailed, "message %u (flow %u) failed: %s", c.msg_id, c.flow, tm_fail_reason_name(c.reason));
            }
            delivered += lens[c.cookie];
            free_list.push_back(static_cast<uint32_t>(c.cookie));
            --inflight;
        }
        return n;
    }

    // The session may have ended (its completions are all in the rings by
    // then): those first; with none left to take, exit 1.
    bool check_ended() {
        const int state = s.state();
        if (state == 0)
            return false;
        if (state < 0)
            die(kFailed, "session: %s", ch.error().data());
        if (take_completions() == 0) {
            progress.interrupt();
            if (inflight == 0) // every message sent so far was delivered, but the stream goes on
                die(kFailed, "the session ended (%s) before the end of the input", tm_end_reason_name(state));
            die(kFailed, "the session ended (%s) with %" PRIu64 " messages unconfirmed", tm_end_reason_name(state),
                inflight);
        }
        return true;
    }

    // Waiting on a quiet pipe: what the daemon said meanwhile.
    void quiet() {
        take_completions();
        while (check_ended()) {
        }
        progress.update(delivered);
    }

    // Fills free buffers from stdin and submits them, until none is free or
    // the flow's submission ring is full; the end marker (0 bytes) last.
    // True: something went.
    bool send_more() {
        bool progressed = false;
        while (!end_sent) {
            if (cur < 0) {
                if (free_list.empty())
                    break;
                cur = static_cast<int>(free_list.back());
                free_list.pop_back();
                const ssize_t r = eof ? 0
                                      : read_full(STDIN_FILENO, bufs[static_cast<size_t>(cur)].data(), msg, watch,
                                                  [this] { quiet(); });
                if (r < 0) {
                    progress.interrupt();
                    die(kFailed, "read stdin: %s", strerror(errno));
                }
                cur_len = static_cast<size_t>(r);
                if (cur_len < msg)
                    eof = true; // this one is the last of the data; then the 0-byte end marker
            }
            const auto& b = bufs[static_cast<size_t>(cur)];
            const int rc = s.send(static_cast<uint16_t>(next_msg % nflows), b.bytes().first(cur_len),
                                  static_cast<uint64_t>(cur));
            if (rc == -EAGAIN)
                break;
            if (rc < 0) {
                progress.interrupt();
                die(kFailed, "send: %s", ch.error().data());
            }
            lens[static_cast<size_t>(cur)] = cur_len;
            ++inflight;
            ++next_msg;
            end_sent = cur_len == 0;
            cur = -1;
            progressed = true;
        }
        return progressed;
    }
};

int send_stream(const Options& o) {
    std::optional<uint64_t> total;
    struct stat st;
    if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode))
        total = static_cast<uint64_t>(st.st_size);

    // The pipeline: --ring messages in flight for the stream, whatever its
    // flows (at least one each). Flows split a stream, they need no more
    // bytes in flight: a buffer per message of every flow's ring took
    // flows x ring x msg-size of the arena (--flows 16: 1 GiB of hugepages).
    const uint64_t stride = (o.msg_size + 63) / 64 * 64;
    const size_t nbuf = std::max<size_t>(o.ring, o.flows);
    tailmark::Channel ch;
    attach(ch, o, nbuf * stride);

    tailmark::Session s;
    const tm_session_info info = connect(ch, o, s);
    Progress progress(o.quiet, "sent", total);
    StreamOut out(ch, s, progress);
    out.msg = std::min<uint64_t>(o.msg_size, info.max_msg);
    out.nflows = info.nflows;
    out.watch = !total.has_value();
    out.lens.assign(nbuf, 0);
    out.comps.resize(nbuf < 256 ? nbuf : 256);
    alloc_buffers(ch, nbuf, out.msg, out.bufs, out.free_list);

    for (;;) {
        bool progressed = out.take_completions() > 0;
        progressed |= out.send_more();
        progress.update(out.delivered);
        if (out.end_sent && out.inflight == 0)
            break;
        if (progressed)
            continue;
        // Nothing moved: the session may have ended, else sleep until the
        // daemon has news.
        if (out.check_ended())
            continue;
        if (ch.wait(250) < 0) {
            progress.interrupt();
            die(kFailed, "wait: %s", ch.error().data());
        }
    }
    progress.finish(out.delivered);
    out.bufs.clear();
    if (s.close() < 0)
        die(kFailed, "close: %s", ch.error().data());
    return kOk;
}

// --- receiver ----------------------------------------------------------------

bool write_all(int fd, std::span<const std::byte> b) {
    while (!b.empty()) {
        const ssize_t n = write(fd, b.data(), b.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        b = b.subspan(static_cast<size_t>(n));
    }
    return true;
}

int receive_stream(const Options& o) {
    tailmark::Channel ch;
    attach(ch, o, 2u << 20); // we send nothing: the smallest arena
    tailmark::ListenOptions lo;
    if (o.flows_set)
        lo.max_flows = static_cast<uint16_t>(o.flows);
    if (o.ring_set)
        lo.max_ring = o.ring;
    if (o.msg_size_set)
        lo.max_msg = static_cast<uint32_t>(o.msg_size);
    if (ch.listen(o.port, lo) < 0)
        die(kFailed, "listen on port %u: %s", o.port, ch.error().data());

    tailmark::Session s;
    tm_session_info info{};
    for (;;) {
        const int rc = ch.accept(-1, s, &info);
        if (rc < 0)
            die(kFailed, "accept: %s", ch.error().data());
        if (rc == 1)
            break;
    }
    // One session: stop listening (a failure to is no reason to stop the transfer).
    (void)ch.unlisten(o.port);
    if (!o.quiet) {
        const uint32_t be = htonl(info.peer_ip);
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &be, ip, sizeof(ip));
        fprintf(stderr, "tailmark-cat: session from %s:%u, %u flows, ring %u, max_msg %u\n", ip, info.peer_port,
                info.nflows, info.ring_size, info.max_msg);
    }

    Progress progress(o.quiet, "received", std::nullopt);
    uint64_t k = 0, bytes = 0;
    const uint16_t nflows = info.nflows;
    for (;;) {
        tailmark::Message m;
        const auto flow = static_cast<uint16_t>(k % nflows);
        int rc = s.recv(flow, m);
        if (rc == 0) {
            if (const int state = s.state(); state != 0) {
                if (state < 0)
                    die(kFailed, "session: %s", ch.error().data());
                rc = s.recv(flow, m); // nothing is written after ENDED: one last look
                if (rc == 0) {
                    progress.interrupt();
                    die(kFailed, "the session ended (%s) before the end of the stream (%" PRIu64 " bytes in %" PRIu64
                        " messages received)", tm_end_reason_name(state), bytes, k);
                }
            }
        }
        if (rc < 0) {
            progress.interrupt();
            die(kFailed, "receive: %s", ch.error().data());
        }
        if (rc == 0) {
            tailmark::Session extra; // a session that came before UNLISTEN took effect: not ours
            if (ch.accept(0, extra) < 0)
                die(kFailed, "accept: %s", ch.error().data());
            extra.close();
            // This flow's next message: tm_wait would return at once for
            // another flow's, and spin (taking the CPU from the daemons).
            if (s.wait(flow, 250) < 0) {
                progress.interrupt();
                die(kFailed, "wait: %s", ch.error().data());
            }
            progress.update(bytes);
            continue;
        }
        if (m.size() == 0) { // the end marker
            (void)s.release(m);
            break;
        }
        if (!write_all(STDOUT_FILENO, m.bytes())) {
            progress.interrupt();
            die(kFailed, "write stdout: %s", strerror(errno));
        }
        if (s.release(m) < 0)
            die(kFailed, "release: %s", ch.error().data());
        bytes += m.size();
        ++k;
        progress.update(bytes);
    }
    progress.finish(bytes);
    // The sender closes once it has heard that the end marker was
    // delivered; closing first could fail that last confirmation.
    const double until = now_s() + kEndWaitMs / 1000.0;
    while (s.state() == 0 && now_s() < until)
        if (ch.wait(100) < 0)
            break;
    return kOk;
}

} // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    signal(SIGPIPE, SIG_IGN); // a closed stdout is a write error, said as such
    return o.connect ? send_stream(o) : receive_stream(o);
}
