#pragma once
// NackFilter: which part of a NACK is news to the Sender.
//
// A receiver asks again for a gap on a timer of its own (the NACK delay,
// doubling per NACK: 200 us, 400 us, ...), shorter than a round trip
// through a queue. So several NACKs for one gap reach the sender before its
// retransmission reaches the receiver. Served each, they resend the same
// packets and count the same loss again: through a 100 Mbit/s tbf, 4-7x
// the packets the tbf dropped were resent, and the repeats fed congestion
// control's loss figure (2026-12-04, f7bf087, congestion.sh case 1a).
//
// A NACK can have seen the retransmission an earlier NACK of its message
// asked for only if its echo (the send stamp of the newest data packet the
// receiver had placed, control.h) is no older than the earlier NACK's
// taking: packets of a flow leave in order, the retransmission after the
// taking. A NACK that cannot keeps only what lies beyond the packets already
// asked for (a message being cut is out for many round trips, and new gaps
// open behind the old ones). A timer probe's answer is always news: forget().
#include <cstdint>

#include "tailmark/control.h"

namespace tailmark {

class NackFilter {
public:
    // The part of `n` that is news (nranges 0: none), as of `now`. echo: the
    // NACK's stamp (units of 2^stamp_shift cycles, 16 bits); has_echo false:
    // it echoes nothing, so it is all news. Nothing is recorded: took() does.
    Nack news(const Nack& n, bool has_echo, uint16_t echo, uint64_t now, unsigned stamp_shift) const {
        Nack out = n;
        const Entry* hit = find(n.msg_id);
        if (hit != nullptr && has_echo && ((now - hit->tsc) >> stamp_shift) < kHalfCircle) {
            const uint16_t now_u = static_cast<uint16_t>(now >> stamp_shift);
            const uint16_t taken_age = static_cast<uint16_t>(now_u - static_cast<uint16_t>(hit->tsc >> stamp_shift));
            const uint16_t echo_age = static_cast<uint16_t>(now_u - echo);
            if (echo_age > taken_age)
                out.nranges = beyond(n, hit->hi, out);
        }
        return out;
    }

    // `n` (news()'s answer) is served from `now` on.
    void took(const Nack& n, uint64_t now) {
        Entry* e = &e_[0];
        for (Entry& x : e_) {
            if (x.tsc != 0 && x.msg_id == n.msg_id) {
                e = &x;
                break;
            }
            if (x.tsc < e->tsc)
                e = &x; // free (0), else the oldest taking
        }
        if (e->tsc == 0 || e->msg_id != n.msg_id)
            *e = Entry{0, n.msg_id, 0};
        e->tsc = now != 0 ? now : 1;
        for (uint32_t i = 0; i < n.nranges && i < kMaxNackRanges; i++) {
            const NackRange& r = n.ranges[i];
            const uint32_t end = r.count == 0 ? kToEnd : uint32_t(r.first) + r.count;
            if (end > e->hi)
                e->hi = end;
        }
    }

    // A timer probe went out: the NACK that answers it is news.
    void forget() {
        for (Entry& e : e_)
            e.tsc = 0;
    }

private:
    struct Entry {
        uint64_t tsc = 0; // when its last NACK was taken (0: free)
        uint32_t msg_id = 0;
        uint32_t hi = 0; // packets below it were asked for (kToEnd: all)
    };
    // Stamps are 16 bits: ages compare only within half the circle (~32 ms
    // at ~1 us a unit); an older taking is no evidence either way.
    static constexpr uint64_t kHalfCircle = 0x8000;
    static constexpr uint32_t kToEnd = 0x10000;
    // Each message a loss burst hit keeps one entry: a burst rarely spans more.
    static constexpr unsigned kEntries = 4;

    const Entry* find(uint32_t msg_id) const {
        for (const Entry& e : e_)
            if (e.tsc != 0 && e.msg_id == msg_id)
                return &e;
        return nullptr;
    }

    // n's ranges cut to [hi, ...) into out; their number.
    static uint16_t beyond(const Nack& n, uint32_t hi, Nack& out) {
        uint16_t k = 0;
        for (uint32_t i = 0; i < n.nranges && i < kMaxNackRanges; i++) {
            NackRange r = n.ranges[i];
            const uint32_t end = r.count == 0 ? kToEnd : uint32_t(r.first) + r.count;
            if (end <= hi)
                continue;
            if (r.first < hi) {
                if (r.count != 0)
                    r.count = static_cast<uint16_t>(end - hi);
                r.first = static_cast<uint16_t>(hi);
            }
            out.ranges[k++] = r;
        }
        return k;
    }

    Entry e_[kEntries];
};

} // namespace tailmark
