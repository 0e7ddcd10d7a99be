// Kernel of the `motion_filter` stage (stages/arfi/motion_filter/motion_filter.h): out[t] = in[t] - sum_l W[t][l]
// in[late_l] for every (location, depth) column; one thread per column.
#pragma once

#include <cuda_runtime_api.h>

#include "stages/arfi/motion_filter/motion_filter_params.h"

namespace sonopipe::cuda {

// in/out: [location, track, depth] float or __half per shape; weights: tracks x late_tracks (device).
void motion_filter(const void* in, const float* weights, const MotionFilterShape& shape, void* out,
                   cudaStream_t stream);

}  // namespace sonopipe::cuda
