// Integration tests against the real sonopiped binary over ipc endpoints (see daemon_harness.h).
#include <sched.h>

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <thread>

#include "daemon/backend_choice.h"
#include "daemon/thread_placement.h"
#include "stages/registry.h"

#include "tests/daemon/daemon_harness.h"

using namespace sonopipe;
using namespace std::chrono_literals;

namespace {

const char* kConvertPipeline = R"(
backend: cpu
cpu_threads: 2
slots: 3
queue_depth: 16
pipelines:
  - name: demo
    match: {kinds: [iq, rf]}
    stages:
      - {type: convert, params: {scale: 0.5}}
)";

// The complex64 values convert must publish for int16 IQ input: 0.5 * I, 0.5 * Q (exact in float).
std::string expected_convert(const std::vector<std::int16_t>& input) {
  std::string bytes(input.size() * sizeof(float), '\0');
  for (std::size_t i = 0; i < input.size(); ++i) {
    float value = 0.5f * static_cast<float>(input[i]);
    std::memcpy(bytes.data() + i * sizeof(float), &value, sizeof value);
  }
  return bytes;
}

}  // namespace

TEST_CASE("lossless: N frames through convert arrive exactly once, in order, byte-exact", "[daemon]") {
  test::DaemonHarness daemon(kConvertPipeline);
  daemon.start();
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::size_t kFrames = 200;
  constexpr std::int64_t kLines = 16, kSamples = 300;
  std::vector<std::string> expected;
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    auto samples = test::random_samples(kLines * kSamples * 2, rng);
    v1::FrameHeader header = test::iq_header(n, kLines, kSamples);
    (*header.mutable_attributes())["probe"] = "L11-4v #" + std::to_string(n);
    daemon.send(header.SerializeAsString(), samples.data(), samples.size() * 2);
    expected.push_back(expected_convert(samples));
  }
  auto results = daemon.receive_results(kFrames);
  REQUIRE(results.size() == kFrames);
  for (std::size_t n = 0; n < kFrames; ++n) {
    const test::Received& r = results[n];
    INFO("result " << n);
    REQUIRE(r.topic == "result/demo/converted");
    REQUIRE(r.header.input_sequence() == n);
    CHECK(r.header.pipeline() == "demo");
    CHECK(r.header.backend() == "cpu");
    CHECK(r.header.element_type() == v1::ELEMENT_TYPE_COMPLEX64);
    REQUIRE(r.header.axes_size() == 2);
    CHECK(r.header.axes(0).name() == "line");
    CHECK(r.header.axes(1).size() == kSamples);
    CHECK(r.header.acquisition_time_ns() == static_cast<std::int64_t>(1000000 * n));
    // The frame's attributes travel with its results.
    CHECK(r.header.attributes().at("probe") == "L11-4v #" + std::to_string(n));
    const v1::Timing& t = r.header.timing();
    CHECK(t.received_ns() > 0);
    CHECK(t.received_ns() <= t.compute_start_ns());
    CHECK(t.compute_start_ns() <= t.compute_end_ns());
    CHECK(t.compute_end_ns() <= t.published_ns());
    REQUIRE(r.payload == expected[n]);
  }
  // Nothing more arrives: exactly once.
  CHECK(daemon.receive_results(1, 1s).empty());
  v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_processed() == kFrames; });
  CHECK(status.frames_received() == kFrames);
  CHECK(status.results_published() == kFrames);
  CHECK(status.frames_rejected() == 0);
  CHECK(status.frames_missing() == 0);
  CHECK(status.frames_dropped() == 0);
  auto reply = daemon.control("stop");
  REQUIRE(reply);
  CHECK(reply->ok());
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("status answers over the control socket and stop ends the daemon with exit code 0", "[daemon]") {
  test::DaemonHarness daemon(kConvertPipeline);
  daemon.start();
  auto reply = daemon.control("status");
  REQUIRE(reply);
  REQUIRE(reply->ok());
  const v1::Status& status = reply->status();
  CHECK(status.backend() == "cpu");
  CHECK(status.backend_reason() == "cpu requested");
  CHECK_FALSE(status.device_name().empty());
  CHECK(status.uptime_s() > 0);
  REQUIRE(status.pipelines_size() == 1);
  CHECK(status.pipelines(0).name() == "demo");
  CHECK(status.pipelines(0).slots() == 3);
  CHECK(status.pipelines(0).queue_capacity() == 16);
  REQUIRE(status.stages_size() == 1);
  CHECK(status.stages(0).stage() == "convert");
  // Sequence gaps are counted as frames missing before the daemon: 0, 1, then 5 leaves out 2..4.
  std::vector<std::int16_t> samples(2 * 3 * 2, 7);
  for (std::uint64_t n : {0, 1, 5}) daemon.send(test::iq_header(n, 2, 3).SerializeAsString(), samples.data(), 24);
  v1::Status counted = daemon.wait_for_status([](const v1::Status& s) { return s.frames_processed() == 3; });
  CHECK(counted.frames_received() == 3);
  CHECK(counted.frames_missing() == 3);
  CHECK(counted.stages(0).frames() == 3);
  auto unknown = daemon.control("reboot");
  REQUIRE(unknown);
  CHECK_FALSE(unknown->ok());
  CHECK(unknown->error().find("unknown command") != std::string::npos);
  auto stop = daemon.control("stop");
  REQUIRE(stop);
  CHECK(stop->ok());
  CHECK(daemon.wait_exit() == 0);
}

