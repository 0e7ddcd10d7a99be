#include "stages/beamform/beamform/beamform.cuh"

#include <atomic>
#include <type_traits>
#include <utility>

#include "stages/common/cuda_check.h"

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

// Writes pixel (frame f, lateral i, depth j) at its place in the output layout, brought to baseband
// first when the launch asks (beamform_conventions.h: times exp(-j 2 pi f_dem 2 d / c)).
template <int C>
__device__ inline void write_pixel(const BeamformLaunch& launch, std::int64_t f, std::int64_t i, std::int64_t j,
                                   float re, float im) {
  float* out = static_cast<float*>(launch.output) +
               (f * launch.output_frame_stride + i * launch.output_lateral_stride + j) * C;
  if constexpr (C == 2) {
    if (launch.baseband_cycles_per_m != 0.0f) {
      float cycles = launch.baseband_cycles_per_m * (launch.depth_min_m + launch.depth_step_m * static_cast<float>(j));
      cycles -= rintf(cycles);
      float s, c;
      sincospif(-2.0f * cycles, &s, &c);
      const float rotated_re = re * c - im * s;
      im = re * s + im * c;
      re = rotated_re;
    }
    out[1] = im;
  }
  out[0] = re;
}

// The pixel's sum for frame f with the math shared with the CPU reference (stages/beamform/beamform/das.h).
template <int C>
__device__ inline void das_pixel_to_output(const BeamformLaunch& launch, std::int64_t f, std::int64_t i, std::int64_t j) {
  float x, z;
  pixel_position(launch, i, j, x, z);
  int t_begin = 0, t_end = static_cast<int>(launch.transmits);
  if (launch.grid == BeamformLaunch::Grid::lines) t_begin = static_cast<int>(i), t_end = t_begin + 1;
  const std::int64_t elements = launch.setup.elements, samples = launch.setup.samples;
  const std::int64_t frame_lines = f * launch.transmits * elements;
  const auto* m = reinterpret_cast<const spline::Vec<float, C>*>(launch.spline_m);
  const spline::Vec<float, C> value =
      beamform::das_pixel<float, C>(launch.setup, x, z, t_begin, t_end, [&](int t, int e) {
        const std::int64_t line = frame_lines + t * elements + e;
        return beamform::Line<float, C>{launch.input + line * samples * C, m ? m + line * samples : nullptr};
      });
  write_pixel<C>(launch, f, i, j, value.v[0], C == 2 ? value.v[C - 1] : 0.0f);
}

// Depth is the fastest output axis: neighbouring threads take neighbouring depths of one lateral
// position, so their delays (and the channel samples they read) are close together.
template <int C>
__global__ void delay_and_sum(BeamformLaunch launch) {
  const std::int64_t index = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t image = launch.lateral * launch.depth;
  if (index >= launch.frames * image) return;
  const std::int64_t f = index / image, pixel = index - f * image;
  const std::int64_t i = pixel / launch.depth;
  das_pixel_to_output<C>(launch, f, i, pixel - i * launch.depth);
}

// The tiled kernel. A block takes kTileLateral x kTileDepth pixels. Per element it stages in shared
// memory, for every transmit, the kTileSamples samples around the block centre's sample position:
// transmit (plane, diverging) and receive times both change by at most |p - q| / c between pixels p
// and q, so every pixel's position lies within 2 |p - centre| f_s / c of the centre's. Each staged
// entry k holds the line's value halfway between samples k and k + 1 and the slope to k + 1, so a
// term is one shared-memory read and one fused multiply-add per channel (entry_at_midpoint() finds the
// entry and the offset from its midpoint); samples outside [0, samples - 1] are staged as zeros,
// so positions near and outside the ends of the recording interpolate as the reference does
// (beamform_conventions.h). The next element's samples are loaded into
// registers while the current one is summed. A block whose window would not fit (a coarse grid)
// sums with das_pixel. Summation order and phasors are the reference's (das.h): transmit phasor per
// term, receive phasor and apodisation per element. What every pixel of the block needs of an
// element (position, the centre's receive start) is computed once per block into shared memory.
constexpr int kTileThreads = kTileLateral * kTileDepth;
constexpr int kTilePass = 12;      // transmits per pass over the elements (registers per thread)
// Blocks per SM the register budget must allow (latency hiding). RF: 4 (64 registers, a few
// spills; 3 measured no faster). IQ: 2 (up to 128 registers, no spills) measured 2 % faster on the
// H100 than 3 (80 registers with spills in the element loop).
template <int C>
constexpr int kTileMinBlocks = C == 1 ? 4 : 2;
constexpr int kTileLoads = (kTilePass * kTileSamples + kTileThreads - 1) / kTileThreads;
static_assert(kTileChunk <= kTileThreads, "one thread fills one element's row of the block's table");

template <int C>
struct TileTypes;
template <>
struct TileTypes<1> {
  using Sample = float;
  using Entry = float2;  // midpoint value, slope
};
template <>
struct TileTypes<2> {
  using Sample = float2;
  using Entry = float4;  // midpoint re, im, slope re, im
};

// Per-launch constants of the tiled kernel, computed on the host so that they stay in the constant
// bank (kernel parameters) rather than registers.
struct TileConstants {
  float samples_per_m;   // f_s / c: receive range to samples
  float cycles_per_m;    // f_dem / c: receive range to carrier cycles
  float origin_samples;  // sample_origin * f_s
  int samples;
  float taper, inverse_taper;  // the window as a Tukey window (beamform_conventions.h)
  unsigned magic_bias;         // kMagicBits * sizeof(Entry), taken out of the tiles' address
};

