#include "runtime/pipeline_def.h"

#include <algorithm>
#include <stdexcept>

namespace sonopipe {

bool FrameMatch::matches(const FrameMeta& frame) const {
  const bool kind_ok = kinds.empty() || std::find(kinds.begin(), kinds.end(), frame.kind) != kinds.end();
  const bool stream_ok = stream_ids.empty() ||
                         std::find(stream_ids.begin(), stream_ids.end(), frame.stream_id) != stream_ids.end();
  return kind_ok && stream_ok;
}

std::vector<std::string> stage_labels(const PipelineConfig& config) {
  std::vector<std::string> labels;
  for (const StageConfig& stage_config : config.stages) {
    std::string label = stage_config.name.empty() ? stage_config.type : stage_config.name;
    // Two unnamed stages of one type: number the later ones so timings stay apart.
    int repeat = 1;
    for (const std::string& earlier : labels)
      if (earlier == label || earlier.rfind(label + "#", 0) == 0) ++repeat;
    if (repeat > 1) label += "#" + std::to_string(repeat);
    labels.push_back(std::move(label));
  }
  return labels;
}

std::vector<PipelineStage> build_stages(const PipelineConfig& config, const StageRegistry& registry) {
  std::vector<PipelineStage> stages;
  const std::vector<std::string> labels = stage_labels(config);
  for (std::size_t i = 0; i < config.stages.size(); ++i) {
    const StageConfig& stage_config = config.stages[i];
    const StageInfo* info = registry.find(stage_config.type);
    if (!info) throw std::invalid_argument("unknown stage type '" + stage_config.type + "'");
    PipelineStage stage;
    stage.label = labels[i];
    stage.output_prefix = stage_config.name.empty() ? "" : stage_config.name + "_";
    stage.stage = info->create(stage_config.params);
    stage.make = [info, params = stage_config.params] { return info->create(params); };
    stage.publish = stage_config.publish || i + 1 == config.stages.size();
    stages.push_back(std::move(stage));
  }
  return stages;
}

}  // namespace sonopipe
