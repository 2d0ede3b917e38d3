// The C API (include/braid/braid.h) over the public C++ API: each function
// turns its arguments into Tensors and OpOptions, calls the C++ op, and turns
// a braid::Error (or anything else) into a status code and this thread's
// last error message. Nothing throws across the boundary.
//
// Why one file of ~600 lines: one short wrapper per C function, all alike and
// all sharing the helpers at the top; split, each half would need them all.
#include "braid/braid.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "braid/braid.hpp"

struct braid_group_s {
  braid::Group group;
  bool owned_by_comm = false;  // a communicator's own group: freed with it
};

struct braid_comm_s {
  braid::Communicator comm;
  braid_group_s group;  // its group(), as the ops take it
};

// An async op: its Work, and where a receive's source and count go on
// completion.
struct braid_request_s {
  braid::Work work;
  int* source = nullptr;
  int64_t* received = nullptr;
};

namespace {

thread_local std::string t_last_error;

int status_of(braid::ErrorCode c) { return static_cast<int>(c) + 1; }

// Runs f, mapping what it throws to a status and a message.
template <class F>
int guarded(F&& f) noexcept {
  try {
    t_last_error.clear();
    f();
    return BRAID_OK;
  } catch (const braid::Error& e) {
    t_last_error = e.what();
    return status_of(e.code());
  } catch (const std::bad_alloc&) {
    t_last_error = "out of memory";
    return BRAID_ERR_INTERNAL;
  } catch (const std::exception& e) {
    t_last_error = e.what();
    return BRAID_ERR_INTERNAL;
  } catch (...) {
    t_last_error = "an unknown exception";
    return BRAID_ERR_INTERNAL;
  }
}

[[noreturn]] void invalid(const std::string& what) { throw braid::Error(braid::ErrorCode::InvalidArgument, what); }

braid::DType dtype_of(braid_dtype_t d, const char* op) {
  const int v = static_cast<int>(d);
  if (v < 0 || v >= braid::kNumDTypes)
    invalid(std::string(op) + ": dtype " + std::to_string(v) + " is not a braid_dtype_t (expected BRAID_INT8 .. BRAID_FLOAT64)");
  return static_cast<braid::DType>(v);
}

braid::ReduceOp op_of(braid_op_t o, const char* op) {
  const int v = static_cast<int>(o);
  if (v < 0 || v > static_cast<int>(braid::ReduceOp::BXor))
    invalid(std::string(op) + ": op " + std::to_string(v) + " is not a braid_op_t (expected BRAID_SUM .. BRAID_BXOR)");
  return static_cast<braid::ReduceOp>(v);
}

braid::Tensor tensor_of(const void* p, std::int64_t count, braid::DType dt) {
  return braid::tensor(const_cast<void*>(p), count, dt);
}

braid::OpOptions options_of(braid_group_t g, braid_request_t* request) {
  braid::OpOptions o;
  o.group = g ? &g->group : nullptr;
  o.async_op = request != nullptr;
  return o;
}

// This rank as the ops of g number ranks (roots are given that way): the
// world's rank, or within a communicator's group the communicator's. -1
// outside g.
int my_rank_for(braid_group_t g) {
  if (!g) return braid::get_rank();
  const int r = g->group.rank();
  return r < 0 ? -1 : g->group.global_rank(r);
}

// The group's size (the world's when g is null).
int size_of(braid_group_t g) { return g ? braid::get_world_size(g->group) : braid::get_world_size(); }

// n tensors of `count` elements, block after block from base.
std::vector<braid::Tensor> blocks(const void* base, int n, std::int64_t count, braid::DType dt) {
  std::vector<braid::Tensor> v;
  v.reserve(static_cast<std::size_t>(n));
  const std::size_t bytes = static_cast<std::size_t>(count) * braid::dtype_size(dt);
  for (int i = 0; i < n; ++i)
    v.push_back(tensor_of(static_cast<const char*>(base) + static_cast<std::size_t>(i) * bytes, count, dt));
  return v;
}

// Block `me` of a buffer of group-size blocks of `count` elements: where an
// in-place all_gather reads this rank's input and reduce_scatter writes its
// result.
char* own_block(const void* buf, braid_group_t g, std::int64_t count, braid::DType dt) {
  const int me = g ? braid::get_rank(g->group) : braid::get_rank();
  return static_cast<char*>(const_cast<void*>(buf)) +
         static_cast<std::size_t>(me) * static_cast<std::size_t>(count) * braid::dtype_size(dt);
}

void need(const void* p, std::int64_t count, const char* what, const char* op) {
  if (count > 0 && p == nullptr)
    invalid(std::string(op) + ": " + what + " is NULL with count " + std::to_string(count) + ": expected a buffer");
}

// gather's outputs / scatter's inputs: the root's group-size blocks, checked;
// empty elsewhere (the op then takes no list).
std::vector<braid::Tensor> root_blocks(braid_group_t g, int root, const void* buf, std::int64_t count,
                                       braid::DType dt, const char* what, const char* op) {
  if (my_rank_for(g) != root) return {};
  need(buf, count, what, op);
  return blocks(buf, size_of(g), count, dt);
}

// Hands an async op's Work to the caller, or (blocking) waits for it.
void finish(braid::Work w, braid_request_t* request, int* source = nullptr, int64_t* received = nullptr) {
  if (!request) {
    w.wait();
    return;
  }
  *request = new braid_request_s{std::move(w), source, received};
}


}  // namespace

