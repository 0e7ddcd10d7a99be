#include "src/daemon.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <ctime>
#include <thread>

#include "src/service_notify.h"

namespace sonopipe {

void block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

// Waits up to `milliseconds` for SIGINT/SIGTERM; returns the signal number or 0.
int wait_for_stop_signal(int milliseconds) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  timespec timeout{milliseconds / 1000, (milliseconds % 1000) * 1000000L};
  int signal = sigtimedwait(&set, nullptr, &timeout);
  return signal > 0 ? signal : 0;
}

}  // namespace

Daemon::Daemon(DaemonConfig config, BackendSelection backend)
    : config_(std::move(config)), backend_(std::move(backend)) {
  pool_ = std::make_unique<ThreadPool>(config_.cpu_threads);
  spdlog::info("backend {}: {} ({}; {} slots, queue {} {}, {} CPU threads)", backend_name(backend_.backend),
               backend_.reason, backend_.device_name, config_.slots, config_.queue_depth,
               overflow_policy_name(config_.overflow), pool_->size());
  // With security.curve every socket is a CURVE server behind one gate (ZAP handler + monitors).
  std::function<void(zmq::socket_t&)> secure_ingest, secure_publish, secure_control;
  if (config_.security.curve) {
    curve_gate_ = std::make_unique<CurveGate>(
        context_, curve::KeyPair{config_.security.server_public_key, config_.security.server_secret_key},
        config_.security.authorized_client_keys);
    secure_ingest = [this](zmq::socket_t& socket) { curve_gate_->secure(socket, "ingest"); };
    secure_publish = [this](zmq::socket_t& socket) { curve_gate_->secure(socket, "publish"); };
    secure_control = [this](zmq::socket_t& socket) { curve_gate_->secure(socket, "control"); };
  }
  publisher_ = std::make_unique<Publisher>(context_, config_.publish_endpoint, config_.publish_high_water_mark,
                                           secure_publish);
  ExecutorCallbacks callbacks{
      .publish = [this](const PublishedResult& result) { publisher_->publish_result(result); },
      .stage_error =
          [this](const FrameMeta& frame, const std::string& pipeline, const std::string& why) {
            rejects_.reject(wire::RejectReason::stage_error,
                            "pipeline " + pipeline + ", stream " + std::to_string(frame.stream_id) +
                                " sequence " + std::to_string(frame.sequence) + ": " + why);
          },
  };
  ExecutorOptions options{.backend = backend_.backend, .device_id = config_.device, .slots = config_.slots,
                          .queue_depth = config_.queue_depth, .overflow = config_.overflow, .pool = pool_.get()};
  for (const PipelineConfig& pipeline : config_.pipelines) {
    executors_.push_back(std::make_unique<PipelineExecutor>(
        pipeline.name, build_stages(pipeline, config_.registry ? *config_.registry : builtin_stages()), options, callbacks));
    matches_.push_back(pipeline.match);
    std::string chain;
    for (const StageConfig& stage : pipeline.stages) chain += (chain.empty() ? "" : " -> ") + stage.type;
    spdlog::info("pipeline {}: {}", pipeline.name, chain);
  }
  ingest_ = std::make_unique<Ingest>(
      context_, config_, [this](InputFrame&& frame) { return dispatch(std::move(frame)); }, rejects_, secure_ingest);
  control_ = std::make_unique<ControlServer>(
      context_, config_.control_endpoint,
      ControlHandler([this] { return status(); }, [this] { stop(); }, config_.security.control_stop), secure_control);
  if (config_.security.control_stop != ControlStop::allow)
    spdlog::info("control: stop {}", config_.security.control_stop == ControlStop::disabled
                                         ? "disabled" : "only for clients with an authorized CURVE key");
  if (curve_gate_) curve_gate_->start();
}

Daemon::~Daemon() = default;

bool Daemon::dispatch(InputFrame&& frame) {
  // A frame may feed several pipelines; all but the last get a copy sharing the payload.
  int last = -1;
  for (std::size_t i = 0; i < executors_.size(); ++i)
    if (matches_[i].matches(frame.meta)) last = static_cast<int>(i);
  if (last < 0) return false;
  for (int i = 0; i < last; ++i)
    if (matches_[i].matches(frame.meta)) executors_[i]->submit(frame);
  executors_[last]->submit(std::move(frame));
  return true;
}

void Daemon::stop() { stop_requested_.store(true); }

