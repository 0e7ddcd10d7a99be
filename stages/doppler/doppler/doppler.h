// Stage `doppler`: power and colour (axial velocity) Doppler of a clutter-filtered ensemble.
// Input complex64 [frame, lateral, axial] (stages/doppler/doppler_conventions.h). Outputs, float32
// [lateral, axial]:
//   "velocity"  m/s, + = away from the probe; Kasai's lag-one estimator (kasai1985) with f_c and the
//               PRF, R1 optionally summed over a lateral x axial box; NaN where no estimate
//   "power"     mean |x|^2 over the ensemble (the IQ unit squared)
//   "power_db"  10 log10(power)
// Every output's result header carries the attribute nyquist_velocity_m_per_s = c PRF / (4 f_c).
#pragma once

#include <complex>
#include <vector>

#include "sdk/registry.h"
#include "stages/doppler/doppler/doppler_params.h"

namespace sonopipe {

class DopplerStage : public Stage {
 public:
  static StageInfo info();
  using Params = DopplerParams;
  static void declare(ParamSpec<Params>& spec);
  static void check(const Params& params);  // odd box sizes; ParamError
  explicit DopplerStage(const Params& params) : params_(params) {}

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  const DopplerShape& shape() const { return shape_; }

  // The CPU reference (double): velocity, power and power_db of a whole ensemble; r1: scratch of
  // shape.pixels() values (the CPU plan's workspace).
  static void estimate(const std::complex<float>* ensemble, const DopplerShape& shape, float* velocity, float* power,
                       float* power_db, std::complex<double>* r1);

 private:
  void check_frame_period(const StageIo& io) const;  // throws StageError when the PRF changed

  DopplerParams params_;
  DopplerShape shape_;
};

}  // namespace sonopipe
