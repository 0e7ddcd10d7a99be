#include "runtime/gpu_resources.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/host_path_switches.h"
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

KeptBlocks::Block KeptBlocks::take(std::size_t bytes) {
  auto found = blocks_.lower_bound(bytes);
  if (found == blocks_.end() || found->first / 2 > bytes) return {};
  Block block{found->second, found->first};
  blocks_.erase(found);
  kept_bytes_ -= block.capacity;
  return block;
}

bool KeptBlocks::keep(Block block) {
  if (!block.data || kept_bytes_ + block.capacity > keep_bytes_) return false;
  blocks_.emplace(block.capacity, block.data);
  kept_bytes_ += block.capacity;
  return true;
}

std::multimap<std::size_t, void*> KeptBlocks::take_all() {
  kept_bytes_ = 0;
  return std::exchange(blocks_, {});
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)),
      kind_(other.kind_), pool_(std::move(other.pool_)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    kind_ = other.kind_;
    pool_ = std::move(other.pool_);
  }
  return *this;
}

void Buffer::release() {
  if (!data_) return;
  if (pool_ && kind_ != MemoryKind::host) {
    // Never throws here: a failed free is the driver's to report (the memory is lost, not reused).
    try {
      pool_->release(kind_, data_, capacity_);
    } catch (const std::exception&) {
    }
    pool_.reset();
    data_ = nullptr;
    capacity_ = 0;
    return;
  }
  pool_.reset();
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

void Buffer::reserve(MemoryKind kind, std::size_t bytes) { reserve(kind, bytes, nullptr); }

void Buffer::reserve(MemoryKind kind, std::size_t bytes, const std::shared_ptr<MemoryPool>& pool) {
  if (data_ && kind == kind_ && bytes <= capacity_) return;
  release();
  if (pool && kind != MemoryKind::host) {
    kind_ = kind;
    if (bytes == 0) return;
    std::size_t capacity = 0;
    data_ = pool->allocate(kind, bytes, capacity);
    capacity_ = capacity;
    pool_ = pool;
    return;
  }
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

void zero_buffer(Buffer& buffer, std::size_t bytes, [[maybe_unused]] GpuStream stream) {
  if (!buffer.data() || bytes == 0) return;
  if (buffer.kind() != MemoryKind::device) {
    std::memset(buffer.data(), 0, bytes);
    return;
  }
#ifdef SONOPIPE_WITH_CUDA
  if (stream) {
    SONOPIPE_CUDA_CHECK(cudaMemsetAsync(buffer.data(), 0, bytes, stream));
  } else {
    SONOPIPE_CUDA_CHECK(cudaMemset(buffer.data(), 0, bytes));
    SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
#else
  no_cuda();
#endif
}

#ifdef SONOPIPE_WITH_CUDA

namespace {

cudaMemPool_t make_pool(cudaMemLocationType where, int device_id) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = where;
  props.location.id = device_id;  // ignored for host memory
  cudaMemPool_t pool = nullptr;
  SONOPIPE_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
  try {
    // Keep every byte reserved: a synchronisation elsewhere never hands memory back to the driver.
    std::uint64_t keep_all = ~std::uint64_t{0};
    SONOPIPE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    if (where == cudaMemLocationTypeHost) {
      // Host pools are the CPU's only by default: the device copies to and from it.
      cudaMemAccessDesc access{};
      access.location.type = cudaMemLocationTypeDevice;
      access.location.id = device_id;
      access.flags = cudaMemAccessFlagsProtReadWrite;
      SONOPIPE_CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1));
    }
  } catch (...) {
    cudaMemPoolDestroy(pool);
    throw;
  }
  return pool;
}

}  // namespace

