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

#include "drivers/port_stats.h"
#include "shell_commands_internal.h"
#include "shell_internal.h"

namespace tailmark::app {

using namespace shell_cmd;

namespace {

constexpr uint32_t kSendQueueDepth = 64; // `send` requests waiting per flow
constexpr double kStopWaitS = 2.0;       // `stop`: wait this long for in-flight messages
constexpr double kWaitDefaultS = 10.0;   // `wait idle` without a timeout

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

// testpmd's stop: the forward statistics of each port in use, then the totals.
void print_forward_stats(cmdline* cl) {
    Results r;
    if (!rt().results_from_shell(r)) {
        OUT("stop: the control loop did not answer within 2 s\n");
        return;
    }
    int ports[2] = {rt().tx_port_id(), rt().rx_port_id()};
    const int np = ports[0] == ports[1] ? 1 : 2;
    uint64_t rx_all = 0, tx_all = 0, drop_all = 0;
    for (int k = 0; k < np; k++) {
        if (ports[k] < 0)
            continue;
        rte_eth_stats s{};
        drivers::port_stats(static_cast<uint16_t>(ports[k]), &s);
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
