// sonopipe-record reading raw frames from an shm:// ingest pool beside its consumer (the daemon,
// here the test's own lossless consumer): every frame recorded byte-exact, without the producer
// sending it twice.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "shm/consumer.h"
#include "shm/producer.h"
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
