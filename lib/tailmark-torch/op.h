// One operation as the engine runs it: per peer, the pieces it sends and
// the pieces it receives, in the order both ranks agree on. A collective is
// only a plan of these (process_group*.cc make them); the engine moves the
// bytes and knows nothing of tensors.
#pragma once

#include "piece.h"
#include "reduce.h"

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace tailmark::torch_backend {

struct OutPiece {
    const void* src; // copied into a send slot when the piece goes
    size_t len;
    // src's bytes, once the piece may go, are not written until the peer
    // has taken it: the caller's input, which the op holds and does not
    // write, or what a chain or ring forwards and overwrites (if ever) only
    // with what comes round after the peer took it (plan.h: fixed_forward).
    // Where they lie in the TensorHeap, a rank of this host reads them
    // there (no copy into a slot), until it releases the piece.
    bool fixed = false;
};

struct InPiece {
    void* dst;       // a == nullptr: dst = in; else dst = a (op) in
    const void* a;
    size_t len;
    // false: the plan overwrites dst later and reads it only to send it on,
    // so when the result goes straight into the send slot of the piece that
    // forwards it (Engine::pump_in), dst is not written at all (it is where
    // that piece goes by reference instead: the peer reads dst).
    bool keep = true;
};

struct OutPart {
    int peer;
    std::vector<OutPiece> pieces;
    // Piece j may go only once the op's ins[dep] has taken piece j - lag
    // (a ring forwards what it received a step earlier; a chain, lag 0,
    // what it just received). dep < 0: every piece is ready at once. Where
    // piece j's bytes are what ins[dep]'s piece j - lag writes (same
    // address and length), the engine may compute them into its send slot
    // as it takes that piece, instead of into dst and then copying.
    int dep = -1;
    size_t lag = 0;
    // And none goes before ins[gate] has taken every piece (< 0: no gate):
    // a phase that starts where another ended (hierarchical all_reduce).
    int gate = -1;
    // Engine state.
    uint64_t seq = 0;
    size_t next = 0;       // pieces handed to the daemon
    size_t delivered = 0;  // pieces the peer's application released
    int pending_slot = -1; // piece `next`, filled, refused with EAGAIN
};

struct InPart {
    int peer;
    std::vector<InPiece> pieces;
    // Piece j may be taken only once the op's ins[after_in] has taken piece
    // j and outs[after_out] has sent piece j (< 0: no such condition):
    // recursive doubling reduces in place, so a step's piece waits for the
    // step before's (the order of the combinations) and for this rank's own
    // piece of the step to have gone (the bytes it overwrites).
    int after_in = -1;
    int after_out = -1;
    // And none is taken before ins[gate] has taken every piece (< 0: none).
    int gate = -1;
    // The received bytes are the left operand: dst = in (op) a. Every rank
    // of a pair then computes lower rank's (op) higher rank's, bit for bit
    // alike, even for NaNs' payloads and min/max of signed zeros.
    bool in_left = false;
    // Engine state.
    uint64_t seq = 0;
    size_t next = 0;       // pieces taken
};

struct Op {
    Kind kind;
    int64_t tag = 0;
    DType dtype = DType::F32;
    RedOp red = RedOp::Sum;
    std::vector<OutPart> outs;
    std::vector<InPart> ins;
    std::function<void()> on_success; // post-processing (the average's division, ...)
    std::function<void(std::exception_ptr)> on_done; // nullptr: success
    std::string what;      // for messages: "all_reduce of 4096 x float32"
    std::chrono::steady_clock::time_point deadline{};

    bool done() const {
        for (const auto& o : outs)
            if (o.delivered < o.pieces.size())
                return false;
        for (const auto& i : ins)
            if (i.next < i.pieces.size())
                return false;
        return true;
    }
};

} // namespace tailmark::torch_backend
