// The shell's read-only commands: `show` port stats and info, flows,
// completion slots, drops, config and lcores (and `clear port stats`).
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cmdline.h>
#include <cmdline_parse.h>
#include <cmdline_parse_num.h>
#include <cmdline_parse_string.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "drivers/port_stats.h"
#include "shell_commands_internal.h"

namespace tailmark::app::shell_cmd {

namespace {

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
    return rt().tx_port_id() == p || rt().rx_port_id() == p || rt().rail_of(p) > 0;
}

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

void print_port_stats(cmdline* cl, uint16_t p) {
    rte_eth_stats s;
    if (drivers::port_stats(p, &s) != 0) {
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

} // namespace

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
        } else if (drivers::port_stats_reset(id) == 0) {
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
    if (rt().rail_of(p) > 0)
        OUT("  Used by tailmarkd: rail %d (tx and rx)\n", rt().rail_of(p));
    else
        OUT("  Used by tailmarkd: %s\n", port_in_use(p) ? (rt().tx_port_id() == p && rt().rx_port_id() == p
                                                              ? "tx and rx"
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
            rt().rate_sent(i), rt().rate_done(i));
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
    Results r;
    if (!rt().results_from_shell(r)) {
        OUT("show drops: the control loop did not answer within 2 s\n");
        return;
    }
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

} // namespace tailmark::app::shell_cmd
