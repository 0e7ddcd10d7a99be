#include "cuda/beamform/beamform.cuh"

#include <type_traits>

#include "cuda/common/cuda_check.h"

namespace sonopipe::cuda {

namespace {

template <int C>
__global__ void spline_lines(const float* input, std::int64_t lines, std::int64_t samples, float* m, float* c) {
  const std::int64_t line = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (line >= lines) return;
  beamform::spline_line<float, C>(input + line * samples * C, samples,
                                  reinterpret_cast<spline::Vec<float, C>*>(m) + line * samples, c + line * samples);
}

// Position (x, z) of output pixel (lateral i, depth j); lines: the transmit's source lateral position.
__device__ inline void pixel_position(const BeamformLaunch& launch, std::int64_t i, std::int64_t j, float& x, float& z) {
  const float depth = launch.depth_min_m + launch.depth_step_m * static_cast<float>(j);
  x = 0.0f, z = depth;
  switch (launch.grid) {
    case BeamformLaunch::Grid::linear: x = launch.lateral_min + launch.lateral_step * static_cast<float>(i); break;
    case BeamformLaunch::Grid::sector: {
      const float angle = launch.lateral_min + launch.lateral_step * static_cast<float>(i);
      x = depth * sinf(angle);
      z = depth * cosf(angle);
      break;
    }
    case BeamformLaunch::Grid::lines: x = launch.setup.transmits[i].source_x_m; break;
  }
}

// The pixel's sum with the math shared with the CPU reference (stages/beamform/das.h).
template <int C>
__device__ inline void das_pixel_to_output(const BeamformLaunch& launch, std::int64_t i, std::int64_t j) {
  float x, z;
  pixel_position(launch, i, j, x, z);
  int t_begin = 0, t_end = static_cast<int>(launch.transmits);
  if (launch.grid == BeamformLaunch::Grid::lines) t_begin = static_cast<int>(i), t_end = t_begin + 1;
  const std::int64_t elements = launch.setup.elements, samples = launch.setup.samples;
  const auto* m = reinterpret_cast<const spline::Vec<float, C>*>(launch.spline_m);
  const spline::Vec<float, C> value =
      beamform::das_pixel<float, C>(launch.setup, x, z, t_begin, t_end, [&](int t, int e) {
        const std::int64_t line = t * elements + e;
        return beamform::Line<float, C>{launch.input + line * samples * C, m ? m + line * samples : nullptr};
      });
  float* out = static_cast<float*>(launch.output) + (i * launch.depth + j) * C;
  for (int c = 0; c < C; ++c) out[c] = value.v[c];
}

// Depth is the fastest output axis: neighbouring threads take neighbouring depths of one lateral
// position, so their delays (and the channel samples they read) are close together.
template <int C>
__global__ void delay_and_sum(BeamformLaunch launch) {
  const std::int64_t pixel = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (pixel >= launch.lateral * launch.depth) return;
  const std::int64_t i = pixel / launch.depth;
  das_pixel_to_output<C>(launch, i, pixel - i * launch.depth);
}

// The tiled kernel. A block takes kTileLateral x kTileDepth pixels. Per element it stages in shared
// memory, for every transmit, the kTileSamples samples around the block centre's sample position:
// transmit (plane, diverging) and receive times both change by at most |p - q| / c between pixels p
// and q, so every pixel's position lies within 2 |p - centre| f_s / c of the centre's. Each staged
// entry holds the sample and the slope to the next one, so a term is one shared-memory read and a
// fused multiply-add per channel; entries of samples outside [0, samples - 2] are zero, which adds 0
// for positions outside the recording as the reference does (it differs only at exactly the last
// sample, a set of measure zero). The next element's samples are loaded into registers while the
// current one is summed. A block whose window would not fit (a coarse grid) sums with das_pixel.
// Summation order and phasors are the reference's (das.h): transmit phasor per term, receive phasor
// and apodisation per element.
constexpr int kTileThreads = kTileLateral * kTileDepth;
constexpr int kTilePass = 12;      // transmits per pass over the elements (registers per thread)
// Blocks per SM the register budget must allow (latency hiding): RF fits 4 without spilling, IQ 3.
template <int C>
constexpr int kTileMinBlocks = C == 1 ? 4 : 3;
constexpr int kTileLoads = (kTilePass * kTileSamples + kTileThreads - 1) / kTileThreads;
static_assert(kTileThreads % kTileSamples == 0 && kTilePass * kTileSamples % kTileThreads == 0,
              "staging maps whole rows to the block's threads");

template <int C>
struct TileTypes;
template <>
struct TileTypes<1> {
  using Sample = float;
  using Entry = float2;  // value, slope
};
template <>
struct TileTypes<2> {
  using Sample = float2;
  using Entry = float4;  // re, im, slope re, slope im
};

// floor(position) and its fraction without a float-to-int conversion: adding 1.5 * 2^23 leaves the
// rounded integer in the low mantissa bits (valid for |position| < 2^22, guaranteed by the window).
__device__ inline int split_position(float position, float& fraction) {
  constexpr float kMagic = 12582912.0f;
  const float rounded = (position - 0.5f) + kMagic;
  fraction = position - (rounded - kMagic);
  return __float_as_int(rounded) - __float_as_int(kMagic);
}

// Phasor exp(j 2 pi f t), the phase reduced to [-pi, pi] in cycles first (float keeps it exact enough).
__device__ inline void carrier(float frequency_hz, float time_s, float& re, float& im) {
  float cycles = frequency_hz * time_s;
  cycles -= rintf(cycles);
  __sincosf(6.283185307179586f * cycles, &im, &re);
}

template <int C>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks<C>) delay_and_sum_tiled(BeamformLaunch launch) {
  using Sample = typename TileTypes<C>::Sample;
  using Entry = typename TileTypes<C>::Entry;
  __shared__ Entry tile[2][kTilePass][kTileSamples];
  __shared__ float block_extent[4][kTileThreads / 32];
  __shared__ float centre[2];
  __shared__ float centre_transmit[kTilePass];

  const beamform::DasSetup<float>& s = launch.setup;
  const int tid = threadIdx.y * kTileDepth + threadIdx.x;
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kTileDepth) + threadIdx.x;
  const std::int64_t i = blockIdx.y * static_cast<std::int64_t>(kTileLateral) + threadIdx.y;
  const bool active = j < launch.depth && i < launch.lateral;
  float x, z;
  pixel_position(launch, i < launch.lateral ? i : launch.lateral - 1, j < launch.depth ? j : launch.depth - 1, x, z);

