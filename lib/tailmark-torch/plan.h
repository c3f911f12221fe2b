// What every process_group*.cc shares: the checks that turn a wrong tensor
// into a RuntimeError naming the operation, and the cutting of a tensor's
// bytes into pieces of an Op's plan.
#pragma once

#include "op.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <memory>
#include <string>
#include <vector>

namespace tailmark::torch_backend {

inline DType dtype_of(const at::Tensor& t, const char* op) {
    switch (t.scalar_type()) {
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    case at::kBFloat16: return DType::BF16;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    case at::kByte: return DType::U8; // all_gather_object and the other *_object collectives
    default:
        TORCH_CHECK(false, "tailmark: ", op, ": dtype ", t.scalar_type(),
                    " is not supported (float32, float64, bfloat16, int32, int64, uint8)");
    }
}

inline const char* dtype_name(DType d) {
    switch (d) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    }
    return "?";
}

inline void check_tensor(const at::Tensor& t, const char* op) {
    TORCH_CHECK(t.device().is_cpu(), "tailmark: ", op, ": tensors must be on the CPU (got ", t.device(), ")");
    TORCH_CHECK(t.is_contiguous(), "tailmark: ", op, ": tensors must be contiguous");
    (void)dtype_of(t, op);
}

inline const at::Tensor& single(const std::vector<at::Tensor>& v, const char* op) {
    TORCH_CHECK(v.size() == 1, "tailmark: ", op, ": one tensor per call (got ", v.size(), ")");
    check_tensor(v[0], op);
    return v[0];
}

// Every tensor of a list checked, and of `like`'s dtype (and size, unless
// any_size: all_to_all's lists differ per peer).
inline void check_list(const std::vector<at::Tensor>& v, size_t n, const at::Tensor& like, const char* op,
                       const char* what, bool any_size = false) {
    TORCH_CHECK(v.size() == n, "tailmark: ", op, ": ", what, " must be a list of world_size (", n,
                ") tensors (got ", v.size(), ")");
    for (const auto& x : v) {
        check_tensor(x, op);
        TORCH_CHECK(x.scalar_type() == like.scalar_type(), "tailmark: ", op, ": ", what, " must be of dtype ",
                    like.scalar_type(), " (got ", x.scalar_type(), ")");
        TORCH_CHECK(any_size || x.numel() == like.numel(), "tailmark: ", op, ": ", what, " must have ",
                    like.numel(), " elements each (got ", x.numel(), ")");
    }
}

inline RedOp red_of(const c10d::ReduceOp& r, const char* op) {
    switch (r.op_) {
    case c10d::ReduceOp::SUM: return RedOp::Sum;
    case c10d::ReduceOp::AVG: return RedOp::Avg;
    case c10d::ReduceOp::MIN: return RedOp::Min;
    case c10d::ReduceOp::MAX: return RedOp::Max;
    default: TORCH_CHECK(false, "tailmark: ", op, ": only sum, avg, min and max reduce");
    }
}

inline std::string describe(const char* op, const at::Tensor& t, DType d) {
    return std::string(op) + " of " + std::to_string(t.numel()) + " x " + dtype_name(d);
}

// A new op of kind k on tensor t: its dtype (refused if not one of ours) and
// its name for messages ("all_reduce of 4096 x float32").
inline std::unique_ptr<Op> make_op(Kind k, const at::Tensor& t, const char* name) {
    auto op = std::make_unique<Op>();
    op->kind = k;
    op->dtype = dtype_of(t, name);
    op->what = describe(name, t, op->dtype);
    return op;
}

// A collective's root, checked against the world.
inline int root_of(int64_t root, int n, const char* op) {
    TORCH_CHECK(root >= 0 && root < n, "tailmark: ", op, ": root ", root, " is not a rank");
    return static_cast<int>(root);
}

inline unsigned char* bytes(const at::Tensor& t) { return static_cast<unsigned char*>(t.data_ptr()); }

// Two tensors' bytes overlap: an exchange that reads one while it writes
// the other would send what it already received.
inline bool overlaps(const at::Tensor& a, const at::Tensor& b) {
    if (a.numel() == 0 || b.numel() == 0)
        return false;
    const unsigned char *a0 = bytes(a), *b0 = bytes(b);
    return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// Elements [c*n/parts, (c+1)*n/parts): balanced, each at most one apart.
inline size_t split_at(size_t n, size_t parts, size_t c) {
    return static_cast<size_t>((__uint128_t)n * c / parts);
}

// N elements of es bytes at base, as P pieces to send, or to copy into.
// fixed: the caller's input, unwritten while the op runs (OutPiece::fixed).
inline std::vector<OutPiece> out_pieces(const unsigned char* base, size_t N, size_t es, size_t P,
                                        bool fixed = false) {
    std::vector<OutPiece> v;
    for (size_t k = 0; k < P; k++) {
        const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
        v.push_back({base + a * es, (b - a) * es, fixed});
    }
    return v;
}
// A part that a chain or ring forwards, marked OutPiece::fixed: every
// piece's bytes, once written by the take it waits for (dep), are written
// again, if ever, only by a take that the peer's own take of the piece led
// to: the ring's gather half reaches this rank's chunk only through that
// peer, a chain's way down only after its way up. So a peer of this host
// may read them in place. Not recursive doubling: both ranks of a pair
// send, then each combines into the bytes it sent, unordered with the
// other's read of them.
inline OutPart fixed_forward(OutPart part) {
    for (auto& p : part.pieces)
        p.fixed = true;
    return part;
}

inline std::vector<InPiece> in_pieces(unsigned char* base, size_t N, size_t es, size_t P) {
    std::vector<InPiece> v;
    for (size_t k = 0; k < P; k++) {
        const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
        v.push_back({base + a * es, nullptr, (b - a) * es});
    }
    return v;
}

} // namespace tailmark::torch_backend
