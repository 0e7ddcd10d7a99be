// The publisher's copies (daemon/copy_blocks.h): results it cannot send from their own buffer are
// copied into reused 2 MiB-aligned blocks, which ZeroMQ hands back when every subscriber has them
// (issue 23: a fresh 2 MB vector per copy cost the publisher's I/O thread its free). Also the
// experiment switch SONOPIPE_PUBLISH_COPY (all: every result copied; fresh: the old vectors), and the
// spare-buffer experiments' numbers (SONOPIPE_MAX_SPARE_RESULTS, _BYTES, SONOPIPE_SPARE_WAIT_US) in
// the executor's options. How the switches are parsed: tests/runtime/host_path_switches_test.cpp.
#include <zmq_addon.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <random>
#include <thread>
#include <vector>

#include "daemon/config.h"
#include "daemon/copy_blocks.h"
#include "daemon/pipeline_set.h"
#include "daemon/publisher.h"
#include "tests/support/test_support.h"
#include "wire/wire.h"

using namespace sonopipe;
using test::ScopedEnv;

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

bool huge_page_aligned(const void* data) { return reinterpret_cast<std::uintptr_t>(data) % (2 * kMiB) == 0; }

// A publisher on an ipc endpoint and one subscriber to it that has joined.
struct PublishPair {
  zmq::context_t context{2};
  std::filesystem::path folder = [] {
    auto path = std::filesystem::temp_directory_path() / ("sonopipe-publish-copies-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  std::string endpoint = "ipc://" + (folder / "publish.ipc").string();
  Publisher publisher{context, endpoint, PublishLimits{}};
  zmq::socket_t subscriber{context, zmq::socket_type::sub};

  PublishPair() {
    subscriber.set(zmq::sockopt::subscribe, "result/");
    subscriber.set(zmq::sockopt::rcvtimeo, 5000);
    subscriber.connect(endpoint);
    // A subscription reaches the PUB some time after the connection: publish until one arrives.
    const std::vector<std::byte> probe(16, std::byte{7});
    for (int i = 0; i < 200; ++i) {
      publish(probe, nullptr);
      std::vector<zmq::message_t> parts;
      subscriber.set(zmq::sockopt::rcvtimeo, 20);
      if (zmq::recv_multipart(subscriber, std::back_inserter(parts))) break;
    }
    subscriber.set(zmq::sockopt::rcvtimeo, 5000);
    std::vector<zmq::message_t> parts;
    while (true) {  // drain the probes still on their way
      subscriber.set(zmq::sockopt::rcvtimeo, 100);
      parts.clear();
      if (!zmq::recv_multipart(subscriber, std::back_inserter(parts))) break;
    }
    subscriber.set(zmq::sockopt::rcvtimeo, 5000);
  }
  ~PublishPair() {
    subscriber.close();
    publisher.close(0);
    std::error_code ignored;
    std::filesystem::remove_all(folder, ignored);
  }

  void publish(const std::vector<std::byte>& payload, std::shared_ptr<const void> owner) {
    static const std::string pipeline = "p", output = "out";
    static const FrameMeta frame{};
    const TensorSpec spec{.dtype = DType::uint8, .axes = {{"x", static_cast<std::int64_t>(payload.size()), 1.0, ""}}};
    publisher.publish_result(PublishedResult{.pipeline = pipeline, .output = output, .frame = frame, .spec = spec,
                                             .data = payload.data(), .bytes = payload.size(), .timing = {},
                                             .backend = Backend::cpu, .owner = std::move(owner)});
  }

  std::vector<std::byte> receive_payload() {
    std::vector<zmq::message_t> parts;
    REQUIRE(zmq::recv_multipart(subscriber, std::back_inserter(parts)));
    REQUIRE(parts.size() == 3);
    const auto* bytes = parts[2].data<std::byte>();
    return {bytes, bytes + parts[2].size()};
  }
};

// Never zeros: a copy that missed its bytes must show.
std::vector<std::byte> random_payload(std::size_t bytes, std::mt19937& rng) {
  std::vector<std::byte> payload(bytes);
  for (auto& b : payload) b = static_cast<std::byte>(rng() & 0xff);
  return payload;
}

}  // namespace

TEST_CASE("copy blocks hold the request in whole pages and are reused once given back", "[publish]") {
  CopyBlocks blocks(8 * kMiB);
  const CopyBlocks::Block first = blocks.take(3 * kMiB + 5);
  REQUIRE(first.data != nullptr);
  CHECK(first.capacity == 3 * kMiB + 4096);
  CHECK(reinterpret_cast<std::uintptr_t>(first.data) % 4096 == 0);
  std::memset(first.data, 0x5a, first.capacity);  // writable to its end
  blocks.give_back(first);
  CHECK(blocks.kept_bytes() == first.capacity);
  const CopyBlocks::Block again = blocks.take(3 * kMiB);
  CHECK(again.data == first.data);  // the kept block, not a new mapping
  CHECK(blocks.blocks_mapped() == 1);
  CHECK(blocks.kept_bytes() == 0);
  // A request of less than half a kept block maps a new one (KeptBlocks' waste rule); a small one
  // takes no more than its pages (a 512 KB result in a 2 MiB block would cost a stalled
  // subscriber's backlog four times its bytes: publish_bound_test).
  blocks.give_back(again);
  const CopyBlocks::Block small = blocks.take(512 * 1024 - 100);
  CHECK(small.data != again.data);
  CHECK(small.capacity == 512 * 1024);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data) % 4096 == 0);
  CHECK(blocks.blocks_mapped() == 2);
  blocks.give_back(small);
}

