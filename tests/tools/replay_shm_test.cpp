// sonopipe-replay into a shared-memory pool held by the test (shm://, as the daemon holds it): every
// frame byte-exact through the pool, the delivery acknowledgement in the report, and frames nobody
// took reported as not delivered with exit code 3 (a lossless replay whose daemon is gone).
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "shm/consumer.h"
#include "wire/wire.h"
#include "tests/tools/tool_test_support.h"
#include "tools/common/recording.h"
#include "tools/sim/speckle_sim.h"

using namespace sonopipe;
using namespace std::chrono;
using test::TempPath;

namespace {

constexpr std::size_t kFrames = 8;

std::vector<recording::Frame> write_recording(const std::string& path) {
  sim::SpeckleParams params;
  params.shape = {4, 64};
  params.frames = kFrames;
  params.frame_rate_hz = 50.0;
  params.seed = test::fresh_seed();
  sim::SpeckleGenerator generator(params);
  recording::Writer writer(path);
  std::vector<recording::Frame> frames;
  for (std::size_t i = 0; i < kFrames; ++i) {
    recording::Frame frame{generator.frame_meta(i), generator.frame(i), 0};
    writer.append_frame(frame.meta, frame.payload.data(), frame.payload.size());
    frames.push_back(std::move(frame));
  }
  return frames;
}

struct Pool {
  explicit Pool(const char* tag) : endpoint(std::string("shm://replay-") + tag + "-" + std::to_string(getpid())) {
    shm::PoolOptions options;
    options.slot_count = 16;  // more than the frames: a replay with nobody taking them still ends
    options.payload_capacity = 1 << 20;
    pool = std::shared_ptr<shm::Pool>(shm::Pool::create(endpoint, options));
  }
  ~Pool() { shm_unlink(shm::object_name(endpoint).c_str()); }
  std::string endpoint;
  std::shared_ptr<shm::Pool> pool;
};

}  // namespace

TEST_CASE("replay into an shm pool: every frame byte-exact, delivery acknowledged", "[replay][shm]") {
  TempPath file("replay-shm");
  const auto written = write_recording(file.path);
  Pool pool("ok");
  shm::Consumer consumer(pool.pool, shm::Mode::lossless);
  std::vector<FrameMeta> metas;
  std::vector<std::vector<std::byte>> payloads;
  std::thread reader([&] {
    for (std::size_t i = 0; i < kFrames; ++i) {
      auto m = consumer.take(steady_clock::now() + seconds(20));
      if (!m) return;
      metas.push_back(wire::decode_frame(m->header, m->header_bytes, m->payload_bytes, 1u << 30));
      payloads.emplace_back(m->payload, m->payload + m->payload_bytes);
      consumer.release(m->slot);
    }
  });
  const auto run = test::run_tool({test::tool("replay"), file.path, "--endpoint", pool.endpoint, "--max"});
  reader.join();
  INFO(run.output);
  CHECK(run.exit_code == 0);
  REQUIRE(metas.size() == kFrames);
  for (std::size_t i = 0; i < kFrames; ++i) {
    CHECK(metas[i].sequence == written[i].meta.sequence);
    CHECK(metas[i].payload == written[i].meta.payload);
    CHECK(payloads[i] == written[i].payload);
  }
  CHECK(run.output.find("delivered: 8 (taken by the daemon), not delivered: 0") != std::string::npos);
}

TEST_CASE("replay into an shm pool nobody reads: frames reported not delivered, exit code 3", "[replay][shm]") {
  TempPath file("replay-shm-nobody");
  write_recording(file.path);
  Pool pool("nobody");
  const auto run = test::run_tool(
      {test::tool("replay"), file.path, "--endpoint", pool.endpoint, "--max", "--connect-timeout-s", "0.5"});
  INFO(run.output);
  CHECK(run.exit_code == 3);
  CHECK(run.output.find("delivered: 0 (taken by the daemon), not delivered: 8") != std::string::npos);
}

TEST_CASE("replay to a missing shm pool fails with one line naming the fix", "[replay][shm]") {
  TempPath file("replay-shm-missing");
  write_recording(file.path);
  const auto run = test::run_tool({test::tool("replay"), file.path, "--endpoint",
                                   "shm://nobody-" + std::to_string(getpid())});
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("start sonopiped") != std::string::npos);
}
