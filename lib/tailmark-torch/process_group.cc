#include "process_group.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tailmark::torch_backend {

namespace {

DType dtype_of(const at::Tensor& t, const char* op) {
    switch (t.scalar_type()) {
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    case at::kBFloat16: return DType::BF16;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    default:
        TORCH_CHECK(false, "tailmark: ", op, ": dtype ", t.scalar_type(),
                    " is not supported (float32, float64, bfloat16, int32, int64)");
    }
}

const char* dtype_name(DType d) {
    switch (d) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    }
    return "?";
}

void check_tensor(const at::Tensor& t, const char* op) {
    TORCH_CHECK(t.device().is_cpu(), "tailmark: ", op, ": tensors must be on the CPU");
    TORCH_CHECK(t.is_contiguous(), "tailmark: ", op, ": tensors must be contiguous");
    (void)dtype_of(t, op);
}

const at::Tensor& single(const std::vector<at::Tensor>& v, const char* op) {
    TORCH_CHECK(v.size() == 1, "tailmark: ", op, ": one tensor per call (got ", v.size(), ")");
    check_tensor(v[0], op);
    return v[0];
}

RedOp red_of(const c10d::ReduceOp& r, const char* op) {
    switch (r.op_) {
    case c10d::ReduceOp::SUM: return RedOp::Sum;
    case c10d::ReduceOp::AVG: return RedOp::Avg;
    case c10d::ReduceOp::MIN: return RedOp::Min;
    case c10d::ReduceOp::MAX: return RedOp::Max;
    default: TORCH_CHECK(false, "tailmark: ", op, ": only sum, avg, min and max reduce");
    }
}

std::string describe(const char* op, const at::Tensor& t, DType d) {
    return std::string(op) + " of " + std::to_string(t.numel()) + " x " + dtype_name(d);
}

unsigned char* bytes(const at::Tensor& t) { return static_cast<unsigned char*>(t.data_ptr()); }

// Elements [c*n/parts, (c+1)*n/parts): balanced, each at most one apart.
size_t split_at(size_t n, size_t parts, size_t c) { return static_cast<size_t>((__uint128_t)n * c / parts); }

// N elements of es bytes at base, as P pieces to send, or to copy into.
std::vector<OutPiece> out_pieces(const unsigned char* base, size_t N, size_t es, size_t P) {
    std::vector<OutPiece> v;
    for (size_t k = 0; k < P; k++) {
        const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
        v.push_back({base + a * es, (b - a) * es});
    }
    return v;
}
std::vector<InPiece> in_pieces(unsigned char* base, size_t N, size_t es, size_t P) {
    std::vector<InPiece> v;
    for (size_t k = 0; k < P; k++) {
        const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
        v.push_back({base + a * es, nullptr, (b - a) * es});
    }
    return v;
}

} // namespace

TailmarkWork::TailmarkWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, int source)
    : c10d::Work(rank, type), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      source_(source) {}

void TailmarkWork::complete(std::exception_ptr ex) {
    // The Work first (wait()), then the future: its callbacks run here, and
    // may issue the next operation.
    finish(ex);
    if (ex)
        future_->setError(ex);
    else
        future_->markCompleted(c10::IValue(outputs_));
}

ProcessGroupTailmark::ProcessGroupTailmark(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                           std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size) {
    MeshOptions mo = MeshOptions::from_env();
    mo.timeout = timeout;
    Rendezvous rv;
    rv.set = [&](const std::string& k, const std::string& v) {
        store->set(k, std::vector<uint8_t>(v.begin(), v.end()));
    };
    rv.get = [&](const std::string& k) {
        const std::vector<uint8_t> v = store->get(k);
        return std::string(v.begin(), v.end());
    };
    engine_ = std::make_unique<Engine>(std::make_unique<Mesh>(rank, size, rv, mo), timeout);
}

ProcessGroupTailmark::~ProcessGroupTailmark() = default;

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroupTailmark::create(const c10::intrusive_ptr<c10d::Store>& store,
                                                                    int rank, int size,
                                                                    std::chrono::milliseconds timeout) {
    return c10::make_intrusive<ProcessGroupTailmark>(store, rank, size, timeout);
}

