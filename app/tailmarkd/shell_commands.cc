// The shell's commands, as in testpmd's cmdline.c: one result struct and one
// token per field, one cmdline_parse_inst_t per command, a NULL-terminated
// context. They run on the shell thread: they read counters, and change the
// data plane only through single atomic stores and the per-flow `send` ring.
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cmdline.h>
#include <cmdline_parse.h>
#include <cmdline_parse_num.h>
#include <cmdline_parse_string.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "shell_internal.h"

namespace tailmark::app {

namespace {

constexpr uint32_t kSendQueueDepth = 64; // `send` requests waiting per flow
constexpr double kStopWaitS = 2.0;       // `stop`: wait this long for in-flight messages
constexpr double kWaitDefaultS = 10.0;   // `wait idle` without a timeout

ShellState& sh() { return *g_shell; }
Runtime& rt() { return *sh().rt; }
const Options& opt() { return rt().options(); }

// Commands print to stdout, as testpmd's do (a command file's cmdline has no
// output fd of its own), flushed so that the output and the prompt keep their order.
#define OUT(...) ((void)cl, printf(__VA_ARGS__), fflush(stdout))

// "all" or a number below `limit`; -1 for all, -2 on error (printed).
long parse_all_or(cmdline* cl, const char* s, unsigned long limit, const char* what) {
    if (strcmp(s, "all") == 0)
        return -1;
    char* end = nullptr;
    errno = 0;
    const unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v >= limit) {
        OUT("error: %s '%s': give all or a number below %lu\n", what, s, limit);
        return -2;
    }
    return static_cast<long>(v);
}

bool port_in_use(uint16_t p) {
    return rt().tx_port_id() == p || rt().rx_port_id() == p;
}

Plane& plane() { return rt().plane(); }
// Flows the shell addresses: the configured ones (loopback, send), or every
// session's so far (recv).
uint32_t nflows() { return rt().flow_count(); }

// Messages of flow f whose completion flag is set and not yet consumed (message mode).
uint32_t completed_unconsumed(const FlowCtx& f, uint32_t consumed, uint32_t sent) {
    if (f.ring == nullptr || rt().completion() != CompletionMode::Message)
        return 0;
    uint32_t n = 0;
    for (uint32_t m = consumed; m != sent && n < f.ring_size; m++, n++)
        if (f.ring->poll(m) == nullptr)
            break;
    return n;
}

// No message on its way anywhere: every `send` sent, everything sent consumed,
// no tx lcore busy, and the generator off or through its --messages.
bool idle() {
    const Options& o = opt();
    if (rt().senders_busy())
        return false;
    for (uint32_t i = 0; i < nflows() && i < sh().requested.size(); i++) {
        const FlowCtx& f = rt().flow_at(i);
        const uint64_t ss = f.sends_sent.load(std::memory_order_acquire);
        if (ss != sh().requested[i])
            return false;
        const Sender::FlowView v = rt().send_view(f);
        const uint32_t sent = v.submitted;
        if (v.sent != v.submitted)
            return false;
        if (o.mode == Mode::Loopback && f.consumed.load(std::memory_order_acquire) != sent)
            return false;
        if (o.mode == Mode::Send && o.flow_control && v.released != sent)
            return false;
        if (plane().gen_on.load() && !plane().tx_paused.load() && (o.messages == 0 || sent - ss < o.messages))
            return false;
    }
    return true;
}

// Polls idle() up to `secs`; false on timeout or a quit request.
bool wait_idle(double secs) {
    const uint64_t hz = rte_get_tsc_hz();
    const uint64_t end = rte_rdtsc() + static_cast<uint64_t>(secs * double(hz));
    while (!idle()) {
        if (rte_rdtsc() >= end || rt().stop_request().requests() != 0 || plane().phase_now() == Phase::Stop)
            return false;
        rte_delay_us_sleep(1000);
    }
    return true;
}

void print_port_stats(cmdline* cl, uint16_t p) {
    rte_eth_stats s;
    if (rte_eth_stats_get(p, &s) != 0) {
        OUT("error: port %u: no statistics\n", p);
        return;
    }
    OUT("  ######################## NIC statistics for port %-2u ########################\n", p);
    OUT("  RX-packets: %-12" PRIu64 " RX-missed: %-12" PRIu64 " RX-bytes:  %" PRIu64 "\n", s.ipackets, s.imissed,
        s.ibytes);
    OUT("  RX-errors:  %" PRIu64 "\n  RX-nombuf:  %-12" PRIu64 "\n", s.ierrors, s.rx_nombuf);
    OUT("  TX-packets: %-12" PRIu64 " TX-errors: %-12" PRIu64 " TX-bytes:  %" PRIu64 "\n", s.opackets, s.oerrors,
        s.obytes);
    OUT("  ############################################################################\n");
}

// testpmd's stop: the forward statistics of each port in use, then the totals.
void print_forward_stats(cmdline* cl) {
    const Results r = rt().results();
    int ports[2] = {rt().tx_port_id(), rt().rx_port_id()};
    const int np = ports[0] == ports[1] ? 1 : 2;
    uint64_t rx_all = 0, tx_all = 0, drop_all = 0;
    for (int k = 0; k < np; k++) {
        if (ports[k] < 0)
            continue;
        rte_eth_stats s{};
        rte_eth_stats_get(static_cast<uint16_t>(ports[k]), &s);
        const bool is_rx = ports[k] == rt().rx_port_id(), is_tx = ports[k] == rt().tx_port_id();
        const uint64_t rx_drop = s.imissed + (is_rx ? r.drops_total : 0);
        const uint64_t tx_drop = s.oerrors + (is_tx ? r.tx_dropped : 0);
        OUT("  ---------------------- Forward statistics for port %-2d ----------------------\n", ports[k]);
        OUT("  RX-packets: %-14" PRIu64 " RX-dropped: %-14" PRIu64 " RX-total: %" PRIu64 "\n", s.ipackets, rx_drop,
            s.ipackets + s.imissed);
        OUT("  TX-packets: %-14" PRIu64 " TX-dropped: %-14" PRIu64 " TX-total: %" PRIu64 "\n", s.opackets, tx_drop,
            s.opackets + tx_drop);
        OUT("  ----------------------------------------------------------------------------\n");
        rx_all += s.ipackets;
        tx_all += s.opackets;
        drop_all += rx_drop + tx_drop;
    }
    OUT("  +++++++++++++++ Accumulated forward statistics for all ports +++++++++++++++\n");
    OUT("  RX-packets: %-14" PRIu64 " TX-packets: %-14" PRIu64 " dropped: %" PRIu64 "\n", rx_all, tx_all, drop_all);
    OUT("  messages: sent %" PRIu64 ", completed %" PRIu64 ", verified %" PRIu64 ", verify errors %" PRIu64 "\n",
        r.messages_sent, r.messages_completed, r.messages_verified, r.verify_errors);
    OUT("  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++\n");
}

// --- help --------------------------------------------------------------------

struct cmd_help_result {
    cmdline_fixed_string_t help;
};
cmdline_parse_token_string_t cmd_help_help = TOKEN_STRING_INITIALIZER(cmd_help_result, help, "help");
void cmd_help_parsed(void*, cmdline* cl, void*) {
    OUT("tailmark shell: the data plane keeps running while you type. TAB completes, ? lists.\n"
        "With -i the generator is off until `start`; `send` works at any time.\n\n");
    for (cmdline_parse_inst_t** i = shell_context(); *i != nullptr; i++)
        OUT("  %s\n", (*i)->help_str);
}
cmdline_parse_inst_t cmd_help = {
    .f = cmd_help_parsed,
    .data = nullptr,
    .help_str = "help: this list",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_help_help, nullptr},
};

