// RAII owner of a pool for packets built once and sent again and again
// (tailmarkd --replay: ready-made packet groups, re-stamped per message).
//
// Its mempool driver ("tm_replay") takes no freed packet back once the pool
// is sealed: a free (the PMD's after tx, the receiver's after placement)
// only marks the packet reusable, with its reference count at 0, and leaves
// it where its builder keeps it. The builder re-stamps and resends a marked
// packet. A packet shared by reference count instead costs every free a
// locked decrement and a refcount line bounced between lcores (net_null's
// free was a quarter of the replay's tx cycles).
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
    // From now on a free marks the packet reusable and keeps it out of the
    // pool. Free the built packets after this: each is then reusable.
    // Before any other lcore may free one of the pool's packets.
    void seal();
    // The packet's last free happened: it may be re-stamped and sent.
    static bool reusable(const rte_mbuf* m) { return __atomic_load_n(&m->refcnt, __ATOMIC_ACQUIRE) == 0; }
    // Before it is sent again: the one reference, which the next free drops.
    static void take(rte_mbuf* m) { rte_mbuf_refcnt_set(m, 1); }

private:
    explicit ReplayPool(rte_mempool* mp) : mp_(mp) {}
    rte_mempool* mp_;
};

} // namespace tailmark::drivers
