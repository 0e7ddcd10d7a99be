#include "runtime/frame_queue.h"

#include <atomic>
#include <thread>

#include "tests/support/test_support.h"

using namespace sonopipe;
using namespace std::chrono_literals;

namespace {
InputFrame frame(std::uint64_t sequence) {
  InputFrame f;
  f.meta.sequence = sequence;
  return f;
}
}  // namespace

TEST_CASE("drop_oldest never blocks, keeps the newest frames in order and counts the dropped", "[queue]") {
  FrameQueue queue(3, OverflowPolicy::drop_oldest);
  for (std::uint64_t n = 0; n < 10; ++n) REQUIRE(queue.push(frame(n)));
  CHECK(queue.depth() == 3);
  CHECK(queue.dropped() == 7);
  for (std::uint64_t n = 7; n < 10; ++n) CHECK(queue.pop()->meta.sequence == n);
  CHECK(queue.depth() == 0);
}

TEST_CASE("block makes the producer wait for room and loses nothing", "[queue]") {
  FrameQueue queue(2, OverflowPolicy::block);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (std::uint64_t n = 0; n < 6; ++n) {
      queue.push(frame(n));
      ++pushed;
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (pushed.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(50ms);  // a non-blocking queue would have taken all six by now
  CHECK(pushed.load() == 2);
  for (std::uint64_t n = 0; n < 6; ++n) CHECK(queue.pop()->meta.sequence == n);
  producer.join();
  CHECK(queue.dropped() == 0);
}

TEST_CASE("close lets pop drain what is queued, then reports the end; later pushes are refused", "[queue]") {
  FrameQueue queue(4, OverflowPolicy::block);
  queue.push(frame(1));
  queue.push(frame(2));
  queue.close();
  CHECK_FALSE(queue.push(frame(3)));
  CHECK(queue.pop()->meta.sequence == 1);
  CHECK(queue.pop()->meta.sequence == 2);
  CHECK_FALSE(queue.pop().has_value());
}

TEST_CASE("close wakes a producer blocked on a full queue", "[queue]") {
  FrameQueue queue(1, OverflowPolicy::block);
  queue.push(frame(0));
  std::atomic<bool> returned{false}, result{true};
  std::thread producer([&] {
    result = queue.push(frame(1));
    returned = true;
  });
  std::this_thread::sleep_for(20ms);
  queue.close();
  producer.join();
  CHECK(returned.load());
  CHECK_FALSE(result.load());
}

TEST_CASE("overflow policy names parse both ways", "[queue]") {
  OverflowPolicy policy;
  REQUIRE(parse_overflow_policy("drop_oldest", policy));
  CHECK(policy == OverflowPolicy::drop_oldest);
  CHECK(overflow_policy_name(policy) == "drop_oldest");
  CHECK_FALSE(parse_overflow_policy("drop_newest", policy));
}
