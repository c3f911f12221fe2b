// Fixed-size log-linear histogram of latencies in TSC cycles: exact below
// 2^SubBits, then 2^SubBits sub-buckets per power of two. No allocation, one
// array increment per sample: fit for the fast path. Merged after the
// lcores stop. LatencyHist (32 sub-buckets, about 3 % resolution, 15 KiB)
// per lcore; FlowLatency (8, about 12 %, 4 KiB) per flow, where a starved
// flow's tail shows beside its session's.
#pragma once

#include <cstdint>
#include <cstring>

namespace tailmark::app {

template <unsigned SubBits>
class LatencyHistT {
public:
    static constexpr unsigned kSubBits = SubBits;
    static constexpr unsigned kSub = 1u << kSubBits;
    static constexpr unsigned kBuckets = kSub + (64 - kSubBits) * kSub;

    void clear() { memset(this, 0, sizeof(*this)); }

    void add(uint64_t v) {
        count_[index(v)]++;
        n_++;
        if (v > max_)
            max_ = v;
    }
    void merge(const LatencyHistT& o) {
        for (unsigned i = 0; i < kBuckets; i++)
            count_[i] += o.count_[i];
        n_ += o.n_;
        if (o.max_ > max_)
            max_ = o.max_;
    }
    uint64_t samples() const { return n_; }
    uint64_t max() const { return max_; }

    // Smallest bucket upper bound with at least q of the samples at or below it.
    uint64_t quantile(double q) const {
        if (n_ == 0)
            return 0;
        uint64_t want = static_cast<uint64_t>(q * static_cast<double>(n_) + 0.999999);
        if (want == 0)
            want = 1;
        uint64_t seen = 0;
        for (unsigned i = 0; i < kBuckets; i++) {
            seen += count_[i];
            if (seen >= want) {
                uint64_t u = upper(i);
                return u < max_ ? u : max_;
            }
        }
        return max_;
    }

    static unsigned index(uint64_t v) {
        if (v < kSub)
            return static_cast<unsigned>(v);
        const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(v));
        const unsigned shift = msb - kSubBits;
        return kSub + shift * kSub + static_cast<unsigned>((v >> shift) & (kSub - 1));
    }
    static uint64_t upper(unsigned idx) {
        if (idx < kSub)
            return idx;
        const unsigned shift = (idx - kSub) / kSub;
        const uint64_t sub = (idx - kSub) % kSub;
        return ((kSub + sub + 1) << shift) - 1;
    }

private:
    uint64_t count_[kBuckets];
    uint64_t n_;
    uint64_t max_;
};

using LatencyHist = LatencyHistT<5>;
using FlowLatency = LatencyHistT<3>;

} // namespace tailmark::app
