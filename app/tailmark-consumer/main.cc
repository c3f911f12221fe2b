// tailmark-consumer: an example consumer in its own process.
//
//   tailmark-consumer --proc-type=secondary --file-prefix=<tailmarkd's> [EAL...] --
//       [--flows N] [--messages M] [--until ID] [--msg-size S] [--delay-us US] [--attach-timeout SEC]
//       [--summary-json FILE]
//
// A DPDK secondary process of a running `tailmarkd --consumer-lcores none`.
// For each flow 0..N-1 it attaches to the completion ring (memzone
// tailmark_ring_<flow>, lib/tailmark/consumer.h), polls the flags in msg_id
// order, verifies every byte of each message in place against the built-in
// generator (app/tailmarkd/bench/generator.cc, the daemon's benchmark
// harness), and releases the slot, which hands the credit back to the
// sender. It stops after M messages per flow (0: until SIGINT/SIGTERM); a
// consumer started later resumes at the released cursor.
// Exit 0 when every message consumed verified (and M were consumed per flow).
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_pause.h>

#include "generator.h"
#include "tailmark/consumer.h"

namespace {

std::atomic<bool> g_quit{false};
void on_signal(int) { g_quit.store(true, std::memory_order_relaxed); }

struct Args {
    uint32_t flows = 4;
    uint64_t messages = 0;     // per flow; 0 = until a signal
    uint64_t msg_size = 0;     // expected length; 0 = whatever the slot says
    uint64_t until = 0;        // stop each flow when it reaches this msg_id (0 = no limit)
    uint64_t delay_us = 0;     // pause after each message (a slow consumer, for tests)
    double attach_timeout = 10;
    std::string summary_json;
};

bool parse_u64(const char* s, uint64_t& out) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        return false;
    out = v;
    return true;
}

void usage() {
    fprintf(stderr,
            "usage: tailmark-consumer --proc-type=secondary --file-prefix=PREFIX [EAL...] -- [options]\n"
            "  --flows N            consume flows 0..N-1 (default 4)\n"
            "  --messages M         messages per flow, then exit (default 0: until SIGINT/SIGTERM)\n"
            "  --msg-size S         every message must be S bytes (default: not checked)\n"
            "  --until ID           stop each flow once message ID-1 is released (default: no limit)\n"
            "  --delay-us US        sleep that long after each message (a slow consumer)\n"
            "  --attach-timeout SEC wait that long for the rings to appear (default 10)\n"
            "  --summary-json FILE  write the counts there at exit\n");
}

// 0 ok, 1 exit 0 (help), 2 error
int parse(int argc, char** argv, Args& a) {
    for (int i = 0; i < argc; i++) {
        const std::string k = argv[i];
        if (k == "--help" || k == "-h") {
            usage();
            return 1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tailmark-consumer: %s needs a value\n", k.c_str());
            return 2;
        }
        const char* v = argv[++i];
        uint64_t x = 0;
        if (k == "--flows" && parse_u64(v, x) && x >= 1 && x <= 65536) {
            a.flows = static_cast<uint32_t>(x);
        } else if (k == "--messages" && parse_u64(v, x)) {
            a.messages = x;
        } else if (k == "--msg-size" && parse_u64(v, x)) {
            a.msg_size = x;
        } else if (k == "--until" && parse_u64(v, x) && x <= UINT32_MAX) {
            a.until = x;
        } else if (k == "--delay-us" && parse_u64(v, x) && x <= 1000000) {
            a.delay_us = x;
        } else if (k == "--attach-timeout" && parse_u64(v, x)) {
            a.attach_timeout = double(x);
        } else if (k == "--summary-json" && *v) {
            a.summary_json = v;
        } else {
            fprintf(stderr, "tailmark-consumer: bad option or value: %s %s\n", k.c_str(), v);
            return 2;
        }
    }
    return 0;
}

struct FlowState {
    std::unique_ptr<tailmark::Consumer> c;
    uint32_t first = 0; // msg_id at attach (the released cursor)
    uint64_t consumed = 0, verified = 0, errors = 0, bytes = 0;
};

// Each flow's ring, as the daemon makes it (waiting up to --attach-timeout).
int attach_all(const Args& a, std::vector<FlowState>& fs) {
    int rc = 0;
    const uint64_t hz = rte_get_tsc_hz();
    const uint64_t attach_deadline = rte_rdtsc() + static_cast<uint64_t>(a.attach_timeout * double(hz));
    for (uint32_t f = 0; f < a.flows && rc == 0; f++) {
        while (!(fs[f].c = tailmark::Consumer::attach(static_cast<uint16_t>(f)))) {
            if (g_quit.load() || rte_rdtsc() >= attach_deadline || rte_errno == EPROTO) { // EPROTO: never fits
                fprintf(stderr, "tailmark-consumer: flow %u: %s: %s\n", f, tailmark::ring_name(f).c_str(),
                        rte_strerror(rte_errno));
                rc = 1;
                break;
            }
            rte_delay_us_sleep(10000);
        }
        if (fs[f].c) {
            fs[f].first = fs[f].c->next();
            printf("consumer: flow %u: attached to %s (ring %u, region %" PRIu64 " B), resuming at message %u\n",
                   f, tailmark::ring_name(f).c_str(), fs[f].c->ring_size(), fs[f].c->region_size(), fs[f].first);
        }
    }
    fflush(stdout);
    return rc;
}