// An element as the block's pixels see it: receive positions are counted from receive_start, the
// floor of the block centre's receive position (samples).
struct alignas(16) TileElement {
  float x_m, z_m;
  float receive_offset;  // element delay * f_s - receive_start (samples)
  int receive_start;
};
struct TileElementExtra {
  float phase;  // IQ: f_dem * element delay (cycles)
  int inside;   // 1: every sample the pass stages lies in [0, samples - 2] (no bounds checks)
};

// For a position p - 1/2 (samples, window coordinates) in a row of entries: the entry k = round(p -
// 1/2) whose midpoint k + 1/2 is nearest to p, and the offset p - (k + 1/2) in [-1/2, 1/2]. Adding
// 1.5 * 2^23 leaves the rounded integer in the low mantissa bits, without a float-to-int conversion
// (valid for |p| < 2^22, guaranteed by the window). The entry's shared-memory address is then those
// bits times the entry size plus a base with the constant's bits taken out (32-bit shared addresses
// wrap): one multiply-add, the row and tile offsets being immediates of the load.
constexpr float kMagic = 12582912.0f;
constexpr unsigned kMagicBits = 0x4B400000u;

template <int Offset>
__device__ inline float4 load_shared(unsigned address, float4*) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4+%5];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(address), "n"(Offset));
  return v;
}
template <int Offset>
__device__ inline float2 load_shared(unsigned address, float2*) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2+%3];" : "=f"(v.x), "=f"(v.y) : "r"(address), "n"(Offset));
  return v;
}
template <int Offset>
__device__ inline void store_shared(unsigned address, float4 v) {
  asm volatile("st.shared.v4.f32 [%0+%1], {%2, %3, %4, %5};" ::"r"(address), "n"(Offset), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w));
}
template <int Offset>
__device__ inline void store_shared(unsigned address, float2 v) {
  asm volatile("st.shared.v2.f32 [%0+%1], {%2, %3};" ::"r"(address), "n"(Offset), "f"(v.x), "f"(v.y));
}

// A staged entry: the midpoint value of samples (first, next) and the slope between them, written
// at `Offset` bytes from `address` (both tiled kernels stage their rows through this).
template <int Offset>
__device__ inline void store_entry(unsigned address, float first, float next) {
  const float slope = next - first;
  store_shared<Offset>(address, make_float2(fmaf(0.5f, slope, first), slope));
}
template <int Offset>
__device__ inline void store_entry(unsigned address, float2 first, float2 next) {
  const float slope_re = next.x - first.x, slope_im = next.y - first.y;
  store_shared<Offset>(address,
                       make_float4(fmaf(0.5f, slope_re, first.x), fmaf(0.5f, slope_im, first.y), slope_re, slope_im));
}

// Samples `sample` and `sample + 1` of a line of `samples`, each zero beyond the line's ends (the
// interpolation runs through zeros there; beamform_conventions.h). Reads stay inside the line.
template <typename Sample>
__device__ inline void read_sample_pair(const Sample* line, int sample, int samples, Sample& first, Sample& next) {
  const int first_read = min(max(sample, 0), samples - 1), next_read = min(max(sample + 1, 0), samples - 1);
  const Sample a = __ldg(line + first_read), b = __ldg(line + next_read);
  first = first_read == sample ? a : Sample{};
  next = next_read == sample + 1 ? b : Sample{};
}

// Entry nearest to position p (given as p - 1/2) in the row at `Offset` bytes from the tiles'
// biased base (tiles' address - kMagicBits * sizeof(Entry)), and the offset from its midpoint.
template <typename Entry, int Offset>
__device__ inline Entry entry_at_midpoint(unsigned biased_tiles, float position_minus_half, float& offset) {
  const float rounded = position_minus_half + kMagic;
  offset = position_minus_half - (rounded - kMagic);
  return load_shared<Offset>(biased_tiles + __float_as_uint(rounded) * static_cast<unsigned>(sizeof(Entry)),
                             static_cast<Entry*>(nullptr));
}

// f(std::integral_constant<int, K>) for K = 0, 1, ...: an unrolled loop whose index is a constant.
template <int... K, typename F>
__device__ inline void for_each_index(std::integer_sequence<int, K...>, F&& f) {
  (f(std::integral_constant<int, K>{}), ...);
}

// 1 / sqrt(x), flushing denormals (the distances here are far from them).
__device__ inline float fast_rsqrt(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Phasor exp(j 2 pi cycles), the phase reduced to [-1/2, 1/2] cycles first (float keeps it exact enough).
__device__ inline void phasor_of_cycles(float cycles, float& re, float& im) {
  cycles -= rintf(cycles);
  __sincosf(6.283185307179586f * cycles, &im, &re);
}

// |d| from |d|^2 with the reciprocal square root unit (relative error ~1e-7: ~1e-4 samples at 5 cm).
__device__ inline float length_from_squared(float squared) {
  return squared > 0.0f ? squared * fast_rsqrt(squared) : 0.0f;
}

// The block's centre pixel, its extent (x range, deepest z) and its largest distance from the
// centre pixel, for every thread of a Lateral x Depth block; the thread's pixel is (lateral
// `across`, depth `down`) of the block, its index in the block `tid`.
struct BlockExtent {
  float cx, cz, x_min, x_max, z_max, reach;
};
template <int Lateral, int Depth>
__device__ inline BlockExtent block_extent(float x, float z, int down, int across, int tid) {
  constexpr int kWarps = Lateral * Depth / 32;
  __shared__ float extent[4][kWarps];
  __shared__ float centre[2];
  if (down == Depth / 2 && across == Lateral / 2) centre[0] = x, centre[1] = z;
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
    extent[0][tid >> 5] = x_min, extent[1][tid >> 5] = x_max;
    extent[2][tid >> 5] = z_max, extent[3][tid >> 5] = reach;
  }
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) {
    x_min = fminf(x_min, extent[0][w]), x_max = fmaxf(x_max, extent[1][w]);
    z_max = fmaxf(z_max, extent[2][w]), reach = fmaxf(reach, extent[3][w]);
  }
  return {cx, cz, x_min, x_max, z_max, reach};
}

