// A fixed set of worker threads for the CPU backend. parallel_for() splits [0, count) into
// contiguous chunks, runs them on the workers and the calling thread, and returns when all are
// done. No allocation per call.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sonopipe {

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread.
  explicit ThreadPool(int threads = 0);
  // The size a pool asked for `threads` gets.
  static int size_for(int threads) {
    return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }  // workers + caller

  // body(begin, end) on disjoint chunks covering [0, count). Chunks are at least `min_chunk` long.
  // One parallel_for at a time per pool (callers serialise); exceptions from body are rethrown.
  void parallel_for(std::size_t count, const std::function<void(std::size_t, std::size_t)>& body,
                    std::size_t min_chunk = 1);

 private:
  void worker_loop();
  void run_chunks(std::unique_lock<std::mutex>& lock);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t, std::size_t)>* body_ = nullptr;
  std::size_t count_ = 0, chunk_ = 1, next_ = 0, active_ = 0;
  std::size_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::mutex call_mutex_;
};

}  // namespace sonopipe