// Consumes, verifies and releases until every flow is done (--messages,
// --until) or a signal.
void consume(const Args& a, std::vector<FlowState>& fs) {
    uint32_t done_flows = 0;
    const bool limited = a.messages != 0 || a.until != 0;
    while (!g_quit.load(std::memory_order_relaxed) && (!limited || done_flows < a.flows)) {
        bool work = false;
        done_flows = 0;
        for (uint32_t f = 0; f < a.flows; f++) {
            FlowState& s = fs[f];
            if ((a.messages != 0 && s.consumed >= a.messages) || (a.until != 0 && s.c->next() >= a.until)) {
                done_flows++;
                continue;
            }
            tailmark::Consumer::Message m;
            if (!s.c->poll(m))
                continue;
            work = true;
            const bool ok = m.slot->msg_id == m.msg_id && m.slot->flow == f &&
                            (a.msg_size == 0 || m.data.size() == a.msg_size) &&
                            tailmark::app::verify(static_cast<uint16_t>(f), m.msg_id, m.data.data(), m.data.size());
            s.consumed++;
            s.bytes += m.data.size();
            if (ok) {
                s.verified++;
            } else if (s.errors++ < 5) {
                fprintf(stderr, "tailmark-consumer: flow %u message %u: verification failed (%zu B)\n", f, m.msg_id,
                        m.data.size());
            }
            s.c->release();
            if (a.delay_us)
                rte_delay_us_sleep(static_cast<unsigned>(a.delay_us));
        }
        if (!work)
            rte_pause();
    }

}

// The totals, each flow's range, and --summary-json; rc as it stands after.
int report(const Args& a, const std::vector<FlowState>& fs, int rc) {
    uint64_t consumed = 0, verified = 0, errors = 0, bytes = 0;
    for (uint32_t f = 0; f < a.flows; f++) {
        const FlowState& s = fs[f];
        consumed += s.consumed;
        verified += s.verified;
        errors += s.errors;
        bytes += s.bytes;
        if (s.c)
            printf("consumer: flow %u: messages %u..%u: %" PRIu64 " consumed, %" PRIu64 " verified, %" PRIu64
                   " errors\n",
                   f, s.first, s.c->next(), s.consumed, s.verified, s.errors);
        if (((a.messages != 0 && s.consumed != a.messages) || (a.until != 0 && s.c && s.c->next() != a.until)) &&
            rc == 0)
            rc = 1; // stopped early
    }
    if (errors != 0)
        rc = 1;
    printf("consumer: total %" PRIu64 " consumed, %" PRIu64 " verified, %" PRIu64 " errors, %" PRIu64 " bytes: %s\n",
           consumed, verified, errors, bytes, rc == 0 ? "OK" : "FAILED");
    if (!a.summary_json.empty()) {
        const std::string tmp = a.summary_json + ".tmp";
        FILE* out = fopen(tmp.c_str(), "w");
        if (out == nullptr) {
            fprintf(stderr, "tailmark-consumer: cannot write %s: %s\n", tmp.c_str(), strerror(errno));
            rc = 1;
        } else {
            fprintf(out, "{\n  \"flows\": %u,\n  \"consumed\": %" PRIu64 ",\n  \"verified\": %" PRIu64
                         ",\n  \"verify_errors\": %" PRIu64 ",\n  \"bytes\": %" PRIu64 ",\n  \"first\": [",
                    a.flows, consumed, verified, errors, bytes);
            for (uint32_t f = 0; f < a.flows; f++)
                fprintf(out, "%s%u", f ? ", " : "", fs[f].first);
            fprintf(out, "],\n  \"next\": [");
            for (uint32_t f = 0; f < a.flows; f++)
                fprintf(out, "%s%u", f ? ", " : "", fs[f].c ? fs[f].c->next() : 0);
            fprintf(out, "],\n  \"ok\": %s\n}\n", rc == 0 ? "true" : "false");
            fclose(out);
            if (rename(tmp.c_str(), a.summary_json.c_str()) != 0)
                rc = 1;
        }
    }
    return rc;
}

} // namespace

int main(int argc, char** argv) {
    int dash = argc;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            dash = i;
            break;
        }
    Args a;
    const int pr = parse(argc - (dash < argc ? dash + 1 : argc), argv + (dash < argc ? dash + 1 : argc), a);
    if (pr != 0)
        return pr == 1 ? 0 : 2;
    std::vector<char*> eal(argv, argv + dash);
    eal.push_back(nullptr);
    if (rte_eal_init(dash, eal.data()) < 0) {
        fprintf(stderr, "tailmark-consumer: EAL initialisation failed: %s (is tailmarkd running with this "
                        "--file-prefix, and --proc-type=secondary given?)\n",
                rte_strerror(rte_errno));
        return 1;
    }
    if (rte_eal_process_type() != RTE_PROC_SECONDARY)
        fprintf(stderr, "tailmark-consumer: warning: not a secondary process; no daemon's rings to find\n");
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    std::vector<FlowState> fs(a.flows);
    int rc = attach_all(a, fs);
    if (rc == 0)
        consume(a, fs);
    rc = report(a, fs, rc);
    fflush(stdout);
    fs.clear(); // detach (not owning: the daemon's memzones stay)
    rte_eal_cleanup();
    return rc;
}