// --- start / stop -----------------------------------------------------------

struct cmd_start_result {
    cmdline_fixed_string_t cmd;
};
cmdline_parse_token_string_t cmd_start_cmd = TOKEN_STRING_INITIALIZER(cmd_start_result, cmd, "start");
void cmd_start_parsed(void*, cmdline* cl, void*) {
    plane().tx_paused.store(0);
    plane().gen_on.store(1);
    if (opt().messages == 0)
        OUT("generator started: messages of %" PRIu64 " B on every flow until `stop`\n", opt().msg_size);
    else
        OUT("generator started: up to %" PRIu64 " messages of %" PRIu64 " B per flow (--messages)\n",
            opt().messages, opt().msg_size);
}
cmdline_parse_inst_t cmd_start = {
    .f = cmd_start_parsed,
    .data = nullptr,
    .help_str = "start: start the generator (--messages per flow, 0 = until stop) and resume `send`s",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_start_cmd, nullptr},
};

struct cmd_stop_result {
    cmdline_fixed_string_t cmd;
};
cmdline_parse_token_string_t cmd_stop_cmd = TOKEN_STRING_INITIALIZER(cmd_stop_result, cmd, "stop");
void cmd_stop_parsed(void*, cmdline* cl, void*) {
    plane().gen_on.store(0);
    plane().tx_paused.store(1);
    OUT("Telling the tx lcores to start no new message ... waiting up to %.0f s for those in flight\n", kStopWaitS);
    const uint64_t hz = rte_get_tsc_hz(), end = rte_rdtsc() + static_cast<uint64_t>(kStopWaitS * double(hz));
    auto drained = [] {
        if (rt().senders_busy())
            return false;
        if (opt().mode == Mode::Loopback)
            for (uint32_t i = 0; i < nflows(); i++)
                if (rt().flow_at(i).consumed.load() != rt().send_view(rt().flow_at(i)).sent)
                    return false;
        return true;
    };
    while (!drained() && rte_rdtsc() < end)
        rte_delay_us_sleep(1000);
    if (!drained())
        OUT("warning: messages still in flight after %.0f s\n", kStopWaitS);
    print_forward_stats(cl);
    OUT("Done. (rx and consumer lcores keep polling; `start` resumes)\n");
}
cmdline_parse_inst_t cmd_stop = {
    .f = cmd_stop_parsed,
    .data = nullptr,
    .help_str = "stop: no new messages (generator and send); in-flight ones finish; prints the per-port summary",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_stop_cmd, nullptr},
};

// --- show/clear port stats, show port info ----------------------------------

struct cmd_port_stats_result {
    cmdline_fixed_string_t verb;
    cmdline_fixed_string_t port;
    cmdline_fixed_string_t stats;
    cmdline_fixed_string_t which;
};
cmdline_parse_token_string_t cmd_port_stats_verb =
    TOKEN_STRING_INITIALIZER(cmd_port_stats_result, verb, "show#clear");
