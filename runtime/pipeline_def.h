// What a pipeline is, as read from the config: which frames it takes and its ordered stages.
// The config loader (daemon/config.*) fills these; build_stages() instantiates the stages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sdk/frame.h"
#include "sdk/params.h"
#include "sdk/registry.h"
#include "sdk/stage.h"

namespace sonopipe {

// Which frames a pipeline takes. An empty list means "any".
struct FrameMatch {
  std::vector<FrameKind> kinds;
  std::vector<std::uint32_t> stream_ids;

  bool matches(const FrameMeta& frame) const;
};

struct StageConfig {
  std::string type;      // registry name
  std::string name;      // optional; prefixes the published output names ("<name>_<output>")
  ParamValues params;    // validated against the stage's declarations
  bool publish = false;  // the last stage always publishes
  int line = 0;          // where the stage is declared in the config file (for messages)
};

// Which GPUs a pipeline runs on: the listed device ids, every visible device, or (neither set)
// the daemon's default.
struct DeviceSelection {
  bool all = false;
  std::vector<int> ids;

  bool given() const { return all || !ids.empty(); }
};

struct PipelineConfig {
  std::string name;
  FrameMatch match;
  DeviceSelection devices;  // not given: the config's top-level `devices` (or `device`)
  // "" = frames come from the daemon's shared ingest socket; otherwise this pipeline reads its own
  // PULL socket bound here (its `block` back-pressure then holds only that socket's senders).
  std::string ingest_endpoint;
  std::vector<StageConfig> stages;
  int line = 0;
};

// A stage instance in a pipeline, as the executor runs it.
struct PipelineStage {
  std::string label;          // the stage name, or its type; unique within the pipeline
  std::string output_prefix;  // "" or "<name>_", prepended to published output names
  std::unique_ptr<Stage> stage;
  bool publish = false;
  // Builds another instance like `stage` (same parameters), unconfigured. A live change of an
  // earlier stage that changes this stage's input configures such a fresh instance off the frame
  // path, since frames in flight still run `stage`; without it the lane configures `stage` again
  // between two frames, after its frames in flight (runtime/device_lane.h).
  std::function<std::unique_ptr<Stage>()> make;
};

// The stages' labels: the name, or the type numbered "#2", "#3" for repeats; unique in a pipeline.
std::vector<std::string> stage_labels(const PipelineConfig& config);

// Creates the stages of `config` (labels made unique, last stage published).
std::vector<PipelineStage> build_stages(const PipelineConfig& config, const StageRegistry& registry);

}  // namespace sonopipe
