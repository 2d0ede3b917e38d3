// Communicator: a process group of its own Context, bootstrapped from the
// caller's store; its ops are the free functions on its group.
#include "braid/communicator.hpp"

#include "src/common/errors.hpp"
#include "src/common/log.hpp"
#include "src/runtime/context.hpp"
#include "src/store/store.hpp"

namespace braid {

Communicator::Communicator(std::shared_ptr<store::Store> store, int rank, int size,
                           const CommunicatorOptions& o) {
  if (!store)
    fail(ErrorCode::InvalidArgument, "Communicator: the store is null: expected a store every member shares");
  check_group_options(o.backend, o.timeout);
  if (size < 1 || rank < 0 || rank >= size)
    fail(ErrorCode::InvalidArgument, "Communicator: rank = {} and size = {}: expected size >= 1 and 0 <= rank < size",
         rank, size);
  if (o.name.empty())
    fail(ErrorCode::InvalidArgument, "Communicator: options.name is empty: expected a name unique in the store");
  auto c = std::make_shared<Context>();
  c->backend = o.backend;
  c->init_method = "store";
  c->timeout = o.timeout;
  auto st = std::make_shared<store::PrefixStore>("braid/" + o.name, std::move(store));
  st->set_timeout(o.timeout);
  bootstrap(c, st, rank, size, o.store_host.empty() ? "127.0.0.1" : o.store_host);
  BRAID_INFO("communicator '{}': rank {} of {}", o.name, rank, size);
  ctx_ = std::move(c);
}

Communicator::~Communicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    BRAID_INFO("Communicator: destroy failed: {}", e.what());
  }
}

Communicator::Communicator(Communicator&&) noexcept = default;

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    try {
      destroy();
    } catch (const std::exception& e) {
      BRAID_INFO("Communicator: destroy failed: {}", e.what());
    }
    ctx_ = std::move(other.ctx_);
  }
  return *this;
}

void Communicator::destroy() {
  if (ctx_) teardown(*ctx_);
}

static Context& live(const std::shared_ptr<Context>& c) {
  if (!c) fail(ErrorCode::InvalidState, "this Communicator was moved from: expected a live one");
  return *c;
}

int Communicator::rank() const { return live(ctx_).rank; }
int Communicator::size() const { return live(ctx_).world_size; }
const std::string& Communicator::backend() const { return live(ctx_).backend; }
const Group& Communicator::group() const { return live(ctx_).world; }

Group Communicator::new_group(const std::vector<int>& ranks) {
  if (live(ctx_).destroyed)
    fail(ErrorCode::InvalidState, "Communicator::new_group: the communicator was destroyed");
  return new_group_in(ctx_, ranks);
}

OpOptions Communicator::in(const OpOptions& o) const {
  OpOptions r = o;
  if (!r.group) {
    r.group = &live(ctx_).world;
  } else if (r.group->valid() && r.group->impl()->owner.lock() != ctx_) {
    fail(ErrorCode::InvalidArgument, "options.group is a group of another process group: expected this "
         "Communicator's group() or one of its new_group()s");
  }
  return r;
}

Work Communicator::send(const Tensor& t, int dst, const OpOptions& o) const { return braid::send(t, dst, in(o)); }
int Communicator::recv(const Tensor& t, int src, const OpOptions& o) const { return braid::recv(t, src, in(o)); }
Work Communicator::isend(const Tensor& t, int dst, const OpOptions& o) const { return braid::isend(t, dst, in(o)); }
Work Communicator::irecv(const Tensor& t, int src, const OpOptions& o) const { return braid::irecv(t, src, in(o)); }
Work Communicator::barrier(const OpOptions& o) const { return braid::barrier(in(o)); }
Work Communicator::broadcast(const Tensor& t, int src, const OpOptions& o) const {
  return braid::broadcast(t, src, in(o));
}
Work Communicator::all_reduce(const Tensor& t, ReduceOp op, const OpOptions& o) const {
  return braid::all_reduce(t, op, in(o));
}
Work Communicator::all_reduce(const Tensor& input, const Tensor& output, ReduceOp op, const OpOptions& o) const {
  return braid::all_reduce(input, output, op, in(o));
}
Work Communicator::reduce(const Tensor& t, int dst, ReduceOp op, const OpOptions& o) const {
  return braid::reduce(t, dst, op, in(o));
}
Work Communicator::all_gather(const std::vector<Tensor>& outputs, const Tensor& input, const OpOptions& o) const {
  return braid::all_gather(outputs, input, in(o));
}
Work Communicator::all_gather_into_tensor(const Tensor& output, const Tensor& input, const OpOptions& o) const {
  return braid::all_gather_into_tensor(output, input, in(o));
}
Work Communicator::gather(const Tensor& input, const std::vector<Tensor>* outputs, int dst,
                          const OpOptions& o) const {
  return braid::gather(input, outputs, dst, in(o));
}
Work Communicator::scatter(const Tensor& output, const std::vector<Tensor>* inputs, int src,
                           const OpOptions& o) const {
  return braid::scatter(output, inputs, src, in(o));
}
Work Communicator::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                  const OpOptions& o) const {
  return braid::reduce_scatter(output, inputs, op, in(o));
}
Work Communicator::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op,
                                         const OpOptions& o) const {
  return braid::reduce_scatter_tensor(output, input, op, in(o));
}
Work Communicator::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                              const OpOptions& o) const {
  return braid::all_to_all(outputs, inputs, in(o));
}
Work Communicator::all_to_all_single(const Tensor& output, const Tensor& input, const OpOptions& o) const {
  return braid::all_to_all_single(output, input, in(o));
}
Work Communicator::all_to_all_single(const Tensor& output, const Tensor& input,
                                     const std::vector<std::int64_t>& output_splits,
                                     const std::vector<std::int64_t>& input_splits, const OpOptions& o) const {
  return braid::all_to_all_single(output, input, output_splits, input_splits, in(o));
}

}  // namespace braid
