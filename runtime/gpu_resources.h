// Owned memory and CUDA handles for the executor's slots: host, pinned host and device buffers,
// streams and events. Everything compiles without CUDA; asking for pinned or device memory in
// such a build throws std::logic_error (the executor never does on the CPU backend).
#pragma once

#include <cstddef>
#include <memory>

#include "sdk/backend.h"

struct CUevent_st;

namespace sonopipe {

enum class MemoryKind { host, pinned, device };

// A buffer that grows on demand: reserve() reallocates only when more bytes are needed, so a
// steady stream of same-shaped frames never allocates.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void reserve(MemoryKind kind, std::size_t bytes);  // contents are lost when it reallocates
  void* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }
  MemoryKind kind() const { return kind_; }
  void release();

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
  MemoryKind kind_ = MemoryKind::host;
};

// Fills `bytes` of `buffer` with zeros (device memory through cudaMemset, synchronously).
void zero_buffer(Buffer& buffer, std::size_t bytes);

// A CUDA stream (non-blocking with respect to the legacy default stream).
class GpuStreamHandle {
 public:
  GpuStreamHandle();  // creates the stream
  ~GpuStreamHandle();
  GpuStreamHandle(const GpuStreamHandle&) = delete;
  GpuStreamHandle& operator=(const GpuStreamHandle&) = delete;
  GpuStream get() const { return stream_; }

 private:
  GpuStream stream_ = nullptr;
};

// A CUDA event with timing enabled.
class GpuEvent {
 public:
  GpuEvent();
  ~GpuEvent();
  GpuEvent(const GpuEvent&) = delete;
  GpuEvent& operator=(const GpuEvent&) = delete;

  void record(GpuStream stream);
  void wait_on(GpuStream stream) const;  // the stream waits for this event (no host sync)
  void synchronize() const;              // host waits
  // Milliseconds from `earlier` to this event; both must have completed.
  double milliseconds_since(const GpuEvent& earlier) const;

 private:
  CUevent_st* event_ = nullptr;
};

// Asynchronous copies on a stream; `to`/`from` must be pinned host or device memory.
void copy_to_device_async(void* device, const void* host, std::size_t bytes, GpuStream stream);
void copy_to_host_async(void* host, const void* device, std::size_t bytes, GpuStream stream);
// Page-locks existing host memory (e.g. a shared-memory pool) for every device, so copies from it
// are asynchronous DMA; once, not per frame. unregister_host_memory undoes it.
void register_host_memory(void* host, std::size_t bytes);
void unregister_host_memory(void* host);
// Makes `device_id` current for the calling thread.
void use_gpu_device(int device_id);

}  // namespace sonopipe
