// publish.shm against the real sonopiped: every result is written once into the shared pool as
// [topic '\0' ResultHeader][payload], byte-identical to what the ZeroMQ subscribers get; a
// lossless pool holds the daemon back until a slow subscriber has read each result.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "shm/consumer.h"
#include "tests/daemon/daemon_harness.h"

using namespace sonopipe;
using namespace std::chrono_literals;

namespace {

struct ShmResult {
  std::string topic;
  v1::ResultHeader header;
  std::string payload;
};

// Reads one result in place and releases its slot.
std::optional<ShmResult> take_result(shm::Consumer& consumer) {
  auto m = consumer.take(std::chrono::steady_clock::now() + 20s);
  if (!m) return std::nullopt;
  ShmResult r;
  const char* header = reinterpret_cast<const char*>(m->header);
  const std::size_t topic_length = strnlen(header, m->header_bytes);
  r.topic.assign(header, topic_length);
  REQUIRE(topic_length < m->header_bytes);
  REQUIRE(r.header.ParseFromArray(header + topic_length + 1, static_cast<int>(m->header_bytes - topic_length - 1)));
  r.payload.assign(reinterpret_cast<const char*>(m->payload), m->payload_bytes);
  consumer.release(m->slot);
  return r;
}

struct ShmName {
  ShmName() : endpoint("shm://publish-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++)) {}
  ~ShmName() { shm_unlink(shm::object_name(endpoint).c_str()); }
  static inline int counter = 0;
  std::string endpoint;
};

std::string daemon_settings() {
  return std::string(R"(
backend: cpu
cpu_threads: 2
slots: 2
queue_depth: 4
max_frame_bytes: 1048576
pipelines:
  - name: demo
    match: {kinds: [iq, rf]}
    stages:
      - {type: convert, params: {scale: 0.5}}
)");
}

}  // namespace

// The harness writes `publish:` itself; publish.shm goes in through a config rewrite.
static void add_publish_shm(test::DaemonHarness& daemon, const ShmName& name, const char* mode, int slots) {
  std::ifstream in(daemon.config_path());
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string key = "status_interval_s: 0.1";
  const auto at = config.find(key);
  REQUIRE(at != std::string::npos);
  config.insert(at + key.size(), ", shm: {endpoint: \"" + name.endpoint + "\", mode: " + mode +
                                     ", slots: " + std::to_string(slots) + "}");
  std::ofstream(daemon.config_path()) << config;
}

TEST_CASE("shm publish: results are written once into the pool, byte-identical to the ZeroMQ ones", "[daemon][shm]") {
  ShmName name;
  test::DaemonHarness daemon(daemon_settings());
  add_publish_shm(daemon, name, "live", 8);
  daemon.start();
  shm::Consumer subscriber(name.endpoint, shm::Mode::live);
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::uint64_t kFrames = 6;  // fewer than the slots: a live pool keeps them all
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    auto samples = test::random_samples(8 * 50 * 2, rng);
    daemon.send(test::iq_header(n, 8, 50).SerializeAsString(), samples.data(), samples.size() * 2);
  }
  auto zmq_results = daemon.receive_results(kFrames);
  REQUIRE(zmq_results.size() == kFrames);
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    auto r = take_result(subscriber);
    REQUIRE(r);
    CHECK(r->topic == "result/demo/converted");
    CHECK(r->header.input_sequence() == n);
    CHECK(r->header.pipeline() == "demo");
    CHECK(r->payload == zmq_results[n].payload);
  }
  CHECK(subscriber.counters().missed == 0);
  // Written once: the convert stage wrote each result straight into its slot.
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.results_published() == kFrames; });
  CHECK(status.shm_results_in_place() == kFrames);
}

TEST_CASE("shm publish on CUDA: the result pool is registered once and the D2H copy writes each result into its slot, "
          "byte-exact", "[daemon][shm][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ShmName name;
  std::string settings = daemon_settings();
  settings.replace(settings.find("backend: cpu"), 12, "backend: cuda");
  test::DaemonHarness daemon(settings);
  add_publish_shm(daemon, name, "lossless", 4);
  daemon.start();
  CHECK(daemon.wait_for_log("slots of 1 MiB, registered with CUDA").find("registered with CUDA") != std::string::npos);
  shm::Consumer subscriber(name.endpoint, shm::Mode::lossless);
  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr std::uint64_t kFrames = 40;  // ten times the pool: slots come back after each read
  std::vector<std::vector<std::int16_t>> sent;
  std::thread sender([&] {
    for (std::uint64_t n = 0; n < kFrames; ++n) {
      auto samples = test::random_samples(16 * 100 * 2, rng);
      daemon.try_send(test::iq_header(n, 16, 100).SerializeAsString(), samples.data(), samples.size() * 2);
      sent.push_back(std::move(samples));
    }
  });
  std::vector<ShmResult> results;
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    auto r = take_result(subscriber);
    if (!r) break;
    results.push_back(std::move(*r));
  }
  sender.join();
  REQUIRE(results.size() == kFrames);
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    INFO("frame " << n);
    CHECK(results[n].header.input_sequence() == n);
    CHECK(results[n].header.backend() == "cuda");
    const std::vector<float> values = test::floats(results[n].payload);
    REQUIRE(values.size() == sent[n].size());
    std::size_t mismatches = 0;  // scale 0.5 of an int16: exact in float32
    for (std::size_t i = 0; i < values.size(); ++i) mismatches += values[i] != 0.5f * static_cast<float>(sent[n][i]);
    CHECK(mismatches == 0);
  }
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.results_published() == kFrames; });
  CHECK(status.shm_results_in_place() == kFrames);
}