// Receive aperture of the block: elements [begin, end) with |x_e - x| <= z / (2 F#) for some pixel
// (by bisection when the elements are sorted; else every element).
__device__ inline void block_aperture(const BeamformLaunch& launch, const BlockExtent& extent, int& begin, int& end) {
  const beamform::DasSetup<float>& s = launch.setup;
  begin = 0, end = s.elements;
  if (!launch.elements_ascending || !(s.f_number > 0.0f)) return;
  const float reach_x = extent.z_max / (2.0f * s.f_number) * 1.0001f;  // a hair wider: apodisation decides
  int a = 0, b = s.elements;
  while (a < b) {
    const int m = (a + b) >> 1;
    if (s.element_x_m[m] < extent.x_min - reach_x) a = m + 1; else b = m;
  }
  begin = a;
  b = s.elements;
  while (a < b) {
    const int m = (a + b) >> 1;
    if (s.element_x_m[m] <= extent.x_max + reach_x) a = m + 1; else b = m;
  }
  end = a;
}

template <int C>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks<C>)
    delay_and_sum_tiled(BeamformLaunch launch, TileConstants constants) {
  using Sample = typename TileTypes<C>::Sample;
  using Entry = typename TileTypes<C>::Entry;
  // Row kTilePass of each tile is a spare that the staging lanes with no entry this pass write to.
  __shared__ Entry tile[2][kTilePass + 1][kTileSamples];
  __shared__ TileElement table[kTileChunk];
  __shared__ TileElementExtra table_extra[kTileChunk];
  __shared__ float centre_transmit[kTilePass];

  const beamform::DasSetup<float>& s = launch.setup;
  const int tid = threadIdx.y * kTileDepth + threadIdx.x;
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(kTileDepth) + threadIdx.x;
  const std::int64_t i = blockIdx.y * static_cast<std::int64_t>(kTileLateral) + threadIdx.y;
  const bool active = j < launch.depth && i < launch.lateral;
  float x, z;
  pixel_position(launch, i < launch.lateral ? i : launch.lateral - 1, j < launch.depth ? j : launch.depth - 1, x, z);

  const BlockExtent extent = block_extent<kTileLateral, kTileDepth>(x, z, threadIdx.x, threadIdx.y, tid);
  const float cx = extent.cx, cz = extent.cz;
  // Staged samples: centre position - half ... + half + 1.
  const float half_span = tile_half_span(extent.reach, s.inverse_c, s.sampling_frequency_hz);
  if (!(2.0f * half_span + 2.0f <= float(kTileSamples))) {
    if (active) das_pixel_to_output<C>(launch, 0, i, j);
    return;  // uniform over the block: no barrier follows for anyone
  }
  const int half = static_cast<int>(half_span);

  int element_begin, element_end;
  block_aperture(launch, extent, element_begin, element_end);

  const int samples = constants.samples;  // run() checks that line and sample indices fit an int
  // apodisation() with the pixel's 1 / h computed once (no division per element); a pixel at z <= 0
  // with an F-number has no aperture and adds nothing.
  const bool contributes = active && (s.f_number <= 0.0f || z > 0.0f);
  const float inverse_half_width = s.f_number > 0.0f && z > 0.0f ? 2.0f * s.f_number / z : 0.0f;
  float sum_re = 0.0f, sum_im = 0.0f;
  // Staging layout: only the span = 2 half + 2 entries a pixel can read are staged, the pass's
  // count x span of them spread evenly: thread tid takes entries tid + r kTileThreads (row-major).
  const int span = 2 * half + 2;
  for (int first = 0; first < static_cast<int>(launch.transmits); first += kTilePass) {
    const int count = min(kTilePass, static_cast<int>(launch.transmits) - first);
    float local[kTilePass], phasor_re[kTilePass], phasor_im[kTilePass];
    __syncthreads();  // the previous pass is done with centre_transmit and the tiles
    // Rows of transmits this pass lacks hold zeros and their positions point inside the row, so
    // every pass sums kTilePass terms per element without a branch (the missing ones add 0).
    for (int slot = tid; slot < 2 * (kTilePass + 1) * kTileSamples; slot += kTileThreads) {
      const int row = slot / kTileSamples % (kTilePass + 1);
      if (row >= count) (&tile[0][0][0])[slot] = Entry{};
    }
#pragma unroll
    for (int k = 0; k < kTilePass; ++k) {
      // local: the transmit's part of (position - 1/2) in window coordinates (entry_at_midpoint()).
      local[k] = float(half), phasor_re[k] = 0.0f, phasor_im[k] = 0.0f;
      if (k < count) {
        const beamform::Transmit<float>& transmit = s.transmits[first + k];
        const float time_s = beamform::transmit_time_s(transmit, x, z, s.inverse_c) + transmit.delay_s;
        const float centre_start = floorf(
            (beamform::transmit_time_s(transmit, cx, cz, s.inverse_c) + transmit.delay_s) * s.sampling_frequency_hz -
            constants.origin_samples);
        if (tid == 0) centre_transmit[k] = centre_start;
        local[k] = time_s * s.sampling_frequency_hz - constants.origin_samples - centre_start + float(half) - 0.5f;
        if constexpr (C == 2) phasor_of_cycles(s.demodulation_frequency_hz * time_s, phasor_re[k], phasor_im[k]);
      }
    }
    __syncthreads();
    // The pass stages count x span entries, entry index = tid + r kTileThreads for load slot r: a
    // warp takes 32 consecutive ones, so a slot is idle for whole warps past the last (one branch)
    // and only the warp at the end has lanes without an entry (they load a neighbour's samples and
    // store to the spare row). Per slot: the first sample relative to the receive start, where
    // that sample lies for element 0 counted from the pass's first line (run() keeps it an int),
    // and the shared-memory address of the entry it fills in tile 0.
    const int staged = count * span;
    int warp_slots = 0;  // load slots with entries for this warp
    int stage_offset[kTileLoads], slot_line[kTileLoads];
    unsigned slot_entry[kTileLoads];
    const Sample* pass_input =
        reinterpret_cast<const Sample*>(launch.input) + static_cast<std::int64_t>(first) * s.elements * samples;
    const unsigned tiles = static_cast<unsigned>(__cvta_generic_to_shared(&tile[0][0][0]));
#pragma unroll
    for (int r = 0; r < kTileLoads; ++r) {
      const int index = tid + r * kTileThreads, used = min(index, staged - 1);
      if ((index & ~31) < staged) warp_slots = r + 1;
      const int row = used / span, q = used - row * span;
      stage_offset[r] = static_cast<int>(centre_transmit[row]) - half + q;
      slot_line[r] = row * s.elements * samples + stage_offset[r];
      slot_entry[r] = tiles + (index < staged ? row * kTileSamples + q : kTilePass * kTileSamples + (tid & 31)) *
                                  static_cast<unsigned>(sizeof(Entry));
    }
    const unsigned biased_tiles = tiles - constants.magic_bias;

    for (int chunk = element_begin; chunk < element_end; chunk += kTileChunk) {
      const int chunk_end = min(chunk + kTileChunk, element_end);
      __syncthreads();  // everyone is done with the previous chunk's table and tiles
      if (tid < chunk_end - chunk) {
        const int e = chunk + tid;
        const float ex = s.element_x_m[e], ez = s.element_z_m[e], delay = s.element_delay_s[e];
        const float receive_start = floorf(
            (sqrtf((cx - ex) * (cx - ex) + (cz - ez) * (cz - ez)) * s.inverse_c + delay) * s.sampling_frequency_hz);
        const int start = static_cast<int>(receive_start);
        int pass_low = samples, pass_high = -samples;  // staged samples relative to the receive start
        for (int row = 0; row < count; ++row) {
          pass_low = min(pass_low, static_cast<int>(centre_transmit[row]) - half);
          pass_high = max(pass_high, static_cast<int>(centre_transmit[row]) - half + span - 1);
        }
        table[tid] = TileElement{ex, ez, delay * s.sampling_frequency_hz - receive_start, start};
        table_extra[tid] = TileElementExtra{s.demodulation_frequency_hz * delay,
                                            start + pass_low >= 0 && start + pass_high < samples - 1};
      }
      __syncthreads();

      Sample first_sample[kTileLoads], next_sample[kTileLoads];
      // Loads element e's staged samples; a window reaching outside [0, samples - 2] (same for
      // the whole block) takes the checked path, which reads zero for a sample outside the line.
      auto prefetch = [&](int e) {
        const int start = table[e - chunk].receive_start;
        const int element_offset = e * samples + start;
        if (table_extra[e - chunk].inside) {
#pragma unroll
          for (int r = 0; r < kTileLoads; ++r) {
            if (r >= warp_slots) break;
            const Sample* value = pass_input + (slot_line[r] + element_offset);
            first_sample[r] = __ldg(value), next_sample[r] = __ldg(value + 1);
          }
        } else {  // each read clamped into the line, its value kept only when it was inside
#pragma unroll
          for (int r = 0; r < kTileLoads; ++r) {
            if (r >= warp_slots) break;
            const int sample = stage_offset[r] + start;
            read_sample_pair(pass_input + (slot_line[r] + element_offset - sample), sample, samples, first_sample[r],
                             next_sample[r]);
          }
        }
      };
      // One element: stage its samples into tile `Buffer`, prefetch the next, sum the pixel's terms.
      // The two tiles alternate; a compile-time buffer keeps every shared-memory offset an immediate.
      auto element_step = [&](int e, auto buffer) {
        constexpr int kTileBytes = (kTilePass + 1) * kTileSamples * sizeof(Entry);
        constexpr int kBufferOffset = decltype(buffer)::value * kTileBytes;
#pragma unroll
        for (int r = 0; r < kTileLoads; ++r) {
          if (r < warp_slots) store_entry<kBufferOffset>(slot_entry[r], first_sample[r], next_sample[r]);
        }
        __syncthreads();  // this tile is complete; the other was last read before the previous barrier
        if (e + 1 < chunk_end) prefetch(e + 1);
        const TileElement element = table[e - chunk];
        const float dx = x - element.x_m, dz = z - element.z_m;
        const float weight =
            beamform::tukey_window(constants.taper, constants.inverse_taper, fabsf(dx) * inverse_half_width);
        if (!contributes || weight == 0.0f) return;
        const float range_m = length_from_squared(fmaf(dx, dx, dz * dz));
        const float receive_local = fmaf(range_m, constants.samples_per_m, element.receive_offset);
        float element_re = 0.0f, element_im = 0.0f;  // element_im: IQ only
        (void)element_im;
        auto term = [&](auto k) {
          constexpr int kRow = decltype(k)::value;
          float offset;
          const Entry entry = entry_at_midpoint<Entry, kBufferOffset + kRow * kTileSamples * int(sizeof(Entry))>(
              biased_tiles, local[kRow] + receive_local, offset);
          if constexpr (C == 2) {
            const float re = fmaf(offset, entry.z, entry.x), im = fmaf(offset, entry.w, entry.y);
            element_re = fmaf(re, phasor_re[kRow], fmaf(-im, phasor_im[kRow], element_re));
            element_im = fmaf(re, phasor_im[kRow], fmaf(im, phasor_re[kRow], element_im));
          } else {
            element_re += fmaf(offset, entry.y, entry.x);
          }
        };
        for_each_index(std::make_integer_sequence<int, kTilePass>{}, term);
        if constexpr (C == 2) {
          float re, im;
          phasor_of_cycles(fmaf(range_m, constants.cycles_per_m, table_extra[e - chunk].phase), re, im);
          re *= weight, im *= weight;
          sum_re = fmaf(element_re, re, fmaf(-element_im, im, sum_re));
          sum_im = fmaf(element_re, im, fmaf(element_im, re, sum_im));
        } else {
          sum_re = fmaf(element_re, weight, sum_re);
        }
      };
      prefetch(chunk);
      for (int e = chunk; e < chunk_end; e += 2) {
        element_step(e, std::integral_constant<int, 0>{});
        if (e + 1 < chunk_end) element_step(e + 1, std::integral_constant<int, 1>{});
      }
    }
  }
  if (!active) return;
  write_pixel<C>(launch, 0, i, j, sum_re, sum_im);
}
// The ensemble kernel: the tiled kernel's staging, with the frames of an ensemble as the rows of a
// tile. A block takes kEnsembleLateral x kEnsembleDepth pixels and kEnsembleFrames frames. Per
// transmit and element it stages, for each of its frames, the samples around the block centre's
// position (the same window for every frame: the frames share the geometry), then every pixel
// computes its delay, apodisation and phasor ONCE and sums that element into all of its frames: per
// frame one shared-memory read at an immediate offset, the interpolation (2 FMA per channel) and the
// weighted phasor's multiply-add (4 FMA for IQ, 1 for RF), the frames' sums in registers. Global
// reads of a staging slot are consecutive samples of one line across a warp (coalesced, in the
// input's own [frame, transmit, element, sample] order); lateral neighbours share the staged window,
// so each sample crosses from L2 once per block. Blocks are square (16 x 16 pixels) so that the
// window of a block, bounded by its largest distance from its centre (see the tiled kernel), stays
// inside 64 entries on coarser grids than 8 x 32 blocks allow. Measured on the H100
// (docs/doppler-beamforming.md): kEnsembleStage elements staged per block barrier (two: 8 % faster
// than one), quarter-warps of 4 depths x 2 laterals (fUS: 26 % faster than 8 depths, whose lanes two
// samples apart met 2-way bank conflicts), blocks deepest first (15 %: the long deep blocks no longer
// form the tail of the second wave).
constexpr int kEnsembleThreads = kEnsembleLateral * kEnsembleDepth;
static_assert(kTileChunk <= kEnsembleThreads, "one thread fills one element's row of the block's table");
static_assert(kEnsembleDepth == 16 && kEnsembleLateral == 16, "a warp: 16 depths x 2 laterals, quarter-warps 4 x 2");
// Staging slots per thread and staged element for rows of RowEntries entries.
template <int RowEntries>
constexpr int kEnsembleLoads = (kEnsembleFrames * RowEntries + kEnsembleThreads - 1) / kEnsembleThreads;

