#include "core/matcher.hpp"

#include <fmt/core.h>

#include "braid/error.hpp"
#include "braid/ops.hpp"

namespace braid {

std::exception_ptr truncation_error(std::size_t message_bytes, int src, std::int64_t tag,
                                    std::size_t buffer_bytes) {
  return std::make_exception_ptr(Error(
      ErrorCode::InvalidArgument,
      fmt::format("message of {} bytes from rank {} (tag {}) does not fit the receive buffer of {} bytes: "
                  "receive sizes must be at least the send size",
                  message_bytes, src, tag, buffer_bytes),
      src));
}

bool Matcher::matches(const Request& r, int src, const Envelope& env) {
  return r.env.ctx == env.ctx && r.env.tag == env.tag && (r.peer == ANY_SOURCE || r.peer == src);
}

Request* Matcher::take_posted(int src, const Envelope& env) {
  for (Request* r = head_; r; r = r->next)
    if (matches(*r, src, env)) {
      unpost(*r);
      return r;
    }
  return nullptr;
}

void Matcher::post(Request& r) {
  r.prev = tail_;
  r.next = nullptr;
  if (tail_) tail_->next = &r;
  else head_ = &r;
  tail_ = &r;
  r.posted = true;
}

void Matcher::unpost(Request& r) {
  if (!r.posted) return;
  if (r.prev) r.prev->next = r.next;
  else head_ = r.next;
  if (r.next) r.next->prev = r.prev;
  else tail_ = r.prev;
  r.prev = r.next = nullptr;
  r.posted = false;
}

std::unique_ptr<Unexpected> Matcher::take_unexpected(const Request& r) {
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (matches(r, (*it)->src, (*it)->env)) {
      auto u = std::move(*it);
      unexpected_.erase(it);
      return u;
    }
  }
  return nullptr;
}

Unexpected& Matcher::add_unexpected(std::unique_ptr<Unexpected> u) {
  unexpected_.push_back(std::move(u));
  return *unexpected_.back();
}

}  // namespace braid
