#include "first_fit.h"

#include <algorithm>
#include <iterator>

namespace tailmark::client {

void FirstFit::reset(uint64_t bytes) {
    free_.clear();
    used_.clear();
    capacity_ = bytes / kAlign * kAlign;
    free_bytes_ = capacity_;
    if (capacity_ > 0)
        free_.emplace(0, capacity_);
}

std::optional<uint64_t> FirstFit::alloc(uint64_t len) {
    if (len > capacity_)
        return std::nullopt;
    const uint64_t need = std::max<uint64_t>(kAlign, (len + kAlign - 1) / kAlign * kAlign);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < need)
            continue;
        const uint64_t off = it->first;
        if (it->second == need) {
            // The whole block: its node moves to the used map.
            auto node = free_.extract(it);
            used_.insert(std::move(node));
        } else {
            used_.emplace(off, need); // may throw bad_alloc before anything changed
            auto node = free_.extract(it);
            node.key() = off + need;
            node.mapped() -= need;
            free_.insert(std::move(node));
        }
        free_bytes_ -= need;
        return off;
    }
    return std::nullopt;
}

uint64_t FirstFit::free(uint64_t off) {
    auto it = used_.find(off);
    if (it == used_.end())
        return 0;
    const uint64_t len = it->second;
    free_bytes_ += len;
    auto node = used_.extract(it);
    auto next = free_.lower_bound(off);
    if (next != free_.end() && off + node.mapped() == next->first) { // merge the block after
        node.mapped() += next->second;
        next = free_.erase(next);
    }
    if (next != free_.begin()) { // merge into the block before
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            prev->second += node.mapped();
            return len;
        }
    }
    free_.insert(next, std::move(node));
    return len;
}

uint64_t FirstFit::largest_free() const {
    uint64_t m = 0;
    for (const auto& [off, len] : free_)
        m = std::max(m, len);
    return m;
}

} // namespace tailmark::client
