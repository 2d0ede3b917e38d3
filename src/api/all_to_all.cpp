// all_to_all and all_to_all_single: per-peer blocks, even or by splits.
#include <numeric>
#include <vector>

#include "braid/ops.hpp"
#include "src/api/call_args.hpp"

namespace braid {

using namespace detail;

namespace {

// All-to-all over contiguous buffers with per-peer element counts.
// `even`: the caller passed no splits, so every rank's blocks are alike. A
// rank cannot tell that from splits it was given: its own row and column may
// be even while another rank's are not, and all ranks must run one plan.
Work all_to_all_impl(Call c, const Tensor& output, const Tensor& input, void* out_base, const void* in_base,
                     const std::vector<std::int64_t>& out_splits, const std::vector<std::int64_t>& in_splits,
                     bool even, const OpOptions& o) {
  const int n = static_cast<int>(c.group->ranks.size());
  const int me = c.group->my_rank;
  c.dtype = input.dtype;
  c.buffers.input = in_base;
  c.buffers.output = out_base;
  const std::size_t es = dtype_size(input.dtype);
  const auto in_off = std::accumulate(in_splits.begin(), in_splits.begin() + me, std::int64_t{0});
  const auto out_off = std::accumulate(out_splits.begin(), out_splits.begin() + me, std::int64_t{0});
  if (in_splits[static_cast<std::size_t>(me)] != out_splits[static_cast<std::size_t>(me)])
    fail(ErrorCode::InvalidArgument, "{}: the block a rank sends itself must match the one it receives: "
         "input split {} but output split {} at rank {}", c.what, in_splits[static_cast<std::size_t>(me)],
         out_splits[static_cast<std::size_t>(me)], me);
  if (even) {
    c.count = n ? in_splits[0] : 0;
  } else {
    // This rank's plan needs only its own row (what it sends) and column
    // (what it receives); other ranks build theirs from their own splits.
    c.splits.assign(static_cast<std::size_t>(n), std::vector<std::int64_t>(static_cast<std::size_t>(n), 0));
    for (int j = 0; j < n; ++j) c.splits[static_cast<std::size_t>(me)][static_cast<std::size_t>(j)] = in_splits[static_cast<std::size_t>(j)];
    for (int i = 0; i < n; ++i) c.splits[static_cast<std::size_t>(i)][static_cast<std::size_t>(me)] = out_splits[static_cast<std::size_t>(i)];
  }
  auto prev = c.before;
  const std::size_t own = static_cast<std::size_t>(in_splits[static_cast<std::size_t>(me)]) * es;
  c.before = [=] {
    if (prev) prev();
    copy_bytes(static_cast<char*>(out_base) + static_cast<std::size_t>(out_off) * es,
               static_cast<const char*>(in_base) + static_cast<std::size_t>(in_off) * es, own);
  };
  (void)output;
  return run(std::move(c), o);
}

std::vector<std::int64_t> check_splits(const char* what, const std::vector<std::int64_t>& s, int n,
                                       std::int64_t total, const char* name) {
  if (s.empty()) {
    if (total % n != 0)
      fail(ErrorCode::InvalidArgument, "{}: {} elements do not split evenly over {} ranks: pass splits or "
           "a multiple of the group size", what, total, n);
    return std::vector<std::int64_t>(static_cast<std::size_t>(n), total / n);
  }
  if (static_cast<int>(s.size()) != n)
    fail(ErrorCode::InvalidArgument, "{}: {} has {} entries: expected {} (the group size)", what, name, s.size(), n);
  std::int64_t sum = 0;
  for (auto v : s) {
    if (v < 0) fail(ErrorCode::InvalidArgument, "{}: {} has a negative entry ({})", what, name, v);
    sum += v;
  }
  if (sum != total)
    fail(ErrorCode::InvalidArgument, "{}: {} add up to {} elements but the tensor has {}", what, name, sum, total);
  return s;
}

}  // namespace

Work all_to_all_single(const Tensor& output, const Tensor& input, const OpOptions& o) {
  return all_to_all_single(output, input, {}, {}, o);
}

Work all_to_all_single(const Tensor& output_arg, const Tensor& input_arg, const std::vector<std::int64_t>& output_splits,
                       const std::vector<std::int64_t>& input_splits, const OpOptions& o) {
  Call c = make(Collective::AllToAll, "all_to_all_single", o);
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  const Tensor output = stage(c, output_arg, StageDir::Out, "output");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  const int n = static_cast<int>(c.group->ranks.size());
  auto in_s = check_splits(c.what, input_splits, n, input.count, "input_splits");
  auto out_s = check_splits(c.what, output_splits, n, output.count, "output_splits");
  if (input.data == output.data && input.count > 0)
    fail(ErrorCode::InvalidArgument, "all_to_all_single: input and output must be different buffers");
  const bool even = input_splits.empty() && output_splits.empty();
  return all_to_all_impl(std::move(c), output, input, output.data, input.data, out_s, in_s, even, o);
}

Work all_to_all(const std::vector<Tensor>& outputs_arg, const std::vector<Tensor>& inputs_arg, const OpOptions& o) {
  Call c = make(Collective::AllToAll, "all_to_all", o);
  const auto inputs = stage_list(c, inputs_arg, StageDir::In, "inputs");
  const auto outputs = stage_list(c, outputs_arg, StageDir::Out, "outputs");
  const int n = static_cast<int>(c.group->ranks.size());
  if (static_cast<int>(inputs.size()) != n || static_cast<int>(outputs.size()) != n)
    fail(ErrorCode::InvalidArgument, "all_to_all: {} inputs and {} outputs: expected {} of each (the group size)",
         inputs.size(), outputs.size(), n);
  std::vector<std::int64_t> in_s(static_cast<std::size_t>(n)), out_s(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto& a = inputs[static_cast<std::size_t>(i)];
    const auto& b = outputs[static_cast<std::size_t>(i)];
    check_tensor(a, "inputs", c.what);
    check_tensor(b, "outputs", c.what);
    same_dtype(a, inputs[0], "inputs", "inputs[0]", c.what);
    same_dtype(b, inputs[0], "outputs", "inputs[0]", c.what);
    in_s[static_cast<std::size_t>(i)] = a.count;
    out_s[static_cast<std::size_t>(i)] = b.count;
  }
  const std::size_t es = dtype_size(inputs[0].dtype);
  const auto in_total = std::accumulate(in_s.begin(), in_s.end(), std::int64_t{0});
  const auto out_total = std::accumulate(out_s.begin(), out_s.end(), std::int64_t{0});
  auto in_b = alloc(static_cast<std::size_t>(in_total) * es + 1);
  auto out_b = alloc(static_cast<std::size_t>(out_total) * es + 1);
  c.keep = {in_b, out_b};
  c.before = [=, inputs = inputs] {
    std::size_t off = 0;
    for (const auto& t : inputs) {
      copy_bytes(in_b.get() + off, t.data, t.nbytes());
      off += t.nbytes();
    }
  };
  c.after = [=, outputs = outputs] {
    std::size_t off = 0;
    for (const auto& t : outputs) {
      copy_bytes(t.data, out_b.get() + off, t.nbytes());
      off += t.nbytes();
    }
  };
  Tensor in_t = inputs[0], out_t = outputs[0];
  // Tensor sizes may differ from rank to rank, as splits do: never "even".
  return all_to_all_impl(std::move(c), out_t, in_t, out_b.get(), in_b.get(), out_s, in_s, false, o);
}

}  // namespace braid
