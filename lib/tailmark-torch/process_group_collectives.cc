// The collectives that run as a ring or a chain: all_reduce, broadcast,
// reduce, all_gather and reduce_scatter (with their flat forms,
// all_gather_into_tensor and reduce_scatter_tensor). Each is only a plan of
// pieces (op.h) that the Engine moves.
#include "plan.h"
#include "process_group.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tailmark::torch_backend {

AllreduceAlgo allreduce_algo_of(const std::string& name) {
    if (name == "auto")
        return AllreduceAlgo::Auto;
    if (name == "ring")
        return AllreduceAlgo::Ring;
    if (name == "rd")
        return AllreduceAlgo::Rd;
    if (name == "hier")
        return AllreduceAlgo::Hier;
    throw std::invalid_argument("all_reduce's algorithm is ring, rd (recursive doubling), hier (hierarchical) or "
                                "auto, not '" + name + "'");
}

const char* allreduce_algo_name(AllreduceAlgo a) {
    switch (a) {
    case AllreduceAlgo::Auto: return "auto";
    case AllreduceAlgo::Ring: return "ring";
    case AllreduceAlgo::Rd: return "rd";
    case AllreduceAlgo::Hier: return "hier";
    }
    return "?";
}

size_t rd_max_bytes(int n) {
    (void)n;
    return size_t{64} << 10;
}

void ProcessGroupTailmark::rd_all_reduce(Op& op, unsigned char* base, size_t N, size_t es) const {
    const int n = getSize(), r = getRank();
    // m: the largest power of two <= n. Ranks m.. (the extra ones) fold in
    // first: rank m + i sends its tensor to rank i, which combines it with
    // its own, and takes the result from rank i last. Ranks 0..m-1 exchange
    // their whole tensor with r ^ 1, r ^ 2, ..., r ^ m/2, combining what
    // arrives in place, the lower rank's operand on the left: after the
    // step with r ^ d, the ranks of each aligned block of 2d hold the same
    // bits. Every step is P pieces of at most a message's payload, and
    // piece j of a step goes once piece j of the step before was combined,
    // so the steps pipeline piece by piece as the ring's do.
    int m = 1;
    while (m * 2 <= n)
        m *= 2;
    const size_t P = pieces_for(N, es);
    if (r >= m) {
        op.outs.push_back(OutPart{r - m, out_pieces(base, N, es, P)});
        InPart in{r - m, in_pieces(base, N, es, P)};
        in.after_out = 0; // the result overwrites what this rank sends
        op.ins.push_back(std::move(in));
        return;
    }
    auto combine = [&](int peer, int after_in, int after_out) {
        InPart in{peer, in_pieces(base, N, es, P)};
        for (auto& p : in.pieces)
            p.a = p.dst; // dst = dst (op) in, in place
        in.after_in = after_in;
        in.after_out = after_out;
        in.in_left = peer < r;
        op.ins.push_back(std::move(in));
        return static_cast<int>(op.ins.size()) - 1;
    };
    int prev = -1; // the in part whose piece j a step's piece j waits for
    if (r + m < n)
        prev = combine(r + m, -1, -1);
    for (int d = 1; d < m; d <<= 1) {
        op.outs.push_back(OutPart{r ^ d, out_pieces(base, N, es, P), prev, 0});
        prev = combine(r ^ d, prev, static_cast<int>(op.outs.size()) - 1);
    }
    if (r + m < n)
        op.outs.push_back(OutPart{r + m, out_pieces(base, N, es, P), prev, 0});
}

int ProcessGroupTailmark::ring_all_reduce(Op& op, const std::vector<int>& ring, int me, unsigned char* base,
                                          size_t N, size_t es) const {
    const int n = static_cast<int>(ring.size()), r = me;
    if (n < 2)
        return -1;
    // 2(n-1) steps; in step s this rank sends chunk r-s and takes chunk
    // r-s-1 (summed in the first n-1 steps, copied after). Each chunk goes
    // as P pieces of at most a message's payload, and piece k of a step
    // goes once piece k of the step before arrived.
    const size_t P = pieces_for(split_at(N, n, 1) + 1, es);
    const int in_at = static_cast<int>(op.ins.size());
    OutPart out{ring[(r + 1) % n], {}, in_at, P};
    InPart in{ring[(r - 1 + n) % n], {}};
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
            // The gather half's pieces are copies (a == nullptr). A partial
            // sum before the last only goes on: the gather half overwrites
            // it here.
            in.pieces.push_back({base + off, s < n - 1 ? base + off : nullptr, len, s >= n - 2});
        }
    }
    op.outs.push_back(fixed_forward(std::move(out)));
    op.ins.push_back(std::move(in));
    return in_at;
}

bool ProcessGroupTailmark::hosts_shared() const {
    const Mesh& m = engine_->mesh();
    return m.firsts().size() > 1 && m.firsts().size() < static_cast<size_t>(m.size());
}

