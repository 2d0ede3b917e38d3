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
#include <vector>

#include "transports/message.hpp"

namespace braid {

class Matcher {
 public:
  // First posted receive that matches a message from `src`, unlinked; or null.
  Request* take_posted(int src, const Envelope& env);
  void post(Request& r);
  void unpost(Request& r);
  // First unexpected message that matches receive r, removed; or null.
  std::unique_ptr<Unexpected> take_unexpected(const Request& r);
  Unexpected& add_unexpected(std::unique_ptr<Unexpected> u);
  template <class F>
  void for_each_posted(F&& f) {
    for (Request* r = head_; r;) {
      Request* next = r->next;
      f(*r);
      r = next;
    }
  }
  // For iteration; unexpected messages leave only through take_unexpected
  // or clear_unexpected (which keep held_bytes() right).
  const std::deque<std::unique_ptr<Unexpected>>& unexpected() const { return unexpected_; }
  void clear_unexpected();
  // Removes and returns the unexpected messages `drop` picks (a poisoned
  // group's: Engine), keeping held_bytes() right.
  template <class F>
  std::vector<std::unique_ptr<Unexpected>> take_unexpected_if(F&& drop) {
    std::vector<std::unique_ptr<Unexpected>> out;
    for (auto it = unexpected_.begin(); it != unexpected_.end();) {
      if (drop(**it)) {
        if ((*it)->kind == Unexpected::Kind::Eager) held_bytes_ -= (*it)->bytes;
        out.push_back(std::move(*it));
        it = unexpected_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  // Removes a local send's entry (a cancelled send to oneself).
  void drop_local_send(const Request& r);
  // Bytes of message data held for receives not yet posted (eager copies).
  std::size_t held_bytes() const { return held_bytes_; }
  // Whether a posted receive may match a message from `src`.
  bool posted_from(int src) const;

 private:
  static bool matches(const Request& r, int src, const Envelope& env);
  Request* head_ = nullptr;
  Request* tail_ = nullptr;
  std::deque<std::unique_ptr<Unexpected>> unexpected_;
  std::size_t held_bytes_ = 0;
};

}  // namespace braid
