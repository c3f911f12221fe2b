// Packets on their way into one tx queue. A partial rte_eth_tx_burst keeps
// the rest for the next round (an lcore that also polls rx drains a loopback
// ring in between); after `stall` cycles without any progress the rest is
// freed and counted, so a dead link cannot hang the lcore.
#pragma once

#include <cstdint>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

namespace tailmark {

class TxBurst {
public:
    static constexpr uint32_t kMax = 64;

    TxBurst(uint16_t port, uint16_t queue, uint64_t stall) : port_(port), queue_(queue), stall_(stall) {}
    ~TxBurst() {
        if (pos_ < n_)
            rte_pktmbuf_free_bulk(pkts_ + pos_, n_ - pos_);
    }
    TxBurst(const TxBurst&) = delete;
    TxBurst& operator=(const TxBurst&) = delete;

    // Hands what is pending to the PMD. True when nothing is pending after it.
    bool flush(uint64_t now) {
        if (pos_ == n_) {
            n_ = pos_ = 0;
            return true;
        }
        const uint16_t sent = rte_eth_tx_burst(port_, queue_, pkts_ + pos_, static_cast<uint16_t>(n_ - pos_));
        if (sent) {
            __atomic_store_n(&pkts_tx_, pkts_tx_ + sent, __ATOMIC_RELAXED);
            stuck_ = false;
        }
        pos_ += sent;
        if (pos_ == n_) {
            n_ = pos_ = 0;
            stall_since_ = 0;
            return true;
        }
        if (sent != 0 || stall_since_ == 0) {
            stall_since_ = now;
            return false;
        }
        if (now - stall_since_ > stall_) {
            rte_pktmbuf_free_bulk(pkts_ + pos_, n_ - pos_);
            __atomic_store_n(&dropped_, dropped_ + (n_ - pos_), __ATOMIC_RELAXED);
            n_ = pos_ = 0;
            stall_since_ = 0;
            stuck_ = true;
            return true;
        }
        return false;
    }
    // After flush() returned true: room for kMax packets at slots(); then
    // send(n) queues the n built there and tries them at once.
    rte_mbuf** slots() { return pkts_; }
    void send(uint32_t n, uint64_t now) {
        n_ = n;
        pos_ = 0;
        flush(now);
    }
    // Queues one more packet behind what is pending (a rail's, split off a
    // round built elsewhere); flush() sends it. False: no room.
    bool push(rte_mbuf* m) {
        if (pos_ == n_)
            n_ = pos_ = 0;
        else if (n_ == kMax && pos_ != 0) { // room at the front: close up
            for (uint32_t i = pos_; i < n_; i++)
                pkts_[i - pos_] = pkts_[i];
            n_ -= pos_;
            pos_ = 0;
        }
        if (n_ == kMax)
            return false;
        pkts_[n_++] = m;
        return true;
    }
    uint32_t pending() const { return n_ - pos_; }
    // A stall freed what was pending and the PMD has taken nothing since (a
    // rail whose link is down): its packets are not waited for.
    bool stuck() const { return stuck_; }
    uint64_t pkts_tx() const { return __atomic_load_n(&pkts_tx_, __ATOMIC_RELAXED); }
    uint64_t dropped() const { return __atomic_load_n(&dropped_, __ATOMIC_RELAXED); }
    uint16_t port() const { return port_; }
    uint16_t queue() const { return queue_; }

private:
    uint16_t port_, queue_;
    uint64_t stall_;
    rte_mbuf* pkts_[kMax];
    uint32_t n_ = 0, pos_ = 0;
    uint64_t stall_since_ = 0;
    bool stuck_ = false;
    uint64_t pkts_tx_ = 0; // accepted by the PMD (owner writes, anyone reads)
    uint64_t dropped_ = 0; // freed after a stall
};

} // namespace tailmark
