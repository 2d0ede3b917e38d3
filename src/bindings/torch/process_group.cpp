#include "process_group.hpp"

#include <map>

#include "braid/error.hpp"
#include "shareable.hpp"
#include "store_adapter.hpp"

namespace braid_torch {

ProcessGroupBraid::ProcessGroupBraid(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout, const std::string& backend,
                                     const std::string& store_host)
    : c10d::ProcessGroup(rank, size) {
  // torch's store is already namespaced for this group (a PrefixStore per
  // group name), so one communicator name serves every group.
  comm_ = std::make_unique<braid::Communicator>(
      std::make_shared<C10dStore>(store), rank, size,
      braid::CommunicatorOptions{.backend = backend, .timeout = timeout, .name = "pg", .store_host = store_host});
  // Shareable tensors (shareable.hpp) shape the plans, so every rank must
  // say the same: the group uses them only where every rank installed the
  // allocator (one byte's MIN, at creation).
  std::uint8_t on = shareable_memory_on() ? 1 : 0;
  comm_->all_reduce(braid::tensor(&on, 1), braid::ReduceOp::Min, options(timeout)).wait();
  shareable_ = on == 1;
  init();
}

ProcessGroupBraid::~ProcessGroupBraid() { completer_->stop(); }

braid::OpOptions ProcessGroupBraid::options(std::chrono::milliseconds timeout) const {
  braid::OpOptions o;
  o.group = &comm_->group();
  o.async_op = true;
  o.shareable_buffers = shareable_;
  if (timeout.count() > 0) o.timeout = timeout;  // kUnsetTimeout: the group's
  return o;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::issued(c10d::OpType type, std::vector<braid::Work> works,
                                                         std::vector<at::Tensor> outputs, Carry carry) {
  return c10::make_intrusive<BraidWork>(rank_, type, std::move(works), std::move(outputs), std::move(carry),
                                        completer_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  Carry carry;
  auto v = view(t, true, carry, "broadcast", "tensor");
  auto w = comm_->broadcast(v, static_cast<int>(opts.rootRank), options(opts.timeout));
  return issued(c10d::OpType::BROADCAST, {std::move(w)}, tensors, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  if (t.is_sparse()) return sparse_allreduce(t, opts);
  const auto op = reduce_op(opts.reduceOp, t.scalar_type(), "allreduce");
  Carry carry;
  auto v = view(t, true, carry, "allreduce", "tensor");
  auto w = comm_->all_reduce(v, op, options(opts.timeout));
  return issued(c10d::OpType::ALLREDUCE, {std::move(w)}, tensors, std::move(carry));
}

// A sparse COO tensor sums as Gloo sums it: every rank's indices and values
// gathered (padded to the largest count), then added up by torch's coalesce;
// the result replaces the tensor's contents. Blocking: three gathers whose
// sizes depend on each other.
c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::sparse_allreduce(const at::Tensor& t,
                                                                   const c10d::AllreduceOptions& opts) {
  if (opts.reduceOp.op_ != c10d::ReduceOp::SUM)
    throw braid::Error(braid::ErrorCode::NotSupported, "allreduce: sparse tensors sum only (ReduceOp.SUM)");
  if (!t.device().is_cpu())
    throw braid::Error(braid::ErrorCode::NotSupported, "allreduce: sparse tensors on the CPU only");
  auto o = options(opts.timeout);
  o.async_op = false;
  const int n = getSize();
  const at::Tensor in = t.coalesce();
  const at::Tensor idx = in._indices().t().contiguous();  // nnz x sparse_dim
  const at::Tensor val = in._values().contiguous();       // nnz x dense dims
  at::Tensor counts = at::empty({n}, at::kLong);
  at::Tensor mine = at::full({1}, in._nnz(), at::kLong);
  Carry c;
  comm_->all_gather_into_tensor(view(counts, true, c, "allreduce", "counts"), view(mine, false, c, "allreduce", "count"), o);
  const int64_t most = counts.max().item<int64_t>();
  auto padded = [&](const at::Tensor& x) {
    auto sizes = x.sizes().vec();
    sizes[0] = most;
    at::Tensor p = at::zeros(sizes, x.options());
    if (x.size(0) > 0) p.narrow(0, 0, x.size(0)).copy_(x);
    sizes[0] = most * n;
    at::Tensor all = at::empty(sizes, x.options());
    comm_->all_gather_into_tensor(view(all, true, c, "allreduce", "gathered"), view(p, false, c, "allreduce", "sparse part"), o);
    return all;
  };
  const at::Tensor all_idx = padded(idx), all_val = padded(val);
  std::vector<at::Tensor> idx_parts, val_parts;
  for (int r = 0; r < n; ++r) {
    const int64_t k = counts[r].item<int64_t>();
    idx_parts.push_back(all_idx.narrow(0, r * most, k));
    val_parts.push_back(all_val.narrow(0, r * most, k));
  }
  at::Tensor sum = at::sparse_coo_tensor(at::cat(idx_parts).t(), at::cat(val_parts), t.sizes()).coalesce();
  at::Tensor out = t;
  out.copy_(sum);
  return issued(c10d::OpType::ALLREDUCE, {}, {out}, Carry{});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  // One flat buffer per dtype, one all_reduce each; the flat buffer is the
  // stand-in its tensors are copied back from.
  Carry carry;
  std::vector<braid::Work> works;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, ts] : by_dtype) {
    const auto op = reduce_op(opts.reduceOp, dtype, "allreduce_coalesced");
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : ts) flat_parts.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    int64_t off = 0;
    for (const auto& t : ts) {
      carry.copy_back.emplace_back(t, flat.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
    Carry unused;
    auto v = view(flat, false, unused, "allreduce_coalesced", "tensors");
    carry.keep.push_back(flat);
    works.push_back(comm_->all_reduce(v, op, options(opts.timeout)));
  }
  return issued(c10d::OpType::ALLREDUCE_COALESCED, std::move(works), tensors, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  const auto op = reduce_op(opts.reduceOp, t.scalar_type(), "reduce");
  Carry carry;
  auto v = view(t, true, carry, "reduce", "tensor");
  auto w = comm_->reduce(v, static_cast<int>(opts.rootRank), op, options(opts.timeout));
  return issued(c10d::OpType::REDUCE, {std::move(w)}, tensors, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "allgather");
  if (outputs.size() != 1)
    throw braid::Error(braid::ErrorCode::InvalidArgument, "allgather: expected one output list, got " +
                                                              std::to_string(outputs.size()));
  Carry carry;
  auto vin = view(in, false, carry, "allgather", "input");
  auto vouts = views(outputs[0], true, carry, "allgather", "output_tensor_list");
  auto w = comm_->all_gather(vouts, vin, options(opts.timeout));
  return issued(c10d::OpType::ALLGATHER, {std::move(w)}, outputs[0], std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  Carry carry;
  auto vin = view(input, false, carry, "_allgather_base", "input");
  auto vout = view(output, true, carry, "_allgather_base", "output");
  auto w = comm_->all_gather_into_tensor(vout, vin, options(opts.timeout));
  return issued(c10d::OpType::_ALLGATHER_BASE, {std::move(w)}, {output}, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // torch's layout: outputs[r][i] receives rank r's inputs[i].
  if (outputs.size() != static_cast<std::size_t>(getSize()))
    throw braid::Error(braid::ErrorCode::InvalidArgument,
                       "allgather_coalesced: " + std::to_string(outputs.size()) +
                           " output lists: expected one per rank (" + std::to_string(getSize()) + ")");
  for (const auto& list : outputs)
    if (list.size() != inputs.size())
      throw braid::Error(braid::ErrorCode::InvalidArgument,
                         "allgather_coalesced: an output list holds " + std::to_string(list.size()) +
                             " tensors for " + std::to_string(inputs.size()) + " inputs: expected one per input");
  Carry carry;
  std::vector<braid::Work> works;
  std::vector<at::Tensor> results;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto vin = view(inputs[i], false, carry, "allgather_coalesced", "input");
    std::vector<at::Tensor> column;
    for (const auto& list : outputs) column.push_back(list[i]);
    auto vouts = views(column, true, carry, "allgather_coalesced", "output_tensor_lists");
    works.push_back(comm_->all_gather(vouts, vin, options(opts.timeout)));
  }
  for (const auto& list : outputs) results.insert(results.end(), list.begin(), list.end());
  return issued(c10d::OpType::ALLGATHER_COALESCED, std::move(works), std::move(results), std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  Carry carry;
  auto vin = view(in, false, carry, "gather", "input");
  auto vouts = root_list(outputs, getRank() == root, root, true, carry, "gather", "gather_list");
  std::vector<at::Tensor> results = getRank() == root ? outputs[0] : std::vector<at::Tensor>{};
  auto w = comm_->gather(vin, getRank() == root ? &vouts : nullptr, root, options(opts.timeout));
  return issued(c10d::OpType::GATHER, {std::move(w)}, std::move(results), std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  Carry carry;
  auto vout = view(out, true, carry, "scatter", "output");
  auto vins = root_list(inputs, getRank() == root, root, false, carry, "scatter", "scatter_list");
  auto w = comm_->scatter(vout, getRank() == root ? &vins : nullptr, root, options(opts.timeout));
  return issued(c10d::OpType::SCATTER, {std::move(w)}, outputs, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  if (inputs.size() != 1)
    throw braid::Error(braid::ErrorCode::InvalidArgument,
                       "reduce_scatter: expected one input list, got " + std::to_string(inputs.size()));
  const auto op = reduce_op(opts.reduceOp, out.scalar_type(), "reduce_scatter");
  Carry carry;
  auto vout = view(out, true, carry, "reduce_scatter", "output");
  auto vins = views(inputs[0], false, carry, "reduce_scatter", "input_list");
  auto w = comm_->reduce_scatter(vout, vins, op, options(opts.timeout));
  return issued(c10d::OpType::REDUCE_SCATTER, {std::move(w)}, outputs, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const auto op = reduce_op(opts.reduceOp, output.scalar_type(), "_reduce_scatter_base");
  Carry carry;
  auto vout = view(output, true, carry, "_reduce_scatter_base", "output");
  auto vin = view(input, false, carry, "_reduce_scatter_base", "input");
  auto w = comm_->reduce_scatter_tensor(vout, vin, op, options(opts.timeout));
  return issued(c10d::OpType::_REDUCE_SCATTER_BASE, {std::move(w)}, {output}, std::move(carry));
}

namespace {

// torch's splits count rows (the first dimension); Braid's count elements.
std::vector<int64_t> element_splits(const std::vector<int64_t>& rows, const at::Tensor& t, const char* name) {
  if (rows.empty()) return {};
  const int64_t per_row = t.dim() == 0 || t.size(0) == 0 ? 0 : t.numel() / t.size(0);
  std::vector<int64_t> out;
  out.reserve(rows.size());
  for (auto r : rows) {
    if (r < 0)
      throw braid::Error(braid::ErrorCode::InvalidArgument,
                         std::string("alltoall_base: ") + name + " has a negative entry (" + std::to_string(r) + ")");
    out.push_back(r * per_row);
  }
  return out;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_splits,
                                                                std::vector<int64_t>& input_splits,
                                                                const c10d::AllToAllOptions& opts) {
  Carry carry;
  auto vout = view(output, true, carry, "alltoall_base", "output");
  auto vin = view(input, false, carry, "alltoall_base", "input");
  const auto os = element_splits(output_splits, output, "output_split_sizes");
  const auto is = element_splits(input_splits, input, "input_split_sizes");
  braid::Work w;
  if (os.empty() && is.empty()) {
    w = comm_->all_to_all_single(vout, vin, options(opts.timeout));
  } else {
    // One side given: the other splits evenly, as torch does.
    auto even = [&](const at::Tensor& t) {
      const int n = getSize();
      const int64_t rows = t.dim() == 0 ? 0 : t.size(0);
      if (rows % n != 0)
        throw braid::Error(braid::ErrorCode::InvalidArgument,
                           "alltoall_base: " + std::to_string(rows) + " rows do not split evenly over " +
                               std::to_string(n) + " ranks: pass split sizes");
      return element_splits(std::vector<int64_t>(static_cast<std::size_t>(n), rows / n), t, "splits");
    };
    w = comm_->all_to_all_single(vout, vin, os.empty() ? even(output) : os, is.empty() ? even(input) : is,
                                 options(opts.timeout));
  }
  return issued(c10d::OpType::ALLTOALL_BASE, {std::move(w)}, {output}, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  Carry carry;
  auto vouts = views(outputs, true, carry, "alltoall", "output_tensor_list");
  auto vins = views(inputs, false, carry, "alltoall", "input_tensor_list");
  auto w = comm_->all_to_all(vouts, vins, options(opts.timeout));
  return issued(c10d::OpType::ALLTOALL, {std::move(w)}, outputs, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::p2p(c10d::OpType type, std::vector<at::Tensor>& tensors,
                                                      int peer, int tag, const char* what) {
  const bool is_send = type == c10d::OpType::SEND;
  const at::Tensor& t = single(tensors, what);
  Carry carry;
  auto v = view(t, !is_send, carry, what, "tensor");
  auto o = options({});
  o.tag = tag;
  auto w = is_send ? comm_->isend(v, peer, o) : comm_->irecv(v, peer, o);
  return issued(type, {std::move(w)}, is_send ? std::vector<at::Tensor>{} : tensors, std::move(carry));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return p2p(c10d::OpType::SEND, tensors, dst, tag, "send");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return p2p(c10d::OpType::RECV, tensors, src, tag, "recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return p2p(c10d::OpType::RECVANYSOURCE, tensors, braid::ANY_SOURCE, tag, "recvAnysource");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::barrier(const c10d::BarrierOptions& opts) {
  auto w = comm_->barrier(options(opts.timeout));
  return issued(c10d::OpType::BARRIER, {std::move(w)}, {}, Carry{});
}

}  // namespace braid_torch
