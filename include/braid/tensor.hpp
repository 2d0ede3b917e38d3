// Tensor: a non-owning view of typed memory (pointer, 64-bit count, dtype,
// device). Braid never allocates or frees the memory a Tensor points to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace braid {

enum class DType : std::uint8_t { Int8, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kNumDTypes = 8;

std::size_t dtype_size(DType dt);
const char* dtype_name(DType dt);
bool dtype_is_floating(DType dt);

enum class DeviceType : std::uint8_t { CPU, CUDA };

// Where a tensor's memory is. CUDA tensors (cudaMalloc'd memory of device
// `index`) work in every op when Braid was built with CUDA and the machine has
// a driver and that device; otherwise the op throws Error(NotSupported) saying
// why. The device tensors of one op must all be on one device; host and
// device tensors may be mixed.
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = -1;  // CUDA device ordinal; -1 on the CPU
  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int i) { return {DeviceType::CUDA, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  friend constexpr bool operator==(const Device&, const Device&) = default;
};

// Storage types for the two 16-bit floats, so tensor(std::vector<Half>&) works.
struct Half { std::uint16_t bits; };
struct BFloat16 { std::uint16_t bits; };

template <class T> struct dtype_of;
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
// Plain char buffers are raw bytes.
template <> struct dtype_of<char> { static constexpr DType value = DType::UInt8; };
// `long long` is a distinct type from int64_t (`long`) on LP64 Linux.
template <> struct dtype_of<long long> { static constexpr DType value = DType::Int64; };

struct Tensor {
  void* data = nullptr;
  std::int64_t count = 0;  // elements, not bytes
  DType dtype = DType::Float32;
  Device device{};

  std::size_t element_size() const { return dtype_size(dtype); }
  std::size_t nbytes() const { return static_cast<std::size_t>(count) * dtype_size(dtype); }
  // A view of elements [offset, offset + n); checked, throws braid::Error.
  Tensor slice(std::int64_t offset, std::int64_t n) const;
};

// Views over caller memory. The const overloads exist so that data that is only
// read (a send, a collective's input) can be passed without a cast; Braid never
// writes through a view used as an input.
inline Tensor tensor(void* data, std::int64_t count, DType dt, Device dev = {}) {
  return Tensor{data, count, dt, dev};
}
template <class T>
Tensor tensor(T* data, std::int64_t count, Device dev = {}) {
  using U = std::remove_cv_t<T>;
  return Tensor{const_cast<U*>(data), count, dtype_of<U>::value, dev};
}
template <class T>
Tensor tensor(std::vector<T>& v) {
  return tensor(v.data(), static_cast<std::int64_t>(v.size()));
}
template <class T>
Tensor tensor(const std::vector<T>& v) {
  return tensor(v.data(), static_cast<std::int64_t>(v.size()));
}
template <class T, std::size_t N>
Tensor tensor(std::span<T, N> s) {
  return tensor(s.data(), static_cast<std::int64_t>(s.size()));
}

}  // namespace braid
