// The executor's state and resource bounds (issue 14): one state per stream id for stateful
// stages with a bounded, least-recently-used set of live streams; a bounded number of result
// buffers parked for receivers that hold them; errors in the publish callback and failed
// configurations counted without ending a thread or configuring again per frame.
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/device_lane.h"
#include "sdk/thread_pool.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

// Output = the previous input of the same stream (a one-frame delay line per stream), zeros for a
// stream's first frame; records every state address it was given.
class StreamDelayStage : public Stage {
 public:
  StagePlan configure(const FrameMeta&, const TensorSpec& input, Backend) override {
    bytes_ = input.byte_size();
    return StagePlan{.outputs = {{"delayed", input}}, .state_bytes = bytes_};
  }
  bool run_cpu(const StageIo& io) override {
    states_.insert(io.state);
    std::memcpy(io.outputs[0], io.state, bytes_);
    std::memcpy(io.state, io.input, bytes_);
    return true;
  }
  bool keeps_state() const override { return true; }
  const std::set<const void*>& states() const { return states_; }  // submit thread; read after drain

 private:
  std::size_t bytes_ = 0;
  std::set<const void*> states_;
};

// Copies its input; refuses inputs whose first axis has 13 elements and counts its configurations.
class CountingPickyStage : public Stage {
 public:
  explicit CountingPickyStage(std::atomic<int>& configurations) : configurations_(configurations) {}
  StagePlan configure(const FrameMeta&, const TensorSpec& input, Backend) override {
    ++configurations_;
    if (input.axes.at(0).size == 13) throw StageError("picky: 13 lines are unlucky");
    bytes_ = input.byte_size();
    return StagePlan{.outputs = {{"copy", input}}};
  }
  bool run_cpu(const StageIo& io) override {
    std::memcpy(io.outputs[0], io.input, bytes_);
    return true;
  }

 private:
  std::atomic<int>& configurations_;
  std::size_t bytes_ = 0;
};

// A float64 frame [value=1] of `stream_id` holding `value`.
InputFrame value_frame(std::uint32_t stream_id, std::uint64_t sequence, double value, std::int64_t lines = 1) {
  InputFrame frame;
  frame.meta.stream_id = stream_id;
  frame.meta.sequence = sequence;
  frame.meta.kind = FrameKind::rf;
  frame.meta.payload.dtype = DType::float64;
  frame.meta.payload.axes = {{"line", lines}, {"value", 1}};
  auto bytes = std::make_shared<std::vector<double>>(static_cast<std::size_t>(lines), value);
  frame.payload = std::shared_ptr<const std::byte>(bytes, reinterpret_cast<const std::byte*>(bytes->data()));
  frame.payload_bytes = bytes->size() * sizeof(double);
  frame.received_ns = 1;
  return frame;
}

std::vector<PipelineStage> one_stage(std::unique_ptr<Stage> stage) {
  std::vector<PipelineStage> stages;
  stages.push_back({.label = "test", .stage = std::move(stage), .publish = true});
  return stages;
}

struct Published {
  std::uint32_t stream_id;
  std::uint64_t sequence;
  double value;
};

}  // namespace

TEST_CASE("interleaved streams keep separate state in a stateful stage", "[executor][state]") {
  // Two streams alternate frame by frame; each stream's delay line must hand back that stream's
  // previous value (one shared state would hand back the other stream's).
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<Published> got;
  ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
    double value;
    std::memcpy(&value, r.data, sizeof value);
    std::lock_guard lock(mutex);
    got.push_back({r.frame.stream_id, r.frame.sequence, value});
  }};
  {
    DeviceLane executor("interleaved", one_stage(std::make_unique<StreamDelayStage>()),
                              {.slots = 3, .queue_depth = 8, .pool = &pool}, callbacks);
    for (std::uint64_t n = 0; n < 50; ++n)
      for (std::uint32_t stream : {7u, 9u}) REQUIRE(executor.submit(value_frame(stream, n, stream * 1000.0 + n)));
    executor.drain();
    CHECK(executor.stats().streams_live == 2);
    CHECK(executor.stats().streams_evicted == 0);
  }
  REQUIRE(got.size() == 100);
  for (const Published& p : got) {
    const double expected = p.sequence == 0 ? 0.0 : p.stream_id * 1000.0 + (p.sequence - 1);
    INFO("stream " << p.stream_id << " sequence " << p.sequence);
    REQUIRE(p.value == expected);
  }
}

