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
};

// Every counter with its name, in the order they are reported: the one list
// the sums, the summary and telemetry walk.
inline constexpr std::array<std::pair<const char*, uint64_t SvcCounters::*>, 7> kSvcCounterFields{{
    {"taken", &SvcCounters::taken},
    {"invalid", &SvcCounters::invalid},
    {"delivered", &SvcCounters::delivered},
    {"failed", &SvcCounters::failed},
    {"cq_waits", &SvcCounters::cq_waits},
    {"shinfo_waits", &SvcCounters::shinfo_waits},
    {"bad_head", &SvcCounters::bad_head},
}};

} // namespace tailmark::app