namespace {

// A frame header built from plain metadata (for the bad-input kinds).

}  // namespace

TEST_CASE("each bad-input kind is rejected and counted while good frames keep flowing", "[daemon]") {
  test::DaemonHarness daemon(R"(
backend: cpu
cpu_threads: 2
max_frame_bytes: 65536
pipelines:
  - name: demo
    match: {kinds: [iq, rf]}
    stages:
      - {type: convert, params: {scale: 0.5}}
)");
  daemon.start();
  std::mt19937_64 rng(test::fresh_seed());
  std::uint64_t good_sequence = 0;
  std::vector<std::string> expected;
  auto send_good = [&] {
    auto samples = test::random_samples(4 * 50 * 2, rng);
    daemon.send(test::iq_header(good_sequence++, 4, 50).SerializeAsString(), samples.data(), samples.size() * 2);
    expected.push_back(expected_convert(samples));
  };
  const std::vector<char> payload(70000, 0);

  send_good();
  daemon.send_parts({test::iq_header(1000, 1, 1).SerializeAsString(), "\0\0\0\0", "extra part"});  // malformed_message
  send_good();
  daemon.send(std::string("\x0a\xff", 2), payload.data(), 16);  // unparsable_header: truncated field
  send_good();
  {
    v1::FrameHeader header = test::iq_header(1001, 1, 2);
    header.set_schema_version(2);
    daemon.send(header.SerializeAsString(), payload.data(), 8);  // unknown_schema
  }
  send_good();
  {
    v1::FrameHeader header = test::iq_header(1002, 1, 2);
    header.set_element_type(v1::ELEMENT_TYPE_UNSPECIFIED);
    daemon.send(header.SerializeAsString(), payload.data(), 8);  // bad_header
  }
  send_good();
  daemon.send(test::iq_header(1003, 2, 10).SerializeAsString(), payload.data(), 2 * 10 * 2 * 2 - 2);  // size_mismatch
  send_good();
  daemon.send(test::frame_header_bytes(FrameKind::rf, DType::int16, {{"sample", 35000}}, 1004), payload.data(), 70000);  // too_large
  send_good();
  {
    std::vector<float> values(64, 1.0f);
    values[17] = std::numeric_limits<float>::quiet_NaN();
    daemon.send(test::frame_header_bytes(FrameKind::rf, DType::float32, {{"sample", 64}}, 1005), values.data(), 256);  // non_finite
  }
  send_good();
  daemon.send(test::frame_header_bytes(FrameKind::dce, DType::float32, {{"voxel", 4}}, 1006), payload.data(), 16);  // no_pipeline
  send_good();
  daemon.send(test::frame_header_bytes(FrameKind::rf, DType::float64, {{"sample", 8}}, 1007), payload.data(), 64);  // stage_error
  send_good();

  auto results = daemon.receive_results(expected.size());
  REQUIRE(results.size() == expected.size());
  for (std::size_t n = 0; n < expected.size(); ++n) {
    INFO("good frame " << n);
    CHECK(results[n].header.input_sequence() == n);
    CHECK(results[n].payload == expected[n]);
  }
  // A subscriber can see a result before the completion thread counts it, so wait for both counts.
  v1::Status status = daemon.wait_for_status([&](const v1::Status& s) {
    return s.frames_rejected() >= 9 && s.results_published() >= expected.size();
  });
  CHECK(status.frames_received() == expected.size() + 9);
  CHECK(status.frames_rejected() == 9);
  for (const char* reason : {"malformed_message", "unparsable_header", "unknown_schema", "bad_header", "size_mismatch",
                             "too_large", "non_finite", "no_pipeline", "stage_error"}) {
    INFO("reason " << reason);
    CHECK(status.rejected_by_reason().count(reason) == 1);
    if (status.rejected_by_reason().count(reason)) CHECK(status.rejected_by_reason().at(reason) == 1);
  }
  CHECK(status.pipelines(0).stage_errors() == 1);
  CHECK(status.results_published() == expected.size());
  // Each refusal left one line naming its reason in the log.
  const std::string log = daemon.wait_for_log("rejected frame (stage_error)");
  CHECK(log.find("rejected frame (size_mismatch)") != std::string::npos);
  CHECK(log.find("rejected frame (stage_error)") != std::string::npos);
  daemon.signal(SIGINT);
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("a message far over the limit is cut by libzmq, and the loss is counted and logged", "[daemon]") {
  test::DaemonHarness daemon(R"(
backend: cpu
cpu_threads: 2
max_frame_bytes: 65536
pipelines:
  - name: demo
    stages:
      - {type: convert}
)");
  daemon.start();
  std::vector<std::int16_t> samples(2 * 50 * 2, 3);
  daemon.send(test::iq_header(0, 2, 50).SerializeAsString(), samples.data(), samples.size() * 2);
  REQUIRE(daemon.receive_results(1).size() == 1);
  // Over max_frame_bytes + 1 MiB: libzmq refuses it and drops the connection; the PUSH socket
  // reconnects. Frames sent right after it may share its fate, so send until one arrives.
  const std::vector<std::int16_t> huge(2 * 300000 * 2, 1);
  daemon.send(test::iq_header(1, 2, 300000).SerializeAsString(), huge.data(), huge.size() * 2);
  std::uint64_t sequence = 2;
  std::vector<test::Received> arrived;
  for (; sequence < 40 && arrived.empty(); ++sequence) {
    daemon.send(test::iq_header(sequence, 2, 50).SerializeAsString(), samples.data(), samples.size() * 2);
    arrived = daemon.receive_results(1, std::chrono::seconds(1));
  }
  REQUIRE(arrived.size() == 1);
  const std::uint64_t first_after = arrived[0].header.input_sequence();
  v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_missing() > 0; });
  CHECK(status.frames_missing() == first_after - 1);  // the huge frame and any lost with it
  CHECK(status.frames_rejected() == 0);               // nothing reached the checks
  CHECK(daemon.log().find("frame(s) missing before sequence " + std::to_string(first_after)) != std::string::npos);
  daemon.signal(SIGINT);
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("SIGTERM drains: every accepted frame is published, then the daemon exits 0", "[daemon]") {
  test::DaemonHarness daemon(R"(
backend: cpu
cpu_threads: 1
slots: 2
queue_depth: 64
pipelines:
  - name: demo
    stages:
      - {type: convert, params: {scale: 0.5}}
)");
  daemon.start();
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::uint64_t kFrames = 120;
  constexpr std::int64_t kLines = 64, kSamples = 2000;  // 512 KB in, 1 MB out per frame
  auto samples = test::random_samples(kLines * kSamples * 2, rng);
  for (std::uint64_t n = 0; n < kFrames; ++n)
    daemon.send(test::iq_header(n, kLines, kSamples).SerializeAsString(), samples.data(), samples.size() * 2);
  // Sends only queue in our socket: make sure the daemon has taken some before it is told to stop.
  daemon.wait_for_status([](const v1::Status& s) { return s.frames_received() > 0; });
  daemon.signal(SIGTERM);

  // Results, then the final heartbeat (drained = true) that the daemon sends once it has drained.
  std::vector<test::Received> results;
  const std::optional<v1::Status> final_status = daemon.receive_until_drained(results);
  REQUIRE(final_status);
  CHECK(daemon.wait_exit() == 0);
  const std::uint64_t accepted = final_status->pipelines(0).frames_accepted();
  WARN("sent " << kFrames << " frames, " << accepted << " accepted before SIGTERM and drained");
  CHECK(accepted > 0);
  CHECK(final_status->frames_processed() == accepted);
  CHECK(final_status->results_published() == accepted);
  REQUIRE(results.size() == accepted);
  for (std::size_t n = 0; n < results.size(); ++n) REQUIRE(results[n].header.input_sequence() == n);
  CHECK(daemon.log().find("SIGTERM received: draining") != std::string::npos);
}