// RowEntries: entries per row of a tile (32 or 64), the widest window the instance stages; blocks
// whose window is wider sum per pixel. Grid: x frame chunks, y lateral blocks, z depth blocks from
// the deepest (blocks start in x, y, z order: the deep ones, with the widest apertures, first).
template <int C, int RowEntries>
__global__ void __launch_bounds__(kEnsembleThreads, 2)
    delay_and_sum_ensemble(BeamformLaunch launch, TileConstants constants) {
  using Sample = typename TileTypes<C>::Sample;
  using Entry = typename TileTypes<C>::Entry;
  constexpr int kFrames = kEnsembleFrames, kRowEntries = RowEntries, kLoads = kEnsembleLoads<RowEntries>;
  constexpr int kStage = kEnsembleStage;
  static_assert(RowEntries >= 32 && RowEntries <= kTileSamples, "the spare row takes one entry per lane");
  // Per buffer and staged element, a tile of kFrames rows and a spare row that the staging lanes
  // with no entry write to: Entry [2][kStage][kFrames + 1][kRowEntries] in dynamic shared memory
  // (launch_ensemble() raises the limit where it exceeds the default 48 KB).
  extern __shared__ float4 ensemble_tiles[];
  Entry* const tile = reinterpret_cast<Entry*>(ensemble_tiles);
  __shared__ TileElement table[kTileChunk];
  __shared__ TileElementExtra table_extra[kTileChunk];

  const beamform::DasSetup<float>& s = launch.setup;
  const int tid = threadIdx.x;
  // The thread's pixel in the block: warp w takes laterals 2w, 2w + 1 and all 16 depths; each
  // quarter-warp (the 8 lanes of one 16-byte shared-memory phase) 4 depths x 2 laterals, so its
  // lanes read at most 8 neighbouring entries (no bank conflict) even where neighbouring depths lie
  // 2 samples apart.
  const int lane = tid & 31;
  const int down = (lane & 3) | (lane >> 3) << 2, across = (tid >> 5) * 2 + (lane >> 2 & 1);
  const std::int64_t j = (gridDim.z - 1 - blockIdx.z) * static_cast<std::int64_t>(kEnsembleDepth) + down;
  const std::int64_t i = blockIdx.y * static_cast<std::int64_t>(kEnsembleLateral) + across;
  const std::int64_t frame_first = blockIdx.x * static_cast<std::int64_t>(kFrames);
  const int count = static_cast<int>(min(static_cast<std::int64_t>(kFrames), launch.frames - frame_first));
  const bool active = j < launch.depth && i < launch.lateral;
  float x, z;
  pixel_position(launch, i < launch.lateral ? i : launch.lateral - 1, j < launch.depth ? j : launch.depth - 1, x, z);

  const BlockExtent extent = block_extent<kEnsembleLateral, kEnsembleDepth>(x, z, down, across, tid);
  const float cx = extent.cx, cz = extent.cz;
  const float half_span = tile_half_span(extent.reach, s.inverse_c, s.sampling_frequency_hz);
  if (!(2.0f * half_span + 2.0f <= float(kRowEntries))) {
    if (active)
      for (int k = 0; k < count; ++k) das_pixel_to_output<C>(launch, frame_first + k, i, j);
    return;  // uniform over the block: no barrier follows for anyone
  }
  const int half = static_cast<int>(half_span);
  const int span = 2 * half + 2;  // staged entries per frame: centre position - half ... + half + 1

  int element_begin, element_end;
  block_aperture(launch, extent, element_begin, element_end);

  const int samples = constants.samples;  // run() checks that line and sample indices fit an int
  const bool contributes = active && (s.f_number <= 0.0f || z > 0.0f);
  const float inverse_half_width = s.f_number > 0.0f && z > 0.0f ? 2.0f * s.f_number / z : 0.0f;
  float sum_re[kFrames], sum_im[kFrames];
#pragma unroll
  for (int k = 0; k < kFrames; ++k) sum_re[k] = 0.0f, sum_im[k] = 0.0f;
  (void)sum_im;
  // Rows of frames this block lacks hold zeros (they are summed like the others and not written).
  for (int slot = tid; slot < 2 * kStage * (kFrames + 1) * kRowEntries; slot += kEnsembleThreads) {
    const int row = slot / kRowEntries % (kFrames + 1);
    if (row >= count) tile[slot] = Entry{};
  }
  const unsigned tiles = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  const unsigned biased_tiles = tiles - constants.magic_bias;
  const int frame_samples = static_cast<int>(launch.transmits) * s.elements * samples;  // one frame's samples
  const int staged = count * span;
  // Staging slots: entry index tid + r kEnsembleThreads, row = frame, q = entry within the window.
  int warp_slots = 0, slot_q[kLoads], slot_frame[kLoads];
  unsigned slot_entry[kLoads];
#pragma unroll
  for (int r = 0; r < kLoads; ++r) {
    const int index = tid + r * kEnsembleThreads, used = min(index, staged - 1);
    if ((index & ~31) < staged) warp_slots = r + 1;
    const int row = used / span;
    slot_q[r] = used - row * span;
    slot_frame[r] = row * frame_samples;
    slot_entry[r] = tiles + (index < staged ? row * kRowEntries + slot_q[r] : kFrames * kRowEntries + (tid & 31)) *
                                static_cast<unsigned>(sizeof(Entry));
  }

  for (int t = 0; t < static_cast<int>(launch.transmits); ++t) {
    const beamform::Transmit<float>& transmit = s.transmits[t];
    const float time_s = beamform::transmit_time_s(transmit, x, z, s.inverse_c) + transmit.delay_s;
    const int centre_start = static_cast<int>(floorf(
        (beamform::transmit_time_s(transmit, cx, cz, s.inverse_c) + transmit.delay_s) * s.sampling_frequency_hz -
        constants.origin_samples));
    // local: the transmit's part of (position - 1/2) in window coordinates (entry_at_midpoint()).
    const float local = time_s * s.sampling_frequency_hz - constants.origin_samples - float(centre_start) + float(half) - 0.5f;
    float transmit_cycles = s.demodulation_frequency_hz * time_s;  // IQ, reduced to [-1/2, 1/2] once: the
    transmit_cycles -= rintf(transmit_cycles);                      // sum with the receive cycles keeps more bits
    const Sample* transmit_input = reinterpret_cast<const Sample*>(launch.input) +
                                   (frame_first * launch.transmits + t) * static_cast<std::int64_t>(s.elements) * samples;
    for (int chunk = element_begin; chunk < element_end; chunk += kTileChunk) {
      const int chunk_end = min(chunk + kTileChunk, element_end);
      __syncthreads();  // everyone is done with the previous chunk's table and tiles
      if (tid < chunk_end - chunk) {
        const int e = chunk + tid;
        const float ex = s.element_x_m[e], ez = s.element_z_m[e], delay = s.element_delay_s[e];
        const float receive_start = floorf(
            (sqrtf((cx - ex) * (cx - ex) + (cz - ez) * (cz - ez)) * s.inverse_c + delay) * s.sampling_frequency_hz);
        const int start = static_cast<int>(receive_start);
        const int first = start + centre_start - half;  // the window's first sample
        // receive_start holds the window's first sample here (the same for every frame).
        table[tid] = TileElement{ex, ez, delay * s.sampling_frequency_hz - receive_start, first};
        table_extra[tid] = TileElementExtra{s.demodulation_frequency_hz * delay, first >= 0 && first + span - 1 < samples - 1};
      }
      __syncthreads();

      Sample first_sample[kStage][kLoads], next_sample[kStage][kLoads];
      // Loads the windows of every frame of elements group ... group + kStage - 1 (those before
      // chunk_end); a window reaching outside [0, samples - 2] (same for the whole block) takes the
      // checked path, which reads zero for a sample outside the line.
      auto prefetch = [&](int group) {
        for_each_index(std::make_integer_sequence<int, kStage>{}, [&](auto staged_element) {
          constexpr int kElement = decltype(staged_element)::value;
          const int e = group + kElement;
          if (kElement > 0 && e >= chunk_end) return;
          const int window = table[e - chunk].receive_start;  // first sample of the window
          const Sample* line = transmit_input + e * samples;
          if (table_extra[e - chunk].inside) {
#pragma unroll
            for (int r = 0; r < kLoads; ++r) {
              if (r >= warp_slots) break;
              const Sample* value = line + (slot_frame[r] + window + slot_q[r]);
              first_sample[kElement][r] = __ldg(value), next_sample[kElement][r] = __ldg(value + 1);
            }
          } else {
#pragma unroll
            for (int r = 0; r < kLoads; ++r) {
              if (r >= warp_slots) break;
              const int sample = window + slot_q[r];
              read_sample_pair(line + slot_frame[r], sample, samples, first_sample[kElement][r],
                               next_sample[kElement][r]);
            }
          }
        });
      };
      // Element e's terms of this pixel, from its tile at `TileOffset` bytes from the tiles.
      auto sum_element = [&](int e, auto tile_offset) {
        constexpr int kTileOffset = decltype(tile_offset)::value;
        const TileElement element = table[e - chunk];
        const float dx = x - element.x_m, dz = z - element.z_m;
        const float weight =
            beamform::tukey_window(constants.taper, constants.inverse_taper, fabsf(dx) * inverse_half_width);
        if (!contributes || weight == 0.0f) return;
        const float range_m = length_from_squared(fmaf(dx, dx, dz * dz));
        const float position_minus_half = local + fmaf(range_m, constants.samples_per_m, element.receive_offset);
        const float rounded = position_minus_half + kMagic;  // entry_at_midpoint(), the address kept for every frame
        const float offset = position_minus_half - (rounded - kMagic);
        const unsigned address = biased_tiles + __float_as_uint(rounded) * static_cast<unsigned>(sizeof(Entry));
        float weight_re = weight, weight_im = 0.0f;  // IQ: weight exp(j 2 pi f_dem (t_tx + t_rx))
        (void)weight_im;
        if constexpr (C == 2) {
          float re, im;
          phasor_of_cycles(transmit_cycles + fmaf(range_m, constants.cycles_per_m, table_extra[e - chunk].phase), re, im);
          weight_re = re * weight, weight_im = im * weight;
        }
        auto term = [&](auto k) {
          constexpr int kRow = decltype(k)::value;
          const Entry entry = load_shared<kTileOffset + kRow * kRowEntries * int(sizeof(Entry))>(
              address, static_cast<Entry*>(nullptr));
          if constexpr (C == 2) {
            const float re = fmaf(offset, entry.z, entry.x), im = fmaf(offset, entry.w, entry.y);
            sum_re[kRow] = fmaf(re, weight_re, fmaf(-im, weight_im, sum_re[kRow]));
            sum_im[kRow] = fmaf(re, weight_im, fmaf(im, weight_re, sum_im[kRow]));
          } else {
            sum_re[kRow] = fmaf(fmaf(offset, entry.y, entry.x), weight_re, sum_re[kRow]);
          }
        };
        for_each_index(std::make_integer_sequence<int, kFrames>{}, term);
      };
      // One stage: store the prefetched windows of elements group ... into buffer `Buffer`,
      // prefetch the next group, sum this group. The two buffers alternate; compile-time buffer and
      // element indices keep every shared-memory offset an immediate.
      auto stage_step = [&](int group, auto buffer) {
        constexpr int kTileBytes = (kFrames + 1) * kRowEntries * sizeof(Entry);
        constexpr int kBufferOffset = decltype(buffer)::value * kStage * kTileBytes;
        for_each_index(std::make_integer_sequence<int, kStage>{}, [&](auto staged_element) {
          constexpr int kElement = decltype(staged_element)::value;
          if (kElement > 0 && group + kElement >= chunk_end) return;
#pragma unroll
          for (int r = 0; r < kLoads; ++r) {
            if (r < warp_slots)
              store_entry<kBufferOffset + kElement * kTileBytes>(slot_entry[r], first_sample[kElement][r],
                                                                 next_sample[kElement][r]);
          }
        });
        __syncthreads();  // this buffer is complete; the other was last read before the previous barrier
        if (group + kStage < chunk_end) prefetch(group + kStage);
        for_each_index(std::make_integer_sequence<int, kStage>{}, [&](auto staged_element) {
          constexpr int kElement = decltype(staged_element)::value;
          if (kElement > 0 && group + kElement >= chunk_end) return;
          sum_element(group + kElement, std::integral_constant<int, kBufferOffset + kElement * kTileBytes>{});
        });
      };
      prefetch(chunk);
      for (int group = chunk; group < chunk_end; group += 2 * kStage) {
        stage_step(group, std::integral_constant<int, 0>{});
        if (group + kStage < chunk_end) stage_step(group + kStage, std::integral_constant<int, 1>{});
      }
    }
  }
  if (!active) return;
  // The pixel's frames: IQ as one 8-byte store each, brought to baseband (write_pixel()) with the
  // depth's phasor computed once for all of them.
  float* out = static_cast<float*>(launch.output) +
               (frame_first * launch.output_frame_stride + i * launch.output_lateral_stride + j) * C;
  if constexpr (C == 2) {
    float rotation_re = 1.0f, rotation_im = 0.0f;
    if (launch.baseband_cycles_per_m != 0.0f) {
      float cycles = launch.baseband_cycles_per_m * (launch.depth_min_m + launch.depth_step_m * static_cast<float>(j));
      cycles -= rintf(cycles);
      sincospif(-2.0f * cycles, &rotation_im, &rotation_re);
    }
#pragma unroll
    for (int k = 0; k < kFrames; ++k)
      if (k < count)
        reinterpret_cast<float2*>(out)[k * launch.output_frame_stride] =
            make_float2(sum_re[k] * rotation_re - sum_im[k] * rotation_im, sum_re[k] * rotation_im + sum_im[k] * rotation_re);
  } else {
#pragma unroll
    for (int k = 0; k < kFrames; ++k)
      if (k < count) out[k * launch.output_frame_stride] = sum_re[k];
  }
}

