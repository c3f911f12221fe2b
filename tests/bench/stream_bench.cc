// Placement stores against a consumer on another CPU, outside tailmarkd: a
// producer copies 1456-byte pieces (a packet's payload) into a ring of
// 64 KiB slots, publishes each slot with a release store, and waits for the
// consumer, which reads every line of the slot on the other CPU and releases
// it. Once round the ring, the producer's stores find the lines in the
// consumer's cache. Not a test: a speed figure (README round 13).
//
//   stream_bench [PRODUCER_CPU CONSUMER_CPU [SECONDS [SLOTS]]]   (default 1 0 1 16)
//
// One JSON object per line and store kind: "cached" (memcpy), "cached_ahead"
// (memcpy, the next piece's lines fetched for writing first, as the placer
// does), and "stream_<kernel>" for each stream_copy kernel the CPU has; each
// with GB/s and TSC cycles per piece.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <rte_cycles.h>

#include "tailmark/stream_copy.h"

namespace {

constexpr size_t kSlot = 65536, kPiece = 1456;

bool pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof(s), &s) == 0;
}

struct alignas(64) Flag {
    std::atomic<uint64_t> v{0};
};

// kind: 0 cached, 1 cached_ahead, 2 a stream_copy kernel (k).
void run(const char* name, int kind, tailmark::StreamCopyKernel k, int pcpu, int ccpu, double secs, size_t slots) {
    std::vector<uint8_t> mem(slots * kSlot + 64);
    uint8_t* region = mem.data() + ((64 - (reinterpret_cast<uintptr_t>(mem.data()) & 63)) & 63);
    memset(region, 1, slots * kSlot);
    std::vector<Flag> flags(slots);
    std::atomic<uint64_t> released{0};
    std::atomic<bool> stop{false};
    std::vector<uint8_t> src(64 * 2048, 7); // 64 packets' payloads, as mbufs would hold them
    uint64_t sink = 0;

    std::thread consumer([&] {
        if (!pin(ccpu))
            return;
        uint64_t seq = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            const size_t s = seq % slots;
            if (flags[s].v.load(std::memory_order_acquire) != seq + 1) {
                _mm_pause();
                continue;
            }
            const auto* p = reinterpret_cast<const uint64_t*>(region + s * kSlot);
            uint64_t x = 0;
            for (size_t i = 0; i < kSlot / 8; i += 8) // one word a line: every line read
                x += p[i];
            sink += x;
            released.store(++seq, std::memory_order_release);
        }
    });
    if (!pin(pcpu)) {
        fprintf(stderr, "stream_bench: cannot run on CPU %d\n", pcpu);
        exit(1);
    }
    uint64_t seq = 0, bytes = 0, piece = 0;
    const auto start = std::chrono::steady_clock::now();
    const uint64_t t0 = rte_rdtsc();
    while ((seq & 15) || std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < secs) {
        while (seq - released.load(std::memory_order_acquire) >= slots)
            _mm_pause();
        uint8_t* base = region + (seq % slots) * kSlot;
        for (size_t off = 0; off < kSlot; off += kPiece) {
            const size_t n = kSlot - off < kPiece ? kSlot - off : kPiece;
            const uint8_t* s = src.data() + (piece++ % 64) * 2048 + 106; // a frame's payload offset
            if (kind == 1 && off + kPiece < kSlot)
                for (size_t o = 0; o < kPiece; o += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(base + off + kPiece + o), _MM_HINT_ET0);
            if (kind == 2)
                tailmark::stream_copy_with(k, base + off, s, n);
            else
                memcpy(base + off, s, n);
            bytes += n;
        }
        if (kind == 2)
            tailmark::stream_fence();
        flags[seq % slots].v.store(seq + 1, std::memory_order_release);
        seq++;
    }
    const uint64_t cycles = rte_rdtsc() - t0;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stop = true;
    consumer.join();
    printf("{\"kind\": \"%s\", \"slots\": %zu, \"gbps\": %.2f, \"cycles_per_piece\": %.0f, \"check\": %llu}\n", name,
           slots, bytes / el / 1e9, static_cast<double>(cycles) / (static_cast<double>(bytes) / kPiece),
           static_cast<unsigned long long>(sink & 1));
}

} // namespace

int main(int argc, char** argv) {
    const int pcpu = argc > 2 ? atoi(argv[1]) : 1, ccpu = argc > 2 ? atoi(argv[2]) : 0;
    const double secs = argc > 3 ? atof(argv[3]) : 1.0;
    const size_t slots = argc > 4 ? strtoul(argv[4], nullptr, 10) : 16;
    if (pcpu == ccpu || secs <= 0 || slots == 0) {
        fprintf(stderr, "usage: stream_bench [PRODUCER_CPU CONSUMER_CPU [SECONDS [SLOTS]]]: two CPUs\n");
        return 2;
    }
    using tailmark::StreamCopyKernel;
    run("cached", 0, StreamCopyKernel::Sse2, pcpu, ccpu, secs, slots);
    run("cached_ahead", 1, StreamCopyKernel::Sse2, pcpu, ccpu, secs, slots);
    for (StreamCopyKernel k : {StreamCopyKernel::Sse2, StreamCopyKernel::Avx512})
        if (tailmark::stream_copy_kernel_supported(k))
            run((std::string("stream_") + tailmark::stream_copy_kernel_name(k)).c_str(), 2, k, pcpu, ccpu, secs, slots);
    return 0;
}
