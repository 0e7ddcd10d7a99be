// Kernels of the `beamform` stage (stages/beamform/beamform.h): the natural spline of every channel
// line (one thread per line, cubic interpolation only), then one thread per output pixel summing
// every (transmit, element) pair with the per-pixel math shared with the CPU reference
// (stages/beamform/das.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stages/beamform/das.h"

namespace sonopipe::cuda {

struct BeamformLaunch {
  const float* input;                  // [transmit, element, sample] x channels floats
  int channels;                        // 1 RF, 2 IQ
  std::int64_t transmits;
  beamform::DasSetup<float> setup;     // its pointers are device memory
  float* spline_m;                     // cubic: [line, sample] x channels; c: [line, sample]
  float* spline_c;
  enum class Grid { linear, sector, lines } grid;
  std::int64_t lateral, depth;
  float lateral_min, lateral_step;     // x in m (linear) or angle in rad (sector); unused for lines
  float depth_min_m, depth_step_m;     // depth (linear, lines) or radius (sector)
  void* output;                        // [lateral, depth] x channels floats
};

void beamform(const BeamformLaunch& launch, cudaStream_t stream);

}  // namespace sonopipe::cuda
