// The multi-device executor with CPU lanes standing in for devices (the logic is the same on
// GPUs): results leave in arrival order although lanes finish out of order, stateless frames are
// spread frame by frame, stateful streams stay on one lane, frames that publish nothing or that a
// stage refuses do not hold later ones back. The [cuda] case uses every visible GPU.
#include "runtime/pipeline_executor.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "sdk/thread_pool.h"
#include "stages/common/convert/convert.h"
#include "tests/support/test_support.h"

#ifdef SONOPIPE_WITH_CUDA
#include "runtime/gpu_device.h"
#endif

using namespace sonopipe;

namespace {

// Output [3] float64: the lane (stage instance) that ran the frame, the frame's stream id and a
// per-instance count of the frames of that stream seen so far (its "state", as a pairing stage
// would keep). Sleeps a random time so that lanes finish out of order. Frames whose sequence is a
// multiple of `silent_every` publish nothing; a first axis of 13 is refused.
class LaneStage : public Stage {
 public:
  LaneStage(int lane, bool stateful, int silent_every)
      : lane_(lane), stateful_(stateful), silent_every_(silent_every), rng_(test::fresh_seed()) {}
  StagePlan configure(const FrameMeta&, const TensorSpec& input, Backend) override {
    if (input.axes.at(0).size == 13) throw StageError("lane stage: 13 lines are refused");
    return StagePlan{.outputs = {{"lane", TensorSpec{.dtype = DType::float64, .axes = {{"value", 3}}}}}};
  }
  bool run_cpu(const StageIo& io) override {
    std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 400));
    const double seen = ++seen_per_stream_[io.frame.stream_id];
    if (silent_every_ > 0 && io.frame.sequence % silent_every_ == 0) return false;
    double* out = static_cast<double*>(io.outputs[0]);
    out[0] = lane_;
    out[1] = io.frame.stream_id;
    out[2] = seen;
    return true;
  }
  bool keeps_state() const override { return stateful_; }

 private:
  int lane_;
  bool stateful_;
  int silent_every_;
  std::mt19937_64 rng_;
  std::map<std::uint32_t, int> seen_per_stream_;
};

struct Published {
  std::uint32_t stream;
  std::uint64_t sequence;
  double lane, stream_value, seen;
};

struct Collector {
  std::mutex mutex;
  std::vector<Published> items;
  std::vector<std::uint64_t> refused;
  ExecutorCallbacks callbacks() {
    return {.publish =
                [this](const PublishedResult& r) {
                  const auto* v = static_cast<const double*>(r.data);
                  std::lock_guard lock(mutex);
                  items.push_back({r.frame.stream_id, r.frame.sequence, v[0], v[1], v[2]});
                },
            .stage_error = [this](const FrameMeta& frame, const std::string&,
                                  const std::string&) {
              std::lock_guard lock(mutex);
              refused.push_back(frame.sequence);
            }};
  }
};

InputFrame small_frame(std::uint32_t stream, std::uint64_t sequence, std::int64_t lines = 2) {
  InputFrame frame;
  frame.meta.stream_id = stream;
  frame.meta.sequence = sequence;
  frame.meta.kind = FrameKind::rf;
  frame.meta.payload.dtype = DType::float32;
  frame.meta.payload.axes = {{"line", lines}, {"sample", 4}};
  auto bytes = std::make_shared<std::vector<float>>(lines * 4, 1.0f);
  frame.payload = std::shared_ptr<const std::byte>(bytes, reinterpret_cast<const std::byte*>(bytes->data()));
  frame.payload_bytes = bytes->size() * sizeof(float);
  frame.received_ns = 1;
  return frame;
}

std::function<std::vector<PipelineStage>()> lane_stages(bool stateful, int silent_every = 0) {
  auto next_lane = std::make_shared<int>(0);
  return [=] {
    std::vector<PipelineStage> stages;
    stages.push_back({.label = "lane", .stage = std::make_unique<LaneStage>((*next_lane)++, stateful, silent_every),
                      .publish = true});
    return stages;
  };
}

}  // namespace

