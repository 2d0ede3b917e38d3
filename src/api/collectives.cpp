// The collective ops: argument checks, the buffer layout each plan expects
// (see algorithms/plan.hpp, "Buffer contract"), staging for list arguments
// that are not one contiguous block; then the runtime runs the Call
// (src/runtime/call.hpp). all_to_all is in all_to_all.cpp.
#include <cstring>
#include <memory>
#include <string>

#include "braid/ops.hpp"
#include "src/api/call_args.hpp"
#include "src/reduce/cpu_reduce.hpp"

namespace braid {

using namespace detail;

Work barrier(const OpOptions& o) {
  Call c = make(Collective::Barrier, "barrier", o);
  return run(std::move(c), o);
}

Work broadcast(const Tensor& t, int src, const OpOptions& o) { return broadcast(t, t, src, o); }

Work broadcast(const Tensor& input_arg, const Tensor& output_arg, int src, const OpOptions& o) {
  Call c = make(Collective::Broadcast, "broadcast", o);
  same_or_apart(input_arg, output_arg, c.what);
  const bool root = root_of(c, src, "src") == c.group->my_rank;
  const bool direct = root ? direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}})
                           : direct_device(c, o, {{&output_arg, "output"}});
  const Tensor input = root && !direct ? stage(c, input_arg, StageDir::In, "input") : input_arg;
  const Tensor output = direct ? output_arg
                        : root && input_arg.data == output_arg.data  // in place: the root's stays as it is
                            ? input
                            : stage(c, output_arg, StageDir::Out, "output");
  check_tensor(output, "output", c.what);
  c.root = root_of(c, src, "src");
  const bool is_root = c.root == c.group->my_rank;
  if (is_root) {
    check_tensor(input, "input", c.what);
    same_dtype(input, output, "input", "output", c.what);
    need_count(output.count, input.count, "output", "the same as input", c.what);
  }
  c.dtype = output.dtype;
  c.count = output.count;
  c.buffers.output = output.data;
  // The root's data: a plan that reads it from Input (the message plans,
  // PlanBuilder::root_reads_input) copies it into Output itself, after its
  // sends; for the others it is copied there first.
  if (is_root) c.contribution = input.data;
  if (is_root && input.data != output.data) {
    if (direct) c.before = device_copy(c, output.data, input.data, output.nbytes());
    else c.init_output = {output.data, input.data, output.nbytes()};
  }
  return run(std::move(c), o);
}

Work all_reduce(const Tensor& t, ReduceOp op, const OpOptions& o) { return all_reduce(t, t, op, o); }

Work all_reduce(const Tensor& input_arg, const Tensor& output_arg, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::AllReduce, "all_reduce", o);
  same_or_apart(input_arg, output_arg, c.what);
  const bool direct = direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}});
  const Tensor input = direct ? input_arg : stage(c, input_arg, StageDir::In, "input");
  const Tensor output = direct ? output_arg : stage(c, output_arg, StageDir::Out, "output");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  need_count(output.count, input.count, "output", "the same as input", c.what);
  reduction::check_op(input.dtype, op);
  c.dtype = input.dtype;
  c.op = op;
  c.count = input.count;
  c.buffers.output = output.data;
  c.contribution = input.data;
  if (input.data != output.data)
    c.init_output = {output.data, input.data, input.nbytes()};
  avg_after(c, output.data, output.count, true);
  return run(std::move(c), o);
}

Work reduce(const Tensor& t, int dst, ReduceOp op, const OpOptions& o) { return reduce(t, t, dst, op, o); }

Work reduce(const Tensor& input_arg, const Tensor& output_arg, int dst, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::Reduce, "reduce", o);
  same_or_apart(input_arg, output_arg, c.what);
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  const Tensor output = root_of(c, dst, "dst") == c.group->my_rank
                            ? stage(c, output_arg, StageDir::Out, "output")
                            : output_arg;  // not used off the root
  check_tensor(input, "input", c.what);
  reduction::check_op(input.dtype, op);
  c.root = root_of(c, dst, "dst");
  c.dtype = input.dtype;
  c.op = op;
  c.count = input.count;
  if (c.root == c.group->my_rank) {
    check_tensor(output, "output", c.what);
    same_dtype(input, output, "input", "output", c.what);
    need_count(output.count, input.count, "output", "the same as input", c.what);
    c.buffers.output = output.data;
    c.contribution = input.data;
    if (input.data != output.data) c.init_output = {output.data, input.data, input.nbytes()};
    avg_after(c, output.data, output.count, true);
  } else {
    // A non-root's data is only an input: the plan works on a private copy.
    auto b = alloc(input.nbytes());
    c.keep.push_back(b);
    c.buffers.output = b.get();
    c.contribution = input.data;
    c.init_output = {b.get(), input.data, input.nbytes()};
  }
  return run(std::move(c), o);
}

