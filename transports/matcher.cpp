#include "transports/matcher.hpp"

#include <fmt/core.h>

#include "braid/error.hpp"
#include "braid/ops.hpp"

namespace braid {

namespace {

// "int64[4] (32 bytes)", or "32 bytes" where the dtype was not said.
std::string sized(std::uint8_t dtype, std::size_t bytes) {
  if (dtype == 0 || dtype > kNumDTypes) return fmt::format("{} bytes", bytes);
  const auto d = static_cast<DType>(dtype - 1);
  const auto es = dtype_size(d);
  if (bytes % es != 0) return fmt::format("{} bytes of {}", bytes, dtype_name(d));
  return fmt::format("{}[{}] ({} bytes)", dtype_name(d), bytes / es, bytes);
}

}  // namespace

std::exception_ptr receive_error(Request& r, int src, const Envelope& env, std::size_t bytes) {
  if (env.shape != r.env.shape && env.shape != 0 && r.env.shape != 0) {
    r.other_shape = env.shape;
    r.received = bytes;  // the runtime compares sizes too (the count may be what differs)
    return std::make_exception_ptr(Error(
        ErrorCode::InvalidArgument,
        fmt::format("rank {} sent a message of another collective call (fingerprint {:#010x}, this rank's {:#010x})",
                    src, env.shape, r.env.shape),
        src));
  }
  const bool other_dtype = env.dtype != 0 && r.env.dtype != 0 && env.dtype != r.env.dtype;
  if (!other_dtype && bytes <= r.bytes) return nullptr;
  const std::string theirs = sized(env.dtype, bytes), mine = sized(r.env.dtype, r.bytes);
  std::string text =
      other_dtype
          ? fmt::format("rank {} sent {} but this rank receives into {}: both sides must use the same dtype", src,
                        theirs, mine)
          : fmt::format("rank {} sent {} but this rank receives into {}: a receive must be at least as large as "
                        "the message", src, theirs, mine);
  // Point-to-point contexts are even (context.hpp): their tags are the
  // user's. A collective's runner names its op instead.
  if (env.ctx % 2 == 0) text = fmt::format("recv: {} (tag {})", text, env.tag);
  return std::make_exception_ptr(Error(ErrorCode::InvalidArgument, text, src));
}

std::exception_ptr rejected_send(Request& send, const Refusal& by) {
  if (by.shape != send.env.shape && by.shape != 0 && send.env.shape != 0) send.other_shape = by.shape;
  const bool other_dtype = by.dtype != 0 && send.env.dtype != 0 && by.dtype != send.env.dtype;
  return std::make_exception_ptr(Error(
      ErrorCode::InvalidArgument,
      fmt::format("the send of {} to rank {} was refused by the receive it matched there, into {}: {}",
                  sized(send.env.dtype, send.bytes), send.peer, sized(by.dtype, by.bytes),
                  other_dtype ? "both sides must use the same dtype" : "a receive must be at least as large as the message"),
      send.peer));
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
      if (u->kind == Unexpected::Kind::Eager) held_bytes_ -= u->bytes;
      return u;
    }
  }
  return nullptr;
}

void Matcher::clear_unexpected() {
  unexpected_.clear();
  held_bytes_ = 0;
}

void Matcher::drop_local_send(const Request& r) {
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it)
    if ((*it)->local_send == &r) {
      unexpected_.erase(it);
      return;
    }
}

bool Matcher::posted_from(int src) const {
  for (const Request* r = head_; r; r = r->next)
    if (r->peer == ANY_SOURCE || r->peer == src) return true;
  return false;
}

Unexpected& Matcher::add_unexpected(std::unique_ptr<Unexpected> u) {
  if (u->kind == Unexpected::Kind::Eager) held_bytes_ += u->bytes;
  unexpected_.push_back(std::move(u));
  return *unexpected_.back();
}

}  // namespace braid