extern "C" {

// --- init and identity --------------------------------------------------------

braid_init_options_t braid_init_options_default(void) {
  braid_init_options_t o;
  o.init_method = nullptr;
  o.rank = -1;
  o.world_size = -1;
  o.backend = nullptr;
  o.timeout_ms = 0;
  o.group_name = nullptr;
  return o;
}

int braid_init_ex(const braid_init_options_t* options) {
  return guarded([&] {
    if (!options) invalid("braid_init_ex: options is NULL: expected braid_init_options_default() or a filled struct");
    braid::InitOptions o;
    if (options->init_method) o.init_method = options->init_method;
    if (options->backend) o.backend = options->backend;
    if (options->group_name) o.group_name = options->group_name;
    o.rank = options->rank;
    o.world_size = options->world_size;
    if (options->timeout_ms < 0)
      invalid("braid_init_ex: timeout_ms " + std::to_string(options->timeout_ms) + " is negative: expected 0 (default) or more");
    if (options->timeout_ms > 0) o.timeout = std::chrono::milliseconds(options->timeout_ms);
    braid::init_process_group(o);
  });
}

int braid_init(const char* init_method, int rank, int world_size) {
  braid_init_options_t o = braid_init_options_default();
  o.init_method = init_method;
  o.rank = rank;
  o.world_size = world_size;
  return braid_init_ex(&o);
}

int braid_finalize(void) {
  return guarded([] { braid::destroy_process_group(); });
}

int braid_initialized(void) { return braid::is_initialized() ? 1 : 0; }

int braid_rank(void) {
  int r = -1;
  if (guarded([&] { r = braid::is_initialized() ? braid::get_rank() : -1; }) != BRAID_OK) return -1;
  return r;
}

int braid_size(void) {
  int r = -1;
  if (guarded([&] { r = braid::is_initialized() ? braid::get_world_size() : -1; }) != BRAID_OK) return -1;
  return r;
}

const char* braid_error_string(void) { return t_last_error.c_str(); }

const char* braid_status_name(int status) {
  switch (status) {
    case BRAID_OK: return "BRAID_OK";
    case BRAID_ERR_INVALID_ARGUMENT: return "BRAID_ERR_INVALID_ARGUMENT";
    case BRAID_ERR_INVALID_STATE: return "BRAID_ERR_INVALID_STATE";
    case BRAID_ERR_TIMEOUT: return "BRAID_ERR_TIMEOUT";
    case BRAID_ERR_PEER_FAILURE: return "BRAID_ERR_PEER_FAILURE";
    case BRAID_ERR_TRANSPORT: return "BRAID_ERR_TRANSPORT";
    case BRAID_ERR_STORE: return "BRAID_ERR_STORE";
    case BRAID_ERR_NOT_SUPPORTED: return "BRAID_ERR_NOT_SUPPORTED";
    case BRAID_ERR_INTERNAL: return "BRAID_ERR_INTERNAL";
    default: return "unknown status";
  }
}

const char* braid_version(void) { return BRAID_VERSION; }

// --- groups -------------------------------------------------------------------

int braid_group_new(const int* ranks, int n, braid_group_t* group) {
  return guarded([&] {
    if (!group) invalid("braid_group_new: group is NULL: expected where to put the new group");
    *group = nullptr;
    if (n < 0) invalid("braid_group_new: n = " + std::to_string(n) + " is negative");
    need(ranks, n, "ranks", "braid_group_new");
    std::vector<int> list(ranks, ranks + n);
    auto g = std::make_unique<braid_group_s>(braid_group_s{braid::new_group(list)});
    *group = g.release();
  });
}

int braid_group_split(braid_group_t parent, int color, int key, braid_group_t* group) {
  return guarded([&] {
    if (!group) invalid("braid_group_split: group is NULL: expected where to put the new group");
    *group = nullptr;
    const braid::Group p = parent ? parent->group : braid::world();
    auto g = std::make_unique<braid_group_s>(braid_group_s{braid::split(p, color, key)});
    *group = g.release();
  });
}

int braid_group_free(braid_group_t group) {
  if (group && group->owned_by_comm) {
    t_last_error = "braid_group_free: this group is a communicator's own (braid_comm_group): braid_comm_free frees it";
    return BRAID_ERR_INVALID_ARGUMENT;
  }
  delete group;
  return BRAID_OK;
}

int braid_group_rank(braid_group_t group) {
  int r = -1;
  if (group && !group->group.valid()) return -1;  // a split's NO_COLOR
  if (guarded([&] { r = group ? braid::get_rank(group->group) : braid::get_rank(); }) != BRAID_OK) return -1;
  return r;
}

int braid_group_size(braid_group_t group) {
  int r = -1;
  if (guarded([&] { r = size_of(group); }) != BRAID_OK) return -1;
  return r;
}

// --- communicators ---------------------------------------------------------------

int braid_comm_create(const char* store, int serve, int rank, int size, const char* name, int64_t timeout_ms,
                      braid_comm_t* comm) {
  return guarded([&] {
    if (!comm) invalid("braid_comm_create: comm is NULL: expected where to put the communicator");
    *comm = nullptr;
    if (!store) invalid("braid_comm_create: store is NULL: expected \"tcp://HOST:PORT\" or \"file:///PATH\"");
    if (timeout_ms < 0) invalid("braid_comm_create: timeout_ms is negative");
    const std::string spec = store;
    const auto timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 300000);
    std::shared_ptr<braid::store::Store> st;
    braid::CommunicatorOptions o;
    o.timeout = timeout;
    if (name) o.name = name;
    if (spec.rfind("tcp://", 0) == 0) {
      const std::string hp = spec.substr(6);
      const auto colon = hp.rfind(':');
      if (colon == std::string::npos || colon == 0) invalid("braid_comm_create: '" + spec + "' is not tcp://HOST:PORT");
      char* end = nullptr;
      const long port = std::strtol(hp.c_str() + colon + 1, &end, 10);
      if (*end != '\0' || port < 1 || port > 65535) invalid("braid_comm_create: bad port in '" + spec + "'");
      o.store_host = hp.substr(0, colon);
      st = braid::store::tcp_store(o.store_host, static_cast<int>(port), serve != 0, timeout);
    } else if (spec.rfind("file://", 0) == 0) {
      st = braid::store::file_store(spec.substr(7), timeout);
    } else {
      invalid("braid_comm_create: store '" + spec + "' is neither tcp://HOST:PORT nor file:///PATH");
    }
    auto c = std::unique_ptr<braid_comm_s>(new braid_comm_s{braid::Communicator(st, rank, size, o), {}});
    c->group.group = c->comm.group();
    c->group.owned_by_comm = true;
    *comm = c.release();
  });
}

