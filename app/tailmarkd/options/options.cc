// Command-line parsing: the sources in their order (defaults < --config <
// TAILMARK_SECRET < command line), then the checks across options.
#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "options_internal.h"
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

using option_parsing::Err;
using option_parsing::OptDef;
using option_parsing::apply_ini;
using option_parsing::find_opt;
using option_parsing::trim;

namespace {

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
        // The service shares its host's CPUs with the applications it
        // serves (torchrun's ranks): an lcore that polls while idle takes a
        // CPU from them. One host, 4 ranks of examples/torch/train_lm.py on
        // 2 vCPUs: 5184-6211 tokens/s polling, 6698-7474 napping (50 us),
        // and the idle daemon 100% of a CPU against 6-7% (docs/tailmarkd.md).
        if (!o.idle_sleep_us_set)
            o.idle_sleep_us = kServiceIdleSleepUs;
        // And it polls between messages only as long as one nap: spinning
        // for 1 ms after each took one of 2 vCPUs from 8 ranks whose
        // messages come every few tens of us (a 16 MiB all_reduce 1.3x
        // slower, an 8 KiB one 2.3x; docs/tailmarkd.md).
        if (!o.idle_spin_us_set)
            o.idle_spin_us = o.idle_sleep_us;
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
    for (size_t i = 0; i < o.rails.size(); i++) {
        const Options::Rail& r = o.rails[i];
        if (o.mode == Mode::Loopback)
            return "--rails: between two daemons (send, recv, service), not in loopback";
        if (r.port == o.tx_port || r.ip == o.src_ip)
            return "--rails: rail " + std::to_string(i + 1) + " repeats --tx-port or --src-ip";
        for (size_t j = 0; j < i; j++)
            if (o.rails[j].port == r.port || o.rails[j].ip == r.ip)
                return "--rails: rails " + std::to_string(j + 1) + " and " + std::to_string(i + 1) +
                       " share a port or an address";
    }
    if (o.mode != Mode::Loopback && o.tx_port != o.rx_port)
        return "--rx-port: send and recv modes use one port for data and credits (--tx-port == --rx-port)";
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

std::vector<std::string> split_eal_args(const std::string& s) {
    std::vector<std::string> v;
    std::istringstream ss(s);
    std::string w;
    while (ss >> w)
        v.push_back(w);
    return v;
}

} // namespace tailmark::app