cmdline_parse_token_string_t cmd_port_stats_port = TOKEN_STRING_INITIALIZER(cmd_port_stats_result, port, "port");
cmdline_parse_token_string_t cmd_port_stats_stats = TOKEN_STRING_INITIALIZER(cmd_port_stats_result, stats, "stats");
cmdline_parse_token_string_t cmd_port_stats_which = TOKEN_STRING_INITIALIZER(cmd_port_stats_result, which, nullptr);
void cmd_port_stats_parsed(void* res, cmdline* cl, void*) {
    auto* r = static_cast<cmd_port_stats_result*>(res);
    const long p = parse_all_or(cl, r->which, RTE_MAX_ETHPORTS, "port");
    if (p == -2)
        return;
    const bool clear = strcmp(r->verb, "clear") == 0;
    if (p >= 0 && !rte_eth_dev_is_valid_port(static_cast<uint16_t>(p))) {
        OUT("error: port %ld does not exist\n", p);
        return;
    }
    uint16_t id;
    RTE_ETH_FOREACH_DEV(id) {
        if (p >= 0 && id != p)
            continue;
        if (!clear) {
            print_port_stats(cl, id);
        } else if (rte_eth_stats_reset(id) == 0) {
            OUT("  NIC statistics for port %u cleared\n", id);
        } else {
            OUT("error: port %u: statistics could not be cleared\n", id);
        }
    }
}
cmdline_parse_inst_t cmd_port_stats = {
    .f = cmd_port_stats_parsed,
    .data = nullptr,
    .help_str = "show|clear port stats all|P: NIC statistics (rte_eth_stats) of the ports, or reset them",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_port_stats_verb, (cmdline_parse_token_hdr_t*)&cmd_port_stats_port,
               (cmdline_parse_token_hdr_t*)&cmd_port_stats_stats, (cmdline_parse_token_hdr_t*)&cmd_port_stats_which,
               nullptr},
};

struct cmd_port_info_result {
    cmdline_fixed_string_t show;
    cmdline_fixed_string_t port;
    cmdline_fixed_string_t info;
    uint16_t id;
};
cmdline_parse_token_string_t cmd_port_info_show = TOKEN_STRING_INITIALIZER(cmd_port_info_result, show, "show");
cmdline_parse_token_string_t cmd_port_info_port = TOKEN_STRING_INITIALIZER(cmd_port_info_result, port, "port");
cmdline_parse_token_string_t cmd_port_info_info = TOKEN_STRING_INITIALIZER(cmd_port_info_result, info, "info");
cmdline_parse_token_num_t cmd_port_info_id = TOKEN_NUM_INITIALIZER(cmd_port_info_result, id, RTE_UINT16);
void cmd_port_info_parsed(void* res, cmdline* cl, void*) {
    const uint16_t p = static_cast<cmd_port_info_result*>(res)->id;
    rte_eth_dev_info di;
    if (!rte_eth_dev_is_valid_port(p) || rte_eth_dev_info_get(p, &di) != 0) {
        OUT("error: port %u does not exist\n", p);
        return;
    }
    rte_ether_addr mac{};
    rte_eth_macaddr_get(p, &mac);
    char macs[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(macs, sizeof(macs), &mac);
    char name[RTE_ETH_NAME_MAX_LEN] = "";
    rte_eth_dev_get_name_by_port(p, name);
    rte_eth_link link{};
    const bool have_link = rte_eth_link_get_nowait(p, &link) == 0;
    uint16_t mtu = 0;
    rte_eth_dev_get_mtu(p, &mtu);
    OUT("  ********************* Infos for port %-2u *********************\n", p);
    OUT("  MAC address: %s\n  Device name: %s\n  Driver name: %s\n", macs, name,
        di.driver_name ? di.driver_name : "?");
    OUT("  Connect to socket: %d\n", rte_eth_dev_socket_id(p));
    if (have_link)
        OUT("  Link status: %s\n  Link speed: %u Mbps\n", link.link_status ? "up" : "down", link.link_speed);
    OUT("  MTU: %u\n  Promiscuous mode: %s\n", mtu, rte_eth_promiscuous_get(p) == 1 ? "enabled" : "disabled");
    OUT("  Current number of RX queues: %u (max %u)\n  Current number of TX queues: %u (max %u)\n",
        di.nb_rx_queues, di.max_rx_queues, di.nb_tx_queues, di.max_tx_queues);
    OUT("  Used by tailmarkd: %s\n", port_in_use(p) ? (rt().tx_port_id() == p && rt().rx_port_id() == p ? "tx and rx"
                                                      : rt().tx_port_id() == p ? "tx" : "rx")
                                                   : "no");
}
cmdline_parse_inst_t cmd_port_info = {
    .f = cmd_port_info_parsed,
    .data = nullptr,
    .help_str = "show port info P: driver, MAC, NUMA socket, link, MTU, queues of port P",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_port_info_show, (cmdline_parse_token_hdr_t*)&cmd_port_info_port,
               (cmdline_parse_token_hdr_t*)&cmd_port_info_info, (cmdline_parse_token_hdr_t*)&cmd_port_info_id,
               nullptr},
};

// --- show flow ----------------------------------------------------------------

