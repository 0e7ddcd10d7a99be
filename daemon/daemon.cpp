#include "daemon/daemon.h"

#include "shm/layout.h"

#include <spdlog/spdlog.h>

#include "runtime/gpu_device.h"

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "daemon/service_notify.h"
#include "daemon/thread_placement.h"
#include "runtime/host_path_switches.h"
#include "stages/registry.h"

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
  // threads.cpus before any socket or lane starts its threads: they inherit it from this one.
  if (!config_.threads.cpus.empty()) {
    place_process_threads(config_.threads.cpus);
    spdlog::info("threads: on CPUs {}", cpu_list_text(config_.threads.cpus));
  }
  spdlog::info("backend {}: {} ({}; {} slots, queue {} {}, {} CPU threads per pipeline)", backend_name(backend_.backend),
               backend_.reason, backend_.device_name, config_.slots, config_.queue_depth,
               overflow_policy_name(config_.overflow), ThreadPool::size_for(config_.cpu_threads));
  // The host path's experiment switches: a refused one stops the start before any socket or lane
  // exists; those set are named, as a run with them is not the daemon's default.
  host_path_switches_from_environment();
  if (const std::vector<std::string> set = host_path_switches_set(); !set.empty()) {
    std::string names;
    for (const std::string& name : set) names += (names.empty() ? "" : " ") + name;
    spdlog::warn("experiment switches set (runtime/host_path_switches.h; none is needed in operation): {}", names);
  }
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
  publisher_ = std::make_unique<Publisher>(
      context_, config_.publish_endpoint,
      PublishLimits{.high_water_mark = config_.publish_high_water_mark,
                    .max_queued_bytes = config_.publish_max_queued_bytes,
                    .stall_timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(config_.publish_stall_timeout_s))},
      secure_publish);
  if (!config_.publish_shm.endpoint.empty())
    shm_publisher_ = std::make_unique<ShmPublisher>(config_, backend_.backend == Backend::cuda);
  ExecutorCallbacks callbacks{
      .publish =
          [this](const PublishedResult& result) {
            // Shared memory first (its subscribers read in place as soon as it is committed); the
            // ZeroMQ subscribers get the result whatever happened there.
            std::exception_ptr shm_failed;
            if (shm_publisher_) {
              try {
                shm_publisher_->publish_result(result);
              } catch (const std::exception&) {
                shm_failed = std::current_exception();
              }
            }
            publisher_->publish_result(result);
            if (shm_failed) std::rethrow_exception(shm_failed);
          },
      .stage_error =
          [this](const FrameMeta& frame, const std::string& pipeline, const std::string& why) {
            rejects_.reject(wire::RejectReason::stage_error,
                            "pipeline " + pipeline + ", stream " + std::to_string(frame.stream_id) +
                                " sequence " + std::to_string(frame.sequence) + ": " + why);
          },
      .publish_error =
          [](const FrameMeta& frame, const std::string& pipeline, const std::string& why) {
            spdlog::error("pipeline {}, stream {} sequence {}: {}", pipeline, frame.stream_id, frame.sequence, why);
          },
  };
  // Results written once: into a slot of the shared result pool, which the ZeroMQ publisher
  // sends from too.
  if (shm_publisher_)
    callbacks.claim_result = [this](const std::string&, const std::string&, std::size_t bytes) {
      return shm_publisher_->claim(bytes);
    };
  pipelines_ = std::make_unique<PipelineSet>(config_, backend_, callbacks);
  if (shm::is_shm_endpoint(config_.ingest_endpoint))
    shm_ingest_ = std::make_unique<ShmIngest>(
        config_, [this](InputFrame&& frame) { return pipelines_->dispatch(std::move(frame)); }, rejects_,
        backend_.backend == Backend::cuda);
  else
    ingest_ = std::make_unique<Ingest>(
        context_, config_, [this](InputFrame&& frame) { return pipelines_->dispatch(std::move(frame)); }, rejects_,
        secure_ingest);
  if (ingest_) ingest_->set_timeline(timeline_.get());
  for (std::size_t i = 0; i < config_.pipelines.size(); ++i) {
    if (!pipelines_->has_own_ingest(i)) continue;
    DaemonConfig own = config_;
    own.ingest_endpoint = config_.pipelines[i].ingest_endpoint;
    own.ingest_pattern = IngestPattern::pull;
    own.ingest_bind = true;
    own.ingest_ack_endpoint.clear();  // acknowledgements: the shared ingest only
    own_ingests_.push_back(std::make_unique<Ingest>(
        context_, own, [this, i](InputFrame&& frame) { return pipelines_->dispatch_to(i, std::move(frame)); },
        rejects_, secure_ingest));
    spdlog::info("pipeline {}: reads its own ingest socket", config_.pipelines[i].name);
  }
  live_ = std::make_unique<LiveParameters>(
      config_.pipelines, config_.registry ? *config_.registry : builtin_stages(),
      [this](std::size_t pipeline, std::size_t stage, const std::function<std::unique_ptr<Stage>()>& make,
             std::uint64_t generation) { pipelines_->executor(pipeline).update_stage(stage, make, generation); },
      [this](std::size_t pipeline, std::size_t stage, Stage& candidate) {
        pipelines_->executor(pipeline).check_stage(stage, candidate);
      });
  control_ = std::make_unique<ControlServer>(
      context_, config_.control_endpoint,
      ControlHandler([this] { return status(); }, [this] { stop(); }, config_.security.control_stop, live_.get(),
                     [this] { return config_with_parameters(config_, live_->pipelines()); }),
      secure_control);
  if (config_.security.control_stop != ControlStop::allow)
    spdlog::info("control: stop {}", config_.security.control_stop == ControlStop::disabled
                                         ? "disabled" : "only for clients with an authorized CURVE key");
  if (curve_gate_) curve_gate_->start();
  place_io_threads();
}

