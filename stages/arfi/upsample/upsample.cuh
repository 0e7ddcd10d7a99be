// Kernel of the `upsample` stage (stages/arfi/upsample/upsample.h): cubic spline of every line, exact or the
// paper's overlapping subsets, solve and evaluation fused in one kernel (the coefficients never
// leave shared memory).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "stages/arfi/upsample/upsample_params.h"

namespace sonopipe::cuda {

// Once per configuration (may synchronise): raises the kernel's shared-memory limit when the
// tiling needs more than 48 kB; throws CudaError when even the smallest tiling does not fit.
void prepare_upsample(const UpsampleParams& params, std::int64_t length, int channels);

// in: lines x length samples of `channels` floats (1 real, 2 I/Q interleaved); out: lines x
// spline::output_length(length, p, q) samples. Device pointers; all work on `stream`.
void upsample(const float* in, float* out, std::int64_t lines, std::int64_t length, int channels,
              const UpsampleParams& params, cudaStream_t stream);

}  // namespace sonopipe::cuda