int braid_comm_free(braid_comm_t comm) {
  return guarded([&] {
    std::unique_ptr<braid_comm_s> owned(comm);
    if (owned) owned->comm.destroy();
  });
}

int braid_comm_rank(braid_comm_t comm) {
  int r = -1;
  if (guarded([&] {
        if (!comm) invalid("braid_comm_rank: comm is NULL");
        r = comm->comm.rank();
      }) != BRAID_OK)
    return -1;
  return r;
}

int braid_comm_size(braid_comm_t comm) {
  int r = -1;
  if (guarded([&] {
        if (!comm) invalid("braid_comm_size: comm is NULL");
        r = comm->comm.size();
      }) != BRAID_OK)
    return -1;
  return r;
}

braid_group_t braid_comm_group(braid_comm_t comm) { return comm ? &comm->group : nullptr; }

// --- requests -----------------------------------------------------------------

namespace {
// Completes request r (done), writes a receive's source and count, releases it.
int release(braid_request_t r) {
  const int st = guarded([&] {
    // Release even if wait() throws.
    std::unique_ptr<braid_request_s> owned(r);
    owned->work.wait();
    if (owned->source) *owned->source = owned->work.source_rank();
    if (owned->received) *owned->received = owned->work.received_count();
  });
  return st;
}
}  // namespace

