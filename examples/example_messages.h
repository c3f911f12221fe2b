// What engine_echo and engine_session share: the test messages (every
// length from 1 to `size`, bytes a misplacement anywhere changes), the tx
// lcore's source that writes them and its completion sink, the checks on
// the consumer's side, and main() around EAL.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <rte_eal.h>

#include "tailmark/sender.h"

namespace tailmark::example {

inline uint64_t length_of(uint32_t i, uint64_t size) { return 1 + (uint64_t(i) * 7919) % size; }
inline uint8_t byte_of(uint32_t i, uint64_t k) { return static_cast<uint8_t>(i * 131 + k * 7 + (k >> 8)); }
// Whether `got` is message i as written.
inline bool intact(uint32_t i, uint64_t size, std::span<const uint8_t> got) {
    bool ok = got.size() == length_of(i, size);
    for (uint64_t k = 0; ok && k < got.size(); k++)
        ok = got[k] == byte_of(i, k);
    return ok;
}

// The tx lcore's source: message msg_id written into slot msg_id % ring,
// which the Sender holds until the consumer released it (its credits keep
// msg_id + ring from starting before then).
struct Source {
    uint32_t messages = 0;
    uint64_t size = 0;
    uint32_t ring = 0;
    std::vector<uint8_t> bufs; // ring x size
    Source(uint32_t n, uint64_t sz, uint32_t r) : messages(n), size(sz), ring(r), bufs(uint64_t(r) * sz) {}
};

inline bool source(void* ctx, void*, uint32_t msg_id, Message& m, uint64_t& cookie) {
    auto& s = *static_cast<Source*>(ctx);
    if (msg_id >= s.messages)
        return false;
    uint8_t* b = s.bufs.data() + (msg_id % s.ring) * s.size;
    const uint64_t len = length_of(msg_id, s.size);
    for (uint64_t k = 0; k < len; k++)
        b[k] = byte_of(msg_id, k);
    m.bytes = {b, static_cast<size_t>(len)};
    m.shinfo = nullptr; // the bytes outlive the flow (ours until the end)
    cookie = msg_id;
    return true;
}

// The tx lcore's completion sink: what the Sender says of each message.
struct Outcome {
    std::atomic<uint64_t> delivered{0}, failed{0};
};

inline void sink(void* ctx, const SendCompletion* done, uint32_t n) {
    auto& o = *static_cast<Outcome*>(ctx);
    uint64_t d = 0;
    for (uint32_t i = 0; i < n; i++)
        d += done[i].status == SendStatus::Delivered ? 1 : 0;
    o.delivered.fetch_add(d, std::memory_order_relaxed);
    o.failed.fetch_add(n - d, std::memory_order_relaxed);
}

// EAL, then `-- [--messages N] [--size BYTES]` (defaults 1000 and 20000),
// then run(messages, size); exit 2 on a usage error.
template <class Run>
int main_of(const char* name, int argc, char** argv, Run&& run) {
    const int n = rte_eal_init(argc, argv);
    if (n < 0) {
        fprintf(stderr, "%s: rte_eal_init failed\n", name);
        return 2;
    }
    uint32_t messages = 1000;
    uint64_t size = 20000;
    bool ok = true;
    for (int i = n + 1; i < argc && ok; i++) {
        const std::string a = argv[i];
        if (i + 1 < argc && a == "--messages")
            messages = static_cast<uint32_t>(strtoul(argv[++i], nullptr, 10));
        else if (i + 1 < argc && a == "--size")
            size = strtoull(argv[++i], nullptr, 10);
        else
            ok = false;
    }
    if (!ok || messages == 0 || size == 0 || size > (1u << 20)) {
        fprintf(stderr, "usage: %s EAL-ARGS -- [--messages N] [--size BYTES (1..1048576)]\n", name);
        rte_eal_cleanup();
        return 2;
    }
    const int rc = run(messages, size);
    rte_eal_cleanup();
    return rc;
}

} // namespace tailmark::example