TEST_CASE("100,000 stream ids: at most max_streams states live, the least recently used evicted and counted",
          "[executor][state]") {
  // Every frame but one in eight comes from a stream never seen before; stream 1 comes back every
  // eighth frame, so it stays among the 16 most recent and keeps its history throughout.
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<Published> of_stream_one;
  std::uint64_t published = 0;
  ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
    double value;
    std::memcpy(&value, r.data, sizeof value);
    std::lock_guard lock(mutex);
    ++published;
    if (r.frame.stream_id == 1) of_stream_one.push_back({1, r.frame.sequence, value});
  }};
  constexpr std::uint64_t kFrames = 100000;
  constexpr std::size_t kMaxStreams = 16;
  auto stage = std::make_unique<StreamDelayStage>();
  const StreamDelayStage& delay = *stage;
  std::uint64_t new_streams = 0, stream_one_frames = 0;
  {
    DeviceLane executor("many", one_stage(std::move(stage)),
                              {.slots = 2, .queue_depth = 64, .pool = &pool, .max_streams = kMaxStreams}, callbacks);
    for (std::uint64_t n = 0; n < kFrames; ++n) {
      if (n % 8 == 0) {
        REQUIRE(executor.submit(value_frame(1, stream_one_frames, static_cast<double>(stream_one_frames))));
        ++stream_one_frames;
      } else {
        REQUIRE(executor.submit(value_frame(static_cast<std::uint32_t>(100 + n), 0, 1.0)));
        ++new_streams;
      }
    }
    executor.drain();
    const LaneStats stats = executor.stats();
    CHECK(stats.processed == kFrames);
    CHECK(stats.streams_live == kMaxStreams);
    // 1 + new_streams distinct streams, kMaxStreams of them still live at the end.
    CHECK(stats.streams_evicted == 1 + new_streams - kMaxStreams);
    // Memory stays bounded: the stage was only ever given kMaxStreams distinct state buffers.
    // Asked while the executor, which owns the stage, still lives.
    CHECK(delay.states().size() == kMaxStreams);
  }
  CHECK(published == kFrames);
  REQUIRE(of_stream_one.size() == stream_one_frames);
  for (const Published& p : of_stream_one)
    REQUIRE(p.value == (p.sequence == 0 ? 0.0 : static_cast<double>(p.sequence - 1)));
}

TEST_CASE("a receiver that never lets go pins at most max_spare_results buffers; later results are copies",
          "[executor][resources]") {
  // A stalled subscriber: ZeroMQ keeps every message (and so its result buffer) it cannot deliver.
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<std::shared_ptr<const void>> kept;
  std::set<const void*> addresses;
  std::vector<double> values;
  std::uint64_t copies = 0;
  ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
    double value;
    std::memcpy(&value, r.data, sizeof value);
    std::lock_guard lock(mutex);
    values.push_back(value);
    if (r.owner) {
      kept.push_back(r.owner);
      addresses.insert(r.data);
    } else {
      ++copies;  // no owner: the receiver copies the bytes during the call
    }
  }};
  constexpr int kSlots = 2;
  constexpr std::size_t kSpares = 4;
  constexpr std::uint64_t kFrames = 200;
  LaneStats stats;
  {
    std::atomic<int> configurations{0};
    DeviceLane executor("stalled", one_stage(std::make_unique<CountingPickyStage>(configurations)),
                              {.slots = kSlots, .queue_depth = 8, .pool = &pool, .max_spare_results = kSpares},
                              callbacks);
    for (std::uint64_t n = 0; n < kFrames; ++n) REQUIRE(executor.submit(value_frame(0, n, static_cast<double>(n))));
    executor.drain();
    stats = executor.stats();
  }
  CHECK(stats.published == kFrames);
  REQUIRE(values.size() == kFrames);
  for (std::uint64_t n = 0; n < kFrames; ++n) REQUIRE(values[n] == static_cast<double>(n));  // byte-exact
  // Buffers handed out: the slots' own, plus spares allocated while fewer than kSpares were parked
  // (a slot parks its held buffer before the cap is checked, so up to kSlots - 1 more).
  INFO("distinct result buffers handed to the receiver: " << addresses.size());
  CHECK(addresses.size() <= kSlots + kSpares + kSlots - 1);
  CHECK(stats.results_copied == copies);
  CHECK(copies >= kFrames - (kSlots + kSpares + kSlots - 1));
}

