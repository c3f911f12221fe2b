// tailmark-perf: the application path's speed, on libtailmark-client only
// (no DPDK here). One process sends COUNT messages of SIZE bytes from its
// arena; another receives them in place and releases them. Each prints one
// JSON line of results, so scripts/bench.sh sets it next to the generator.
//
//   tailmark-perf --listen PORT [--sessions N] [--verify]
//   tailmark-perf --connect IP[:PORT] --size BYTES --count N [--flows F] [--ring R] [--verify]
//   tailmark-perf --loop OWN_IP[:PORT] --size BYTES --count N [--flows F] [--ring R] [--verify] [--lazy-completions]
//
// --lazy-completions (--loop): takes its completions only once it has
// received as many of its messages as the daemon's completion rings hold
// (2 x --ring per flow), with 6 x --ring buffers per flow: the daemon must
// stop taking submissions until the app takes its completions, every time
// (with one flow: exactly then).
//
// --verify: the sender writes a pattern of (message, byte) into each
// buffer, the receiver checks every byte (costs both ends a pass over the
// payload; off, the sender fills its buffers once and the receiver only
// touches the completion slot: the path's own cost).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <tailmark/client.h>

namespace {

struct Args {
    const char* socket = nullptr;
    bool listen = false;
    std::string host;
    uint16_t port = 7001;
    uint64_t size = 4096;
    uint64_t count = 100000;
    uint16_t flows = 1;
    uint32_t ring = 64;
    uint32_t sessions = 1;
    bool verify = false;
    bool lazy = false; // --lazy-completions
};

[[noreturn]] void usage(const char* why) {
    fprintf(stderr, "tailmark-perf: %s\n", why);
    fprintf(stderr, "usage: tailmark-perf [--socket PATH] --listen PORT [--sessions N] [--verify]\n"
                    "       tailmark-perf [--socket PATH] --connect IP[:PORT] --size BYTES --count N "
                    "[--flows F] [--ring R] [--verify]\n"
                    "       tailmark-perf [--socket PATH] --loop OWN_IP[:PORT] --size BYTES --count N "
                    "[--flows F] [--ring R] [--verify] [--lazy-completions]\n");
    exit(2);
}

uint64_t number(const char* opt, const char* v) {
    char* end = nullptr;
    uint64_t x = strtoull(v, &end, 0);
    if (end == v)
        usage((std::string(opt) + ": not a number: " + v).c_str());
    if (*end == 'k' || *end == 'K')
        x <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        x <<= 20, end++;
    if (*end != '\0')
        usage((std::string(opt) + ": not a number: " + v).c_str());
    return x;
}

inline uint8_t pattern(uint64_t msg, uint64_t i) { return static_cast<uint8_t>(msg * 131 + i * 7 + (i >> 8)); }

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Takes up to 256 completions into cs: each buffer (its index is the
// cookie) back on the free list, each failure counted. Returns the count.
int reap(tm_channel* ch, tm_completion* cs, std::vector<uint32_t>& free_list, uint64_t& failed) {
    const int n = tm_poll_completions(ch, cs, 256);
    for (int i = 0; i < n; i++) {
        failed += cs[i].status != TM_DELIVERED;
        free_list.push_back(static_cast<uint32_t>(cs[i].cookie));
    }
    return n;
}

int fail(tm_channel* ch, const char* what, int rc) {
    fprintf(stderr, "tailmark-perf: %s: %s (%s)\n", what, ch ? tm_last_error(ch) : "", strerror(-rc));
    tm_detach(ch);
    return 1;
}

// Send buffers per flow, in rings: two (one in flight, one being refilled),
// six with --lazy-completions (the daemon's completion rings hold two).
uint32_t windows(const Args& a) { return a.lazy ? 6 : 2; }

// windows(a) rings of send buffers per flow, all free; filled with 0x5A
// when `fill`. 0, or fail()'s exit code (the channel detached) when the
// arena has no room.
int alloc_buffers(const Args& a, tm_channel* ch, bool fill, std::vector<uint8_t*>& bufs,
                  std::vector<uint32_t>& free_list) {
    const uint32_t nbuf = a.ring * windows(a) * a.flows;
    bufs.assign(nbuf, nullptr);
    for (uint32_t i = 0; i < nbuf; i++) {
        bufs[i] = static_cast<uint8_t*>(tm_buf_alloc(ch, a.size ? a.size : 1));
        if (bufs[i] == nullptr)
            return fail(ch, "tm_buf_alloc (raise the arena: TAILMARK_ARENA_MB)", -ENOMEM);
        if (fill)
            memset(bufs[i], 0x5A, a.size);
        free_list.push_back(i);
    }
    return 0;
}

// Every session that arrives is served at once (tm_recv_any spans all of
// them); each ends with one 0-byte message per flow, and gets its line.
int receiver(const Args& a, tm_channel* ch) {
    tm_listen_opts lo{};
    if (int rc = tm_listen(ch, a.port, &lo); rc < 0)
        return fail(ch, "listen", rc);
    struct Run {
        tm_session_info info{};
        uint64_t got = 0, bytes = 0, errors = 0;
        uint32_t ends = 0;
        double t0 = 0;
        bool done = false;
    };
    std::vector<Run> runs;
    uint32_t finished = 0;
    auto report = [&](Run& r) {
        const double t = now_s() - r.t0;
        printf("{\"role\": \"recv\", \"session\": %u, \"messages\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"seconds\": %.6f, \"msgs_per_s\": %.1f, \"gbps\": %.4f, \"verified\": %s, \"errors\": %" PRIu64
               ", \"complete\": %s}\n",
               r.info.session, r.got, r.bytes, t, t > 0 ? r.got / t : 0.0, t > 0 ? r.bytes * 8 / t / 1e9 : 0.0,
               a.verify ? "true" : "false", r.errors, r.ends == r.info.nflows ? "true" : "false");
        fflush(stdout);
        r.done = true;
        finished++;
        tm_close(ch, r.info.session);
    };
    tm_message m{};
    while (finished < a.sessions) {
        tm_session_info info{};
        int rc = tm_accept(ch, runs.size() == finished ? 1000 : 0, &info);
        if (rc < 0)
            return fail(ch, "accept", rc);
        if (rc == 1) {
            runs.push_back(Run{});
            runs.back().info = info;
        }
        rc = tm_recv_any(ch, &m);
        if (rc < 0)
            return fail(ch, "recv", rc);
        if (rc == 0) { // busy-poll: the path's latency, not a sleep's; a session that ended early is reported
            for (Run& r : runs)
                if (!r.done && tm_session_state(ch, r.info.session) > 0)
                    report(r);
            continue;
        }
        Run* r = nullptr;
        for (Run& x : runs)
            if (x.info.session == m.session)
                r = &x;
        if (r == nullptr || r->done) { // not ours to count (cannot happen): handed back
            tm_release(ch, &m);
            continue;
        }
        if (r->t0 == 0)
            r->t0 = now_s();
        if (m.len == 0) {
            r->ends++;
        } else {
            if (a.verify) {
                const auto* p = static_cast<const uint8_t*>(m.data);
                const uint64_t id = uint64_t(m.msg_id) * r->info.nflows + m.flow; // the sender's k: flow k % flows
                for (size_t i = 0; i < m.len; i++)
                    r->errors += p[i] != pattern(id, i);
            }
            r->got++;
            r->bytes += m.len;
        }
        if ((rc = tm_release(ch, &m)) < 0)
            return fail(ch, "release", rc);
        if (r->ends == r->info.nflows)
            report(*r);
    }
    tm_detach(ch);
    return 0;
}

int sender(const Args& a, tm_channel* ch) {
    tm_connect_opts co{};
    co.nflows = a.flows;
    co.ring_size = a.ring;
    co.max_msg = static_cast<uint32_t>(a.size);
    tm_session s = 0;
    if (int rc = tm_connect(ch, a.host.c_str(), a.port, &co, &s); rc < 0)
        return fail(ch, "connect", rc);
    std::vector<uint8_t*> bufs;
    std::vector<uint32_t> free_list;
    if (int rc = alloc_buffers(a, ch, !a.verify, bufs, free_list); rc != 0)
        return rc;
    uint64_t sent = 0, done = 0, failed = 0;
    const uint64_t total = a.count + a.flows; // and one end marker per flow
    tm_completion cs[256];
    const double t0 = now_s();
    while (done < total) {
        // Round robin over the flows: message k goes on flow k % flows.
        while (sent < total && !free_list.empty()) {
            const bool end = sent >= a.count;
            const uint16_t flow = static_cast<uint16_t>(sent % a.flows);
            const uint32_t b = free_list.back();
            if (a.verify && !end) {
                for (uint64_t i = 0; i < a.size; i++)
                    bufs[b][i] = pattern(sent, i);
            }
            const int rc = tm_send(ch, s, flow, bufs[b], end ? 0 : a.size, b);
            if (rc == -EAGAIN)
                break;
            if (rc < 0)
                return fail(ch, "send", rc);
            free_list.pop_back();
            sent++;
        }
        const int n = reap(ch, cs, free_list, failed);
        if (n < 0)
            return fail(ch, "completions", n);
        done += static_cast<uint64_t>(n);
        if (failed != 0)
            break;
    }
    const double t = now_s() - t0;
    printf("{\"role\": \"send\", \"size\": %" PRIu64 ", \"flows\": %u, \"messages\": %" PRIu64
           ", \"seconds\": %.6f, \"msgs_per_s\": %.1f, \"gbps\": %.4f, \"failed\": %" PRIu64 "}\n",
           a.size, a.flows, a.count, t, t > 0 ? a.count / t : 0.0, t > 0 ? a.count * a.size * 8 / t / 1e9 : 0.0,
           failed);
    fflush(stdout);
    tm_close(ch, s);
    tm_detach(ch);
    return failed == 0 ? 0 : 1;
}

// --loop: one process sends to itself through the daemon (it listens, and
// connects to the daemon's own address), and receives what it sent, in one
// loop on one thread: the application path's counterpart of the generator's
// loopback, where one lcore makes, sends, receives and consumes.
int looper(const Args& a, tm_channel* ch) {
    tm_listen_opts lo{};
    if (int rc = tm_listen(ch, a.port, &lo); rc < 0)
        return fail(ch, "listen", rc);
    tm_connect_opts co{};
    co.nflows = a.flows;
    co.ring_size = a.ring;
    co.max_msg = static_cast<uint32_t>(a.size);
    tm_session s = 0;
    if (int rc = tm_connect(ch, a.host.c_str(), a.port, &co, &s); rc < 0)
        return fail(ch, "connect", rc);
    tm_session_info info{};
    int rc;
    while ((rc = tm_accept(ch, 1000, &info)) == 0) {
    }
    if (rc < 0)
        return fail(ch, "accept", rc);
    std::vector<uint8_t*> bufs;
    std::vector<uint32_t> free_list;
    if (int rc = alloc_buffers(a, ch, true, bufs, free_list); rc != 0)
        return rc;
    uint64_t sent = 0, done = 0, failed = 0, got = 0, errors = 0;
    tm_completion cs[256];
    tm_message m{};
    const double t0 = now_s();
    while (done < a.count || got < a.count) {
        while (sent < a.count && !free_list.empty()) {
            const uint32_t b = free_list.back();
            if (a.verify)
                for (uint64_t i = 0; i < a.size; i++)
                    bufs[b][i] = pattern(sent, i);
            rc = tm_send(ch, s, static_cast<uint16_t>(sent % a.flows), bufs[b], a.size, b);
            if (rc == -EAGAIN)
                break;
            if (rc < 0)
                return fail(ch, "send", rc);
            free_list.pop_back();
            sent++;
        }
        for (int k = 0; k < 64 && (rc = tm_recv_any(ch, &m)) == 1; k++) {
            if (a.verify) {
                const auto* p = static_cast<const uint8_t*>(m.data);
                const uint64_t id = uint64_t(m.msg_id) * a.flows + m.flow;
                for (size_t i = 0; i < m.len; i++)
                    errors += p[i] != pattern(id, i);
            }
            got++;
            if ((rc = tm_release(ch, &m)) < 0)
                return fail(ch, "release", rc);
        }
        if (rc < 0)
            return fail(ch, "recv", rc);
        // Lazy: received a completion ring's worth (2 x ring per flow)
        // beyond what was reaped, the daemon took (and holds) at least as
        // many: its ring is full, and it waits for us.
        if (a.lazy && got - done < uint64_t(a.ring) * 2 * a.flows && sent < a.count)
            continue;
        const int n = reap(ch, cs, free_list, failed);
        if (n < 0)
            return fail(ch, "completions", n);
        done += static_cast<uint64_t>(n);
        if (failed != 0)
            break;
    }
    const double t = now_s() - t0;
    printf("{\"role\": \"loop\", \"size\": %" PRIu64 ", \"flows\": %u, \"messages\": %" PRIu64
           ", \"received\": %" PRIu64 ", \"completed\": %" PRIu64 ", \"seconds\": %.6f, \"msgs_per_s\": %.1f, \"gbps\": %.4f, \"failed\": %" PRIu64
           ", \"verified\": %s, \"errors\": %" PRIu64 "}\n",
           a.size, a.flows, a.count, got, done, t, t > 0 ? a.count / t : 0.0, t > 0 ? a.count * a.size * 8 / t / 1e9 : 0.0,
           failed, a.verify ? "true" : "false", errors);
    fflush(stdout);
    tm_close(ch, s);
    tm_close(ch, info.session);
    tm_detach(ch);
    return failed == 0 && errors == 0 && got == a.count && done == a.count ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    Args a;
    bool connect = false, loop = false;
    for (int i = 1; i < argc; i++) {
        const std::string o = argv[i];
        auto val = [&]() -> const char* {
            if (i + 1 >= argc)
                usage((o + ": needs a value").c_str());
            return argv[++i];
        };
        if (o == "--socket") {
            a.socket = val();
        } else if (o == "--listen") {
            a.listen = true;
            a.port = static_cast<uint16_t>(number("--listen", val()));
        } else if (o == "--connect") {
            connect = true;
            std::string v = val();
            const size_t colon = v.find(':');
            a.host = v.substr(0, colon);
            if (colon != std::string::npos)
                a.port = static_cast<uint16_t>(number("--connect", v.substr(colon + 1).c_str()));
        } else if (o == "--loop") {
            loop = true;
            std::string v = val();
            const size_t colon = v.find(':');
            a.host = v.substr(0, colon);
            if (colon != std::string::npos)
                a.port = static_cast<uint16_t>(number("--loop", v.substr(colon + 1).c_str()));
        } else if (o == "--size") {
            a.size = number("--size", val());
        } else if (o == "--count") {
            a.count = number("--count", val());
        } else if (o == "--flows") {
            a.flows = static_cast<uint16_t>(number("--flows", val()));
        } else if (o == "--ring") {
            a.ring = static_cast<uint32_t>(number("--ring", val()));
        } else if (o == "--sessions") {
            a.sessions = static_cast<uint32_t>(number("--sessions", val()));
        } else if (o == "--verify") {
            a.verify = true;
        } else if (o == "--lazy-completions") {
            a.lazy = true;
        } else {
            usage(("unknown option " + o).c_str());
        }
    }
    if (int(a.listen) + int(connect) + int(loop) != 1)
        usage("one of --listen, --connect and --loop");
    if (a.flows == 0 || a.port == 0)
        usage("--flows and the port must be at least 1");
    tm_attach_opts ao{};
    ao.socket_path = a.socket;
    ao.name = loop ? "perf-loop" : a.listen ? "perf-recv" : "perf-send";
    if (const char* mb = getenv("TAILMARK_ARENA_MB"))
        ao.arena_bytes = strtoull(mb, nullptr, 0) << 20;
    else if (!a.listen)
        ao.arena_bytes = std::max<uint64_t>(64ull << 20, (uint64_t(a.ring) * windows(a) * a.flows * ((a.size + 63) / 64 * 64) + (4 << 20)));
    tm_channel* ch = nullptr;
    if (int rc = tm_attach(&ao, &ch); rc < 0)
        return fail(ch, "attach", rc);
    return loop ? looper(a, ch) : a.listen ? receiver(a, ch) : sender(a, ch);
}
