// Bytes per TSC cycle of the CRC32C kernels on hot buffers (in L1/L2): the
// ceiling the rx path's fused copy-and-checksum works under. Not a test: a
// speed figure, printed for scripts/bench.sh (results.json "crc32c").
//
//   crc32c_bench            one JSON object per line: first {"tsc_hz"}, then per length
//                           {"len", "update", "copy", "memcpy", "rte_hash_crc"} in bytes per TSC cycle
//
// Each figure is the best of 7 rounds of ~0.3 MB (least disturbed by the
// machine); no EAL needed (rte_rdtsc and rte_hash_crc are inline).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <cstring>
#include <vector>

#include <rte_cycles.h>
#include <rte_hash_crc.h>

#include "tailmark/crc32c.h"

namespace {

template <typename F>
double bytes_per_cycle(size_t len, F&& f) {
    const size_t reps = 300000 / len + 1;
    uint64_t best = UINT64_MAX;
    for (int round = 0; round < 7; round++) {
        const uint64_t t0 = rte_rdtsc_precise();
        for (size_t i = 0; i < reps; i++)
            f(i);
        const uint64_t t = rte_rdtsc_precise() - t0;
        best = t < best ? t : best;
    }
    return double(len) * double(reps) / double(best);
}

} // namespace

int main() {
    { // the TSC's rate, to turn bytes per cycle into bytes per second
        const auto w0 = std::chrono::steady_clock::now();
        const uint64_t t0 = rte_rdtsc_precise();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const uint64_t t1 = rte_rdtsc_precise();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        printf("{\"tsc_hz\": %.0f}\n", double(t1 - t0) / s);
    }
    std::vector<uint8_t> src(1 << 16), dst(1 << 16);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = static_cast<uint8_t>(i * 131 + 7);
    volatile uint32_t sink = 0; // keeps every result live
    for (size_t len : {64ul, 1456ul, 4096ul, 65536ul}) {
        const std::span<const uint8_t> s(src.data(), len);
        const double update = bytes_per_cycle(len, [&](size_t i) {
            sink = sink + tailmark::crc32c_update(static_cast<uint32_t>(i), s);
        });
        const double copy = bytes_per_cycle(len, [&](size_t i) {
            sink = sink + tailmark::crc32c_copy(static_cast<uint32_t>(i), dst.data(), s);
        });
        const double mcpy = bytes_per_cycle(len, [&](size_t i) {
            memcpy(dst.data(), src.data(), len);
            sink = sink + dst[i & (len - 1)];
        });
        const double dpdk = bytes_per_cycle(len, [&](size_t i) {
            sink = sink + rte_hash_crc(src.data(), static_cast<uint32_t>(len), static_cast<uint32_t>(i));
        });
        printf("{\"len\": %zu, \"update\": %.3f, \"copy\": %.3f, \"memcpy\": %.3f, \"rte_hash_crc\": %.3f}\n", len,
               update, copy, mcpy, dpdk);
    }
    return 0;
}
