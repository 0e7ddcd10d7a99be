// Stage `mean_bmode`: the B-mode of an ensemble's mean frame, beside the Doppler chain. It observes
// the beamformed ensemble on its way to the clutter filter (StagePlan::passes_input: the next stage
// reads the same ensemble) and writes one image per ensemble.
// Input complex64 [frame, lateral, axial] (stages/doppler/doppler_conventions.h). Output, float32
// [lateral, axial], unit dB:
//   "bmode"  20 log10 |(1/N) sum_n x[n]|     (average: coherent, the default: the mean frame)
//            10 log10 ((1/N) sum_n |x[n]|^2)  (average: incoherent)
//   absolute, in dB of the IQ unit (not normalised: frames of a recording compare); 0 is written as
//   kPowerFloorDb. The header attribute "mean_of_frames" holds N.
#pragma once

#include <complex>

#include "sdk/registry.h"
#include "stages/doppler/mean_bmode/mean_bmode_params.h"

namespace sonopipe {

class MeanBmodeStage : public Stage {
 public:
  static StageInfo info();
  using Params = MeanBmodeParams;
  static void declare(ParamSpec<Params>& spec);
  explicit MeanBmodeStage(const Params& params) : params_(params) {}

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  const MeanBmodeShape& shape() const { return shape_; }

  // The CPU reference (double sums): the B-mode (dB) of pixels [begin, end) of an ensemble.
  static void mean_bmode(const std::complex<float>* ensemble, const MeanBmodeShape& shape, float* bmode_db,
                         std::int64_t begin, std::int64_t end);

 private:
  MeanBmodeParams params_;
  MeanBmodeShape shape_;
};

}  // namespace sonopipe
