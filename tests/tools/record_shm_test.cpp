// sonopipe-record reading raw frames from an shm:// ingest pool beside its consumer (the daemon,
// here the test's own lossless consumer): every frame recorded byte-exact, without the producer
// sending it twice. Then with real processes (sonopipe-record, sonopiped, the
// test as producer): results read in place from publish.shm beside the raw frames, byte-exact
// against what was sent and published; a recorder SIGKILLed mid-run leaves a readable file and
// its slots come back to the daemon.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "shm/consumer.h"
#include "shm/producer.h"
#include "tests/daemon/daemon_harness.h"
#include "tests/tools/tool_test_support.h"
#include "tools/common/recording.h"
#include "wire/wire.h"

using namespace sonopipe;
using namespace std::chrono;

TEST_CASE("record --raw-endpoint shm://: every frame of the pool recorded byte-exact beside the daemon", "[record][shm]") {
  const std::string endpoint = "shm://record-" + std::to_string(getpid());
  shm::PoolOptions options;
  options.slot_count = 4;
  options.payload_capacity = 1 << 16;
  auto pool = std::shared_ptr<shm::Pool>(shm::Pool::create(endpoint, options));
  shm::Consumer daemon(pool, shm::Mode::lossless);  // the daemon's ingest, releasing at once
  std::atomic<bool> stop{false};
  std::thread daemon_thread([&] {
    while (!stop)
      if (auto m = daemon.take(steady_clock::now() + milliseconds(20))) daemon.release(m->slot);
  });
  test::TempPath out("record-shm", ".h5");
  test::TempPath ready("record-shm", ".ready");
  tools::ChildProcess recorder({test::tool("record"), "--out", out.path, "--no-results", "--raw-endpoint", endpoint,
                                "--raw-pattern", "pull", "--raw-count", "12", "--ready-file", ready.path},
                               out.path + ".log");
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  std::mt19937_64 rng(test::fresh_seed());
  std::vector<std::vector<std::byte>> sent;
  {
    shm::Producer producer(endpoint);
    for (std::uint64_t n = 0; n < 12; ++n) {  // three times the pool: the recorder must keep up
      FrameMeta meta;
      meta.sequence = n;
      meta.kind = FrameKind::rf;
      meta.payload = TensorSpec{DType::int16, {{"line", 8}, {"sample", 100}}};
      std::vector<std::byte> payload(meta.payload.byte_size());
      for (auto& b : payload) b = static_cast<std::byte>(rng());
      const std::string header = wire::frame_header_from_meta(meta).SerializeAsString();
      auto claim = producer.claim(steady_clock::now() + seconds(20));
      REQUIRE(claim);
      std::memcpy(claim->header.data(), header.data(), header.size());
      std::memcpy(claim->payload.data(), payload.data(), payload.size());
      producer.commit(*claim, header.size(), payload.size());
      sent.push_back(std::move(payload));
    }
  }
  const auto status = recorder.wait(seconds(30));
  stop = true;
  daemon_thread.join();
  shm_unlink(shm::object_name(endpoint).c_str());
  INFO(tools::read_text_file(out.path + ".log"));
  REQUIRE(status);
  CHECK(*status == 0);
  recording::Reader reader(out.path);
  REQUIRE(reader.frame_count(0) == sent.size());
  for (std::size_t n = 0; n < sent.size(); ++n) {
    const recording::Frame frame = reader.read_frame(0, n);
    CHECK(frame.meta.sequence == n);
    CHECK(frame.payload == sent[n]);
  }
}

namespace {

struct ShmName {
  explicit ShmName(const std::string& role)
      : endpoint("shm://record-" + role + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++)) {}
  ~ShmName() { shm_unlink(shm::object_name(endpoint).c_str()); }
  static inline int counter = 0;
  std::string endpoint;
};

// int16 IQ -> complex64 (convert, scale 0.5: exact in float32). Lossless result pool of 8 slots
// (slots x published outputs + 2 and more), lossless ingest pool of the default size.
constexpr const char* kConvert = R"(
backend: cpu
cpu_threads: 2
slots: 2
queue_depth: 4
max_frame_bytes: 1048576
pipelines:
  - name: demo
    match: {kinds: [iq]}
    stages:
      - {type: convert, params: {scale: 0.5}}
)";

