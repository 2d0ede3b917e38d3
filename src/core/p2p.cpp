// Point-to-point: send, recv, isend, irecv. A blocking op keeps its Request
// on the stack; an async one in a P2PWork that the engine keeps alive until
// the request completes, even if the caller drops the Work.
#include <memory>

#include "braid/ops.hpp"
#include "common/errors.hpp"
#include "core/context.hpp"
#include "core/work_state.hpp"

namespace braid {

namespace {

struct P2PWork final : detail::WorkState {
  Engine* engine = nullptr;
  Request req;
  bool wait_until(Deadline until) override {
    if (req.done.load(std::memory_order_acquire)) return true;
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
  bool test() override { return engine->test(req); }
  std::exception_ptr error() override { return engine->translate(req.error); }
  int source() override { return req.source; }
  Request* req_ptr = &req;
};

// Fills r for `t` on the op's group; returns the deadline.
Deadline prepare(Request& r, const Tensor& t, int peer, bool is_send, const OpOptions& o,
                 const char* op) {
  const auto& g = op_group(o, op);
  check_tensor(t, "tensor", op);
  if (is_send || peer != ANY_SOURCE) check_member(g, peer, is_send ? "dst" : "src", op);
  r.peer = peer;
  r.env = Envelope{p2p_ctx(g), o.tag};
  r.buf = t.data;
  r.bytes = t.nbytes();
  r.timeout = op_timeout(o);
  return Deadline::after(r.timeout);
}

Work start_async(const Tensor& t, int peer, bool is_send, const OpOptions& o, const char* op) {
  auto w = std::make_shared<P2PWork>();
  Context& c = context();
  w->engine = c.engine.get();
  const Deadline d = prepare(w->req, t, peer, is_send, o, op);
  w->op_deadline = d;
  c.engine->set_async(w->req, w, d);
  if (is_send) c.engine->post_send(w->req, d);
  else c.engine->post_recv(w->req);
  return Work(std::move(w));
}

}  // namespace

Work send(const Tensor& t, int dst, const OpOptions& o) {
  if (o.async_op) return isend(t, dst, o);
  Request r;
  const Deadline d = prepare(r, t, dst, true, o, "send");
  Engine& e = *context().engine;
  e.post_send(r, d);
  e.wait(r, d);
  return Work();
}

int recv(const Tensor& t, int src, const OpOptions& o) {
  Request r;
  const Deadline d = prepare(r, t, src, false, o, "recv");
  r.deadline = d;
  Engine& e = *context().engine;
  e.post_recv(r);
  e.wait(r, d);
  return r.source;
}

Work isend(const Tensor& t, int dst, const OpOptions& o) { return start_async(t, dst, true, o, "isend"); }

Work irecv(const Tensor& t, int src, const OpOptions& o) { return start_async(t, src, false, o, "irecv"); }

}  // namespace braid
