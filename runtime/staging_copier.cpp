#include "runtime/staging_copier.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace sonopipe {

StagingCopier::StagingCopier(int helpers) {
  for (int i = 0; i < std::max(0, helpers); ++i) {
    helpers_.push_back(std::make_unique<Helper>());
    Helper& helper = *helpers_.back();
    helper.thread = std::thread([this, &helper] {
      pthread_setname_np(pthread_self(), "stage-copy");
      helper_loop(helper);
    });
  }
}

StagingCopier::~StagingCopier() {
  stopping_.store(true);
  for (auto& helper : helpers_) helper->start.release();
  for (auto& helper : helpers_) helper->thread.join();
}

void StagingCopier::helper_loop(Helper& helper) {
  while (true) {
    helper.start.acquire();
    if (stopping_.load()) return;
    std::memcpy(helper.target, helper.source, helper.bytes);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
  }
}

void StagingCopier::copy(void* target, const void* source, std::size_t bytes) {
  constexpr std::size_t kPage = 4096;
  const std::size_t count = static_cast<std::size_t>(pieces());
  const std::size_t piece = std::max(kPage, (bytes / count + kPage - 1) / kPage * kPage);
  auto* to = static_cast<std::byte*>(target);
  const auto* from = static_cast<const std::byte*>(source);
  // Helpers take the first pieces, this thread the rest; a helper whose piece is empty is not woken.
  std::size_t offset = 0;
  int woken = 0;
  for (auto& helper : helpers_) {
    if (offset + piece >= bytes) break;
    helper->target = to + offset;
    helper->source = from + offset;
    helper->bytes = piece;
    offset += piece;
    ++woken;
  }
  remaining_.store(woken, std::memory_order_release);
  for (int i = 0; i < woken; ++i) helpers_[static_cast<std::size_t>(i)]->start.release();
  std::memcpy(to + offset, from + offset, bytes - offset);
  for (int left = remaining_.load(std::memory_order_acquire); left != 0; left = remaining_.load(std::memory_order_acquire))
    remaining_.wait(left, std::memory_order_acquire);
}

}  // namespace sonopipe