TEST_CASE("--check-config accepts the example configs and reports errors as file:line with exit code 2", "[daemon]") {
  test::DaemonHarness daemon("pipelines: [{name: demo, stages: [{type: convert}]}]");
  std::string output;
  for (const char* example : {"config/demo.yaml", "config/live.yaml"}) {
    INFO(example);
    CHECK(daemon.run_to_exit({"--config", test::source_path(example), "--check-config"}, output) == 0);
    CHECK(output.find(": ok, ") != std::string::npos);
  }
  const std::string bad = daemon.config_path() + ".bad.yaml";
  std::ofstream(bad) << "slots: 2\nqueue_depth: many\npipelines: [{name: demo, stages: [{type: convert}]}]\n";
  CHECK(daemon.run_to_exit({"--config", bad, "--check-config"}, output) == 2);
  CHECK(output.find(bad + ":2: queue_depth: expected an integer") != std::string::npos);
  CHECK(daemon.run_to_exit({"--config", daemon.config_path() + ".missing"}, output) == 2);
  CHECK(output.find("cannot open the config file") != std::string::npos);
}

TEST_CASE("--list-stages prints every stage with its parameters", "[daemon]") {
  test::DaemonHarness daemon("pipelines: [{name: demo, stages: [{type: convert}]}]");
  std::string output;
  REQUIRE(daemon.run_to_exit({"--list-stages"}, output) == 0);
  for (const StageInfo& info : builtin_stages().all()) {
    CHECK(output.find(info.name + " — ") != std::string::npos);
    for (const ParamDecl& param : info.params) CHECK(output.find("    " + param.key + " (") != std::string::npos);
  }
  // Integer ranges and defaults print as integers, never as 1.000000.
  CHECK(output.find("late_tracks (integer, default 10, range [1, 100000], unit tracks, live)") != std::string::npos);
  CHECK(output.find(".000000") == std::string::npos);
  std::string markdown;
  REQUIRE(daemon.run_to_exit({"--list-stages", "--markdown"}, markdown) == 0);
  CHECK(markdown.find(builtin_stages().describe_markdown()) != std::string::npos);
}

