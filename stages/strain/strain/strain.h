// Stage `strain`: normal strains from the displacement field of ncc_track by the least-squares
// differentiator, with an optional median pre-filter. Conventions: stages/strain/strain/strain_params.h.
#pragma once

#include <vector>

#include "sdk/registry.h"

namespace sonopipe {

class StrainStage : public Stage {
 public:
  static StageInfo info();
  explicit StrainStage(const ParamValues& params);

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  // Grid of a configured stage, dimension order [axial, lateral, elevational] (1 when absent).
  struct Grid {
    int points[3] = {1, 1, 1};
    double spacing[3] = {1.0, 1.0, 1.0};
    int rank = 2;
  };
  // The CPU reference in double: displacement [grid..., rank] -> strain [grid..., rank].
  static void strain_reference(const Grid& grid, int half_window, const int median[3],
                               const float* displacement, double* strain);

 private:
  int half_window_;
  int median_[3] = {1, 1, 1};
  Grid grid_;
};

}  // namespace sonopipe
