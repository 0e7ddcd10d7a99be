#include "stages/arfi/loupas/loupas.cuh"

#include <cuda_fp16.h>

#include "stages/common/cuda_check.h"
#include "stages/arfi/arfi_conventions.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 128;

template <typename Out>
__device__ inline Out to_output(float v);
template <>
__device__ inline float to_output<float>(float v) { return v; }
template <>
__device__ inline __half to_output<__half>(float v) { return __float2half_rn(v); }

// The window sums' terms (rosenzweig2011 eq. (2) in the convention of stages/arfi/arfi_conventions.h).
__device__ inline void add_sample(arfi::EstimateInputs<float>& a, float2 r, float2 t) {
  a.slow_re += t.x * r.x + t.y * r.y;  // R_slow += t conj(r)
  a.slow_im += t.y * r.x - t.x * r.y;
  a.energy_ref += r.x * r.x + r.y * r.y;
  a.energy_track += t.x * t.x + t.y * t.y;
}

__device__ inline void add_pair(arfi::EstimateInputs<float>& a, float2 r, float2 t, float2 r1, float2 t1) {
  a.fast_re += r1.x * r.x + r1.y * r.y + t1.x * t.x + t1.y * t.y;  // R_fast += z[m+1] conj(z[m])
  a.fast_im += r1.y * r.x - r1.x * r.y + t1.y * t.x - t1.x * t.y;
}

__device__ inline void add(arfi::EstimateInputs<float>& a, const arfi::EstimateInputs<float>& b) {
  a.slow_re += b.slow_re;
  a.slow_im += b.slow_im;
  a.fast_re += b.fast_re;
  a.fast_im += b.fast_im;
  a.energy_ref += b.energy_ref;
  a.energy_track += b.energy_track;
}

