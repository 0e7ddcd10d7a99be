// sonopipe-bench shm-transport: the shared-memory transport alone, between two processes on the
// CPU (no daemon, no GPU), beside ZeroMQ ipc:// on the same machine: throughput of large frames
// (the producer writes every byte of each frame once, the consumer takes and releases it) and the
// one-way latency of small messages (ping-pong over two pools, half the round trip). The numbers
// behind the choice of transport in docs/shared-memory.md; tools/bench/iceoryx/
// measures iceoryx the same way.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <vector>

#include <zmq.hpp>

#include "shm/consumer.h"
#include "shm/producer.h"
#include "tools/bench/commands.h"

namespace sonopipe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::size_t frame_mb = 8;
  int frames = 400;
  int pings = 20000;
  std::size_t ping_bytes = 64;
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Frames per second from producer (child) to consumer (this process) through a lossless pool.
double shm_throughput(const Options& o, bool write_payload) {
  const std::string endpoint = "shm://bench-" + std::to_string(getpid());
  const std::size_t bytes = o.frame_mb << 20;
  shm::PoolOptions options;
  options.slot_count = 8;
  options.payload_capacity = bytes;
  auto pool = std::shared_ptr<shm::Pool>(shm::Pool::create(endpoint, options));
  shm::Consumer consumer(pool, shm::Mode::lossless);
  const pid_t child = fork();
  if (child == 0) {
    std::vector<std::byte> source(bytes, std::byte{1});
    shm::Producer producer(endpoint);
    for (int n = 0; n < o.frames; ++n) {
      auto claim = producer.claim(Clock::now() + std::chrono::seconds(30));
      if (!claim) _exit(2);
      if (write_payload) std::memcpy(claim->payload.data(), source.data(), bytes);
      producer.commit(*claim, 8, bytes);
    }
    _exit(0);
  }
  Clock::time_point start;
  for (int n = 0; n < o.frames; ++n) {
    auto m = consumer.take(Clock::now() + std::chrono::seconds(30));
    if (!m) break;
    if (n == 0) start = Clock::now();  // from the first frame: process start-up left out
    consumer.release(m->slot);
  }
  const double fps = (o.frames - 1) / seconds_since(start);
  waitpid(child, nullptr, 0);
  shm_unlink(shm::object_name(endpoint).c_str());
  return fps;
}

double zmq_throughput(const Options& o) {
  const std::string endpoint = "ipc:///tmp/sonopipe-bench-" + std::to_string(getpid());
  const std::size_t bytes = o.frame_mb << 20;
  const pid_t child = fork();
  if (child == 0) {
    {  // the context's destructor delivers what is queued (linger) before _exit
      zmq::context_t context(1);
      zmq::socket_t push(context, zmq::socket_type::push);
      push.set(zmq::sockopt::sndhwm, 4);
      push.set(zmq::sockopt::linger, 10000);
      push.connect(endpoint);
      std::vector<std::byte> source(bytes, std::byte{1});
      for (int n = 0; n < o.frames; ++n) push.send(zmq::const_buffer(source.data(), bytes), zmq::send_flags::none);
    }
    _exit(0);
  }
  zmq::context_t context(1);
  zmq::socket_t pull(context, zmq::socket_type::pull);
  pull.set(zmq::sockopt::rcvhwm, 4);
  pull.bind(endpoint);
  Clock::time_point start;
  for (int n = 0; n < o.frames; ++n) {
    zmq::message_t message;
    if (!pull.recv(message)) break;
    if (n == 0) start = Clock::now();
  }
  const double fps = (o.frames - 1) / seconds_since(start);
  waitpid(child, nullptr, 0);
  return fps;
}

struct Latency {
  double p50_us = 0, p99_us = 0;
};

Latency summarize(std::vector<double>& one_way_us) {
  std::sort(one_way_us.begin(), one_way_us.end());
  return {one_way_us[one_way_us.size() / 2], one_way_us[one_way_us.size() * 99 / 100]};
}

