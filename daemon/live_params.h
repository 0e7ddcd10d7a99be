// Live parameters of the running pipelines (docs/live-parameters.md): `get`, `set` and `list` on
// "<pipeline>.<stage>.<parameter>", validated by the same declarations and rules as the config file.
// A refused value is a one-line reason naming the parameter and the rule, and nothing changes. An
// accepted one becomes the pipeline's next generation: a new stage instance is built from the new
// values and handed to the executor, which swaps it in before the next frame it starts
// (PipelineExecutor::update_stage); every result carries the generation its frame started with.
// Thread-safe: concurrent setters are applied one after the other, in generation order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/pipeline_def.h"
#include "sdk/registry.h"

namespace sonopipe {

class LiveParameters {
 public:
  struct Entry {
    std::string name;            // "<pipeline>.<stage>.<parameter>"
    ParamDecl decl;
    std::string value;           // YAML
    std::uint64_t generation = 0;  // the pipeline generation that set it (0: the config)
  };
  struct Outcome {
    bool ok = false;
    std::string error;           // one line naming the parameter and the rule
    std::vector<Entry> entries;  // get / set: the parameter; list: every match
    std::uint64_t generation = 0;
  };
  // Hands a change to pipeline `pipeline`'s executor: `make` builds the new instance of stage
  // `stage` (once per device).
  using Apply = std::function<void(std::size_t pipeline, std::size_t stage,
                                   const std::function<std::unique_ptr<Stage>()>& make, std::uint64_t generation)>;

  // Tries a candidate instance of stage `stage` on the frames pipeline `pipeline` sees now; throws
  // (StageError) when it cannot take them, and the change is refused.
  using Check = std::function<void(std::size_t pipeline, std::size_t stage, Stage& candidate)>;

  LiveParameters(std::vector<PipelineConfig> pipelines, const StageRegistry& registry, Apply apply,
                 Check check = {});

  Outcome get(const std::string& name) const;
  // `prefix`: "" (all), "<pipeline>", "<pipeline>.<stage>" or a full name.
  Outcome list(const std::string& prefix) const;
  // `value`: YAML text. `client`: who asks, for the log ("local", or the CURVE key).
  Outcome set(const std::string& name, const std::string& value, const std::string& client);

  std::uint64_t generation(std::size_t pipeline) const;
  // The pipelines with their current values (what `save` writes).
  std::vector<PipelineConfig> pipelines() const;

 private:
  struct Found {
    std::size_t pipeline = 0, stage = 0;
    const StageInfo* info = nullptr;
    const ParamDecl* decl = nullptr;
  };
  bool find(const std::string& name, Found& found, std::string& error) const;  // under mutex_
  Entry entry(std::size_t pipeline, std::size_t stage, const ParamDecl& decl) const;

  mutable std::mutex mutex_;
  std::vector<PipelineConfig> pipelines_;
  std::vector<std::vector<std::string>> labels_;  // [pipeline][stage]
  std::vector<std::vector<const StageInfo*>> infos_;
  std::vector<std::uint64_t> generations_;
  std::vector<std::vector<std::map<std::string, std::uint64_t>>> set_at_;  // [pipeline][stage][key]
  Apply apply_;
  Check check_;
};

// A value as YAML text ("2.0", "[61, 11]") -> the raw form the declarations validate; false with
// `error` for text that is neither a scalar nor a flat list.
bool raw_param_from_yaml(const std::string& text, RawParam& raw, std::string& error);

}  // namespace sonopipe
