// ProcessGroupBraid: the "braid" backend of torch.distributed (torch 1.13's
// c10d::ProcessGroup interface).
//
// A thin adapter: each torch process group is one braid::Communicator,
// bootstrapped over the c10d store torch hands the creator, so groups made
// by their members alone (torch's new_group) need no world-wide call. Each
// operation turns torch tensors into Braid views (convert.hpp), issues the
// Braid op asynchronously, and returns a BraidWork (work.hpp). Ranks torch
// passes are the group's own, as are the communicator's.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

#include "braid/communicator.hpp"
#include "work.hpp"

namespace braid_torch {

class ProcessGroupBraid : public c10d::ProcessGroup {
 public:
  ProcessGroupBraid(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout, const std::string& backend, const std::string& store_host);
  ~ProcessGroupBraid() override;

  const std::string getBackendName() const override { return "braid"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

  const braid::Communicator& communicator() const { return *comm_; }
  bool shareable() const { return shareable_; }

 private:
  braid::OpOptions options(std::chrono::milliseconds timeout) const;
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(const at::Tensor& t, const c10d::AllreduceOptions& opts);
  // send, recv (peer = ANY_SOURCE for recvAnysource): one tensor, async.
  c10::intrusive_ptr<c10d::Work> p2p(c10d::OpType type, std::vector<at::Tensor>& tensors, int peer, int tag,
                                     const char* what);
  c10::intrusive_ptr<c10d::Work> issued(c10d::OpType type, std::vector<braid::Work> works,
                                        std::vector<at::Tensor> outputs, Carry carry);

  std::unique_ptr<braid::Communicator> comm_;
  // Every rank's large tensors are shareable (shareable.hpp): the ops say so
  // (OpOptions::shareable_buffers).
  bool shareable_ = false;
  // Shared with the works it completes; stopped (drained) by the destructor
  // before the communicator goes.
  std::shared_ptr<Completer> completer_ = std::make_shared<Completer>();
};

}  // namespace braid_torch