// Ping over pool A, pong back over pool B; one-way = round trip / 2.
Latency shm_latency(const Options& o) {
  const std::string a = "shm://bench-ping-" + std::to_string(getpid()), b = "shm://bench-pong-" + std::to_string(getpid());
  shm::PoolOptions options;
  options.slot_count = 4;
  options.payload_capacity = o.ping_bytes;
  auto ping_pool = std::shared_ptr<shm::Pool>(shm::Pool::create(a, options));
  auto pong_pool = std::shared_ptr<shm::Pool>(shm::Pool::create(b, options));
  const pid_t child = fork();
  if (child == 0) {
    shm::Consumer in(a, shm::Mode::lossless);
    shm::Producer out(b);
    for (int n = 0; n < o.pings; ++n) {
      auto m = in.take(Clock::now() + std::chrono::seconds(30));
      if (!m) _exit(2);
      auto claim = out.claim(Clock::now() + std::chrono::seconds(30));
      std::memcpy(claim->payload.data(), m->payload, o.ping_bytes);
      in.release(m->slot);
      out.commit(*claim, 8, o.ping_bytes);
    }
    _exit(0);
  }
  shm::Consumer in(pong_pool, shm::Mode::lossless);
  usleep(100000);  // the child attaches its consumer before the first ping
  shm::Producer out(a);
  std::vector<double> one_way;
  one_way.reserve(o.pings);
  for (int n = 0; n < o.pings; ++n) {
    const auto start = Clock::now();
    auto claim = out.claim(Clock::now() + std::chrono::seconds(30));
    out.commit(*claim, 8, o.ping_bytes);
    auto m = in.take(Clock::now() + std::chrono::seconds(30));
    if (!m) break;
    in.release(m->slot);
    one_way.push_back(seconds_since(start) * 1e6 / 2);
  }
  waitpid(child, nullptr, 0);
  shm_unlink(shm::object_name(a).c_str());
  shm_unlink(shm::object_name(b).c_str());
  return summarize(one_way);
}

Latency zmq_latency(const Options& o) {
  const std::string endpoint = "ipc:///tmp/sonopipe-bench-pair-" + std::to_string(getpid());
  const pid_t child = fork();
  if (child == 0) {
    {
      zmq::context_t context(1);
      zmq::socket_t pair(context, zmq::socket_type::pair);
      pair.set(zmq::sockopt::linger, 10000);
      pair.connect(endpoint);
      for (int n = 0; n < o.pings; ++n) {
        zmq::message_t message;
        if (!pair.recv(message)) _exit(2);
        pair.send(message, zmq::send_flags::none);
      }
    }
    _exit(0);
  }
  zmq::context_t context(1);
  zmq::socket_t pair(context, zmq::socket_type::pair);
  pair.bind(endpoint);
  std::vector<std::byte> ping(o.ping_bytes);
  std::vector<double> one_way;
  for (int n = 0; n < o.pings; ++n) {
    const auto start = Clock::now();
    pair.send(zmq::const_buffer(ping.data(), ping.size()), zmq::send_flags::none);
    zmq::message_t message;
    if (!pair.recv(message)) break;
    one_way.push_back(seconds_since(start) * 1e6 / 2);
  }
  waitpid(child, nullptr, 0);
  return summarize(one_way);
}

void run(const Options& o) {
  const double mb = static_cast<double>(o.frame_mb << 20) / 1e6;
  auto row = [&](const char* name, double fps) {
    std::cout << std::left << std::setw(44) << name << std::right << std::setw(10) << std::fixed
              << std::setprecision(0) << fps << " frames/s " << std::setw(8) << std::setprecision(2) << fps * mb / 1e3
              << " GB/s" << std::endl;
  };
  std::cout << "throughput, " << o.frame_mb << " MiB frames, producer process -> consumer process (" << o.frames
            << " frames)\n";
  row("shm (sonopipe pool), producer writes frame", shm_throughput(o, true));
  std::cout << std::left << std::setw(44) << "shm (sonopipe pool), transport only" << std::right << std::setw(10)
            << std::fixed << std::setprecision(0) << shm_throughput(o, false) << " messages/s (payload untouched)"
            << std::endl;
  row("ZeroMQ ipc:// PUSH->PULL (send copies)", zmq_throughput(o));
  auto latency_row = [&](const char* name, Latency l) {
    std::cout << std::left << std::setw(44) << name << std::right << " p50 " << std::setprecision(1) << l.p50_us
              << " us, p99 " << l.p99_us << " us" << std::endl;
  };
  std::cout << "one-way latency, " << o.ping_bytes << "-byte messages, ping-pong (" << o.pings << ")\n";
  latency_row("shm (sonopipe pool, futex)", shm_latency(o));
  latency_row("ZeroMQ ipc:// PAIR", zmq_latency(o));
}

}  // namespace

void add_shm_transport_bench(CLI::App& app) {
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand(
      "shm-transport", "shm:// transport alone between two processes (CPU): large-frame throughput, small-message latency");
  command->add_option("--frame-mb", options->frame_mb, "frame size in MiB")->capture_default_str();
  command->add_option("--frames", options->frames, "frames per throughput run")->capture_default_str();
  command->add_option("--pings", options->pings, "round trips for the latency")->capture_default_str();
  command->callback([options] { run(*options); });
}

}  // namespace sonopipe::bench