TEST_CASE("several lanes: a stateless pipeline spreads frames in turn and publishes them in arrival order",
          "[multi_device]") {
  ThreadPool pool(2);
  Collector got;
  constexpr int kFrames = 300;
  {
    PipelineExecutor executor("spread", {0, 1, 2}, lane_stages(false), {.slots = 2, .queue_depth = 8, .pool = &pool},
                                 got.callbacks());
    for (int n = 0; n < kFrames; ++n) REQUIRE(executor.submit(small_frame(n % 2, n)));
    executor.drain();
    PipelineStats stats = executor.stats();
    CHECK(stats.total.accepted == kFrames);
    CHECK(stats.total.processed == kFrames);
    CHECK(stats.total.published == kFrames);
    REQUIRE(stats.devices.size() == 3);
    for (const DeviceStats& d : stats.devices) CHECK(d.processed == kFrames / 3);
  }
  REQUIRE(got.items.size() == kFrames);
  bool out_of_lane_order = false;
  for (int n = 0; n < kFrames; ++n) {
    REQUIRE(got.items[n].sequence == static_cast<std::uint64_t>(n));  // arrival order
    REQUIRE(got.items[n].lane == n % 3);                               // in turn
    out_of_lane_order = out_of_lane_order || got.items[n].seen != n / 6 + 1;
  }
  CHECK_FALSE(out_of_lane_order);  // each lane saw its frames of a stream in order (seen counts up)
}

TEST_CASE("several lanes: a stateful pipeline keeps each stream on one lane, in order, streams spread",
          "[multi_device]") {
  ThreadPool pool(2);
  Collector got;
  constexpr int kStreams = 4, kPerStream = 60;
  {
    PipelineExecutor executor("affinity", {0, 1}, lane_stages(true), {.slots = 3, .queue_depth = 8, .pool = &pool},
                                 got.callbacks());
    CHECK(executor.stream_affinity());
    std::uint64_t n = 0;
    for (int k = 0; k < kPerStream; ++k)
      for (std::uint32_t s = 0; s < kStreams; ++s) REQUIRE(executor.submit(small_frame(s, n++)));
    executor.drain();
    PipelineStats stats = executor.stats();
    REQUIRE(stats.devices.size() == 2);
    CHECK(stats.devices[0].streams == 2);
    CHECK(stats.devices[1].streams == 2);
    CHECK(stats.devices[0].processed == 2 * kPerStream);
  }
  REQUIRE(got.items.size() == kStreams * kPerStream);
  std::map<std::uint32_t, double> lane_of;
  std::map<std::uint32_t, double> seen;
  for (std::size_t i = 0; i < got.items.size(); ++i) {
    const Published& p = got.items[i];
    REQUIRE(p.sequence == i);
    auto [it, first] = lane_of.emplace(p.stream, p.lane);
    REQUIRE(it->second == p.lane);                // the stream never left its lane
    REQUIRE(p.seen == ++seen[p.stream]);          // its state saw every frame of it, in order
  }
}

TEST_CASE("several lanes: frames that publish nothing or are refused do not hold later frames back",
          "[multi_device]") {
  ThreadPool pool(2);
  Collector got;
  {
    PipelineExecutor executor("gaps", {0, 1}, lane_stages(false, 5), {.slots = 2, .queue_depth = 4, .pool = &pool},
                                 got.callbacks());
    for (std::uint64_t n = 1; n <= 100; ++n) REQUIRE(executor.submit(small_frame(0, n, n % 7 == 0 ? 13 : 2)));
    executor.drain();
    PipelineStats stats = executor.stats();
    CHECK(stats.total.processed + stats.total.stage_errors == 100);
  }
  std::vector<std::uint64_t> expected;
  for (std::uint64_t n = 1; n <= 100; ++n)
    if (n % 7 != 0 && n % 5 != 0) expected.push_back(n);
  REQUIRE(got.items.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) REQUIRE(got.items[i].sequence == expected[i]);
  CHECK(got.refused.size() == 100 / 7);
}

