// Per-thread state reached cheaply on every call.
//
// A `thread_local` with a destructor is reached through a guard variable and
// __tls_get_addr in a shared library (about 6% of an 8-byte all_reduce). Here
// the hot lookup is a plain pointer in initial-exec TLS, at a fixed offset
// from the thread pointer; the object is made on the thread's first use and
// freed when the thread exits, through a second thread_local touched once.
// (initial-exec suits a library linked into its program; one dlopen'ed late
// draws on glibc's small static-TLS reserve, which one pointer fits.)
#pragma once

#include <memory>

namespace braid {

template <class T>
T& per_thread() {
  [[gnu::tls_model("initial-exec")]] static thread_local T* p = nullptr;
  if (__builtin_expect(p != nullptr, 1)) return *p;
  static thread_local std::unique_ptr<T> owner;
  owner = std::make_unique<T>();
  return *(p = owner.get());
}

}  // namespace braid
