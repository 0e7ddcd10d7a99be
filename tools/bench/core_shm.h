// Opening a daemon's shm:// ingest pool from a bench: the daemon answering on its control socket
// means its pool exists, and a pool just created by it can still read as "not a sonopipe pool of
// this version (layout 0)" to an opener for a moment (shm::Pool::open's race with the creator);
// the bench tries again until a deadline instead of failing the run.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "shm/pool.h"
#include "shm/producer.h"

namespace sonopipe::bench {

inline std::unique_ptr<shm::Producer> open_ready_producer(const std::string& endpoint,
                                                         std::chrono::milliseconds patience = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (true) {
    try {
      return std::make_unique<shm::Producer>(endpoint);
    } catch (const shm::ShmError&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace sonopipe::bench
