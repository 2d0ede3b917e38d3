// A TransportHost for a transport driven alone: no engine, no store, no
// collectives. The tests of tests/transports and the fuzz target of TCP
// frames (tests/fuzz) turn its progress loop by hand.
#pragma once

#include <sys/epoll.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/error.hpp"
#include "src/common/fd.hpp"
#include "transports/matcher.hpp"
#include "transports/transport.hpp"

namespace braid {

// What a transport may ask of the runtime, and no more: the fake records
// failures instead of aborting a job.
class FakeHost final : public TransportHost {
 public:
  explicit FakeHost(int rank) : rank_(rank), epoll_(::epoll_create1(EPOLL_CLOEXEC)) {}

  void complete(Request& r, std::exception_ptr error) override {
    if (r.done.load()) return;
    if (r.posted) matcher_.unpost(r);
    r.error = std::move(error);
    r.done.store(true);
  }
  Request* take_posted(int src, const Envelope& env) override { return matcher_.take_posted(src, env); }
  Unexpected& add_unexpected(std::unique_ptr<Unexpected> u) override {
    return matcher_.add_unexpected(std::move(u));
  }
  void peer_failed(int peer, const std::string& reason) override {
    failed.push_back(peer);
    reasons.push_back(reason);
    if (!abort_)
      abort_ = std::make_exception_ptr(Error(ErrorCode::PeerFailure, "rank failed: " + reason, peer));
    matcher_.for_each_posted([&](Request& r) { complete(r, abort_); });
    if (t) t->fail_all(abort_);
  }
  void peer_left(int peer) override { left.push_back(peer); }
  // The bound on unexpected bytes, as a switch (TransportHost::hold_back).
  bool hold_back(int) override { return holding; }
  void add_fd(int fd, EventSource* src, std::uint32_t events) override { ctl(EPOLL_CTL_ADD, fd, src, events); }
  void mod_fd(int fd, EventSource* src, std::uint32_t events) override { ctl(EPOLL_CTL_MOD, fd, src, events); }
  void del_fd(int fd) override { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }
  std::exception_ptr peer_error(int) const override { return abort_; }

  // One progress round, as the engine runs it, without sleeping.
  void progress() {
    t->reap();
    t->poll();
    epoll_event evs[16];
    const int n = ::epoll_wait(epoll_.get(), evs, 16, 0);
    for (int i = 0; i < n; ++i) static_cast<EventSource*>(evs[i].data.ptr)->on_events(evs[i].events);
    t->poll();
  }
  void post_recv(Request& r) {
    r.kind = Request::Kind::Recv;
    if (auto u = matcher_.take_unexpected(r)) deliver(std::move(u), r);
    else matcher_.post(r);
  }
  void post_send(Request& r) {
    r.kind = Request::Kind::Send;
    t->send(r);
  }
  std::size_t unexpected() { return matcher_.unexpected().size(); }

  int rank_;
  std::unique_ptr<Transport> t;
  std::vector<int> failed, left;
  bool holding = false;
  std::vector<std::string> reasons;

 private:
  void ctl(int op, int fd, EventSource* src, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.ptr = src;
    if (::epoll_ctl(epoll_.get(), op, fd, &ev) != 0) throw std::runtime_error("FakeHost: epoll_ctl failed");
  }
  Matcher matcher_;
  Fd epoll_;
  std::exception_ptr abort_;
};

}  // namespace braid
