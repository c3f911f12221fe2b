// Every option in one table: its name, argument, help text and setter;
// the parser, --config and --help all read it.
#include "options_internal.h"

#include <cstdio>
#include <cstdlib>

#include "tailmark/session.h"

namespace tailmark::app {

namespace option_parsing {

namespace {

#define U64_OPT(field, lo, hi, sizes)                                                     \
    [](Options& o, std::string_view v) -> Err {                                           \
        uint64_t x;                                                                       \
        Err e = parse_range(v, lo, hi, x, sizes);                                         \
        if (e.empty())                                                                    \
            o.field = static_cast<decltype(o.field)>(x);                                  \
        return e;                                                                         \
    }

// The same, and field##_set noted: a mode's default does not apply.
#define U64_OPT_SET(field, lo, hi)                                                        \
    [](Options& o, std::string_view v) -> Err {                                           \
        uint64_t x;                                                                       \
        Err e = parse_range(v, lo, hi, x);                                                \
        if (e.empty()) {                                                                  \
            o.field = x;                                                                  \
            o.field##_set = true;                                                         \
        }                                                                                 \
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
    {"rails", "PORT:IPV4[,...]",
     "more ports, each with its own address (rails; up to 3): a session's data is striped over the rails both ends "
     "have, rail i to the peer's rail i, which the handshake names (rails are links: no router between); ACKs "
     "follow the data, keep-alives go by every rail, the handshake by --tx-port (default: none)",
     [](Options& o, std::string_view v) -> Err {
         o.rails.clear();
         while (!v.empty()) {
             const size_t comma = v.find(',');
             const std::string_view item = v.substr(0, comma);
             v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
             const size_t colon = item.find(':');
             std::string what = "rail ";
             what += std::to_string(o.rails.size() + 1);
             if (colon == std::string_view::npos)
                 return what + ": give PORT:IPV4";
             Options::Rail r;
             uint64_t port;
             if (Err e = parse_range(item.substr(0, colon), 0, RTE_MAX_ETHPORTS - 1, port, false); !e.empty())
                 return what + "'s port: " + e;
             r.port = static_cast<uint16_t>(port);
             if (Err e = parse_ip(item.substr(colon + 1), r.ip); !e.empty())
                 return e;
             if (o.rails.size() == 3)
                 return "at most 3 rails beside --tx-port";
             o.rails.push_back(r);
         }
         return {};
     }},
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
    {"idle-spin-us", "US",
     "how long an idle lcore polls before --idle-sleep-us's first nap (default 1000, in --mode service the nap)",
     U64_OPT_SET(idle_spin_us, 0, 1000000)},
    {"idle-sleep-us", "US",
     "an lcore idle for --idle-spin-us sleeps this long per idle turn (0 = always poll; default 0, in --mode service 50)",
     U64_OPT_SET(idle_sleep_us, 0, 10000)},
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

} // namespace

const OptDef* find_opt(std::string_view name) {
    for (const OptDef& d : kOpts)
        if (name == d.name)
            return &d;
    return nullptr;
}

} // namespace option_parsing

using option_parsing::OptDef;
using option_parsing::kOpts;

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

} // namespace tailmark::app