struct cmd_show_flow_result {
    cmdline_fixed_string_t show;
    cmdline_fixed_string_t flow;
    cmdline_fixed_string_t which;
};
cmdline_parse_token_string_t cmd_show_flow_show = TOKEN_STRING_INITIALIZER(cmd_show_flow_result, show, "show");
cmdline_parse_token_string_t cmd_show_flow_flow = TOKEN_STRING_INITIALIZER(cmd_show_flow_result, flow, "flow");
cmdline_parse_token_string_t cmd_show_flow_which = TOKEN_STRING_INITIALIZER(cmd_show_flow_result, which, nullptr);
void cmd_show_flow_parsed(void* res, cmdline* cl, void*) {
    const long w = parse_all_or(cl, static_cast<cmd_show_flow_result*>(res)->which, nflows(), "flow");
    if (w == -2)
        return;
    for (uint32_t i = 0; i < nflows(); i++) {
        if (w >= 0 && i != static_cast<uint32_t>(w))
            continue;
        const FlowCtx& f = rt().flow_at(i);
        const Sender::FlowView v = rt().send_view(f);
        const uint32_t consumed = f.consumed.load(std::memory_order_acquire);
        const uint32_t sent = v.sent;
        uint32_t completed;
        if (opt().mode == Mode::Send)
            completed = v.released; // released by the receiver
        else
            completed = consumed + completed_unconsumed(f, consumed, opt().mode == Mode::Recv ? consumed + f.ring_size : sent);
        const uint64_t ss = f.sends_sent.load(std::memory_order_acquire);
        const uint32_t in_flight = opt().mode == Mode::Recv ? 0 : sent - completed;
        const uint64_t retx = v.retx_pkts;
        const uint64_t requested = i < sh().requested.size() ? sh().requested[i] : 0;
        OUT("flow %u: sent=%u completed=%u consumed=%u in_flight=%u retransmits=%" PRIu64 " send_requested=%" PRIu64
            " send_queued=%" PRIu64 " rate_sent=%.0f/s rate_done=%.0f/s\n",
            i, sent, completed, consumed, in_flight, retx, requested, requested - ss,
            f.rate_sent.load(std::memory_order_relaxed), f.rate_done.load(std::memory_order_relaxed));
    }
}
cmdline_parse_inst_t cmd_show_flow = {
    .f = cmd_show_flow_parsed,
    .data = nullptr,
    .help_str = "show flow all|F: messages sent, completed, consumed, in flight, packets retransmitted, send requests, "
                "messages per second sent and done over the last second",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_show_flow_show, (cmdline_parse_token_hdr_t*)&cmd_show_flow_flow,
               (cmdline_parse_token_hdr_t*)&cmd_show_flow_which, nullptr},
};

// --- show completions F [N] ----------------------------------------------------

struct cmd_show_compl_result {
    cmdline_fixed_string_t show;
    cmdline_fixed_string_t completions;
    uint16_t flow;
    uint32_t n;
};
cmdline_parse_token_string_t cmd_show_compl_show = TOKEN_STRING_INITIALIZER(cmd_show_compl_result, show, "show");
cmdline_parse_token_string_t cmd_show_compl_completions =
    TOKEN_STRING_INITIALIZER(cmd_show_compl_result, completions, "completions");
cmdline_parse_token_num_t cmd_show_compl_flow = TOKEN_NUM_INITIALIZER(cmd_show_compl_result, flow, RTE_UINT16);
cmdline_parse_token_num_t cmd_show_compl_n = TOKEN_NUM_INITIALIZER(cmd_show_compl_result, n, RTE_UINT32);
void cmd_show_compl_parsed(void* res, cmdline* cl, void* data) {
    auto* r = static_cast<cmd_show_compl_result*>(res);
    if (r->flow >= nflows()) {
        OUT("error: show completions: no flow %u (there are %u)\n", r->flow, nflows());
        return;
    }
    const FlowCtx& f = rt().flow_at(r->flow);
    if (f.ring == nullptr) {
        OUT("error: flow %u has no completion ring in %s mode\n", r->flow, to_string(opt().mode));
        return;
    }
    uint32_t n = data != nullptr ? r->n : 8;
    if (n > f.ring_size)
        n = f.ring_size;
    const uint32_t consumed = f.consumed.load(std::memory_order_acquire);
    uint32_t hi = opt().mode == Mode::Recv ? consumed + completed_unconsumed(f, consumed, consumed + f.ring_size)
                                           : rt().send_view(f).sent;
    const uint32_t lo = hi > n ? hi - n : 0;
    OUT("flow %u: the last %u of %u messages (ring %u, completion %s)\n", r->flow, hi - lo, hi, f.ring_size,
        to_string(rt().completion()));
    OUT("  %10s %6s %18s %10s  %s\n", "msg_id", "slot", "flag", "length", "status");
    for (uint32_t m = lo; m != hi; m++) {
        const CompletionSlot* s = f.ring->slot(m);
        const uint64_t flag = __atomic_load_n(&s->flag, __ATOMIC_ACQUIRE);
        const uint32_t id = __atomic_load_n(&s->msg_id, __ATOMIC_RELAXED);
        const uint32_t len = __atomic_load_n(&s->msg_len, __ATOMIC_RELAXED);
        const char* st;
        if (rt().completion() == CompletionMode::Packet)
            st = m < consumed ? "consumed (packet mode: no slot flag)" : "pending (packet mode)";
        else if (flag == uint64_t(m) + 1 && id == m)
            st = m < consumed ? "consumed" : "complete";
        else if (flag > uint64_t(m) + 1)
            st = "slot reused by a later message";
        else
            st = m < consumed ? "released incomplete" : "pending";
        OUT("  %10u %6u 0x%016" PRIx64 " %10u  %s\n", m, m & (f.ring_size - 1), flag, len, st);
    }
}
int kWithN = 1;
cmdline_parse_inst_t cmd_show_compl = {
    .f = cmd_show_compl_parsed,
    .data = nullptr,
    .help_str = "show completions F: the last 8 completion slots of flow F (msg_id, flag, length, status)",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_show_compl_show, (cmdline_parse_token_hdr_t*)&cmd_show_compl_completions,
               (cmdline_parse_token_hdr_t*)&cmd_show_compl_flow, nullptr},
};
cmdline_parse_inst_t cmd_show_compl_n_inst = {
    .f = cmd_show_compl_parsed,
    .data = &kWithN,
    .help_str = "show completions F N: the last N (up to the ring size) completion slots of flow F",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_show_compl_show, (cmdline_parse_token_hdr_t*)&cmd_show_compl_completions,
               (cmdline_parse_token_hdr_t*)&cmd_show_compl_flow, (cmdline_parse_token_hdr_t*)&cmd_show_compl_n, nullptr},
};