// Upper bound of a 16 x 16 block's reach (largest distance of a pixel from the block's centre
// pixel, 8 steps away at most along each axis), on the host, to pick the row length.
inline float ensemble_reach_bound(const BeamformLaunch& launch) {
  const float depth_far = fmaxf(fabsf(launch.depth_min_m), fabsf(launch.depth_min_m + launch.depth_step_m * float(launch.depth - 1)));
  const float lateral = launch.grid == BeamformLaunch::Grid::sector ? fabsf(launch.lateral_step) * depth_far
                                                                    : fabsf(launch.lateral_step);
  return 1.001f * hypotf(float(kEnsembleLateral / 2) * lateral, float(kEnsembleDepth / 2) * fabsf(launch.depth_step_m));
}

template <int C, int RowEntries>
bool launch_ensemble(const BeamformLaunch& launch, const TileConstants& constants, cudaStream_t stream) {
  constexpr std::int64_t kIntLimit = 0x7fffffff;
  const beamform::DasSetup<float>& s = launch.setup;
  if (!(kEnsembleFrames * launch.transmits * s.elements * s.samples < kIntLimit)) return false;
  const auto depth_blocks = static_cast<unsigned>((launch.depth + kEnsembleDepth - 1) / kEnsembleDepth);
  const auto frame_blocks = static_cast<unsigned>((launch.frames + kEnsembleFrames - 1) / kEnsembleFrames);
  const auto lateral_blocks = static_cast<unsigned>((launch.lateral + kEnsembleLateral - 1) / kEnsembleLateral);
  if (depth_blocks > 65535 || lateral_blocks > 65535) return false;
  const dim3 blocks(frame_blocks, lateral_blocks, depth_blocks);
  constexpr int kTileBytes =
      2 * kEnsembleStage * (kEnsembleFrames + 1) * RowEntries * static_cast<int>(sizeof(typename TileTypes<C>::Entry));
  if constexpr (kTileBytes > 48 * 1024) {  // raised once per kernel and device (Hopper allows 227 KB)
    static std::atomic<std::uint64_t> raised{0};
    int device = 0;
    SONOPIPE_CUDA_CHECK(cudaGetDevice(&device));
    const std::uint64_t bit = std::uint64_t{1} << (device & 63);
    if (!(raised.load(std::memory_order_relaxed) & bit)) {
      SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(delay_and_sum_ensemble<C, RowEntries>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, kTileBytes));
      raised.fetch_or(bit, std::memory_order_relaxed);
    }
  }
  delay_and_sum_ensemble<C, RowEntries><<<blocks, kEnsembleThreads, kTileBytes, stream>>>(launch, constants);
  SONOPIPE_CUDA_CHECK_LAUNCH();
  return true;
}