TEST_CASE("--backend cuda without a usable device is a clear error with a non-zero exit", "[daemon]") {
  if (test::cuda_device_present()) {
    WARN("skipped: a CUDA device is present");
    return;
  }
  test::DaemonHarness daemon("pipelines: [{name: demo, stages: [{type: convert}]}]");
  std::string output;
  CHECK(daemon.run_to_exit({"--config", daemon.config_path(), "--backend", "cuda"}, output) == 3);
  CHECK(output.find("backend cuda requested but unavailable") != std::string::npos);
}

TEST_CASE("live SUB ingest with drop_oldest: results stay in order and every frame is accounted for", "[daemon]") {
  test::DaemonHarness daemon(R"(
backend: cpu
cpu_threads: 1
slots: 1
queue_depth: 1
overflow: drop_oldest
pipelines:
  - name: live
    stages:
      - {type: convert}
)",
                               // the daemon connects its SUB to the scanner's PUB
                               R"({endpoint: "ipc://{dir}/scanner", pattern: sub, bind: false})");
  daemon.bind_publisher("scanner");
  daemon.start();
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::int64_t kLines = 64, kSamples = 4096;  // 1 MiB in, 2 MiB out: the executor falls behind
  auto samples = test::random_samples(kLines * kSamples * 2, rng);
  const std::string probe = test::iq_header(0, kLines, kSamples).SerializeAsString();
  // Subscriptions travel asynchronously: send until the daemon has seen a frame.
  std::uint64_t sequence = 0;
  const auto deadline = test::Clock::now() + 20s;
  while (test::Clock::now() < deadline) {
    daemon.publish_frame(test::iq_header(sequence++, kLines, kSamples).SerializeAsString(), samples.data(),
                         samples.size() * 2);
    if (auto reply = daemon.control("status"); reply && reply->status().frames_received() > 0) break;
  }
  for (int n = 0; n < 100; ++n)
    daemon.publish_frame(test::iq_header(sequence++, kLines, kSamples).SerializeAsString(), samples.data(),
                         samples.size() * 2);
  auto stop = daemon.control("stop");
  REQUIRE(stop);
  std::vector<test::Received> results;
  const std::optional<v1::Status> final_status = daemon.receive_until_drained(results);
  REQUIRE(final_status);
  CHECK(daemon.wait_exit() == 0);
  const v1::PipelineStatus& live = final_status->pipelines(0);
  WARN("live: " << sequence << " sent, " << final_status->frames_received() << " received, "
                << final_status->frames_missing() << " missing, " << live.frames_dropped() << " dropped, "
                << live.frames_processed() << " processed");

  REQUIRE(final_status->frames_received() > 0);
  CHECK(live.frames_accepted() == final_status->frames_received());
  CHECK(live.frames_accepted() == live.frames_processed() + live.frames_dropped());
  CHECK(results.size() == live.frames_processed());
  for (std::size_t n = 1; n < results.size(); ++n)
    REQUIRE(results[n].header.input_sequence() > results[n - 1].header.input_sequence());
}

