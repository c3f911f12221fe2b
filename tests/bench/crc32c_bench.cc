// Bytes per TSC cycle of the CRC32C kernels on hot buffers (in L1/L2): the
// ceiling the rx path's fused copy-and-checksum works under. Not a test: a
// speed figure, printed for scripts/bench.sh (results.json "crc32c").
//
//   crc32c_bench [LEN...]   one JSON object per line: first {"tsc_hz", "kernel"}, then per
//                           length (default 64 256 1456 4096 65536) {"len", "update", "copy",
//                           "update_<k>", "copy_<k>" for each kernel k the CPU supports
//                           (chains, fold128, fold512), "memcpy", "rte_hash_crc"} in bytes
//                           per TSC cycle; "update" and "copy" go through the dispatch
//                           ("kernel" names the one it picked)
//
// Each figure is the best of 7 rounds of ~0.3 MB (least disturbed by the
// machine); no EAL needed (rte_rdtsc and rte_hash_crc are inline).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
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

int main(int argc, char** argv) {
    using tailmark::Crc32cKernel;
    { // the TSC's rate, to turn bytes per cycle into bytes per second
        const auto w0 = std::chrono::steady_clock::now();
        const uint64_t t0 = rte_rdtsc_precise();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const uint64_t t1 = rte_rdtsc_precise();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        printf("{\"tsc_hz\": %.0f, \"kernel\": \"%s\"}\n", double(t1 - t0) / s,
               tailmark::crc32c_kernel_name(tailmark::crc32c_kernel()));
    }
    std::vector<size_t> lens = {64, 256, 1456, 4096, 65536};
    if (argc > 1) {
        lens.clear();
        for (int i = 1; i < argc; i++)
            lens.push_back(strtoul(argv[i], nullptr, 0));
    }
    size_t max_len = 1;
    for (size_t len : lens)
        max_len = std::max(max_len, len);
    std::vector<uint8_t> src(max_len), dst(max_len);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = static_cast<uint8_t>(i * 131 + 7);
    volatile uint32_t sink = 0; // keeps every result live
    for (size_t len : lens) {
        const std::span<const uint8_t> s(src.data(), len);
        std::string line = "{\"len\": " + std::to_string(len);
        auto add = [&](const char* key, double v) {
            char buf[64];
            snprintf(buf, sizeof(buf), ", \"%s\": %.3f", key, v);
            line += buf;
        };
        add("update", bytes_per_cycle(len, [&](size_t i) {
                sink = sink + tailmark::crc32c_update(static_cast<uint32_t>(i), s);
            }));
        add("copy", bytes_per_cycle(len, [&](size_t i) {
                sink = sink + tailmark::crc32c_copy(static_cast<uint32_t>(i), dst.data(), s);
            }));
        for (Crc32cKernel k : {Crc32cKernel::Chains, Crc32cKernel::Fold128, Crc32cKernel::Fold512}) {
            if (!tailmark::crc32c_kernel_supported(k))
                continue;
            const std::string name = tailmark::crc32c_kernel_name(k);
            add(("update_" + name).c_str(), bytes_per_cycle(len, [&](size_t i) {
                    sink = sink + tailmark::crc32c_update_with(k, static_cast<uint32_t>(i), s);
                }));
            add(("copy_" + name).c_str(), bytes_per_cycle(len, [&](size_t i) {
                    sink = sink + tailmark::crc32c_copy_with(k, static_cast<uint32_t>(i), dst.data(), s);
                }));
        }
        add("memcpy", bytes_per_cycle(len, [&](size_t i) {
                memcpy(dst.data(), src.data(), len);
                sink = sink + dst[i & (len - 1)]; // in bounds at any len
            }));
        add("rte_hash_crc", bytes_per_cycle(len, [&](size_t i) {
                sink = sink + rte_hash_crc(src.data(), static_cast<uint32_t>(len), static_cast<uint32_t>(i));
            }));
        printf("%s}\n", line.c_str());
    }
    return 0;
}
