// torch.distributed's view of tailmark: a c10d::ProcessGroup whose
// operations are plans for the Engine. Every operation returns a Work whose
// future completes with the output tensors (what DDP's comm hooks chain
// on), or with the error that broke the group.
#pragma once

#include "engine.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tailmark::torch_backend {

// all_reduce's algorithm: the ring, recursive doubling, hierarchical
// (within each host, across hosts, within each host again), or by size
// (auto: recursive doubling up to rd_max_bytes(n); above it hierarchical
// where ranks share a host's daemon and there are several hosts, else the
// ring).
enum class AllreduceAlgo : uint8_t { Auto, Ring, Rd, Hier };
// "ring", "rd", "hier", "auto"; anything else throws std::invalid_argument naming it.
AllreduceAlgo allreduce_algo_of(const std::string& name);
const char* allreduce_algo_name(AllreduceAlgo a);
// auto's threshold at n ranks, in bytes of tensor (docs/torch.md has the
// measurement it comes from).
size_t rd_max_bytes(int n);

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

    // TAILMARK_ALLREDUCE (default auto) when the group is made; then this,
    // which tailmark.torch.set_allreduce calls. Every rank must choose alike
    // (or get an error naming both algorithms' operations).
    void set_allreduce(AllreduceAlgo a) { allreduce_algo_.store(a, std::memory_order_relaxed); }
    // Pieces to ranks of this host read in the caller's tensor, and copied
    // into a slot (tailmark.torch.stats).
    Engine::Counts counts() const { return engine_->counts(); }
    AllreduceAlgo allreduce_algo() const { return allreduce_algo_.load(std::memory_order_relaxed); }

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
    // all_reduce by recursive doubling (process_group_collectives.cc), in
    // place over base's N elements of es bytes.
    void rd_all_reduce(Op& op, unsigned char* base, size_t N, size_t es) const;
    // The ring over `ring` (ranks in ring order, this rank at ring[me]), in
    // place; returns the index of its in part in op.ins (-1: a ring of one).
    int ring_all_reduce(Op& op, const std::vector<int>& ring, int me, unsigned char* base, size_t N,
                        size_t es) const;
    // Hierarchical: a chain to each host's first rank, the ring between
    // those, a chain back (process_group_collectives.cc).
    void hier_all_reduce(Op& op, unsigned char* base, size_t N, size_t es) const;
    // Whether some ranks share a daemon and there are several daemons.
    bool hosts_shared() const;
    void ring_all_gather(Op& op, const std::vector<unsigned char*>& chunks, size_t N, size_t es) const;
    void ring_reduce_scatter(Op& op, const std::vector<const unsigned char*>& in, unsigned char* y, size_t N,
                             size_t es, const at::Tensor& like, std::vector<at::Tensor>& keep) const;
    // all_to_all's plan (process_group_exchange.cc): to each peer p its
    // send[p], from it into recv[p] (bytes), this rank's own copied.
    void exchange(Op& op, const std::vector<std::pair<const unsigned char*, size_t>>& send,
                  const std::vector<std::pair<unsigned char*, size_t>>& recv, size_t es) const;

    std::unique_ptr<Engine> engine_;
    std::atomic<AllreduceAlgo> allreduce_algo_{AllreduceAlgo::Auto};
};

} // namespace tailmark::torch_backend
