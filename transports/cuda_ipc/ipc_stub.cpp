// CUDA IPC where CUDA is not built: the same interface, refusing.
#include "transports/cuda_ipc/ipc.hpp"

#include "src/common/errors.hpp"

namespace braid::cuda_ipc {

namespace {
[[noreturn]] void unsupported(const char* what) {
  fail(ErrorCode::NotSupported, "{}: {}", what, cuda::unavailable_reason());
}
}  // namespace

Export export_memory(const void*) { unsupported("CUDA IPC export_memory"); }
void* open(const Handle&) { unsupported("CUDA IPC open"); }
void* open_pinned(const Handle&) { unsupported("CUDA IPC open"); }
void unpin(const Handle&) {}
bool evict(const Handle&) { unsupported("CUDA IPC evict"); }
void evict_all() noexcept {}
std::size_t open_count() { return 0; }
cuda::Event interprocess_event() { unsupported("CUDA interprocess event"); }
Handle event_handle(const cuda::Event&) { unsupported("CUDA interprocess event"); }
cuda::Event open_event(const Handle&) { unsupported("CUDA open interprocess event"); }

}  // namespace braid::cuda_ipc
