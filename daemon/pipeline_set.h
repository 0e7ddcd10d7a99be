// The pipelines of a config, assembled: config -> stage instances -> one PipelineExecutor per
// pipeline (over its devices) -> match and dispatch of each frame. The one assembly used by
// sonopiped (daemon.cpp), sonopipe-run (tools/run) and sonopipe-bench, so that every pipeline key
// (slots, queue_depth, overflow, devices, max_streams, cpu_threads, match, ingest) means the same
// thing in each of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "daemon/backend_choice.h"
#include "daemon/config.h"
#include "runtime/pipeline_executor.h"
#include "sdk/thread_pool.h"

namespace sonopipe {

// What a caller may change about the config's executors, and nothing else.
struct PipelineSetOptions {
  // sonopipe-run processes a recording: it never drops, whatever the config's `overflow` says.
  std::optional<OverflowPolicy> overflow;
  // Log each pipeline's chain and placement (the daemon does; batch tools stay quiet).
  bool log = true;
};

class PipelineSet {
 public:
  // Builds every pipeline's stages and executor; throws on a stage that refuses its parameters.
  PipelineSet(const DaemonConfig& config, const BackendSelection& backend, ExecutorCallbacks callbacks,
              PipelineSetOptions options = {});
  ~PipelineSet();  // drains
  PipelineSet(const PipelineSet&) = delete;
  PipelineSet& operator=(const PipelineSet&) = delete;

  // A frame of the shared ingest: every matching pipeline without an ingest socket of its own gets
  // it (all but the last a copy sharing the payload). False when no pipeline takes it.
  bool dispatch(InputFrame&& frame);
  // A frame of pipeline `index`'s own ingest socket. False when the pipeline does not match it.
  bool dispatch_to(std::size_t index, InputFrame&& frame);
  void drain();

  std::size_t size() const { return executors_.size(); }
  PipelineExecutor& executor(std::size_t index) const { return *executors_[index]; }
  const PipelineConfig& pipeline(std::size_t index) const { return pipelines_[index]; }
  bool has_own_ingest(std::size_t index) const { return !pipelines_[index].ingest_endpoint.empty(); }
  const std::vector<std::unique_ptr<PipelineExecutor>>& executors() const { return executors_; }
  // Frames accepted by an executor and not yet processed, refused or dropped.
  std::uint64_t frames_unfinished() const;

  // The options every pipeline's executor gets from `config` (tests compare tools against this).
  static ExecutorOptions executor_options(const DaemonConfig& config, Backend backend,
                                          const PipelineSetOptions& options);

 private:
  std::vector<PipelineConfig> pipelines_;
  std::vector<std::unique_ptr<ThreadPool>> pools_;  // one per pipeline (CPU backend)
  std::vector<std::unique_ptr<PipelineExecutor>> executors_;
};

}  // namespace sonopipe
