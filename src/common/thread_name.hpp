// name_thread: gives a thread Braid starts a name that top -H, perf, gdb and
// /proc/<pid>/task/*/comm show ("braid-async" rather than a second
// "python3"), so a profile of an application separates Braid's background
// work from the application's own threads. Best effort: Linux allows 15
// characters, and a failure changes nothing but the label.
#pragma once

#include <pthread.h>

#include <thread>

namespace braid {

inline void name_thread(std::thread& t, const char* name) { pthread_setname_np(t.native_handle(), name); }

}  // namespace braid