void ProcessGroupTailmark::hier_all_reduce(Op& op, unsigned char* base, size_t N, size_t es) const {
    // 1. Within the host, through the daemon's memory: a chain from its
    //    last rank to its first (local[0]), each adding what arrives into
    //    its own tensor and passing it on, piece by piece.
    // 2. Across hosts: the ring between the hosts' first ranks, over the
    //    host sums, once the chain's every piece has arrived.
    // 3. Within the host again: a chain from local[0] back down, each rank
    //    copying what arrives over its tensor (once it has sent that piece
    //    up) and passing it on. Every rank ends with local[0]'s bits, and
    //    local[0] with the ring's, alike on every host.
    const std::vector<int>& local = engine_->mesh().local();
    const std::vector<int>& firsts = engine_->mesh().firsts();
    const int L = static_cast<int>(local.size());
    const int li = static_cast<int>(std::find(local.begin(), local.end(), getRank()) - local.begin());
    const size_t P = pieces_for(N, es);
    int up_in = -1, up_out = -1, down_in = -1;
    if (li + 1 < L) {
        InPart in{local[li + 1], in_pieces(base, N, es, P)};
        for (auto& p : in.pieces) {
            p.a = p.dst; // dst = dst (op) in, in place
            p.keep = li == 0; // below the first rank the chain down overwrites it
        }
        op.ins.push_back(std::move(in));
        up_in = static_cast<int>(op.ins.size()) - 1;
    }
    if (li > 0) {
        op.outs.push_back(fixed_forward(OutPart{local[li - 1], out_pieces(base, N, es, P), up_in, 0}));
        up_out = static_cast<int>(op.outs.size()) - 1;
        InPart in{local[li - 1], in_pieces(base, N, es, P)};
        in.after_out = up_out; // a piece is overwritten once it went up
        op.ins.push_back(std::move(in));
        down_in = static_cast<int>(op.ins.size()) - 1;
    } else {
        const size_t outs0 = op.outs.size();
        const int me = static_cast<int>(std::find(firsts.begin(), firsts.end(), getRank()) - firsts.begin());
        const int ring_in = ring_all_reduce(op, firsts, me, base, N, es);
        if (ring_in >= 0) { // the host's sum first
            op.outs[outs0].gate = up_in;
            op.ins[ring_in].gate = up_in;
        }
        down_in = ring_in >= 0 ? ring_in : up_in; // complete: the whole result is here
    }
    if (li + 1 < L) {
        OutPart down{local[li + 1], out_pieces(base, N, es, P)};
        if (li > 0) {
            down.dep = down_in; // forwarded as it arrives
        } else {
            down.gate = down_in;
        }
        op.outs.push_back(fixed_forward(std::move(down)));
    }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
    const at::Tensor& t = single(tensors, "all_reduce");
    const int n = getSize(), r = getRank();
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    AllreduceAlgo algo = allreduce_algo();
    if (algo == AllreduceAlgo::Auto)
        algo = N * es <= rd_max_bytes(n) ? AllreduceAlgo::Rd : hosts_shared() ? AllreduceAlgo::Hier
                                                                                : AllreduceAlgo::Ring;
    const Kind kind = algo == AllreduceAlgo::Rd     ? Kind::AllReduceRd
                      : algo == AllreduceAlgo::Hier ? Kind::AllReduceHier
                                                    : Kind::AllReduce;
    auto op = make_op(kind, t, "all_reduce");
    op->red = red_of(opts.reduceOp, "all_reduce");
    unsigned char* base = bytes(t);
    if (n > 1 && algo == AllreduceAlgo::Rd) {
        rd_all_reduce(*op, base, N, es);
    } else if (n > 1 && algo == AllreduceAlgo::Hier) {
        hier_all_reduce(*op, base, N, es);
    } else if (n > 1) {
        std::vector<int> ring(n);
        for (int i = 0; i < n; i++)
            ring[i] = i;
        ring_all_reduce(*op, ring, r, base, N, es);
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
    const int n = getSize(), r = getRank(), root = root_of(opts.rootRank, n, "broadcast");
    auto op = make_op(Kind::Broadcast, t, "broadcast");
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
            op->outs.push_back(fixed_forward(OutPart{(r + 1) % n, out_pieces(base, N, es, P), pos != 0 ? 0 : -1, 0}));
    }
    return run(std::move(op), c10d::OpType::BROADCAST, tensors, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
    const at::Tensor& t = single(tensors, "reduce");
    const int n = getSize(), r = getRank(), root = root_of(opts.rootRank, n, "reduce");
    auto op = make_op(Kind::Reduce, t, "reduce");
    op->red = red_of(opts.reduceOp, "reduce");
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    unsigned char* base = bytes(t);
    std::vector<at::Tensor> keep;
    if (n > 1) {
        // A chain that ends at the root, piece by piece as broadcast's: rank
        // root+1 sends its tensor, each next rank adds its own to what
        // arrives and forwards it, the root adds its own last. Only the
        // root's tensor changes: the ranks between keep their partial sums
        // in scratch (gloo's ring runs in place and leaves partial sums in
        // every rank's tensor; nothing is lost by not doing so).
        const size_t P = pieces_for(N, es);
        const int pos = ((r - root - 1) % n + n) % n; // 0: the chain's head; n - 1: the root
        if (pos == 0) {
            op->outs.push_back(fixed_forward(OutPart{(r + 1) % n, out_pieces(base, N, es, P)}));
        } else {
            unsigned char* dst = base;
            if (pos != n - 1) {
                keep.push_back(at::empty_like(t));
                dst = bytes(keep.back());
            }
            InPart in{(r - 1 + n) % n, {}};
            for (size_t k = 0; k < P; k++) {
                const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
                in.pieces.push_back({dst + a * es, base + a * es, (b - a) * es});
            }
            op->ins.push_back(std::move(in));
            if (pos != n - 1)
                op->outs.push_back(fixed_forward(OutPart{(r + 1) % n, out_pieces(dst, N, es, P), 0, 0}));
        }
    }
    if (op->red == RedOp::Avg && r == root) {
        const DType d = op->dtype;
        op->on_success = [d, base, N, es, n] { divide(d, base, N * es, n); };
    }
    return run(std::move(op), c10d::OpType::REDUCE, tensors, std::move(keep));
}

void ProcessGroupTailmark::ring_all_gather(Op& op, const std::vector<unsigned char*>& chunks, size_t N,
                                           size_t es) const {
    const int n = getSize(), r = getRank();
    if (n == 1)
        return;
    // Step s forwards chunk r-s (this rank's own first), takes chunk r-s-1.
    const size_t P = pieces_for(N, es);
    OutPart out{(r + 1) % n, {}, 0, P};
    InPart in{(r - 1 + n) % n, {}};
    for (int s = 0; s < n - 1; s++) {
        const int cs = ((r - s) % n + n) % n, cr = ((r - s - 1) % n + n) % n;
        for (size_t k = 0; k < P; k++) {
            const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
            out.pieces.push_back({chunks[cs] + a * es, (b - a) * es});
            in.pieces.push_back({chunks[cr] + a * es, nullptr, (b - a) * es});
        }
    }
    op.outs.push_back(fixed_forward(std::move(out)));
    op.ins.push_back(std::move(in));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions&) {
    const at::Tensor& t = single(inputs, "all_gather");
    const int n = getSize(), r = getRank();
    TORCH_CHECK(outputs.size() == 1, "tailmark: all_gather: one list of world_size output tensors");
    check_list(outputs[0], n, t, "all_gather", "tensor_list");
    auto op = make_op(Kind::AllGather, t, "all_gather");
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    std::vector<at::Tensor>& outs = outputs[0];
    if (bytes(outs[r]) != bytes(t) && N != 0)
        std::memcpy(bytes(outs[r]), bytes(t), N * es);
    std::vector<unsigned char*> chunks;
    for (const auto& o : outs)
        chunks.push_back(bytes(o));
    ring_all_gather(*op, chunks, N, es);
    return run(std::move(op), c10d::OpType::ALLGATHER, outs, inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::AllgatherOptions&) {
    const char* name = "all_gather_into_tensor";
    check_tensor(input, name);
    check_tensor(output, name);
    const int n = getSize(), r = getRank();
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tailmark: ", name, ": the output must be of dtype ",
                input.scalar_type(), " (got ", output.scalar_type(), ")");
    TORCH_CHECK(output.numel() == input.numel() * n, "tailmark: ", name, ": the output must have world_size x ",
                input.numel(), " elements (got ", output.numel(), ")");
    const size_t es = input.element_size(), N = static_cast<size_t>(input.numel());
    std::vector<unsigned char*> chunks;
    for (int c = 0; c < n; c++)
        chunks.push_back(bytes(output) + c * N * es);
    // The input may be the output's own chunk (in place), nothing else of it.
    TORCH_CHECK(!overlaps(output, input) || bytes(input) == chunks[r], "tailmark: ", name,
                ": the input overlaps the output other than as this rank's chunk");
    auto op = make_op(Kind::AllGather, input, name); // the same plan as all_gather's, on the wire too
    if (bytes(input) != chunks[r] && N != 0)
        std::memcpy(chunks[r], bytes(input), N * es);
    ring_all_gather(*op, chunks, N, es);
    return run(std::move(op), c10d::OpType::_ALLGATHER_BASE, {output}, {input});
}

void ProcessGroupTailmark::ring_reduce_scatter(Op& op, const std::vector<const unsigned char*>& in,
                                               unsigned char* y, size_t N, size_t es, const at::Tensor& like,
                                               std::vector<at::Tensor>& keep) const {
    const int n = getSize(), r = getRank();
    if (n == 1) {
        if (N != 0 && in[0] != y)
            std::memcpy(y, in[0], N * es);
        return;
    }
    // A ring over the chunks shifted by one, so that the chunk this rank
    // completes last is its own: step s sends chunk r-s-1 and takes
    // chunk r-s-2, adding this rank's input to what arrives. The inputs
    // stay as they were; partial sums go to scratch (n-2 chunks). y may be
    // in[r] itself: that chunk is read only by the last step, which writes it.
    at::Tensor scratch = at::empty({static_cast<int64_t>(N) * std::max(1, n - 2)}, like.options());
    keep.push_back(scratch);
    std::vector<unsigned char*> partial(n, nullptr);
    int used = 0;
    for (int s = 0; s < n - 1; s++) {
        const int cr = ((r - s - 2) % n + n) % n;
        partial[cr] = cr == r ? y : bytes(scratch) + static_cast<size_t>(used++) * N * es;
    }
    const size_t P = pieces_for(N, es);
    OutPart out{(r + 1) % n, {}, 0, P};
    InPart inp{(r - 1 + n) % n, {}};
    for (int s = 0; s < n - 1; s++) {
        const int cs = ((r - s - 1) % n + n) % n, cr = ((r - s - 2) % n + n) % n;
        const unsigned char* src = s == 0 ? in[cs] : partial[cs];
        for (size_t k = 0; k < P; k++) {
            const size_t a = split_at(N, P, k), b = split_at(N, P, k + 1);
            out.pieces.push_back({src + a * es, (b - a) * es});
            // A partial sum in scratch only goes on.
            inp.pieces.push_back({partial[cr] + a * es, in[cr] + a * es, (b - a) * es, cr == r});
        }
    }
    op.outs.push_back(fixed_forward(std::move(out)));
    op.ins.push_back(std::move(inp));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                                    const c10d::ReduceScatterOptions& opts) {
    const at::Tensor& y = single(outputs, "reduce_scatter");
    const int n = getSize();
    TORCH_CHECK(inputs.size() == 1, "tailmark: reduce_scatter: one list of world_size input tensors");
    check_list(inputs[0], n, y, "reduce_scatter", "input_list");
    auto op = make_op(Kind::ReduceScatter, y, "reduce_scatter");
    op->red = red_of(opts.reduceOp, "reduce_scatter");
    const size_t es = y.element_size(), N = static_cast<size_t>(y.numel());
    std::vector<at::Tensor> keep = inputs[0];
    unsigned char* ybase = bytes(y);
    std::vector<const unsigned char*> in;
    for (const auto& i : inputs[0])
        in.push_back(bytes(i));
    ring_reduce_scatter(*op, in, ybase, N, es, y, keep);
    if (op->red == RedOp::Avg) {
        const DType d = op->dtype;
        op->on_success = [d, ybase, N, es, n] { divide(d, ybase, N * es, n); };
    }
    return run(std::move(op), c10d::OpType::REDUCE_SCATTER, outputs, std::move(keep));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                          const c10d::ReduceScatterOptions& opts) {
    const char* name = "reduce_scatter_tensor";
    check_tensor(output, name);
    check_tensor(input, name);
    const int n = getSize(), r = getRank();
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "tailmark: ", name, ": the input must be of dtype ",
                output.scalar_type(), " (got ", input.scalar_type(), ")");
    TORCH_CHECK(input.numel() == output.numel() * n, "tailmark: ", name, ": the input must have world_size x ",
                output.numel(), " elements (got ", input.numel(), ")");
    const size_t es = output.element_size(), N = static_cast<size_t>(output.numel());
    std::vector<const unsigned char*> in;
    for (int c = 0; c < n; c++)
        in.push_back(bytes(input) + c * N * es);
    TORCH_CHECK(!overlaps(output, input) || bytes(output) == in[r], "tailmark: ", name,
                ": the output overlaps the input other than as this rank's chunk");
    auto op = make_op(Kind::ReduceScatter, output, name); // reduce_scatter's plan, on the wire too
    op->red = red_of(opts.reduceOp, name);
    unsigned char* ybase = bytes(output);
    std::vector<at::Tensor> keep{input};
    ring_reduce_scatter(*op, in, ybase, N, es, output, keep);
    if (op->red == RedOp::Avg) {
        const DType d = op->dtype;
        op->on_success = [d, ybase, N, es, n] { divide(d, ybase, N * es, n); };
    }
    return run(std::move(op), c10d::OpType::_REDUCE_SCATTER_BASE, {output}, std::move(keep));
}

} // namespace tailmark::torch_backend
