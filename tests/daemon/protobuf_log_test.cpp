// libprotobuf's own warnings go through the daemon's rate-limited log: found by the frame-header
// fuzzer, which printed a "[libprotobuf ERROR ...] invalid UTF-8" line to stderr for every header
// with a bad string; a client sending such headers could write one log line per frame.
#include <csignal>
#include <sstream>

#include "tests/daemon/daemon_harness.h"

using namespace sonopipe;

TEST_CASE("libprotobuf's warnings about a client's bad strings are rate-limited log lines", "[daemon][fuzz]") {
  test::DaemonHarness daemon(R"(
backend: cpu
cpu_threads: 2
pipelines:
  - name: demo
    stages:
      - {type: convert}
)");
  daemon.start();
  v1::FrameHeader header = test::iq_header(0, 1, 2);
  header.mutable_axes(0)->set_name("\xff\xfe not UTF-8");  // proto3 strings must be UTF-8
  const std::string bytes = header.SerializeAsString();
  const std::int16_t payload[4] = {};
  constexpr int kFrames = 200;
  const auto start = test::Clock::now();
  for (int i = 0; i < kFrames; ++i) daemon.send(bytes, payload, sizeof payload);
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_received() >= kFrames; });
  const double elapsed_s = std::chrono::duration<double>(test::Clock::now() - start).count();
  REQUIRE(status.frames_received() == kFrames);
  CHECK(status.frames_rejected() == kFrames);
  const std::string log = daemon.wait_for_log("protobuf: ");
  std::istringstream lines(log);
  int protobuf_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    CHECK(line.find("[libprotobuf") == std::string::npos);  // nothing bypasses spdlog
    if (line.find("protobuf: String field 'sonopipe.v1.Axis.name' contains invalid UTF-8") != std::string::npos)
      ++protobuf_lines;
  }
  CHECK(protobuf_lines >= 1);
  // At most one line per second of sending (the limiter's contract), however many frames came.
  CHECK(protobuf_lines <= 1 + static_cast<int>(elapsed_s));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait_exit() == 0);
}