int braid_wait(braid_request_t request) {
  if (!request) {
    t_last_error = "braid_wait: request is NULL: expected one a call returned";
    return BRAID_ERR_INVALID_ARGUMENT;
  }
  return release(request);
}

int braid_wait_for(braid_request_t request, int64_t timeout_ms, int* done) {
  bool finished = false;
  const int st = guarded([&] {
    if (!request || !done) invalid("braid_wait_for: request and done must not be NULL");
    *done = 0;
    finished = request->work.wait_for(std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
  });
  if (st != BRAID_OK) return st;
  if (!finished) return BRAID_OK;
  *done = 1;
  return release(request);
}

int braid_test(braid_request_t* request, int* done) {
  bool finished = false;
  const int st = guarded([&] {
    if (!request || !*request || !done) invalid("braid_test: request, *request and done must not be NULL");
    *done = 0;
    finished = (*request)->work.is_completed();
  });
  if (st != BRAID_OK || !finished) return st;
  *done = 1;
  braid_request_t r = *request;
  *request = nullptr;
  return release(r);
}

int braid_wait_all(braid_request_t* requests, int n) {
  if (n > 0 && !requests) {
    t_last_error = "braid_wait_all: requests is NULL with n > 0";
    return BRAID_ERR_INVALID_ARGUMENT;
  }
  int first = BRAID_OK;
  std::string first_error;
  for (int i = 0; i < n; ++i) {
    if (!requests[i]) continue;
    const int st = release(requests[i]);
    requests[i] = nullptr;
    if (st != BRAID_OK && first == BRAID_OK) {
      first = st;
      first_error = t_last_error;
    }
  }
  t_last_error = first_error;
  return first;
}

int braid_wait_any(braid_request_t* requests, int n, int* index) {
  std::vector<int> live;
  const int st = guarded([&] {
    if (!index || (n > 0 && !requests)) invalid("braid_wait_any: requests and index must not be NULL");
    *index = -1;
    for (int i = 0; i < n; ++i)
      if (requests[i]) live.push_back(i);
    if (live.empty()) invalid("braid_wait_any: every request is NULL: expected at least one to wait for");
    std::vector<braid::Work> works;
    for (int i : live) works.push_back(requests[i]->work);
    *index = live[braid::wait_any(works)];
  });
  if (st != BRAID_OK) return st;
  braid_request_t r = requests[*index];
  requests[*index] = nullptr;
  return release(r);
}

// --- point to point -------------------------------------------------------------

int braid_send(const void* buf, int64_t count, braid_dtype_t dtype, int dst, int64_t tag, braid_group_t group,
               braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_send");
    need(buf, count, "buf", "braid_send");
    auto o = options_of(group, request);
    o.tag = tag;
    finish(request ? braid::isend(tensor_of(buf, count, dt), dst, o) : braid::send(tensor_of(buf, count, dt), dst, o),
           request);
  });
}

int braid_recv(void* buf, int64_t count, braid_dtype_t dtype, int src, int64_t tag, braid_group_t group, int* source,
               braid_request_t* request) {
  return braid_recv_count(buf, count, dtype, src, tag, group, source, nullptr, request);
}

