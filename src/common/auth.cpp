#include "src/common/auth.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "braid/version.hpp"
#include "src/common/errors.hpp"

#if BRAID_HAVE_OPENSSL
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#endif

namespace braid::auth {

bool available() { return BRAID_HAVE_OPENSSL != 0; }

Mac Secret::mac(std::string_view label, View a, View b) const {
  Mac out{};
#if BRAID_HAVE_OPENSSL
  std::vector<std::uint8_t> msg(label.begin(), label.end());
  msg.push_back(0);
  msg.insert(msg.end(), a.begin(), a.end());
  msg.insert(msg.end(), b.begin(), b.end());
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), msg.data(), msg.size(), out.data(), &len) ||
      len != out.size())
    fail(ErrorCode::Internal, "HMAC-SHA256 failed in libcrypto");
#else
  (void)label, (void)a, (void)b;
  fail(ErrorCode::NotSupported, "this Braid was built without OpenSSL's libcrypto: it cannot authenticate");
#endif
  return out;
}

bool Secret::check(const Mac& m, std::string_view label, View a, View b) const {
  const Mac want = mac(label, a, b);
#if BRAID_HAVE_OPENSSL
  return CRYPTO_memcmp(want.data(), m.data(), m.size()) == 0;
#else
  return false;
#endif
}

namespace {
std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}
}  // namespace

std::shared_ptr<const Secret> secret_from_env() {
  std::string key;
  if (const char* t = std::getenv("BRAID_JOB_TOKEN"); t && *t) {
    key = t;
  } else if (const char* path = std::getenv("BRAID_JOB_TOKEN_FILE"); path && *path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      fail(ErrorCode::InvalidArgument, "BRAID_JOB_TOKEN_FILE = '{}' cannot be read: expected a file holding the job's "
           "secret", path);
    std::ostringstream all;
    all << in.rdbuf();
    key = trimmed(all.str());
    if (key.empty())
      fail(ErrorCode::InvalidArgument, "BRAID_JOB_TOKEN_FILE = '{}' is empty: expected a file holding the job's "
           "secret", path);
  } else {
    return nullptr;
  }
  if (!available())
    fail(ErrorCode::NotSupported, "BRAID_JOB_TOKEN is set, but this Braid was built without OpenSSL's libcrypto "
         "(meson feature 'openssl'; Debian: libssl-dev), so it cannot authenticate the job: unset it, or rebuild");
  return std::make_shared<const Secret>(std::move(key));
}

Nonce fresh_nonce() {
  Nonce n{};
#if BRAID_HAVE_OPENSSL
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    fail(ErrorCode::Internal, "libcrypto's RAND_bytes failed to make a nonce");
#else
  fail(ErrorCode::NotSupported, "this Braid was built without OpenSSL's libcrypto: it cannot authenticate");
#endif
  return n;
}

std::string new_token() {
  const Nonce n = fresh_nonce();
  std::string s;
  static const char* hex = "0123456789abcdef";
  for (auto b : n) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

}  // namespace braid::auth
