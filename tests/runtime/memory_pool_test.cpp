// The lane's memory pool (runtime/gpu_resources.h): which kept pinned block a request gets and how
// much is kept (plain bookkeeping), and, on a device, that allocating and letting go of pooled
// device and pinned memory never waits for work on other streams (cudaFree and cudaFreeHost wait
// for the whole device, which stalled the frames while a live change's old setup was freed).
#include "runtime/gpu_resources.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <tuple>
#include <thread>
#include <vector>

#include "tests/support/test_support.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#endif

using namespace sonopipe;

namespace {

void* fake_address(std::uintptr_t n) { return reinterpret_cast<void*>(n * 4096); }

}  // namespace

TEST_CASE("kept blocks: a request gets the smallest kept block that holds it without wasting more than itself",
          "[memory]") {
  KeptBlocks kept(1 << 20);
  REQUIRE(kept.keep({fake_address(1), 1000}));
  REQUIRE(kept.keep({fake_address(2), 4000}));
  REQUIRE(kept.keep({fake_address(3), 2500}));
  CHECK(kept.kept_bytes() == 7500);

  CHECK(kept.take(5000).data == nullptr);  // none holds it
  CHECK(kept.take(400).data == nullptr);   // 1000 would waste more than 400
  const KeptBlocks::Block block = kept.take(2000);  // 2500 is the smallest that holds 2000
  CHECK(block.data == fake_address(3));
  CHECK(block.capacity == 2500);
  CHECK(kept.kept_bytes() == 5000);
  CHECK(kept.take(2000).data == fake_address(2));  // then 4000 (exactly twice: allowed)
  CHECK(kept.take(500).data == fake_address(1));       // 1000 = 2 x 500
  CHECK(kept.kept_bytes() == 0);
}

TEST_CASE("kept blocks: past the bound a block is not kept and the caller frees it; take_all hands every one over",
          "[memory]") {
  std::mt19937_64 rng(test::fresh_seed());
  const std::size_t bound = 10000 + rng() % 10000;
  KeptBlocks kept(bound);
  std::size_t total = 0, kept_count = 0;
  for (std::uintptr_t n = 1; n <= 40; ++n) {
    const std::size_t capacity = 100 + rng() % 2000;
    const bool fits = total + capacity <= bound;
    CHECK(kept.keep({fake_address(n), capacity}) == fits);
    if (fits) {
      total += capacity;
      ++kept_count;
    }
    CHECK(kept.kept_bytes() == total);
  }
  CHECK(kept.kept_bytes() <= bound);
  CHECK(kept.take_all().size() == kept_count);
  CHECK(kept.kept_bytes() == 0);
  CHECK(kept.take(100).data == nullptr);
  CHECK_FALSE(kept.keep({nullptr, 10}));  // nothing to keep
}

TEST_CASE("buffers without a pool, and host buffers with none, allocate as before", "[memory]") {
  Buffer buffer;
  buffer.reserve(MemoryKind::host, 100, nullptr);
  REQUIRE(buffer.data() != nullptr);
  CHECK(buffer.capacity() == 100);
  std::memset(buffer.data(), 1, 100);
  Buffer moved = std::move(buffer);
  CHECK(buffer.data() == nullptr);
  CHECK(moved.capacity() == 100);
  moved.reserve(MemoryKind::host, 50);  // fits: kept
  CHECK(moved.capacity() == 100);
}

#ifdef SONOPIPE_WITH_CUDA
namespace {

// Holds a stream (as a frame's work in flight holds the device) until released: a host function
// queued on it waits for the flag, so everything queued after it on that stream waits too.
struct StreamHold {
  std::atomic<bool> released{false};
  static void CUDART_CB wait(void* self) {
    auto* hold = static_cast<StreamHold*>(self);
    while (!hold->released.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
};

}  // namespace

TEST_CASE("memory pool: device and pinned memory is allocated and let go of while another stream is held",
          "[memory][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  std::mt19937_64 rng(test::fresh_seed());
  auto pool = std::make_shared<MemoryPool>(0, std::size_t(16) << 20);
  const std::size_t bytes = (1 + rng() % 64) * 4096;
  std::vector<std::byte> pattern(bytes), back(bytes);
  for (auto& b : pattern) b = static_cast<std::byte>(rng());
  // Made before the hold: the first pinned block comes from cudaHostAlloc (the pool's promise is
  // about memory it already has and memory let go of), the streams are not the pool's.
  Buffer pinned;
  pinned.reserve(MemoryKind::pinned, bytes, pool);
  cudaStream_t held = nullptr, other = nullptr;
  SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking));
  SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  StreamHold hold;
  SONOPIPE_CUDA_CHECK(cudaLaunchHostFunc(held, &StreamHold::wait, &hold));

