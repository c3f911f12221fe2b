#include "summary.h"

#include <cerrno>
#include <cstring>

namespace tailmark::app {

void print_summary(const Results& r, FILE* out) {
    fprintf(out,
            "summary: mode=%s completion=%s flows=%u msg_size=%lu requested=%lu exit=%s %s\n"
            "  messages: sent %lu, completed %lu, verified %lu, verify errors %lu%s\n"
            "  completion writes %lu | packets tx %lu (acks %lu), rx %lu (acks %lu), placed %lu\n"
            "  drops %lu, tx dropped %lu, tx alloc failures %lu\n"
            "  retransmitted %lu packets for %lu requests (%lu probes, %lu timeouts, %lu stale); NACKs tx %lu rx %lu; "
            "RETX received %lu\n"
            "  flows failed %u, messages failed %lu\n"
            "  elapsed %.3f s: %.0f msg/s, %.3f Mpps, %.3f Gbps payload\n"
            "  latency (ns, %lu samples): p50 %.0f, p99 %.0f, p99.9 %.0f, max %.0f\n",
            to_string(r.mode), to_string(r.completion), r.flows, r.msg_size, r.requested,
            r.exit_reason.c_str(), r.ok ? "OK" : "INCOMPLETE", r.messages_sent, r.messages_completed,
            r.messages_verified, r.verify_errors,
            r.mode == Mode::Send ? " (completed = acknowledged by the receiver)" : "",
            r.completion_writes, r.packets_tx, r.acks_tx, r.packets_rx, r.acks_rx, r.packets_placed,
            r.drops_total, r.tx_dropped, r.tx_alloc_fail, r.rel.retx_pkts, r.rel.retx_reqs, r.rel.probes,
            r.rel.rto_expired, r.rel.stale_reqs, r.rel.nacks_tx, r.rel.nacks_rx, r.rel.retx_rx, r.flows_failed,
            r.messages_failed, r.elapsed_s, r.msgs_per_s, r.mpps, r.gbps,
            r.latency_samples, r.lat_p50_ns, r.lat_p99_ns, r.lat_p999_ns, r.lat_max_ns);
    if (r.packets_local != 0)
        fprintf(out, "  in memory (between applications of this daemon): %lu packets, %lu payload bytes; the port's own tx %lu, rx %lu\n",
                r.packets_local, r.bytes_local, r.port_tx, r.port_rx);
    for (size_t i = 0; i < kDropReasonCount; i++)
        if (r.drops[i] != 0)
            fprintf(out, "  drop %-22s %lu\n", std::string(kDropReasonNames[i]).c_str(), r.drops[i]);
    fflush(out);
}

namespace {

// The summary JSON, one section at a time, in the document's order; each
// line ends with its comma but the last (write_outcome's "ok").

// What the run was asked, and what it sent, received and placed.
void write_counts(FILE* f, const Results& r) {
    fprintf(f, "  \"mode\": \"%s\",\n", to_string(r.mode));
    fprintf(f, "  \"completion_mode\": \"%s\",\n", to_string(r.completion));
    fprintf(f, "  \"flows\": %u,\n", r.flows);
    fprintf(f, "  \"msg_size\": %lu,\n", r.msg_size);
    fprintf(f, "  \"messages_per_flow\": %lu,\n", r.messages_per_flow);
    fprintf(f, "  \"messages_requested\": %lu,\n", r.requested);
    fprintf(f, "  \"messages_sent\": %lu,\n", r.messages_sent);
    fprintf(f, "  \"messages_completed\": %lu,\n", r.messages_completed);
    fprintf(f, "  \"messages_acked\": %lu,\n", r.messages_acked);
    fprintf(f, "  \"messages_verified\": %lu,\n", r.messages_verified);
    fprintf(f, "  \"verify_errors\": %lu,\n", r.verify_errors);
    fprintf(f, "  \"completion_writes\": %lu,\n", r.completion_writes);
    fprintf(f, "  \"packets_tx\": %lu,\n", r.packets_tx);
    fprintf(f, "  \"packets_rx\": %lu,\n", r.packets_rx);
    fprintf(f, "  \"packets_local\": %lu,\n", r.packets_local);
    fprintf(f, "  \"bytes_local\": %lu,\n", r.bytes_local);
    fprintf(f, "  \"packets_zero_copy\": %lu,\n", r.packets_zero_copy);
    fprintf(f, "  \"port\": {\"tx\": %lu, \"rx\": %lu, \"missed\": %lu},\n", r.port_tx, r.port_rx, r.port_missed);
    fprintf(f, "  \"acks_tx\": %lu,\n", r.acks_tx);
    fprintf(f, "  \"acks_rx\": %lu,\n", r.acks_rx);
    fprintf(f, "  \"packets_placed\": %lu,\n", r.packets_placed);
    fprintf(f, "  \"packets_streamed\": %lu,\n", r.packets_streamed);
    fprintf(f, "  \"bytes_payload\": %lu,\n", r.bytes_payload);
}

// What was lost and sent again: drops (and the fault shim's doings),
// and reliability's retransmissions and NACKs.
void write_losses(FILE* f, const Results& r) {
    fprintf(f, "  \"drops\": {");
    for (size_t i = 0; i < kDropReasonCount; i++)
        fprintf(f, "%s\n    \"%s\": %lu", i ? "," : "", std::string(kDropReasonNames[i]).c_str(),
                r.drops[i]);
    fprintf(f, "\n  },\n");
    fprintf(f, "  \"drops_total\": %lu,\n", r.drops_total);
    fprintf(f, "  \"tx_dropped\": %lu,\n", r.tx_dropped);
    if (r.fault_shim)
        fprintf(f,
                "  \"fault\": {\"seen\": %lu, \"dropped\": %lu, \"duplicated\": %lu, \"reordered\": %lu, "
                "\"corrupted\": %lu, \"arrived_retx\": %lu, \"arrived_nack\": %lu, \"passed\": %lu},\n",
                r.fault.seen, r.fault.dropped, r.fault.duplicated, r.fault.reordered, r.fault.corrupted,
                r.fault.arrived_retx, r.fault.arrived_nack, r.fault.passed);
    fprintf(f, "  \"tx_alloc_fail\": %lu,\n", r.tx_alloc_fail);
    const auto& l = r.rel;
    fprintf(f,
            "  \"reliability\": {\"retx_pkts\": %lu, \"retx_reqs\": %lu, \"probes\": %lu, \"rto_expired\": %lu, "
            "\"stale_reqs\": %lu, \"nacks_tx\": %lu, \"nacks_rx\": %lu, \"nacks_early\": %lu, \"retx_rx\": %lu, "
            "\"nack_reqs\": %lu},\n",
            l.retx_pkts, l.retx_reqs, l.probes, l.rto_expired, l.stale_reqs, l.nacks_tx, l.nacks_rx, l.nacks_early,
            l.retx_rx, l.nack_reqs);
}

// How data reached its flow's rx lcore, per rx lcore.
void write_rx_steering(FILE* f, const Results& r) {
    fprintf(f, "  \"rx_steering\": {\"mode\": \"%s\", \"moves\": %lu, \"lcores\": [", r.steering.c_str(),
            r.rx_moves);
    for (size_t i = 0; i < r.rx_lanes.size(); i++) {
        const auto& l = r.rx_lanes[i];
        fprintf(f, "%s{\"lcore\": %u, \"queue\": %u, \"packets_rx\": %lu, \"placed\": %lu, \"handed_out\": %lu, "
                   "\"handed_in\": %lu, \"held\": %lu}",
                i ? ", " : "", l.lcore, l.queue, l.packets_rx, l.placed, l.handed_out, l.handed_in, l.held);
    }
    fprintf(f, "]},\n");
}

// Slow messages, checksums, congestion control, cycles and memory.
void write_transport(FILE* f, const Results& r) {
    if (!r.slow_json.empty())
        fprintf(f, "  \"slow_messages\": %s,\n", r.slow_json.c_str());
    fprintf(f, "  \"udp_checksum\": {\"tx\": \"%s\", \"rx\": \"%s\"},\n", r.udp_checksum_tx.c_str(),
            r.udp_checksum_rx.c_str());
    fprintf(f,
            "  \"congestion\": {\"samples\": %lu, \"increases\": %lu, \"decreases\": %lu, \"loss_decreases\": %lu, "
            "\"timeouts\": %lu, \"paced\": %lu, \"rate_mbps\": %.1f, \"srtt_us\": %.1f, \"base_rtt_us\": %.1f},\n",
            r.cc.samples, r.cc.increases, r.cc.decreases, r.cc.loss_decreases, r.cc.timeouts, r.cc.paced,
            r.cc.rate_mbps, r.cc.srtt_us, r.cc.base_rtt_us);
    fprintf(f, "  \"cycles\": {\"tx_per_packet\": %.1f, \"rx_per_packet\": %.1f, \"consumer_per_message\": %.1f},\n",
            r.tx_cycles_per_packet, r.rx_cycles_per_packet, r.consumer_cycles_per_message);
    fprintf(f, "  \"memory_bytes\": %lu,\n", r.memory_bytes);
}

// Failures, and each flow.
void write_flows(FILE* f, const Results& r) {
    fprintf(f, "  \"flows_failed\": %u,\n", r.flows_failed);
    fprintf(f, "  \"messages_failed\": %lu,\n", r.messages_failed);
    fprintf(f, "  \"per_flow\": [");
    for (size_t i = 0; i < r.per_flow.size(); i++) {
        const Results::Flow& x = r.per_flow[i];
        fprintf(f, "%s\n    {\"flow\": %zu, \"sent\": %lu, \"acked\": %lu, \"released\": %lu, \"failed\": %lu, "
                   "\"state\": \"%s\", \"session\": %u, \"gave_up\": %lu, \"rx_owner\": %d, \"rx_arrived\": %d, "
                   "\"latency_samples\": %lu, \"lat_p50_ns\": %.0f, \"lat_p99_ns\": %.0f}",
                i ? "," : "", size_t{x.index}, x.sent, x.acked, x.released, x.failed, x.state, x.session, x.gave_up, x.rx_owner,
                x.rx_arrived, x.latency_samples, x.lat_p50_ns, x.lat_p99_ns);
    }
    fprintf(f, "\n  ],\n");
}

// --paths: every path of every sprayed session.
void write_paths(FILE* f, const Results& r) {
    fprintf(f, "  \"paths\": [");
    for (size_t i = 0; i < r.paths.size(); i++) {
        const auto& x = r.paths[i];
        fprintf(f, "%s\n    {\"sender\": %u, \"session\": %u, \"path\": %u, \"rail\": %u, \"port\": %u, \"sent\": %lu, "
                   "\"retx\": %lu, \"lost\": %lu, \"probes\": %lu, \"samples\": %lu, \"deaths\": %lu, "
                   "\"srtt_us\": %.1f, \"share\": %.4f, \"rate_mbps\": %.1f, \"cuts\": %lu, \"dead\": %s}",
                i ? "," : "", x.sender, x.v.session, unsigned{x.v.path}, unsigned{x.v.rail}, unsigned{x.v.port},
                x.v.sent, x.v.retx,
                x.v.lost, x.v.probes, x.v.samples, x.v.deaths, x.v.srtt_us, x.v.share, x.v.rate_bps / 1e6, x.v.cuts,
                x.v.dead ? "true" : "false");
    }
    fprintf(f, "\n  ],\n");
}

// --rails: each rail's port and its counts.
void write_rails(FILE* f, const Results& r) {
    fprintf(f, "  \"rails\": [");
    for (size_t i = 0; i < r.rails.size(); i++) {
        const auto& x = r.rails[i];
        fprintf(f, "%s\n    {\"rail\": %zu, \"port\": %u, \"port_tx\": %lu, \"port_rx\": %lu}", i ? "," : "", i,
                unsigned{x.port}, x.port_tx, x.port_rx);
    }
    fprintf(f, "\n  ],\n");
    fprintf(f, "  \"rail_dropped\": %lu,\n", r.rail_dropped);
}

// Each session, the flow registry, and the control plane's session counts.
void write_sessions(FILE* f, const Results& r) {
    fprintf(f, "  \"sessions\": [");
    for (size_t i = 0; i < r.sessions.size(); i++) {
        const auto& x = r.sessions[i];
        fprintf(f, "%s\n    {\"index\": %u, \"id\": %u, \"peer\": \"%s\", \"role\": \"%s\", \"state\": \"%s\", "
                   "\"end\": \"%s\", \"flows\": %u, \"data_version\": %u, \"data_auth\": %s, \"complete\": %s, \"released\": %lu, \"completed\": %lu, "
                   "\"verified\": %lu, \"verify_errors\": %lu}",
                i ? "," : "", x.index, x.id, x.peer.c_str(), x.role.c_str(), x.state.c_str(), x.end.c_str(), x.flows, x.data_version,
                x.data_auth ? "true" : "false",
                x.complete ? "true" : "false", x.released, x.completed, x.verified, x.verify_errors);
    }
    fprintf(f, "\n  ],\n");
    fprintf(f, "  \"registry\": {\"flows_made\": %lu, \"slots\": %lu, \"slots_reused\": %lu, \"sessions_forgotten\": %lu},\n",
            r.registry.flows_made, r.registry.slots, r.registry.slots_reused, r.registry.sessions_forgotten);
    fprintf(f, "  \"session\": {\"tx\": %lu, \"rx\": %lu, \"arp_tx\": %lu, \"arp_rx\": %lu, \"established\": %lu, "
               "\"ended\": %lu, \"refused\": %lu, \"ids_reused\": %lu},\n",
            r.sess.tx, r.sess.rx, r.sess.arp_tx, r.sess.arp_rx, r.sess.established, r.sess.ended, r.sess.refused,
            r.sess.ids_reused);
}

// Control packets, discards, the generator's waits, and the service's counts.
void write_control(FILE* f, const Results& r) {
    fprintf(f, "  \"control_tx\": %lu,\n", r.control_tx);
    fprintf(f, "  \"control_rx\": %lu,\n", r.control_rx);
    fprintf(f, "  \"control_lost\": %lu,\n", r.control_lost);
    fprintf(f, "  \"discarded\": %lu,\n", r.discarded);
    fprintf(f, "  \"gen_buf_waits\": %lu,\n", r.gen_buf_waits);
    fprintf(f, "  \"service\": {");
    for (size_t i = 0; i < kSvcCounterFields.size(); i++)
        fprintf(f, "%s\"%s\": %lu", i ? ", " : "", kSvcCounterFields[i].first, r.svc.*kSvcCounterFields[i].second);
    fprintf(f, "},\n");
}

// Rates, latency, and how the run ended (the document's last key).
void write_outcome(FILE* f, const Results& r) {
    fprintf(f, "  \"elapsed_s\": %.6f,\n", r.elapsed_s);
    fprintf(f, "  \"msgs_per_s\": %.1f,\n", r.msgs_per_s);
    fprintf(f, "  \"mpps\": %.6f,\n", r.mpps);
    fprintf(f, "  \"gbps\": %.6f,\n", r.gbps);
    fprintf(f, "  \"latency_ns\": {\"p50\": %.0f, \"p99\": %.0f, \"p999\": %.0f, \"max\": %.0f, "
               "\"samples\": %lu},\n",
            r.lat_p50_ns, r.lat_p99_ns, r.lat_p999_ns, r.lat_max_ns, r.latency_samples);
    fprintf(f, "  \"exit_reason\": \"%s\",\n", r.exit_reason.c_str());
    fprintf(f, "  \"ok\": %s\n", r.ok ? "true" : "false");
}

} // namespace

bool write_summary_json(const Results& r, const std::string& path, std::string& err) {
    const std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "w");
    if (f == nullptr) {
        err = "cannot write " + tmp + ": " + strerror(errno);
        return false;
    }
    fprintf(f, "{\n");
    write_counts(f, r);
    write_losses(f, r);
    write_rx_steering(f, r);
    write_transport(f, r);
    write_flows(f, r);
    write_paths(f, r);
    write_rails(f, r);
    write_sessions(f, r);
    write_control(f, r);
    write_outcome(f, r);
    fprintf(f, "}\n");
    const bool good = fflush(f) == 0 && ferror(f) == 0;
    if (fclose(f) != 0 || !good) {
        err = "cannot write " + tmp + ": " + strerror(errno);
        return false;
    }
    if (rename(tmp.c_str(), path.c_str()) != 0) {
        err = "cannot rename " + tmp + " to " + path + ": " + strerror(errno);
        return false;
    }
    return true;
}

} // namespace tailmark::app
