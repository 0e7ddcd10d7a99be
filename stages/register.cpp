// Every built-in stage, one line each. Adding a stage = stages/x.*, cuda/x.cu, a test, one line here.
#include "pipeline/registry.h"
#include "stages/convert.h"
#include "stages/perfusion_fit.h"

namespace sonopipe {

const StageRegistry& builtin_stages() {
  static const StageRegistry registry = [] {
    StageRegistry r;
    r.add(ConvertStage::info());
    r.add(PerfusionFitStage::info());
    return r;
  }();
  return registry;
}

}  // namespace sonopipe
