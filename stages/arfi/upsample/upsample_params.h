// Parameters of the `upsample` stage, shared by the CPU reference, the CUDA launch and the tests.
#pragma once

#include <cstdint>

#include "stages/common/spline_math.h"

namespace sonopipe {

struct UpsampleParams {
  bool exact = false;                                 // mode: exact (whole line) | subsets
  spline::Boundary boundary = spline::Boundary::natural;
  std::int64_t subset_knots = 16;                     // n: coefficients kept per subset
  std::int64_t overlap = 12;                          // k: knots of overlap on each side
  std::int64_t factor = 5;                            // output rate = input rate * factor / denominator
  std::int64_t factor_denominator = 1;
};

}  // namespace sonopipe
