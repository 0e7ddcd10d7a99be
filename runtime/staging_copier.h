// Copies a frame's payload into a slot's pinned input with a few threads of its own (the caller
// copies one piece too): each helper is woken alone, by its own semaphore, instead of every worker
// of the pipeline's pool (ThreadPool::parallel_for wakes them all for each frame).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <semaphore>
#include <thread>
#include <vector>

namespace sonopipe {

class StagingCopier {
 public:
  explicit StagingCopier(int helpers);
  ~StagingCopier();
  StagingCopier(const StagingCopier&) = delete;
  StagingCopier& operator=(const StagingCopier&) = delete;

  int pieces() const { return static_cast<int>(helpers_.size()) + 1; }
  // Copies `bytes` from `source` to `target` in pieces() pieces of whole pages; returns when all
  // are done. One call at a time.
  void copy(void* target, const void* source, std::size_t bytes);

 private:
  struct Helper {
    std::binary_semaphore start{0};
    std::byte* target = nullptr;
    const std::byte* source = nullptr;
    std::size_t bytes = 0;
    std::thread thread;
  };
  void helper_loop(Helper& helper);

  std::vector<std::unique_ptr<Helper>> helpers_;
  std::atomic<int> remaining_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace sonopipe
