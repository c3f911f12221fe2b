// What the backend puts in front of each message's bytes: which operation
// (per direction of a pair of ranks, in issue order), which piece of it and
// how long. The receiver checks all of it, so ranks that call different
// collectives, or one with different sizes, get an error instead of each
// other's bytes.
#pragma once

#include <cstdint>

namespace tailmark::torch_backend {

// New kinds go at the end: the values are on the wire.
enum class Kind : uint8_t {
    Hello = 1, Send, Broadcast, AllReduce, AllGather, ReduceScatter, Barrier, Reduce, Gather, Scatter, AllToAll,
    AllReduceRd, // all_reduce by recursive doubling: ranks that chose different algorithms get an error
    Abort,       // a rank gave up on the group (engine_abort.cc): index names the rank that failed first,
                 // the payload (bytes long) says why
    AllReduceHier // all_reduce within each host, across hosts, within each host again
};

inline const char* kind_name(Kind k) {
    switch (k) {
    case Kind::Hello: return "hello";
    case Kind::Send: return "send";
    case Kind::Broadcast: return "broadcast";
    case Kind::AllReduce: return "all_reduce";
    case Kind::AllGather: return "all_gather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Barrier: return "barrier";
    case Kind::Reduce: return "reduce";
    case Kind::Gather: return "gather";
    case Kind::Scatter: return "scatter";
    case Kind::AllToAll: return "all_to_all";
    case Kind::AllReduceRd: return "all_reduce (recursive doubling)";
    case Kind::Abort: return "abort";
    case Kind::AllReduceHier: return "all_reduce (hierarchical)";
    }
    return "?";
}

// 64 bytes, so the payload after it keeps the slot's 64-byte alignment.
struct PieceHeader {
    static constexpr uint32_t kMagic = 0x544d5054; // "TMPT"
    uint32_t magic;
    uint8_t kind;      // Kind
    uint8_t pad[3];
    uint64_t seq;      // the op's number on this sender -> receiver stream (Hello: 0)
    uint32_t index;    // this piece's number within the op on this stream (Hello: the rank)
    uint32_t count;    // pieces of the op on this stream (Hello: the world size)
    uint64_t bytes;    // payload after the header
    int64_t tag;       // send/recv tag; 0 for collectives
    uint64_t ref;      // 0: the payload follows; else it is at offset ref - 1 of the sender's segment
                       // (a rank of the same host: Mesh::direct), or with kHeapRef set, of its
                       // TensorHeap (the tensor itself), and the message is this header alone
    uint64_t reserved[2];
};
static_assert(sizeof(PieceHeader) == 64);
inline constexpr uint64_t kHeapRef = 1ull << 62; // in ref - 1: an offset in the sender's TensorHeap

} // namespace tailmark::torch_backend
