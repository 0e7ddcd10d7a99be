// The daemon's shm:// ingest against the real sonopiped (tests/daemon/daemon_harness.h): frames
// written in place into the pool come out of convert byte-exact; a producer SIGKILLed mid-frame
// loses nothing it committed and the daemon lives; hostile slot descriptors are refused and
// counted as bad_slot_descriptor; the delivery acknowledgement covers what the daemon took.
#include <sys/mman.h>
#include <sys/wait.h>

#include <cstring>

#include "shm/producer.h"
#include "tests/daemon/daemon_harness.h"

using namespace sonopipe;
using namespace std::chrono_literals;

namespace {

const char* kConvertPipeline = R"(
backend: cpu
cpu_threads: 2
slots: 2
queue_depth: 4
max_frame_bytes: 1048576
pipelines:
  - name: demo
    match: {kinds: [iq, rf]}
    stages:
      - {type: convert, params: {scale: 1.0}}
)";

struct ShmName {
  ShmName() : endpoint("shm://daemon-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++)) {}
  ~ShmName() { shm_unlink(shm::object_name(endpoint).c_str()); }
  static inline int counter = 0;
  std::string endpoint;
};

std::string ingest_line(const ShmName& name, const char* pattern = "pull") {
  return "{endpoint: \"" + name.endpoint + "\", pattern: " + pattern + "}";
}

// Writes [header][payload] into a slot in place and commits it.
bool send_in_place(shm::Producer& producer, const std::string& header, const void* payload, std::size_t bytes) {
  auto claim = producer.claim(std::chrono::steady_clock::now() + 20s);
  if (!claim) return false;
  std::memcpy(claim->header.data(), header.data(), header.size());
  std::memcpy(claim->payload.data(), payload, bytes);
  producer.commit(*claim, header.size(), bytes);
  return true;
}

}  // namespace

TEST_CASE("shm ingest: int16 IQ, int16 RF, float32 RF and complex64 IQ frames come out of convert byte-exact", "[daemon][shm]") {
  ShmName name;
  test::DaemonHarness daemon(kConvertPipeline, ingest_line(name));
  daemon.start();
  shm::Producer producer(name.endpoint);
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_int_distribution<int> counts(-32768, 32767);
  std::normal_distribution<float> values(0.0f, 100.0f);
  struct Case {
    DType dtype;
    FrameKind kind;
    std::vector<Axis> axes;
    std::string expected_type;
  };
  const std::vector<Case> cases = {
      {DType::int16, FrameKind::iq, {{"line", 8}, {"sample", 100}, {"iq", 2}}, "complex64"},
      {DType::int16, FrameKind::rf, {{"line", 8}, {"sample", 100}}, "float32"},
      {DType::float32, FrameKind::rf, {{"line", 8}, {"sample", 100}}, "float32"},
      {DType::complex64, FrameKind::iq, {{"line", 8}, {"sample", 100}}, "complex64"},
  };
  std::vector<std::string> expected;
  std::uint64_t sequence = 0;
  for (int round = 0; round < 5; ++round)
    for (const Case& c : cases) {
      TensorSpec spec{c.dtype, c.axes};
      std::string payload(spec.byte_size(), '\0');
      std::string out;
      if (c.dtype == DType::int16) {
        for (std::size_t i = 0; i < payload.size() / 2; ++i) {
          const auto v = static_cast<std::int16_t>(counts(rng));
          std::memcpy(payload.data() + 2 * i, &v, 2);
          const float f = static_cast<float>(v);  // scale 1: exact
          out.append(reinterpret_cast<const char*>(&f), 4);
        }
      } else {
        for (std::size_t i = 0; i < payload.size() / 4; ++i) {
          const float f = values(rng);
          std::memcpy(payload.data() + 4 * i, &f, 4);
        }
        out = payload;  // scale 1: x * 1.0f == x
      }
      REQUIRE(send_in_place(producer, test::frame_header_bytes(c.kind, c.dtype, c.axes, sequence++), payload.data(),
                            payload.size()));
      expected.push_back(out);
    }
  auto results = daemon.receive_results(expected.size());
  REQUIRE(results.size() == expected.size());
  for (std::size_t n = 0; n < expected.size(); ++n) {
    INFO("result " << n);
    CHECK(results[n].header.input_sequence() == n);
    CHECK(results[n].payload == expected[n]);
  }
  CHECK(producer.wait_delivered(std::chrono::steady_clock::now() + 10s));
  CHECK(producer.counters().delivered == expected.size());
  const v1::Status status = daemon.wait_for_status([&](const v1::Status& s) { return s.frames_processed() == expected.size(); });
  CHECK(status.frames_rejected() == 0);
  CHECK(status.frames_missing() == 0);
}

TEST_CASE("shm ingest: a producer SIGKILLed mid-frame loses nothing it committed; the daemon lives and takes the next producer", "[daemon][shm]") {
  ShmName name;
  test::DaemonHarness daemon(kConvertPipeline, ingest_line(name));
  daemon.start();
  std::mt19937_64 rng(test::fresh_seed());
  auto samples = test::random_samples(16 * 64 * 2, rng);
  const pid_t child = fork();
  if (child == 0) {
    shm::Producer producer(name.endpoint);
    for (std::uint64_t n = 0; n < 10; ++n)
      if (!send_in_place(producer, test::iq_header(n, 16, 64).SerializeAsString(), samples.data(), samples.size() * 2))
        _exit(2);
    auto half = producer.claim(std::chrono::steady_clock::now() + 20s);  // dies in the middle of frame 10
    if (half) std::memset(half->payload.data(), 0x7f, 1000);
    raise(SIGKILL);
  }
  int status_code = 0;
  waitpid(child, &status_code, 0);
  CHECK(WIFSIGNALED(status_code));
  auto results = daemon.receive_results(10);
  REQUIRE(results.size() == 10);
  for (std::uint64_t n = 0; n < 10; ++n) CHECK(results[n].header.input_sequence() == n);
  // Its half-written slot comes back: a new producer fills every slot of the pool.
  shm::Producer next(name.endpoint);
  for (std::uint64_t n = 10; n < 40; ++n)
    REQUIRE(send_in_place(next, test::iq_header(n, 16, 64).SerializeAsString(), samples.data(), samples.size() * 2));
  CHECK(daemon.receive_results(30).size() == 30);
  CHECK(daemon.control("status"));  // the daemon lives
}

