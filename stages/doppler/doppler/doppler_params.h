// Parameters of the `doppler` stage, shared by the CPU reference, the CUDA kernels and the tests.
// Conventions (signs, units, PRF): stages/doppler/doppler_conventions.h.
#pragma once

#include <cstdint>

#include "stages/common/host_device.h"

namespace sonopipe {

struct DopplerParams {
  std::int64_t average_lateral = 1;   // box over which R1 is summed (pixels, odd; 1 = none)
  std::int64_t average_axial = 1;
  double power_threshold_db = -300;   // velocity NaN below (frame max power + threshold); -300 = off
};

// What one launch needs besides pointers (resolved at configure).
struct DopplerShape {
  std::int64_t frames = 0, lateral = 0, axial = 0;  // ensemble [frame, lateral, axial]
  SONOPIPE_HD std::int64_t pixels() const { return lateral * axial; }
  std::int64_t half_lateral = 0, half_axial = 0;   // box half-widths
  double velocity_per_radian = 0;                   // -c PRF / (4 pi f_c), m/s per radian of arg(R1)
  double nyquist_velocity_m_per_s = 0;
  double frame_period_s = 0;                        // 1 / PRF
  double power_threshold_db = -300;
};

}  // namespace sonopipe