Work all_gather_into_tensor(const Tensor& output_arg, const Tensor& input_arg, const OpOptions& o) {
  Call c = make(Collective::AllGather, "all_gather_into_tensor", o);
  // In place means the input is exactly this rank's block of the output;
  // anywhere else inside it, the plans would read it while peers' blocks
  // overwrite it.
  const char* own = static_cast<const char*>(output_arg.data) +
                    static_cast<std::size_t>(c.group->my_rank) * input_arg.nbytes();
  if (overlaps(input_arg, output_arg) && input_arg.data != own)
    fail(ErrorCode::InvalidArgument,
         "{}: the input overlaps the output but is not this rank's block of it (byte offset {} of the output, "
         "where in place it must be at {}: rank {} x {} bytes)",
         c.what, static_cast<const char*>(input_arg.data) - static_cast<const char*>(output_arg.data),
         own - static_cast<const char*>(output_arg.data), c.group->my_rank, input_arg.nbytes());
  const bool direct = direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}});
  const Tensor output = direct ? output_arg : stage(c, output_arg, StageDir::Out, "output");  // first: input may lie inside it
  const Tensor input = direct ? input_arg : stage(c, input_arg, StageDir::In, "input");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  const auto n = static_cast<std::int64_t>(c.group->ranks.size());
  need_count(output.count, n * input.count, "output", "group size x input", c.what);
  c.dtype = input.dtype;
  c.count = input.count;
  c.buffers.input = input.data;
  c.buffers.output = output.data;
  char* mine = static_cast<char*>(output.data) + static_cast<std::size_t>(c.group->my_rank) * input.nbytes();
  // The own block, unless the plan copies it (Plan::reads_input).
  if (direct) c.before = device_copy(c, mine, input.data, input.nbytes());
  else c.init_output = {mine, input.data, input.nbytes()};
  return run(std::move(c), o);
}

Work all_gather(const std::vector<Tensor>& outputs_arg, const Tensor& input_arg, const OpOptions& o) {
  Call c = make(Collective::AllGather, "all_gather", o);
  const auto outputs = stage_list(c, outputs_arg, StageDir::Out, "outputs");
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  // As all_gather_into_tensor: in place means the input is this rank's
  // output tensor; overlapping any other, the plans (which send the input
  // and copy it into place last) would read it after a peer's block landed.
  // (Checked on what the plan reads: staged device tensors are apart.)
  for (std::size_t k = 0; k < outputs.size(); ++k)
    if (overlaps(input, outputs[k]) && !(static_cast<int>(k) == c.group->my_rank && input.data == outputs[k].data))
      fail(ErrorCode::InvalidArgument,
           "{}: the input overlaps outputs[{}]; it may only be this rank's own output tensor, outputs[{}], itself",
           c.what, k, c.group->my_rank);
  check_tensor(input, "input", c.what);
  const int n = static_cast<int>(c.group->ranks.size());
  c.dtype = input.dtype;
  c.count = input.count;
  c.buffers.input = input.data;
  const std::size_t bytes = input.nbytes();
  // Unless the plan copies it (Plan::reads_input): the own block.
  c.init_output = {nullptr, input.data, bytes};
  if (contiguous_list(c, outputs, n, input.count, input, "outputs")) {
    c.buffers.output = outputs[0].data;
    c.init_output.dst = static_cast<char*>(outputs[0].data) + static_cast<std::size_t>(c.group->my_rank) * bytes;
  } else {
    // Blocks in separate tensors: run() places them (Call::output_list).
    for (const Tensor& t : outputs) c.output_list.push_back(static_cast<char*>(t.data));
  }
  return run(std::move(c), o);
}

Work gather(const Tensor& input_arg, const std::vector<Tensor>* outputs_arg, int dst, const OpOptions& o) {
  Call c = make(Collective::Gather, "gather", o);
  std::vector<Tensor> staged_outputs;
  const std::vector<Tensor>* outputs = outputs_arg;
  if (outputs_arg && root_of(c, dst, "dst") == c.group->my_rank) {
    staged_outputs = stage_list(c, *outputs_arg, StageDir::Out, "outputs");
    outputs = &staged_outputs;
  }
  const Tensor input = stage(c, input_arg, StageDir::In, "input");
  check_tensor(input, "input", c.what);
  c.root = root_of(c, dst, "dst");
  c.dtype = input.dtype;
  c.count = input.count;
  c.buffers.input = input.data;
  const int n = static_cast<int>(c.group->ranks.size());
  if (c.root == c.group->my_rank) {
    if (!outputs)
      fail(ErrorCode::InvalidArgument, "gather: the destination rank must pass a list of {} output tensors", n);
    ListView out = list_view(c, *outputs, n, input.count, input, "outputs");
    const std::size_t bytes = input.nbytes();
    c.buffers.output = out.base;
    char* mine = out.base + static_cast<std::size_t>(c.root) * bytes;
    c.before = [=] { copy_bytes(mine, input.data, bytes); };
    if (out.staged) c.after = [=, outputs = *outputs] { scatter_out(outputs, out.base, bytes); };
  } else if (outputs) {
    fail(ErrorCode::InvalidArgument, "gather: outputs must be null on ranks other than dst ({})", dst);
  }
  return run(std::move(c), o);
}

