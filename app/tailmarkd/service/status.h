// The service's status, as tailmark-ctl asks for it (TM_MSG_STATUS,
// <tailmark/channel_abi.h>): a snapshot the control loop fills
// (Service::status_snapshot, service/ctl_status.cc) and its JSON (status.cc). The JSON
// schema is docs/operating.md's "tailmark-ctl": change it only by adding
// fields, or raise kStatusSchema.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tailmark::app {

inline constexpr uint32_t kStatusSchema = 1;

struct StatusPort {
    uint16_t id = 0;
    std::string name, driver, role; // role: "data" (the port), "local" (this daemon's applications between them)
    bool link_up = false;
    uint32_t speed_mbps = 0;
    uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0;
    uint64_t rx_missed = 0, rx_errors = 0, tx_errors = 0, rx_nombuf = 0;
};

struct StatusApp {
    uint32_t id = 0, pid = 0, uid = 0, gid = 0;
    std::string name;
    uint32_t sessions = 0;
    std::vector<uint16_t> listening;
    bool zero_copy = false;
    uint64_t arena_bytes = 0;
    uint64_t wakes = 0;
};

struct StatusSession {
    uint32_t id = 0, app = 0;
    std::string role, peer, state, end;
    uint16_t service = 0;
    uint32_t flows = 0, ring_size = 0, max_msg = 0;
    double up_s = 0;                // since it came up (0: not yet)
    double rate_mbps = 0;           // connector: the congestion control's paced rate (0: none)
    double msgs_per_s = 0;          // connector: sent; acceptor: consumed by the application (last second)
    double srtt_us = 0, base_rtt_us = 0; // connector: smoothed and base RTT (0: no sample)
    uint64_t retransmitted = 0;     // connector: data packets sent again
    uint64_t sent = 0, acked = 0, released = 0; // messages: sent, acknowledged, released by the receiving application
    uint64_t delivered = 0, failed = 0;         // connector: completions written
};

struct StatusSnapshot {
    uint32_t pid = 0;
    std::string version;
    uint32_t abi = 0, abi_minor = 0;
    std::string mode, control_socket, local_ip;
    uint16_t udp_port = 0;
    uint32_t mtu = 0;
    bool zero_copy = false;
    double uptime_s = 0;
    std::vector<StatusPort> ports;
    std::vector<StatusApp> apps;
    std::vector<StatusSession> sessions;
    uint64_t drops_total = 0, tx_dropped = 0;
    std::vector<std::pair<std::string, uint64_t>> drops;   // by reason, every reason
    std::vector<std::pair<std::string, uint64_t>> service; // the service's counters (service/counters.h)
};

std::string status_json(const StatusSnapshot& s);

} // namespace tailmark::app
