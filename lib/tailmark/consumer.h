// A consumer of a running tailmarkd's completions, in another process (a DPDK
// secondary: --proc-type=secondary --file-prefix=<the daemon's prefix>).
//
//   auto c = tailmark::Consumer::attach(flow);   // memzone tailmark_ring_<flow>
//   tailmark::Consumer::Message m;
//   while (running) {
//       if (!c->poll(m)) continue;               // the next message, in msg_id order
//       use(m.data);                             // in place, in the daemon's hugepage region
//       c->release();                            // the slot (and the sender's credit) goes back
//   }
//
// In order, one message at a time: poll() returns the oldest unreleased
// message once its completion flag is set (acquire load), and keeps returning
// it until release(). A consumer that attaches after another one died resumes
// at the ring's released cursor. One consumer per flow at a time: the cursor
// has a single writer. m.data is valid until release().
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "tailmark/completion_ring.h"

namespace tailmark {

class Consumer {
public:
    struct Message {
        uint32_t msg_id = 0;
        std::span<const uint8_t> data;        // the region, msg_len bytes
        const CompletionSlot* slot = nullptr; // flag, crc32c, pkt_count, rx_tsc, ...
    };

    // After rte_eal_init. nullptr with rte_errno set: ENOENT (no such flow:
    // the daemon is not running, or not yet set up, or has another prefix),
    // EAGAIN (the ring is not initialised yet), EPROTO (another ring layout
    // version: the daemon is from another build), ENOMEM.
    static std::unique_ptr<Consumer> attach(uint16_t flow);

    // True with m filled when the next message is complete.
    bool poll(Message& m) const;
    // Releases the message poll() returned. False when there was none to release.
    bool release();

    uint16_t flow() const { return ring_->flow(); }
    uint32_t ring_size() const { return ring_->size(); }
    uint64_t region_size() const { return ring_->region_size(); }
    uint32_t next() const { return next_; } // msg_id poll() waits for
    const CompletionRing& ring() const { return *ring_; }

private:
    explicit Consumer(std::unique_ptr<CompletionRing> r);
    std::unique_ptr<CompletionRing> ring_;
    uint32_t next_ = 0;
};

} // namespace tailmark