// --- show drops / config / lcores ----------------------------------------------

struct cmd_show_word_result {
    cmdline_fixed_string_t show;
    cmdline_fixed_string_t what;
};
cmdline_parse_token_string_t cmd_show_word_show = TOKEN_STRING_INITIALIZER(cmd_show_word_result, show, "show");
cmdline_parse_token_string_t cmd_show_drops_what = TOKEN_STRING_INITIALIZER(cmd_show_word_result, what, "drops");
cmdline_parse_token_string_t cmd_show_config_what = TOKEN_STRING_INITIALIZER(cmd_show_word_result, what, "config");
cmdline_parse_token_string_t cmd_show_lcores_what = TOKEN_STRING_INITIALIZER(cmd_show_word_result, what, "lcores");

void cmd_show_drops_parsed(void*, cmdline* cl, void*) {
    const Results r = rt().results();
    OUT("drops: total=%" PRIu64 " tx_dropped=%" PRIu64 " verify_errors=%" PRIu64 "\n", r.drops_total, r.tx_dropped,
        r.verify_errors);
    for (size_t i = 0; i < kDropReasonCount; i++)
        if (r.drops[i] != 0)
            OUT("  %s=%" PRIu64 "\n", std::string(kDropReasonNames[i]).c_str(), r.drops[i]);
}
cmdline_parse_inst_t cmd_show_drops = {
    .f = cmd_show_drops_parsed,
    .data = nullptr,
    .help_str = "show drops: dropped packets in total and by reason (non-zero reasons), tx drops, verify errors",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_show_word_show, (cmdline_parse_token_hdr_t*)&cmd_show_drops_what,
               nullptr},
};

void cmd_show_config_parsed(void*, cmdline* cl, void*) {
    OUT("%s", dump_ini(opt()).c_str());
    const drivers::FaultCounters fc = rt().fault_counters();
    OUT("\n[run time]\ngenerator = %s\nsend = %s\nburst = %u\nstats-period = %g\nfault = %s (dropped %lu, "
        "duplicated %lu, reordered %lu, corrupted %lu)\n",
        plane().gen_on.load() ? "on" : "off", plane().tx_paused.load() ? "paused (stop)" : "on", plane().burst_now(),
        rt().stats_period(), rt().fault_spec().str().c_str(), fc.dropped, fc.duplicated, fc.reordered,
        fc.corrupted);
}
cmdline_parse_inst_t cmd_show_config = {
    .f = cmd_show_config_parsed,
    .data = nullptr,
    .help_str = "show config: the effective options (INI form) and the run-time settings",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_show_word_show, (cmdline_parse_token_hdr_t*)&cmd_show_config_what,
               nullptr},
};

void cmd_show_lcores_parsed(void*, cmdline* cl, void*) {
    const auto& lcores = rt().lcores();
    const unsigned main_lcore = rte_get_main_lcore();
    unsigned l;
    RTE_LCORE_FOREACH(l) {
        std::string s;
        const LcoreCtx* r = lcores[l];
        if (r != nullptr && r->tx) {
            s += " tx(port";
            for (size_t q = 0; q < r->tx->senders.size(); q++) {
                const Sender* snd = r->tx->senders[q];
                if (q == 0)
                    s += ' ' + std::to_string(snd->port()) + ", queues";
                s += ' ' + std::to_string(snd->queue()) + " [flows";
                for (uint32_t i = 0; i < nflows(); i++)
                    if (rt().flow_at(i).sender == snd && rt().flow_at(i).send != nullptr)
                        s += ' ' + std::to_string(i);
                s += ']';
            }
            s += ')';
        }
        if (r != nullptr && r->rx)
            s += " rx(port " + std::to_string(r->rx->port) + ", queue " + std::to_string(r->rx->queue) + ")";
        if (r != nullptr && r->cons) {
            s += " consumer(flows";
            for (uint32_t i = 0; i < nflows(); i++)
                if (rt().flow_at(i).cons_ctx == r->cons && rt().flow_at(i).cons != nullptr)
                    s += ' ' + std::to_string(i);
            s += ')';
        }
        if (l == main_lcore)
            s += " control";
        if (s.empty())
            s = " idle";
        OUT("lcore %u (socket %u):%s\n", l, rte_lcore_to_socket_id(l), s.c_str());
    }
    OUT("shell: a non-EAL thread\n");
}
cmdline_parse_inst_t cmd_show_lcores = {
    .f = cmd_show_lcores_parsed,
    .data = nullptr,
    .help_str = "show lcores: roles (tx, rx, consumer, control), ports, queues, flows and NUMA socket per lcore",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_show_word_show, (cmdline_parse_token_hdr_t*)&cmd_show_lcores_what,
               nullptr},
};

