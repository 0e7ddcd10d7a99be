#include "daemon/pipeline_set.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/gpu_device.h"
#include "runtime/host_path_switches.h"
#include "stages/registry.h"

namespace sonopipe {

ExecutorOptions PipelineSet::executor_options(const DaemonConfig& config, Backend backend,
                                              const PipelineSetOptions& options) {
  ExecutorOptions executor{.backend = backend, .device_id = config.device, .slots = config.slots,
                           .queue_depth = config.queue_depth, .overflow = options.overflow.value_or(config.overflow),
                           .pool = nullptr, .max_streams = config.max_streams};
  executor.spare_wait = std::min(executor.spare_wait, std::chrono::duration_cast<std::chrono::microseconds>(
                                                         std::chrono::duration<double>(config.publish_stall_timeout_s)));
  // Experiments (runtime/host_path_switches.h): the spares' bounds and the wait for one.
  const HostPathSwitches switches = host_path_switches_from_environment();
  if (switches.max_spare_results) executor.max_spare_results = *switches.max_spare_results;
  if (switches.max_spare_bytes) executor.max_spare_bytes = *switches.max_spare_bytes;
  if (switches.spare_wait_us)
    executor.spare_wait = std::chrono::microseconds(static_cast<std::int64_t>(*switches.spare_wait_us));
  return executor;
}

PipelineSet::PipelineSet(const DaemonConfig& config, const BackendSelection& backend, ExecutorCallbacks callbacks,
                         PipelineSetOptions options)
    : pipelines_(config.pipelines) {
  ExecutorOptions executor = executor_options(config, backend.backend, options);
  const int visible_devices = backend.backend == Backend::cuda ? probe_gpu(config.device).device_count : 0;
  const StageRegistry& registry = config.registry ? *config.registry : builtin_stages();
  for (const PipelineConfig& pipeline : pipelines_) {
    // One CPU pool per pipeline: a pipeline busy in a long stage does not hold up the others'
    // stages (idle workers sleep; when all pipelines are busy the OS shares the cores).
    pools_.push_back(std::make_unique<ThreadPool>(config.cpu_threads));
    executor.pool = pools_.back().get();
    if (options.log && backend.backend == Backend::cpu && pipeline.devices.ids.size() + pipeline.devices.all > 1)
      spdlog::info("pipeline {}: `devices` applies to the CUDA backend; the CPU backend runs it on its pool",
                   pipeline.name);
    std::vector<int> devices = resolve_devices(pipeline, config, backend.backend, visible_devices);
    executors_.push_back(std::make_unique<PipelineExecutor>(
        pipeline.name, devices, [&] { return build_stages(pipeline, registry); }, executor, callbacks));
    if (!options.log) continue;
    std::string chain, placement;
    for (const StageConfig& stage : pipeline.stages) chain += (chain.empty() ? "" : " -> ") + stage.type;
    for (int d : devices) placement += (placement.empty() ? "" : ", ") + std::to_string(d);
    if (backend.backend == Backend::cuda)
      placement = (devices.size() > 1 ? "devices " : "device ") + placement +
                  (devices.size() == 1 ? "" : executors_.back()->stream_affinity() ? " (streams stay on one device)"
                                                                                  : " (frame by frame)");
    else
      placement = "cpu";
    spdlog::info("pipeline {}: {} [{}]", pipeline.name, chain, placement);
  }
}

PipelineSet::~PipelineSet() { drain(); }

bool PipelineSet::dispatch(InputFrame&& frame) {
  auto takes = [&](std::size_t i) { return !has_own_ingest(i) && pipelines_[i].match.matches(frame.meta); };
  int last = -1;
  for (std::size_t i = 0; i < executors_.size(); ++i)
    if (takes(i)) last = static_cast<int>(i);
  if (last < 0) return false;
  for (int i = 0; i < last; ++i)
    if (takes(static_cast<std::size_t>(i))) executors_[i]->submit(frame);
  executors_[last]->submit(std::move(frame));
  return true;
}

bool PipelineSet::dispatch_to(std::size_t index, InputFrame&& frame) {
  if (!pipelines_[index].match.matches(frame.meta)) return false;
  executors_[index]->submit(std::move(frame));
  return true;
}

void PipelineSet::drain() {
  for (auto& executor : executors_) executor->drain();
}

std::uint64_t PipelineSet::frames_unfinished() const {
  std::uint64_t unfinished = 0;
  for (const auto& executor : executors_) {
    const LaneStats stats = executor->stats().total;
    const std::uint64_t done = stats.processed + stats.stage_errors + stats.dropped;
    if (stats.accepted > done) unfinished += stats.accepted - done;
  }
  return unfinished;
}

}  // namespace sonopipe