TEST_CASE("copy blocks on huge pages (SONOPIPE_COPY_HUGE_PAGES=1) start on a 2 MiB boundary from 2 MiB up", "[publish]") {
  CopyBlocks blocks(0, true);
  for (int i = 0; i < 4; ++i) {  // an unaligned mapping would show in one of a few
    const CopyBlocks::Block block = blocks.take(2 * kMiB + 4096 * i);
    CHECK(huge_page_aligned(block.data));
    blocks.give_back(block);
  }
}

TEST_CASE("copy blocks given back past the bound are unmapped, and drop_kept returns the rest", "[publish]") {
  CopyBlocks blocks(4 * kMiB);
  std::vector<CopyBlocks::Block> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(blocks.take(2 * kMiB));
  for (const auto& block : taken) blocks.give_back(block);
  CHECK(blocks.kept_bytes() == 4 * kMiB);  // two kept, the third unmapped
  CHECK(taken[0].capacity == 2 * kMiB);
  blocks.drop_kept();
  CHECK(blocks.kept_bytes() == 0);
  const CopyBlocks::Block fresh = blocks.take(2 * kMiB);
  CHECK(blocks.blocks_mapped() == 4);
  blocks.give_back(fresh);
}

TEST_CASE("copy blocks taken on one thread and given back on another stay consistent", "[publish]") {
  // The completion thread takes, ZeroMQ's I/O thread gives back (run under TSan in CI's sanitizer job).
  CopyBlocks blocks(16 * kMiB);
  std::atomic<int> handed{0};
  std::vector<CopyBlocks::Block> queue(64);
  std::thread giver([&] {
    for (int i = 0; i < 64; ++i) {
      while (handed.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      blocks.give_back(queue[static_cast<std::size_t>(i)]);
    }
  });
  for (int i = 0; i < 64; ++i) {
    queue[static_cast<std::size_t>(i)] = blocks.take(kMiB + 1);
    static_cast<std::byte*>(queue[static_cast<std::size_t>(i)].data)[kMiB] = std::byte{1};
    handed.store(i + 1, std::memory_order_release);
  }
  giver.join();
  CHECK(blocks.kept_bytes() <= 16 * kMiB);
  CHECK(blocks.blocks_mapped() <= 64);
  CHECK(blocks.kept_bytes() > 0);
}

TEST_CASE("results without an owner are published as copies that arrive byte-exact and reuse their blocks",
          "[publish]") {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::fresh_seed()));
  PublishPair pair;
  const std::uint64_t mapped_before = pair.publisher.copy_blocks().blocks_mapped();
  for (int i = 0; i < 20; ++i) {
    const std::vector<std::byte> payload = random_payload(3 * kMiB + 5, rng);
    pair.publish(payload, nullptr);
    CHECK(pair.receive_payload() == payload);
  }
  // One result in flight at a time: its block is back before the next is taken (ZeroMQ frees a
  // message just after writing it; allow a second block while the first is still on its way back).
  CHECK(pair.publisher.copy_blocks().blocks_mapped() - mapped_before <= 2);
  CHECK(pair.publisher.stats().bytes_held < 4 * kMiB);
}