void Daemon::place_io_threads() {
  // libzmq names its I/O threads ZMQbg/IO/<n>; the ingest sockets use the first (kIngestIoThread),
  // the publisher the second (kPublishIoThread). Both exist once the context's first socket does.
  const std::pair<const char*, const std::vector<int>*> io[] = {{"ZMQbg/IO/0", &config_.threads.ingest_io_cpus},
                                                                {"ZMQbg/IO/1", &config_.threads.publish_io_cpus}};
  for (const auto& [name, cpus] : io) {
    if (cpus->empty()) continue;
    // An I/O thread names itself once it runs, which may be after the socket that started it is
    // made: look again for up to 2 s before giving up (daemon_test saw the name missing 2 in 9 starts).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int placed = 0;
    while ((placed = place_named_threads(name, *cpus)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (placed == 0)
      throw std::runtime_error(std::string("threads: no ZeroMQ I/O thread named ") + name + " to place");
    spdlog::info("threads: ZeroMQ I/O thread {} ({}) on CPUs {}", name,
                 name == std::string_view("ZMQbg/IO/0") ? "reads frames" : "writes results", cpu_list_text(*cpus));
  }
}

Daemon::~Daemon() = default;

void Daemon::stop() { stop_requested_.store(true); }

std::thread Daemon::guarded_thread(const char* what, std::function<void()> body) {
  return std::thread([this, what, body = std::move(body)] {
    pthread_setname_np(pthread_self(), what);  // per-thread CPU accounting (sonopipe-bench core)
    std::string why;
    try {
      body();
      return;
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
      why = "an exception that is not a std::exception";
    }
    thread_errors_.fetch_add(1);
    spdlog::error("{} thread failed: {}; stopping (exit code 1)", what, why);
    stop_requested_.store(true);
  });
}

int Daemon::run() {
  std::atomic<bool> stop_ingest{false}, stop_control{false};
  std::vector<std::thread> ingest_threads;
  if (ingest_) ingest_threads.push_back(guarded_thread("ingest", [&] { ingest_->run(stop_ingest); }));
  if (shm_ingest_) ingest_threads.push_back(guarded_thread("ingest", [&] { shm_ingest_->run(stop_ingest); }));
  for (auto& own : own_ingests_)
    ingest_threads.push_back(guarded_thread("ingest", [&, reader = own.get()] { reader->run(stop_ingest); }));
  std::thread control_thread = guarded_thread("control", [&] { control_->run(stop_control); });
  spdlog::info("sonopiped ready");
  service::notify_ready();  // every socket was bound in the constructor
  const auto watchdog = service::watchdog_interval();
  auto next_watchdog = std::chrono::steady_clock::now();

  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config_.status_interval_s));
  auto next_status = std::chrono::steady_clock::now();
  // The status heartbeat and systemd's watchdog, both kept up during the drain too.
  auto heartbeat = [&] {
    if (watchdog.count() > 0 && std::chrono::steady_clock::now() >= next_watchdog) {
      service::notify_watchdog();
      next_watchdog = std::chrono::steady_clock::now() + watchdog;
    }
    if (std::chrono::steady_clock::now() < next_status) return;
    publisher_->publish_status(status());
    next_status += interval;
    if (next_status < std::chrono::steady_clock::now()) next_status = std::chrono::steady_clock::now() + interval;
  };
  while (!stop_requested_.load()) {
    if (int signal = wait_for_stop_signal(50)) {
      spdlog::info("{} received: draining", signal == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    heartbeat();
  }
  // Drain: stop reading (after what ZeroMQ already holds), finish and publish everything accepted
  // while the heartbeat goes on, then say goodbye. A second signal cuts the drain short.
  service::notify_stopping();
  draining_.store(true);
  stop_ingest.store(true);
  std::atomic<bool> executors_drained{false};
  std::thread drainer = guarded_thread("drain", [&] {
    struct Done {  // also when a drain throws: the loop below must end
      std::atomic<bool>& flag;
      ~Done() { flag.store(true); }
    } done{executors_drained};
    for (std::thread& thread : ingest_threads) thread.join();
    pipelines_->drain();
  });
  while (!executors_drained.load()) {
    if (wait_for_stop_signal(50)) {
      const std::uint64_t abandoned = pipelines_->frames_unfinished();
      frames_abandoned_.store(abandoned);
      spdlog::error("second stop signal during the drain: stopping now; {} accepted frame(s) not processed",
                    abandoned);
      publisher_->publish_status(status());
      publisher_->close(200);
      spdlog::default_logger()->flush();
      std::_Exit(kForcedStopExitCode);  // the executors may be inside a long stage: no orderly join
    }
    heartbeat();
  }
  drainer.join();
  drained_.store(true);
  if (timeline_) timeline_->write();
  v1::Status final_status = status();
  publisher_->publish_status(final_status);
  publisher_->close(2000);
  stop_control.store(true);
  control_thread.join();
  spdlog::info("stopped: {} frames received ({} read after the stop, {} more discarded), {} processed, {} results "
               "published, {} rejected, {} dropped",
               final_status.frames_received(), final_status.frames_read_at_stop(),
               final_status.frames_discarded_at_stop(), final_status.frames_processed(),
               final_status.results_published(), final_status.frames_rejected(), final_status.frames_dropped());
  return thread_errors_.load() > 0 ? 1 : 0;
}

v1::Status Daemon::status() const {
  v1::Status status;
  status.set_schema_version(wire::kSchemaVersion);
  status.set_uptime_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  status.set_backend(std::string(backend_name(backend_.backend)));
  status.set_backend_reason(backend_.reason);
  status.set_device_name(backend_.device_name);
  std::uint64_t received = 0, missing = 0, read_at_stop = 0, discarded_at_stop = 0;
  if (ingest_) {
    received = ingest_->received();
    missing = ingest_->missing();
    read_at_stop = ingest_->read_at_stop();
    discarded_at_stop = ingest_->discarded_at_stop();
    status.set_ingest_ack_endpoint(config_.ingest_ack_endpoint);
    status.set_acknowledgements_published(ingest_->acknowledgements());
    status.set_frames_resent_duplicate(ingest_->duplicates());
  }
  if (shm_ingest_) {
    received = shm_ingest_->received();
    missing = shm_ingest_->missing();
  }
  for (const auto& own : own_ingests_) {
    received += own->received();
    missing += own->missing();
    read_at_stop += own->read_at_stop();
    discarded_at_stop += own->discarded_at_stop();
  }
  status.set_frames_received(received);
  status.set_frames_missing(missing);
  status.set_frames_rejected(rejects_.total());
  for (const auto& [reason, count] : rejects_.by_reason()) (*status.mutable_rejected_by_reason())[reason] = count;
  status.set_draining(draining_.load());
  status.set_drained(drained_.load());
  status.set_thread_errors(thread_errors_.load());
  status.set_frames_read_at_stop(read_at_stop);
  status.set_frames_discarded_at_stop(discarded_at_stop);
  status.set_frames_abandoned(frames_abandoned_.load());
  if (curve_gate_) {
    status.set_clients_refused(curve_gate_->refused());
    for (const auto& [socket, count] : curve_gate_->refused_by_socket())
      (*status.mutable_clients_refused_by_socket())[socket] = count;
  }
  std::uint64_t processed = 0, published = 0, dropped = 0;
  for (const auto& executor : pipelines_->executors()) {
    PipelineStats all = executor->stats();
    const LaneStats& stats = all.total;
    processed += stats.processed;
    published += stats.published;
    dropped += stats.dropped;
    v1::PipelineStatus* p = status.add_pipelines();
    for (const DeviceStats& device : all.devices) {
      v1::DeviceStatus* d = p->add_devices();
      d->set_device(device.device);
      d->set_frames_processed(device.processed);
      d->set_busy_ms_total(device.busy_ms_total);
      d->set_queue_depth(static_cast<std::uint32_t>(device.queue_depth));
      d->set_streams(static_cast<std::uint32_t>(device.streams));
    }
    p->set_streams_forgotten(all.streams_forgotten);
    p->set_param_generation(stats.param_generation);
    p->set_param_changes(stats.param_changes);
    p->set_state_resets(stats.state_resets);
    if (live_)
      for (const LiveParameters::Entry& entry : live_->list(executor->name()).entries)
        fill_parameter(entry, *p->add_parameters());
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
    p->set_publish_errors(stats.publish_errors);
    p->set_results_copied(stats.results_copied);
    p->set_results_waited(stats.results_waited);
    p->set_streams_live(static_cast<std::uint32_t>(stats.streams_live));
    p->set_streams_evicted(stats.streams_evicted);
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
  add_publish_status(status);
  return status;
}

void Daemon::add_publish_status(v1::Status& status) const {
  const PublishStats publish = publisher_->stats();
  status.set_publish_max_queued_bytes(publish.max_queued_bytes);
  status.set_publish_bytes_held(publish.bytes_held);
  status.set_results_dropped_for_subscribers(publish.results_dropped);
  status.set_subscribers_cut(publish.subscribers_cut);
  status.set_subscribers_watched(publish.subscribers_watched);
  if (shm_publisher_) status.set_shm_results_in_place(shm_publisher_->results_in_place());
  for (const SubscriberInfo& info : publish.subscribers) {
    v1::SubscriberStatus* subscriber = status.add_subscribers();
    subscriber->set_peer(info.peer);
    subscriber->set_connected_s(info.connected_s);
    subscriber->set_lagging(info.lagging);
    subscriber->set_stalled(info.stalled);
    subscriber->set_backlog_bytes(info.backlog_bytes);
    subscriber->set_results_dropped(info.results_dropped);
    subscriber->set_cut(info.cut);
  }
}

}  // namespace sonopipe