// --- send F SIZE COUNT ------------------------------------------------------------

struct cmd_send_result {
    cmdline_fixed_string_t send;
    uint16_t flow;
    uint32_t size;
    uint32_t count;
};
cmdline_parse_token_string_t cmd_send_send = TOKEN_STRING_INITIALIZER(cmd_send_result, send, "send");
cmdline_parse_token_num_t cmd_send_flow = TOKEN_NUM_INITIALIZER(cmd_send_result, flow, RTE_UINT16);
cmdline_parse_token_num_t cmd_send_size = TOKEN_NUM_INITIALIZER(cmd_send_result, size, RTE_UINT32);
cmdline_parse_token_num_t cmd_send_count = TOKEN_NUM_INITIALIZER(cmd_send_result, count, RTE_UINT32);
void cmd_send_parsed(void* res, cmdline* cl, void*) {
    auto* r = static_cast<cmd_send_result*>(res);
    const Options& o = opt();
    if (o.mode == Mode::Recv) {
        OUT("error: send: a receiver (--mode recv) sends no messages\n");
        return;
    }
    if (r->flow >= o.flows) {
        OUT("error: send: flow %u does not exist (--flows %u)\n", r->flow, o.flows);
        return;
    }
    if (r->size > o.msg_size) {
        OUT("error: send: SIZE %u B is larger than the receive region of flow %u (%" PRIu64
            " B, --msg-size); restart with a larger --msg-size\n",
            r->size, r->flow, o.msg_size);
        return;
    }
    if (o.mode == Mode::Send && r->size != o.msg_size) {
        OUT("error: send: in send mode the receiver checks every message against its --msg-size: SIZE must be "
            "%" PRIu64 "\n",
            o.msg_size);
        return;
    }
    FlowCtx& f = rt().flow_at(r->flow);
    const GroupPlan plan = plan_group(r->size, stride_for_mtu(o.mtu));
    if (!plan.ok() || plan.pkt_count > f.pkts_per_msg) {
        OUT("error: send: SIZE %u B does not fit the flow's packet plan\n", r->size);
        return;
    }
    if (r->count == 0) {
        OUT("error: send: COUNT must be at least 1\n");
        return;
    }
    if (plane().phase_now() != Phase::Run || rt().stop_request().requests() != 0) {
        OUT("error: send: the daemon is shutting down\n");
        return;
    }
    uint64_t req = send_req(r->size, r->count);
    if (rte_ring_sp_enqueue_elem(f.send_q, &req, sizeof(req)) != 0) {
        OUT("error: send: flow %u has %u requests waiting; try again when they are sent\n", r->flow,
            kSendQueueDepth - 1);
        return;
    }
    sh().requested[r->flow] += r->count;
    f.sends_requested.store(sh().requested[r->flow], std::memory_order_release);
    OUT("flow %u: %u message(s) of %u B queued%s\n", r->flow, r->count, r->size,
        plane().tx_paused.load() ? " (stopped: they go out after `start`)" : "");
}
cmdline_parse_inst_t cmd_send = {
    .f = cmd_send_parsed,
    .data = nullptr,
    .help_str = "send F SIZE COUNT: send COUNT messages of SIZE bytes on flow F (SIZE <= --msg-size, the receive "
                "region); works with the generator off; the consumer checks each message's length and bytes",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_send_send, (cmdline_parse_token_hdr_t*)&cmd_send_flow,
               (cmdline_parse_token_hdr_t*)&cmd_send_size, (cmdline_parse_token_hdr_t*)&cmd_send_count, nullptr},
};

// --- set ... --------------------------------------------------------------------

struct cmd_set_word_result {
    cmdline_fixed_string_t set;
    cmdline_fixed_string_t what;
    cmdline_fixed_string_t value;
};
cmdline_parse_token_string_t cmd_set_set = TOKEN_STRING_INITIALIZER(cmd_set_word_result, set, "set");
cmdline_parse_token_string_t cmd_set_completion_what =
    TOKEN_STRING_INITIALIZER(cmd_set_word_result, what, "completion");
cmdline_parse_token_string_t cmd_set_completion_value =
    TOKEN_STRING_INITIALIZER(cmd_set_word_result, value, "message#packet");