TEST_CASE("CUDA backend through the daemon: lossless frames arrive in order, byte-exact", "[daemon][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  test::DaemonHarness daemon(R"(
backend: cuda
slots: 3
queue_depth: 16
pipelines:
  - name: demo
    stages:
      - {type: convert, params: {scale: 0.5}}
)",
                              "",
                              // This test reads every result: room for the whole burst (1.2 GB), so a
                              // reader that falls behind the GPU is not cut at the default byte bound
                              // (on the H100 it was, after 112 of the 300 4 MiB results).
                              "max_queued_bytes: 2147483648");
  daemon.start();
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::size_t kFrames = 300;
  constexpr std::int64_t kLines = 256, kSamples = 2048;  // 2 MiB in, 4 MiB out
  std::vector<std::vector<std::int16_t>> inputs;
  for (int i = 0; i < 4; ++i) inputs.push_back(test::random_samples(kLines * kSamples * 2, rng));
  std::vector<std::string> expected;
  for (const auto& input : inputs) expected.push_back(expected_convert(input));
  std::thread sender([&] {
    for (std::uint64_t n = 0; n < kFrames; ++n)
      daemon.send(test::iq_header(n, kLines, kSamples).SerializeAsString(), inputs[n % 4].data(),
                  inputs[n % 4].size() * 2);
  });
  auto results = daemon.receive_results(kFrames, 120s);
  sender.join();
  REQUIRE(results.size() == kFrames);
  for (std::size_t n = 0; n < kFrames; ++n) {
    REQUIRE(results[n].header.input_sequence() == n);
    REQUIRE(results[n].header.backend() == "cuda");
    REQUIRE(results[n].payload == expected[n % 4]);
  }
  auto reply = daemon.control("status");
  REQUIRE(reply);
  const v1::PipelineStatus& p = reply->status().pipelines(0);
  WARN("daemon on " << reply->status().device_name() << ", 2 MiB int16 IQ frames: latency p50 " << p.latency_ms_p50()
                    << " ms p99 " << p.latency_ms_p99() << ", H2D p50 " << p.h2d_ms_p50() << " ms, D2H p50 "
                    << p.d2h_ms_p50() << " ms, GPU busy/frame p50 " << p.busy_ms_p50() << " ms, interval p50 "
                    << p.interval_ms_p50() << " ms, convert GPU p50 " << reply->status().stages(0).compute_ms_p50()
                    << " ms, enqueue p50 " << reply->status().stages(0).enqueue_ms_p50() << " ms");
  CHECK(daemon.control("stop"));
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("sonopipe-ctl prints the status as text or JSON and stops the daemon", "[daemon][ctl]") {
  test::DaemonHarness daemon(kConvertPipeline);
  daemon.start();
  const std::string ctl = test::binary_path("tools/ctl/sonopipe-ctl");
  auto run = [&](const std::string& args, std::string& output) {
    const std::string path = daemon.config_path() + ".ctl.out";
    int status = std::system((ctl + " " + args + " --endpoint " + daemon.endpoint("control") + " > " + path + " 2>&1").c_str());
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    output = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string output;
  REQUIRE(run("status", output) == 0);
  CHECK(output.find("backend: cpu (cpu requested)") != std::string::npos);
  CHECK(output.find("frames: 0 received, 0 processed") != std::string::npos);
  CHECK(output.find("stage convert: compute ms p50") != std::string::npos);
  REQUIRE(run("status --json", output) == 0);
  CHECK(output.find("\"backend\": \"cpu\"") != std::string::npos);
  CHECK(output.find("\"framesReceived\": \"0\"") != std::string::npos);
  REQUIRE(run("stop --wait", output) == 0);
  CHECK(daemon.wait_exit() == 0);
  // Nobody answers now: exit code 2 after the timeout.
  CHECK(run("status --timeout-ms 300", output) == 2);
  CHECK(output.find("no answer from") != std::string::npos);
}

TEST_CASE("threads: the daemon's threads run on threads.cpus and its ZeroMQ I/O threads on theirs", "[daemon][threads]") {
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  if (cpus.size() < 2) {
    WARN("skipped: this process may run on one CPU only");
    return;
  }
  const std::string others = std::to_string(cpus[0]), io = std::to_string(cpus[1]);
  test::DaemonHarness daemon(std::string(kConvertPipeline) + "threads: {cpus: \"" + others + "\", ingest_io_cpus: \"" + io +
                       "\", publish_io_cpus: \"" + io + "\"}\n");
  daemon.start();
  std::map<std::string, std::vector<int>> placed;  // thread name -> its CPUs (the last of a name)
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(daemon.pid()) + "/task")) {
    const int tid = std::stoi(entry.path().filename().string());
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    placed[name] = thread_cpus(daemon.pid(), tid);
  }
  CHECK(placed["ZMQbg/IO/0"] == std::vector<int>{cpus[1]});
  CHECK(placed["ZMQbg/IO/1"] == std::vector<int>{cpus[1]});
  CHECK(placed["ingest"] == std::vector<int>{cpus[0]});
  CHECK(placed["lane-submit"] == std::vector<int>{cpus[0]});
  CHECK(placed["sonopiped"] == std::vector<int>{cpus[0]});
  CHECK_THAT(daemon.log(), Catch::Contains("threads: ZeroMQ I/O thread ZMQbg/IO/1 (writes results) on CPUs " + io));
}