  // On another thread, so that a call that waits for the device (as cudaFree does) shows as this
  // thread never hearing back, rather than as a hang: the hold is let go after 60 s either way.
  auto work = std::async(std::launch::async, [&] {
    Buffer device;
    device.reserve(MemoryKind::device, bytes, pool);
    // The device memory is ready on return: a copy through it on a third stream gives the bytes back.
    std::memcpy(pinned.data(), pattern.data(), bytes);
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(device.data(), pinned.data(), bytes, cudaMemcpyHostToDevice, other));
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(back.data(), device.data(), bytes, cudaMemcpyDeviceToHost, other));
    SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(other));
    const bool same = std::memcmp(back.data(), pattern.data(), bytes) == 0;
    const bool counted = pool->in_use(MemoryKind::device) == bytes && pool->in_use(MemoryKind::pinned) == bytes;
    void* pinned_address = pinned.data();
    device.release();  // back to the pool: no device synchronisation
    pinned.release();  // back to the host pool, or kept
    const std::size_t kept = pool->pinned_kept_bytes();
    Buffer again;
    again.reserve(MemoryKind::pinned, bytes, pool);  // without a host pool: the kept block, handed out again
    const bool reused = again.data() == pinned_address;
    const std::size_t kept_while_used = pool->pinned_kept_bytes();
    // Room for growth, then a buffer of that size from it; what is in use does not change.
    pool->reserve(MemoryKind::device, 4 * bytes);
    pool->reserve(MemoryKind::pinned, 4 * bytes);
    const bool reserve_uncounted = pool->in_use(MemoryKind::device) == 0 && pool->in_use(MemoryKind::pinned) == bytes;
    Buffer device_again;
    device_again.reserve(MemoryKind::device, 4 * bytes, pool);
    return std::tuple{same && counted && reserve_uncounted, kept, reused, kept_while_used};
  });
  const bool finished = work.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  hold.released = true;
  SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(held));
  cudaStreamDestroy(held);
  cudaStreamDestroy(other);
  REQUIRE(finished);  // false: a pooled allocation or free waited for the held stream
  const auto [same, kept, reused, kept_while_used] = work.get();
  CHECK(same);
  CHECK(kept_while_used == 0);
  CHECK(pool->in_use(MemoryKind::device) == 0);
  CHECK(pool->in_use(MemoryKind::pinned) == 0);
  INFO("pinned memory from a host pool: " << pool->pinned_pool());
  if (pool->pinned_pool()) {
    CHECK(kept == 0);  // a host pool keeps what is let go of itself
    CHECK(pool->pinned_kept_bytes() == 0);
  } else {
    CHECK(kept == bytes);
    CHECK(reused);
    CHECK(pool->pinned_kept_bytes() == bytes);  // `again` let go of it at the end of the work
  }
}

TEST_CASE("memory pool: pinned memory from it is read and written by the device and the CPU", "[memory][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  std::mt19937_64 rng(test::fresh_seed());
  auto pool = std::make_shared<MemoryPool>(0, std::size_t(16) << 20);
  WARN("pinned memory from a host pool: " << pool->pinned_pool());
  const std::size_t count = 1000 + rng() % 100000;
  Buffer up, down, device;
  up.reserve(MemoryKind::pinned, count * sizeof(float), pool);
  down.reserve(MemoryKind::pinned, count * sizeof(float), pool);
  device.reserve(MemoryKind::device, count * sizeof(float), pool);
  std::uniform_real_distribution<float> value(-1e3f, 1e3f);
  auto* in = static_cast<float*>(up.data());
  for (std::size_t i = 0; i < count; ++i) in[i] = value(rng);
  cudaStream_t stream = nullptr;
  SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  copy_to_device_async(device.data(), up.data(), count * sizeof(float), stream);
  copy_to_host_async(down.data(), device.data(), count * sizeof(float), stream);
  SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
  CHECK(std::memcmp(down.data(), up.data(), count * sizeof(float)) == 0);  // copies: bit-exact
}
#endif
