// Results into a shared pool (publish.shm: shm://<name>): each result is written once into a slot
// as [topic '\0' ResultHeader][payload] and same-host subscribers (the C library, Python, the
// recorder) read it in place. A live pool overwrites the oldest result nobody is reading; a
// lossless one makes the daemon wait for lossless subscribers (back-pressure up to kLosslessWait,
// then the result is counted as not published). The ZeroMQ publisher goes on beside it for
// tcp/ipc subscribers and the status heartbeat.
//
// Written once: the executors ask for a slot before a frame's work is issued (claim(), their
// claim_result callback), their D2H copy (CPU: the stage) writes the result straight into it, and
// publish_result() only writes the header and commits. On CUDA the pool is registered with CUDA
// once, so that copy is DMA into the slot. The ZeroMQ publisher sends the same bytes without
// copying: the slot stays held by the daemon (neither freed nor overwritten) until ZeroMQ lets go.
// A result that did not get a slot (too large, or no slot within kLosslessWait) is copied in at
// publish time, as before.
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

  // `register_with_cuda`: page-lock the pool for the GPU (a failure is logged; results are then
  // copied from the executors' pinned buffers).
  ShmPublisher(const DaemonConfig& config, bool register_with_cuda);
  ~ShmPublisher();
  // A slot for a result of `bytes` (any thread; may wait up to kLosslessWait in a lossless pool).
  // Null when it does not fit a slot or no slot came free.
  std::shared_ptr<ResultClaim> claim(std::size_t bytes);
  // Throws std::runtime_error when the result cannot be written (too large for a slot, no slot
  // within kLosslessWait): the executor counts it as a publish error.
  void publish_result(const PublishedResult& result);
  bool registered_with_cuda() const;
  std::uint64_t results_in_place() const { return in_place_.load(std::memory_order_relaxed); }

  struct Core;  // the pool's producer and CUDA registration, shared with claims in flight
  struct Claim;

 private:
  std::unique_ptr<shm::Pool> pool_;  // created here; the producer opens it by name
  std::shared_ptr<Core> core_;
  std::mutex mutex_;
  std::string header_bytes_;  // reused between results
  std::atomic<std::uint64_t> in_place_{0};
};

}  // namespace sonopipe