constexpr std::int64_t kLines = 8, kSamples = 128;

// Writes frame `sequence` into a slot of the ingest pool in place and commits it (empty when no
// slot came free; no Catch2 assertion here: it runs on the producer thread).
std::vector<std::int16_t> send_frame(shm::Producer& producer, std::uint64_t sequence, std::mt19937_64& rng) {
  std::vector<std::int16_t> samples = test::random_samples(kLines * kSamples * 2, rng);
  const std::string header = test::iq_header(sequence, kLines, kSamples).SerializeAsString();
  auto claim = producer.claim(steady_clock::now() + seconds(30));
  if (!claim) return {};
  std::memcpy(claim->header.data(), header.data(), header.size());
  std::memcpy(claim->payload.data(), samples.data(), samples.size() * sizeof(std::int16_t));
  producer.commit(*claim, header.size(), samples.size() * sizeof(std::int16_t));
  return samples;
}

std::string as_text(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::string as_text(const std::vector<std::int16_t>& samples) {
  return std::string(reinterpret_cast<const char*>(samples.data()), samples.size() * sizeof(std::int16_t));
}

}  // namespace

TEST_CASE("record shm://results with shm:// raw frames beside sonopiped: every result and frame byte-exact",
          "[record][shm][daemon]") {
  ShmName ingest("ingest"), results("results");
  test::DaemonHarness daemon(kConvert, "{endpoint: \"" + ingest.endpoint + "\", pattern: pull}",
                             "shm: {endpoint: \"" + results.endpoint + "\", mode: lossless, slots: 8}");
  daemon.start();
  test::TempPath out("record-shm-results"), ready("record-shm-results", ".ready");
  constexpr std::uint64_t kFrames = 60;  // several times both pools: slots come back as they are recorded
  tools::ChildProcess recorder({test::tool("record"), "--out", out.path, "--endpoint", results.endpoint,
                                "--raw-endpoint", ingest.endpoint, "--raw-pattern", "pull", "--count",
                                std::to_string(kFrames), "--raw-count", std::to_string(kFrames), "--ready-file",
                                ready.path},
                               out.path + ".log");
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::int16_t>> sent;
  shm::Producer producer(ingest.endpoint);
  std::thread producer_thread([&] {
    for (std::uint64_t n = 0; n < kFrames; ++n) sent.push_back(send_frame(producer, n, rng));
  });
  const std::vector<test::Received> published = daemon.receive_results(kFrames, seconds(120));
  producer_thread.join();
  for (const auto& frame : sent) REQUIRE_FALSE(frame.empty());
  const auto status = recorder.wait(seconds(60));
  const std::string log = tools::read_text_file(out.path + ".log");
  INFO(log);
  REQUIRE(status);
  REQUIRE(*status == 0);
  REQUIRE(published.size() == kFrames);
  CHECK(log.find("results read in place from " + results.endpoint + " (lossless), missed 0") != std::string::npos);
  CHECK(log.find("raw frames read in place from " + ingest.endpoint + " (lossless), missed 0") != std::string::npos);

  recording::Reader reader(out.path);
  REQUIRE(reader.frame_count(0) == kFrames);
  REQUIRE(reader.result_count("demo", "converted") == kFrames);
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    INFO("frame " << n);
    const recording::Frame frame = reader.read_frame(0, n);
    CHECK(frame.meta.sequence == n);
    CHECK(as_text(frame.payload) == as_text(sent[n]));
    const recording::Result result = reader.read_result("demo", "converted", n);
    CHECK(result.header.input_sequence() == n);
    CHECK(published[n].header.input_sequence() == n);
    CHECK(as_text(result.payload) == published[n].payload);
  }
  const v1::Status daemon_status =
      daemon.wait_for_status([](const v1::Status& s) { return s.results_published() >= kFrames; });
  CHECK(daemon_status.shm_results_in_place() == kFrames);  // written once, read in place by the recorder
  daemon.signal(SIGINT);
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("record over shm SIGKILLed mid-run: the daemon goes on, the recorder's slots come back, its file is "
          "readable and byte-exact up to its last flush",
          "[record][shm][daemon][faults]") {
  setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);  // read the file while the recorder still has it open
  ShmName ingest("ingest"), results("results");
  test::DaemonHarness daemon(kConvert, "{endpoint: \"" + ingest.endpoint + "\", pattern: pull}",
                             "shm: {endpoint: \"" + results.endpoint + "\", mode: lossless, slots: 8}");
  daemon.start();
  test::TempPath out("record-shm-killed"), ready("record-shm-killed", ".ready");
  tools::ChildProcess recorder({test::tool("record"), "--out", out.path, "--endpoint", results.endpoint,
                                "--raw-endpoint", ingest.endpoint, "--raw-pattern", "pull", "--ready-file", ready.path},
                               out.path + ".log");
  REQUIRE(test::wait_for_file(ready.path, seconds(20)));
  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Batch A, recorded and flushed (the recorder flushes each second); then batch B, during which
  // the recorder is killed: many times more frames than either pool has slots, so the daemon can
  // only go on when the dead recorder's pending and held slots come back (both pools are lossless).
  constexpr std::uint64_t kBatchA = 40, kFrames = 340, kKillAt = kBatchA + 60;
  std::vector<std::vector<std::int16_t>> sent;
  shm::Producer producer(ingest.endpoint);
  for (std::uint64_t n = 0; n < kBatchA; ++n) sent.push_back(send_frame(producer, n, rng));
  REQUIRE(test::wait_for_recorded_results(out.path, "demo", "converted", kBatchA, seconds(30)) == kBatchA);
  std::atomic<bool> killed{false}, delivered{false};
  std::thread producer_thread([&] {
    for (std::uint64_t n = kBatchA; n < kFrames; ++n) {
      sent.push_back(send_frame(producer, n, rng));
      if (n == kKillAt) {
        recorder.send_signal(SIGKILL);
        killed = true;
      }
    }
    delivered = producer.wait_delivered(steady_clock::now() + seconds(60));  // every frame taken by the daemon
  });
  const std::vector<test::Received> published = daemon.receive_results(kFrames, seconds(120));
  producer_thread.join();
  for (const auto& frame : sent) REQUIRE_FALSE(frame.empty());
  REQUIRE(killed);
  CHECK(delivered);
  REQUIRE(recorder.wait(seconds(10)) == 128 + SIGKILL);
  REQUIRE(published.size() == kFrames);  // the daemon went on without the recorder
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.results_published() >= kFrames; });
  CHECK(status.frames_processed() == kFrames);
  REQUIRE(status.pipelines_size() == 1);
  CHECK(status.pipelines(0).publish_errors() == 0);
  for (const std::string& endpoint : {ingest.endpoint, results.endpoint}) {
    INFO(endpoint);
    auto pool = shm::Pool::open(endpoint);
    shm::Pool::Lock lock(*pool);
    CHECK(pool->header().dead_consumers == 1);  // the recorder, recognised as dead and dropped
    for (std::size_t c = 0; c < shm::kMaxConsumers; ++c)
      CHECK_FALSE((pool->header().consumers[c].active && pool->header().consumers[c].process.pid == recorder.pid()));
  }

  // The file as the killed recorder left it: readable, every result and frame in it byte-exact.
  recording::Reader reader(out.path);
  const std::size_t frames = reader.frame_count(0), kept = reader.result_count("demo", "converted");
  WARN("the killed recorder's file holds " << frames << " frames and " << kept << " results");
  CHECK(frames >= kBatchA);
  CHECK(kept >= kBatchA);
  CHECK(frames <= kKillAt + 1);
  for (std::size_t n = 0; n < frames; ++n) {
    const recording::Frame frame = reader.read_frame(0, n);
    REQUIRE(frame.meta.sequence == n);
    REQUIRE(as_text(frame.payload) == as_text(sent[n]));
  }
  for (std::size_t n = 0; n < kept; ++n) {
    const recording::Result result = reader.read_result("demo", "converted", n);
    REQUIRE(result.header.input_sequence() == n);
    REQUIRE(as_text(result.payload) == published[n].payload);
  }
  daemon.signal(SIGINT);
  CHECK(daemon.wait_exit() == 0);
}