TEST_CASE("shm publish: a lossless pool waits for a slow subscriber and loses nothing", "[daemon][shm]") {
  ShmName name;
  test::DaemonHarness daemon(daemon_settings());
  add_publish_shm(daemon, name, "lossless", 2);
  daemon.start();
  shm::Consumer recorder(name.endpoint, shm::Mode::lossless);
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::uint64_t kFrames = 12;  // six times the pool's slots
  std::thread sender([&] {
    for (std::uint64_t n = 0; n < kFrames; ++n) {
      auto samples = test::random_samples(4 * 20 * 2, rng);
      daemon.try_send(test::iq_header(n, 4, 20).SerializeAsString(), samples.data(), samples.size() * 2);
    }
  });
  std::vector<std::uint64_t> sequences;
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    auto r = take_result(recorder);
    if (!r) break;
    sequences.push_back(r->header.input_sequence());
  }
  sender.join();
  REQUIRE(sequences.size() == kFrames);
  for (std::uint64_t n = 0; n < kFrames; ++n) CHECK(sequences[n] == n);
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_processed() == kFrames; });
  CHECK(status.results_published() == kFrames);
}

TEST_CASE("shm publish: a lossless subscriber SIGKILLed while reading gives its slots back; the daemon lives and loses nothing", "[daemon][shm]") {
  ShmName name;
  test::DaemonHarness daemon(daemon_settings());
  add_publish_shm(daemon, name, "lossless", 2);
  daemon.start();
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  if (child == 0) {  // a subscriber that takes one result and dies holding it
    shm::Consumer stuck(name.endpoint, shm::Mode::lossless);
    if (write(ready[1], "a", 1) != 1) _exit(2);
    auto m = stuck.take(std::chrono::steady_clock::now() + 30s);
    if (write(ready[1], m ? "t" : "x", 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  shm::Consumer recorder(name.endpoint, shm::Mode::lossless);
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::uint64_t kFrames = 8;
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    auto samples = test::random_samples(4 * 20 * 2, rng);
    daemon.send(test::iq_header(n, 4, 20).SerializeAsString(), samples.data(), samples.size() * 2);
  }
  REQUIRE(read(ready[0], &byte, 1) == 1);
  CHECK(byte == 't');
  // The pool's two slots: one held by the stuck subscriber; the daemon waits for it (lossless).
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  std::vector<std::uint64_t> sequences;
  for (std::uint64_t n = 0; n < kFrames; ++n) {
    auto r = take_result(recorder);
    if (!r) break;
    sequences.push_back(r->header.input_sequence());
  }
  REQUIRE(sequences.size() == kFrames);  // nothing the daemon published was lost for the survivor
  for (std::uint64_t n = 0; n < kFrames; ++n) CHECK(sequences[n] == n);
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_processed() == kFrames; });
  CHECK(status.results_published() == kFrames);
}

TEST_CASE("shm publish: a stalled ZeroMQ subscriber never keeps the result pool's slots from the shm subscribers",
          "[daemon][shm]") {
  // Results are sent over ZeroMQ from their shm slot only while every ZeroMQ subscriber keeps up;
  // a lagging one gets a copy. Were the slots held by its queue, the 3-slot pool would run dry after
  // three results and the shm subscriber would get nothing more.
  ShmName name;
  test::DaemonHarness daemon(daemon_settings());
  add_publish_shm(daemon, name, "live", 3);
  daemon.start();
  shm::Consumer subscriber(name.endpoint, shm::Mode::live);
  zmq::context_t context(1);
  zmq::socket_t stalled(context, zmq::socket_type::sub);
  stalled.set(zmq::sockopt::rcvhwm, 1);
  stalled.set(zmq::sockopt::rcvbuf, 64 * 1024);
  stalled.set(zmq::sockopt::linger, 0);
  stalled.set(zmq::sockopt::subscribe, "result/");
  stalled.connect(daemon.endpoint("publish"));
  daemon.wait_for_status([](const v1::Status& s) { return s.subscribers_size() == 2; });
  std::this_thread::sleep_for(300ms);  // its subscription travels after the handshake
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::uint64_t kFrames = 20;
  for (std::uint64_t n = 0; n < kFrames; ++n) {  // one at a time: 256 KiB results, more than its socket holds
    auto samples = test::random_samples(64 * 512 * 2, rng);
    daemon.send(test::iq_header(n, 64, 512).SerializeAsString(), samples.data(), samples.size() * 2);
    auto r = take_result(subscriber);
    REQUIRE(r);
    CHECK(r->header.input_sequence() == n);
  }
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.results_published() == kFrames; });
  CHECK(status.results_published() == kFrames);
  bool lagging = false;
  for (const v1::SubscriberStatus& s : status.subscribers()) lagging |= s.lagging();
  CHECK(lagging);  // the stalled one did fall behind
}
