// sonopipe-run against the daemon path it replaces: the same recording through the real sonopiped
// (sonopipe-replay --lossless -> daemon -> sonopipe-record) and through sonopipe-run with the same
// config must give the same results bit for bit (every payload byte, every header field but the
// wall-clock timing), for the 2-D strain chain and the ARFI chain on the CPU backend. And a batch
// with bad inputs among good ones: each bad input fails alone with a one-line error, leaves no
// output behind, and the exit code counts them.
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "tests/tools/tool_test_support.h"
#include "tools/common/daemon_launcher.h"
#include "tools/common/recording.h"

using namespace sonopipe;
using namespace std::chrono;
using test::TempDir;

namespace {

// An example config with this test's endpoints and the CPU backend instead of its own. ncc_track's
// `method: auto` times every method at configure and keeps the fastest, so two processes may pick
// different ones (which round differently): the comparison names one.
std::string config_for_test(const std::string& example, const tools::DaemonEndpoints& e) {
  std::ifstream file(test::source_path(example));
  REQUIRE(file.good());
  std::stringstream kept;
  kept << "ingest: {endpoint: \"" << e.ingest << "\", pattern: pull}\npublish: {endpoint: \"" << e.publish
       << "\"}\ncontrol: {endpoint: \"" << e.control << "\"}\nbackend: cpu\ncpu_threads: 2\n";
  std::string line;
  bool skipping = false;
  while (std::getline(file, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      skipping = false;
      for (const char* key : {"ingest:", "publish:", "control:", "backend:", "cpu_threads:"})
        if (line.rfind(key, 0) == 0) skipping = true;
    }
    if (const auto at = line.find("method: auto"); at != std::string::npos) line.replace(at, 12, "method: standard");
    if (!skipping) kept << line << "\n";
  }
  return kept.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// The daemon path: sonopiped with `config`, sonopipe-record taking `results` results, sonopipe-replay.
void run_through_daemon(const std::string& dir, const std::string& config, const tools::DaemonEndpoints& endpoints,
                        const std::string& input, const std::string& out, std::size_t results) {
  tools::DaemonLauncher daemon(test::binary_path("daemon/sonopiped"), config, endpoints.control, dir, seconds(60));
  const std::string ready = dir + "/record.ready", log = dir + "/record.log";
  tools::ChildProcess recorder({test::tool("record"), "--out", out, "--endpoint", endpoints.publish, "--count",
                                std::to_string(results), "--ready-file", ready},
                               log);
  REQUIRE(test::wait_for_file(ready, seconds(20)));
  const auto replay = test::run_tool({test::tool("replay"), input, "--endpoint", endpoints.ingest, "--lossless", "--max"},
                                     seconds(120));
  INFO(replay.output);
  REQUIRE(replay.exit_code == 0);
  const auto recorded = recorder.wait(seconds(300));
  INFO(tools::read_text_file(log) << "\n" << daemon.log_tail());
  REQUIRE(recorded == std::optional<int>(0));
  CHECK(daemon.status().frames_rejected() == 0);
  CHECK(daemon.stop(seconds(30)) == 0);
}

// True when some line of `text` starts with `start` and names `name`.
bool has_line(const std::string& text, const std::string& start, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(start, 0) == 0 && line.find(name) != std::string::npos) return true;
  return false;
}

test::ToolRun run_batch(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv{test::tool("run")};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  return test::run_tool(argv, seconds(300));
}

// Every result of `expected` is in `actual` under the same pipeline/output at the same index, with
// the same payload bytes and header; only the wall-clock timing may differ.
void check_same_results(const std::string& expected_path, const std::string& actual_path, std::size_t count) {
  recording::Reader expected(expected_path), actual(actual_path);
  REQUIRE(actual.result_outputs() == expected.result_outputs());
  std::size_t compared = 0;
  for (const auto& [pipeline, output] : expected.result_outputs()) {
    INFO(pipeline << "/" << output);
    REQUIRE(actual.result_count(pipeline, output) == expected.result_count(pipeline, output));
    for (std::size_t i = 0; i < expected.result_count(pipeline, output); ++i) {
      recording::Result a = expected.read_result(pipeline, output, i), b = actual.read_result(pipeline, output, i);
      INFO("result " << i << ", sequence " << a.header.input_sequence());
      REQUIRE(a.header.pipeline() == pipeline);  // a header was read, not a default one
      REQUIRE(!a.payload.empty());
      CHECK(b.payload == a.payload);
      a.header.clear_timing();
      b.header.clear_timing();
      CHECK(google::protobuf::util::MessageDifferencer::Equals(a.header, b.header));
      ++compared;
    }
  }
  CHECK(compared == count);
}

void compare_paths(const std::string& example, const std::vector<std::string>& simulate, std::size_t results) {
  TempDir dir;
  const std::string input = dir.path + "/input.h5";
  std::vector<std::string> sim{test::tool("sim")};
  sim.insert(sim.end(), simulate.begin(), simulate.end());
  sim.insert(sim.end(), {"--out", input, "--seed", std::to_string(test::fresh_seed())});
  const auto simulated = test::run_tool(sim, seconds(120));
  INFO(simulated.output);
  REQUIRE(simulated.exit_code == 0);

  const auto endpoints = tools::pick_endpoints("ipc", dir.path);
  const std::string config = config_for_test(example, endpoints);
  write_file(dir.path + "/config.yaml", config);
  run_through_daemon(dir.path, config, endpoints, input, dir.path + "/daemon.h5", results);

  const auto batch = run_batch({"--config", dir.path + "/config.yaml", input, "--out", dir.path + "/out"});
  INFO(batch.output);
  REQUIRE(batch.exit_code == 0);
  CHECK(batch.output.find("ok " + input + " -> " + dir.path + "/out/input.h5") != std::string::npos);
  check_same_results(dir.path + "/daemon.h5", dir.path + "/out/input.h5", results);
}

}  // namespace

