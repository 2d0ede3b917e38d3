// DistributedSampler: which samples of a dataset each rank reads in an epoch,
// index for index the same as torch.utils.data.DistributedSampler.
//
// Without shuffle the order is 0..dataset_size-1. With shuffle it is the
// permutation torch.randperm(dataset_size, generator=g) gives after
// g.manual_seed(seed + epoch) on the CPU: a Fisher-Yates shuffle driven by
// MT19937 (std::mt19937) seeded with the low 32 bits of seed + epoch. Then,
// as in torch:
// - drop_last = false: the order is padded by repeating it from its start
//   until its length divides evenly by num_replicas;
// - drop_last = true: it is cut to the largest multiple of num_replicas;
// and rank r takes every num_replicas-th entry starting at entry r.
// Checked against torch 1.13 (tests/train/sampler_torch.py). PyTorch 2.6
// and later shuffle a dataset of 2^32 / 20 = 214748364 samples or more with
// another algorithm (64-bit draws); below that size every version agrees.
#pragma once

#include <cstdint>
#include <vector>

namespace braid {

struct SamplerOptions {
  int num_replicas = -1;  // -1: braid::get_world_size() (the default group)
  int rank = -1;          // -1: braid::get_rank()
  bool shuffle = true;
  std::uint64_t seed = 0;  // every rank must pass the same seed
  bool drop_last = false;
};

class DistributedSampler {
 public:
  // Throws braid::Error: InvalidArgument for a negative dataset_size,
  // num_replicas < 1 or a rank outside [0, num_replicas); InvalidState when
  // an option is -1 and Braid is not initialised.
  explicit DistributedSampler(std::int64_t dataset_size, const SamplerOptions& options = {});
  // As torch's set_epoch: the shuffle of each epoch differs; call it before
  // each epoch with the same value on every rank.
  void set_epoch(std::int64_t epoch);
  // This rank's indices for the current epoch, size() of them.
  std::vector<std::int64_t> indices() const;
  // Samples per rank: ceil(dataset_size / num_replicas), or
  // floor(dataset_size / num_replicas) with drop_last.
  std::int64_t size() const;

 private:
  std::int64_t dataset_size_ = 0;
  int num_replicas_ = 1;
  int rank_ = 0;
  bool shuffle_ = true;
  std::uint64_t seed_ = 0;
  bool drop_last_ = false;
  std::int64_t epoch_ = 0;
  std::int64_t num_samples_ = 0;
};

}  // namespace braid
