// One flow of an accepted session, read in place: the daemon's receiver
// writes completed messages into a ring in the CompletionRing layout
// (tailmark/ring_layout.h) in the receive memfd, and we take them in msg_id
// order. Message m has completed when slot m mod N's flag reads m + 1
// (acquire); releasing it stores m + 1 to the cursor's `released` (release).
//
// The daemon's memory is not trusted past open(): the geometry is checked
// once and copied, slots and regions are indexed modulo our own copy of the
// ring size, and a length past the region is refused.
#pragma once

#include <cstdint>

#include "last_error.h"
#include "tailmark/ring_layout.h"

namespace tailmark::client {

struct RecvView {
    const uint8_t* data;
    uint32_t len;
    uint32_t msg_id;
};

class RecvRing {
public:
    // The ring at base, which has `avail` bytes mapped behind it, against
    // the geometry ACCEPTED announced: magic, version, ring size, region
    // size and every offset. 0, or -EPROTO with err naming the mismatch.
    static int open(uint8_t* base, uint64_t avail, uint32_t ring_size, uint64_t max_msg, RecvRing& out,
                    LastError& err);

    // The next message not yet returned: 1 (*v filled), 0 (not completed),
    // -EPROTO (its length is past the region: err says so).
    int next(RecvView* v, LastError& err);
    // The next message has completed (tm_wait's check; no side effects).
    bool ready() const {
        const uint64_t f = __atomic_load_n(&slots_[next_ & mask_].flag, __ATOMIC_ACQUIRE);
        return f == static_cast<uint64_t>(next_) + 1;
    }
    // Hands msg_id's slot back: 0, or -EINVAL unless it is the oldest
    // message returned and not yet released.
    int release(uint32_t msg_id, LastError& err);

    uint32_t next_id() const { return next_; }
    uint32_t released() const { return released_; }
    uint32_t size() const { return mask_ + 1; }
    uint64_t region_size() const { return region_size_; }

private:
    ConsumerCursor* cursor_ = nullptr;
    CompletionSlot* slots_ = nullptr;
    const uint8_t* regions_ = nullptr;
    uint32_t mask_ = 0;
    uint64_t stride_ = 0;
    uint64_t region_size_ = 0;
    uint32_t next_ = 0;     // the next msg_id next() returns
    uint32_t released_ = 0; // the next msg_id release() takes
};

} // namespace tailmark::client
