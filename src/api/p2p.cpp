// Point-to-point: send, recv, isend, irecv. A blocking op keeps its Request
// on the stack; an async one in a P2PWork that the engine keeps alive until
// the request completes, even if the caller drops the Work.
#include <memory>

#include "braid/ops.hpp"
#include "src/common/errors.hpp"
#include "src/runtime/context.hpp"
#include "src/runtime/executor.hpp"
#include "src/runtime/gave_up.hpp"
#include "src/runtime/positions.hpp"
#include "src/device/device_staging.hpp"
#include "src/runtime/work_state.hpp"

namespace braid {

namespace {

// A point-to-point op failed because its peer left the job: if the peer
// left after giving up on a collective, that collective's culprit is this
// op's too (a stopped rank, say), not the rank that merely left.
std::exception_ptr blame_leaver(Engine& e, std::uint32_t group_id, std::exception_ptr err, const char* what) {
  if (!err) return err;
  try {
    std::rethrow_exception(err);
  } catch (const Error& x) {
    if (x.code() == ErrorCode::PeerFailure && x.peer() >= 0 && e.left(x.peer()))
      if (auto why = left_after_giving_up(e, group_id, x.peer(), what)) return std::make_exception_ptr(*why);
  } catch (...) {
  }
  return err;
}

// A point-to-point op that timed out waiting on its peer: where each rank
// is (positions.hpp), and, where the peer itself waits on another (a
// host-mate waiting on a stopped rank, or across a cut link), that rank at
// the end of who waits on whom is the one named.
std::exception_ptr diagnose_timeout(Engine& e, const detail::GroupImpl& g, std::exception_ptr err, const Request& r,
                                    const char* what) {
  if (!err || r.peer < 0) return err;
  try {
    std::rethrow_exception(err);
  } catch (const Error& x) {
    if (x.code() != ErrorCode::Timeout) return err;
    int behind = -1, end = -1;
    const std::string where = diagnose(e, g, next_call_number(g), what, r.bytes, &behind, {r.peer}, &end);
    return std::make_exception_ptr(Error(ErrorCode::Timeout, x.what() + where, end >= 0 ? end : x.peer()));
  } catch (...) {
  }
  return err;
}

// The error a failed point-to-point op gives its caller: the leaver's
// culprit, or the end of the chain of waits; the rank it names is what this
// rank says, should it leave now, of why (Engine::leaving_word).
std::exception_ptr explain(Engine& e, const detail::GroupImpl& g, std::exception_ptr err, const Request& r,
                           const char* what) {
  err = diagnose_timeout(e, g, blame_leaver(e, g.id, err, what), r, what);
  try {
    if (err) std::rethrow_exception(err);
  } catch (const Error& x) {
    e.note_gave_up(x.peer());
  } catch (...) {
  }
  return err;
}

// Hang diagnosis (positions.hpp) for a point-to-point op: once a wait on
// it has lasted PositionPublisher::kPublishAfter, it says on its group that
// this rank waits on the peer, under the number of the group's next call,
// so that a peer that times out in a collective waiting on this rank learns
// whom this rank waits on. One publication per op.
struct P2PPosition {
  std::uint32_t group_id = 0;
  int group_rank = -1;
  std::uint64_t call = 0;
  const char* what = "";
  Clock::time_point first_wait{};
  bool published = false;

