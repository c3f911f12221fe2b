// tailmark-jitter CPU SECONDS [PEER_CPU]: a busy loop pinned to CPU that
// reads the TSC and counts the gaps between two reads, the time the CPU was
// taken from it (a VM exit, the host scheduling another vCPU, an interrupt).
// It does what an lcore does between two polls and nothing else, so what it
// reports on an idle CPU is the platform's share of tailmark's latency tail.
//
// With PEER_CPU, first a cache line's round trip between CPU and PEER_CPU:
// what every line an lcore hands to another costs (a packet stamped by one
// and parsed by the other, a completion flag and its consumer). A VM's two
// vCPUs may sit close together on the host or far apart, and one session's
// AMD EPYC went from one to the other and back (issue 17, round 12).
//
// Prints one JSON object: the gaps over 2, 5, 20 and 100 us (per second),
// the time they took (share), the largest, the TSC rate used and, with
// PEER_CPU, the round trip (the median of kRounds rounds, and their range).
#include <pthread.h>
#include <sched.h>
#include <x86intrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

// The TSC rate, measured against the monotonic clock over 100 ms.
double tsc_hz() {
    using clk = std::chrono::steady_clock;
    const auto t0 = clk::now();
    const uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const uint64_t c1 = __rdtsc();
    const double s = std::chrono::duration<double>(clk::now() - t0).count();
    return double(c1 - c0) / s;
}

bool pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Ping-pong over two lines (one each way): this thread stores i, the peer
// waits for it and stores i back. Each round trip moves both lines across.
constexpr int kRounds = 5;
constexpr uint64_t kTrips = 100000; // per round

struct RoundTrip {
    std::array<double, kRounds> cycles; // per trip, sorted
    uint64_t trips;                     // the peer's count of echoes
    bool ok;
};

RoundTrip line_round_trip(int peer_cpu) {
    struct alignas(64) Line {
        std::atomic<uint64_t> v{0};
    };
    static Line ping, pong;
    ping.v = 0;
    pong.v = 0;
    RoundTrip r{};
    std::atomic<bool> pinned{false}, failed{false};
    std::thread peer([&] {
        if (!pin(peer_cpu)) {
            failed = true;
            return;
        }
        pinned = true;
        for (int k = 0; k < kRounds; k++)
            for (uint64_t i = 1; i <= kTrips; i++) {
                const uint64_t want = static_cast<uint64_t>(k) * kTrips + i;
                while (ping.v.load(std::memory_order_acquire) != want)
                    ; // no pause: it would add its own latency to the trip
                pong.v.store(want, std::memory_order_release);
                r.trips++;
            }
    });
    while (!pinned && !failed)
        _mm_pause();
    if (!failed) {
        for (int k = 0; k < kRounds; k++) {
            const uint64_t t0 = __rdtsc();
            for (uint64_t i = 1; i <= kTrips; i++) {
                const uint64_t want = static_cast<uint64_t>(k) * kTrips + i;
                ping.v.store(want, std::memory_order_release);
                while (pong.v.load(std::memory_order_acquire) != want)
                    ;
            }
            r.cycles[k] = double(__rdtsc() - t0) / double(kTrips);
        }
    }
    peer.join();
    std::sort(r.cycles.begin(), r.cycles.end());
    r.ok = !failed;
    return r;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: tailmark-jitter CPU SECONDS [PEER_CPU]\n");
        return 2;
    }
    const int cpu = atoi(argv[1]);
    const double secs = atof(argv[2]);
    const int peer = argc == 4 ? atoi(argv[3]) : -1;
    if (cpu < 0 || secs <= 0 || secs > 3600) {
        fprintf(stderr, "tailmark-jitter: CPU must be >= 0 and SECONDS in (0, 3600]\n");
        return 2;
    }
    if (argc == 4 && (peer < 0 || peer == cpu)) {
        fprintf(stderr, "tailmark-jitter: PEER_CPU must be >= 0 and not CPU (%d)\n", cpu);
        return 2;
    }
    if (!pin(cpu)) {
        fprintf(stderr, "tailmark-jitter: cannot pin to CPU %d\n", cpu);
        return 1;
    }
    const double hz = tsc_hz();
    RoundTrip rt{};
    if (peer >= 0) {
        rt = line_round_trip(peer);
        if (!rt.ok) {
            fprintf(stderr, "tailmark-jitter: cannot pin to PEER_CPU %d\n", peer);
            return 1;
        }
    }
    const uint64_t us = static_cast<uint64_t>(hz / 1e6);
    const uint64_t bounds[4] = {2 * us, 5 * us, 20 * us, 100 * us};
    uint64_t count[4] = {}, taken = 0, largest = 0;
    uint64_t prev = __rdtsc();
    const uint64_t end = prev + static_cast<uint64_t>(secs * hz);
    for (;;) {
        const uint64_t t = __rdtsc();
        const uint64_t gap = t - prev;
        prev = t;
        if (gap > bounds[0]) {
            taken += gap;
            largest = gap > largest ? gap : largest;
            for (int i = 0; i < 4; i++)
                count[i] += gap > bounds[i];
        }
        if (t > end)
            break;
    }
    printf("{\"cpu\": %d, \"seconds\": %.1f, \"tsc_hz\": %.0f, \"gaps_per_s\": {\"over_2us\": %.1f, \"over_5us\": %.1f, "
           "\"over_20us\": %.1f, \"over_100us\": %.1f}, \"taken_share\": %.5f, \"largest_us\": %.1f",
           cpu, secs, hz, count[0] / secs, count[1] / secs, count[2] / secs, count[3] / secs,
           double(taken) / (secs * hz), double(largest) / double(us));
    if (peer >= 0) {
        const double ns = 1e9 / hz;
        printf(", \"peer_cpu\": %d, \"line_round_trip\": {\"trips\": %llu, \"ns\": %.0f, \"min_ns\": %.0f, "
               "\"max_ns\": %.0f}",
               peer, static_cast<unsigned long long>(rt.trips), rt.cycles[kRounds / 2] * ns, rt.cycles[0] * ns,
               rt.cycles[kRounds - 1] * ns);
    }
    printf("}\n");
    return 0;
}