int braid_recv_count(void* buf, int64_t count, braid_dtype_t dtype, int src, int64_t tag, braid_group_t group,
                     int* source, int64_t* received, braid_request_t* request) {
  return guarded([&] {
    const char* what = received ? "braid_recv_count" : "braid_recv";
    const auto dt = dtype_of(dtype, what);
    need(buf, count, "buf", what);
    auto o = options_of(group, request);
    o.tag = tag;
    if (request) {
      finish(braid::irecv(tensor_of(buf, count, dt), src, o), request, source, received);
      return;
    }
    if (received) {  // the count comes with the Work: wait on one here
      braid::Work w = braid::irecv(tensor_of(buf, count, dt), src, o);
      w.wait();
      if (source) *source = w.source_rank();
      *received = w.received_count();
      return;
    }
    const int from = braid::recv(tensor_of(buf, count, dt), src, o);
    if (source) *source = from;
  });
}

int braid_sendrecv(const void* sendbuf, int64_t sendcount, int dst, void* recvbuf, int64_t recvcount, int src,
                   braid_dtype_t dtype, int64_t tag, braid_group_t group, int* source, braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_sendrecv");
    need(sendbuf, sendcount, "sendbuf", "braid_sendrecv");
    need(recvbuf, recvcount, "recvbuf", "braid_sendrecv");
    auto o = options_of(group, request);
    o.tag = tag;
    braid::Work w = braid::sendrecv(tensor_of(sendbuf, sendcount, dt), dst, tensor_of(recvbuf, recvcount, dt), src, o);
    if (!request && source) *source = w.source_rank();
    finish(std::move(w), request, source);
  });
}

// --- collectives ------------------------------------------------------------------

int braid_barrier(braid_group_t group, braid_request_t* request) {
  return guarded([&] { finish(braid::barrier(options_of(group, request)), request); });
}

int braid_broadcast(void* buf, int64_t count, braid_dtype_t dtype, int root, braid_group_t group,
                    braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_broadcast");
    need(buf, count, "buf", "braid_broadcast");
    finish(braid::broadcast(tensor_of(buf, count, dt), root, options_of(group, request)), request);
  });
}

int braid_all_reduce(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_op_t op,
                     braid_group_t group, braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_all_reduce");
    const auto rop = op_of(op, "braid_all_reduce");
    need(sendbuf, count, "sendbuf", "braid_all_reduce");
    need(recvbuf, count, "recvbuf", "braid_all_reduce");
    finish(braid::all_reduce(tensor_of(sendbuf, count, dt), tensor_of(recvbuf, count, dt), rop,
                             options_of(group, request)),
           request);
  });
}

int braid_reduce(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_op_t op, int root,
                 braid_group_t group, braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_reduce");
    const auto rop = op_of(op, "braid_reduce");
    need(sendbuf, count, "sendbuf", "braid_reduce");
    // Off the root the output is never written: without one, the input
    // stands in (the op reduces a private copy there).
    const bool is_root = my_rank_for(group) == root;
    if (is_root) need(recvbuf, count, "recvbuf (on the root)", "braid_reduce");
    const void* out = recvbuf ? recvbuf : sendbuf;
    finish(braid::reduce(tensor_of(sendbuf, count, dt), tensor_of(out, count, dt), root, rop,
                         options_of(group, request)),
           request);
  });
}

int braid_all_gather(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_group_t group,
                     braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_all_gather");
    const int n = size_of(group);
    need(sendbuf, count, "sendbuf", "braid_all_gather");
    need(recvbuf, count * n, "recvbuf", "braid_all_gather");
    // sendbuf == recvbuf: in place, this rank's block already holds its data.
    const void* in = sendbuf == recvbuf ? own_block(recvbuf, group, count, dt) : sendbuf;
    finish(braid::all_gather_into_tensor(tensor_of(recvbuf, count * n, dt), tensor_of(in, count, dt),
                                         options_of(group, request)),
           request);
  });
}

