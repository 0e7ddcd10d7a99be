// The host-path timeline (SONOPIPE_HOST_TIMELINE): records per frame, the file the daemon writes,
// the points a device lane marks in the order a frame passes them, and the staging switch
// (SONOPIPE_STAGING=driver|slot), neither of which may change a result.
#include "runtime/host_timeline.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>

#include "runtime/device_lane.h"
#include "sdk/thread_pool.h"
#include "stages/common/convert/convert.h"
#include "tests/support/test_support.h"

using namespace sonopipe;
using test::ScopedEnv;

namespace {

std::int64_t at(const FrameTimes& times, HostPoint point) {
  return times.at[static_cast<std::size_t>(point)].load();
}

// The CSV the timeline wrote: its header and its rows.
struct TimelineFile {
  std::vector<std::string> header;
  std::vector<std::vector<std::int64_t>> rows;
};

TimelineFile read_timeline(const std::string& path) {
  TimelineFile file;
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  std::istringstream header(line);
  for (std::string name; std::getline(header, name, ',');) file.header.push_back(name);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::int64_t> row;
    for (std::string field; std::getline(fields, field, ',');) row.push_back(std::stoll(field));
    file.rows.push_back(row);
  }
  return file;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".csv")).string();
}

std::unique_ptr<Stage> convert_stage(double scale) {
  std::map<std::string, RawParam> given{{"scale", RawParam{{std::to_string(scale)}, false, 1}}};
  return ConvertStage::info().create(validate_params(ConvertStage::info().params, given));
}

std::vector<PipelineStage> convert_only() {
  std::vector<PipelineStage> stages;
  stages.push_back({.label = "convert", .stage = convert_stage(0.5), .publish = true});
  return stages;
}

// An int16 RF frame [line, sample] with its own copy of `values`, noted in `timeline`.
InputFrame int16_frame(std::uint64_t sequence, std::int64_t lines, std::int64_t samples,
                       const std::vector<std::int16_t>& values, HostTimeline& timeline) {
  InputFrame frame;
  frame.meta.sequence = sequence;
  frame.meta.kind = FrameKind::rf;
  frame.meta.payload.dtype = DType::int16;
  frame.meta.payload.axes = {{"line", lines}, {"sample", samples}};
  auto bytes = std::make_shared<std::vector<std::int16_t>>(values);
  frame.payload = std::shared_ptr<const std::byte>(bytes, reinterpret_cast<const std::byte*>(bytes->data()));
  frame.payload_bytes = values.size() * sizeof(std::int16_t);
  frame.received_ns = 1;
  frame.times = timeline.frame(sequence);
  frame.times->mark(HostPoint::received, host_steady_ns());
  return frame;
}

// Runs `count` random int16 frames through a convert lane; returns each frame's published bytes
// and its inputs.
struct LaneRun {
  std::vector<std::vector<std::byte>> outputs;
  std::vector<std::vector<std::int16_t>> inputs;
};

LaneRun run_convert(ExecutorOptions options, HostTimeline& timeline, std::size_t count, std::int64_t lines,
                    std::int64_t samples) {
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_int_distribution<int> dist(-32768, 32767);
  LaneRun run;
  std::mutex mutex;
  ExecutorCallbacks callbacks{.publish = [&](const PublishedResult& r) {
    const auto* begin = static_cast<const std::byte*>(r.data);
    std::lock_guard lock(mutex);
    run.outputs.emplace_back(begin, begin + r.bytes);
  }};
  DeviceLane lane("timeline", convert_only(), options, callbacks);
  for (std::uint64_t n = 0; n < count; ++n) {
    std::vector<std::int16_t> values(static_cast<std::size_t>(lines * samples));
    for (auto& v : values) v = static_cast<std::int16_t>(dist(rng));
    REQUIRE(lane.submit(int16_frame(n, lines, samples, values, timeline)));
    run.inputs.push_back(std::move(values));
  }
  lane.drain();
  return run;
}

// Each published output is the reference conversion of its input, bit for bit.
void check_converted(const LaneRun& run) {
  REQUIRE(run.outputs.size() == run.inputs.size());
  for (std::size_t n = 0; n < run.inputs.size(); ++n) {
    std::vector<float> expected(run.inputs[n].size());
    ConvertStage::convert_reference(run.inputs[n].data(), expected.data(), expected.size(), 0.5f);
    // Exact: one float multiply of an exactly representable value, same rounding on both sides.
    REQUIRE(run.outputs[n].size() == expected.size() * sizeof(float));
    CHECK(std::memcmp(run.outputs[n].data(), expected.data(), run.outputs[n].size()) == 0);
  }
}

}  // namespace

