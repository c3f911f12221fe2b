#include "drivers/replay_pool.h"

#include <cstdio>

#include <rte_errno.h>
#include <rte_mbuf_dyn.h>
#include <rte_malloc.h>

#include "drivers/mempool.h"

namespace tailmark::drivers {

namespace {

constexpr const char* kOpsName = "tm_replay";

// Each packet's index among the builder's (seal()), in an mbuf dynfield:
// the driver's free finds its count by it.
constexpr const char* kIndexField = "tailmark_replay_index";
int g_index_offset = -1;

// The driver's store: a plain stack for population and the builder's
// allocations (before seal(), on one thread), and after it each sealed
// packet's counts of frees and sends (ReplayPool).
struct Store {
    bool sealed;
    uint32_t n;
    uint32_t cap;
    uint32_t packets; // sealed: the builder's, indices [0, packets)
    uint8_t* freed;   // cap of each, on lines of their own, after objs
    uint8_t* sent;
    void* objs[];
};

constexpr size_t lines(size_t bytes) { return RTE_ALIGN_CEIL(bytes, RTE_CACHE_LINE_SIZE); }

Store* store(const rte_mempool* mp) { return static_cast<Store*>(mp->pool_data); }

int store_alloc(rte_mempool* mp) {
    const size_t head = lines(sizeof(Store) + sizeof(void*) * mp->size);
    auto* s = static_cast<Store*>(rte_zmalloc_socket("tm_replay_store", head + 2 * lines(mp->size), RTE_CACHE_LINE_SIZE,
                                                     mp->socket_id));
    if (s == nullptr)
        return -ENOMEM;
    s->cap = mp->size;
    s->freed = reinterpret_cast<uint8_t*>(s) + head;
    s->sent = s->freed + lines(mp->size);
    mp->pool_data = s;
    return 0;
}

void store_free(rte_mempool* mp) {
    rte_free(mp->pool_data);
    mp->pool_data = nullptr;
}

int store_enqueue(rte_mempool* mp, void* const* objs, unsigned n) {
    Store* s = store(mp);
    for (unsigned i = 0; i < n; i++) {
        const uint32_t idx = *RTE_MBUF_DYNFIELD(static_cast<rte_mbuf*>(objs[i]), g_index_offset, const uint32_t*);
        if (likely(s->sealed && idx < s->packets)) { // a packet's free: counted, the packet left where it is
            __atomic_store_n(&s->freed[idx], uint8_t(s->freed[idx] + 1), __ATOMIC_RELEASE);
            continue;
        }
        if (s->n == s->cap) // more than the pool holds: not one of its objects
            return -ENOBUFS;
        s->objs[s->n++] = objs[i]; // a spare, back on the stack
    }
    return 0;
}

int store_dequeue(rte_mempool* mp, void** objs, unsigned n) {
    Store* s = store(mp);
    if (n > s->n)
        return -ENOBUFS;
    for (unsigned i = 0; i < n; i++)
        objs[i] = s->objs[--s->n];
    return 0;
}

unsigned store_count(const rte_mempool* mp) {
    return store(mp)->n;
}

// Every object's index: none of the builder's (until seal() names them).
void unindexed(rte_mempool*, void*, void* obj, unsigned) {
    *RTE_MBUF_DYNFIELD(static_cast<rte_mbuf*>(obj), g_index_offset, uint32_t*) = UINT32_MAX;
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
    if (rc < 0) {
        err = std::string("mempool driver ") + kOpsName + ": " + rte_strerror(-rc);
        return false;
    }
    if (g_index_offset < 0) {
        rte_mbuf_dynfield desc{};
        snprintf(desc.name, sizeof(desc.name), "%s", kIndexField);
        desc.size = sizeof(uint32_t);
        desc.align = alignof(uint32_t);
        g_index_offset = rte_mbuf_dynfield_register(&desc);
        if (g_index_offset < 0) {
            err = std::string("mbuf dynfield ") + kIndexField + ": " + rte_strerror(rte_errno);
            return false;
        }
    }
    return true;
}

} // namespace

std::unique_ptr<ReplayPool> ReplayPool::create(const std::string& name, uint32_t n, uint32_t data_room,
                                               int socket_id, std::string& err) {
    uint16_t room;
    if (!pktmbuf_room(data_room, room, err) || !register_ops(err))
        return nullptr;
    // No per-lcore cache: every free must reach the driver, which counts it.
    rte_mempool* mp = rte_pktmbuf_pool_create_by_ops(name.c_str(), n, 0, 0, room, socket_id, kOpsName);
    if (mp == nullptr) {
        err = "replay pool " + name + " (" + std::to_string(n) + " x " + std::to_string(room) + " B on socket " +
              std::to_string(socket_id) + "): " + rte_strerror(rte_errno);
        return nullptr;
    }
    rte_mempool_obj_iter(mp, unindexed, nullptr);
    Store* s = store(mp);
    return std::unique_ptr<ReplayPool>(new ReplayPool(mp, s->freed, s->sent));
}

void ReplayPool::seal(rte_mbuf* const* pkts, uint32_t n) {
    Store* s = store(mp_);
    s->packets = n < s->cap ? n : s->cap;
    for (uint32_t i = 0; i < s->packets; i++) // freed as often as sent (0): reusable
        *RTE_MBUF_DYNFIELD(pkts[i], g_index_offset, uint32_t*) = i;
    __atomic_store_n(&s->sealed, true, __ATOMIC_RELEASE);
}

ReplayPool::~ReplayPool() {
    rte_mempool_free(mp_);
}

} // namespace tailmark::drivers
