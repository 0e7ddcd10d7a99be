#include "cuda/loupas.cuh"

#include <cuda_fp16.h>

#include "cuda/cuda_check.h"
#include "stages/arfi_conventions.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 128;

template <typename Out>
__device__ inline Out to_output(float v);
template <>
__device__ inline float to_output<float>(float v) { return v; }
template <>
__device__ inline __half to_output<__half>(float v) { return __float2half_rn(v); }

// grid: x = depth tiles, y = track, z = location. Neighbouring threads read neighbouring samples,
// so the window loads of a warp overlap and come from L1.
template <typename Out>
__global__ void __launch_bounds__(kThreads)
loupas_kernel(const float2* __restrict__ in, const float* __restrict__ f_dem_hz, LoupasShape s,
              Out* __restrict__ displacement, Out* __restrict__ quality) {
  const std::int64_t o = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (o >= s.depths) return;
  const std::int64_t track = blockIdx.y, location = blockIdx.z;
  const float2* ref = in + (location * s.ensemble + arfi::kReferenceEnsembleIndex) * s.samples;
  const float2* trk = in + (location * s.ensemble + track + 1) * s.samples;
  const arfi::Window w = arfi::kernel_window(o * s.output_step, s.kernel_samples, s.samples);
  arfi::EstimateInputs<float> sum{0, 0, 0, 0, 0, 0};
  float2 r = __ldg(ref + w.begin), t = __ldg(trk + w.begin);
  for (std::int64_t m = w.begin; m < w.end; ++m) {
    // R_slow += t conj(r); energies
    sum.slow_re += t.x * r.x + t.y * r.y;
    sum.slow_im += t.y * r.x - t.x * r.y;
    sum.energy_ref += r.x * r.x + r.y * r.y;
    sum.energy_track += t.x * t.x + t.y * t.y;
    if (m + 1 < w.end) {  // R_fast += r[m+1] conj(r[m]) + t[m+1] conj(t[m])
      const float2 r1 = __ldg(ref + m + 1), t1 = __ldg(trk + m + 1);
      sum.fast_re += r1.x * r.x + r1.y * r.y + t1.x * t.x + t1.y * t.y;
      sum.fast_im += r1.y * r.x - r1.x * r.y + t1.y * t.x - t1.x * t.y;
      r = r1;
      t = t1;
    }
  }
  float d_um, q;
  arfi::finish_estimate<float>(sum, f_dem_hz[o], static_cast<float>(s.sample_period_s),
                               static_cast<float>(s.speed_of_sound_m_per_s), s.use_mean_frequency, d_um, q);
  const std::int64_t index = (location * (s.ensemble - 1) + track) * s.depths + o;
  displacement[index] = to_output<Out>(d_um);
  quality[index] = to_output<Out>(q);
}

}  // namespace

void loupas(const float2* in, const float* f_dem_hz, const LoupasShape& shape, void* displacement,
            void* quality, cudaStream_t stream) {
  if (shape.locations == 0 || shape.ensemble < 2 || shape.depths == 0) return;
  const dim3 grid(static_cast<unsigned>((shape.depths + kThreads - 1) / kThreads),
                  static_cast<unsigned>(shape.ensemble - 1), static_cast<unsigned>(shape.locations));
  if (shape.output_half)
    loupas_kernel<__half><<<grid, kThreads, 0, stream>>>(in, f_dem_hz, shape, static_cast<__half*>(displacement),
                                                         static_cast<__half*>(quality));
  else
    loupas_kernel<float><<<grid, kThreads, 0, stream>>>(in, f_dem_hz, shape, static_cast<float*>(displacement),
                                                        static_cast<float*>(quality));
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
