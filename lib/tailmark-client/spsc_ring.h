// The two ends of a channel_abi.h tm_spsc ring in shared memory. The
// producer writes an entry, then head (release); the consumer reads head
// (acquire), the entry, then tail (release). Indexes run freely mod 2^32.
// Each end keeps its own index and a cached copy of the other's, so the
// shared line of the other end is read only when the cache says full/empty.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "tailmark/channel_abi.h"

namespace tailmark::client {

inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// A ring header the other side laid out: sane before we index with it.
template <class T>
bool spsc_valid(channel::tm_spsc* r, uint32_t size) {
    if (!is_pow2(size) || size > (1u << 31))
        return false;
    const uint32_t head = std::atomic_ref<uint32_t>(r->head).load(std::memory_order_acquire);
    const uint32_t tail = std::atomic_ref<uint32_t>(r->tail).load(std::memory_order_acquire);
    return r->size == size && r->entry_bytes == sizeof(T) && head - tail <= size;
}

template <class T>
class SpscProducer {
public:
    SpscProducer() = default;
    SpscProducer(channel::tm_spsc* ring, T* entries)
        : r_(ring), e_(entries), mask_(ring->size - 1),
          head_(std::atomic_ref<uint32_t>(ring->head).load(std::memory_order_relaxed)),
          tail_(std::atomic_ref<uint32_t>(ring->tail).load(std::memory_order_acquire)) {}

    // False when the ring is full.
    bool push(const T& v) {
        if (head_ - tail_ > mask_) {
            tail_ = std::atomic_ref<uint32_t>(r_->tail).load(std::memory_order_acquire);
            if (head_ - tail_ > mask_) // full (or a tail past head: never room then)
                return false;
        }
        e_[head_ & mask_] = v;
        ++head_;
        std::atomic_ref<uint32_t>(r_->head).store(head_, std::memory_order_release);
        return true;
    }
    // Entries the consumer has not taken yet.
    uint32_t pending() const {
        return head_ - std::atomic_ref<uint32_t>(r_->tail).load(std::memory_order_acquire);
    }
    uint32_t size() const { return mask_ + 1; }

private:
    channel::tm_spsc* r_ = nullptr;
    T* e_ = nullptr;
    uint32_t mask_ = 0;
    uint32_t head_ = 0; // ours
    uint32_t tail_ = 0; // the consumer's, as last read
};

template <class T>
class SpscConsumer {
public:
    SpscConsumer() = default;
    SpscConsumer(channel::tm_spsc* ring, T* entries)
        : r_(ring), e_(entries), mask_(ring->size - 1),
          tail_(std::atomic_ref<uint32_t>(ring->tail).load(std::memory_order_relaxed)),
          head_(std::atomic_ref<uint32_t>(ring->head).load(std::memory_order_acquire)) {}

    // 1 and *out filled, 0 when empty, -EPROTO when the producer's head is
    // more than a ring ahead of us (its memory is not a ring any more).
    int pop(T* out) {
        if (tail_ == head_) {
            head_ = std::atomic_ref<uint32_t>(r_->head).load(std::memory_order_acquire);
            if (tail_ == head_)
                return 0;
        }
        if (head_ - tail_ > mask_ + 1)
            return -EPROTO;
        *out = e_[tail_ & mask_];
        ++tail_;
        std::atomic_ref<uint32_t>(r_->tail).store(tail_, std::memory_order_release);
        return 1;
    }
    bool empty() const {
        return tail_ == std::atomic_ref<uint32_t>(r_->head).load(std::memory_order_acquire);
    }
    uint32_t size() const { return mask_ + 1; }

private:
    channel::tm_spsc* r_ = nullptr;
    T* e_ = nullptr;
    uint32_t mask_ = 0;
    uint32_t tail_ = 0; // ours
    uint32_t head_ = 0; // the producer's, as last read
};

} // namespace tailmark::client
