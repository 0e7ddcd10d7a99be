// Kernels of the `convert` stage (stages/common/convert/convert.h): int16 -> float32 with a scale.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace sonopipe::cuda {

// out[i] = scale * in[i] for i < count. Complex64 output is the same operation on interleaved I, Q.
void convert_int16_to_float(const std::int16_t* in, float* out, std::size_t count, float scale,
                            cudaStream_t stream);

// out[i] = scale * in[i] (float input rescaled).
void scale_float(const float* in, float* out, std::size_t count, float scale, cudaStream_t stream);

}  // namespace sonopipe::cuda