TEST_CASE("SONOPIPE_PUBLISH_COPY=all publishes a copy even of an owned result and lets go of the owner at once",
          "[publish]") {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::fresh_seed()));
  const ScopedEnv all("SONOPIPE_PUBLISH_COPY", "all");
  PublishPair pair;
  const std::vector<std::byte> payload = random_payload(kMiB, rng);
  auto owner = std::make_shared<int>(0);
  pair.publish(payload, owner);
  CHECK(owner.use_count() == 1);  // not kept by the message: it was copied
  CHECK(pair.receive_payload() == payload);
  CHECK(pair.publisher.copy_blocks().blocks_mapped() >= 1);
}

TEST_CASE("without SONOPIPE_PUBLISH_COPY an owned result is sent from its own buffer", "[publish]") {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::fresh_seed()));
  PublishPair pair;
  const std::uint64_t mapped_before = pair.publisher.copy_blocks().blocks_mapped();
  const std::vector<std::byte> payload = random_payload(kMiB, rng);
  pair.publish(payload, std::make_shared<int>(0));
  CHECK(pair.receive_payload() == payload);
  CHECK(pair.publisher.copy_blocks().blocks_mapped() == mapped_before);
}

TEST_CASE("SONOPIPE_PUBLISH_COPY=fresh copies into a vector of its own, no copy block", "[publish]") {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::fresh_seed()));
  const ScopedEnv fresh("SONOPIPE_PUBLISH_COPY", "fresh");
  PublishPair pair;
  const std::uint64_t mapped_before = pair.publisher.copy_blocks().blocks_mapped();
  const std::vector<std::byte> payload = random_payload(kMiB, rng);
  pair.publish(payload, nullptr);
  CHECK(pair.receive_payload() == payload);
  CHECK(pair.publisher.copy_blocks().blocks_mapped() == mapped_before);
}

TEST_CASE("kept copy blocks go back to the system at a heartbeat when no copy was made since the one before",
          "[publish]") {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(test::fresh_seed()));
  PublishPair pair;
  const std::vector<std::byte> payload = random_payload(3 * kMiB, rng);
  pair.publish(payload, nullptr);
  CHECK(pair.receive_payload() == payload);
  // ZeroMQ hands the block back just after it wrote the message: wait for it.
  for (int i = 0; i < 200 && pair.publisher.copy_blocks().kept_bytes() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(pair.publisher.copy_blocks().kept_bytes() > 0);
  pair.publisher.publish_status(v1::Status{});  // copies were made since the last heartbeat: kept
  CHECK(pair.publisher.copy_blocks().kept_bytes() > 0);
  pair.publisher.publish_status(v1::Status{});  // none since: dropped
  CHECK(pair.publisher.copy_blocks().kept_bytes() == 0);
}

TEST_CASE("the spare-buffer experiments' numbers reach the executor's options; a refused one refuses them",
          "[publish][config]") {
  const DaemonConfig config;  // publish.stall_timeout_s 0.1 s: the wait's default and cap
  const ExecutorOptions plain = PipelineSet::executor_options(config, Backend::cpu, {});
  CHECK(plain.spare_wait == std::chrono::microseconds(100'000));
  {
    ScopedEnv results("SONOPIPE_MAX_SPARE_RESULTS", "3"), bytes("SONOPIPE_MAX_SPARE_BYTES", "1048576"),
        wait("SONOPIPE_SPARE_WAIT_US", "250");
    const ExecutorOptions set = PipelineSet::executor_options(config, Backend::cpu, {});
    CHECK(set.max_spare_results == 3);
    CHECK(set.max_spare_bytes == 1048576);
    CHECK(set.spare_wait == std::chrono::microseconds(250));
  }
  {
    ScopedEnv empty("SONOPIPE_SPARE_WAIT_US", "");  // as unset
    CHECK(PipelineSet::executor_options(config, Backend::cpu, {}).spare_wait == plain.spare_wait);
  }
  ScopedEnv bytes("SONOPIPE_MAX_SPARE_BYTES", "32MiB");
  CHECK_THROWS_WITH(PipelineSet::executor_options(config, Backend::cpu, {}),
                    Catch::Contains("SONOPIPE_MAX_SPARE_BYTES=32MiB") && Catch::Contains("a whole number"));
}
