// torch.distributed's view of tailmark: a c10d::ProcessGroup whose
// operations are plans for the Engine. Every operation returns a Work whose
// future completes with the output tensors (what DDP's comm hooks chain
// on), or with the error that broke the group.
#pragma once

#include "engine.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

namespace tailmark::torch_backend {

class TailmarkWork : public c10d::Work {
public:
    TailmarkWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, int source = -1);
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
    std::vector<at::Tensor> result() override { return outputs_; }
    int sourceRank() const override { return source_; }
    // The engine's thread: the op is over.
    void complete(std::exception_ptr ex);

private:
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
    int source_;
};

class ProcessGroupTailmark : public c10d::ProcessGroup {
public:
    ProcessGroupTailmark(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout);
    ~ProcessGroupTailmark() override;

    // What torch.distributed.Backend.register_backend calls.
    static c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                         int size, std::chrono::milliseconds timeout);

    const std::string getBackendName() const override { return "tailmark"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const c10d::BroadcastOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const c10d::AllgatherOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const c10d::ReduceScatterOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                        const c10d::ReduceScatterOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ScatterOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                            const c10d::AllToAllOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& outputSplitSizes,
                                                 std::vector<int64_t>& inputSplitSizes,
                                                 const c10d::AllToAllOptions& opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

private:
    c10::intrusive_ptr<c10d::Work> run(std::unique_ptr<Op> op, c10d::OpType type, std::vector<at::Tensor> outputs,
                                       std::vector<at::Tensor> keep, int source = -1);
    size_t pieces_for(size_t max_elems, size_t elem) const;
    // The ring's two halves (process_group_collectives.cc), for the list
    // and the flat forms alike: the gathered output's chunk c is at
    // chunks[c] (this rank's already in place); the input's chunk c to
    // reduce at in[c], this rank's sum into y. N elements a chunk.
    void ring_all_gather(Op& op, const std::vector<unsigned char*>& chunks, size_t N, size_t es) const;
    void ring_reduce_scatter(Op& op, const std::vector<const unsigned char*>& in, unsigned char* y, size_t N,
                             size_t es, const at::Tensor& like, std::vector<at::Tensor>& keep) const;
    // all_to_all's plan (process_group_exchange.cc): to each peer p its
    // send[p], from it into recv[p] (bytes), this rank's own copied.
    void exchange(Op& op, const std::vector<std::pair<const unsigned char*, size_t>>& send,
                  const std::vector<std::pair<unsigned char*, size_t>>& recv, size_t es) const;

    std::unique_ptr<Engine> engine_;
};

} // namespace tailmark::torch_backend