void Daemon::run() {
  std::atomic<bool> stop_ingest{false}, stop_control{false};
  std::thread ingest_thread([&] { ingest_->run(stop_ingest); });
  std::thread control_thread([&] { control_->run(stop_control); });
  spdlog::info("sonopiped ready");
  service::notify_ready();  // every socket was bound in the constructor
  const auto watchdog = service::watchdog_interval();
  auto next_watchdog = std::chrono::steady_clock::now();

  const auto interval = std::chrono::duration<double>(config_.status_interval_s);
  auto next_status = std::chrono::steady_clock::now();
  while (!stop_requested_.load()) {
    if (int signal = wait_for_stop_signal(50)) {
      spdlog::info("{} received: draining", signal == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    if (watchdog.count() > 0 && std::chrono::steady_clock::now() >= next_watchdog) {
      service::notify_watchdog();
      next_watchdog = std::chrono::steady_clock::now() + watchdog;
    }
    if (std::chrono::steady_clock::now() >= next_status) {
      publisher_->publish_status(status());
      next_status += std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
      if (next_status < std::chrono::steady_clock::now()) next_status = std::chrono::steady_clock::now() + 
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
    }
  }
  // Drain: stop reading, finish and publish everything accepted, then say goodbye.
  service::notify_stopping();
  draining_.store(true);
  stop_ingest.store(true);
  ingest_thread.join();
  for (auto& executor : executors_) executor->drain();
  v1::Status final_status = status();
  publisher_->publish_status(final_status);
  publisher_->close(2000);
  stop_control.store(true);
  control_thread.join();
  spdlog::info("stopped: {} frames received, {} processed, {} results published, {} rejected, {} dropped",
               final_status.frames_received(), final_status.frames_processed(), final_status.results_published(),
               final_status.frames_rejected(), final_status.frames_dropped());
}

v1::Status Daemon::status() const {
  v1::Status status;
  status.set_schema_version(wire::kSchemaVersion);
  status.set_uptime_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  status.set_backend(std::string(backend_name(backend_.backend)));
  status.set_backend_reason(backend_.reason);
  status.set_device_name(backend_.device_name);
  status.set_frames_received(ingest_ ? ingest_->received() : 0);
  status.set_frames_missing(ingest_ ? ingest_->missing() : 0);
  status.set_frames_rejected(rejects_.total());
  for (const auto& [reason, count] : rejects_.by_reason()) (*status.mutable_rejected_by_reason())[reason] = count;
  status.set_draining(draining_.load());
  if (curve_gate_) {
    status.set_clients_refused(curve_gate_->refused());
    for (const auto& [socket, count] : curve_gate_->refused_by_socket())
      (*status.mutable_clients_refused_by_socket())[socket] = count;
  }
  std::uint64_t processed = 0, published = 0, dropped = 0;
  for (const auto& executor : executors_) {
    PipelineStats stats = executor->stats();
    processed += stats.processed;
    published += stats.published;
    dropped += stats.dropped;
    v1::PipelineStatus* p = status.add_pipelines();
    p->set_name(stats.name);
    p->set_frames_accepted(stats.accepted);
    p->set_frames_processed(stats.processed);
    p->set_results_published(stats.published);
    p->set_frames_dropped(stats.dropped);
    p->set_queue_depth(static_cast<std::uint32_t>(stats.queue_depth));
    p->set_slots(static_cast<std::uint32_t>(stats.slots));
    p->set_latency_ms_p50(stats.latency_ms.p50);
    p->set_latency_ms_p99(stats.latency_ms.p99);
    p->set_h2d_ms_p50(stats.h2d_ms.p50);
    p->set_d2h_ms_p50(stats.d2h_ms.p50);
    p->set_stage_errors(stats.stage_errors);
    p->set_h2d_ms_p99(stats.h2d_ms.p99);
    p->set_d2h_ms_p99(stats.d2h_ms.p99);
    p->set_busy_ms_p50(stats.busy_ms.p50);
    p->set_interval_ms_p50(stats.interval_ms.p50);
    p->set_queue_capacity(static_cast<std::uint32_t>(config_.queue_depth));
    for (const StageStats& stage : stats.stages) {
      v1::StageTiming* t = status.add_stages();
      t->set_pipeline(stats.name);
      t->set_stage(stage.label);
      t->set_compute_ms_p50(stage.compute_ms.p50);
      t->set_compute_ms_p99(stage.compute_ms.p99);
      t->set_enqueue_ms_p50(stage.enqueue_ms.p50);
      t->set_enqueue_ms_p99(stage.enqueue_ms.p99);
      t->set_frames(stage.compute_ms.count);
    }
  }
  status.set_frames_processed(processed);
  status.set_results_published(published);
  status.set_frames_dropped(dropped);
  return status;
}

}  // namespace sonopipe
