// Communicator: a process group made by its members alone.
//
// init_process_group makes one default group per process, from every rank of
// the job. A Communicator is made by just the processes that will use it,
// each handing in a store they share and its own rank and size (in the
// spirit of MPI_Comm_create_group and NCCL communicators). A process may hold
// several at once, each with its own ranks, transports and message space, and
// the default group beside them; they never see each other's traffic.
// braid_torch builds one per torch process group this way, over the store
// torch hands the backend.
//
//   auto store = braid::store::tcp_store("10.0.0.1", 29500, rank == 0, 60s);
//   braid::Communicator comm(store, rank, size, {.name = "experts"});
//   comm.all_reduce(braid::tensor(v));
//   braid::all_reduce(braid::tensor(v), braid::ReduceOp::Sum, {.group = &comm.group()});  // the same
//
// Ranks passed to its ops (src, dst, root) are the communicator's, 0..size-1.
// Each op mirrors the free function of the same name, with options.group
// defaulting to group(); a subgroup from new_group() may be passed instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/group.hpp"
#include "braid/ops.hpp"
#include "braid/options.hpp"
#include "braid/store.hpp"

namespace braid {

struct Context;

struct CommunicatorOptions {
  // As InitOptions::backend: "auto", "tcp", "shm" or "verbs".
  std::string backend = "auto";
  // Default deadline for every blocking wait, the rendezvous included.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Its keys live under "braid/<name>/" in the store: communicators that
  // share one store need distinct names.
  std::string name = "comm";
  // The store's host, so that each rank advertises the address it reaches
  // that host by ("" = loopback: every member on this host).
  std::string store_host = "";
};

class Communicator {
 public:
  // Every member calls it with the same size and options and a distinct
  // rank; returns once all have joined (or throws, Timeout naming who is
  // missing).
  Communicator(std::shared_ptr<store::Store> store, int rank, int size,
               const CommunicatorOptions& options = {});
  ~Communicator();  // destroy(), errors logged rather than thrown
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const std::string& backend() const;
  // All of its ranks: pass as OpOptions::group to the free functions.
  const Group& group() const;
  // A subgroup; every member calls it with the same ranks, in the same
  // order relative to its other new_group calls (as braid::new_group).
  Group new_group(const std::vector<int>& ranks);
  // Ends it: async work finishes or times out, transports close. Its groups'
  // ops then fail with InvalidState. Called by the destructor.
  void destroy();

  Work send(const Tensor& t, int dst, const OpOptions& o = {}) const;
  int recv(const Tensor& t, int src = ANY_SOURCE, const OpOptions& o = {}) const;
  Work isend(const Tensor& t, int dst, const OpOptions& o = {}) const;
  Work irecv(const Tensor& t, int src = ANY_SOURCE, const OpOptions& o = {}) const;
  Work barrier(const OpOptions& o = {}) const;
  Work broadcast(const Tensor& t, int src, const OpOptions& o = {}) const;
  Work all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum, const OpOptions& o = {}) const;
  Work all_reduce(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum,
                  const OpOptions& o = {}) const;
  Work reduce(const Tensor& t, int dst, ReduceOp op = ReduceOp::Sum, const OpOptions& o = {}) const;
  Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input, const OpOptions& o = {}) const;
  Work all_gather_into_tensor(const Tensor& output, const Tensor& input, const OpOptions& o = {}) const;
  Work gather(const Tensor& input, const std::vector<Tensor>* outputs, int dst, const OpOptions& o = {}) const;
  Work scatter(const Tensor& output, const std::vector<Tensor>* inputs, int src, const OpOptions& o = {}) const;
  Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::Sum,
                      const OpOptions& o = {}) const;
  Work reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                             const OpOptions& o = {}) const;
  Work all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                  const OpOptions& o = {}) const;
  Work all_to_all_single(const Tensor& output, const Tensor& input, const OpOptions& o = {}) const;
  Work all_to_all_single(const Tensor& output, const Tensor& input, const std::vector<std::int64_t>& output_splits,
                         const std::vector<std::int64_t>& input_splits, const OpOptions& o = {}) const;

 private:
  // o, with group() where o names none; a group of another process group
  // is refused.
  OpOptions in(const OpOptions& o) const;
  std::shared_ptr<Context> ctx_;
};

}  // namespace braid
