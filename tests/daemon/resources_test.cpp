// The daemon's memory does not grow with what outsiders choose (issue 14, "State and resources"):
// distinct frame shapes, stream ids, subscribers and their topics. The real sonopiped is driven
// through rounds of churn, every round with values never used before, and its resident memory
// (VmRSS) is compared after a warm-up and after many more rounds.
#include <csignal>
#include <random>

#include "tests/daemon/daemon_harness.h"

using namespace sonopipe;

namespace {

// iq frames through convert; rf frames of one shape through ncc_track (per-stream state);
// channel_rf frames of ever new shapes through another ncc_track (auto timed per shape; ncc_track
// takes channel RF whose first axis is not `transmit`). Two pipelines, because a new shape starts
// every stream afresh.
constexpr const char* kChurnPipelines = R"(
backend: cpu
cpu_threads: 1
slots: 2
queue_depth: 32
pipelines:
  - name: convert
    match: {kinds: [iq]}
    stages:
      - {type: convert}
  - name: track
    match: {kinds: [rf]}
    stages:
      - {type: ncc_track, params: {method: auto, kernel: [9, 3], search_min: [-2, -1], search_max: [2, 1], step: [8, 4]}}
  - name: shapes
    match: {kinds: [channel_rf]}
    stages:
      - {type: ncc_track, params: {method: auto, kernel: [9, 3], search_min: [-2, -1], search_max: [2, 1], step: [8, 4]}}
)";

std::string rf_header(std::uint32_t stream, std::uint64_t sequence, std::int64_t lines, std::int64_t samples,
                      FrameKind kind = FrameKind::rf) {
  return test::frame_header_bytes(kind, DType::float32, {{"lateral", lines}, {"axial", samples}}, sequence, stream);
}

}  // namespace

TEST_CASE("the daemon's memory stays flat under churn of shapes, stream ids, subscribers and topics",
          "[daemon][resources]") {
  test::DaemonHarness daemon(kChurnPipelines);
  daemon.start();
  const auto seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  zmq::context_t context(1);
  std::uint64_t sent = 0;
  std::uint32_t next_stream = 1000;

  auto round = [&](int r) {
    // 10 iq frames of shapes never sent before (sizes bounded: buffers grow to the largest only).
    for (int k = 0; k < 10; ++k) {
      const std::int64_t lines = 1 + k % 7, samples = 64 + (r * 10 + k) % 1000;
      const auto samples_iq = test::random_samples(static_cast<std::size_t>(lines * samples * 2), rng);
      daemon.send(test::iq_header(0, lines, samples, next_stream++).SerializeAsString(), samples_iq.data(),
                  samples_iq.size() * 2);
      ++sent;
    }
    // 200 small iq frames from stream ids never seen before (ingest's sequence tracking).
    const auto tiny = test::random_samples(1 * 16 * 2, rng);
    for (int k = 0; k < 200; ++k) {
      daemon.send(test::iq_header(0, 1, 16, next_stream++).SerializeAsString(), tiny.data(), tiny.size() * 2);
      ++sent;
    }
    // 100 rf frames [32 x 256] from new stream ids (ncc_track keeps 64 KB of state per live
    // stream, at most 64 streams), and 2 channel_rf frames of a new shape on one stream (a pair).
    std::vector<float> rf(32 * 256);
    for (auto& v : rf) v = normal(rng);
    for (int k = 0; k < 100; ++k) {
      daemon.send(rf_header(next_stream++, 0, 32, 256), rf.data(), rf.size() * 4);
      ++sent;
    }
    const std::int64_t axial = 64 + (r * 7) % 400;
    std::vector<float> shaped(16 * static_cast<std::size_t>(axial));
    for (auto& v : shaped) v = normal(rng);
    for (std::uint64_t n = 0; n < 2; ++n) {
      daemon.send(rf_header(next_stream, n, 16, axial, FrameKind::channel_rf), shaped.data(), shaped.size() * 4);
      ++sent;
    }
    ++next_stream;
    // 5 subscribers, each with 50 topics of its own, attach and leave.
    for (int k = 0; k < 5; ++k) {
      zmq::socket_t subscriber(context, zmq::socket_type::sub);
      subscriber.set(zmq::sockopt::linger, 0);
      for (int t = 0; t < 50; ++t)
        subscriber.set(zmq::sockopt::subscribe, "result/" + std::to_string(rng()) + "/" + std::to_string(r));
      subscriber.connect(daemon.endpoint("publish"));
    }
    // Wait until the daemon has done all of it, reading the results on the way.
    const auto deadline = test::Clock::now() + std::chrono::seconds(120);
    while (test::Clock::now() < deadline) {
      while (daemon.receive(std::chrono::milliseconds(20))) {
      }
      if (auto reply = daemon.control("status"); reply && reply->ok() &&
                                                 reply->status().frames_processed() +
                                                         reply->status().frames_rejected() >= sent)
        break;
    }
  };

  constexpr int kWarmupRounds = 3, kRounds = 12;
  for (int r = 0; r < kWarmupRounds; ++r) round(r);
  const long rss_warm = daemon.rss_kib();
  for (int r = kWarmupRounds; r < kWarmupRounds + kRounds; ++r) round(r);
  const long rss_end = daemon.rss_kib();
  const v1::Status status = daemon.wait_for_status([&](const v1::Status& s) { return s.frames_processed() >= sent; });
  CHECK(status.frames_processed() == sent);
  CHECK(status.frames_rejected() == 0);
  const v1::PipelineStatus& track = status.pipelines(1);
  CHECK(track.streams_live() == 64);  // the default max_streams
  CHECK(track.streams_evicted() > 1000);
  // 12 rounds bring 1,224 new rf streams: unbounded per-stream state would add 76 MiB; bounded,
  // the state stays 64 x 64 KB = 4 MiB, already reached in the warm-up. 24 MiB leaves room for
  // allocator slack and ZeroMQ's buffers while still catching a leak of a third of that.
  WARN("daemon RSS " << rss_warm << " KiB after " << kWarmupRounds << " rounds, " << rss_end << " KiB after "
                     << kRounds << " more (" << sent << " frames)");
  // Under AddressSanitizer the RSS mostly measures the sanitizer (its freed-memory quarantine of
  // 256 MiB, shadow memory, allocation-stack depot): +118 MiB over these rounds where the plain build
  // grows by 1 MiB. There the bound is reported only; the churn still runs under ASan and LSan.
  if (!test::kAddressSanitizer) CHECK(rss_end - rss_warm < 24 * 1024);
  daemon.signal(SIGINT);
  CHECK(daemon.wait_exit() == 0);
}
