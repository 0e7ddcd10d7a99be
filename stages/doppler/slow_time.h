// Slow time of a Doppler ensemble (stages/doppler/doppler_conventions.h): the frame period from the
// frame's "ensemble_time_s" vector or the frame axis spacing, and the ensemble's axes checked once
// for both Doppler stages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sdk/stage.h"

namespace sonopipe::doppler {

// The ensemble's sizes; throws StageError("<stage>: ...") unless `input` is complex64
// [frame, <lateral>, <axial>] with at least `min_frames` frames.
struct EnsembleShape {
  std::int64_t frames = 0, lateral = 0, axial = 0;
};
EnsembleShape ensemble_shape(const std::string& stage, const TensorSpec& input, std::int64_t min_frames);

// Frame period T = 1 / PRF in seconds, or 0 when the frame gives none (vector absent and the frame
// axis has no spacing in s). Throws StageError when the vector has the wrong length or is not
// uniformly spaced (to kUniformSpacingTolerance) or not increasing.
double frame_period_s(const std::string& stage, const FrameMeta& frame, const TensorSpec& input);

// Acquisition time of each frame (s, from the vector, else n * T, else n): the polynomial filter's
// abscissae.
std::vector<double> frame_times_s(const FrameMeta& frame, const TensorSpec& input);

}  // namespace sonopipe::doppler
