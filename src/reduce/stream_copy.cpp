// copy_streaming: a memcpy whose stores bypass the cache (non-temporal).
//
// Why: an ordinary store to a line that is not in cache first reads the line
// from memory (read for ownership), so a large copy into cold memory moves
// three bytes per byte copied. A streaming store writes the whole line
// without reading it: two. For the final writes of a large collective into
// an Output that nothing reads back during the call, that is a third less
// DRAM traffic (one_sided.cpp says when it is used). The price: the bytes
// are not in cache afterwards, which is why small outputs do not use it.
//
// The body is 32-byte AVX2 stores where the CPU has them, else 16-byte SSE2
// ones (every x86-64); one store per cycle outruns memory either way. Head
// and tail up to the destination's 64-byte alignment are ordinary copies.
// An sfence at the end orders the streaming stores before whatever the
// caller stores next (a flag a peer reads, say): they are weakly ordered.
#include <cstring>

#include "src/common/errors.hpp"
#include "src/reduce/cpu_reduce.hpp"
#include "src/reduce/kernels_prelude.hpp"

namespace braid::reduction {

namespace {
#if BRAID_REDUCE_X86
constexpr std::uintptr_t kLine = 64;

__attribute__((target("avx2"))) void body_avx2(char* d, const char* s, std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i, d += kLine, s += kLine) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
  }
}

void body_sse2(char* d, const char* s, std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i, d += kLine, s += kLine)
    for (std::size_t k = 0; k < kLine; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k)));
}
#endif
}  // namespace

void copy_streaming(void* dst, const void* src, std::size_t bytes) { copy_streaming_on(active_isa(), dst, src, bytes); }

void copy_streaming_on(Isa isa, void* dst, const void* src, std::size_t bytes) {
  if (!isa_supported(isa))
    fail(ErrorCode::NotSupported, "copy_streaming: the {} path needs instructions this CPU lacks", isa_name(isa));
#if BRAID_REDUCE_X86
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const std::size_t head = (kLine - reinterpret_cast<std::uintptr_t>(d) % kLine) % kLine;
  if (bytes < head + kLine) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  const std::size_t lines = bytes / kLine;
  if (isa != Isa::Generic) body_avx2(d, s, lines);
  else body_sse2(d, s, lines);
  _mm_sfence();
  std::memcpy(d + lines * kLine, s + lines * kLine, bytes - lines * kLine);
#else
  (void)isa;
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace braid::reduction
