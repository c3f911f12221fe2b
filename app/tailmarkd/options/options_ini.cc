// The INI form of the options: a --config file applied over the defaults,
// and the effective options written back (--dump-config, `show config`).
#include "options_internal.h"

#include <sys/stat.h>

#include <cstdio>
#include <sstream>

#include <rte_ether.h>

#include "config_file.h"
#include "tailmark/session.h"

namespace tailmark::app {

namespace option_parsing {

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

} // namespace option_parsing

namespace {

// --msg-size as given: the size, or the list of sizes.
std::string sizes_text(const Options& x) {
    if (x.msg_sizes.empty())
        return std::to_string(x.msg_size);
    std::string r;
    for (uint64_t v : x.msg_sizes) {
        if (!r.empty())
            r.push_back(',');
        r.append(std::to_string(v));
    }
    return r;
}

// An lcore list: "0,2,3".
std::string lcores_text(const std::vector<unsigned>& v) {
    std::string r;
    for (unsigned l : v) {
        if (!r.empty())
            r += ',';
        r += std::to_string(l);
    }
    return r;
}

std::string mac_text(const rte_ether_addr& m) {
    char b[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(b, sizeof(b), &m);
    return std::string(b);
}

// User or group ids: "0,1000".
std::string ids_text(const std::vector<uint32_t>& v) {
    std::string r;
    for (uint32_t x : v) {
        if (!r.empty())
            r.push_back(',');
        r.append(std::to_string(x));
    }
    return r;
}

} // namespace

std::string dump_ini(const Options& o) {
    std::ostringstream s;
    auto ip = ip_to_string;
    char key[16];
    snprintf(key, sizeof(key), "0x%08x", o.key);
    s << "[tailmark]\n"
      << "mode = " << to_string(o.mode) << "\n"
      << "flows = " << o.flows << "\n"
      << "msg-size = " << sizes_text(o) << "\n"
      << "messages = " << o.messages << "\n"
      << "duration = " << o.duration << "\n"
      << "ring-size = " << o.ring_size << "\n"
      << "mtu = " << o.mtu << "\n"
      << "completion = " << to_string(o.completion) << "\n";
    if (!o.tx_lcores.empty())
        s << "tx-lcores = " << lcores_text(o.tx_lcores) << "\n";
    if (!o.rx_lcores.empty())
        s << "rx-lcores = " << lcores_text(o.rx_lcores) << "\n";
    if (o.external_consumer)
        s << "consumer-lcores = none\n";
    else if (!o.consumer_lcores.empty())
        s << "consumer-lcores = " << lcores_text(o.consumer_lcores) << "\n";
    s << "tx-port = " << o.tx_port << "\n"
      << "rx-port = " << o.rx_port << "\n";
    if (o.src_mac_set)
        s << "src-mac = " << mac_text(o.src_mac) << "\n";
    if (o.dst_mac_set)
        s << "dst-mac = " << mac_text(o.dst_mac) << "\n";
    if (!o.rails.empty()) {
        s << "rails = ";
        for (size_t i = 0; i < o.rails.size(); i++)
            s << (i ? "," : "") << o.rails[i].port << ":" << ip(o.rails[i].ip);
        s << "\n";
    }
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
      << "idle-spin-us = " << o.idle_spin_us << "\n"
      << "trace-slow-ns = " << o.trace_slow_ns << "\n"
      << "peer-timeout-ms = " << o.peer_timeout_ms << "\n"
      << "connect-timeout-ms = " << o.connect_timeout_ms << "\n";
    if (o.mode == Mode::Service) {
        s << "control-socket = " << o.control_socket << "\n"
          << "max-apps = " << o.svc_max_apps << "\n"
          << "max-pending = " << o.svc_max_pending << "\n"
          << "max-session-mb = " << o.svc_max_session_mb << "\n"
          << "max-arena = " << o.svc_max_arena << "\n"
          << "zero-copy = " << (o.svc_zero_copy == Options::ZeroCopy::Off ? "off" : "auto") << "\n";
        if (o.svc_allow_uids_set)
            s << "allow-uid = " << ids_text(o.svc_allow_uids) << "\n";
        if (o.svc_allow_gids_set)
            s << "allow-group = " << ids_text(o.svc_allow_gids) << "\n";
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
