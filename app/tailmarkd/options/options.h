// tailmarkd's options: built-in defaults (identical to config/loopback.ini),
// then an INI file (--config), then the command line; a later source
// overrides an earlier one. Every value goes through the same setter, so a
// bad value gets the same message whatever its source.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <rte_ether.h>

#include "drivers/fault_shim.h"
#include "tailmark/siphash.h"
#include "tailmark/rx_placer.h"
#include "tailmark/wire.h"

namespace tailmark::app {

// Service: no generator; applications open sessions and flows at run time
// through the control socket (libtailmark-client, app/tailmarkd/service/).
enum class Mode : uint8_t { Loopback, Send, Recv, Service };

// --mode service's --idle-sleep-us unless given: its lcores nap when idle,
// since it shares the host's CPUs with the applications it serves.
inline constexpr uint64_t kServiceIdleSleepUs = 50;
const char* to_string(Mode m);
const char* to_string(CompletionMode m);

struct Options {
    Mode mode = Mode::Loopback;
    uint32_t flows = 4;
    uint64_t msg_size = 4096;            // the largest size (the receive regions' size)
    std::vector<uint64_t> msg_sizes;      // --msg-size A,B,..: message i of a flow is A, B, .. in turn
    uint64_t messages = 100000; // per flow; 0 = until stopped
    double duration = 0;        // seconds; 0 = no limit
    uint32_t ring_size = 64;
    uint32_t mtu = 1500;
    CompletionMode completion = CompletionMode::Message;
    std::vector<unsigned> tx_lcores, rx_lcores, consumer_lcores; // empty: the default lcore
    uint16_t tx_port = 0;
    uint16_t rx_port = 0;
    bool rx_port_set = false; // send/recv: the rx port follows --tx-port unless given
    bool src_mac_set = false, dst_mac_set = false;
    rte_ether_addr src_mac{}, dst_mac{};
    uint32_t src_ip = 0xC6120001; // 198.18.0.1 (RFC 2544 benchmarking range)
    uint32_t dst_ip = 0xC6120002; // 198.18.0.2
    // Routed peers: --src-ip's /LEN (0: not given) is the local subnet; a
    // peer outside it is reached through --gateway, whose MAC ARP resolves.
    uint8_t src_prefix = 0;
    uint32_t gateway = 0; // 0: every peer is on the link
    uint32_t src_netmask() const { return src_prefix == 0 ? 0 : ~uint32_t{0} << (32 - src_prefix); }
    // Rails beyond --tx-port (--rails PORT:IP,...): each a port that sends
    // and receives with an address of its own; a session stripes its data
    // over the rails both ends have.
    struct Rail {
        uint16_t port = 0;
        uint32_t ip = 0;
    };
    std::vector<Rail> rails;
    uint16_t udp_port = kDefaultUdpPort;
    // The flows' completion key. Not given (key_set false), each session's
    // acceptor draws one (sessions do not share a well-known key); this value
    // is --flow-control off's, which has no session.
    uint32_t key = 0x7A11C0DE;
    bool key_set = false;
    std::map<uint16_t, uint32_t> flow_keys; // [flow.N] key=...
    double stats_period = 1.0;  // seconds; 0 = off
    bool stats_period_set = false; // given (-i: the default is 0, no lines under the prompt)
    std::string summary_json;
    bool exit_when_done = false;
    bool linger = false;            // --linger: once done, keep serving (telemetry) until a signal
    bool external_consumer = false; // --consumer-lcores none: another process consumes (lib/tailmark/consumer.h)
    bool interactive = false;
    drivers::FaultSpec fault;   // --fault: the fault shim on the rx queues (drivers/fault_shim.h)
    bool fault_set = false;
    std::string cmdline_file;   // --cmdline-file: shell commands run at start (then the prompt with -i)
    bool flow_control = true;   // sender waits for credits (the receiver's released cursor)
    uint32_t burst = 32;
    uint64_t tx_quantum = 1 << 20; // bytes a flow sends in one round-robin turn (whole messages up to it)
    uint64_t rto_us = 5000;          // first retransmission timeout
    uint64_t rto_max_us = 200000;    // back-off cap
    // Timeouts in a row without progress before a flow fails; by default
    // (kRetryLimitAuto) as many as fill --peer-timeout-ms (options.cc).
    static constexpr uint32_t kRetryLimitAuto = UINT32_MAX;
    uint32_t retry_limit = kRetryLimitAuto;
    uint64_t stream_min = 0;         // receiver: region slots this large or larger placed by streaming stores
    uint64_t nack_delay_us = 200;    // receiver: a gap waits this long (reordering) before its NACK
    bool udp_checksum = true;        // senders fill the UDP checksum (NIC or software), receivers verify non-zero ones
    // Congestion control (lib/tailmark/congestion.h), per session of a remote peer.
    bool cc = true;
    uint64_t cc_target_us = 500;     // queueing delay tolerated above the base RTT
    uint64_t paths = 1;              // UDP source ports a session's data is sprayed over (tx_paths.h)
    uint64_t cc_start_mbps = 50;     // a session's first rate, then slow start
    uint64_t cc_max_mbps = 0;        // 0: the port's link speed (100 Gbit/s when unknown)
    uint64_t ack_feedback_us = 200;  // receiver: while data arrives, an ACK (an RTT sample) at least this often
    bool replay = false;             // --replay: tx resends ready-made packets (rx benchmarks)
    bool fixed_payload = false;      // --payload fixed: every message of a flow carries message 0's bytes
    bool verify = true;              // --verify off: consumers only take completions (benchmarks)
    double rate = 0;                 // --rate: generator messages per second, all flows together (0: as fast as possible)
    // Sessions (lib/tailmark/session.h).
    SipKey secret{};                 // --secret: the control packets' MAC key, the same on both ends
    bool secret_set = false;
    // Where it came from: --secret-file (PATH kept: --dump-config prints it),
    // TAILMARK_SECRET, --secret on the command line (visible in
    // /proc/PID/cmdline until main() overwrites it: warned about), or the
    // --config file. The secret itself is never printed.
    enum class SecretFrom : uint8_t { None, Config, Env, CommandLine, File } secret_from = SecretFrom::None;
    std::string secret_file;
    bool insecure = false;           // --insecure: send/recv without a secret (an all-zero key), said in the log
    uint64_t data_version = 2;       // --data-version: the highest offered and taken (2: tagged data packets)
    bool data_auth = false;          // --data-auth: version 2's tag covers the payload too (asked for, required)
    uint16_t service = kDefaultUdpPort; // the listener a session names (recv listens, send connects to it)
    uint32_t sessions = 1;           // recv: sender sessions to see through before --exit-when-done
    uint64_t keepalive_ms = 1000;    // a connector's liveness probe, per session
    uint64_t keep_ended = 256;       // ended sessions the summary, shell and telemetry keep (run/registry.cc)
    uint64_t idle_sleep_us = 0;      // an idle lcore's sleep per turn, after idle_spin_us idle (0: poll only)
    bool idle_sleep_us_set = false;  // given: --mode service's default (kServiceIdleSleepUs) does not apply
    uint64_t idle_spin_us = 1000;    // how long an idle lcore polls before its first nap
    bool idle_spin_us_set = false;   // given: --mode service's default (its nap) does not apply
    uint64_t trace_slow_ns = 0;      // diagnostic: timelines of completions later than this (0: off)
    uint64_t peer_timeout_ms = 5000; // nothing authentic from a peer for this long: the session ends
    uint64_t connect_timeout_ms = 5000; // no ACCEPT or REFUSE within this: give up
    // --mode service: where applications attach, and what one may take.
    std::string control_socket = "/run/tailmark/tailmarkd.sock";
    uint32_t svc_max_apps = 64;          // attached applications at once
    uint32_t svc_max_pending = 16;       // connections that have not said HELLO yet, at once (apart from max-apps)
    uint64_t svc_max_session_mb = 1024;  // one session's receive (or send) memory, MiB
    uint64_t svc_max_arena = 1ull << 30; // the largest arena an application may declare, bytes
    // Who may attach (SO_PEERCRED): a peer whose uid is listed, or whose
    // primary or supplementary group is. Unset: the daemon's uid, its group.
    std::vector<uint32_t> svc_allow_uids, svc_allow_gids;
    bool svc_allow_uids_set = false, svc_allow_gids_set = false;
    // Zero copy from the applications' arenas: Auto = where the ports read
    // it at the right address (IOVA as VA, or virtual devices only); Off =
    // always copy into mbufs.
    enum class ZeroCopy : uint8_t { Auto, Off } svc_zero_copy = ZeroCopy::Auto;
    std::string config_path;
    bool dump_config = false;
    // The --config file's [eal] args: EAL arguments that go before the
    // command line's (which override them), so one INI file describes a
    // whole instance (tailmarkd@.service). Split on whitespace.
    std::string eal_args;

    uint32_t key_of(uint16_t flow) const {
        auto it = flow_keys.find(flow);
        return it == flow_keys.end() ? key : it->second;
    }
};

// Result of parsing: run, exit 0 (--help, --dump-config), or exit 2 with one message.
struct ParseResult {
    enum class Action { Run, ExitOk, ExitError } action = Action::Run;
    std::string error; // "--ring-size: 3 is not a power of two"
};

// args: the application's arguments (after EAL's "--"), argv[0] excluded.
ParseResult parse_options(const std::vector<std::string>& args, Options& opt);

void print_help(const char* prog);
// Splits [eal] args on whitespace (no quoting).
std::vector<std::string> split_eal_args(const std::string& s);
// The effective options in INI form (--dump-config).
std::string dump_ini(const Options& opt);

} // namespace tailmark::app
