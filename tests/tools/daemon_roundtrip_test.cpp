// The tools around the real sonopiped: a simulated recording replayed through the daemon's
// convert stage and recorded arrives exactly once, in order and byte-exact (int16 -> complex64 at
// scale 1 is exact in float32); live replay (PUB -> daemon SUB) delivers at a slow rate; the core
// benchmark runs end to end on a tiny size.
#include <complex>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include "tests/tools/tool_test_support.h"
#include "tools/common/daemon_launcher.h"
#include "tools/common/recording.h"

using namespace sonopipe;
using namespace std::chrono;
using test::TempDir;
using test::TempPath;

namespace {

std::string convert_config(const tools::DaemonEndpoints& e, const std::string& pattern) {
  return "ingest: {endpoint: \"" + e.ingest + "\", pattern: " + pattern + (pattern == "sub" ? ", bind: true" : "") +
         "}\npublish: {endpoint: \"" + e.publish + "\"}\ncontrol: {endpoint: \"" + e.control +
         "\"}\nbackend: cpu\ncpu_threads: 2\nlog_level: info\n"
         "pipelines:\n  - name: demo\n    stages:\n      - {type: convert, params: {scale: 1.0}}\n";
}

void simulate(const std::string& path, std::size_t frames) {
  const auto run = test::run_tool({test::tool("sim"), "speckle", "--out", path, "--frames", std::to_string(frames),
                                   "--shape", "6x128", "--kind", "iq", "--type", "int16", "--frame-rate-hz", "40",
                                   "--seed", std::to_string(test::fresh_seed())});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
}

// sonopipe-record taking `count` results from `endpoint` into `out`; constructed once subscribed.
struct Recorder {
  std::string ready, log;
  tools::ChildProcess process;
  Recorder(const std::string& folder, const std::string& endpoint, const std::string& out, std::size_t count)
      : ready(folder + "/record.ready"), log(folder + "/record.log"),
        process({test::tool("record"), "--out", out, "--endpoint", endpoint, "--count", std::to_string(count),
                 "--ready-file", ready},
                log) {
    REQUIRE(test::wait_for_file(ready, seconds(10)));
  }
  // Waits until it has written its count and exited.
  void finish() {
    const auto recorded = process.wait(seconds(30));
    INFO(tools::read_text_file(log));
    REQUIRE(recorded == std::optional<int>(0));
  }
};

// Every recorded result is the exact complex64 conversion of the frame it names.
void check_results_match_frames(const std::string& frames_path, const std::string& results_path, std::size_t count) {
  recording::Reader frames(frames_path), results(results_path);
  REQUIRE(results.result_outputs() == std::vector<std::pair<std::string, std::string>>{{"demo", "converted"}});
  REQUIRE(results.result_count("demo", "converted") == count);
  for (std::size_t i = 0; i < count; ++i) {
    const recording::Result result = results.read_result("demo", "converted", i);
    CHECK(result.header.input_sequence() == i);  // exactly once, in order
    const recording::Frame frame = frames.read_frame(0, result.header.input_sequence());
    CHECK(result.header.acquisition_time_ns() == frame.meta.acquisition_time_ns);
    CHECK(result.header.element_type() == v1::ELEMENT_TYPE_COMPLEX64);
    REQUIRE(result.payload.size() == frame.payload.size() * 2);  // int16 (I, Q) -> float32 (re, im)
    std::vector<std::int16_t> counts(frame.payload.size() / 2);
    std::memcpy(counts.data(), frame.payload.data(), frame.payload.size());
    std::vector<float> values(counts.size());
    std::memcpy(values.data(), result.payload.data(), result.payload.size());
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < counts.size(); ++k) wrong += values[k] != static_cast<float>(counts[k]);
    CHECK(wrong == 0);
  }
}

}  // namespace

TEST_CASE("replay -> sonopiped convert -> record is lossless, ordered and exact", "[tools][daemon]") {
  constexpr std::size_t kFrames = 12;
  TempDir dir;
  const std::string frames_path = dir.path + "/frames.h5", results_path = dir.path + "/results.h5";
  simulate(frames_path, kFrames);
  const auto endpoints = tools::pick_endpoints("ipc", dir.path);
  tools::DaemonLauncher daemon(test::binary_path("daemon/sonopiped"), convert_config(endpoints, "pull"), endpoints.control,
                               dir.path, seconds(30));
  Recorder recorder(dir.path, endpoints.publish, results_path, kFrames);
  const auto replay = test::run_tool({test::tool("replay"), frames_path, "--endpoint", endpoints.ingest, "--lossless",
                                      "--max"});
  INFO(replay.output);
  CHECK(replay.exit_code == 0);
  recorder.finish();
  const v1::Status status = daemon.status();
  CHECK(status.frames_received() == kFrames);
  CHECK(status.frames_rejected() == 0);
  CHECK(daemon.stop(seconds(20)) == 0);
  check_results_match_frames(frames_path, results_path, kFrames);
}

