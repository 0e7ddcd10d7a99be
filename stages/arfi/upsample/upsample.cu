#include "stages/arfi/upsample/upsample.cuh"

#include <algorithm>
#include <string>

#include "stages/common/cuda_check.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 128;  // evaluation threads per block (H100, 32 sets: 64 / 128 / 256 -> 65 / 78 / 61 % of HBM)
constexpr int kMaxSubsetsPerTile = 64;  // solving threads per block (one subset each)
constexpr std::size_t kMaxSharedBytes = 200 * 1024;

// How lines are cut into tiles: a tile solves T consecutive subsets with one thread each, then all
// threads evaluate the outputs of its knots. With several tiles per line, neighbouring tiles
// overlap by one subset (recomputed identically) so every M a tile reads was solved inside it.
struct Tiling {
  std::int64_t subset_knots;  // n (the whole line in exact mode)
  std::int64_t overlap;       // k (0 in exact mode)
  std::int64_t subsets;       // per line
  int solve_threads;          // T
  int tiles_per_line;
  std::int64_t slots;         // Thomas scratch rows per solving thread
  int pad_shift;              // knot i is stored at i + (i >> pad_shift): see padding_for
  bool tabled_pivots;         // natural boundary: pivots from kNaturalPivots, no c scratch
  std::size_t shared_bytes;
};

// With natural conditions at both window ends (every window when the boundary is natural), the
// forward sweep's pivots depend only on the row: 1 / (4 - c_{r-1}), c_{-1} = 0, the same for every
// window and converged to float precision (2 - sqrt 3) after ~8 rows. The table takes the
// division off the serial chain of the solve and frees the per-thread c scratch.
constexpr int kTabledRows = 32;
struct PivotTable {
  float inverse[kTabledRows];
};
constexpr PivotTable natural_pivots() {
  PivotTable t{};
  double c = 0;
  for (int r = 0; r < kTabledRows; ++r) {
    c = 1.0 / (4.0 - c);  // sup = 1: c_r = 1 / pivot_r (the last row's c = 0 is never used)
    t.inverse[r] = static_cast<float>(c);
  }
  return t;
}
__constant__ PivotTable kNaturalPivots = natural_pivots();

struct TabledPivots {
  __device__ float inverse(std::int64_t row, float) const {
    return kNaturalPivots.inverse[row < kTabledRows - 1 ? row : kTabledRows - 1];
  }
  __device__ void keep(std::int64_t, std::int64_t, float) const {}
  // Multiplies M of the row below, which is 0 past the window's last row: c there is immaterial.
  __device__ float ratio(std::int64_t, std::int64_t row) const { return inverse(row, 0.0f); }
};

// Thread t of the solve reads and writes knot t n + c: with n = 16 float2 knots every thread of a
// half-warp hits the same bank (the padding took the H100 from 45 to 66 % of HBM on 32 sets). One
// padding knot after every 2^shift knots spreads them; the shift is picked here by counting the
// worst bank conflict of that access pattern (8-byte knots: 16 threads per shared-memory pass).
constexpr int kNoPadding = 30;

int bank_conflicts(std::int64_t n, int shift, int channels) {
  const int banks_per_knot = channels;  // 4-byte banks
  int worst = 0;
  for (std::int64_t c = 0; c < n; ++c) {
    int hits[32] = {};
    const int threads = channels == 2 ? 16 : 32;
    for (int t = 0; t < threads; ++t) {
      const std::int64_t i = t * n + c;
      const std::int64_t slot = i + (i >> shift);
      const int bank = static_cast<int>((slot * banks_per_knot) % 32);
      worst = std::max(worst, ++hits[bank]);
    }
  }
  return worst;
}

int padding_for(std::int64_t n, int channels) {
  int best_shift = kNoPadding, best = bank_conflicts(n, kNoPadding, channels);
  for (int shift = 2; shift <= 8 && best > 1; ++shift) {
    const int conflicts = bank_conflicts(n, shift, channels);
    if (conflicts < best) {
      best = conflicts;
      best_shift = shift;
    }
  }
  return best_shift;
}

__host__ __device__ inline std::int64_t padded_knots(std::int64_t knots, int shift) {
  return knots + (knots >> shift) + 1;
}

