#include "daemon/pipeline_set.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/gpu_device.h"
#include "stages/registry.h"

namespace sonopipe {
namespace {

// An experiment's whole number from the environment; nothing when unset or empty. Anything else
// (a sign, a unit, trailing text, too large) refuses the start with the variable named.
std::optional<std::uint64_t> environment_number(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  const std::string_view value(text);
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc{} || end != value.data() + value.size() ||
      number > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw std::invalid_argument(std::string(name) + "=" + text + ": not a whole number (an experiment switch)");
  return number;
}

}  // namespace

ExecutorOptions PipelineSet::executor_options(const DaemonConfig& config, Backend backend,
                                              const PipelineSetOptions& options) {
  ExecutorOptions executor{.backend = backend, .device_id = config.device, .slots = config.slots,
                           .queue_depth = config.queue_depth, .overflow = options.overflow.value_or(config.overflow),
                           .pool = nullptr, .max_streams = config.max_streams};
  executor.spare_wait = std::min(executor.spare_wait, std::chrono::duration_cast<std::chrono::microseconds>(
                                                         std::chrono::duration<double>(config.publish_stall_timeout_s)));
  // Experiments (issue 23, docs/host-path.md): SONOPIPE_MAX_SPARE_RESULTS=N result buffers a lane
  // parks while receivers hold them, before it publishes copies (default 8);
  // SONOPIPE_MAX_SPARE_BYTES=N ... and at most N bytes of them (default 32 MiB);
  // SONOPIPE_SPARE_WAIT_US=N the lane waits up to N us (0: never) for a spare result buffer before
  // it publishes a copy (ExecutorOptions::spare_wait).
  if (const auto spares = environment_number("SONOPIPE_MAX_SPARE_RESULTS")) executor.max_spare_results = *spares;
  if (const auto bytes = environment_number("SONOPIPE_MAX_SPARE_BYTES")) executor.max_spare_bytes = *bytes;
  if (const auto wait = environment_number("SONOPIPE_SPARE_WAIT_US"))
    executor.spare_wait = std::chrono::microseconds(static_cast<std::int64_t>(*wait));
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
