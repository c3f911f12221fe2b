#include "process_group.h"
#include "plan.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace tailmark::torch_backend {

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
    if (const char* a = std::getenv("TAILMARK_ALLREDUCE"); a != nullptr && *a != '\0') {
        try {
            allreduce_algo_.store(allreduce_algo_of(a));
        } catch (const std::invalid_argument& e) {
            TORCH_CHECK(false, "tailmark: TAILMARK_ALLREDUCE=", a, ": ", e.what());
        }
    }
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

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
    const at::Tensor& t = single(tensors, "send");
    TORCH_CHECK(dst >= 0 && dst < getSize() && dst != getRank(), "tailmark: send: ", dst, " is not another rank");
    auto op = make_op(Kind::Send, t, "send");
    op->tag = tag;
    op->what += " to rank " + std::to_string(dst);
    const size_t es = t.element_size(), N = static_cast<size_t>(t.numel());
    const size_t P = pieces_for(N, es);
    op->outs.push_back(OutPart{dst, out_pieces(bytes(t), N, es, P, true)});
    return run(std::move(op), c10d::OpType::SEND, {}, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTailmark::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
    const at::Tensor& t = single(tensors, "recv");
    TORCH_CHECK(src >= 0 && src < getSize() && src != getRank(), "tailmark: recv: ", src, " is not another rank");
    auto op = make_op(Kind::Send, t, "recv");
    op->tag = tag;
    op->what += " from rank " + std::to_string(src);
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
