// Per-thread state reached cheaply on every call.
//
// A `thread_local` with a destructor is reached through a guard variable and
// __tls_get_addr in a shared library (about 6% of an 8-byte all_reduce). Here
// the hot lookup is a plain pointer without a destructor, which libbraid
// reaches through a TLS descriptor (-mtls-dialect=gnu2, meson.build): a
// fixed offset once resolved, for a library linked into its program, and
// still correct in one dlopen()ed late. (Initial-exec TLS would be as fast
// but marks the library STATIC_TLS, and the CUDA build's 8 KiB of TLS from
// the static CUDA runtime does not fit glibc's reserve for a late dlopen.)
// The object is made on the thread's first use and freed when the thread
// exits, through a second thread_local touched once.
#pragma once

#include <memory>

namespace braid {

template <class T>
T& per_thread() {
  static thread_local T* p = nullptr;
  if (__builtin_expect(p != nullptr, 1)) return *p;
  // The owner clears p when the thread's destructors run; a call made after
  // that (from a later destructor) gets an object of its own that is never
  // freed, rather than a freed one.
  static thread_local bool gone = false;
  struct Owner {
    std::unique_ptr<T> obj;
    ~Owner() {
      p = nullptr;
      gone = true;
    }
  };
  if (gone) return *(p = new T());  // deliberately leaked: see above
  static thread_local Owner owner;
  owner.obj = std::make_unique<T>();
  return *(p = owner.obj.get());
}

}  // namespace braid