TEST_CASE("one lane: the multi-device executor is the plain executor with its own queue policy",
          "[multi_device]") {
  ThreadPool pool(2);
  Collector got;
  PipelineExecutor executor("single", {0}, lane_stages(false), {.slots = 2, .queue_depth = 4, .pool = &pool},
                               got.callbacks());
  for (std::uint64_t n = 0; n < 50; ++n) REQUIRE(executor.submit(small_frame(0, n)));
  executor.drain();
  PipelineStats stats = executor.stats();
  CHECK(stats.total.processed == 50);
  REQUIRE(stats.devices.size() == 1);
  CHECK(stats.devices[0].busy_ms_total > 0.0);
  REQUIRE(got.items.size() == 50);
  for (std::uint64_t n = 0; n < 50; ++n) REQUIRE(got.items[n].sequence == n);
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("CUDA: convert over every visible GPU is byte-exact and leaves in arrival order",
          "[multi_device][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  const int gpus = probe_gpu(0).device_count;
  std::vector<int> devices;
  for (int d = 0; d < gpus; ++d) devices.push_back(d);
  INFO(gpus << " GPUs");
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_int_distribution<int> dist(-32768, 32767);
  constexpr std::int64_t kLines = 29, kSamples = 513;
  constexpr int kFrames = 40;
  std::vector<std::vector<std::int16_t>> inputs;
  std::mutex mutex;
  std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> got;
  ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
    const auto* begin = static_cast<const std::byte*>(r.data);
    std::lock_guard lock(mutex);
    got.emplace_back(r.frame.sequence, std::vector<std::byte>(begin, begin + r.bytes));
  }};
  auto make_stages = [] {
    std::map<std::string, RawParam> given{{"scale", RawParam{{"0.25"}, false, 1}}};
    std::vector<PipelineStage> stages;
    stages.push_back({.label = "convert",
                      .stage = ConvertStage::info().create(validate_params(ConvertStage::info().params, given)),
                      .publish = true});
    return stages;
  };
  {
    PipelineExecutor executor("convert", devices, make_stages,
                                 {.backend = Backend::cuda, .slots = 3, .queue_depth = 4}, callbacks);
    for (std::uint64_t n = 0; n < kFrames; ++n) {
      std::vector<std::int16_t> values(kLines * kSamples * 2);
      for (auto& v : values) v = static_cast<std::int16_t>(dist(rng));
      auto copy = std::make_shared<std::vector<std::int16_t>>(values);
      InputFrame frame;
      frame.meta.sequence = n;
      frame.meta.kind = FrameKind::iq;
      frame.meta.payload.dtype = DType::int16;
      frame.meta.payload.axes = {{"line", kLines}, {"sample", kSamples}, {"iq", 2}};
      frame.payload = std::shared_ptr<const std::byte>(copy, reinterpret_cast<const std::byte*>(copy->data()));
      frame.payload_bytes = values.size() * sizeof(std::int16_t);
      frame.received_ns = 1;
      REQUIRE(executor.submit(std::move(frame)));
      inputs.push_back(std::move(values));
    }
    executor.drain();
    PipelineStats stats = executor.stats();
    REQUIRE(stats.devices.size() == devices.size());
    for (const DeviceStats& d : stats.devices) CHECK(d.processed == kFrames / devices.size());
  }
  REQUIRE(got.size() == kFrames);
  for (std::size_t n = 0; n < got.size(); ++n) {
    REQUIRE(got[n].first == n);
    std::vector<float> expected(inputs[n].size());
    ConvertStage::convert_reference(inputs[n].data(), expected.data(), expected.size(), 0.25f);
    // Exact: one float multiply by a power of two on both sides.
    REQUIRE(got[n].second.size() == expected.size() * sizeof(float));
    REQUIRE(std::memcmp(got[n].second.data(), expected.data(), got[n].second.size()) == 0);
  }
}
#endif