size_t ProcessGroupTailmark::pieces_for(size_t max_elems, size_t elem) const {
    const size_t per = std::max<size_t>(1, engine_->mesh().payload() / elem);
    return std::max<size_t>(1, (max_elems + per - 1) / per);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::run(std::unique_ptr<Op> op, c10d::OpType type,
                                                         std::vector<at::Tensor> outputs,
                                                         std::vector<at::Tensor> keep, int source) {
    auto work = c10::make_intrusive<TailmarkWork>(getRank(), type, std::move(outputs), source);
    // The op holds the Work and the tensors it reads or writes until it ends.
    op->on_done = [work, keep = std::move(keep)](std::exception_ptr ex) { work->complete(ex); };
    engine_->submit(std::move(op));
    return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
    const at::Tensor& t = single(tensors, "all_reduce");
    const int n = getSize(), r = getRank();
    auto op = std::make_unique<Op>();
    op->kind = Kind::AllReduce;
    op->dtype = dtype_of(t, "all_reduce");
    op->red = red_of(opts.reduceOp, "all_reduce");
    op->what = describe("all_reduce", t, op->dtype);
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    unsigned char* base = bytes(t);
    if (n > 1) {
        // The ring: 2(n-1) steps; in step s this rank sends chunk r-s and
        // takes chunk r-s-1 (summed in the first n-1 steps, copied after).
        // Each chunk goes as P pieces of at most a message's payload, and
        // piece k of a step goes once piece k of the step before arrived.
        const size_t P = pieces_for(split_at(N, n, 1) + 1, es);
        OutPart out{(r + 1) % n, {}, 0, P};
        InPart in{(r - 1 + n) % n, {}};
        auto piece = [&](int c, size_t k, size_t* off, size_t* len) {
            const size_t c0 = split_at(N, n, c), m = split_at(N, n, c + 1) - c0;
            const size_t a = split_at(m, P, k), b = split_at(m, P, k + 1);
            *off = (c0 + a) * es;
            *len = (b - a) * es;
        };
        for (int s = 0; s < 2 * (n - 1); s++) {
            const int cs = ((r - s) % n + n) % n, cr = ((r - s - 1) % n + n) % n;
            for (size_t k = 0; k < P; k++) {
                size_t off, len;
                piece(cs, k, &off, &len);
                out.pieces.push_back({base + off, len});
                piece(cr, k, &off, &len);
                // The gather half's pieces are copies (a == nullptr).
                in.pieces.push_back({base + off, s < n - 1 ? base + off : nullptr, len});
            }
        }
        op->outs.push_back(std::move(out));
        op->ins.push_back(std::move(in));
    }
    if (op->red == RedOp::Avg) {
        const DType d = op->dtype;
        op->on_success = [d, base, N, es, n] { divide(d, base, N * es, n); };
    }
    return run(std::move(op), c10d::OpType::ALLREDUCE, tensors, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
    const at::Tensor& t = single(tensors, "broadcast");
    const int n = getSize(), r = getRank(), root = static_cast<int>(opts.rootRank);
    TORCH_CHECK(root >= 0 && root < n, "tailmark: broadcast: root ", root, " is not a rank");
    auto op = std::make_unique<Op>();
    op->kind = Kind::Broadcast;
    op->dtype = dtype_of(t, "broadcast");
    op->what = describe("broadcast", t, op->dtype);
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    unsigned char* base = bytes(t);
    if (n > 1) {
        // A chain from the root in rank order: each rank forwards a piece
        // as soon as it has it, so the root sends the tensor once.
        const size_t P = pieces_for(N, es);
        const int pos = (r - root + n) % n;
        if (pos != 0)
            op->ins.push_back(InPart{(r - 1 + n) % n, in_pieces(base, N, es, P)});
        if (pos != n - 1)
            op->outs.push_back(OutPart{(r + 1) % n, out_pieces(base, N, es, P), pos != 0 ? 0 : -1, 0});
    }
    return run(std::move(op), c10d::OpType::BROADCAST, tensors, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions&) {
    const at::Tensor& t = single(inputs, "all_gather");
    const int n = getSize(), r = getRank();
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(n),
                "tailmark: all_gather: one list of world_size output tensors");
    for (const auto& o : outputs[0]) {
        check_tensor(o, "all_gather");
        TORCH_CHECK(o.scalar_type() == t.scalar_type() && o.numel() == t.numel(),
                    "tailmark: all_gather: every output must match the input's dtype and size");
    }
    auto op = std::make_unique<Op>();
    op->kind = Kind::AllGather;
    op->dtype = dtype_of(t, "all_gather");
    op->what = describe("all_gather", t, op->dtype);
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    std::vector<at::Tensor>& outs = outputs[0];
    if (bytes(outs[r]) != bytes(t) && N != 0)
        std::memcpy(bytes(outs[r]), bytes(t), N * es);
    if (n > 1) {
        const size_t P = pieces_for(N, es);
        OutPart out{(r + 1) % n, {}, 0, P};
        InPart in{(r - 1 + n) % n, {}};
        for (int s = 0; s < n - 1; s++) {
            const int cs = ((r - s) % n + n) % n, cr = ((r - s - 1) % n + n) % n;
            for (size_t k = 0; k < P; k++) {
                const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
                out.pieces.push_back({bytes(outs[cs]) + a * es, (b - a) * es});
                in.pieces.push_back({bytes(outs[cr]) + a * es, nullptr, (b - a) * es});
            }
        }
        op->outs.push_back(std::move(out));
        op->ins.push_back(std::move(in));
    }
    return run(std::move(op), c10d::OpType::ALLGATHER, outs, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                                    const c10d::ReduceScatterOptions& opts) {
    const at::Tensor& y = single(outputs, "reduce_scatter");
    const int n = getSize(), r = getRank();
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(n),
                "tailmark: reduce_scatter: one list of world_size input tensors");
    for (const auto& i : inputs[0]) {
        check_tensor(i, "reduce_scatter");
        TORCH_CHECK(i.scalar_type() == y.scalar_type() && i.numel() == y.numel(),
                    "tailmark: reduce_scatter: every input must match the output's dtype and size");
    }
    auto op = std::make_unique<Op>();
    op->kind = Kind::ReduceScatter;
    op->dtype = dtype_of(y, "reduce_scatter");
    op->red = red_of(opts.reduceOp, "reduce_scatter");
    op->what = describe("reduce_scatter", y, op->dtype);
    const size_t es = y.element_size(), N = static_cast<size_t>(y.numel());
    std::vector<at::Tensor> keep = inputs[0];
    unsigned char* ybase = bytes(y);
    if (n == 1) {
        if (N != 0 && bytes(inputs[0][0]) != ybase)
            std::memcpy(ybase, bytes(inputs[0][0]), N * es);
    } else {
        // A ring over the chunks shifted by one, so that the chunk this rank
        // completes last is its own: step s sends chunk r-s-1 and takes
        // chunk r-s-2, adding this rank's input to what arrives. The inputs
        // stay as they were; partial sums go to scratch (n-2 chunks).
        at::Tensor scratch = at::empty({static_cast<int64_t>(N) * std::max(1, n - 2)}, y.options());
        keep.push_back(scratch);
        std::vector<unsigned char*> partial(n, nullptr);
        int used = 0;
        for (int s = 0; s < n - 1; s++) {
            const int cr = ((r - s - 2) % n + n) % n;
            partial[cr] = cr == r ? ybase : bytes(scratch) + static_cast<size_t>(used++) * N * es;
        }
        const size_t P = pieces_for(N, es);
        OutPart out{(r + 1) % n, {}, 0, P};
        InPart in{(r - 1 + n) % n, {}};
        for (int s = 0; s < n - 1; s++) {
            const int cs = ((r - s - 1) % n + n) % n, cr = ((r - s - 2) % n + n) % n;
            const unsigned char* src = s == 0 ? bytes(inputs[0][cs]) : partial[cs];
            for (size_t k = 0; k < P; k++) {
                const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
                out.pieces.push_back({src + a * es, (b - a) * es});
                in.pieces.push_back({partial[cr] + a * es, bytes(inputs[0][cr]) + a * es, (b - a) * es});
            }
        }
        op->outs.push_back(std::move(out));
        op->ins.push_back(std::move(in));
    }
    if (op->red == RedOp::Avg) {
        const DType d = op->dtype;
        op->on_success = [d, ybase, N, es, n] { divide(d, ybase, N * es, n); };
    }
    return run(std::move(op), c10d::OpType::REDUCE_SCATTER, outputs, std::move(keep));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
    const at::Tensor& t = single(tensors, "send");
    TORCH_CHECK(dst >= 0 && dst < getSize() && dst != getRank(), "tailmark: send: ", dst, " is not another rank");
    auto op = std::make_unique<Op>();
    op->kind = Kind::Send;
    op->tag = tag;
    op->dtype = dtype_of(t, "send");
    op->what = describe("send", t, op->dtype) + " to rank " + std::to_string(dst);
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    const size_t P = pieces_for(N, es);
    op->outs.push_back(OutPart{dst, out_pieces(bytes(t), N, es, P)});
    return run(std::move(op), c10d::OpType::SEND, {}, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
    const at::Tensor& t = single(tensors, "recv");
    TORCH_CHECK(src >= 0 && src < getSize() && src != getRank(), "tailmark: recv: ", src, " is not another rank");
    auto op = std::make_unique<Op>();
    op->kind = Kind::Send;
    op->tag = tag;
    op->dtype = dtype_of(t, "recv");
    op->what = describe("recv", t, op->dtype) + " from rank " + std::to_string(src);
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    const size_t P = pieces_for(N, es);
    op->ins.push_back(InPart{src, in_pieces(bytes(t), N, es, P)});
    return run(std::move(op), c10d::OpType::RECV, tensors, {}, src);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::barrier(const c10d::BarrierOptions&) {
    auto op = std::make_unique<Op>();
    op->kind = Kind::Barrier;
    op->what = "barrier";
    for (int p = 0; p < getSize(); p++) {
        if (p == getRank())
            continue;
        op->outs.push_back(OutPart{p, {OutPiece{nullptr, 0}}});
        op->ins.push_back(InPart{p, {InPiece{nullptr, nullptr, 0}}});
    }
    return run(std::move(op), c10d::OpType::BARRIER, {}, {});
}

} // namespace tailmark::torch_backend