  // The block's extent (x range, deepest z) and its largest distance from the centre pixel.
  if (threadIdx.x == kTileDepth / 2 && threadIdx.y == kTileLateral / 2) centre[0] = x, centre[1] = z;
  float x_min = x, x_max = x, z_max = z;
  for (int offset = 16; offset > 0; offset >>= 1) {
    x_min = fminf(x_min, __shfl_xor_sync(~0u, x_min, offset));
    x_max = fmaxf(x_max, __shfl_xor_sync(~0u, x_max, offset));
    z_max = fmaxf(z_max, __shfl_xor_sync(~0u, z_max, offset));
  }
  __syncthreads();
  const float cx = centre[0], cz = centre[1];
  float reach = sqrtf((x - cx) * (x - cx) + (z - cz) * (z - cz));
  for (int offset = 16; offset > 0; offset >>= 1) reach = fmaxf(reach, __shfl_xor_sync(~0u, reach, offset));
  if ((tid & 31) == 0) {
    block_extent[0][tid >> 5] = x_min, block_extent[1][tid >> 5] = x_max;
    block_extent[2][tid >> 5] = z_max, block_extent[3][tid >> 5] = reach;
  }
  __syncthreads();
  for (int w = 0; w < kTileThreads / 32; ++w) {
    x_min = fminf(x_min, block_extent[0][w]), x_max = fmaxf(x_max, block_extent[1][w]);
    z_max = fmaxf(z_max, block_extent[2][w]), reach = fmaxf(reach, block_extent[3][w]);
  }
  // Staged samples: centre position - half ... + half + 1.
  const float half_span = tile_half_span(reach, s.inverse_c, s.sampling_frequency_hz);
  if (!(2.0f * half_span + 2.0f <= float(kTileSamples))) {
    if (active) das_pixel_to_output<C>(launch, i, j);
    return;  // uniform over the block: no barrier follows for anyone
  }
  const int half = static_cast<int>(half_span);

  // Receive aperture of the block: elements with |x_e - x| <= z / (2 F#) for some pixel.
  int element_begin = 0, element_end = s.elements;
  if (launch.elements_ascending && s.f_number > 0.0f) {
    const float reach_x = z_max / (2.0f * s.f_number) * 1.0001f;  // a hair wider: apodisation decides
    int a = 0, b = s.elements;
    while (a < b) {
      const int m = (a + b) >> 1;
      if (s.element_x_m[m] < x_min - reach_x) a = m + 1; else b = m;
    }
    element_begin = a;
    b = s.elements;
    while (a < b) {
      const int m = (a + b) >> 1;
      if (s.element_x_m[m] <= x_max + reach_x) a = m + 1; else b = m;
    }
    element_end = a;
  }

