// RAII owner of a pool for packets built once and sent again and again
// (tailmarkd --replay: ready-made packet groups, re-stamped per message).
//
// Its mempool driver ("tm_replay") takes no freed packet back once the pool
// is sealed: a free (the PMD's after tx, the receiver's after placement)
// only counts the packet's free, in an array of the pool's, and leaves
// it where its builder keeps it, its reference count 1 as a pool's free
// mbuf has. The builder re-stamps and resends a packet whose frees match
// its sends. Nothing writes the mbuf's own lines after it is built, and no
// free is atomic. A packet shared by reference count instead cost every
// free a locked decrement of a count the other lcore had just raised: under
// --no-huge a quarter of the replay's tx cycles on net_null, and rx64 1.3x
// slower; with hugepages the two measured the same.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <rte_mbuf.h>
#include <rte_mempool.h>

namespace tailmark::drivers {

class ReplayPool {
public:
    // n mbufs of `data_room` bytes after RTE_PKTMBUF_HEADROOM. Until seal(),
    // an ordinary pool (no per-lcore cache): take what to build from it.
    static std::unique_ptr<ReplayPool> create(const std::string& name, uint32_t n, uint32_t data_room,
                                              int socket_id, std::string& err);
    ~ReplayPool();
    ReplayPool(const ReplayPool&) = delete;
    ReplayPool& operator=(const ReplayPool&) = delete;

    rte_mempool* get() const { return mp_; }
    // The builder's packets, pkts[0..n) of this pool, are from now on packets
    // 0..n-1, each reusable; a free of one marks it reusable and keeps it
    // out of the pool. Before any other lcore may free one of them.
    void seal(rte_mbuf* const* pkts, uint32_t n);
    // The two counts of each packet.
    struct Counts {
        const uint8_t* freed;
        uint8_t* sent;
        // Packet i was freed as often as it was sent: it may be re-stamped
        // and sent again. The builder's lcore only, as take().
        bool reusable(uint32_t i) const { return __atomic_load_n(&freed[i], __ATOMIC_ACQUIRE) == sent[i]; }
        // Before packet i is sent again: reusable once its next free is counted.
        void take(uint32_t i) { sent[i]++; }
    };
    // By value, for a loop that re-stamps packets: its stores into packet
    // bytes would otherwise make it reload the pool's pointers every time.
    Counts counts() const { return {freed_, sent_}; }
    bool reusable(uint32_t i) const { return counts().reusable(i); }
    void take(uint32_t i) { counts().take(i); }

private:
    ReplayPool(rte_mempool* mp, const uint8_t* freed, uint8_t* sent) : mp_(mp), freed_(freed), sent_(sent) {}
    rte_mempool* mp_;
    // Per packet, counted modulo 256 (a packet is sent again only once
    // freed): the driver's frees (written by whichever lcore frees) and the
    // builder's sends (its lcore's own), on lines of their own.
    const uint8_t* freed_;
    uint8_t* sent_;
};

} // namespace tailmark::drivers