std::size_t shared_bytes_for(const Tiling& t, int channels) {
  const std::int64_t y_knots = padded_knots(t.solve_threads * t.subset_knots + 2 * t.overlap + 4, t.pad_shift);
  const std::int64_t m_knots = padded_knots(t.solve_threads * t.subset_knots + 1, t.pad_shift);
  const std::int64_t scratch_c = t.tabled_pivots ? 0 : (t.solve_threads * t.slots + 1) / 2 * 2;  // even: d aligned
  const std::int64_t scratch = scratch_c + t.solve_threads * t.slots * channels;
  return static_cast<std::size_t>((y_knots + m_knots) * channels + scratch) * sizeof(float);
}

Tiling make_tiling(const UpsampleParams& params, std::int64_t length, int channels) {
  Tiling t{};
  t.subset_knots = params.exact ? length : params.subset_knots;
  t.overlap = params.exact ? 0 : params.overlap;
  t.subsets = (length + t.subset_knots - 1) / t.subset_knots;
  t.slots = t.subset_knots + 2;
  if (!params.exact) t.slots += t.overlap;
  t.solve_threads = static_cast<int>(t.subsets < kMaxSubsetsPerTile ? t.subsets : kMaxSubsetsPerTile);
  t.pad_shift = t.subsets > 1 ? padding_for(t.subset_knots, channels) : kNoPadding;
  t.tabled_pivots = params.boundary == spline::Boundary::natural;
  t.shared_bytes = shared_bytes_for(t, channels);
  while (t.shared_bytes > 48 * 1024 && t.solve_threads > 2) {
    t.solve_threads /= 2;
    t.shared_bytes = shared_bytes_for(t, channels);
  }
  if (t.shared_bytes > kMaxSharedBytes || (t.solve_threads < 2 && t.subsets > 1))
    throw CudaError("upsample: " + std::to_string(length) + "-sample lines with n=" +
                    std::to_string(t.subset_knots) + ", k=" + std::to_string(t.overlap) +
                    " need more shared memory than a block has; use subsets with a smaller n");
  t.tiles_per_line = 1;
  if (t.subsets > t.solve_threads)
    t.tiles_per_line = 1 + static_cast<int>((t.subsets - t.solve_threads + t.solve_threads - 2) /
                                            (t.solve_threads - 1));
  return t;
}

