// Steps 2-3 of peng2019 on the GPU (integer argmax, sub-sample fit: the same find_peak math as
// the CPU reference, stages/strain/ncc_track/ncc_track_params.h) and the per-frame normalisation.
#include "stages/common/cuda_check.h"
#include "stages/strain/ncc_track/ncc_kernels.cuh"

namespace sonopipe::cuda::ncc_kernels {
namespace {

using ncc::Geometry;
using ncc::kDims;

struct Spacing {
  float metres[kDims];
};

// One warp per point: lanes scan strided shifts, a shuffle reduction keeps the largest value and,
// on ties, the smallest index (first in map order, like the CPU); lane 0 refines and writes.
__global__ void peak_kernel(Geometry geo, const float* maps, const unsigned* point_flags, int rank,
                            Spacing spacing, float* displacement, float* displacement_samples,
                            float* correlation, std::uint8_t* flags) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= geo.point_count()) return;
  const int shifts = geo.shift_count();
  const float* map = maps + static_cast<std::size_t>(warp) * shifts;
  float best = -3.0e38f;
  int best_index = shifts;
#pragma unroll 4  // the map loads go out together (the kernel is latency-bound)
  for (int s = lane; s < shifts; s += 32) {
    const float v = map[s];
    if (v > best) {
      best = v;
      best_index = s;
    }
  }
  for (int delta = 16; delta > 0; delta >>= 1) {
    const float other = __shfl_down_sync(0xffffffffu, best, delta);
    const int other_index = __shfl_down_sync(0xffffffffu, best_index, delta);
    if (other > best || (other == best && other_index < best_index)) {
      best = other;
      best_index = other_index;
    }
  }
  if (lane != 0) return;
  const auto peak = ncc::refine_peak(map, geo, best_index, static_cast<std::uint8_t>(point_flags[warp]));
  for (int d = 0; d < rank; ++d) {
    displacement_samples[static_cast<std::size_t>(warp) * rank + d] = peak.displacement[d];
    displacement[static_cast<std::size_t>(warp) * rank + d] = peak.displacement[d] * spacing.metres[d];
  }
  correlation[warp] = peak.correlation;
  flags[warp] = peak.flags;
}

__global__ void sum_squares_kernel(const float* in, std::size_t count, double* sum) {
  __shared__ double partial[32];
  double local = 0.0;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    const double v = in[i];
    local += v * v;
  }
  for (int delta = 16; delta > 0; delta >>= 1) local += __shfl_down_sync(0xffffffffu, local, delta);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = local;
  __syncthreads();
  if (threadIdx.x < 32) {
    local = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0;
    for (int delta = 16; delta > 0; delta >>= 1) local += __shfl_down_sync(0xffffffffu, local, delta);
    if (threadIdx.x == 0) atomicAdd(sum, local);
  }
}

__global__ void scale_kernel(const float* in, float* out, std::size_t count, const double* sum) {
  const double mean_square = *sum / static_cast<double>(count);
  const float scale = mean_square > 0.0 ? static_cast<float>(1.0 / sqrt(mean_square)) : 1.f;
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count; i += stride)
    out[i] = in[i] * scale;
}

}  // namespace

void find_peaks(const Geometry& geometry, const float* maps, const unsigned* point_flags, int rank,
                const float spacing[kDims], float* displacement, float* displacement_samples,
                float* correlation, std::uint8_t* flags, cudaStream_t stream) {
  Spacing s{{spacing[0], spacing[1], spacing[2]}};
  const std::size_t threads = static_cast<std::size_t>(geometry.point_count()) * 32;
  peak_kernel<<<static_cast<int>((threads + 255) / 256), 256, 0, stream>>>(
      geometry, maps, point_flags, rank, s, displacement, displacement_samples, correlation, flags);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void normalise(const float* in, float* out, std::size_t count, double* sum, cudaStream_t stream) {
  SONOPIPE_CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(double), stream));
  std::size_t blocks = (count + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  if (blocks == 0) blocks = 1;
  sum_squares_kernel<<<static_cast<int>(blocks), 256, 0, stream>>>(in, count, sum);
  SONOPIPE_CUDA_CHECK_LAUNCH();
  scale_kernel<<<static_cast<int>(blocks), 256, 0, stream>>>(in, out, count, sum);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda::ncc_kernels
