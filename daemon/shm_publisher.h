// Results into a shared pool (publish.shm: shm://<name>): each result is written once into a slot
// as [topic '\0' ResultHeader][payload] and same-host subscribers (the C library, Python, the
// recorder) read it in place. A live pool overwrites the oldest result nobody is reading; a
// lossless one makes the completion thread wait for lossless subscribers (back-pressure up to
// kLosslessWait, then the result is counted as not published). The ZeroMQ publisher goes on
// beside it for tcp/ipc subscribers and the status heartbeat.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/device_lane.h"
#include "daemon/config.h"

namespace sonopipe {

namespace shm {
class Producer;
class Pool;
}  // namespace shm

class ShmPublisher {
 public:
  static constexpr std::chrono::seconds kLosslessWait{10};

  explicit ShmPublisher(const DaemonConfig& config);
  ~ShmPublisher();
  // Throws std::runtime_error when the result cannot be written (too large for a slot, no slot
  // within kLosslessWait): the executor counts it as a publish error.
  void publish_result(const PublishedResult& result);

 private:
  std::unique_ptr<shm::Pool> pool_;  // created here; the producer opens it by name
  std::unique_ptr<shm::Producer> producer_;
  std::mutex mutex_;
  std::string header_bytes_;  // reused between results
};

}  // namespace sonopipe
