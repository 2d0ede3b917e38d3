// Matcher: the one message-matching layer above every transport.
//
// A message matches a receive when their contexts and tags are equal and the
// receive's source is the sender or ANY_SOURCE. Receives match in the order
// they were posted and messages in the order they arrived from each sender
// (the transports deliver each sender's messages in order), which gives MPI's
// non-overtaking rule per (sender, context, tag) across the small-message and
// rendezvous paths alike: both are matched when their header arrives.
//
// Not thread-safe by itself: the engine mutex guards it.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>

#include "core/request.hpp"

namespace braid {

class Transport;

// A message that arrived (or whose announcement arrived) before its receive.
struct Unexpected {
  enum class Kind : std::uint8_t {
    Eager,       // payload arrives into `data`
    Rendezvous,  // only announced; the transport pulls it when matched
    Local,       // a send to oneself; `local_send` still holds the data
  };
  Kind kind = Kind::Eager;
  int src = -1;
  Envelope env;
  std::size_t bytes = 0;
  std::unique_ptr<std::uint8_t[]> data;  // Eager
  std::size_t arrived = 0;               // Eager: payload bytes so far
  Request* waiter = nullptr;  // Eager: a receive matched before all bytes came
  Transport* transport = nullptr;  // Rendezvous
  Connection* conn = nullptr;      // Rendezvous: where the announcement came from
  std::uint64_t send_token = 0;    // Rendezvous
  std::uint64_t remote_addr = 0;   // Rendezvous over shared memory or RDMA: the sender's buffer
  std::uint32_t remote_key = 0;    // Rendezvous over RDMA: its memory key (rkey)
  Request* local_send = nullptr;   // Local
};

// Whether message `env` of `bytes` from `src` may land in receive r: null if
// so, else the receive's error: a buffer smaller than the message, or a
// dtype other than the sender's (the message is then consumed and dropped;
// the sender is not told). The text names both sides' dtype and size.
std::exception_ptr receive_error(const Request& r, int src, const Envelope& env, std::size_t bytes);

class Matcher {
 public:
  // First posted receive that matches a message from `src`, unlinked; or null.
  Request* take_posted(int src, const Envelope& env);
  void post(Request& r);
  void unpost(Request& r);
  // First unexpected message that matches receive r, removed; or null.
  std::unique_ptr<Unexpected> take_unexpected(const Request& r);
  Unexpected& add_unexpected(std::unique_ptr<Unexpected> u);
  // Drops unexpected messages from `src` (or all if src < 0), for failure
  // handling; returns local sends that were waiting in them.
  template <class F>
  void for_each_posted(F&& f) {
    for (Request* r = head_; r;) {
      Request* next = r->next;
      f(*r);
      r = next;
    }
  }
  std::deque<std::unique_ptr<Unexpected>>& unexpected() { return unexpected_; }

 private:
  static bool matches(const Request& r, int src, const Envelope& env);
  Request* head_ = nullptr;
  Request* tail_ = nullptr;
  std::deque<std::unique_ptr<Unexpected>> unexpected_;
};

}  // namespace braid