  const int samples = static_cast<int>(s.samples);  // run() checks that line and sample indices fit an int
  const float inverse_half_width = z > 0.0f ? 2.0f * s.f_number / z : 0.0f;  // 1 / h (conventions)
  const float origin_samples = s.sample_origin_s * s.sampling_frequency_hz;
  float sum_re = 0.0f, sum_im = 0.0f;
  // Staging layout: thread tid loads entry q = tid % kTileSamples of rows tid / kTileSamples + r *
  // kTileRowsPerLoad; only the 2 half + 2 entries a pixel can read are loaded.
  constexpr int kTileRowsPerLoad = kTileThreads / kTileSamples;
  const int span = 2 * half + 2;
  const int stage_q = tid % kTileSamples, stage_row = tid / kTileSamples;
  for (int first = 0; first < static_cast<int>(launch.transmits); first += kTilePass) {
    const int count = min(kTilePass, static_cast<int>(launch.transmits) - first);
    float local[kTilePass], phasor_re[kTilePass], phasor_im[kTilePass];
    __syncthreads();  // the previous pass is done with centre_transmit and the tiles
    // Rows of transmits this pass lacks hold zeros and their positions point inside the row, so
    // every pass sums kTilePass terms per element without a branch (the missing ones add 0).
    for (int slot = tid; slot < 2 * kTilePass * kTileSamples; slot += kTileThreads) {
      const int row = slot / kTileSamples % kTilePass;
      if (row >= count) (&tile[0][0][0])[slot] = Entry{};
    }
#pragma unroll
    for (int k = 0; k < kTilePass; ++k) {
      local[k] = float(half), phasor_re[k] = 0.0f, phasor_im[k] = 0.0f;
      if (k < count) {
        const beamform::Transmit<float>& transmit = s.transmits[first + k];
        const float time_s = beamform::transmit_time_s(transmit, x, z, s.inverse_c) + transmit.delay_s;
        const float centre_start = floorf(
            (beamform::transmit_time_s(transmit, cx, cz, s.inverse_c) + transmit.delay_s) * s.sampling_frequency_hz -
            origin_samples);
        if (tid == 0) centre_transmit[k] = centre_start;
        local[k] = time_s * s.sampling_frequency_hz - origin_samples - centre_start + float(half);
        if constexpr (C == 2) carrier(s.demodulation_frequency_hz, time_s, phasor_re[k], phasor_im[k]);
      }
    }
    __syncthreads();
    // Per load slot: the first sample index relative to the centre's receive start (-1: not staged).
    int stage_offset[kTileLoads];
#pragma unroll
    for (int r = 0; r < kTileLoads; ++r) {
      const int row = stage_row + r * kTileRowsPerLoad;
      stage_offset[r] = row < count && stage_q < span ? static_cast<int>(centre_transmit[row]) - half + stage_q : -1;
    }

    auto centre_receive = [&](int e) {
      const float dx = cx - s.element_x_m[e], dz = cz - s.element_z_m[e];
      return floorf((sqrtf(dx * dx + dz * dz) * s.inverse_c + s.element_delay_s[e]) * s.sampling_frequency_hz);
    };
    Sample first_sample[kTileLoads], next_sample[kTileLoads];
    float next_receive_start = 0.0f;  // centre_receive of the prefetched element
    auto prefetch = [&](int e) {
      const float receive = centre_receive(e);
      next_receive_start = receive;
#pragma unroll
      for (int r = 0; r < kTileLoads; ++r) {
        first_sample[r] = Sample{}, next_sample[r] = Sample{};
        const int sample = stage_offset[r] + static_cast<int>(receive);
        if (stage_offset[r] >= 0 && sample >= 0 && sample < samples - 1) {
          const int line = (first + stage_row + r * kTileRowsPerLoad) * s.elements + e;
          const Sample* values = reinterpret_cast<const Sample*>(launch.input) + static_cast<std::int64_t>(line) * samples;
          first_sample[r] = __ldg(values + sample), next_sample[r] = __ldg(values + sample + 1);
        }
      }
    };
    if (element_begin < element_end) prefetch(element_begin);
    int buffer = 0;
    for (int e = element_begin; e < element_end; ++e, buffer ^= 1) {
#pragma unroll
      for (int r = 0; r < kTileLoads; ++r) {
        if (stage_offset[r] >= 0) {
          Entry& entry = tile[buffer][stage_row + r * kTileRowsPerLoad][stage_q];
          if constexpr (C == 2)
            entry = make_float4(first_sample[r].x, first_sample[r].y, next_sample[r].x - first_sample[r].x,
                                next_sample[r].y - first_sample[r].y);
          else
            entry = make_float2(first_sample[r], next_sample[r] - first_sample[r]);
        }
      }
      __syncthreads();  // tile[buffer] complete; tile[buffer ^ 1] was last read before the previous barrier
      const float receive_start = next_receive_start;
      if (e + 1 < element_end) prefetch(e + 1);
      const float dx = x - s.element_x_m[e], dz = z - s.element_z_m[e];
      // apodisation() with the pixel's 1 / h computed once (no division per element).
      const float weight = !active                  ? 0.0f
                           : s.f_number <= 0.0f     ? 1.0f
                           : inverse_half_width > 0.0f ? beamform::window_at(s.window, s.tukey_alpha, fabsf(dx) * inverse_half_width)
                                                       : 0.0f;
      if (weight == 0.0f) continue;
      const float receive_s = sqrtf(dx * dx + dz * dz) * s.inverse_c + s.element_delay_s[e];
      const float receive_local = receive_s * s.sampling_frequency_hz - receive_start;
      float element_re = 0.0f, element_im = 0.0f;
#pragma unroll
      for (int k = 0; k < kTilePass; ++k) {
        float t;
        const int q = split_position(local[k] + receive_local, t);
        const Entry entry = tile[buffer][k][q];
        if constexpr (C == 2) {
          const float re = fmaf(t, entry.z, entry.x), im = fmaf(t, entry.w, entry.y);
          element_re = fmaf(re, phasor_re[k], fmaf(-im, phasor_im[k], element_re));
          element_im = fmaf(re, phasor_im[k], fmaf(im, phasor_re[k], element_im));
        } else {
          element_re += fmaf(t, entry.y, entry.x);
        }
      }
      if constexpr (C == 2) {
        float re, im;
        carrier(s.demodulation_frequency_hz, receive_s, re, im);
        re *= weight, im *= weight;
        sum_re = fmaf(element_re, re, fmaf(-element_im, im, sum_re));
        sum_im = fmaf(element_re, im, fmaf(element_im, re, sum_im));
      } else {
        sum_re = fmaf(element_re, weight, sum_re);
      }
    }
  }
  if (!active) return;
  float* out = static_cast<float*>(launch.output) + (i * launch.depth + j) * C;
  out[0] = sum_re;
  if constexpr (C == 2) out[1] = sum_im;
}

