// The one thread that moves a process group's bytes. Operations queue in
// issue order; each peer's send stream and receive stream serve the oldest
// operation that still has pieces for them, so a send to one rank and a
// receive from another (isend/irecv) proceed together, and every rank
// numbers each stream's operations alike. Any failure (a peer's session
// ends, a message fails, a timeout, a mismatched header) breaks the group:
// every pending and later operation ends with that error, and every peer
// is told (engine_abort.cc).
#pragma once

#include "mesh.h"
#include "op.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tailmark::torch_backend {

class Engine {
public:
    Engine(std::unique_ptr<Mesh> mesh, std::chrono::milliseconds timeout);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Takes the op; its on_done runs on the engine's thread (or here, at
    // once, when the group is already broken).
    void submit(std::unique_ptr<Op> op);
    const Mesh& mesh() const { return *mesh_; }
    // Pieces sent to ranks of this host: read by them in the caller's
    // tensor (TensorHeap), or copied into a slot first. Any thread.
    struct Counts {
        uint64_t in_place = 0, copied = 0;
    };
    Counts counts() const {
        return {in_place_.load(std::memory_order_relaxed), copied_local_.load(std::memory_order_relaxed)};
    }

    // Stops every live engine's thread and fails what is pending (the
    // module's atexit hook): done while the interpreter is whole. Left to
    // interpreter finalization, an engine thread that completes a future
    // whose callbacks want the GIL can be ended by Python mid-call
    // (pthread_exit unwinding through C++ frames that may not throw): the
    // likely cause of one CI abort ("terminate called without an active
    // exception") after a rank had raised its error, in torch_fail. Not
    // reproduced locally. Call without the GIL.
    static void shutdown_all();

private:
    struct SlotUse {
        Op* op = nullptr;
        int part = -1;
    };

    void run();
    bool activate();
    bool progress();
    bool pump_out(Op& op, int part);
    // Where slot s's payload goes for peer: the segment (Mesh::direct) or
    // after the header in the arena.
    unsigned char* payload(int s, int peer) const;
    // Where a received piece's len bytes are (in the message, or by
    // reference in the peer's segment or TensorHeap), or nullptr if not there.
    const unsigned char* payload_in(int peer, const tm_message& m, const PieceHeader& h, size_t len) const;
    // A free slot for outs[part]'s next piece, its header written.
    int take_slot(Op& op, int part);
    // The out part whose next piece is what ins[part]'s piece j makes, when
    // that piece may be made straight into a slot now (else -1).
    int forward_to(const Op& op, int part, size_t j) const;
    // Where piece j of out lies in this process's TensorHeap and its peer
    // maps it: the offset the peer reads it at (else 0). OutPiece::fixed.
    size_t heap_at(const OutPart& out, size_t j) const;
    bool pump_in(Op& op, int part);
    // Nothing moved: sleep until a completion, or the next piece of the
    // first stream whose op can take it (1 ms at most).
    void idle_wait();
    void check_health();
    void finish_done();
    void brk(const std::string& why);
    // engine_abort.cc: a failure seen here breaks the group (brk: "tailmark
    // (rank r): <op's what>: <cause>") and owes every peer an abort note
    // naming the rank that failed first (origin: this one, or the one whose
    // note this rank took) and that rank's cause.
    void fail(const Op* op, const std::string& cause, int origin = -1, const std::string& first_cause = {});
    void take_note(const Op& op, tm_message& m, const PieceHeader& h); // a peer's note read in place of a piece
    void after_break(); // the broken engine's loop: notes out, peers' messages taken and dropped
    void stop(); // joins the thread (idempotent), then fails what is pending
    bool ready(const Op& op, const OutPart& part) const;
    bool in_ready(const Op& op, const InPart& part) const;

    std::unique_ptr<Mesh> mesh_;
    tm_channel* ch_;
    const std::chrono::milliseconds timeout_;
    const int rank_, size_;

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Op>> queue_; // under mu_
    std::string broken_;                    // under mu_ once set
    std::atomic<bool> has_queued_{false};
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> in_place_{0}, copied_local_{0}; // counts()

    // The engine thread's own.
    std::deque<std::unique_ptr<Op>> active_;
    std::vector<uint64_t> out_seq_, in_seq_;
    std::vector<int> free_slots_;
    std::vector<SlotUse> uses_;
    std::chrono::steady_clock::time_point next_health_{};
    bool broken_local_ = false;
    std::vector<bool> note_owed_; // per peer: the abort note not yet taken by its session
    uint32_t note_len_ = 0;
    std::thread thread_;
};

} // namespace tailmark::torch_backend
