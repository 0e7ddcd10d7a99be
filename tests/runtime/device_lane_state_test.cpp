// The executor's state and resource bounds (issue 14): one state per stream id for stateful
// stages with a bounded, least-recently-used set of live streams; a bounded number of result
// buffers parked for receivers that hold them; errors in the publish callback and failed
// configurations counted without ending a thread or configuring again per frame.
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
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

namespace {

// ZeroMQ's I/O thread writing results more slowly than the lane makes them: it holds every result
// it is given and lets go of them in order, one per `write`.
class SlowWriter {
 public:
  explicit SlowWriter(std::chrono::microseconds write) : thread_([this, write] { run(write); }) {}
  ~SlowWriter() {
    stop_ = true;
    thread_.join();
  }
  void hold(std::shared_ptr<const void> owner) {
    std::lock_guard lock(mutex_);
    held_.push_back(std::move(owner));
  }

 private:
  void run(std::chrono::microseconds write) {
    while (true) {
      std::this_thread::sleep_for(write);
      std::lock_guard lock(mutex_);
      if (held_.empty() && stop_) return;
      if (!held_.empty()) held_.pop_front();
    }
  }
  std::mutex mutex_;
  std::deque<std::shared_ptr<const void>> held_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct SlowWriterRun {
  LaneStats stats;
  std::vector<double> values;  // in publish order
};

// `frames` frames (values 0, 1, ...) through a lane whose receiver is a SlowWriter; the submitter
// pauses `pace` between frames.
SlowWriterRun through_slow_writer(OverflowPolicy overflow, std::uint64_t frames, std::chrono::microseconds pace) {
  ThreadPool pool(2);
  SlowWriterRun run;
  std::mutex mutex;
  SlowWriter writer(std::chrono::microseconds(300));
  ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
    double value;
    std::memcpy(&value, r.data, sizeof value);
    {
      std::lock_guard lock(mutex);
      run.values.push_back(value);
    }
    if (r.owner) writer.hold(r.owner);
  }};
  std::atomic<int> configurations{0};
  DeviceLane executor("slow-writer", one_stage(std::make_unique<CountingPickyStage>(configurations)),
                      {.slots = 2, .queue_depth = 8, .overflow = overflow, .pool = &pool, .max_spare_results = 2,
                       .spare_wait = std::chrono::seconds(1)},
                      callbacks);
  for (std::uint64_t n = 0; n < frames; ++n) {
    REQUIRE(executor.submit(value_frame(0, n, static_cast<double>(n))));
    std::this_thread::sleep_for(pace);
  }
  executor.drain();
  run.stats = executor.stats();
  return run;
}

}  // namespace

TEST_CASE("overflow block: a receiver slower than the lane is waited for, and no result is copied",
          "[executor][resources]") {
  // The lane makes results far faster than the writer lets go of them (0.3 ms each): with every
  // spare held it waits for the writer instead of publishing copies, so the sender feels the
  // writer's pace (back-pressure) and nothing is queued beyond the spares.
  constexpr std::uint64_t kFrames = 60;
  const SlowWriterRun run = through_slow_writer(OverflowPolicy::block, kFrames, std::chrono::microseconds(0));
  CHECK(run.stats.published == kFrames);
  CHECK(run.stats.results_copied == 0);
  CHECK(run.stats.results_waited > 0);
  REQUIRE(run.values.size() == kFrames);
  for (std::uint64_t n = 0; n < kFrames; ++n) REQUIRE(run.values[n] == static_cast<double>(n));  // byte-exact
}

TEST_CASE("overflow drop_oldest: a slow receiver is never waited for; results past the spares are copies",
          "[executor][resources]") {
  // Frames come every 0.1 ms, three times the writer's pace: a live pipeline keeps its pace and
  // publishes copies rather than holding a frame for a receiver.
  constexpr std::uint64_t kFrames = 60;
  const SlowWriterRun run =
      through_slow_writer(OverflowPolicy::drop_oldest, kFrames, std::chrono::microseconds(100));
  CHECK(run.stats.results_waited == 0);
  CHECK(run.stats.results_copied > 0);
  CHECK(run.stats.published == run.values.size());
  for (std::size_t i = 1; i < run.values.size(); ++i) REQUIRE(run.values[i] > run.values[i - 1]);  // in order
}

TEST_CASE("overflow block: a receiver that never lets go costs one wait, not one per frame or per second",
          "[executor][resources]") {
  // A stalled subscriber: after the first wait runs out, results are copies without waiting until
  // a spare comes back. 100 frames over 1.5 s (past kSpareIdle, 1 s): one wait that ran out.
  ThreadPool pool(2);
  std::vector<std::shared_ptr<const void>> kept;  // completion thread only, read after drain
  ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
    if (r.owner) kept.push_back(r.owner);
  }};
  std::atomic<int> configurations{0};
  constexpr std::uint64_t kFrames = 100;
  LaneStats stats;
  {
    DeviceLane executor("stalled-block", one_stage(std::make_unique<CountingPickyStage>(configurations)),
                        {.slots = 2, .queue_depth = 8, .pool = &pool, .max_spare_results = 2,
                         .spare_wait = std::chrono::milliseconds(50)},
                        callbacks);
    for (std::uint64_t n = 0; n < kFrames; ++n) {
      REQUIRE(executor.submit(value_frame(0, n, 1.0)));
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
    executor.drain();
    stats = executor.stats();
  }
  CHECK(stats.published == kFrames);
  CHECK(stats.results_waited == 0);
  CHECK(stats.spare_waits_timed_out == 1);
  CHECK(stats.results_copied >= kFrames - 5);
}

TEST_CASE("large results: the spares a receiver may hold are bounded in bytes too, never below two",
          "[executor][resources]") {
  // A receiver that never lets go of 1,024-line results (8 KiB): with max_spare_bytes 12 KiB one
  // spare by bytes, two by the floor, where max_spare_results alone allows six.
  auto distinct_buffers = [](std::size_t max_spare_bytes) {
    ThreadPool pool(2);
    std::vector<std::shared_ptr<const void>> kept;  // completion thread only, read after drain
    std::set<const void*> addresses;
    ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
      if (!r.owner) return;
      kept.push_back(r.owner);
      addresses.insert(r.data);
    }};
    std::atomic<int> configurations{0};
    DeviceLane executor("large", one_stage(std::make_unique<CountingPickyStage>(configurations)),
                        {.slots = 2, .queue_depth = 8, .pool = &pool, .max_spare_results = 6,
                         .max_spare_bytes = max_spare_bytes, .spare_wait = std::chrono::microseconds(0)},
                        callbacks);
    for (std::uint64_t n = 0; n < 50; ++n) REQUIRE(executor.submit(value_frame(0, n, 1.0, 1024)));
    executor.drain();
    return addresses.size();
  };
  const std::size_t bounded = distinct_buffers(12 << 10), by_count = distinct_buffers(std::size_t(1) << 30);
  INFO("distinct result buffers handed to the receiver: " << bounded << " (by count alone " << by_count << ")");
  // Parked buffers count against the cap, the slots' own among them (see the case above).
  CHECK(bounded <= 2 + 2);
  CHECK(bounded >= 2 + 1);
  CHECK(by_count >= 6);
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
