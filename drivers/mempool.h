// RAII owner of an mbuf pool (rte_pktmbuf_pool_create) on a NUMA socket.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <rte_mbuf.h>
#include <rte_mempool.h>

namespace tailmark::drivers {

// An mbuf pool's data room (rte_pktmbuf_pool_create's) for `data_room` bytes
// after RTE_PKTMBUF_HEADROOM; false and `err` filled when it exceeds 16 bits.
bool pktmbuf_room(uint32_t data_room, uint16_t& room, std::string& err);

class Mempool {
public:
    // n mbufs of `data_room` bytes after RTE_PKTMBUF_HEADROOM. nullptr and
    // `err` filled on failure.
    static std::unique_ptr<Mempool> create(const std::string& name, uint32_t n, uint32_t data_room,
                                           int socket_id, std::string& err);
    ~Mempool();
    Mempool(const Mempool&) = delete;
    Mempool& operator=(const Mempool&) = delete;

    rte_mempool* get() const { return mp_; }
    int socket() const { return mp_->socket_id; }
    uint32_t size() const { return mp_->size; }
    // Data room after the headroom: the largest frame one segment holds.
    uint32_t data_room() const {
        return rte_pktmbuf_data_room_size(mp_) - RTE_PKTMBUF_HEADROOM;
    }

private:
    explicit Mempool(rte_mempool* mp) : mp_(mp) {}
    rte_mempool* mp_;
};

} // namespace tailmark::drivers
