// The limits every store enforces, and the TcpStore wire format.
//
// Frame (all integers little-endian), the same shape both ways:
//   magic u32 | version u16 | code u16 | nfields u32 | body_len u32 | body
//   body = nfields x (len u32 | len bytes)
// A request's code is an Op, a reply's a Status. The receiver checks the
// 16-byte header before it reads the body, so a bad magic or a huge length is
// refused before any memory is spent on it.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "src/common/errors.hpp"
#include "src/store/store.hpp"

namespace braid::store {

inline constexpr std::size_t kMaxKeyLen = 4096;
inline constexpr std::size_t kMaxValueLen = std::size_t{64} << 20;
inline constexpr std::size_t kMaxKeys = 4096;  // per wait() / check()

inline void check_key(const std::string& key) {
  if (key.empty()) fail(ErrorCode::InvalidArgument, "store key is empty: expected 1..{} bytes", kMaxKeyLen);
  if (key.size() > kMaxKeyLen)
    fail(ErrorCode::InvalidArgument, "store key of {} bytes is too long: expected at most {}",
         key.size(), kMaxKeyLen);
}

inline void check_value(const Bytes& value) {
  if (value.size() > kMaxValueLen)
    fail(ErrorCode::InvalidArgument, "store value of {} bytes is too large: expected at most {}",
         value.size(), kMaxValueLen);
}

inline void check_keys(const std::vector<std::string>& keys) {
  if (keys.size() > kMaxKeys)
    fail(ErrorCode::InvalidArgument, "{} store keys in one call: expected at most {}", keys.size(),
         kMaxKeys);
  for (const auto& k : keys) check_key(k);
}

inline void check_timeout(Millis t) {
  if (t.count() < 0)
    fail(ErrorCode::InvalidArgument, "store timeout of {} ms is negative: expected >= 0", t.count());
}

// "key 'a'" or "keys 'a', 'b'" for timeout messages (long lists are cut short).
inline std::string describe_keys(const std::vector<std::string>& keys) {
  if (keys.size() == 1) return fmt::format("key '{}'", keys[0]);
  std::string s = "keys ";
  for (std::size_t i = 0; i < keys.size() && i < 8; ++i)
    s += fmt::format("{}'{}'", i ? ", " : "", keys[i]);
  if (keys.size() > 8) s += fmt::format(" and {} more", keys.size() - 8);
  return s;
}

// The new value of add(). Counters are stored as decimal text, as torch does,
// so other clients can read them with get(); a missing key counts as 0.
inline std::int64_t added_value(const std::string& key, const Bytes* current, std::int64_t delta) {
  std::int64_t v = 0;
  if (current) {
    const char* b = reinterpret_cast<const char*>(current->data());
    const char* e = b + current->size();
    auto [end, ec] = current->empty() ? std::from_chars_result{b, std::errc::invalid_argument}
                                      : std::from_chars(b, e, v);
    if (ec != std::errc() || end != e)
      fail(ErrorCode::InvalidArgument,
           "add() on key '{}' whose value is not a decimal integer: expected a key written by add()",
           key);
  }
  std::int64_t out = 0;
  if (__builtin_add_overflow(v, delta, &out))
    fail(ErrorCode::InvalidArgument, "add({}) on key '{}' overflows its value {}", delta, key, v);
  return out;
}

inline Bytes decimal(std::int64_t v) { return to_bytes(std::to_string(v)); }

namespace wire {

inline constexpr std::uint32_t kMagic = 0x54535242;  // "BRST"
inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 16;
inline constexpr std::size_t kMaxFields = kMaxKeys;
// The largest frame is compare_set's: a key and two values.
inline constexpr std::size_t kMaxBody = kMaxKeyLen + 2 * kMaxValueLen + 3 * 4;

enum class Op : std::uint16_t {
  Set = 1, Get, TryGet, Add, CompareSet, Delete, Wait, Check, NumKeys,
  // A job with a secret (src/common/auth.hpp): a connection's first two
  // requests. Hello {client nonce} -> Ok {server nonce, server's proof}, or
  // Ok {} from a store that has no secret; Proof {client's proof} -> Ok {}.
  // Until then a store with a secret answers every other request with an
  // Error that names BRAID_JOB_TOKEN, and closes the connection.
  Hello, Proof,
};
// The labels of the two proofs (auth::Secret::mac).
inline constexpr std::string_view kServerLabel = "braid store server";
inline constexpr std::string_view kClientLabel = "braid store client";
// Error carries one field, a message; the connection stays usable after it.
enum class Status : std::uint16_t { Ok = 0, Missing = 1, Error = 2 };

using Field = std::span<const std::uint8_t>;
inline Field field(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}
inline Field field(const Bytes& b) { return {b.data(), b.size()}; }
inline std::string field_str(Field f) { return {reinterpret_cast<const char*>(f.data()), f.size()}; }
inline Bytes field_bytes(Field f) { return {f.begin(), f.end()}; }

inline void put_le(Bytes& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline std::uint64_t get_le(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

inline Bytes i64_bytes(std::int64_t v) {
  Bytes b;
  put_le(b, static_cast<std::uint64_t>(v), 8);
  return b;
}
inline std::optional<std::int64_t> i64_from(Field f) {
  if (f.size() != 8) return std::nullopt;
  return static_cast<std::int64_t>(get_le(f.data(), 8));
}

// Appends one frame to `out`. Callers have checked the limits, so the body fits.
inline void encode(Bytes& out, std::uint16_t code, const std::vector<Field>& fields) {
  std::size_t body = 0;
  for (const auto& f : fields) body += 4 + f.size();
  out.reserve(out.size() + kHeaderSize + body);
  put_le(out, kMagic, 4);
  put_le(out, kVersion, 2);
  put_le(out, code, 2);
  put_le(out, fields.size(), 4);
  put_le(out, body, 4);
  for (const auto& f : fields) {
    put_le(out, f.size(), 4);
    out.insert(out.end(), f.begin(), f.end());
  }
}

struct Header {
  std::uint16_t code;
  std::uint32_t nfields;
  std::uint32_t body_len;
};

// Nothing if the magic or version is wrong or a count is out of bounds.
inline std::optional<Header> decode_header(const std::uint8_t* p) {
  if (get_le(p, 4) != kMagic || get_le(p + 4, 2) != kVersion) return std::nullopt;
  Header h{static_cast<std::uint16_t>(get_le(p + 6, 2)), static_cast<std::uint32_t>(get_le(p + 8, 4)),
           static_cast<std::uint32_t>(get_le(p + 12, 4))};
  if (h.nfields > kMaxFields || h.body_len > kMaxBody ||
      h.body_len < std::uint64_t{4} * h.nfields)
    return std::nullopt;
  return h;
}

// Splits a body into its fields (views into `body`); false unless the fields
// tile the body exactly.
inline bool decode_fields(const std::uint8_t* body, std::size_t len, std::uint32_t nfields,
                          std::vector<Field>& out) {
  out.clear();
  std::size_t off = 0;
  for (std::uint32_t i = 0; i < nfields; ++i) {
    if (len - off < 4) return false;
    std::size_t n = get_le(body + off, 4);
    off += 4;
    if (n > len - off) return false;
    out.emplace_back(body + off, n);
    off += n;
  }
  return off == len;
}

}  // namespace wire
}  // namespace braid::store
