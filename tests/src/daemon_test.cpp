// Integration tests against the real sonopiped binary over ipc endpoints (see daemon_harness.h).
#include <cstring>

#include "tests/src/daemon_harness.h"

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
    daemon.send(test::iq_header(n, kLines, kSamples).SerializeAsString(), samples.data(), samples.size() * 2);
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
  auto unknown = daemon.control("reboot");
  REQUIRE(unknown);
  CHECK_FALSE(unknown->ok());
  CHECK(unknown->error().find("unknown command") != std::string::npos);
  auto stop = daemon.control("stop");
  REQUIRE(stop);
  CHECK(stop->ok());
  CHECK(daemon.wait_exit() == 0);
}
