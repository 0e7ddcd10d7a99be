#include "stages/arfi/motion_filter/motion_filter.cuh"

#include <cuda_fp16.h>

#include "stages/common/cuda_check.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxLate = 16;         // late samples held in registers; more fall back to re-reading
constexpr int kTracksPerThread = 8;  // a thread's tracks: their loads go out together

__device__ inline float load(const float* p, std::int64_t i) { return __ldg(p + i); }
__device__ inline float load(const __half* p, std::int64_t i) { return __half2float(p[i]); }
__device__ inline void store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ inline void store(__half* p, std::int64_t i, float v) { p[i] = __float2half_rn(v); }

// grid: x = depth tiles, y = location, z = chunks of kTracksPerThread tracks. Threads of a warp
// walk neighbouring depths (coalesced); each reads the L late samples of its column once and
// applies them to its chunk of tracks, whose loads are independent and issued back to back.
template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
motion_filter_kernel(const In* __restrict__ in, const float* __restrict__ weights, MotionFilterShape s,
                     Out* __restrict__ out) {
  const std::int64_t z = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (z >= s.depths) return;
  const std::int64_t base = blockIdx.y * s.tracks * s.depths + z;
  const int L = static_cast<int>(s.late_tracks);
  const std::int64_t first_late = s.tracks - L;
  const std::int64_t t0 = std::int64_t(blockIdx.z) * kTracksPerThread;
  float value[kTracksPerThread], fitted[kTracksPerThread];
#pragma unroll
  for (int k = 0; k < kTracksPerThread; ++k) {
    value[k] = t0 + k < s.tracks ? load(in, base + (t0 + k) * s.depths) : 0.0f;
    fitted[k] = 0;
  }
  if (L <= kMaxLate) {
    float late[kMaxLate];
#pragma unroll
    for (int l = 0; l < kMaxLate; ++l) late[l] = l < L ? load(in, base + (first_late + l) * s.depths) : 0.0f;
#pragma unroll
    for (int k = 0; k < kTracksPerThread; ++k) {
      const std::int64_t t = t0 + k < s.tracks ? t0 + k : s.tracks - 1;
#pragma unroll
      for (int l = 0; l < kMaxLate; ++l)
        if (l < L) fitted[k] += __ldg(weights + t * L + l) * late[l];
    }
  } else {
    for (int l = 0; l < L; ++l) {
      const float late = load(in, base + (first_late + l) * s.depths);
#pragma unroll
      for (int k = 0; k < kTracksPerThread; ++k) {
        const std::int64_t t = t0 + k < s.tracks ? t0 + k : s.tracks - 1;
        fitted[k] += __ldg(weights + t * L + l) * late;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kTracksPerThread; ++k)
    if (t0 + k < s.tracks) store(out, base + (t0 + k) * s.depths, value[k] - fitted[k]);
}

template <typename In>
void launch(const In* in, const float* weights, const MotionFilterShape& s, void* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((s.depths + kThreads - 1) / kThreads), static_cast<unsigned>(s.locations),
                  static_cast<unsigned>((s.tracks + kTracksPerThread - 1) / kTracksPerThread));
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
