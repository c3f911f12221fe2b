// Flow ids of one end: each end names its own flows (a packet carries the id
// its destination gave), and a session's flows are a contiguous block, so a
// handshake says a base and a count. First fit over the 16-bit id space; the
// control plane's, not the data path's.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>

namespace tailmark {

class FlowIds {
public:
    FlowIds() : used_(std::make_unique<std::bitset<65536>>()) {}
    // The base of n free ids in a row, or -1.
    int alloc(uint32_t n) {
        if (n == 0 || n > 65536)
            return -1;
        uint32_t run = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            run = (*used_)[i] ? 0 : run + 1;
            if (run == n) {
                const uint32_t base = i + 1 - n;
                for (uint32_t j = base; j <= i; j++)
                    used_->set(j);
                return static_cast<int>(base);
            }
        }
        return -1;
    }
    void release(uint32_t base, uint32_t n) {
        for (uint32_t j = base; j < base + n && j < 65536; j++)
            used_->reset(j);
    }
    bool used(uint32_t id) const { return id < 65536 && (*used_)[id]; }

private:
    std::unique_ptr<std::bitset<65536>> used_;
};

} // namespace tailmark
