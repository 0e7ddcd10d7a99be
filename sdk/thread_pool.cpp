#include "sdk/thread_pool.h"

#include <pthread.h>

#include <algorithm>

namespace sonopipe {

ThreadPool::ThreadPool(int threads) {
  threads = size_for(threads);
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "pool");  // per-thread CPU accounting (sonopipe-bench core)
      worker_loop();
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run_chunks(std::unique_lock<std::mutex>& lock) {
  // Takes chunks until none is left; `lock` is held on entry and on return.
  while (next_ < count_) {
    std::size_t begin = next_;
    std::size_t end = std::min(count_, begin + chunk_);
    next_ = end;
    ++active_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*body_)(begin, end);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    --active_;
  }
  if (active_ == 0) done_.notify_all();
}

void ThreadPool::worker_loop() {
  std::size_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && next_ < count_); });
    if (stopping_) return;
    seen = generation_;
    run_chunks(lock);
  }
}

void ThreadPool::parallel_for(std::size_t count,
                              const std::function<void(std::size_t, std::size_t)>& body,
                              std::size_t min_chunk) {
  if (count == 0) return;
  std::lock_guard call_lock(call_mutex_);
  // About four chunks per thread balances uneven work without much queueing overhead.
  std::size_t threads = static_cast<std::size_t>(size());
  std::size_t chunk = std::max<std::size_t>(min_chunk, (count + 4 * threads - 1) / (4 * threads));
  if (workers_.empty() || count <= chunk) {
    body(0, count);
    return;
  }
  std::unique_lock lock(mutex_);
  body_ = &body;
  count_ = count;
  chunk_ = chunk;
  next_ = 0;
  error_ = nullptr;
  ++generation_;
  wake_.notify_all();
  run_chunks(lock);
  done_.wait(lock, [&] { return next_ >= count_ && active_ == 0; });
  body_ = nullptr;
  count_ = 0;
  std::exception_ptr error = error_;
  error_ = nullptr;
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

}  // namespace sonopipe