// Direct sums, one thread per output depth (kernels too short for the blocked form, and long ones a
// tile cannot hold).
// grid: x = depth tiles, y = track, z = location. Neighbouring threads read neighbouring samples,
// so the window loads of a warp overlap and come from L1.
template <typename Out>
__global__ void __launch_bounds__(kThreads)
loupas_direct_kernel(const float2* __restrict__ in, const float* __restrict__ f_dem_hz, LoupasShape s,
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
    add_sample(sum, r, t);
    if (m + 1 < w.end) {  // fast-time pairs need both samples inside the window
      const float2 r1 = __ldg(ref + m + 1), t1 = __ldg(trk + m + 1);
      add_pair(sum, r, t, r1, t1);
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

// Blocked: a thread takes R consecutive output depths. Their windows [b + r s, b + r s + M)
// (s = output step) share the middle [b + (R-1) s, b + M); each window adds its own part of the
// R-1 chunks of s samples before the middle (suffix sums) and after it (prefix sums). Every term
// is a product computed once per thread instead of once per window, and there is no subtraction,
// so nothing cancels (unlike sliding or prefix-difference sums in float). The block's samples are
// staged in shared memory; a thread reads them with stride R s (odd: conflict-free float2 reads).
// Samples outside the line are staged as zeros: their terms are exact zeros, so a window clipped
// at a line end (arfi::kernel_window) sums the same as the full window over the padded line, and
// no thread needs a separate edge path. Results go out through shared memory so the global writes
// are coalesced.
constexpr int kBlockedThreads = 128;
constexpr int kMaxStagedSamples = 3072;  // per line: 2 x 24 kB of float2, the default shared limit

// Samples [b, b + M) and pairs [b, b + M - 1) of R windows spaced by `step`, staged indices.
template <int R, int kStep>
__device__ void blocked_window_sums(const float2* ref, const float2* trk, int b, int runtime_step, int kernel,
                                    arfi::EstimateInputs<float> (&sums)[R]) {
  const int step = kStep ? kStep : runtime_step;
  const arfi::EstimateInputs<float> zero{0, 0, 0, 0, 0, 0};
  arfi::EstimateInputs<float> left[R - 1], right[R - 1], middle = zero;
  int m = b;
  float2 r = ref[m], t = trk[m];
#pragma unroll
  for (int i = 0; i < R - 1; ++i) {  // chunk i: samples and pairs [b + i s, b + (i + 1) s)
    left[i] = zero;
    for (int k = 0; k < step; ++k, ++m) {
      const float2 r1 = ref[m + 1], t1 = trk[m + 1];
      add_sample(left[i], r, t);
      add_pair(left[i], r, t, r1, t1);
      r = r1;
      t = t1;
    }
  }
  for (; m < b + kernel - 1; ++m) {  // the shared middle
    const float2 r1 = ref[m + 1], t1 = trk[m + 1];
    add_sample(middle, r, t);
    add_pair(middle, r, t, r1, t1);
    r = r1;
    t = t1;
  }
  add_sample(middle, r, t);  // sample b + M - 1 (its pair belongs to the next window only)
#pragma unroll
  for (int i = 0; i < R - 1; ++i) {  // chunk i: pairs [b + M - 1 + i s, ...), samples one later
    right[i] = zero;
    for (int k = 0; k < step; ++k, ++m) {
      const float2 r1 = ref[m + 1], t1 = trk[m + 1];
      add_pair(right[i], r, t, r1, t1);
      add_sample(right[i], r1, t1);
      r = r1;
      t = t1;
    }
  }
#pragma unroll
  for (int i = R - 3; i >= 0; --i) add(left[i], left[i + 1]);  // suffix sums: window r's left part
#pragma unroll
  for (int i = 1; i < R - 1; ++i) add(right[i], right[i - 1]);  // prefix sums: window r's right part
#pragma unroll
  for (int w = 0; w < R; ++w) {
    sums[w] = middle;
    if (w < R - 1) add(sums[w], left[w]);
    if (w > 0) add(sums[w], right[w - 1]);
  }
}

template <int R, int kStep, typename Out>
__global__ void __launch_bounds__(kBlockedThreads)
loupas_blocked_kernel(const float2* __restrict__ in, const float* __restrict__ f_dem_hz, LoupasShape s,
                      Out* __restrict__ displacement, Out* __restrict__ quality) {
  extern __shared__ float2 staged[];  // reference line, then track line: `count` samples each
  const int tid = threadIdx.x;
  const std::int64_t track = blockIdx.y, location = blockIdx.z;
  const int outputs = static_cast<int>(blockDim.x) * R;
  const std::int64_t block_o0 = std::int64_t(blockIdx.x) * outputs;
  const int step = static_cast<int>(s.output_step), kernel = static_cast<int>(s.kernel_samples);
  const int half = (kernel - 1) / 2;
  const std::int64_t stage_begin = block_o0 * step - half;  // may lie before the line: zeros
  const int count = (outputs - 1) * step + kernel;
  float2* ref_s = staged;
  float2* trk_s = staged + count;
  const float2* ref = in + (location * s.ensemble + arfi::kReferenceEnsembleIndex) * s.samples;
  const float2* trk = in + (location * s.ensemble + track + 1) * s.samples;
  const float2 zero = make_float2(0.0f, 0.0f);
#pragma unroll 4
  for (int i = tid; i < count; i += blockDim.x) {
    const std::int64_t m = stage_begin + i;
    const bool inside = m >= 0 && m < s.samples;
    ref_s[i] = inside ? __ldg(ref + m) : zero;
    trk_s[i] = inside ? __ldg(trk + m) : zero;
  }
  __syncthreads();

  const std::int64_t o0 = block_o0 + std::int64_t(tid) * R;
  arfi::EstimateInputs<float> sums[R];
  blocked_window_sums<R, kStep>(ref_s, trk_s, tid * R * step, step, kernel, sums);
  __syncthreads();  // the staged samples are read; their space now holds the results
  float* d_s = reinterpret_cast<float*>(ref_s);
  float* q_s = reinterpret_cast<float*>(trk_s);
#pragma unroll
  for (int w = 0; w < R; ++w) {
    if (o0 + w >= s.depths) continue;
    arfi::finish_estimate<float>(sums[w], f_dem_hz[o0 + w], static_cast<float>(s.sample_period_s),
                                 static_cast<float>(s.speed_of_sound_m_per_s), s.use_mean_frequency,
                                 d_s[tid * R + w], q_s[tid * R + w]);
  }
  __syncthreads();
  const std::int64_t row = (location * (s.ensemble - 1) + track) * s.depths;
  const int written = static_cast<int>(s.depths - block_o0 < outputs ? s.depths - block_o0 : outputs);
  for (int i = tid; i < written; i += blockDim.x) {
    displacement[row + block_o0 + i] = to_output<Out>(d_s[i]);
    quality[row + block_o0 + i] = to_output<Out>(q_s[i]);
  }
}

// Outputs per thread for the blocked kernel (0: not usable): the windows of R outputs must share
// a middle, (R - 1) s <= M - 1, and the block's samples must fit the staging arrays.
template <int R>
bool blocked_fits(const LoupasShape& s) {
  return (R - 1) * s.output_step <= s.kernel_samples - 1 &&
         (kBlockedThreads * R - 1) * s.output_step + s.kernel_samples <= kMaxStagedSamples;
}

// Tiled: a block takes `tile` consecutive output depths of one (location, track) pair, computes
// the six per-sample terms of the window sums once, turns them into an exclusive prefix sum in
// shared memory, and each window is then P[end] - P[begin]: O(1) per output whatever M is.
// The terms are float products (as in the direct sums); the prefix sums are double, so a window's
// difference P[end] - P[begin] loses nothing to cancellation even where the speckle is dark next
// to bright samples (float prefixes lost up to ~1e-4 relative there). Zero-energy windows are
// detected exactly through an integer prefix count of non-zero samples.
constexpr int kTileThreads = 256;
constexpr int kMaxTileSamples = 768;  // 6 double prefixes + counts: ~40 kB of shared memory
constexpr int kTerms = 6;
constexpr std::int64_t kTiledFromKernelSamples = 64;

template <typename Out>
__global__ void __launch_bounds__(kTileThreads)
loupas_tiled_kernel(const float2* __restrict__ in, const float* __restrict__ f_dem_hz, LoupasShape s,
                    int tile, Out* __restrict__ displacement, Out* __restrict__ quality) {
  __shared__ double prefix[kTerms][kMaxTileSamples + 1];
  __shared__ int nonzero[kMaxTileSamples + 1];  // low 16 bits: reference, high: track
  __shared__ double warp_sum[kTerms][kTileThreads / 32];
  __shared__ int warp_nonzero[kTileThreads / 32];
  const int tid = threadIdx.x;
  const std::int64_t track = blockIdx.y, location = blockIdx.z;
  const std::int64_t o0 = std::int64_t(blockIdx.x) * tile;
  const std::int64_t o_last = (o0 + tile < s.depths ? o0 + tile : s.depths) - 1;
  const std::int64_t half = (s.kernel_samples - 1) / 2;
  std::int64_t s_begin = o0 * s.output_step - half;
  if (s_begin < 0) s_begin = 0;
  std::int64_t s_end = o_last * s.output_step - half + s.kernel_samples;
  if (s_end > s.samples) s_end = s.samples;
  const int count = static_cast<int>(s_end - s_begin);
  const float2* ref = in + (location * s.ensemble + arfi::kReferenceEnsembleIndex) * s.samples;
  const float2* trk = in + (location * s.ensemble + track + 1) * s.samples;

  // 1. Per-sample terms (pair m = (m, m+1) for R_fast).
  for (int idx = tid; idx < count; idx += kTileThreads) {
    const std::int64_t m = s_begin + idx;
    const float2 r = __ldg(ref + m), t = __ldg(trk + m);
    float fast_re = 0, fast_im = 0;
    if (m + 1 < s.samples) {
      const float2 r1 = __ldg(ref + m + 1), t1 = __ldg(trk + m + 1);
      fast_re = r1.x * r.x + r1.y * r.y + t1.x * t.x + t1.y * t.y;
      fast_im = r1.y * r.x - r1.x * r.y + t1.y * t.x - t1.x * t.y;
    }
    prefix[0][idx] = t.x * r.x + t.y * r.y;  // R_slow: t conj(r)
    prefix[1][idx] = t.y * r.x - t.x * r.y;
    prefix[2][idx] = fast_re;
    prefix[3][idx] = fast_im;
    prefix[4][idx] = r.x * r.x + r.y * r.y;
    prefix[5][idx] = t.x * t.x + t.y * t.y;
    nonzero[idx] = (r.x != 0.0f || r.y != 0.0f ? 1 : 0) | (t.x != 0.0f || t.y != 0.0f ? 1 << 16 : 0);
  }
  __syncthreads();

  // 2. Exclusive prefix sums: each thread a contiguous chunk, then a scan of the chunk totals.
  const int chunk = (count + kTileThreads - 1) / kTileThreads;
  const int begin = tid * chunk < count ? tid * chunk : count;
  const int end = begin + chunk < count ? begin + chunk : count;
  double total[kTerms];
  int total_nonzero = 0;
#pragma unroll
  for (int k = 0; k < kTerms; ++k) {
    total[k] = 0;
    for (int e = begin; e < end; ++e) total[k] += prefix[k][e];
  }
  for (int e = begin; e < end; ++e) total_nonzero += nonzero[e];
  const int lane = tid & 31, warp = tid >> 5;
  double inclusive[kTerms];
  int inclusive_nonzero = total_nonzero;
#pragma unroll
  for (int k = 0; k < kTerms; ++k) inclusive[k] = total[k];
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
#pragma unroll
    for (int k = 0; k < kTerms; ++k) {
      const double up = __shfl_up_sync(0xffffffffu, inclusive[k], offset);
      if (lane >= offset) inclusive[k] += up;
    }
    const int up = __shfl_up_sync(0xffffffffu, inclusive_nonzero, offset);
    if (lane >= offset) inclusive_nonzero += up;
  }
  if (lane == 31) {
#pragma unroll
    for (int k = 0; k < kTerms; ++k) warp_sum[k][warp] = inclusive[k];
    warp_nonzero[warp] = inclusive_nonzero;
  }
  __syncthreads();
  double running[kTerms];
  int running_nonzero = inclusive_nonzero - total_nonzero;
#pragma unroll
  for (int k = 0; k < kTerms; ++k) {
    running[k] = inclusive[k] - total[k];
    for (int w = 0; w < warp; ++w) running[k] += warp_sum[k][w];
  }
  for (int w = 0; w < warp; ++w) running_nonzero += warp_nonzero[w];
  for (int e = begin; e < end; ++e) {
#pragma unroll
    for (int k = 0; k < kTerms; ++k) {
      const double term = prefix[k][e];
      prefix[k][e] = running[k];
      running[k] += term;
    }
    const int term = nonzero[e];
    nonzero[e] = running_nonzero;
    running_nonzero += term;
  }
  if (end == count && begin < end) {  // the thread holding the last sample writes P[count]
#pragma unroll
    for (int k = 0; k < kTerms; ++k) prefix[k][count] = running[k];
    nonzero[count] = running_nonzero;
  }
  __syncthreads();

  // 3. One output per thread: window sums as prefix differences.
  const std::int64_t o = o0 + tid;
  if (tid >= tile || o >= s.depths) return;
  const arfi::Window w = arfi::kernel_window(o * s.output_step, s.kernel_samples, s.samples);
  const int b = static_cast<int>(w.begin - s_begin), e = static_cast<int>(w.end - s_begin);
  const int counts = nonzero[e] - nonzero[b];
  float d_um, q;
  if ((counts & 0xffff) == 0 || (counts >> 16) == 0) {
    d_um = NAN;
    q = 0;
  } else {
    // R_fast pairs need both samples inside: pairs [b, e - 1)
    auto window = [&](int k, int last) { return static_cast<float>(prefix[k][last] - prefix[k][b]); };
    arfi::EstimateInputs<float> sum{window(0, e), window(1, e), window(2, e - 1), window(3, e - 1),
                                    window(4, e), window(5, e)};
    arfi::finish_estimate<float>(sum, f_dem_hz[o], static_cast<float>(s.sample_period_s),
                                 static_cast<float>(s.speed_of_sound_m_per_s), s.use_mean_frequency, d_um, q);
  }
  const std::int64_t index = (location * (s.ensemble - 1) + track) * s.depths + o;
  displacement[index] = to_output<Out>(d_um);
  quality[index] = to_output<Out>(q);
}

template <typename Out>
void launch(const float2* in, const float* f_dem_hz, const LoupasShape& s, Out* displacement, Out* quality,
            cudaStream_t stream) {
  // Short kernels: blocked sums with the largest R (7, 5, 3) whose windows share a middle, else
  // direct sums. Measured on an H100, 2026-11-22, paper's set, M = 25: blocked R = 7 / 5 / 3
  // 0.179 / 0.171 / 0.199 ms (5 and 7 within noise), direct 0.43 ms, tiled 0.47 ms.
  // Long kernels: the tiled prefix sums, O(1) per output instead of O(M), as long as a tile's
  // samples, (tile - 1) step + M, fit the shared prefix arrays. The crossover
  // (kTiledFromKernelSamples) is an estimate, not a measurement.
  std::int64_t tile = kTileThreads;
  if ((tile - 1) * s.output_step + s.kernel_samples > kMaxTileSamples)
    tile = (kMaxTileSamples - s.kernel_samples) / s.output_step + 1;
  const int r = s.kernel_samples >= kTiledFromKernelSamples ? 0
                : blocked_fits<7>(s)                      ? 7
                : blocked_fits<5>(s)                      ? 5
                : blocked_fits<3>(s)                      ? 3
                                                          : 0;
  if (r > 0) {
    const std::int64_t outputs = kBlockedThreads * r;
    const dim3 grid(static_cast<unsigned>((s.depths + outputs - 1) / outputs), static_cast<unsigned>(s.ensemble - 1),
                    static_cast<unsigned>(s.locations));
    const std::size_t shared_bytes = 2 * static_cast<std::size_t>((outputs - 1) * s.output_step + s.kernel_samples) * sizeof(float2);
    auto run = [&](auto kernel) {
      kernel<<<grid, kBlockedThreads, shared_bytes, stream>>>(in, f_dem_hz, s, displacement, quality);
    };
    const bool unit = s.output_step == 1;
    if (r == 7) unit ? run(loupas_blocked_kernel<7, 1, Out>) : run(loupas_blocked_kernel<7, 0, Out>);
    else if (r == 5) unit ? run(loupas_blocked_kernel<5, 1, Out>) : run(loupas_blocked_kernel<5, 0, Out>);
    else unit ? run(loupas_blocked_kernel<3, 1, Out>) : run(loupas_blocked_kernel<3, 0, Out>);
  } else if (s.kernel_samples >= kTiledFromKernelSamples && tile >= 32) {
    const dim3 grid(static_cast<unsigned>((s.depths + tile - 1) / tile), static_cast<unsigned>(s.ensemble - 1),
                    static_cast<unsigned>(s.locations));
    loupas_tiled_kernel<Out><<<grid, kTileThreads, 0, stream>>>(in, f_dem_hz, s, static_cast<int>(tile),
                                                                displacement, quality);
  } else {
    const dim3 grid(static_cast<unsigned>((s.depths + kThreads - 1) / kThreads), static_cast<unsigned>(s.ensemble - 1),
                    static_cast<unsigned>(s.locations));
    loupas_direct_kernel<Out><<<grid, kThreads, 0, stream>>>(in, f_dem_hz, s, displacement, quality);
  }
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void loupas(const float2* in, const float* f_dem_hz, const LoupasShape& shape, void* displacement,
            void* quality, cudaStream_t stream) {
  if (shape.locations == 0 || shape.ensemble < 2 || shape.depths == 0) return;
  if (shape.output_half)
    launch(in, f_dem_hz, shape, static_cast<__half*>(displacement), static_cast<__half*>(quality), stream);
  else
    launch(in, f_dem_hz, shape, static_cast<float*>(displacement), static_cast<float*>(quality), stream);
}

}  // namespace sonopipe::cuda
