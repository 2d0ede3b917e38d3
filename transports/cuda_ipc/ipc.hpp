// CUDA IPC: device memory and events of one process opened in another, on
// one host (several processes may share one GPU). The transport's
// primitives: exporting a buffer, opening a peer's (with the cache that
// sharing one mapping per process needs), and interprocess events.
//
// Between processes on one host (several may share one GPU). The exporter
// takes export_memory(p) and sends the 64 bytes (plus the offset) to the
// importer by any means (the store, a message); the importer maps the
// allocation with open(handle), once per process: the mapping is cached,
// keyed by the handle's bytes, and later opens of the same handle return the
// same base address. Mappings are closed when evicted (evict, e.g. when
// the exporter says it freed the memory), to make room (at most 64 open and
// a quarter of the device's memory mapped, at least 1 GiB: the least
// recently used unpinned one goes first), or at process exit. A mapping
// keeps the exporter's memory alive after it frees it: the bounds are what
// a process can hold of its peers' freed memory.
//
// Visibility: the mapping is the same memory, not a copy. Writes by one
// process are seen by another only once they are complete and the reader is
// ordered after them: the writer records an interprocess event after its
// kernel/copy (interprocess_event), the reader opens its handle once
// (open_event) and makes its stream wait on it (cuda::Event::wait_on) before
// reading. Nothing orders the two processes' streams otherwise. The exporter
// must keep the allocation alive (not cudaFree it) while any importer has it
// open: freeing first is undefined behaviour in CUDA.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "cuda_kernels/cuda.hpp"

namespace braid::cuda_ipc {

struct Handle {
  std::array<unsigned char, 64> bytes{};  // a cudaIpcMemHandle_t / cudaIpcEventHandle_t
  friend bool operator==(const Handle&, const Handle&) = default;
};

struct Export {
  Handle handle;         // of the whole allocation holding p
  std::size_t offset = 0;   // p - allocation base
  std::size_t size = 0;     // the allocation's size in bytes
  int device = -1;          // the device the allocation lives on
  std::uint64_t buffer_id = 0;  // the driver's id of the allocation (never reused); 0 if unknown
};

// The handle for device memory p (any address inside a cudaMalloc'd
// allocation; cudaIpcGetMemHandle is called on the allocation's base).
// InvalidArgument for host or managed memory (IPC cannot share those).
Export export_memory(const void* p);

// Maps a peer's allocation into this process (cudaIpcOpenMemHandle with
// cudaIpcMemLazyEnablePeerAccess, on the current device) and returns its base
// address here; opened once per process, then served from the cache. An
// export of this same process cannot be opened (CUDA refuses): use p itself.
void* open(const Handle& h);
// The same, and pins the mapping: it is not closed (by the cache making
// room, or evict) until as many unpin calls: for mappings that
// enqueued work may still use.
void* open_pinned(const Handle& h);
void unpin(const Handle& h);

// Closes the mapping if open and not pinned (cudaIpcCloseMemHandle) and
// forgets it; every pointer into it is invalid afterwards. Returns whether
// it closed one.
bool evict(const Handle& h);
// Closes every cached mapping (also done at process exit).
void evict_all() noexcept;
// Mappings currently open, for tests and diagnostics.
std::size_t open_count();

// An event another process can wait on (cudaEventInterprocess; timing
// disabled, as CUDA requires), and its 64-byte handle to send there.
cuda::Event interprocess_event();
Handle event_handle(const cuda::Event& e);
// Opens a peer's interprocess event: record() is the peer's business,
// query()/synchronize()/wait_on() here see its latest record as of when
// they are called. Not cached (an event handle may be opened many times).
cuda::Event open_event(const Handle& h);

}  // namespace braid::cuda_ipc
