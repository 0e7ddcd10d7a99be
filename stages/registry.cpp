// Every built-in stage, one line each. Adding a stage = a folder stages/<chain>/<stage>/, its tests in
// tests/stages/<chain>/<stage>/, and one line here.
#include "stages/registry.h"

#include "stages/common/convert/convert.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit.h"
#include "stages/arfi/loupas/loupas.h"
#include "stages/arfi/motion_filter/motion_filter.h"
#include "stages/strain/ncc_track/ncc_track.h"
#include "stages/strain/strain/strain.h"
#include "stages/arfi/upsample/upsample.h"
#include "stages/beamform/beamform/beamform.h"
#include "stages/doppler/clutter_filter/clutter_filter.h"
#include "stages/doppler/doppler/doppler.h"
#include "stages/doppler/mean_bmode/mean_bmode.h"

namespace sonopipe {

const StageRegistry& builtin_stages() {
  static const StageRegistry registry = [] {
    StageRegistry r;
    r.add(ConvertStage::info());
    r.add(PerfusionFitStage::info());
    r.add(UpsampleStage::info());
    r.add(LoupasStage::info());
    r.add(LoupasStage::kasai_info());
    r.add(MotionFilterStage::info());
    r.add(NccTrackStage::info());
    r.add(StrainStage::info());
    r.add(BeamformStage::info());
    r.add(ClutterFilterStage::info());
    r.add(DopplerStage::info());
    r.add(MeanBmodeStage::info());
    return r;
  }();
  return registry;
}

}  // namespace sonopipe
