#include "runtime/gpu_resources.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#endif

namespace sonopipe {
namespace {

// Host buffers are aligned for the widest vector loads the CPU stages use.
constexpr std::size_t kHostAlignment = 64;

[[noreturn, maybe_unused]] void no_cuda() {
  throw std::logic_error("CUDA memory or handles requested in a build without CUDA");
}

}  // namespace

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)),
      kind_(other.kind_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

void Buffer::release() {
  if (!data_) return;
  switch (kind_) {
    case MemoryKind::host: std::free(data_); break;
#ifdef SONOPIPE_WITH_CUDA
    case MemoryKind::pinned: cudaFreeHost(data_); break;
    case MemoryKind::device: cudaFree(data_); break;
#else
    default: break;
#endif
  }
  data_ = nullptr;
  capacity_ = 0;
}

void Buffer::reserve(MemoryKind kind, std::size_t bytes) {
  if (data_ && kind == kind_ && bytes <= capacity_) return;
  release();
  kind_ = kind;
  if (bytes == 0) return;
  switch (kind) {
    case MemoryKind::host: {
      std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
      data_ = std::aligned_alloc(kHostAlignment, rounded);
      if (!data_) throw std::bad_alloc();
      break;
    }
#ifdef SONOPIPE_WITH_CUDA
    // Portable: a result buffer may be released last by another thread (a ZeroMQ I/O thread).
    case MemoryKind::pinned: SONOPIPE_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable)); break;
    case MemoryKind::device: SONOPIPE_CUDA_CHECK(cudaMalloc(&data_, bytes)); break;
#else
    default: no_cuda();
#endif
  }
  capacity_ = bytes;
}

void zero_buffer(Buffer& buffer, std::size_t bytes) {
  if (!buffer.data() || bytes == 0) return;
  if (buffer.kind() != MemoryKind::device) {
    std::memset(buffer.data(), 0, bytes);
    return;
  }
#ifdef SONOPIPE_WITH_CUDA
  SONOPIPE_CUDA_CHECK(cudaMemset(buffer.data(), 0, bytes));
#else
  no_cuda();
#endif
}

#ifdef SONOPIPE_WITH_CUDA

GpuStreamHandle::GpuStreamHandle() {
  SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
GpuStreamHandle::~GpuStreamHandle() {
  if (stream_) cudaStreamDestroy(stream_);
}

GpuEvent::GpuEvent() { SONOPIPE_CUDA_CHECK(cudaEventCreate(&event_)); }
GpuEvent::~GpuEvent() {
  if (event_) cudaEventDestroy(event_);
}
void GpuEvent::record(GpuStream stream) { SONOPIPE_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void GpuEvent::wait_on(GpuStream stream) const {
  SONOPIPE_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}
void GpuEvent::synchronize() const { SONOPIPE_CUDA_CHECK(cudaEventSynchronize(event_)); }
double GpuEvent::milliseconds_since(const GpuEvent& earlier) const {
  float ms = 0;
  SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, earlier.event_, event_));
  return ms;
}

void copy_to_device_async(void* device, const void* host, std::size_t bytes, GpuStream stream) {
  if (bytes) SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
}
void copy_to_host_async(void* host, const void* device, std::size_t bytes, GpuStream stream) {
  if (bytes) SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
}
void use_gpu_device(int device_id) { SONOPIPE_CUDA_CHECK(cudaSetDevice(device_id)); }
void register_host_memory(void* host, std::size_t bytes) {
  SONOPIPE_CUDA_CHECK(cudaHostRegister(host, bytes, cudaHostRegisterPortable));
}
void unregister_host_memory(void* host) { SONOPIPE_CUDA_CHECK(cudaHostUnregister(host)); }

#else

GpuStreamHandle::GpuStreamHandle() { no_cuda(); }
GpuStreamHandle::~GpuStreamHandle() = default;
GpuEvent::GpuEvent() { no_cuda(); }
GpuEvent::~GpuEvent() = default;
void GpuEvent::record(GpuStream) { no_cuda(); }
void GpuEvent::wait_on(GpuStream) const { no_cuda(); }
void GpuEvent::synchronize() const { no_cuda(); }
double GpuEvent::milliseconds_since(const GpuEvent&) const { no_cuda(); }
void copy_to_device_async(void*, const void*, std::size_t, GpuStream) { no_cuda(); }
void copy_to_host_async(void*, const void*, std::size_t, GpuStream) { no_cuda(); }
void register_host_memory(void*, std::size_t) { no_cuda(); }
void unregister_host_memory(void*) { no_cuda(); }
void use_gpu_device(int) { no_cuda(); }

#endif

}  // namespace sonopipe