TEST_CASE("the timeline file lists each frame's marked instants in sequence order, a column per point", "[timeline]") {
  const std::string path = temp_path("host-timeline");
  {
    HostTimeline timeline(path, 16);
    std::mt19937_64 rng(test::fresh_seed());
    std::uniform_int_distribution<std::int64_t> instant(1, 1'000'000'000);
    std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> marked;  // sequence -> received, published
    for (std::uint64_t sequence : {7u, 3u, 11u}) {  // out of order: the file sorts them
      const std::int64_t received = instant(rng), published = instant(rng);
      FrameTimes* times = timeline.frame(sequence);
      times->mark(HostPoint::received, received);
      times->mark(HostPoint::published, published);
      marked[sequence] = {received, published};
    }
    timeline.frame(5);  // taken but never received: not written
    timeline.write();
    const TimelineFile file = read_timeline(path);
    REQUIRE(file.header.size() == 1 + kHostPoints);
    CHECK(file.header[0] == "sequence");
    CHECK(file.header[1] == "received");
    CHECK(file.header[kHostPoints] == "slot_free");
    const auto column = [&](HostPoint p) { return 1 + static_cast<std::size_t>(p); };
    REQUIRE(file.rows.size() == 3);
    std::uint64_t previous = 0;
    for (const auto& row : file.rows) {
      const auto sequence = static_cast<std::uint64_t>(row[0]);
      CHECK(sequence > previous);
      previous = sequence;
      REQUIRE(marked.contains(sequence));
      CHECK(row[column(HostPoint::received)] == marked[sequence].first);
      CHECK(row[column(HostPoint::published)] == marked[sequence].second);
      CHECK(row[column(HostPoint::popped)] == 0);  // not passed: 0
    }
  }
  std::filesystem::remove(path);
}

TEST_CASE("a timeline record taken again by a later sequence starts empty", "[timeline]") {
  HostTimeline timeline(temp_path("host-timeline-ring"), 4);
  FrameTimes* first = timeline.frame(1);
  first->mark(HostPoint::received, 10);
  first->mark(HostPoint::slot_free, 20);
  FrameTimes* later = timeline.frame(5);  // the same record of the ring of 4
  CHECK(later == first);
  CHECK(later->sequence.load() == 5);
  for (std::size_t p = 0; p < kHostPoints; ++p) CHECK(later->at[p].load() == 0);
}

TEST_CASE("a CPU lane marks each frame's points in the order the frame passes them", "[timeline][executor]") {
  ThreadPool pool(2);
  HostTimeline timeline(temp_path("host-timeline-cpu"), 64);
  const LaneRun run = run_convert({.slots = 3, .queue_depth = 4, .pool = &pool}, timeline, 20, 3, 17);
  check_converted(run);
  for (std::uint64_t n = 0; n < 20; ++n) {
    INFO("frame " << n);
    REQUIRE(timeline.find(n));
    const FrameTimes& t = *timeline.find(n);
    const HostPoint order[] = {HostPoint::received, HostPoint::popped, HostPoint::setup_ready, HostPoint::slot,
                               HostPoint::payload_released, HostPoint::published, HostPoint::slot_free};
    for (std::size_t i = 1; i < std::size(order); ++i) {
      REQUIRE(at(t, order[i]) != 0);
      CHECK(at(t, order[i]) >= at(t, order[i - 1]));
    }
    // The CPU backend stages nothing and has no GPU instants.
    CHECK(at(t, HostPoint::staging_begin) == 0);
    CHECK(at(t, HostPoint::gpu_start) == 0);
  }
}

TEST_CASE("a CUDA lane marks staging, issue, the GPU's instants and completion in order; every staging switch "
          "gives the same bytes", "[timeline][executor][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ThreadPool pool(4);  // the slot path's pieces
  // 1024 x 2816 int16: 5.5 MiB, the channel frame's size: several of the driver's pinned pieces,
  // and over the pool's two-piece threshold, so "slot" really splits.
  for (const char* mode : {"driver", "slot"}) {
    INFO("SONOPIPE_STAGING=" << mode);
    ScopedEnv staging("SONOPIPE_STAGING", mode);
    HostTimeline timeline(temp_path("host-timeline-cuda"), 64);
    const LaneRun run =
        run_convert({.backend = Backend::cuda, .slots = 3, .queue_depth = 4, .pool = &pool}, timeline, 12, 1024, 2816);
    check_converted(run);
    for (std::uint64_t n = 0; n < 12; ++n) {
      INFO("frame " << n);
      REQUIRE(timeline.find(n));
      const FrameTimes& t = *timeline.find(n);
      // The host's part of the upload: ours into the slot, or the driver's inside cudaMemcpyAsync.
      REQUIRE(at(t, HostPoint::staging_begin) != 0);
      CHECK(at(t, HostPoint::staging_end) >= at(t, HostPoint::staging_begin));
      // Host points: in the order of the threads' steps.
      const HostPoint host[] = {HostPoint::received,  HostPoint::popped,           HostPoint::setup_ready,
                                HostPoint::slot,      HostPoint::issued,           HostPoint::payload_released,
                                HostPoint::done_seen, HostPoint::published,        HostPoint::slot_free};
      for (std::size_t i = 1; i < std::size(host); ++i) {
        REQUIRE(at(t, host[i]) != 0);
        CHECK(at(t, host[i]) >= at(t, host[i - 1]));
      }
      // GPU points: in stream order, from the slot's events.
      const HostPoint gpu[] = {HostPoint::gpu_start, HostPoint::gpu_h2d_end, HostPoint::gpu_stages_end,
                               HostPoint::gpu_done};
      for (std::size_t i = 1; i < std::size(gpu); ++i) CHECK(at(t, gpu[i]) >= at(t, gpu[i - 1]));
      // Placed on the host clock through the lane's first event, whose host instant is taken when
      // its synchronisation returned (late by that wake-up, microseconds), and the GPU's clock
      // drifts against the host's (about 10 us per second on the H100 host, result-1 of
      // docs/host-path.md's runs). This lane lives well under a second, so 0.2 ms bounds both
      // (1 ms on the late side, a wake-up included); a wrong origin is off by the lane's whole age.
      CHECK(at(t, HostPoint::gpu_start) + 200'000 >= at(t, HostPoint::popped));
      CHECK(at(t, HostPoint::gpu_done) <= at(t, HostPoint::done_seen) + 1'000'000);
    }
  }
}