TEST_CASE("shm ingest: hostile slot descriptors are refused and counted as bad_slot_descriptor", "[daemon][shm]") {
  ShmName name;
  test::DaemonHarness daemon(kConvertPipeline, ingest_line(name));
  daemon.start();
  // A hostile producer: its descriptor reaches past the slot. The daemon reads it after commit;
  // the pool hands it out only after checking it, so the damage is done before commit here.
  auto pool = shm::Pool::open(name.endpoint);
  shm::Producer producer(name.endpoint);
  auto claim = producer.claim(std::chrono::steady_clock::now() + 10s);
  REQUIRE(claim);
  {
    shm::Pool::Lock lock(*pool);
    // Commit by hand with a descriptor no honest producer writes.
    shm::SlotRecord& slot = pool->slot(claim->slot);
    slot.descriptor = {0, 16, pool->geometry().header_capacity, pool->geometry().slot_bytes};
    slot.sequence = ++pool->header().next_sequence;
    for (std::uint32_t c = 0; c < shm::kMaxConsumers; ++c)
      if (pool->header().consumers[c].active) slot.pending |= 1u << c;
    slot.state = static_cast<std::uint32_t>(shm::SlotState::ready);
  }
  pool->wake_consumers();
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_rejected() == 1; });
  CHECK(status.rejected_by_reason().at("bad_slot_descriptor") == 1);
  CHECK(daemon.wait_for_log("payload_outside_slot").find("payload_outside_slot") != std::string::npos);
  // Good frames still flow.
  std::mt19937_64 rng(test::fresh_seed());
  auto samples = test::random_samples(4 * 8 * 2, rng);
  REQUIRE(send_in_place(producer, test::iq_header(0, 4, 8).SerializeAsString(), samples.data(), samples.size() * 2));
  CHECK(daemon.receive_results(1).size() == 1);
}

TEST_CASE("shm ingest: a lossless frame committed while no daemon runs is delivered by the next daemon", "[daemon][shm]") {
  ShmName name;
  std::mt19937_64 rng(test::fresh_seed());
  auto samples = test::random_samples(4 * 8 * 2, rng);
  std::unique_ptr<shm::Producer> producer;
  {
    test::DaemonHarness first(kConvertPipeline, ingest_line(name));
    first.start();
    producer = std::make_unique<shm::Producer>(name.endpoint);
    REQUIRE(send_in_place(*producer, test::iq_header(0, 4, 8).SerializeAsString(), samples.data(), samples.size() * 2));
    CHECK(first.receive_results(1).size() == 1);
  }  // SIGKILLed: the pool stays
  REQUIRE(send_in_place(*producer, test::iq_header(1, 4, 8).SerializeAsString(), samples.data(), samples.size() * 2));
  CHECK(producer->counters().undelivered() == 1);  // nobody took it: the sender knows
  test::DaemonHarness second(kConvertPipeline, ingest_line(name));
  second.start();
  // (Its result may leave before the harness's subscription arrives: the status counts it.)
  const v1::Status status = second.wait_for_status([](const v1::Status& s) { return s.frames_processed() == 1; });
  CHECK(status.frames_processed() == 1);
  CHECK(status.frames_missing() == 0);
  CHECK(producer->wait_delivered(std::chrono::steady_clock::now() + 10s));
}

TEST_CASE("shm ingest on CUDA: the pool is registered once and frames are copied to the GPU from their slots, byte-exact", "[daemon][shm][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ShmName name;
  std::string settings = kConvertPipeline;
  settings.replace(settings.find("backend: cpu"), 12, "backend: cuda");
  test::DaemonHarness daemon(settings, ingest_line(name));
  daemon.start();
  CHECK(daemon.wait_for_log("registered with CUDA").find("registered with CUDA") != std::string::npos);
  shm::Producer producer(name.endpoint);
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::uint64_t kFrames = 50;  // several times the pool: slots come back after their H2D
  std::vector<std::vector<std::int16_t>> sent;
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    sent.push_back(test::random_samples(16 * 256, rng));
    REQUIRE(send_in_place(producer, test::frame_header_bytes(FrameKind::rf, DType::int16, {{"line", 16}, {"sample", 256}}, n),
                          sent.back().data(), sent.back().size() * 2));
  }
  auto results = daemon.receive_results(kFrames);
  REQUIRE(results.size() == kFrames);
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    INFO("frame " << n);
    CHECK(results[n].header.backend() == "cuda");
    const std::vector<float> values = test::floats(results[n].payload);
    REQUIRE(values.size() == sent[n].size());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < values.size(); ++i) mismatches += values[i] != static_cast<float>(sent[n][i]);  // scale 1: exact
    CHECK(mismatches == 0);
  }
  CHECK(producer.wait_delivered(std::chrono::steady_clock::now() + 10s));
}