void cmd_set_completion_parsed(void* res, cmdline* cl, void*) {
    const char* want = static_cast<cmd_set_word_result*>(res)->value;
    const CompletionMode m = strcmp(want, "packet") == 0 ? CompletionMode::Packet : CompletionMode::Message;
    if (rt().completion() == m) {
        OUT("completion is already %s\n", want);
        return;
    }
    // Packets of one message must not straddle the switch.
    if (!idle()) {
        OUT("error: set completion %s: messages are in flight; `stop` and `wait idle` first\n", want);
        return;
    }
    std::string why;
    if (!rt().set_completion(m, why)) {
        OUT("error: set completion %s: %s\n", want, why.c_str());
        return;
    }
    OUT("completion set to %s\n", want);
}
cmdline_parse_inst_t cmd_set_completion = {
    .f = cmd_set_completion_parsed,
    .data = nullptr,
    .help_str = "set completion message|packet: one completion write per message, or per packet (with nothing in flight)",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_set_set, (cmdline_parse_token_hdr_t*)&cmd_set_completion_what,
               (cmdline_parse_token_hdr_t*)&cmd_set_completion_value, nullptr},
};

struct cmd_set_num_result {
    cmdline_fixed_string_t set;
    cmdline_fixed_string_t what;
    uint32_t value;
};
cmdline_parse_token_string_t cmd_set_burst_set = TOKEN_STRING_INITIALIZER(cmd_set_num_result, set, "set");
cmdline_parse_token_string_t cmd_set_burst_what = TOKEN_STRING_INITIALIZER(cmd_set_num_result, what, "burst");
cmdline_parse_token_num_t cmd_set_burst_value = TOKEN_NUM_INITIALIZER(cmd_set_num_result, value, RTE_UINT32);
void cmd_set_burst_parsed(void* res, cmdline* cl, void*) {
    const uint32_t n = static_cast<cmd_set_num_result*>(res)->value;
    if (n < 1 || n > kMaxBurst) {
        OUT("error: set burst: %u is outside [1, %u]\n", n, kMaxBurst);
        return;
    }
    plane().burst.store(n, std::memory_order_relaxed);
    for (Sender* s : rt().senders())
        s->set_burst(n);
    OUT("burst set to %u packets\n", n);
}
cmdline_parse_inst_t cmd_set_burst = {
    .f = cmd_set_burst_parsed,
    .data = nullptr,
    .help_str = "set burst N: packets per rx/tx burst (1..64), at once",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_set_burst_set, (cmdline_parse_token_hdr_t*)&cmd_set_burst_what,
               (cmdline_parse_token_hdr_t*)&cmd_set_burst_value, nullptr},
};

cmdline_parse_token_string_t cmd_set_period_what = TOKEN_STRING_INITIALIZER(cmd_set_word_result, what, "stats-period");
cmdline_parse_token_string_t cmd_set_any_value = TOKEN_STRING_INITIALIZER(cmd_set_word_result, value, nullptr);
void cmd_set_period_parsed(void* res, cmdline* cl, void*) {
    const char* v = static_cast<cmd_set_word_result*>(res)->value;
    char* end = nullptr;
    errno = 0;
    const double s = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !std::isfinite(s) || s < 0 || s > 86400) {
        OUT("error: set stats-period: '%s' is not a number of seconds in [0, 86400]\n", v);
        return;
    }
    rt().set_stats_period(s);
    if (s == 0)
        OUT("stats lines off\n");
    else
        OUT("one stats line every %g s\n", s);
}
cmdline_parse_inst_t cmd_set_period = {
    .f = cmd_set_period_parsed,
    .data = nullptr,
    .help_str = "set stats-period S: one stats line every S seconds (0 = off)",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_set_set, (cmdline_parse_token_hdr_t*)&cmd_set_period_what,
               (cmdline_parse_token_hdr_t*)&cmd_set_any_value, nullptr},
};

cmdline_parse_token_string_t cmd_set_fault_what = TOKEN_STRING_INITIALIZER(cmd_set_word_result, what, "fault");
void cmd_set_fault_parsed(void* res, cmdline* cl, void*) {
    const char* text = static_cast<cmd_set_word_result*>(res)->value;
    drivers::FaultSpec spec;
    std::string err;
    if (!drivers::parse_fault_spec(text, spec, err)) {
        OUT("error: set fault: %s; syntax: set fault drop=R,dup=R,reorder=R,corrupt=R[,seed=N]\n", err.c_str());
        return;
    }
    if (!rt().set_fault(spec)) {
        OUT("error: set fault: no fault shim on this run's rx queues\n");
        return;
    }
    OUT("fault shim: %s on every rx queue, from its next burst\n", spec.str().c_str());
}
cmdline_parse_inst_t cmd_set_fault = {
    .f = cmd_set_fault_parsed,
    .data = nullptr,
    .help_str = "set fault drop=R,dup=R,reorder=R,corrupt=R[,seed=N]: the fault shim on the rx queues "
                "(probabilities; omitted ones 0; drop=0 turns it off)",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_set_set, (cmdline_parse_token_hdr_t*)&cmd_set_fault_what,
               (cmdline_parse_token_hdr_t*)&cmd_set_any_value, nullptr},
};

// --- wait idle [S] -----------------------------------------------------------------