TEST_CASE("a publish callback that throws is counted, and the executor goes on", "[executor][resources]") {
  // E.g. zmq::error_t from a socket being closed; it once escaped the completion thread
  // (std::terminate).
  ThreadPool pool(2);
  std::atomic<int> configurations{0};
  std::atomic<std::uint64_t> delivered{0};
  std::mutex mutex;
  std::vector<std::string> reports;  // checked on this thread: Catch's assertions are not thread-safe (TSan)
  ExecutorCallbacks callbacks{
      .publish =
          [&](const PublishedResult& r) {
            if (r.frame.sequence % 10 == 3) throw std::runtime_error("socket closed");
            ++delivered;
          },
      .publish_error = [&](const FrameMeta&, const std::string&, const std::string& why) {
        std::lock_guard lock(mutex);
        reports.push_back(why);
      }};
  DeviceLane executor("throws", one_stage(std::make_unique<CountingPickyStage>(configurations)),
                            {.slots = 2, .queue_depth = 4, .pool = &pool}, callbacks);
  for (std::uint64_t n = 0; n < 40; ++n) REQUIRE(executor.submit(value_frame(0, n, 1.0)));
  executor.drain();
  const LaneStats stats = executor.stats();
  CHECK(stats.processed == 40);
  CHECK(stats.publish_errors == 4);
  CHECK(stats.published == 36);
  CHECK(delivered == 36);
  std::lock_guard lock(mutex);
  CHECK(reports.size() == 3);  // logged at the 1st, 2nd and 4th error: a flood writes few lines
  for (const std::string& why : reports) CHECK(why.find("socket closed") != std::string::npos);
}

TEST_CASE("a description that failed to configure is refused without configuring again", "[executor][resources]") {
  ThreadPool pool(2);
  std::atomic<int> configurations{0};
  std::atomic<std::uint64_t> errors{0}, other_errors{0}, published{0};
  ExecutorCallbacks callbacks{
      .publish = [&](const PublishedResult&) { ++published; },
      .stage_error = [&](const FrameMeta&, const std::string&, const std::string& why) {
        // Counted here, checked on the test's thread (Catch's assertions are not thread-safe).
        ++(why == "picky: 13 lines are unlucky" ? errors : other_errors);
      }};
  DeviceLane executor("picky", one_stage(std::make_unique<CountingPickyStage>(configurations)),
                            {.slots = 2, .queue_depth = 4, .pool = &pool}, callbacks);
  for (std::uint64_t n = 0; n < 10; ++n) REQUIRE(executor.submit(value_frame(0, n, 1.0, 13)));
  REQUIRE(executor.submit(value_frame(0, 10, 1.0, 4)));   // a good description configures
  for (std::uint64_t n = 11; n < 21; ++n) REQUIRE(executor.submit(value_frame(0, n, 1.0, 13)));
  executor.drain();
  CHECK(errors == 20);
  CHECK(other_errors == 0);
  CHECK(published == 1);
  CHECK(executor.stats().stage_errors == 20);
  // bad (once for ten frames), good, bad again (once for ten frames).
  CHECK(configurations == 3);
}
