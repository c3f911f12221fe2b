#include "tailmark/consumer.h"

#include <new>

#include <rte_errno.h>

namespace tailmark {

std::unique_ptr<Consumer> Consumer::attach(uint16_t flow) {
    auto ring = CompletionRing::attach(flow);
    if (!ring)
        return nullptr; // rte_errno set by attach
    Consumer* c = new (std::nothrow) Consumer(std::move(ring));
    if (c == nullptr)
        rte_errno = ENOMEM;
    return std::unique_ptr<Consumer>(c);
}

Consumer::Consumer(std::unique_ptr<CompletionRing> r) : ring_(std::move(r)), next_(ring_->released()) {}

bool Consumer::poll(Message& m) const {
    const CompletionSlot* s = ring_->poll(next_);
    if (s == nullptr)
        return false;
    // The flag was loaded with acquire: the metadata and the region are visible.
    m.msg_id = next_;
    m.slot = s;
    const uint64_t len = s->msg_len <= ring_->region_size() ? s->msg_len : ring_->region_size();
    m.data = {ring_->region(next_), static_cast<size_t>(len)};
    return true;
}

bool Consumer::release() {
    if (ring_->poll(next_) == nullptr)
        return false;
    if (!ring_->release(next_))
        return false;
    next_++;
    return true;
}

} // namespace tailmark
