// Point-to-point ops and collectives. Conventions:
// - tensors are const views; the memory they point to is written;
// - every op takes `const OpOptions&` last and returns a Work (a blocking op
//   returns an already-completed one), except blocking recv, which returns the
//   sender's global rank;
// - src, dst and root are global ranks even when options.group is given;
// - counts are 64-bit element counts.
#pragma once

#include <cstdint>
#include <vector>

#include "braid/options.hpp"
#include "braid/tensor.hpp"
#include "braid/work.hpp"

namespace braid {

inline constexpr int ANY_SOURCE = -2;

enum class ReduceOp { Sum, Product, Min, Max, Avg, BAnd, BOr, BXor };
const char* reduce_op_name(ReduceOp op);

// --- point to point ---------------------------------------------------------
Work send(const Tensor& t, int dst, const OpOptions& options = {});
// Blocks; returns the global rank of the sender (useful with ANY_SOURCE).
int recv(const Tensor& t, int src = ANY_SOURCE, const OpOptions& options = {});
Work isend(const Tensor& t, int dst, const OpOptions& options = {});
Work irecv(const Tensor& t, int src = ANY_SOURCE, const OpOptions& options = {});
// Sends `send` to dst while receiving `recv` from src (MPI_Sendrecv): every
// rank may send to one neighbour and receive from another at once without
// deadlock. Blocking: returns once both are done; async: the Work completes
// after both. source_rank() is the receive's.
Work sendrecv(const Tensor& send, int dst, const Tensor& recv, int src = ANY_SOURCE,
              const OpOptions& options = {});

// --- collectives ------------------------------------------------------------
Work barrier(const OpOptions& options = {});
Work broadcast(const Tensor& t, int src, const OpOptions& options = {});
Work broadcast(const Tensor& input, const Tensor& output, int src, const OpOptions& options = {});
Work all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum, const OpOptions& options = {});
Work all_reduce(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum,
                const OpOptions& options = {});
Work reduce(const Tensor& t, int dst, ReduceOp op = ReduceOp::Sum, const OpOptions& options = {});
Work reduce(const Tensor& input, const Tensor& output, int dst, ReduceOp op = ReduceOp::Sum,
            const OpOptions& options = {});
Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input,
                const OpOptions& options = {});
Work all_gather_into_tensor(const Tensor& output, const Tensor& input,
                            const OpOptions& options = {});
// outputs: non-null on dst only (group-size tensors).
Work gather(const Tensor& input, const std::vector<Tensor>* outputs, int dst,
            const OpOptions& options = {});
// inputs: non-null on src only (group-size tensors).
Work scatter(const Tensor& output, const std::vector<Tensor>* inputs, int src,
             const OpOptions& options = {});
Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                    ReduceOp op = ReduceOp::Sum, const OpOptions& options = {});
Work reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                           ReduceOp op = ReduceOp::Sum, const OpOptions& options = {});
Work all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                const OpOptions& options = {});
Work all_to_all_single(const Tensor& output, const Tensor& input, const OpOptions& options = {});
// Uneven split: element counts per group rank; both vectors have group-size entries.
Work all_to_all_single(const Tensor& output, const Tensor& input,
                       const std::vector<std::int64_t>& output_splits,
                       const std::vector<std::int64_t>& input_splits,
                       const OpOptions& options = {});

// All-reduces every tensor of the list (mixed dtypes and sizes) in place, in
// one call: the tensors of each dtype are packed into one buffer (a dtype
// with a single tensor is reduced where it is) and reduced with one
// all_reduce per dtype, dtypes in the order they first appear in the list.
// Every rank passes the same dtypes and counts in the same order. Async
// (options.async_op): the returned Work completes once every dtype's
// all_reduce has and the results are back in the tensors. Host tensors only
// (a device tensor: NotSupported); an empty list is a completed Work.
Work all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op,
                          const OpOptions& options = {});

}  // namespace braid
