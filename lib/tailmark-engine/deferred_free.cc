#include "tailmark/engine/deferred_free.h"

namespace tailmark::engine {

// Entries are in the order they were let go, so the due ones are a prefix.
// Each runs after it leaves the queue: an fn that calls later() is safe.
size_t DeferredFree::take(uint64_t now, bool all) {
    size_t n = 0;
    while (!q_.empty() && (all || now - q_.front().first >= delay_)) {
        std::function<void()> fn = std::move(q_.front().second);
        q_.pop_front();
        fn();
        n++;
    }
    return n;
}

} // namespace tailmark::engine
