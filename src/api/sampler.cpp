// DistributedSampler: the per-rank sample order of torch's
// DistributedSampler, so that a C++ training job (or a C++ data loader next
// to a Python one) reads exactly the samples torch would give each rank. The
// shuffle reproduces torch's CPU randperm (Fisher-Yates, one 32-bit MT19937
// draw per position, `draw % (n - i)`); tests/train/sampler_torch.py checks
// it against torch itself.
#include "braid/sampler.hpp"

#include <numeric>
#include <random>
#include <string_view>
#include <utility>

#include "braid/process_group.hpp"
#include "src/common/errors.hpp"

namespace braid {

namespace {

int from_default_group(const char* name, int value) {
  if (value != -1) return value;
  if (!is_initialized())
    fail(ErrorCode::InvalidState,
         "DistributedSampler: {} = -1 means the default group's, but Braid is not initialised: call "
         "init_process_group first, or pass num_replicas and rank",
         name);
  return std::string_view(name) == "num_replicas" ? get_world_size() : get_rank();
}

}  // namespace

DistributedSampler::DistributedSampler(std::int64_t dataset_size, const SamplerOptions& o)
    : dataset_size_(dataset_size), shuffle_(o.shuffle), seed_(o.seed), drop_last_(o.drop_last) {
  if (dataset_size < 0)
    fail(ErrorCode::InvalidArgument, "DistributedSampler: dataset_size is {}: expected 0 or more", dataset_size);
  num_replicas_ = from_default_group("num_replicas", o.num_replicas);
  if (num_replicas_ < 1)
    fail(ErrorCode::InvalidArgument,
         "DistributedSampler: num_replicas is {}: expected 1 or more (or -1 for the default group's size)",
         num_replicas_);
  rank_ = from_default_group("rank", o.rank);
  if (rank_ < 0 || rank_ >= num_replicas_)
    fail(ErrorCode::InvalidArgument,
         "DistributedSampler: rank is {}: expected 0 to {} (num_replicas - 1), or -1 for this process's rank", rank_,
         num_replicas_ - 1);
  // As torch: with drop_last, the largest multiple of num_replicas that fits;
  // otherwise the smallest that covers the dataset.
  const std::int64_t r = num_replicas_;
  num_samples_ = drop_last_ ? dataset_size / r : (dataset_size + r - 1) / r;
}

void DistributedSampler::set_epoch(std::int64_t epoch) { epoch_ = epoch; }

std::int64_t DistributedSampler::size() const { return num_samples_; }

std::vector<std::int64_t> DistributedSampler::indices() const {
  const std::int64_t n = dataset_size_;
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (shuffle_ && n > 1) {
    // torch: g.manual_seed(seed + epoch); torch.randperm(n, generator=g).
    // Python adds the integers exactly and the generator keeps the seed's
    // low 32 bits (a negative sum as its two's complement); unsigned
    // wrap-around gives the same low bits. std::mt19937 likewise seeds
    // with its argument modulo 2^32.
    std::mt19937 mt(static_cast<std::uint32_t>(seed_ + static_cast<std::uint64_t>(epoch_)));
    for (std::int64_t i = 0; i < n - 1; ++i) {
      const auto z = static_cast<std::int64_t>(static_cast<std::uint64_t>(mt()) % static_cast<std::uint64_t>(n - i));
      std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(i + z)]);
    }
  }
  // Entry k of the padded (or cut) order is order[k % n]; rank r takes
  // entries r, r + num_replicas, ...
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples_));
  const std::int64_t total = num_samples_ * num_replicas_;
  for (std::int64_t k = rank_; k < total; k += num_replicas_) mine.push_back(order[static_cast<std::size_t>(k % n)]);
  return mine;
}

}  // namespace braid
