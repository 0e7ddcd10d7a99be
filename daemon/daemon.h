// The sonopiped process: ingest -> per-pipeline executors -> publisher, plus the control socket,
// the status heartbeat and the signal-driven drain. main.cpp parses flags and builds one of these.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <memory>
#include <vector>

#include <zmq.hpp>

#include "runtime/host_timeline.h"

#include "daemon/backend_choice.h"
#include "daemon/config.h"
#include "daemon/control.h"
#include "daemon/curve_gate.h"
#include "daemon/ingest.h"
#include "daemon/pipeline_set.h"
#include "daemon/publisher.h"
#include "daemon/shm_ingest.h"
#include "daemon/shm_publisher.h"
#include "daemon/reject_log.h"

namespace sonopipe {

class Daemon {
 public:
  // Binds every socket and starts the executors; throws on bad endpoints or stage setup.
  Daemon(DaemonConfig config, BackendSelection backend);
  ~Daemon();

  // Serves until stop() is called or SIGINT/SIGTERM arrives (the caller must have blocked those
  // signals in every thread, see block_stop_signals()), then drains every accepted frame, sending
  // heartbeats meanwhile. Returns the exit code: 0 after a drain, 1 when a daemon thread failed
  // (logged, counted; the daemon still drains). A second signal during the drain stops at once
  // (the frames not processed are logged and counted) with kForcedStopExitCode.
  int run();
  void stop();
  v1::Status status() const;

 private:
  // Runs `body` on a thread; an exception that reaches its top is logged and counted, and stops
  // the daemon (never std::terminate).
  std::thread guarded_thread(const char* what, std::function<void()> body);
  void add_publish_status(v1::Status& status) const;  // queue bound, subscribers and their drops
  void place_io_threads();  // threads.ingest_io_cpus / publish_io_cpus

  DaemonConfig config_;
  BackendSelection backend_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  // SONOPIPE_HOST_TIMELINE (runtime/host_timeline.h): each frame's trip, written at the stop.
  std::unique_ptr<HostTimeline> timeline_ = HostTimeline::from_environment();
  zmq::context_t context_{2};  // two I/O threads: ingest and publish streams do not share one
  std::unique_ptr<CurveGate> curve_gate_;  // security.curve; outlives the sockets it guards
  RejectLog rejects_;
  std::unique_ptr<Publisher> publisher_;
  std::unique_ptr<ShmPublisher> shm_publisher_;  // publish.shm, beside the ZeroMQ publisher
  std::unique_ptr<PipelineSet> pipelines_;  // executors; before the ingests that feed them
  std::unique_ptr<Ingest> ingest_;          // a tcp:// or ipc:// ingest, or
  std::unique_ptr<ShmIngest> shm_ingest_;  // an shm:// one
  // Readers of the pipelines with an ingest socket of their own (pipelines[i].ingest); the shared
  // socket's frames skip those pipelines.
  std::vector<std::unique_ptr<Ingest>> own_ingests_;
  std::unique_ptr<LiveParameters> live_;
  std::unique_ptr<ControlServer> control_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> drained_{false};
  std::atomic<std::uint64_t> thread_errors_{0};
  std::atomic<std::uint64_t> frames_abandoned_{0};
};

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later; call first
// thing in main(). Daemon::run() then waits for them with sigtimedwait.
void block_stop_signals();

// Exit code after a second SIGINT/SIGTERM cut the drain short.
inline constexpr int kForcedStopExitCode = 4;

}  // namespace sonopipe