int braid_gather(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, int root,
                 braid_group_t group, braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_gather");
    need(sendbuf, count, "sendbuf", "braid_gather");
    auto outs = root_blocks(group, root, recvbuf, count, dt, "recvbuf (on the root)", "braid_gather");
    finish(braid::gather(tensor_of(sendbuf, count, dt), outs.empty() ? nullptr : &outs, root,
                         options_of(group, request)),
           request);
  });
}

int braid_scatter(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, int root,
                  braid_group_t group, braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_scatter");
    need(recvbuf, count, "recvbuf", "braid_scatter");
    auto ins = root_blocks(group, root, sendbuf, count, dt, "sendbuf (on the root)", "braid_scatter");
    finish(braid::scatter(tensor_of(recvbuf, count, dt), ins.empty() ? nullptr : &ins, root,
                          options_of(group, request)),
           request);
  });
}

int braid_reduce_scatter(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_op_t op,
                         braid_group_t group, braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_reduce_scatter");
    const auto rop = op_of(op, "braid_reduce_scatter");
    const int n = size_of(group);
    need(sendbuf, count * n, "sendbuf", "braid_reduce_scatter");
    need(recvbuf, count, "recvbuf", "braid_reduce_scatter");
    // sendbuf == recvbuf: in place, the result lands in this rank's own
    // block of it (as NCCL's in-place reduce_scatter).
    void* out = sendbuf == recvbuf ? own_block(recvbuf, group, count, dt) : recvbuf;
    finish(braid::reduce_scatter_tensor(tensor_of(out, count, dt), tensor_of(sendbuf, count * n, dt), rop,
                                        options_of(group, request)),
           request);
  });
}

int braid_all_to_all(const void* sendbuf, void* recvbuf, int64_t count, braid_dtype_t dtype, braid_group_t group,
                     braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_all_to_all");
    const int n = size_of(group);
    need(sendbuf, count * n, "sendbuf", "braid_all_to_all");
    need(recvbuf, count * n, "recvbuf", "braid_all_to_all");
    finish(braid::all_to_all_single(tensor_of(recvbuf, count * n, dt), tensor_of(sendbuf, count * n, dt),
                                    options_of(group, request)),
           request);
  });
}

int braid_all_to_all_v(const void* sendbuf, const int64_t* sendcounts, void* recvbuf, const int64_t* recvcounts,
                       braid_dtype_t dtype, braid_group_t group, braid_request_t* request) {
  return guarded([&] {
    const auto dt = dtype_of(dtype, "braid_all_to_all_v");
    const int n = size_of(group);
    if (!sendcounts || !recvcounts)
      invalid("braid_all_to_all_v: sendcounts and recvcounts must not be NULL: expected group-size arrays");
    std::vector<std::int64_t> in(sendcounts, sendcounts + n), out(recvcounts, recvcounts + n);
    std::int64_t in_total = 0, out_total = 0;
    for (auto v : in) in_total += v;
    for (auto v : out) out_total += v;
    need(sendbuf, in_total, "sendbuf", "braid_all_to_all_v");
    need(recvbuf, out_total, "recvbuf", "braid_all_to_all_v");
    finish(braid::all_to_all_single(tensor_of(recvbuf, out_total, dt), tensor_of(sendbuf, in_total, dt), out, in,
                                    options_of(group, request)),
           request);
  });
}

int braid_all_reduce_coalesced(void* const* bufs, const int64_t* counts, const braid_dtype_t* dtypes, int n,
                               braid_op_t op, braid_group_t group, braid_request_t* request) {
  return guarded([&] {
    const auto rop = op_of(op, "braid_all_reduce_coalesced");
    if (n < 0) invalid("braid_all_reduce_coalesced: n = " + std::to_string(n) + " is negative");
    if (n > 0 && (!bufs || !counts || !dtypes))
      invalid("braid_all_reduce_coalesced: bufs, counts and dtypes must not be NULL with n > 0");
    std::vector<braid::Tensor> list;
    list.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      need(bufs[i], counts[i], "a buffer", "braid_all_reduce_coalesced");
      list.push_back(tensor_of(bufs[i], counts[i], dtype_of(dtypes[i], "braid_all_reduce_coalesced")));
    }
    finish(braid::all_reduce_coalesced(list, rop, options_of(group, request)), request);
  });
}

}  // extern "C"
