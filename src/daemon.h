// The sonopiped process: ingest -> per-pipeline executors -> publisher, plus the control socket,
// the status heartbeat and the signal-driven drain. main.cpp parses flags and builds one of these.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include <zmq.hpp>

#include "pipeline/executor.h"
#include "pipeline/thread_pool.h"
#include "src/backend_choice.h"
#include "src/config.h"
#include "src/control.h"
#include "src/curve_gate.h"
#include "src/ingest.h"
#include "src/publisher.h"
#include "src/reject_log.h"

namespace sonopipe {

class Daemon {
 public:
  // Binds every socket and starts the executors; throws on bad endpoints or stage setup.
  Daemon(DaemonConfig config, BackendSelection backend);
  ~Daemon();

  // Serves until stop() is called or SIGINT/SIGTERM arrives (the caller must have blocked those
  // signals in every thread, see block_stop_signals()), then drains every accepted frame.
  void run();
  void stop();
  v1::Status status() const;

 private:
  bool dispatch(InputFrame&& frame);

  DaemonConfig config_;
  BackendSelection backend_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  zmq::context_t context_{2};  // two I/O threads: ingest and publish streams do not share one
  std::unique_ptr<CurveGate> curve_gate_;  // security.curve; outlives the sockets it guards
  RejectLog rejects_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Publisher> publisher_;
  std::vector<std::unique_ptr<PipelineExecutor>> executors_;
  std::vector<FrameMatch> matches_;  // parallel to executors_
  std::unique_ptr<Ingest> ingest_;
  std::unique_ptr<ControlServer> control_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> draining_{false};
};

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later; call first
// thing in main(). Daemon::run() then waits for them with sigtimedwait.
void block_stop_signals();

}  // namespace sonopipe
