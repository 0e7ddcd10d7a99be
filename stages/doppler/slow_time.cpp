#include "stages/doppler/slow_time.h"

#include <cmath>

#include "stages/doppler/doppler_conventions.h"

namespace sonopipe::doppler {

EnsembleShape ensemble_shape(const std::string& stage, const TensorSpec& input, std::int64_t min_frames) {
  auto fail = [&](const std::string& why) { throw StageError(stage + ": " + why); };
  if (input.dtype != DType::complex64)
    fail("expected complex64 beamformed IQ, got " + std::string(dtype_name(input.dtype)));
  if (input.axes.size() != 3 || input.axes[0].name != kFrameAxis)
    fail("expected an ensemble [frame, lateral, axial], got " + input.shape_string());
  EnsembleShape s{input.axes[0].size, input.axes[1].size, input.axes[2].size};
  if (s.frames < min_frames)
    fail("needs at least " + std::to_string(min_frames) + " frames per ensemble, got " + std::to_string(s.frames));
  if (s.lateral < 1 || s.axial < 1) fail("empty image " + input.shape_string());
  return s;
}

double frame_period_s(const std::string& stage, const FrameMeta& frame, const TensorSpec& input) {
  const std::int64_t frames = input.axes.empty() ? 0 : input.axes[0].size;
  if (const std::vector<double>* times = frame.vector(kEnsembleTimeVector)) {
    if (static_cast<std::int64_t>(times->size()) != frames)
      throw StageError(stage + ": vector '" + kEnsembleTimeVector + "' has " + std::to_string(times->size()) +
                       " values, expected one per frame (" + std::to_string(frames) + ")");
    if (frames < 2) return 0;
    const double period = ((*times)[frames - 1] - (*times)[0]) / static_cast<double>(frames - 1);
    if (!(period > 0) || !std::isfinite(period))
      throw StageError(stage + ": vector '" + kEnsembleTimeVector + "' is not increasing");
    for (std::int64_t n = 1; n < frames; ++n) {
      const double step = (*times)[n] - (*times)[n - 1];
      if (!(std::abs(step - period) <= kUniformSpacingTolerance * period))
        throw StageError(stage + ": vector '" + kEnsembleTimeVector + "' is not uniformly spaced (step " +
                         std::to_string(n) + " is " + std::to_string(step) + " s, mean " + std::to_string(period) +
                         " s): the lag-one estimator needs a constant PRF");
    }
    return period;
  }
  if (!input.axes.empty() && input.axes[0].unit == "s" && input.axes[0].spacing > 0) return input.axes[0].spacing;
  return 0;
}

std::vector<double> frame_times_s(const FrameMeta& frame, const TensorSpec& input) {
  const std::int64_t frames = input.axes.empty() ? 0 : input.axes[0].size;
  const std::vector<double>* times = frame.vector(kEnsembleTimeVector);
  if (times && static_cast<std::int64_t>(times->size()) == frames) return *times;
  const double step = !input.axes.empty() && input.axes[0].unit == "s" && input.axes[0].spacing > 0
                          ? input.axes[0].spacing : 1.0;
  std::vector<double> out(static_cast<std::size_t>(frames));
  for (std::int64_t n = 0; n < frames; ++n) out[n] = static_cast<double>(n) * step;
  return out;
}

}  // namespace sonopipe::doppler
