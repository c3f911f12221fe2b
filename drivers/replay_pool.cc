#include "drivers/replay_pool.h"

#include <rte_errno.h>
#include <rte_malloc.h>

namespace tailmark::drivers {

namespace {

constexpr const char* kOpsName = "tm_replay";

// The driver's store: a plain stack, used only before seal() (population
// and the builder's allocations, on one thread). After it, enqueue marks.
struct Store {
    bool sealed;
    uint32_t n;
    uint32_t cap;
    void* objs[];
};

Store* store(const rte_mempool* mp) { return static_cast<Store*>(mp->pool_data); }

int store_alloc(rte_mempool* mp) {
    auto* s = static_cast<Store*>(
        rte_zmalloc_socket("tm_replay_store", sizeof(Store) + sizeof(void*) * mp->size, RTE_CACHE_LINE_SIZE,
                           mp->socket_id));
    if (s == nullptr)
        return -ENOMEM;
    s->cap = mp->size;
    mp->pool_data = s;
    return 0;
}

void store_free(rte_mempool* mp) {
    rte_free(mp->pool_data);
    mp->pool_data = nullptr;
}

int store_enqueue(rte_mempool* mp, void* const* objs, unsigned n) {
    Store* s = store(mp);
    if (likely(s->sealed)) { // a packet's last free: reusable, where its builder keeps it
        for (unsigned i = 0; i < n; i++)
            __atomic_store_n(&static_cast<rte_mbuf*>(objs[i])->refcnt, 0, __ATOMIC_RELEASE);
        return 0;
    }
    if (n > s->cap - s->n)
        return -ENOBUFS;
    for (unsigned i = 0; i < n; i++)
        s->objs[s->n++] = objs[i];
    return 0;
}

int store_dequeue(rte_mempool* mp, void** objs, unsigned n) {
    Store* s = store(mp);
    if (s->sealed || n > s->n)
        return -ENOBUFS;
    for (unsigned i = 0; i < n; i++)
        objs[i] = s->objs[--s->n];
    return 0;
}

unsigned store_count(const rte_mempool* mp) {
    const Store* s = store(mp);
    return s->sealed ? 0 : s->n;
}

const rte_mempool_ops replay_ops = {
    .name = "tm_replay",
    .alloc = store_alloc,
    .free = store_free,
    .enqueue = store_enqueue,
    .dequeue = store_dequeue,
    .get_count = store_count,
    .calc_mem_size = nullptr, // the defaults
    .populate = nullptr,
    .get_info = nullptr,
    .dequeue_contig_blocks = nullptr,
};

// Registered on first use, not by a constructor (RTE_MEMPOOL_REGISTER_OPS):
// a pool names its driver by an index into each process's own table, so a
// driver registered before EAL loads the mempool plugins would shift their
// indices in this process alone, and a secondary (dpdk-pdump, a consumer)
// would call the wrong driver on the primary's pools. Appended after them,
// it moves nothing another process uses.
bool register_ops(std::string& err) {
    static const int rc = rte_mempool_register_ops(&replay_ops); // its index, or -errno
    if (rc < 0)
        err = std::string("mempool driver ") + kOpsName + ": " + rte_strerror(-rc);
    return rc >= 0;
}

} // namespace

std::unique_ptr<ReplayPool> ReplayPool::create(const std::string& name, uint32_t n, uint32_t data_room,
                                               int socket_id, std::string& err) {
    const uint32_t room = data_room + RTE_PKTMBUF_HEADROOM;
    if (room > UINT16_MAX) {
        err = "mbuf data room " + std::to_string(room) + " exceeds 65535";
        return nullptr;
    }
    if (!register_ops(err))
        return nullptr;
    // No per-lcore cache: a free must reach the driver, which marks it.
    rte_mempool* mp = rte_pktmbuf_pool_create_by_ops(name.c_str(), n, 0, 0, static_cast<uint16_t>(room), socket_id,
                                                     kOpsName);
    if (mp == nullptr) {
        err = "replay pool " + name + " (" + std::to_string(n) + " x " + std::to_string(room) + " B on socket " +
              std::to_string(socket_id) + "): " + rte_strerror(rte_errno);
        return nullptr;
    }
    return std::unique_ptr<ReplayPool>(new ReplayPool(mp));
}

void ReplayPool::seal() {
    __atomic_store_n(&store(mp_)->sealed, true, __ATOMIC_RELEASE);
}

ReplayPool::~ReplayPool() {
    rte_mempool_free(mp_);
}

} // namespace tailmark::drivers
