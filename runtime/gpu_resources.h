// Owned memory and CUDA handles for the executor's slots: host, pinned host and device buffers,
// streams and events. Everything compiles without CUDA; asking for pinned or device memory in
// such a build throws std::logic_error (the executor never does on the CPU backend).
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "sdk/backend.h"

struct CUevent_st;
struct CUmemPoolHandle_st;

namespace sonopipe {

enum class MemoryKind { host, pinned, device };

// Pinned blocks kept for reuse (MemoryPool), by capacity: a block is handed out for a request it
// holds without wasting more than the request again (capacity <= 2 x bytes); blocks are kept while
// their total stays within `keep_bytes`. Plain bookkeeping, no CUDA (tests/runtime/memory_pool_test.cpp).
class KeptBlocks {
 public:
  explicit KeptBlocks(std::size_t keep_bytes) : keep_bytes_(keep_bytes) {}
  struct Block {
    void* data = nullptr;
    std::size_t capacity = 0;
  };
  // The smallest kept block that holds `bytes` within the waste bound (removed), or none.
  Block take(std::size_t bytes);
  // Keeps `block` (true) unless that would pass keep_bytes (false: the caller frees it).
  bool keep(Block block);
  // Hands every kept block over (to be freed) and keeps none.
  std::multimap<std::size_t, void*> take_all();
  std::size_t kept_bytes() const { return kept_bytes_; }

 private:
  const std::size_t keep_bytes_;
  std::size_t kept_bytes_ = 0;
  std::multimap<std::size_t, void*> blocks_;  // capacity -> data
};

// Memory a device lane allocates and lets go of while frames run. cudaMalloc, cudaHostAlloc, cudaFree
// and cudaFreeHost take the driver's locks (and the frees wait for the whole device): every stream's
// launches and copies on the device wait meanwhile, the frames of this pipeline and of every other
// (measured on the H200: a `set` that allocated 3 x 2 MB held every pipeline's next frame for the
// 3-4 ms it took). Here:
// - device memory comes from a stream-ordered pool of the lane's own (cudaMallocFromPoolAsync on a
//   side stream, which the calling thread waits for: the memory is ready for any stream on return)
//   and goes back with cudaFreeAsync on that stream: no device synchronisation. The pool keeps what
//   it has reserved (release threshold: never), so memory let go of is reused without the driver.
// - pinned host memory likewise from a host-located pool, where the device supports one
//   (cudaDevAttrHostMemoryPoolsSupported); elsewhere from cudaHostAlloc, and memory let go of is
//   kept (KeptBlocks, up to `keep_pinned_bytes`) and handed out again to a later pinned buffer it
//   fits; past the bound it is freed (cudaFreeHost, which waits for the device).
// - reserve() makes a pool hold more than is in use, so that later allocations up to that much
//   (a live change to a larger shape) are served without the driver.
// Everything returns to the driver when the pool goes (the last buffer from it is gone).
// The rule: release() only memory that no work on the device uses any more, as the host has seen
// (an event or stream synchronised after that work). cudaFreeAsync on the side stream is ordered after
// nothing the other streams do, and unlike cudaFree it does not wait for the device; every allocation
// and free is on that one stream, so the pool's reuse policies (opportunistic, internal dependencies)
// never pair a free with an allocation on another stream, and a block is handed out again only after
// its free, which the caller issued after the host saw its last use finish. A device lane keeps the
// rule: a slot lets go of its frame's setup after waiting for the frame's `done` event, a setup is
// freed once no slot holds it, buffers grow in place only with no frame in flight, a stream state is
// evicted only then; result buffers go back when the last receiver (e.g. a ZeroMQ I/O thread) has
// read them, after the D2H was waited for.
// Thread-safe. A build without CUDA throws std::logic_error on construction.
class MemoryPool {
 public:
  MemoryPool(int device_id, std::size_t keep_pinned_bytes);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // `kind` device or pinned; `capacity` is set to the bytes the block holds (>= bytes).
  void* allocate(MemoryKind kind, std::size_t bytes, std::size_t& capacity);
  void release(MemoryKind kind, void* data, std::size_t capacity);
  // Makes the pool hold at least `bytes` of `kind` beyond what is in use (allocated and let go of at
  // once). Pinned memory without a host pool: nothing.
  void reserve(MemoryKind kind, std::size_t bytes);
  std::size_t in_use(MemoryKind kind) const;  // bytes allocated and not let go of
  bool pinned_pool() const { return host_pool_ != nullptr; }  // pinned memory from a host pool
  std::size_t pinned_kept_bytes() const;                      // without one: kept blocks
  int device_id() const { return device_id_; }

 private:
  const int device_id_;
  CUmemPoolHandle_st* pool_ = nullptr;       // device
  CUmemPoolHandle_st* host_pool_ = nullptr;  // pinned host (null: cudaHostAlloc + kept blocks)
  GpuStream stream_ = nullptr;  // where pool blocks are allocated and freed
  std::atomic<std::size_t> device_in_use_{0}, pinned_in_use_{0};
  mutable std::mutex pinned_mutex_;
  KeptBlocks pinned_;
};

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
  // The same, device and pinned memory from `pool` (and given back to it); host memory as above.
  void reserve(MemoryKind kind, std::size_t bytes, const std::shared_ptr<MemoryPool>& pool);
  void* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }
  MemoryKind kind() const { return kind_; }
  void release();

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
  MemoryKind kind_ = MemoryKind::host;
  std::shared_ptr<MemoryPool> pool_;  // where data_ came from (null: cudaMalloc / cudaHostAlloc)
};

// Fills `bytes` of `buffer` with zeros. Device memory: cudaMemsetAsync on `stream`, so the work issued
// there next sees zeros (cudaMemset would run on the legacy default stream, which the lane's
// non-blocking streams are not ordered after); null `stream`: on the legacy stream, waited for.
void zero_buffer(Buffer& buffer, std::size_t bytes, GpuStream stream = nullptr);

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