struct cmd_wait_result {
    cmdline_fixed_string_t wait;
    cmdline_fixed_string_t idle;
    cmdline_fixed_string_t secs;
};
cmdline_parse_token_string_t cmd_wait_wait = TOKEN_STRING_INITIALIZER(cmd_wait_result, wait, "wait");
cmdline_parse_token_string_t cmd_wait_idle = TOKEN_STRING_INITIALIZER(cmd_wait_result, idle, "idle");
cmdline_parse_token_string_t cmd_wait_secs = TOKEN_STRING_INITIALIZER(cmd_wait_result, secs, nullptr);
void cmd_wait_parsed(void* res, cmdline* cl, void* data) {
    double secs = kWaitDefaultS;
    if (data != nullptr) {
        const char* v = static_cast<cmd_wait_result*>(res)->secs;
        char* end = nullptr;
        secs = strtod(v, &end);
        if (end == v || *end != '\0' || !(secs > 0 && secs <= 3600)) {
            OUT("error: wait idle: '%s' is not a number of seconds in (0, 3600]\n", v);
            return;
        }
    }
    if (wait_idle(secs))
        OUT("idle\n");
    else
        OUT("error: wait idle: messages still on their way after %g s\n", secs);
}
cmdline_parse_inst_t cmd_wait = {
    .f = cmd_wait_parsed,
    .data = nullptr,
    .help_str = "wait idle: block until every queued send is sent and every message is consumed (10 s at most); "
                "for scripts",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_wait_wait, (cmdline_parse_token_hdr_t*)&cmd_wait_idle, nullptr},
};
cmdline_parse_inst_t cmd_wait_s = {
    .f = cmd_wait_parsed,
    .data = &kWithN,
    .help_str = "wait idle S: the same, S seconds at most",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_wait_wait, (cmdline_parse_token_hdr_t*)&cmd_wait_idle,
               (cmdline_parse_token_hdr_t*)&cmd_wait_secs, nullptr},
};

// --- quit ---------------------------------------------------------------------------

struct cmd_quit_result {
    cmdline_fixed_string_t quit;
};
cmdline_parse_token_string_t cmd_quit_quit = TOKEN_STRING_INITIALIZER(cmd_quit_result, quit, "quit");
void cmd_quit_parsed(void*, cmdline* cl, void*) {
    OUT("quitting: no new messages, draining those in flight, then the summary\n");
    rt().stop_request().drain(); // as SIGTERM: the control loop drains and stops
    cmdline_quit(cl);
}
cmdline_parse_inst_t cmd_quit = {
    .f = cmd_quit_parsed,
    .data = nullptr,
    .help_str = "quit: the same clean shutdown as SIGTERM (drain, summary, --summary-json); EOF does the same",
    .tokens = {(cmdline_parse_token_hdr_t*)&cmd_quit_quit, nullptr},
};

cmdline_parse_ctx_t g_ctx[] = {
    &cmd_help,         &cmd_start,       &cmd_stop,          &cmd_port_stats,         &cmd_port_info,
    &cmd_show_flow,    &cmd_show_compl,  &cmd_show_compl_n_inst, &cmd_show_drops,     &cmd_show_config,
    &cmd_show_lcores,  &cmd_send,        &cmd_set_completion, &cmd_set_burst,        &cmd_set_period,
    &cmd_set_fault,    &cmd_wait,        &cmd_wait_s,        &cmd_quit,               nullptr,
};

} // namespace

cmdline_parse_ctx_t* shell_context() {
    return g_ctx;
}

bool shell_attach_channels(ShellState& sh, std::string& err) {
    const Options& o = sh.rt->options();
    sh.requested.assign(o.flows, 0);
    if (o.mode == Mode::Recv)
        return true; // nothing to send
    const int socket = sh.rt->tx_socket();
    for (uint32_t i = 0; i < o.flows; i++) {
        FlowCtx& f = sh.rt->flow_at(i);
        char name[RTE_RING_NAMESIZE];
        snprintf(name, sizeof(name), "tm_send_%u", i);
        f.send_q = rte_ring_create_elem(name, sizeof(uint64_t), kSendQueueDepth, socket,
                                        RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (f.send_q == nullptr) {
            err = std::string("-i: the send ring of flow ") + std::to_string(i) + ": " + rte_strerror(rte_errno);
            shell_detach_channels(sh);
            return false;
        }
        if (o.mode == Mode::Loopback) { // the consumer checks each message's length
            f.sizes = static_cast<uint64_t*>(rte_zmalloc_socket("tm_sizes", sizeof(uint64_t) * f.ring_size, 64,
                                                               socket));
            if (f.sizes == nullptr) {
                err = "-i: out of memory (message length records)";
                shell_detach_channels(sh);
                return false;
            }
            // msg_id 0..N-1 of the generator have --msg-size until recorded otherwise.
            for (uint32_t m = 0; m < f.ring_size; m++)
                f.sizes[m] = uint64_t(m) << 32 | o.msg_size;
        }
    }
    return true;
}

void shell_detach_channels(ShellState& sh) {
    if (sh.rt == nullptr)
        return;
    for (uint32_t i = 0; i < sh.rt->flow_count() && i < sh.rt->options().flows; i++) {
        FlowCtx& f = sh.rt->flow_at(i);
        rte_ring_free(f.send_q);
        f.send_q = nullptr;
        rte_free(f.sizes);
        f.sizes = nullptr;
    }
}

} // namespace tailmark::app
