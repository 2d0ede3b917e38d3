// with_window: calls f with the group's window as its concrete type, so the
// one-sided runner (src/runtime/one_sided.cpp) is compiled once per kind
// and its hot loop makes no virtual call. Part of the registry: with
// registry.cpp, the only place that names the concrete windows.
#pragma once

#include "src/common/errors.hpp"
#include "transports/one_sided.hpp"
#include "transports/shm/window.hpp"
#if BRAID_HAVE_VERBS
#include "transports/verbs/window.hpp"
#endif

namespace braid::transports {

template <class F>
void with_window(onesided::Window& w, F&& f) {
  if (auto* s = dynamic_cast<shm::Window*>(&w)) return f(*s);
#if BRAID_HAVE_VERBS
  if (auto* v = dynamic_cast<verbs::Window*>(&w)) return f(*v);
#endif
  fail(ErrorCode::Internal, "a one-sided window of kind '{}' has no runner in this build", w.transport());
}

}  // namespace braid::transports
