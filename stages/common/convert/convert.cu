#include "stages/common/convert/convert.cuh"
#include "stages/common/cuda_check.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 256;

int grid_for(std::size_t work) {
  std::size_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 8192 ? (blocks ? blocks : 1) : 8192);
}

// Four int16 (8 bytes) in, four floats (16 bytes) out per step: wide accesses keep the
// conversion at memory speed.
__global__ void convert_int16_vec4_kernel(const short4* in, float4* out, std::size_t count4,
                                          float scale) {
  const std::size_t stride = std::size_t(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count4; i += stride) {
    short4 v = in[i];
    out[i] = make_float4(scale * v.x, scale * v.y, scale * v.z, scale * v.w);
  }
}

// Scalar path for [begin, count): the tail after the vector path, or unaligned buffers.
__global__ void convert_int16_kernel(const std::int16_t* in, float* out, std::size_t begin,
                                     std::size_t count, float scale) {
  const std::size_t stride = std::size_t(blockDim.x) * gridDim.x;
  for (std::size_t i = begin + blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += stride)
    out[i] = scale * in[i];
}

__global__ void scale_float_kernel(const float* in, float* out, std::size_t count, float scale) {
  const std::size_t stride = std::size_t(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += stride)
    out[i] = scale * in[i];
}

}  // namespace

void convert_int16_to_float(const std::int16_t* in, float* out, std::size_t count, float scale,
                            cudaStream_t stream) {
  // The vector path needs 8-byte aligned input and 16-byte aligned output (cudaMalloc gives 256).
  const bool aligned = reinterpret_cast<std::uintptr_t>(in) % 8 == 0 &&
                       reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  std::size_t count4 = aligned ? count / 4 : 0;
  if (count4 > 0) {
    convert_int16_vec4_kernel<<<grid_for(count4), kThreads, 0, stream>>>(
        reinterpret_cast<const short4*>(in), reinterpret_cast<float4*>(out), count4, scale);
    SONOPIPE_CUDA_CHECK_LAUNCH();
  }
  std::size_t begin = count4 * 4;
  if (begin < count) {
    convert_int16_kernel<<<grid_for(count - begin), kThreads, 0, stream>>>(in, out, begin, count,
                                                                            scale);
    SONOPIPE_CUDA_CHECK_LAUNCH();
  }
}

void scale_float(const float* in, float* out, std::size_t count, float scale, cudaStream_t stream) {
  if (count == 0) return;
  scale_float_kernel<<<grid_for(count), kThreads, 0, stream>>>(in, out, count, scale);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