  P2PPosition() = default;
  P2PPosition(const detail::GroupImpl& g, const char* op)
      : group_id(g.id), group_rank(g.my_rank), call(next_call_number(g)), what(op) {}
  // Waits on r until `until` or the moment to publish, whichever is first,
  // and publishes if that moment has come with r still pending.
  void wait(Engine& e, Request& r, Deadline until) {
    if (published || r.done.load(std::memory_order_acquire)) return;
    if (first_wait == Clock::time_point{}) first_wait = Clock::now();
    const auto due = first_wait + PositionPublisher::kPublishAfter;
    Request* rp = &r;
    if (e.wait_any(&rp, 1, Deadline{std::min(until.at, due)}, r.peer) || Clock::now() < due) return;
    published = true;
    publish_position(e, group_id, group_rank, call, what, r.bytes, {r.peer});
  }
};

struct P2PWork final : detail::WorkState {
  Engine* engine = nullptr;
  Request req;
  // A device tensor's pinned stand-in: an irecv's bytes go to the device once
  // the message is in, and the Work completes when they are there.
  std::shared_ptr<detail::DeviceStaging> staging;
  bool wait_until(Deadline until) override { return wait_request(until) && settle_device(until); }
  bool settle_device(Deadline until) {
    if (!staging || req.error) return true;
    return staging->settle(until, op_deadline, req.received);
  }
  bool wait_request(Deadline until) {
    if (req.done.load(std::memory_order_acquire)) return true;
    position.wait(*engine, req, until);
    if (until.at < op_deadline.at) return engine->wait_any(&req_ptr, 1, until, req.peer);
    engine->wait_any(&req_ptr, 1, until, req.peer);
    if (!req.done.load(std::memory_order_acquire))
      engine->cancel(req, std::make_exception_ptr(Error(
          ErrorCode::Timeout,
          fmt::format("{} rank {} (tag {}) timed out after {} ms",
                      req.kind == Request::Kind::Send ? "isend to" : "irecv from", req.peer,
                      req.env.tag, req.timeout.count()),
          req.peer)));
    return true;
  }
  bool test() override { return engine->test(req) && settle_device(Deadline{Clock::now()}); }
  std::exception_ptr error() override {
    if (auto e = engine->translate(req.error, req)) {
      const char* what = req.kind == Request::Kind::Send ? "isend" : "irecv";
      // Diagnosed once: the store is read at most once per op.
      if (!diagnosed) diagnosed = explain(*engine, *group, e, req, what);
      return diagnosed;
    }
    return staging ? staging->error() : nullptr;
  }
  std::shared_ptr<const detail::GroupImpl> group;  // its op's (blame_leaver, the diagnosis of a timeout)
  std::exception_ptr diagnosed;
  P2PPosition position;
  int source() override { return req.source; }
  std::int64_t received_count() override {
    return req.kind == Request::Kind::Recv ? static_cast<std::int64_t>(req.received / elem) : -1;
  }
  std::size_t elem = 1;  // the tensor's element size
  Request* req_ptr = &req;
};

// Fills r for `t` on the op's group; returns the deadline.
Deadline prepare(Request& r, const Tensor& t, int peer, bool is_send, const OpOptions& o,
                 const char* op) {
  const auto& g = op_group(o, op);
  check_tensor(t, "tensor", op);
  if (is_send || peer != ANY_SOURCE) check_member(g, peer, is_send ? "dst" : "src", op);
  r.peer = peer;
  r.env = Envelope{p2p_ctx(g), o.tag, wire_dtype(t.dtype)};
  r.buf = t.data;
  r.bytes = t.nbytes();
  r.timeout = op_timeout(o);
  return Deadline::after(r.timeout);
}

// Engine::wait, with blame_leaver on its error, and the op's position
// published once it has waited long (P2PPosition).
void wait_blaming_leaver(Engine& e, Request& r, Deadline d, const detail::GroupImpl& g, const char* what) {
  try {
    P2PPosition(g, what).wait(e, r, d);
    e.wait(r, d);
  } catch (const Error&) {
    std::rethrow_exception(explain(e, g, std::current_exception(), r, what));
  }
}

Work start_async(const Tensor& t_arg, int peer, bool is_send, const OpOptions& o, const char* op) {
  auto w = std::make_shared<P2PWork>();
  Context& c = op_context(o);
  w->engine = c.engine.get();
  auto staging = std::make_shared<detail::DeviceStaging>(o.stream, op);
  const Tensor t = staging->stage(t_arg, is_send ? detail::StageDir::In : detail::StageDir::Out, "tensor");
  const Deadline d = prepare(w->req, t, peer, is_send, o, op);
  w->elem = t.element_size();
  const auto& g = op_group(o, op);
  w->group = (o.group ? *o.group : c.world).impl();
  w->position = P2PPosition(g, op);
  if (staging->active()) {
    // An isend of device memory posts once the data is on the host: it waits
    // here for the stream's earlier work and the copy.
    staging->begin();
    staging->wait_inputs(d);
    w->staging = std::move(staging);
  }
  w->op_deadline = d;
  c.engine->set_async(w->req, w, d);
  if (is_send) c.engine->post_send(w->req, d);
  else c.engine->post_recv(w->req);
  return Work(std::move(w));
}

}  // namespace

Work send(const Tensor& t_arg, int dst, const OpOptions& o) {
  if (o.async_op) return isend(t_arg, dst, o);
  detail::DeviceStaging staging(o.stream, "send");
  const Tensor t = staging.stage(t_arg, detail::StageDir::In, "tensor");
  Request r;
  const Deadline d = prepare(r, t, dst, true, o, "send");
  staging.begin();
  staging.wait_inputs(d);
  Engine& e = *op_context(o).engine;
  e.post_send(r, d);
  wait_blaming_leaver(e, r, d, op_group(o, "send"), "send");
  return Work();
}

int recv(const Tensor& t_arg, int src, const OpOptions& o) {
  detail::DeviceStaging staging(o.stream, "recv");
  const Tensor t = staging.stage(t_arg, detail::StageDir::Out, "tensor");
  Request r;
  const Deadline d = prepare(r, t, src, false, o, "recv");
  r.deadline = d;
  Engine& e = *op_context(o).engine;
  e.post_recv(r);
  wait_blaming_leaver(e, r, d, op_group(o, "recv"), "recv");
  staging.end(r.received);  // what arrived goes to the device, in stream order
  return r.source;
}

Work isend(const Tensor& t, int dst, const OpOptions& o) { return start_async(t, dst, true, o, "isend"); }

Work irecv(const Tensor& t, int src, const OpOptions& o) { return start_async(t, src, false, o, "irecv"); }

}  // namespace braid
