// The collectives that exchange directly between pairs of ranks: gather and
// scatter (the root and each other rank), all_to_all and all_to_all_single
// (every pair, both ways at once). No forwarding: each rank's part on a
// stream is one tensor's bytes, as pieces of at most a message's payload.
#include "plan.h"
#include "process_group.h"

#include <cstring>

namespace tailmark::torch_backend {

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::GatherOptions& opts) {
    const at::Tensor& t = single(inputs, "gather");
    const int n = getSize(), r = getRank(), root = root_of(opts.rootRank, n, "gather");
    auto op = make_op(Kind::Gather, t, "gather");
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    const size_t P = pieces_for(N, es);
    std::vector<at::Tensor> result;
    if (r == root) {
        TORCH_CHECK(outputs.size() == 1, "tailmark: gather: the root needs one gather_list of world_size tensors");
        check_list(outputs[0], n, t, "gather", "gather_list");
        result = outputs[0];
        if (N != 0 && bytes(result[r]) != bytes(t))
            std::memcpy(bytes(result[r]), bytes(t), N * es);
        for (int p = 0; p < n; p++)
            if (p != r)
                op->ins.push_back(InPart{p, in_pieces(bytes(result[p]), N, es, P)});
    } else {
        TORCH_CHECK(outputs.empty(), "tailmark: gather: only the root has a gather_list");
        op->outs.push_back(OutPart{root, out_pieces(bytes(t), N, es, P, true)});
    }
    // The future's value: the gathered list at the root, nothing elsewhere (as gloo's).
    return run(std::move(op), c10d::OpType::GATHER, std::move(result), inputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ScatterOptions& opts) {
    const at::Tensor& y = single(outputs, "scatter");
    const int n = getSize(), r = getRank(), root = root_of(opts.rootRank, n, "scatter");
    auto op = make_op(Kind::Scatter, y, "scatter");
    const size_t es = y.element_size(), N = static_cast<size_t>(y.numel());
    const size_t P = pieces_for(N, es);
    std::vector<at::Tensor> keep;
    if (r == root) {
        TORCH_CHECK(inputs.size() == 1, "tailmark: scatter: the root needs one scatter_list of world_size tensors");
        check_list(inputs[0], n, y, "scatter", "scatter_list");
        keep = inputs[0];
        if (N != 0 && bytes(keep[r]) != bytes(y))
            std::memcpy(bytes(y), bytes(keep[r]), N * es);
        for (int p = 0; p < n; p++)
            if (p != r)
                op->outs.push_back(OutPart{p, out_pieces(bytes(keep[p]), N, es, P, true)});
    } else {
        TORCH_CHECK(inputs.empty(), "tailmark: scatter: only the root has a scatter_list");
        op->ins.push_back(InPart{root, in_pieces(bytes(y), N, es, P)});
    }
    return run(std::move(op), c10d::OpType::SCATTER, outputs, std::move(keep));
}

void ProcessGroupTailmark::exchange(Op& op, const std::vector<std::pair<const unsigned char*, size_t>>& send,
                                    const std::vector<std::pair<unsigned char*, size_t>>& recv, size_t es) const {
    const int n = getSize(), r = getRank();
    if (send[r].second != 0 && send[r].first != recv[r].first)
        std::memcpy(recv[r].first, send[r].first, send[r].second);
    // Every pair both ways, even with nothing to say: a 0-byte piece still
    // carries the header, so the ranks' split sizes are checked against
    // each other (a mismatch is an error naming both, never a hang).
    for (int i = 1; i < n; i++) {
        const int p = (r + i) % n;
        const size_t ns = send[p].second / es, nr = recv[p].second / es;
        op.outs.push_back(OutPart{p, out_pieces(send[p].first, ns, es, pieces_for(ns, es), true)});
        op.ins.push_back(InPart{p, in_pieces(recv[p].first, nr, es, pieces_for(nr, es))});
    }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::alltoall(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllToAllOptions&) {
    const char* name = "all_to_all";
    const int n = getSize(), r = getRank();
    TORCH_CHECK(!inputs.empty(), "tailmark: all_to_all: input_tensor_list must be a list of world_size (", n,
                ") tensors (got 0)");
    check_tensor(inputs[0], name);
    check_list(inputs, n, inputs[0], name, "input_tensor_list", true);
    check_list(outputs, n, inputs[0], name, "output_tensor_list", true);
    TORCH_CHECK(inputs[r].numel() == outputs[r].numel(), "tailmark: all_to_all: this rank's own input (",
                inputs[r].numel(), " elements) and output (", outputs[r].numel(), ") differ");
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        total += inputs[i].numel();
        for (int j = 0; j < n; j++)
            TORCH_CHECK(!overlaps(outputs[i], inputs[j]) || (i == r && j == r && bytes(outputs[i]) == bytes(inputs[j])),
                        "tailmark: all_to_all: output ", i, " overlaps input ", j);
    }
    auto op = std::make_unique<Op>();
    op->kind = Kind::AllToAll;
    op->dtype = dtype_of(inputs[0], name);
    op->what = std::string(name) + " of " + std::to_string(total) + " x " + dtype_name(op->dtype);
    std::vector<std::pair<const unsigned char*, size_t>> send;
    std::vector<std::pair<unsigned char*, size_t>> recv;
    for (int i = 0; i < n; i++) {
        send.emplace_back(bytes(inputs[i]), inputs[i].nbytes());
        recv.emplace_back(bytes(outputs[i]), outputs[i].nbytes());
    }
    exchange(*op, send, recv, inputs[0].element_size());
    return run(std::move(op), c10d::OpType::ALLTOALL, outputs, inputs);
}

namespace {
// all_to_all_single's splits of t along dim 0 as (first element, elements)
// per rank: split_sizes rows each, or size(0) / n rows each when empty.
std::vector<std::pair<size_t, size_t>> splits_of(const at::Tensor& t, const std::vector<int64_t>& split_sizes,
                                                 int n, const char* which) {
    const char* name = "all_to_all_single";
    TORCH_CHECK(t.dim() >= 1, "tailmark: ", name, ": the ", which, " needs at least one dimension");
    const int64_t rows = t.size(0);
    const size_t row = rows != 0 ? static_cast<size_t>(t.numel() / rows) : 0;
    std::vector<int64_t> s = split_sizes;
    if (s.empty()) {
        TORCH_CHECK(rows % n == 0, "tailmark: ", name, ": the ", which, "'s dim 0 (", rows,
                    ") does not divide by world_size (", n, "): give split sizes");
        s.assign(n, rows / n);
    }
    TORCH_CHECK(s.size() == static_cast<size_t>(n), "tailmark: ", name, ": ", s.size(), " ", which,
                " split sizes for world_size ", n);
    std::vector<std::pair<size_t, size_t>> v;
    int64_t at = 0;
    for (int64_t k : s) {
        TORCH_CHECK(k >= 0, "tailmark: ", name, ": a negative ", which, " split size (", k, ")");
        v.emplace_back(static_cast<size_t>(at) * row, static_cast<size_t>(k) * row);
        at += k;
    }
    TORCH_CHECK(at == rows, "tailmark: ", name, ": the ", which, " split sizes add up to ", at, ", not its dim 0 (",
                rows, ")");
    return v;
}
} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                   std::vector<int64_t>& outputSplitSizes,
                                                                   std::vector<int64_t>& inputSplitSizes,
                                                                   const c10d::AllToAllOptions&) {
    const char* name = "all_to_all_single";
    const int n = getSize(), r = getRank();
    check_tensor(input, name);
    check_tensor(output, name);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "tailmark: ", name, ": the output must be of dtype ",
                input.scalar_type(), " (got ", output.scalar_type(), ")");
    TORCH_CHECK(!overlaps(output, input), "tailmark: ", name, ": the output overlaps the input");
    const auto in = splits_of(input, inputSplitSizes, n, "input");
    const auto out = splits_of(output, outputSplitSizes, n, "output");
    TORCH_CHECK(in[r].second == out[r].second, "tailmark: ", name, ": this rank's own input split (", in[r].second,
                " elements) and output split (", out[r].second, ") differ");
    auto op = make_op(Kind::AllToAll, input, name); // all_to_all's plan, on the wire too
    const size_t es = input.element_size();
    std::vector<std::pair<const unsigned char*, size_t>> send;
    std::vector<std::pair<unsigned char*, size_t>> recv;
    for (int i = 0; i < n; i++) {
        send.emplace_back(bytes(input) + in[i].first * es, in[i].second * es);
        recv.emplace_back(bytes(output) + out[i].first * es, out[i].second * es);
    }
    exchange(*op, send, recv, es);
    return run(std::move(op), c10d::OpType::ALLTOALL_BASE, {output}, {input});
}

} // namespace tailmark::torch_backend
