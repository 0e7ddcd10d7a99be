#include "cuda/motion_filter.cuh"

#include <cuda_fp16.h>

#include "cuda/cuda_check.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxLate = 64;  // late samples held in registers; more fall back to re-reading

__device__ inline float load(const float* p, std::int64_t i) { return __ldg(p + i); }
__device__ inline float load(const __half* p, std::int64_t i) { return __half2float(p[i]); }
__device__ inline void store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ inline void store(__half* p, std::int64_t i, float v) { p[i] = __float2half_rn(v); }

// grid: x = depth tiles, y = location. Threads of a warp walk neighbouring depths: coalesced.
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
motion_filter_kernel(const In* __restrict__ in, const float* __restrict__ weights, MotionFilterShape s,
                     Out* __restrict__ out) {
  const std::int64_t z = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (z >= s.depths) return;
  const std::int64_t base = blockIdx.y * s.tracks * s.depths + z;
  const std::int64_t L = s.late_tracks, first_late = s.tracks - L;
  float late[kMaxLate];
  const bool cached = L <= kMaxLate;
  if (cached) {
#pragma unroll
    for (int l = 0; l < kMaxLate; ++l)
      if (l < L) late[l] = load(in, base + (first_late + l) * s.depths);
  }
  for (std::int64_t t = 0; t < s.tracks; ++t) {
    float fitted = 0;
    if (cached) {
#pragma unroll
      for (int l = 0; l < kMaxLate; ++l)
        if (l < L) fitted += __ldg(weights + t * L + l) * late[l];
    } else {
      for (std::int64_t l = 0; l < L; ++l)
        fitted += __ldg(weights + t * L + l) * load(in, base + (first_late + l) * s.depths);
    }
    store(out, base + t * s.depths, load(in, base + t * s.depths) - fitted);
  }
}

template <typename In>
void launch(const In* in, const float* weights, const MotionFilterShape& s, void* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((s.depths + kThreads - 1) / kThreads), static_cast<unsigned>(s.locations));
  if (s.output_half)
    motion_filter_kernel<In, __half><<<grid, kThreads, 0, stream>>>(in, weights, s, static_cast<__half*>(out));
  else
    motion_filter_kernel<In, float><<<grid, kThreads, 0, stream>>>(in, weights, s, static_cast<float*>(out));
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void motion_filter(const void* in, const float* weights, const MotionFilterShape& shape, void* out,
                   cudaStream_t stream) {
  if (shape.locations == 0 || shape.tracks == 0 || shape.depths == 0) return;
  if (shape.input_half)
    launch(static_cast<const __half*>(in), weights, shape, out, stream);
  else
    launch(static_cast<const float*>(in), weights, shape, out, stream);
}

}  // namespace sonopipe::cuda
