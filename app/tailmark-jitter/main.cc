// tailmark-jitter CPU SECONDS: a busy loop pinned to CPU that reads the TSC
// and counts the gaps between two reads, the time the CPU was taken from it
// (a VM exit, the host scheduling another vCPU, an interrupt). It does what
// an lcore does between two polls and nothing else, so what it reports on
// an idle CPU is the platform's share of tailmark's latency tail.
//
// Prints one JSON object: the gaps over 2, 5, 20 and 100 us (per second),
// the time they took (share), the largest, and the TSC rate used.
#include <pthread.h>
#include <sched.h>
#include <x86intrin.h>

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

} // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tailmark-jitter CPU SECONDS\n");
        return 2;
    }
    const int cpu = atoi(argv[1]);
    const double secs = atof(argv[2]);
    if (cpu < 0 || secs <= 0 || secs > 3600) {
        fprintf(stderr, "tailmark-jitter: CPU must be >= 0 and SECONDS in (0, 3600]\n");
        return 2;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
        fprintf(stderr, "tailmark-jitter: cannot pin to CPU %d\n", cpu);
        return 1;
    }
    const double hz = tsc_hz();
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
           "\"over_20us\": %.1f, \"over_100us\": %.1f}, \"taken_share\": %.5f, \"largest_us\": %.1f}\n",
           cpu, secs, hz, count[0] / secs, count[1] / secs, count[2] / secs, count[3] / secs,
           double(taken) / (secs * hz), double(largest) / double(us));
    return 0;
}