Work scatter(const Tensor& output_arg, const std::vector<Tensor>* inputs_arg, int src, const OpOptions& o) {
  Call c = make(Collective::Scatter, "scatter", o);
  std::vector<Tensor> staged_inputs;
  const std::vector<Tensor>* inputs = inputs_arg;
  if (inputs_arg && root_of(c, src, "src") == c.group->my_rank) {
    staged_inputs = stage_list(c, *inputs_arg, StageDir::In, "inputs");
    inputs = &staged_inputs;
  }
  const Tensor output = stage(c, output_arg, StageDir::Out, "output");
  check_tensor(output, "output", c.what);
  c.root = root_of(c, src, "src");
  c.dtype = output.dtype;
  c.count = output.count;
  c.buffers.output = output.data;
  const int n = static_cast<int>(c.group->ranks.size());
  if (c.root == c.group->my_rank) {
    if (!inputs)
      fail(ErrorCode::InvalidArgument, "scatter: the source rank must pass a list of {} input tensors", n);
    ListView in = list_view(c, *inputs, n, output.count, output, "inputs");
    const std::size_t bytes = output.nbytes();
    c.buffers.input = in.base;
    const int me = c.root;
    c.before = [=, inputs = *inputs] {
      if (in.staged) gather_in(in.base, inputs, bytes);
      copy_bytes(output.data, in.base + static_cast<std::size_t>(me) * bytes, bytes);
    };
  } else if (inputs) {
    fail(ErrorCode::InvalidArgument, "scatter: inputs must be null on ranks other than src ({})", src);
  }
  return run(std::move(c), o);
}

Work reduce_scatter_tensor(const Tensor& output_arg, const Tensor& input_arg, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::ReduceScatter, "reduce_scatter_tensor", o);
  // In place (output inside input) is staged: the plans read Input while
  // writing Output, and device memory has no private buffer to spare.
  const bool direct = !overlaps(input_arg, output_arg) &&
                      direct_device(c, o, {{&input_arg, "input"}, {&output_arg, "output"}});
  const Tensor input = direct ? input_arg : stage(c, input_arg, StageDir::In, "input");  // first: output may lie inside it
  const Tensor output = direct ? output_arg : stage(c, output_arg, StageDir::Out, "output");
  check_tensor(input, "input", c.what);
  check_tensor(output, "output", c.what);
  same_dtype(input, output, "input", "output", c.what);
  reduction::check_op(input.dtype, op);
  const auto n = static_cast<std::int64_t>(c.group->ranks.size());
  need_count(input.count, n * output.count, "input", "group size x output", c.what);
  c.dtype = input.dtype;
  c.op = op;
  c.count = output.count;
  c.buffers.input = input.data;
  c.buffers.output = output.data;
  // In place (output is this rank's block of input, as NCCL allows): plans
  // read Input while writing Output, so the result goes to a private buffer.
  const auto* in_b = static_cast<const char*>(input.data);
  const auto* out_b = static_cast<const char*>(output.data);
  if (output.count > 0 && out_b < in_b + input.nbytes() && in_b < out_b + output.nbytes()) {
    auto b = alloc(output.nbytes());
    c.keep.push_back(b);
    c.buffers.output = b.get();
    c.after = [=] { copy_bytes(output.data, b.get(), output.nbytes()); };
  }
  avg_after(c, output.data, output.count, true);
  return run(std::move(c), o);
}

Work reduce_scatter(const Tensor& output_arg, const std::vector<Tensor>& inputs_arg, ReduceOp op, const OpOptions& o) {
  Call c = make(Collective::ReduceScatter, "reduce_scatter", o);
  const auto inputs = stage_list(c, inputs_arg, StageDir::In, "inputs");
  const Tensor output = stage(c, output_arg, StageDir::Out, "output");
  check_tensor(output, "output", c.what);
  reduction::check_op(output.dtype, op);
  const int n = static_cast<int>(c.group->ranks.size());
  ListView in = list_view(c, inputs, n, output.count, output, "inputs");
  c.dtype = output.dtype;
  c.op = op;
  c.count = output.count;
  c.buffers.input = in.base;
  c.buffers.output = output.data;
  const std::size_t bytes = output.nbytes();
  if (in.staged) c.before = [=, inputs = inputs] { gather_in(in.base, inputs, bytes); };
  avg_after(c, output.data, output.count, true);
  return run(std::move(c), o);
}

}  // namespace braid