TEST_CASE("sonopipe-run gives the daemon's 2-D strain results bit for bit", "[tools][run][strain]") {
  // 3 frames: frame 0 primes ncc_track; frames 1 and 2 publish its 4 outputs and the strain.
  compare_paths("config/strain2d.yaml", {"strain", "--frames", "3"}, 10);
}

TEST_CASE("sonopipe-run gives the daemon's ARFI results bit for bit", "[tools][run][arfi]") {
  // Small sets as in tests/daemon/arfi_daemon_test.cpp; one displacement_filtered per set.
  compare_paths("config/arfi.yaml",
                {"arfi", "--sets", "3", "--locations", "6", "--tracks", "30", "--samples", "240", "--focus-m", "0.015",
                 "--depth-sigma-m", "0.003", "--lateral-sigma-m", "0.001", "--recovery-s", "0.001", "--threads", "2"},
                3);
}

TEST_CASE("sonopipe-run honours max_streams as the daemon does (one assembly of pipelines)", "[tools][run][strain]") {
  // Two streams through ncc_track (which keeps one state per stream) in the order A0 A1 B0 B1 A2,
  // with max_streams: 1. Stream B evicts A's state, so A2 primes afresh instead of pairing with A1:
  // 2 pairs x 5 results. With the default (64 streams) A2 would pair too (15 results); the copy of
  // the daemon's assembly that sonopipe-run once had ignored max_streams and wrote 15.
  TempDir dir;
  const std::string simulated_path = dir.path + "/one_stream.h5", input = dir.path + "/two_streams.h5";
  const auto sim = test::run_tool({test::tool("sim"), "strain", "--frames", "3", "--out", simulated_path, "--seed",
                                   std::to_string(test::fresh_seed())},
                                  seconds(120));
  INFO(sim.output);
  REQUIRE(sim.exit_code == 0);
  {
    recording::Reader reader(simulated_path);
    recording::Writer writer(input);
    const std::uint32_t stream = reader.streams().at(0);
    REQUIRE(reader.frame_count(stream) == 3);
    const std::pair<std::uint32_t, std::size_t> order[] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}};
    std::int64_t time_ns = 0;  // replay and run take frames in acquisition-time order
    for (const auto& [stream_id, index] : order) {
      recording::Frame frame = reader.read_frame(stream, index);
      frame.meta.stream_id = stream_id;
      frame.meta.sequence = index;
      frame.meta.acquisition_time_ns = time_ns += 1'000'000;
      writer.append_frame(frame.meta, frame.payload.data(), frame.payload.size());
    }
  }
  const auto endpoints = tools::pick_endpoints("ipc", dir.path);
  const std::string config = config_for_test("config/strain2d.yaml", endpoints) + "max_streams: 1\n";
  write_file(dir.path + "/config.yaml", config);
  run_through_daemon(dir.path, config, endpoints, input, dir.path + "/daemon.h5", 10);

  const auto batch = run_batch({"--config", dir.path + "/config.yaml", input, "--out", dir.path + "/out"});
  INFO(batch.output);
  REQUIRE(batch.exit_code == 0);
  CHECK(batch.output.find(": 5 frames, 10 results") != std::string::npos);
  check_same_results(dir.path + "/daemon.h5", dir.path + "/out/two_streams.h5", 10);
}

