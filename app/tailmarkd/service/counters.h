// What the service's tx lcores did with the applications' submissions, per
// send flow; the Service sums them (flows gone included) for the summary
// JSON's `service` object and telemetry's /tailmark/service.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

namespace tailmark::app {

struct SvcCounters {
    uint64_t taken = 0;        // submissions handed to the Sender
    uint64_t invalid = 0;      // outside the arena or larger than the session's messages: completed as invalid
    uint64_t delivered = 0;    // completions written: delivered
    uint64_t failed = 0;       // ... and failed
    uint64_t cq_waits = 0;     // a submission waited: the app had not taken its completions (the ring was full)
    uint64_t shinfo_waits = 0; // ... waited: every shared info was held (packets in flight)
    uint64_t bad_head = 0;     // the app's submission index was more than a ring ahead (its flow waits)
    uint64_t copied = 0;       // submissions sent by copy: zero copy is off (--zero-copy, or IOVA as PA)
    // The control thread's (Service::ctl_): the applications' connections.
    uint64_t attached = 0;        // HELLOs welcomed
    uint64_t refused_peer = 0;    // connections whose uid and groups --allow-uid / --allow-group do not allow
    uint64_t refused_pending = 0; // ... refused: --max-pending connections had not said HELLO yet
    uint64_t refused_apps = 0;    // HELLOs refused: --max-apps applications attached
    uint64_t refused_hello = 0;   // HELLOs refused: another ABI, no arena, an unsealed or too large arena, ...
    uint64_t hello_timeouts = 0;  // connections closed for saying no HELLO within 3 s
    uint64_t wake_full = 0;       // wake-ups not written: the app's wake pipe was full (never blocks)
    uint64_t wake_closed = 0;     // wake-ups not written: the app closed its end of the pipe (EPIPE)
    uint64_t arenas_deferred = 0; // apps gone while packets or the Sender still held their arena: unmapped later
    uint64_t arenas_released = 0; // arenas unmapped (each only once nothing referenced it)
};

// Every counter with its name, in the order they are reported: the one list
// the sums, the summary and telemetry walk.
inline constexpr std::array<std::pair<const char*, uint64_t SvcCounters::*>, 18> kSvcCounterFields{{
    {"taken", &SvcCounters::taken},
    {"invalid", &SvcCounters::invalid},
    {"delivered", &SvcCounters::delivered},
    {"failed", &SvcCounters::failed},
    {"cq_waits", &SvcCounters::cq_waits},
    {"shinfo_waits", &SvcCounters::shinfo_waits},
    {"bad_head", &SvcCounters::bad_head},
    {"copied", &SvcCounters::copied},
    {"attached", &SvcCounters::attached},
    {"refused_peer", &SvcCounters::refused_peer},
    {"refused_pending", &SvcCounters::refused_pending},
    {"refused_apps", &SvcCounters::refused_apps},
    {"refused_hello", &SvcCounters::refused_hello},
    {"hello_timeouts", &SvcCounters::hello_timeouts},
    {"wake_full", &SvcCounters::wake_full},
    {"wake_closed", &SvcCounters::wake_closed},
    {"arenas_deferred", &SvcCounters::arenas_deferred},
    {"arenas_released", &SvcCounters::arenas_released},
}};

} // namespace tailmark::app
