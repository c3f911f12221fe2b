// The application's flows by number: slot i is the flow the shell, the
// summary and telemetry call i. The control thread alone adds and gives
// back slots; any other thread reads slot i for i < count() without a lock.
//
// Why slots are reused: a daemon that serves sessions for months would
// otherwise keep every flow it ever had, scans would grow with its age, and
// no flow could be added once `capacity` had come and gone. A slot given
// back (release) serves the next flow, oldest first; the reader of the old
// flow may still hold it, so add() hands the old pointer back for the
// caller to free once such readers had time to let go (DeferredFree).
//
// Why room is reserved up front: readers index the slots while the control
// thread appends, so the storage never moves.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace tailmark::engine {

template <class T>
class FlowRegistry {
public:
    explicit FlowRegistry(size_t capacity) : cap_(capacity) { slots_.reserve(capacity); }
    FlowRegistry(const FlowRegistry&) = delete;
    FlowRegistry& operator=(const FlowRegistry&) = delete;

    // --- control thread ---
    // Gives f a slot: the oldest given back, whose flow comes back in `old`
    // (to free later), or a new one (old: null). False: full (nothing changed).
    bool add(T* f, uint32_t& index, T*& old) {
        old = nullptr;
        if (!free_.empty()) {
            index = free_.front();
            free_.pop_front();
            old = slots_[index];
            // A whole pointer, published: a reader sees the old flow or the new.
            std::atomic_ref<T*>(slots_[index]).store(f, std::memory_order_release);
            made_++;
            reused_++;
            return true;
        }
        if (slots_.size() == cap_)
            return false;
        index = static_cast<uint32_t>(slots_.size());
        slots_.push_back(f); // within the reserved room: readers' view stays valid
        made_++;
        return true;
    }
    // Slot i's flow is done with: the slot serves a later flow.
    void release(uint32_t i) { free_.push_back(i); }
    // Shows the slots added since to the other threads.
    void publish() { n_.store(static_cast<uint32_t>(slots_.size()), std::memory_order_release); }
    // Every slot gone (teardown: the caller freed the flows).
    void clear() {
        slots_.clear();
        free_.clear();
        n_.store(0, std::memory_order_release);
    }
    size_t size() const { return slots_.size(); }   // slots made, published or not
    size_t room() const { return cap_ - slots_.size() + free_.size(); }
    size_t capacity() const { return cap_; }
    uint64_t made() const { return made_; }          // flows add() placed
    uint64_t reused() const { return reused_; }      // of them, in a slot given back
    T* operator[](size_t i) const { return slots_[i]; }
    auto begin() const { return slots_.begin(); }
    auto end() const { return slots_.end(); }

    // --- any thread ---
    uint32_t count() const { return n_.load(std::memory_order_acquire); } // slots published
    // Slot i's flow (i < count()); it may be replaced by a later add().
    T& at(uint32_t i) const {
        return *std::atomic_ref<T*>(const_cast<T*&>(slots_[i])).load(std::memory_order_acquire);
    }

private:
    size_t cap_;
    std::vector<T*> slots_;
    std::deque<uint32_t> free_; // slots given back, oldest first
    std::atomic<uint32_t> n_{0};
    uint64_t made_ = 0, reused_ = 0;
};

} // namespace tailmark::engine
