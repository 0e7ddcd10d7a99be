// Stages `loupas` and `kasai`: axial displacement between the pre-push reference line (ensemble
// 0) and every track at every location (rosenzweig2011 sec. III-B, eq. (2); ensemble of 2).
// Input complex64 [location, ensemble, sample] (usually upsampled); outputs
//   "displacement" float32|float16 [location, track, depth] in um, positive = away from the probe
//   "quality"      same shape, |R_slow| / sqrt(E_ref E_track) in [0, 1]
// track t = ensemble t + 1; depth o = input sample o * output_step (centre of the kernel window).
// Formulas, signs, window-edge policy (clip) and zero-energy policy (NaN, quality 0):
// stages/arfi/arfi_conventions.h. `kasai` is the 1-D autocorrelator: f_mean replaced by f_dem, so its
// estimate is scaled by f_mean / f_dem.
#pragma once

#include <complex>
#include <vector>

#include "sdk/registry.h"
#include "stages/arfi/loupas/loupas_params.h"

namespace sonopipe {

class LoupasStage : public Stage {
 public:
  static StageInfo info();        // "loupas"
  static StageInfo kasai_info();  // "kasai"
  LoupasStage(const ParamValues& params, Estimator estimator);
  explicit LoupasStage(const LoupasParams& params) : params_(params) {}

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  const LoupasShape& shape() const { return shape_; }

  // f_dem at every output depth for this frame (scalar, or the per-sample vector interpolated
  // linearly onto the input grid). Throws StageError on a vector of the wrong length.
  static void demodulation_per_depth(const FrameMeta& frame, const LoupasShape& shape,
                                     double* f_dem_hz);
  // The CPU reference for one (reference, track) pair, double throughout: writes shape.depths
  // displacements (um) and qualities.
  static void estimate_pair(const std::complex<float>* reference, const std::complex<float>* track,
                            const LoupasShape& shape, const double* f_dem_hz, double* displacement_um,
                            double* quality);

 private:
  LoupasParams params_;
  LoupasShape shape_;
  std::vector<double> f_dem_hz_;  // per output depth, refilled per frame (sized at configure)
};

}  // namespace sonopipe
