// Test plugin: registers a stage under a built-in stage's name.
#include <memory>

#include "sdk/plugin.h"

namespace {
class Nothing final : public sonopipe::Stage {
 public:
  sonopipe::StagePlan configure(const sonopipe::FrameMeta&, const sonopipe::TensorSpec& in, sonopipe::Backend) override {
    return {.outputs = {{"out", in}}};
  }
  bool run_cpu(const sonopipe::StageIo&) override { return true; }
};
}  // namespace

SONOPIPE_STAGE_PLUGIN(registry) {
  registry.add({.name = "convert", .doc = "clashes with the built-in convert", .params = {},
                .create = [](const sonopipe::ParamValues&) { return std::make_unique<Nothing>(); }});
}
