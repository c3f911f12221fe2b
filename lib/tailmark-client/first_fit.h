// The arena's allocator: first fit over byte offsets, 64-byte granules,
// neighbouring free blocks coalesced on free. The bookkeeping lives outside
// the arena, so an application overrunning a buffer (or the daemon, which
// maps the arena too) cannot corrupt it. Allocation and free move map nodes
// around; tm_send allocates nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace tailmark::client {

class FirstFit {
public:
    static constexpr uint64_t kAlign = 64;

    FirstFit() = default;
    // Manages [0, bytes); bytes is rounded down to kAlign.
    explicit FirstFit(uint64_t bytes) { reset(bytes); }
    void reset(uint64_t bytes);

    // The offset of a block of at least len bytes (len 0 takes one granule),
    // the lowest one that fits; nullopt when none does.
    std::optional<uint64_t> alloc(uint64_t len);
    // Frees the block at off: its length, or 0 when off is no allocated block.
    uint64_t free(uint64_t off);

    uint64_t capacity() const { return capacity_; }
    uint64_t free_bytes() const { return free_bytes_; }
    uint64_t largest_free() const;
    size_t free_blocks() const { return free_.size(); }
    size_t used_blocks() const { return used_.size(); }

private:
    std::map<uint64_t, uint64_t> free_; // offset -> length, disjoint, never adjacent
    std::map<uint64_t, uint64_t> used_; // offset -> length
    uint64_t capacity_ = 0;
    uint64_t free_bytes_ = 0;
};

} // namespace tailmark::client
