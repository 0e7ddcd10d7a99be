// Parameters of the `motion_filter` stage, shared by the CPU reference, the CUDA launch and tests.
#pragma once

#include <cstdint>

namespace sonopipe {

struct MotionFilterParams {
  int order = 1;                    // polynomial order in time (1 linear, 2 quadratic)
  std::int64_t late_tracks = 10;    // the last late_tracks tracks enter the fit (tissue recovered)
  bool use_reference = true;        // the reference time enters the fit with displacement 0
  bool output_half = false;         // float16 output instead of float32
};

// Shape of one launch: input/output [location, track, depth].
struct MotionFilterShape {
  std::int64_t locations = 0, tracks = 0, depths = 0;
  std::int64_t late_tracks = 0;     // L (clamped to tracks)
  bool input_half = false;
  bool output_half = false;
};

}  // namespace sonopipe
