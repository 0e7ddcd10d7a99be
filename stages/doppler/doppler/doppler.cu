#include "stages/doppler/doppler/doppler.cuh"

#include "stages/common/cuda_check.h"
#include "stages/doppler/doppler_conventions.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 256;

// Workspace: R1 per pixel (float2), then the frame's largest power (float bits as an unsigned int:
// powers are >= 0, so their bit patterns order as the values do and atomicMax works on them).
struct Layout {
  std::size_t r1 = 0, max_power = 0, total = 0;
};
Layout layout(const DopplerShape& s) {
  Layout l;
  l.r1 = 0;
  l.max_power = (static_cast<std::size_t>(s.pixels()) * sizeof(float2) + 255) / 256 * 256;
  l.total = l.max_power + 256;
  return l;
}

// One thread per pixel: consecutive threads read consecutive pixels of each frame (coalesced).
__global__ void __launch_bounds__(kThreads)
moments_kernel(const float2* __restrict__ x, DopplerShape s, float2* __restrict__ r1, float* __restrict__ power,
               float* __restrict__ power_db, unsigned int* __restrict__ max_power_bits) {
  const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  const std::int64_t pixels = s.pixels();
  float energy = 0, re = 0, im = 0;
  if (p < pixels) {
    float2 previous = __ldg(x + p);
    energy = previous.x * previous.x + previous.y * previous.y;
    for (std::int64_t n = 1; n < s.frames; ++n) {
      const float2 v = __ldg(x + n * pixels + p);
      energy += v.x * v.x + v.y * v.y;
      re += v.x * previous.x + v.y * previous.y;  // R1 += x[n] conj(x[n-1])
      im += v.y * previous.x - v.x * previous.y;
      previous = v;
    }
    const float mean_power = energy / float(s.frames);
    r1[p] = make_float2(re, im);
    power[p] = mean_power;
    power_db[p] = doppler::power_db(mean_power);
    energy = mean_power;
  }
  // Block maximum, then one atomic per block.
  __shared__ float block_max[kThreads / 32];
  float m = energy;
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, offset));
  if ((threadIdx.x & 31) == 0) block_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, block_max[w]);
    atomicMax(max_power_bits, __float_as_uint(m));
  }
}

__global__ void __launch_bounds__(kThreads)
velocity_kernel(const float2* __restrict__ r1, const float* __restrict__ power, DopplerShape s,
                const unsigned int* __restrict__ max_power_bits, float threshold_ratio, float* __restrict__ velocity) {
  const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (p >= s.pixels()) return;
  const std::int64_t i = p / s.axial, j = p % s.axial;
  float re = 0, im = 0;  // the box, clipped at the image edges
  const std::int64_t a0 = max(std::int64_t(0), i - s.half_lateral), a1 = min(s.lateral - 1, i + s.half_lateral);
  const std::int64_t b0 = max(std::int64_t(0), j - s.half_axial), b1 = min(s.axial - 1, j + s.half_axial);
  for (std::int64_t a = a0; a <= a1; ++a)
    for (std::int64_t b = b0; b <= b1; ++b) {
      const float2 v = r1[a * s.axial + b];
      re += v.x;
      im += v.y;
    }
  const float threshold = __uint_as_float(*max_power_bits) * threshold_ratio;
  velocity[p] = doppler::kasai_velocity(re, im, float(s.velocity_per_radian), power[p] >= threshold);
}

}  // namespace

std::size_t doppler_workspace_bytes(const DopplerShape& shape) { return layout(shape).total; }

void doppler(const float2* ensemble, const DopplerShape& shape, float* velocity, float* power, float* power_db,
             void* workspace, cudaStream_t stream) {
  const Layout l = layout(shape);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* r1 = reinterpret_cast<float2*>(base + l.r1);
  auto* max_power_bits = reinterpret_cast<unsigned int*>(base + l.max_power);
  SONOPIPE_CUDA_CHECK(cudaMemsetAsync(max_power_bits, 0, sizeof(unsigned int), stream));
  const unsigned blocks = static_cast<unsigned>((shape.pixels() + kThreads - 1) / kThreads);
  moments_kernel<<<blocks, kThreads, 0, stream>>>(ensemble, shape, r1, power, power_db, max_power_bits);
  SONOPIPE_CUDA_CHECK_LAUNCH();
  // Threshold as a power ratio; -300 dB is "off" (ratio 0: every power >= 0 passes), as on the CPU.
  const float ratio = shape.power_threshold_db <= doppler::kPowerFloorDb ? 0.0f : float(pow(10.0, shape.power_threshold_db / 10));
  velocity_kernel<<<blocks, kThreads, 0, stream>>>(r1, power, shape, max_power_bits, ratio, velocity);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
