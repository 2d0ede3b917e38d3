// The API contract of the foundation issue, verbatim: it must compile
// against the public headers alone. The function is never called (it shows
// shapes, not a program); main() only proves the build linked.
#include <braid/braid.hpp>

#include <cstdio>

[[maybe_unused]] static void contract() {
  braid::init_process_group({.backend = "auto",            // "tcp" now; "shm", "verbs", "cuda" later
                             .init_method = "env://",      // or "tcp://HOST:PORT", "file:///path"
                             .rank = -1, .world_size = -1, // -1: from the init method / environment
                             .timeout = std::chrono::seconds(300),
                             .group_name = ""});           // jobs sharing one file or store stay apart
  bool up = braid::is_initialized();
  int me = braid::get_rank(), n = braid::get_world_size();
  braid::Group g = braid::new_group({0, 2});               // every rank of the default group calls it
  int mine = braid::get_rank(g);                           // -1 for a process outside g, as in torch
  std::vector<float> v(1024);
  braid::Tensor t = braid::tensor(v);                      // also braid::tensor(ptr, count)
  braid::OpOptions o{.group = &g, .async_op = false, .timeout = std::chrono::seconds(10), .tag = 7,
                     .stream = nullptr};                   // a CUDA stream for device tensors (later issue)
  braid::send(braid::tensor(v), 2, o);                     // tensors are passed as const views
  int from = braid::recv(t, braid::ANY_SOURCE);            // the blocking recv returns the sender's rank
  braid::Work w = braid::isend(t, 1, {.tag = 3});          // isend/irecv are the async forms
  w.wait(); bool done = w.is_completed(); int src = w.source_rank();
  braid::barrier();
  braid::destroy_process_group();
  (void)up, (void)me, (void)n, (void)mine, (void)from, (void)done, (void)src;
}

// The collectives issue's contract, likewise.
[[maybe_unused]] static void collectives_contract(int me, int src, int dst) {
  std::vector<float> a(8), b(8);
  braid::Tensor t = braid::tensor(a), input = braid::tensor(a), output = braid::tensor(b);
  std::vector<braid::Tensor> outputs{output}, inputs{input};
  std::vector<std::int64_t> output_splits{8}, input_splits{8};
  braid::broadcast(t, src);
  braid::all_reduce(t, braid::ReduceOp::Sum);                 // in place
  braid::all_reduce(input, output, braid::ReduceOp::Sum);     // out of place
  braid::reduce(t, dst, braid::ReduceOp::Max);
  braid::all_gather(outputs /*const std::vector<Tensor>&*/, input);
  braid::all_gather_into_tensor(output, input);
  braid::gather(input, dst == me ? &outputs : nullptr, dst);
  braid::scatter(output, src == me ? &inputs : nullptr, src);
  braid::reduce_scatter(output, inputs /*const std::vector<Tensor>&*/, braid::ReduceOp::Sum);
  braid::reduce_scatter_tensor(output, input, braid::ReduceOp::Sum);
  braid::all_to_all(outputs, inputs);
  braid::all_to_all_single(output, input);                              // even split
  braid::all_to_all_single(output, input, output_splits, input_splits); // uneven, element counts
  braid::barrier();
}

// Issue #15, item 5: the training helpers for C++ users without torch.
[[maybe_unused]] static void training_contract(braid::Group& g) {
  braid::SamplerOptions so{.num_replicas = -1, .rank = -1, .shuffle = true, .seed = 0, .drop_last = false};
  braid::DistributedSampler sampler(1000, so);             // -1: from the default group
  sampler.set_epoch(3);
  std::vector<std::int64_t> mine = sampler.indices();      // this rank's, for the current epoch
  std::int64_t per_rank = sampler.size();
  std::vector<float> w1(10), w2(20);
  std::vector<double> w3(5);
  std::vector<braid::Tensor> grads{braid::tensor(w1), braid::tensor(w2), braid::tensor(w3)};
  braid::BucketOptions bo{.bucket_bytes = 25u << 20, .op = braid::ReduceOp::Avg, .group = &g};
  braid::Bucketer bucketer(grads, bo);
  bucketer.mark_ready(2);                                  // tensor 2 holds its final local value
  bucketer.wait();                                         // this round's buckets reduced, in place
  braid::Work w = braid::all_reduce_coalesced(grads, braid::ReduceOp::Sum, {.async_op = true});
  w.wait();
  (void)mine, (void)per_rank;
}

int main() {
  std::printf("the API contract compiles against <braid/braid.hpp> (Braid %s)\n", BRAID_VERSION);
  return 0;
}
