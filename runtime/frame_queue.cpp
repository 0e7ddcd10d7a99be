#include "runtime/frame_queue.h"

#include <stdexcept>

namespace sonopipe {

std::string_view overflow_policy_name(OverflowPolicy policy) {
  return policy == OverflowPolicy::block ? "block" : "drop_oldest";
}

bool parse_overflow_policy(std::string_view name, OverflowPolicy& out) {
  for (OverflowPolicy p : {OverflowPolicy::block, OverflowPolicy::drop_oldest}) {
    if (overflow_policy_name(p) == name) {
      out = p;
      return true;
    }
  }
  return false;
}

FrameQueue::FrameQueue(std::size_t capacity, OverflowPolicy policy)
    : ring_(capacity), policy_(policy) {
  if (capacity == 0) throw std::invalid_argument("FrameQueue capacity must be at least 1");
}

bool FrameQueue::push(InputFrame frame) {
  std::unique_lock lock(mutex_);
  if (policy_ == OverflowPolicy::block)
    not_full_.wait(lock, [&] { return closed_ || count_ < ring_.size(); });
  if (closed_) return false;
  if (count_ == ring_.size()) {  // drop_oldest
    ring_[head_].reset();
    head_ = (head_ + 1) % ring_.size();
    --count_;
    ++dropped_;
  }
  ring_[(head_ + count_) % ring_.size()] = std::move(frame);
  ++count_;
  lock.unlock();
  not_empty_.notify_one();
  return true;
}

std::optional<InputFrame> FrameQueue::pop() {
  std::unique_lock lock(mutex_);
  not_empty_.wait(lock, [&] { return closed_ || count_ > 0; });
  if (count_ == 0) return std::nullopt;
  std::optional<InputFrame> frame = std::move(ring_[head_]);
  ring_[head_].reset();
  head_ = (head_ + 1) % ring_.size();
  --count_;
  lock.unlock();
  not_full_.notify_one();
  return frame;
}

void FrameQueue::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  not_empty_.notify_all();
  not_full_.notify_all();
}

std::size_t FrameQueue::depth() const {
  std::lock_guard lock(mutex_);
  return count_;
}

std::uint64_t FrameQueue::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

}  // namespace sonopipe