TEST_CASE("sonopipe-run: bad inputs fail alone, leave no output, and the exit code counts them", "[tools][run]") {
  TempDir dir;
  const std::string good_a = dir.path + "/good_a.h5", good_b = dir.path + "/good_b.h5";
  const std::string junk = dir.path + "/junk.h5", missing = dir.path + "/missing.h5", nan = dir.path + "/nan.h5";
  for (const std::string& path : {good_a, good_b}) {
    const auto sim = test::run_tool({test::tool("sim"), "speckle", "--out", path, "--frames", "4", "--shape", "6x128",
                                     "--kind", "iq", "--type", "int16", "--seed", std::to_string(test::fresh_seed())});
    INFO(sim.output);
    REQUIRE(sim.exit_code == 0);
  }
  write_file(junk, "not a recording\n");
  {
    // float32 frames, the third one holding a NaN: refused by non_finite: reject after two frames
    // were processed, so a result file had been started.
    const std::string floats = dir.path + "/floats.h5";
    const auto sim = test::run_tool({test::tool("sim"), "strain", "--out", floats, "--frames", "4", "--samples", "64",
                                     "--lines", "8", "--type", "float32", "--seed", std::to_string(test::fresh_seed())});
    INFO(sim.output);
    REQUIRE(sim.exit_code == 0);
    recording::Reader reader(floats);
    recording::Writer writer(nan);
    const std::uint32_t stream = reader.streams().at(0);
    for (std::size_t i = 0; i < reader.frame_count(stream); ++i) {
      recording::Frame frame = reader.read_frame(stream, i);
      if (i == 2) {
        const float not_a_number = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(frame.payload.data() + 4 * 17, &not_a_number, sizeof not_a_number);
      }
      writer.append_frame(frame.meta, frame.payload.data(), frame.payload.size());
    }
  }
  write_file(dir.path + "/convert.yaml", "pipelines:\n  - name: demo\n    stages:\n      - {type: convert}\n"
                                         "backend: cpu\ncpu_threads: 2\n");
  const std::string out = dir.path + "/out";
  const auto batch = run_batch({"--config", dir.path + "/convert.yaml", good_a, junk, missing, nan, good_b, "--out", out});
  INFO(batch.output);
  CHECK(batch.exit_code == 3);
  CHECK(batch.output.find("ok " + good_a + " -> " + out + "/good_a.h5: 4 frames, 4 results") != std::string::npos);
  CHECK(batch.output.find("ok " + good_b + " -> " + out + "/good_b.h5: 4 frames, 4 results") != std::string::npos);
  CHECK(batch.output.find("failed " + nan + ": frame 2 (stream ") != std::string::npos);
  CHECK(batch.output.find("NaN or Inf") != std::string::npos);
  for (const std::string& bad : {junk, missing}) {
    INFO(bad);
    CHECK(has_line(batch.output, "failed ", bad));
  }
  CHECK(batch.output.find("2 of 5 inputs ok, 3 failed") != std::string::npos);

  // Only the good inputs' results and the summary are there: no partial file of any kind.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(out)) files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"good_a.h5", "good_b.h5", "summary.csv"});
  recording::Reader result(out + "/good_b.h5");
  CHECK(result.result_count("demo", "converted") == 4);

  std::ifstream summary(out + "/summary.csv");
  std::vector<std::string> rows;
  for (std::string row; std::getline(summary, row);) rows.push_back(row);
  REQUIRE(rows.size() == 6);
  CHECK(rows[0] == "input,output,status,frames,unmatched_frames,results,seconds,frames_per_s,error");
  CHECK(rows[1].rfind(good_a + "," + out + "/good_a.h5,ok,4,0,4,", 0) == 0);
  for (std::size_t row : {2u, 3u, 4u}) {
    INFO(rows[row]);
    CHECK(rows[row].find(",,failed,") != std::string::npos);
  }
  CHECK(rows[3].find("missing.h5") != std::string::npos);
  CHECK(rows[5].rfind(good_b + "," + out + "/good_b.h5,ok,4,0,4,", 0) == 0);
}