TEST_CASE("live replay (PUB) into a daemon subscribing delivers every frame at a modest rate", "[tools][daemon]") {
  constexpr std::size_t kFrames = 8;
  TempDir dir;
  const std::string frames_path = dir.path + "/frames.h5", results_path = dir.path + "/results.h5";
  simulate(frames_path, kFrames);
  const auto endpoints = tools::pick_endpoints("ipc", dir.path);
  tools::DaemonLauncher daemon(test::binary_path("daemon/sonopiped"), convert_config(endpoints, "sub"), endpoints.control,
                               dir.path, seconds(30));
  Recorder recorder(dir.path, endpoints.publish, results_path, kFrames);
  // The daemon binds its SUB; replay connects its PUB and starts once the subscription arrived.
  // 40 frames/s of 3 KB: far below what even a loaded machine converts, so nothing is dropped.
  const auto replay = test::run_tool({test::tool("replay"), frames_path, "--endpoint", endpoints.ingest});
  INFO(replay.output);
  CHECK(replay.exit_code == 0);
  CHECK(replay.output.find("dropped: 0") != std::string::npos);
  recorder.finish();
  CHECK(daemon.stop(seconds(20)) == 0);
  check_results_match_frames(frames_path, results_path, kFrames);
}

TEST_CASE("sonopipe-bench core runs against the real daemon and prints its table", "[tools][daemon][bench]") {
  const auto run = test::run_tool({test::binary_path("tools/bench/sonopipe-bench"), "core", "--daemon",
                                   test::binary_path("daemon/sonopiped"), "--backend", "cpu", "--sizes-mb", "0.0625",
                                   "--transports", "ipc", "--frames", "10", "--latency-frames", "5", "--warmup", "2"},
                                  seconds(120));
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("backend cpu") != std::string::npos);
  CHECK(run.output.find("daemon f/s") != std::string::npos);
  CHECK(run.output.find("ipc ") != std::string::npos);
  // The overlap column is for CUDA only: a CPU run must not invent one.
  CHECK(run.output.find(" ms = ") == std::string::npos);
}

TEST_CASE("sonopipe-bench core --timeline reads the daemon's timeline back and every thread's CPU time",
          "[tools][daemon][bench]") {
  const auto run = test::run_tool({test::binary_path("tools/bench/sonopipe-bench"), "core", "--daemon",
                                   test::binary_path("daemon/sonopiped"), "--backend", "cpu", "--sizes-mb", "0.0625",
                                   "--transports", "ipc", "--frames", "10", "--latency-frames", "5", "--warmup", "2",
                                   "--repeats", "2", "--stall-frames", "0", "--timeline"},
                                  seconds(120));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  // Both runs' frames (2 x 10) and the latency run's (5) were found in the daemon's file.
  CHECK(run.output.find("daemon timeline, throughput runs: 20 frames") != std::string::npos);
  CHECK(run.output.find("latency run (one frame in flight): 5 frames") != std::string::npos);
  CHECK(run.output.find("received -> published (the daemon's part)") != std::string::npos);
  // The daemon's named threads, and the relay's own threads (its context is apart from the bench's).
  CHECK(run.output.find("lane-submit: ") != std::string::npos);
  CHECK(run.output.find("ZMQbg/IO/0: ") != std::string::npos);
  CHECK(run.output.find("relay: ZMQbg/IO/0: ") != std::string::npos);
  CHECK(run.output.find("relay sockets: split contexts") != std::string::npos);
}

TEST_CASE("sonopipe-bench core runs every --relay-output in each repeat and places the I/O threads with --io-cpus",
          "[tools][daemon][bench]") {
  if (std::thread::hardware_concurrency() < 2) {
    WARN("skipped: --io-cpus needs a CPU besides the I/O threads'");
    return;
  }
  // Both I/O threads on CPU 1, everything else on CPU 0 (the machine may have two).
  const auto run = test::run_tool({test::binary_path("tools/bench/sonopipe-bench"), "core", "--daemon",
                                   test::binary_path("daemon/sonopiped"), "--backend", "cpu", "--sizes-mb", "0.0625",
                                   "--transports", "ipc", "--frames", "10", "--latency-frames", "5", "--warmup", "2",
                                   "--repeats", "2", "--stall-frames", "0", "--relay-output", "constant", "owned",
                                   "--io-cpus", "1", "1"},
                                  seconds(120));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("relay output constant and owned (ratio and goals against the first)") != std::string::npos);
  CHECK(run.output.find("ZeroMQ I/O threads 0 / 1 on CPUs 1 / 1") != std::string::npos);
  // Two runs of each relay, in run order, and each one's min / median / max against the daemon.
  CHECK(std::regex_search(run.output, std::regex(R"(relay constant [0-9.]+, [0-9.]+; relay owned [0-9.]+, [0-9.]+;)")));
  CHECK(std::regex_search(run.output, std::regex(R"(relay owned [0-9.]+ / [0-9.]+ / [0-9.]+ \([0-9.]+ %\))")));
  CHECK(run.output.find("results published as copies") != std::string::npos);
  CHECK(run.output.find("0.1 MB: daemon IO/0 ") != std::string::npos);
  CHECK(run.output.find("relay owned IO/0 ") != std::string::npos);
}

TEST_CASE("sonopipe-bench hostcopy times its heap sources without a GPU", "[tools][bench]") {
  const auto run = test::run_tool({test::binary_path("tools/bench/sonopipe-bench"), "hostcopy", "--messages", "20",
                                   "--repeats", "2", "--bytes", "1048576"},
                                  seconds(120));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("memcpy of 1048576 bytes on one thread") != std::string::npos);
  for (const char* transport : {"ipc", "tcp"})
    CHECK(run.output.find(std::string(transport) + ": a writer thread sends 20 results of 1048576 bytes") !=
          std::string::npos);
  CHECK(std::regex_search(run.output, std::regex(R"(heap 4 KiB pages, 8 in turn +writer CPU [0-9.]+ / [0-9.]+ / [0-9.]+)")));
  CHECK(run.output.find("written by the preparer each") != std::string::npos);
}
