// Stage `motion_filter`: removes physiological / transducer motion from ARFI displacements. Per
// location and depth it fits a polynomial in time (order 1 or 2) through the reference time (where
// the displacement is 0 by definition) and the last `late_tracks` tracks (after the tissue has
// recovered), and subtracts it from every track (the usual ARFI drift correction; rosenzweig2011
// fig. 1 "motion filter").
// Input/output float32|float16 [location, track, depth] in um. Times from the frame's vector
// "ensemble_time_s" (reference = entry 0, track t = entry t+1), else equally spaced.
// The fit is linear in the data: out[t] = in[t] - sum_l W[t][l] in[late_l], with W built per frame
// in double from the times (least squares on normalised time); W is what the CUDA kernel applies.
#pragma once

#include <vector>

#include "sdk/registry.h"
#include "stages/arfi/motion_filter/motion_filter_params.h"

namespace sonopipe {

class MotionFilterStage : public Stage {
 public:
  static StageInfo info();
  explicit MotionFilterStage(const ParamValues& params);
  explicit MotionFilterStage(const MotionFilterParams& params) : params_(params) {}

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  const MotionFilterShape& shape() const { return shape_; }

  // W (tracks x late_tracks, row-major) for this frame's times; throws StageError when the fit is
  // under-determined or singular.
  static void fit_weights(const FrameMeta& frame, const MotionFilterShape& shape, int order,
                          bool use_reference, double* weights);

 private:
  MotionFilterParams params_;
  MotionFilterShape shape_;
  std::vector<double> weights_;  // refilled per frame (sized at configure)
};

}  // namespace sonopipe
