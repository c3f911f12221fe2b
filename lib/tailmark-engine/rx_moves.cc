#include "tailmark/engine/rx_moves.h"

#include <cstdio>
#include <cstring>

#include <rte_malloc.h>
#include <rte_mbuf.h>

namespace tailmark::engine {

bool RxMoves::make(uint32_t nrx, int socket, uint64_t period, std::string& what) {
    period_ = period;
    owner_ = static_cast<uint8_t*>(rte_malloc("tm_rx_owner", 65536, 64)); // set-up only
    arrived_ = static_cast<uint8_t*>(rte_malloc("tm_rx_arrived", 65536, 64)); // set-up only
    // Each recv flow's data version and tag key: where its data arrives is
    // learnt only from packets that verify (RxPlacer::set_handoff).
    auth_ = static_cast<FlowAuth*>(rte_zmalloc("tm_rx_auth", sizeof(FlowAuth) * 65536, 64)); // set-up only
    if (owner_ == nullptr || arrived_ == nullptr || auth_ == nullptr) {
        what = "rx steering table";
        release();
        return false;
    }
    memset(owner_, RxPlacer::kNoOwner, 65536);
    memset(arrived_, RxPlacer::kNoOwner, 65536);
    for (uint32_t r = 0; r < nrx; r++) {
        char name[RTE_RING_NAMESIZE];
        // Named by this RxMoves too: two engines of one process each have
        // their own (rte_ring names are process-wide).
        snprintf(name, sizeof(name), "tm_ho%u_%lx", r, reinterpret_cast<uintptr_t>(this) & 0xFFFFFF); // set-up only
        rte_ring* q = rte_ring_create(name, kHandoffRing, socket, RING_F_SC_DEQ);
        if (q == nullptr) {
            what = "hand-off ring " + std::to_string(r);
            release();
            return false;
        }
        in_.push_back(q);
    }
    return true;
}

void RxMoves::fill(ReceiverRoutes& r) const {
    r.rx_owner = owner_;
    r.rx_arrived = arrived_;
    r.auth_of = auth_;
    r.handoff_in = in_.data();
}

void RxMoves::set_receivers(std::vector<Receiver*> rx, std::vector<unsigned> lcores) {
    rx_ = std::move(rx);
    lcores_ = std::move(lcores);
}

void RxMoves::release() {
    for (rte_ring* q : in_) {
        rte_mbuf* m;
        while (rte_ring_dequeue(q, reinterpret_cast<void**>(&m)) == 0)
            rte_pktmbuf_free(m);
        rte_ring_free(q);
    }
    in_.clear();
    rte_free(owner_);
    rte_free(arrived_);
    rte_free(auth_);
    owner_ = arrived_ = nullptr;
    auth_ = nullptr;
}

void RxMoves::place(RecvPlace& p, uint16_t id, uint8_t owner, const FlowAuth& auth) {
    auth_[id].key = auth.key; // the keys first, then the version that makes them read
    auth_[id].data_auth = auth.data_auth;
    auth_[id].loopback = auth.loopback;
    memcpy(auth_[id].auth_h, auth.auth_h, sizeof(auth.auth_h));
    __atomic_store_n(&auth_[id].version, auth.version, __ATOMIC_RELEASE);
    __atomic_store_n(&arrived_[id], RxPlacer::kNoOwner, __ATOMIC_RELAXED);
    __atomic_store_n(&owner_[id], owner, __ATOMIC_RELEASE);
    p.moving = false;
    p.arrival_seen = RxPlacer::kNoOwner;
}

void RxMoves::removed(const RecvPlace& p, uint8_t& last_owner, uint8_t& last_arrived) {
    last_owner = owner_[p.recv_id];
    last_arrived = __atomic_load_n(&arrived_[p.recv_id], __ATOMIC_RELAXED);
    __atomic_store_n(&owner_[p.recv_id], RxPlacer::kNoOwner, __ATOMIC_RELEASE);
    __atomic_store_n(&auth_[p.recv_id].version, uint8_t{0}, __ATOMIC_RELEASE);
}

bool RxMoves::due(uint64_t now) {
    if (owner_ == nullptr || now < next_)
        return false;
    next_ = now + period_;
    return true;
}

bool RxMoves::look(RecvPlace& p, uint32_t index, Request& out) {
    const auto R = static_cast<uint8_t>(rx_.size());
    const uint8_t at = __atomic_load_n(&arrived_[p.recv_id], __ATOMIC_RELAXED);
    const uint8_t owner = __atomic_load_n(&owner_[p.recv_id], __ATOMIC_RELAXED);
    const bool other = at < R && at != owner;
    if (!other || at != p.arrival_seen) {
        p.arrival_seen = other ? at : RxPlacer::kNoOwner;
        return false;
    }
    p.moving = true;
    p.move_to = at;
    p.arrival_seen = RxPlacer::kNoOwner;
    out = Request{Request::Op::MoveRecvOut, false, FailReason::None, p.recv_id, index, p.receiver, nullptr, nullptr};
    return true;
}

void RxMoves::moved_out(RecvPlace& p, const Request& r, Request& in) {
    __atomic_store_n(&owner_[p.recv_id], p.move_to, __ATOMIC_RELEASE);
    p.receiver = rx_[p.move_to];
    p.recv_lcore = lcores_[p.move_to];
    in = Request{Request::Op::MoveRecvIn, false, FailReason::None, p.recv_id, r.index, p.receiver, r.obj, nullptr};
}

} // namespace tailmark::engine