// Rows of kEnsembleNarrowRow entries where every block's window fits them (fewer staging registers,
// smaller tiles), else of kTileSamples.
template <int C>
bool run_ensemble(const BeamformLaunch& launch, const TileConstants& constants, cudaStream_t stream) {
  const beamform::DasSetup<float>& s = launch.setup;
  const bool narrow = 2.0f * tile_half_span(ensemble_reach_bound(launch), s.inverse_c, s.sampling_frequency_hz) +
                          2.0f <= float(kEnsembleNarrowRow);
  return narrow ? launch_ensemble<C, kEnsembleNarrowRow>(launch, constants, stream)
                : launch_ensemble<C, kTileSamples>(launch, constants, stream);
}

template <int C>
void run(const BeamformLaunch& launch, cudaStream_t stream) {
  constexpr std::int64_t kIntLimit = 0x7fffffff;
  const beamform::DasSetup<float>& s = launch.setup;
  const bool staged = !s.cubic && launch.grid != BeamformLaunch::Grid::lines && !launch.focused_transmits &&
                      s.samples < kIntLimit && launch.transmits * s.elements < kIntLimit;
  const float taper = beamform::window_taper(s.window, s.tukey_alpha);
  const TileConstants constants{s.inverse_c * s.sampling_frequency_hz,
                                s.inverse_c * s.demodulation_frequency_hz,
                                s.sample_origin_s * s.sampling_frequency_hz,
                                static_cast<int>(s.samples),
                                taper,
                                taper > 0.0f ? 1.0f / taper : 0.0f,
                                kMagicBits * static_cast<unsigned>(sizeof(typename TileTypes<C>::Entry))};
  if (staged && launch.frames > 1 && run_ensemble<C>(launch, constants, stream)) return;
  if (staged && launch.frames == 1 && kTilePass * s.elements * s.samples < kIntLimit) {
    const dim3 blocks(static_cast<unsigned>((launch.depth + kTileDepth - 1) / kTileDepth),
                      static_cast<unsigned>((launch.lateral + kTileLateral - 1) / kTileLateral));
    delay_and_sum_tiled<C><<<blocks, dim3(kTileDepth, kTileLateral), 0, stream>>>(launch, constants);
    SONOPIPE_CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr int kThreads = 256;
  if (s.cubic) {
    const std::int64_t lines = launch.frames * launch.transmits * s.elements;
    spline_lines<C><<<static_cast<unsigned>((lines + 127) / 128), 128, 0, stream>>>(
        launch.input, lines, s.samples, launch.spline_m, launch.spline_c);
    SONOPIPE_CUDA_CHECK_LAUNCH();
  }
  const std::int64_t outputs = launch.frames * launch.lateral * launch.depth;
  delay_and_sum<C><<<static_cast<unsigned>((outputs + kThreads - 1) / kThreads), kThreads, 0, stream>>>(launch);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void beamform(const BeamformLaunch& launch, cudaStream_t stream) {
  if (launch.channels == 1) run<1>(launch, stream);
  else run<2>(launch, stream);
}

}  // namespace sonopipe::cuda
