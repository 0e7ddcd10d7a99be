// Streaming past one machine: one acquisition of several streams spread over two real sonopiped
// by `sonopipe-replay --route --to A --to B` (stream s -> endpoint s mod 2, one PUSH per daemon),
// and one `sonopipe-record --from A --from B` subscribed to both daemons' PUBs. Every frame must be
// processed exactly once, by the daemon its stream routes to, and the merged recording must hold
// each stream's results in order, each the exact conversion of its frame (int16 -> complex64 at
// scale 1 is exact in float32).
#include <cstring>
#include <filesystem>
#include <map>

#include "tests/tools/tool_test_support.h"
#include "tools/common/daemon_launcher.h"
#include "tools/common/recording.h"
#include "tools/replay/stream_route.h"

using namespace sonopipe;
using namespace std::chrono;
using test::TempDir;

namespace {

std::string convert_config(const tools::DaemonEndpoints& e) {
  return "ingest: {endpoint: \"" + e.ingest + "\", pattern: pull}\npublish: {endpoint: \"" + e.publish +
         "\"}\ncontrol: {endpoint: \"" + e.control + "\"}\nbackend: cpu\ncpu_threads: 1\n"
         "pipelines:\n  - name: demo\n    stages:\n      - {type: convert, params: {scale: 1.0}}\n";
}

constexpr std::uint32_t kStreams[] = {1, 2, 3, 4, 7};
constexpr std::size_t kFramesPerStream = 6;
constexpr std::size_t kDaemons = 2;

// One recording of every stream, frames interleaved in acquisition time (each stream simulated
// on its own, then merged by the recording writer).
void simulate_streams(const std::string& folder, const std::string& path) {
  recording::Writer writer(path);
  for (std::uint32_t stream : kStreams) {
    const std::string part = folder + "/stream" + std::to_string(stream) + ".h5";
    const auto run = test::run_tool({test::tool("sim"), "speckle", "--out", part, "--frames",
                                     std::to_string(kFramesPerStream), "--shape", "4x64", "--kind", "iq", "--type",
                                     "int16", "--stream-id", std::to_string(stream), "--start-time-s",
                                     std::to_string(1.0 + 0.001 * stream), "--seed", std::to_string(test::fresh_seed())});
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    recording::Reader reader(part);
    for (std::size_t i = 0; i < kFramesPerStream; ++i) {
      const recording::Frame frame = reader.read_frame(stream, i);
      writer.append_frame(frame.meta, frame.payload.data(), frame.payload.size());
    }
  }
}

}  // namespace

TEST_CASE("replay --route over two daemons and record --from both: every frame once, each stream in order",
          "[tools][daemon][route]") {
  TempDir dir;
  const std::string input = dir.path + "/streams.h5", merged = dir.path + "/merged.h5";
  simulate_streams(dir.path, input);

  std::vector<tools::DaemonEndpoints> endpoints;
  std::vector<std::unique_ptr<tools::DaemonLauncher>> daemons;
  for (std::size_t d = 0; d < kDaemons; ++d) {
    const std::string folder = dir.path + "/daemon" + std::to_string(d);
    std::filesystem::create_directories(folder);
    endpoints.push_back(tools::pick_endpoints("ipc", folder));
    daemons.push_back(std::make_unique<tools::DaemonLauncher>(test::binary_path("daemon/sonopiped"),
                                                              convert_config(endpoints.back()),
                                                              endpoints.back().control, folder, seconds(30)));
  }
  const std::size_t total = std::size(kStreams) * kFramesPerStream;
  const std::string ready = dir.path + "/record.ready", log = dir.path + "/record.log";
  tools::ChildProcess recorder({test::tool("record"), "--out", merged, "--from", endpoints[0].publish, "--from",
                                endpoints[1].publish, "--count", std::to_string(total), "--ready-file", ready},
                               log);
  REQUIRE(test::wait_for_file(ready, seconds(20)));
  const auto replay = test::run_tool({test::tool("replay"), input, "--route", "--to", endpoints[0].ingest, "--to",
                                      endpoints[1].ingest, "--lossless", "--max"});
  INFO(replay.output);
  REQUIRE(replay.exit_code == 0);
  const auto recorded = recorder.wait(seconds(60));
  INFO(tools::read_text_file(log));
  REQUIRE(recorded == std::optional<int>(0));

  // Each daemon received exactly the frames of the streams routed to it, and refused none.
  std::map<std::size_t, std::size_t> expected_frames;
  for (std::uint32_t stream : kStreams) expected_frames[replay::route_of(stream, kDaemons)] += kFramesPerStream;
  REQUIRE(expected_frames.size() == kDaemons);  // the streams chosen reach both daemons
  for (std::size_t d = 0; d < kDaemons; ++d) {
    const v1::Status status = daemons[d]->status();
    INFO("daemon " << d);
    CHECK(status.frames_received() == expected_frames[d]);
    CHECK(status.frames_processed() == expected_frames[d]);
    CHECK(status.frames_rejected() == 0);
    CHECK(daemons[d]->stop(seconds(20)) == 0);
  }

  // The merged recording: each stream's results once each, in sequence order, exact.
  recording::Reader frames(input), results(merged);
  REQUIRE(results.result_count("demo", "converted") == total);
  std::map<std::uint32_t, std::vector<std::uint64_t>> sequences;
  for (std::size_t i = 0; i < total; ++i) {
    const recording::Result result = results.read_result("demo", "converted", i);
    const std::uint32_t stream = result.header.stream_id();
    sequences[stream].push_back(result.header.input_sequence());
    const recording::Frame frame = frames.read_frame(stream, result.header.input_sequence());
    REQUIRE(result.payload.size() == frame.payload.size() * 2);
    std::vector<std::int16_t> counts(frame.payload.size() / 2);
    std::memcpy(counts.data(), frame.payload.data(), frame.payload.size());
    std::vector<float> values(counts.size());
    std::memcpy(values.data(), result.payload.data(), result.payload.size());
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < counts.size(); ++k) wrong += values[k] != static_cast<float>(counts[k]);
    CHECK(wrong == 0);
  }
  std::vector<std::uint64_t> in_order(kFramesPerStream);
  for (std::size_t k = 0; k < kFramesPerStream; ++k) in_order[k] = k;
  REQUIRE(sequences.size() == std::size(kStreams));
  for (std::uint32_t stream : kStreams) {
    INFO("stream " << stream);
    CHECK(sequences[stream] == in_order);
  }
}

TEST_CASE("replay refuses --to without --route", "[tools][route]") {
  TempDir dir;
  const auto run = test::run_tool({test::tool("replay"), test::source_path("config/demo.yaml"), "--to",
                                   "ipc://" + dir.path + "/a", "--to", "ipc://" + dir.path + "/b"});
  CHECK(run.exit_code != 0);
  CHECK(run.output.find("--to needs --route") != std::string::npos);
}
