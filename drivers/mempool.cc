#include "drivers/mempool.h"

#include <cstdio>

#include <rte_errno.h>

#include "tailmark/log.h"

namespace tailmark::drivers {

bool pktmbuf_room(uint32_t data_room, uint16_t& room, std::string& err) {
    const uint64_t r = uint64_t(data_room) + RTE_PKTMBUF_HEADROOM;
    if (r > UINT16_MAX) {
        err = "mbuf data room " + std::to_string(r) + " exceeds 65535";
        return false;
    }
    room = static_cast<uint16_t>(r);
    return true;
}

std::unique_ptr<Mempool> Mempool::create(const std::string& name, uint32_t n, uint32_t data_room,
                                         int socket_id, std::string& err) {
    uint16_t room;
    if (!pktmbuf_room(data_room, room, err))
        return nullptr;
    // Per-lcore cache: at most n / 1.5 (rte_mempool's own limit).
    uint32_t cache = 256;
    while (cache > 0 && cache * 3 / 2 > n)
        cache /= 2;
    rte_mempool* mp = rte_pktmbuf_pool_create(name.c_str(), n, cache, 0, room, socket_id);
    if (mp == nullptr) {
        err = "mbuf pool " + name + " (" + std::to_string(n) + " x " + std::to_string(room) +
              " B on socket " + std::to_string(socket_id) + "): " + rte_strerror(rte_errno);
        return nullptr;
    }
    TM_LOG(INFO, port, "mbuf pool %s: %u mbufs of %u B, cache %u, socket %d", name.c_str(), n, room,
           cache, mp->socket_id);
    return std::unique_ptr<Mempool>(new Mempool(mp));
}

Mempool::~Mempool() {
    rte_mempool_free(mp_);
}

} // namespace tailmark::drivers