template <int C, bool kTabled>
__global__ void __launch_bounds__(kThreads)
upsample_kernel(const float* __restrict__ in, float* __restrict__ out, std::int64_t length,
                std::int64_t out_length, std::int64_t p, std::int64_t q, spline::Boundary boundary,
                bool exact, Tiling t) {
  using V = spline::Vec<float, C>;
  extern __shared__ float shared[];
  const std::int64_t line = blockIdx.x / t.tiles_per_line;
  const int tile = blockIdx.x % t.tiles_per_line;
  const int T = t.solve_threads;
  const bool last_tile = tile == t.tiles_per_line - 1;
  const std::int64_t stride = t.tiles_per_line == 1 ? T : T - 1;
  const std::int64_t n = t.subset_knots;
  const std::int64_t s0 = tile * stride;
  const std::int64_t s_end = s0 + T < t.subsets ? s0 + T : t.subsets;
  const std::int64_t a0 = s0 * n;
  const std::int64_t solved_end = s_end * n < length ? s_end * n : length;
  std::int64_t y_lo = a0 - t.overlap - 3;
  if (y_lo < 0) y_lo = 0;
  std::int64_t y_hi = solved_end + t.overlap;
  if (y_hi > length - 1) y_hi = length - 1;

  const int shift = t.pad_shift;
  auto pad = [shift](int i) { return i + (i >> shift); };
  V* y_s = reinterpret_cast<V*>(shared);
  V* m_s = y_s + padded_knots(T * n + 2 * t.overlap + 4, shift);
  float* c_s = reinterpret_cast<float*>(m_s + padded_knots(T * n + 1, shift));
  V* d_s = reinterpret_cast<V*>(c_s + (kTabled ? 0 : (T * t.slots + 1) / 2 * 2));

  // Stage the tile's input knots (coalesced; unrolled so several loads are in flight).
  const V* line_in = reinterpret_cast<const V*>(in) + line * length + y_lo;
  const int y_count = static_cast<int>(y_hi - y_lo + 1);
#pragma unroll 4
  for (int idx = threadIdx.x; idx < y_count; idx += blockDim.x) y_s[pad(idx)] = line_in[idx];
  __syncthreads();

  // One subset per thread: rosenzweig2011 sec. III-A, tridiagonal solve of its window.
  const int tid = threadIdx.x;
  if (tid < s_end - s0) {
    const std::int64_t a = (s0 + tid) * n;
    const spline::KnotRange owned{a, a + n < length ? a + n : length};
    const spline::KnotRange window =
        exact ? spline::KnotRange{0, length} : spline::subset_window(owned, t.overlap, length);
    auto y_at = [&](std::int64_t i) { return y_s[pad(static_cast<int>(i - y_lo))]; };
    auto d_at = [&](std::int64_t r) -> V& { return d_s[r * T + tid]; };
    auto m_at = [&](std::int64_t i, const V& m) { m_s[pad(static_cast<int>(i - a0))] = m; };
    if constexpr (kTabled) {
      spline::solve_window<float, C>(window, owned, length, boundary, y_at, TabledPivots{}, d_at, m_at);
    } else {
      auto c_at = [&](std::int64_t r) -> float& { return c_s[r * T + tid]; };
      spline::solve_window<float, C>(window, owned, length, boundary, y_at,
                                     spline::ComputedPivots<float, decltype(c_at)>{c_at}, d_at, m_at);
    }
  }
  __syncthreads();

  // Evaluate every output whose interval starts at a knot this tile owns (coalesced writes).
  // Within a line everything fits 32 bits; the output position (i, rest) advances by a constant
  // per loop step, so the loop needs no division.
  const std::int64_t eval_end = last_tile ? length : (s0 + stride) * n;
  const int j_begin = static_cast<int>((a0 * p + q - 1) / q);
  const int j_end = static_cast<int>(last_tile ? out_length : (eval_end * p + q - 1) / q);
  const int p32 = static_cast<int>(p), q32 = static_cast<int>(q), last_interval = static_cast<int>(length) - 2;
  const int y_base = static_cast<int>(y_lo), m_base = static_cast<int>(a0);
  V* line_out = reinterpret_cast<V*>(out) + line * out_length;
  const float inv_p = 1.0f / static_cast<float>(p);
  const int step_scaled = static_cast<int>(blockDim.x) * q32;
  const int step_i = step_scaled / p32, step_rest = step_scaled - step_i * p32;
  int j = j_begin + static_cast<int>(threadIdx.x);
  int i = (j * q32) / p32, rest = j * q32 - i * p32;
  for (; j < j_end; j += blockDim.x) {
    int interval = i, r = rest;
    if (interval > last_interval) {  // the last knot itself
      interval = last_interval;
      r = p32;
    }
    const float tt = r == p32 ? 1.0f : static_cast<float>(r) * inv_p;
    line_out[j] = spline::evaluate<float, C>(y_s[pad(interval - y_base)], y_s[pad(interval + 1 - y_base)],
                                             m_s[pad(interval - m_base)], m_s[pad(interval + 1 - m_base)], tt);
    i += step_i;
    rest += step_rest;
    if (rest >= p32) {
      rest -= p32;
      ++i;
    }
  }
}

template <int C, bool kTabled>
void launch(const float* in, float* out, std::int64_t lines, std::int64_t length, std::int64_t out_length,
            const UpsampleParams& params, const Tiling& t, cudaStream_t stream) {
  upsample_kernel<C, kTabled><<<static_cast<unsigned>(lines * t.tiles_per_line), kThreads, t.shared_bytes, stream>>>(
      in, out, length, out_length, params.factor, params.factor_denominator, params.boundary, params.exact, t);
}

template <int C>
void set_shared_limit(std::size_t bytes) {
  for (auto kernel : {upsample_kernel<C, true>, upsample_kernel<C, false>})
    SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

void prepare_upsample(const UpsampleParams& params, std::int64_t length, int channels) {
  const Tiling t = make_tiling(params, length, channels);
  if (t.shared_bytes > 48 * 1024) {
    if (channels == 2) set_shared_limit<2>(t.shared_bytes);
    else set_shared_limit<1>(t.shared_bytes);
  }
}

void upsample(const float* in, float* out, std::int64_t lines, std::int64_t length, int channels,
              const UpsampleParams& params, cudaStream_t stream) {
  if (lines == 0) return;
  const Tiling t = make_tiling(params, length, channels);
  const std::int64_t out_length = spline::output_length(length, params.factor, params.factor_denominator);
  if (channels == 2 && t.tabled_pivots) launch<2, true>(in, out, lines, length, out_length, params, t, stream);
  else if (channels == 2) launch<2, false>(in, out, lines, length, out_length, params, t, stream);
  else if (t.tabled_pivots) launch<1, true>(in, out, lines, length, out_length, params, t, stream);
  else launch<1, false>(in, out, lines, length, out_length, params, t, stream);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