MemoryPool::MemoryPool(int device_id, std::size_t keep_pinned_bytes)
    : device_id_(device_id), pinned_(keep_pinned_bytes) {
  // SONOPIPE_PINNED_POOL=0 (an experiment): cudaHostAlloc and kept blocks even where a host pool
  // exists. Read before anything is made: a refused switch leaves nothing behind.
  const bool pool_wanted = host_path_switches_from_environment().pinned_pool;
  SONOPIPE_CUDA_CHECK(cudaSetDevice(device_id));
  pool_ = make_pool(cudaMemLocationTypeDevice, device_id);
  try {
    SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  } catch (...) {
    cudaMemPoolDestroy(pool_);
    throw;
  }
  int host_pools = 0;
  if (pool_wanted &&
      cudaDeviceGetAttribute(&host_pools, cudaDevAttrHostMemoryPoolsSupported, device_id) == cudaSuccess &&
      host_pools) {
    try {
      host_pool_ = make_pool(cudaMemLocationTypeHost, device_id);
    } catch (const std::exception&) {
      host_pool_ = nullptr;  // cudaHostAlloc and kept blocks instead
    }
  }
  cudaGetLastError();  // a refused host pool is not the next call's error
}

MemoryPool::~MemoryPool() {
  for (const auto& [capacity, data] : pinned_.take_all()) cudaFreeHost(data);
  cudaStreamSynchronize(stream_);  // the frees queued on it
  cudaStreamDestroy(stream_);
  if (host_pool_) cudaMemPoolDestroy(host_pool_);
  cudaMemPoolDestroy(pool_);
}

void* MemoryPool::allocate(MemoryKind kind, std::size_t bytes, std::size_t& capacity) {
  void* data = nullptr;
  if (kind == MemoryKind::device || (kind == MemoryKind::pinned && host_pool_)) {
    SONOPIPE_CUDA_CHECK(
        cudaMallocFromPoolAsync(&data, bytes, kind == MemoryKind::device ? pool_ : host_pool_, stream_));
    // Ready for every stream (and the CPU) once the side stream has reached it; waits for nothing else.
    SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    capacity = bytes;
    (kind == MemoryKind::device ? device_in_use_ : pinned_in_use_) += capacity;
    return data;
  }
  if (kind != MemoryKind::pinned) throw std::logic_error("MemoryPool: host memory is not pooled");
  {
    std::lock_guard lock(pinned_mutex_);
    const KeptBlocks::Block kept = pinned_.take(bytes);
    if (kept.data) {
      capacity = kept.capacity;
      pinned_in_use_ += capacity;
      return kept.data;
    }
  }
  // Portable: a result buffer may be released last by another thread (a ZeroMQ I/O thread).
  SONOPIPE_CUDA_CHECK(cudaHostAlloc(&data, bytes, cudaHostAllocPortable));
  capacity = bytes;
  pinned_in_use_ += capacity;
  return data;
}

void MemoryPool::release(MemoryKind kind, void* data, std::size_t capacity) {
  if (!data) return;
  (kind == MemoryKind::device ? device_in_use_ : pinned_in_use_) -= capacity;
  if (kind == MemoryKind::device || host_pool_) {
    SONOPIPE_CUDA_CHECK(cudaFreeAsync(data, stream_));
    return;
  }
  {
    std::lock_guard lock(pinned_mutex_);
    if (pinned_.keep({data, capacity})) return;
  }
  cudaFreeHost(data);  // past the bound: waits for the device, as before
}

void MemoryPool::reserve(MemoryKind kind, std::size_t bytes) {
  if (bytes == 0 || (kind == MemoryKind::pinned && !host_pool_)) return;
  std::size_t capacity = 0;
  void* data = allocate(kind, bytes, capacity);
  release(kind, data, capacity);
  SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::size_t MemoryPool::in_use(MemoryKind kind) const {
  return kind == MemoryKind::device ? device_in_use_.load() : kind == MemoryKind::pinned ? pinned_in_use_.load() : 0;
}

std::size_t MemoryPool::pinned_kept_bytes() const {
  std::lock_guard lock(pinned_mutex_);
  return pinned_.kept_bytes();
}

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

MemoryPool::MemoryPool(int device_id, std::size_t keep_pinned_bytes) : device_id_(device_id), pinned_(keep_pinned_bytes) {
  no_cuda();
}
MemoryPool::~MemoryPool() = default;
void* MemoryPool::allocate(MemoryKind, std::size_t, std::size_t&) { no_cuda(); }
void MemoryPool::release(MemoryKind, void*, std::size_t) { no_cuda(); }
void MemoryPool::reserve(MemoryKind, std::size_t) { no_cuda(); }
std::size_t MemoryPool::in_use(MemoryKind) const { return 0; }
std::size_t MemoryPool::pinned_kept_bytes() const { return 0; }

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
