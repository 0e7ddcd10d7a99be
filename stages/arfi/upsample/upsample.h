// Stage `upsample`: cubic-spline interpolation of every line along its last axis (rosenzweig2011
// sec. III-A), I and Q independently (the operator is linear). Factor p/q (integer or rational);
// input knot i lands exactly on output i p / q when that is whole; the output covers the input
// span [0, N-1]: N_out = (N - 1) p / q + 1 samples.
// Modes: `exact` solves the spline of the whole line (CPU reference in double; on CUDA one thread
// per line, float); `subsets` is the paper's GPU scheme (see stages/common/spline_math.h). Boundary
// condition at the line ends: natural | not-a-knot. Math and window rule: stages/common/spline_math.h.
// Input float32 or complex64 [..., sample]; output same dtype and axes, last axis resampled (its
// spacing divided by p/q; spacing 0 becomes the sample period 1/(fs p/q) in "s").
#pragma once

#include <vector>

#include "sdk/registry.h"
#include "stages/arfi/upsample/upsample_params.h"

namespace sonopipe {

class UpsampleStage : public Stage {
 public:
  static StageInfo info();
  explicit UpsampleStage(const ParamValues& params);
  explicit UpsampleStage(const UpsampleParams& params) : params_(params) {}

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  const UpsampleParams& params() const { return params_; }

  // CPU reference for one real line in double: M for every knot (exact or subsets per params).
  static void second_derivatives(const double* y, std::int64_t length, const UpsampleParams& params,
                                 double* m_out, std::vector<double>& scratch);
  struct SplineScratch {
    std::vector<double> m, solver;  // grown as needed, reused
  };
  // CPU reference for one real line: out has spline::output_length(length, p, q) samples.
  static void upsample_line(const double* y, std::int64_t length, const UpsampleParams& params,
                            double* out, SplineScratch& scratch);

 private:
  UpsampleParams params_;
  std::int64_t lines_ = 0, length_ = 0, out_length_ = 0;
  int channels_ = 1;  // 1 real, 2 complex
};

}  // namespace sonopipe
