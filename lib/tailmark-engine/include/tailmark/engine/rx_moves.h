// Moves between rx lcores (hand-off steering). Some ports spread frames
// over their rx queues by a hash this process cannot compute (af_packet's
// fanout, a tap's queues), but keep one flow's frames on one queue. Each
// receive flow is dealt to a Receiver (id % R); a frame that reaches
// another rx lcore is handed to its owner's ring (ReceiverRoutes). Once a
// flow's frames have come in on the same other rx lcore at two looks in a
// row, the control thread moves it there: out of its Receiver, its owner
// entry changed, into the new one. Meanwhile its frames wait on the new
// Receiver's ring (Receiver::route), so nothing is dropped.
//
// RxMoves owns the tables the Receivers read (owner, arrival, each flow's
// data authentication) and the hand-off rings, and decides the moves; the
// application posts the requests it hands back and reports the answers.
// Control thread only, except the tables, which the rx lcores read and
// write with atomics. Never on the fast path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tailmark/engine/lcore.h"
#include "tailmark/receiver.h"
#include "tailmark/rx_placer.h"

namespace tailmark::engine {

// A receive flow's place among the Receivers, and a move under way. An
// application's flow record derives from it.
struct RecvPlace {
    Receiver* receiver = nullptr; // the one holding it (or about to)
    RecvFlow* recv = nullptr;     // null: not installed (or gone)
    uint16_t recv_id = 0;
    unsigned recv_lcore = 0;      // receiver's rx lcore: where its requests go
    bool moving = false;
    uint8_t move_to = 0;
    uint8_t arrival_seen = RxPlacer::kNoOwner; // the other rx lcore its frames came in on at the last look
    uint8_t last_owner = RxPlacer::kNoOwner, last_arrived = RxPlacer::kNoOwner; // at its removal (removed())
};

class RxMoves {
public:
    static constexpr unsigned kHandoffRing = 4096;

    RxMoves() = default;
    RxMoves(const RxMoves&) = delete;
    RxMoves& operator=(const RxMoves&) = delete;
    ~RxMoves() { release(); }

    // The tables and one hand-off ring per Receiver (nrx), looked at every
    // `period` TSC cycles. False: out of memory, `what` says which.
    bool make(uint32_t nrx, int socket, uint64_t period, std::string& what);
    bool on() const { return owner_ != nullptr; }
    // The Receivers' routes for hand-off (rx_owner, handoff_in, rx_arrived, auth_of).
    void fill(ReceiverRoutes& r) const;
    // The Receivers, by index, and their rx lcores (set once they are made).
    void set_receivers(std::vector<Receiver*> rx, std::vector<unsigned> lcores);
    // After the lcores are joined: the rings drained and freed, the tables freed.
    void release();

    // Flow id's Receiver is `owner`, and its data is authenticated as `auth`:
    // before the flow is installed anywhere (no data of it is placed yet).
    void place(RecvPlace& p, uint16_t id, uint8_t owner, const FlowAuth& auth);
    // The flow left its Receiver for good: its last owner and arrival, then
    // its entries cleared (its frames are no one's).
    void removed(const RecvPlace& p, uint8_t& last_owner, uint8_t& last_arrived);
    void removed(RecvPlace& p) { removed(p, p.last_owner, p.last_arrived); }
    uint8_t owner_of(uint16_t id) const { return __atomic_load_n(&owner_[id], __ATOMIC_RELAXED); }
    uint8_t arrived_of(uint16_t id) const { return __atomic_load_n(&arrived_[id], __ATOMIC_RELAXED); }

    // Whether the flows are due a look at `now` (every period).
    bool due(uint64_t now);
    // One flow's look (an installed flow, not moving, whose session is not
    // ending): true with `out` filled, the MoveRecvOut to post to
    // p.recv_lcore, when it should move. `index`: the application's flow.
    bool look(RecvPlace& p, uint32_t index, Request& out);
    // MoveRecvOut answered with the flow out of its old Receiver: it is named
    // the new one's; `in` is the MoveRecvIn to post to p.recv_lcore.
    void moved_out(RecvPlace& p, const Request& r, Request& in);
    // MoveRecvIn answered (or the move failed): the move is over.
    void moved_in(RecvPlace& p, bool ok) {
        p.moving = false;
        moves_ += ok ? 1 : 0;
    }
    uint64_t moves() const { return moves_; }

private:
    uint8_t* owner_ = nullptr;   // 65536: a recv flow id's Receiver
    uint8_t* arrived_ = nullptr; // 65536: the rx lcore a recv flow's data last came in on
    FlowAuth* auth_ = nullptr;   // 65536: a recv flow's data version and tag key
    std::vector<rte_ring*> in_;  // per Receiver
    std::vector<Receiver*> rx_;
    std::vector<unsigned> lcores_;
    uint64_t period_ = 0, next_ = 0;
    uint64_t moves_ = 0;         // flows moved to the Receiver their frames reach
};

} // namespace tailmark::engine