template <int C>
void run(const BeamformLaunch& launch, cudaStream_t stream) {
  constexpr std::int64_t kIntLimit = 0x7fffffff;
  const bool tiled = !launch.setup.cubic && launch.grid != BeamformLaunch::Grid::lines && !launch.focused_transmits &&
                     launch.setup.samples < kIntLimit && launch.transmits * launch.setup.elements < kIntLimit;
  if (tiled) {
    const dim3 blocks(static_cast<unsigned>((launch.depth + kTileDepth - 1) / kTileDepth),
                      static_cast<unsigned>((launch.lateral + kTileLateral - 1) / kTileLateral));
    delay_and_sum_tiled<C><<<blocks, dim3(kTileDepth, kTileLateral), 0, stream>>>(launch);
    SONOPIPE_CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr int kThreads = 256;
  if (launch.setup.cubic) {
    const std::int64_t lines = launch.transmits * launch.setup.elements;
    spline_lines<C><<<static_cast<unsigned>((lines + 127) / 128), 128, 0, stream>>>(
        launch.input, lines, launch.setup.samples, launch.spline_m, launch.spline_c);
    SONOPIPE_CUDA_CHECK_LAUNCH();
  }
  const std::int64_t pixels = launch.lateral * launch.depth;
  delay_and_sum<C><<<static_cast<unsigned>((pixels + kThreads - 1) / kThreads), kThreads, 0, stream>>>(launch);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void beamform(const BeamformLaunch& launch, cudaStream_t stream) {
  if (launch.channels == 1) run<1>(launch, stream);
  else run<2>(launch, stream);
}

}  // namespace sonopipe::cuda
