#include "stages/doppler/mean_bmode/mean_bmode.cuh"

#include "stages/common/cuda_check.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per pixel: consecutive threads read consecutive pixels of each frame (coalesced).
__global__ void __launch_bounds__(kThreads)
mean_bmode_kernel(const float2* __restrict__ x, MeanBmodeShape s, float* __restrict__ bmode_db) {
  const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  const std::int64_t pixels = s.pixels();
  if (p >= pixels) return;
  float re = 0, im = 0, norm = 0;
  for (std::int64_t n = 0; n < s.frames; ++n) {
    const float2 v = __ldg(x + n * pixels + p);
    re += v.x;
    im += v.y;
    norm += v.x * v.x + v.y * v.y;
  }
  bmode_db[p] = mean_bmode_db(re, im, norm, s.frames, s.coherent);
}

}  // namespace

void mean_bmode(const float2* ensemble, const MeanBmodeShape& shape, float* bmode_db, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((shape.pixels() + kThreads - 1) / kThreads);
  mean_bmode_kernel<<<blocks, kThreads, 0, stream>>>(ensemble, shape, bmode_db);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
