// Parameters of the `mean_bmode` stage, shared by the CPU reference, the CUDA kernel and the tests.
#pragma once

#include <cstdint>

#include "stages/common/host_device.h"
#include "stages/doppler/doppler_conventions.h"

namespace sonopipe {

struct MeanBmodeParams {
  // coherent: |mean of the IQ frames| (the mean frame: what does not move, speckle kept);
  // incoherent: sqrt(mean of |IQ|^2) (moving scatterers and the lumen's blood stay bright).
  enum class Average { coherent, incoherent };
  Average average = Average::coherent;
};

// What one launch needs besides pointers (resolved at configure).
struct MeanBmodeShape {
  std::int64_t frames = 0, lateral = 0, axial = 0;  // ensemble [frame, lateral, axial]
  SONOPIPE_HD std::int64_t pixels() const { return lateral * axial; }
  bool coherent = true;
};

// One pixel's B-mode in dB from its sums over the N frames (Real: float on the GPU, double in the
// CPU reference): coherent 20 log10 |sum / N| = 10 log10(|sum|^2 / N^2), incoherent
// 10 log10(sum |x|^2 / N); 0 is written as doppler::kPowerFloorDb, as the power Doppler.
template <typename Real>
SONOPIPE_HD inline Real mean_bmode_db(Real sum_re, Real sum_im, Real sum_norm, std::int64_t frames, bool coherent) {
  const Real n = Real(frames);
  return doppler::power_db(coherent ? (sum_re * sum_re + sum_im * sum_im) / (n * n) : sum_norm / n);
}

}  // namespace sonopipe
