// Freshness of authenticated control packets: each direction numbers its
// packets 1, 2, 3, ... (64 bits: they never wrap), inside the MAC, and the
// receiver keeps the window of RFC 4303 (IPsec ESP's anti-replay): the
// highest number taken and which of the 64 below it were. A number is taken
// once; one seen before, or older than the window, is a replay (or so late
// that it carries nothing the newer ones did not): dropped, counted
// control_replayed. Packets may arrive out of order within the window.
#pragma once

#include <cstdint>

namespace tailmark {

class ReplayWindow {
public:
    static constexpr uint32_t kWidth = 64;

    // Fresh: `seq` was never taken and is within the window (0 never is).
    bool fresh(uint64_t seq) const {
        if (seq == 0)
            return false;
        if (seq > top_)
            return true;
        const uint64_t back = top_ - seq;
        return back < kWidth && (seen_ & (uint64_t(1) << back)) == 0;
    }
    // Takes it if fresh; false otherwise (nothing changes).
    bool take(uint64_t seq) {
        if (!fresh(seq))
            return false;
        if (seq > top_) {
            const uint64_t ahead = seq - top_;
            seen_ = ahead >= kWidth ? 0 : seen_ << ahead;
            seen_ |= 1;
            top_ = seq;
        } else {
            seen_ |= uint64_t(1) << (top_ - seq);
        }
        return true;
    }
    uint64_t top() const { return top_; }

private:
    uint64_t top_ = 0;  // the highest number taken (0: none yet)
    uint64_t seen_ = 0; // bit i: top_ - i was taken
};

} // namespace tailmark