TEST_CASE("threads: CPUs the kernel refuses stop the start with an error naming them", "[daemon][threads]") {
  test::DaemonHarness daemon(std::string(kConvertPipeline) + "threads: {cpus: \"1000-1001\"}\n");
  std::string output;
  CHECK(daemon.run_to_exit({"--config", daemon.config_path()}, output) != 0);
  CHECK_THAT(output, Catch::Contains("CPUs 1000-1001: the kernel refused them"));
}

TEST_CASE("cuda_wait: block makes every device's waits blocking, and the daemon says so at start", "[daemon][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
#ifdef SONOPIPE_WITH_CUDA
  REQUIRE(use_blocking_cuda_waits());
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  for (int d = 0; d < devices; ++d) {
    REQUIRE(cudaSetDevice(d) == cudaSuccess);
    unsigned flags = 0;
    REQUIRE(cudaGetDeviceFlags(&flags) == cudaSuccess);
    CHECK((flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync);
  }
  cudaSetDevice(0);
#endif
  test::DaemonHarness daemon(R"(
backend: cuda
cuda_wait: block
log_level: info
pipelines:
  - name: demo
    stages:
      - {type: convert, params: {scale: 0.5}}
)");
  daemon.start();
  CHECK_THAT(daemon.log(), Catch::Contains("cuda_wait: block: threads waiting for the device sleep"));
}
