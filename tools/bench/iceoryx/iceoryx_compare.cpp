// sonopipe-iceoryx-compare: iceoryx 2.0 measured like `sonopipe-bench shm-transport` measures the
// sonopipe pool (docs/shared-memory.md explains the choice between them): throughput of large
// frames from a publisher process to a subscriber process (the publisher writes every byte of a
// loaned chunk once; blocking policies: lossless) and the one-way latency of small messages
// (ping-pong, half the round trip; WaitSet wake-ups). Needs a running RouDi sized for the frames:
//   iox-roudi -c tools/bench/iceoryx/roudi.toml &
//   build/tools/bench/iceoryx/sonopipe-iceoryx-compare [frame_mb frames pings]
// Built only where iceoryx is installed; not a dependency of sonopipe.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "iceoryx_posh/popo/untyped_publisher.hpp"
#include "iceoryx_posh/popo/untyped_subscriber.hpp"
#include "iceoryx_posh/popo/wait_set.hpp"
#include "iceoryx_posh/runtime/posh_runtime.hpp"

using Clock = std::chrono::steady_clock;

namespace {

iox::popo::PublisherOptions lossless_publisher() {
  iox::popo::PublisherOptions options;
  options.subscriberTooSlowPolicy = iox::popo::ConsumerTooSlowPolicy::WAIT_FOR_CONSUMER;
  return options;
}

iox::popo::SubscriberOptions lossless_subscriber(std::uint64_t queue) {
  iox::popo::SubscriberOptions options;
  options.queueCapacity = queue;
  options.queueFullPolicy = iox::popo::QueueFullPolicy::BLOCK_PRODUCER;
  return options;
}

// Waits on the subscriber's data with a WaitSet, then takes one chunk.
const void* take_blocking(iox::popo::UntypedSubscriber& subscriber, iox::popo::WaitSet<>& waitset) {
  for (;;) {
    auto taken = subscriber.take();
    if (!taken.has_error()) return taken.value();
    (void)waitset.wait();
  }
}

void init(const std::string& name) { iox::runtime::PoshRuntime::initRuntime(iox::RuntimeName_t(iox::cxx::TruncateToCapacity, name)); }

double throughput(std::size_t bytes, int frames) {
  const pid_t child = fork();
  if (child == 0) {
    init("sonopipe-bench-pub-" + std::to_string(getpid()));
    iox::popo::UntypedPublisher publisher({"sonopipe", "bench", "frames"}, lossless_publisher());
    std::vector<std::byte> source(bytes, std::byte{1});
    usleep(300000);  // the subscriber is there
    for (int n = 0; n < frames; ++n) {
      auto loaned = publisher.loan(static_cast<std::uint32_t>(bytes), 64);
      if (loaned.has_error()) {
        std::fprintf(stderr, "loan failed (is RouDi sized for %zu-byte chunks?)\n", bytes);
        _exit(2);
      }
      std::memcpy(loaned.value(), source.data(), bytes);
      publisher.publish(loaned.value());
    }
    _exit(0);
  }
  init("sonopipe-bench-sub-" + std::to_string(getpid()));
  iox::popo::UntypedSubscriber subscriber({"sonopipe", "bench", "frames"}, lossless_subscriber(8));
  iox::popo::WaitSet<> waitset;
  waitset.attachState(subscriber, iox::popo::SubscriberState::HAS_DATA).or_else([](auto) { std::abort(); });
  Clock::time_point start;
  for (int n = 0; n < frames; ++n) {
    const void* chunk = take_blocking(subscriber, waitset);
    if (n == 0) start = Clock::now();
    subscriber.release(chunk);
  }
  const double fps = (frames - 1) / std::chrono::duration<double>(Clock::now() - start).count();
  waitpid(child, nullptr, 0);
  return fps;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t frame_mb = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 8;
  const int frames = argc > 2 ? std::atoi(argv[2]) : 400;
  const int pings = argc > 3 ? std::atoi(argv[3]) : 20000;
  // The answering process first: a process may fork only before its iceoryx runtime starts.
  const pid_t child = fork();
  if (child == 0) {
    init("sonopipe-bench-pong-" + std::to_string(getpid()));
    iox::popo::UntypedSubscriber in({"sonopipe", "bench", "ping"}, lossless_subscriber(4));
    iox::popo::UntypedPublisher out({"sonopipe", "bench", "pong"}, lossless_publisher());
    iox::popo::WaitSet<> waitset;
    waitset.attachState(in, iox::popo::SubscriberState::HAS_DATA).or_else([](auto) { std::abort(); });
    for (int n = 0; n < pings; ++n) {
      const void* ping = take_blocking(in, waitset);
      auto loaned = out.loan(64);
      std::memcpy(loaned.value(), ping, 64);
      in.release(ping);
      out.publish(loaned.value());
    }
    usleep(200000);
    _exit(0);
  }
  const double fps = throughput(frame_mb << 20, frames);
  std::printf("iceoryx %zu MiB frames, publisher writes frame: %.0f frames/s %.2f GB/s\n", frame_mb, fps,
              fps * static_cast<double>(frame_mb << 20) / 1e9);
  std::fflush(stdout);
  // Latency: this process pings on one topic, the child answers on another.
  // (The throughput run's runtime is this process's runtime: one per process.)
  iox::popo::UntypedSubscriber in({"sonopipe", "bench", "pong"}, lossless_subscriber(4));
  iox::popo::UntypedPublisher out({"sonopipe", "bench", "ping"}, lossless_publisher());
  iox::popo::WaitSet<> waitset;
  waitset.attachState(in, iox::popo::SubscriberState::HAS_DATA).or_else([](auto) { std::abort(); });
  usleep(500000);  // both sides matched
  std::vector<double> one_way;
  for (int n = 0; n < pings; ++n) {
    const auto start = Clock::now();
    auto loaned = out.loan(64);
    std::memset(loaned.value(), 1, 64);
    out.publish(loaned.value());
    in.release(take_blocking(in, waitset));
    one_way.push_back(std::chrono::duration<double>(Clock::now() - start).count() * 1e6 / 2);
  }
  waitpid(child, nullptr, 0);
  std::sort(one_way.begin(), one_way.end());
  std::printf("iceoryx one-way latency, 64-byte messages: p50 %.1f us, p99 %.1f us\n", one_way[one_way.size() / 2],
              one_way[one_way.size() * 99 / 100]);
  return 0;
}
