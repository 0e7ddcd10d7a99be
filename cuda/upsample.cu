#include "cuda/upsample.cuh"

#include <string>

#include "cuda/cuda_check.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 128;           // evaluation threads per block
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
  std::size_t shared_bytes;
};

std::size_t shared_bytes_for(const Tiling& t, int channels) {
  const std::int64_t y_knots = t.solve_threads * t.subset_knots + 2 * t.overlap + 4;
  const std::int64_t m_knots = t.solve_threads * t.subset_knots + 1;
  const std::int64_t scratch_c = (t.solve_threads * t.slots + 1) / 2 * 2;  // even: keeps d 8-byte aligned
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

template <int C>
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

  V* y_s = reinterpret_cast<V*>(shared);
  V* m_s = y_s + (T * n + 2 * t.overlap + 4);
  float* c_s = reinterpret_cast<float*>(m_s + (T * n + 1));
  V* d_s = reinterpret_cast<V*>(c_s + (T * t.slots + 1) / 2 * 2);

  // Stage the tile's input knots (coalesced).
  const float* line_in = in + line * length * C;
  const std::int64_t y_floats = (y_hi - y_lo + 1) * C;
  float* y_flat = reinterpret_cast<float*>(y_s);
  for (std::int64_t idx = threadIdx.x; idx < y_floats; idx += blockDim.x)
    y_flat[idx] = line_in[y_lo * C + idx];
  __syncthreads();

  // One subset per thread: rosenzweig2011 sec. III-A, tridiagonal solve of its window.
  const int tid = threadIdx.x;
  if (tid < s_end - s0) {
    const std::int64_t a = (s0 + tid) * n;
    const spline::KnotRange owned{a, a + n < length ? a + n : length};
    const spline::KnotRange window =
        exact ? spline::KnotRange{0, length} : spline::subset_window(owned, t.overlap, length);
    spline::solve_window<float, C>(
        window, owned, length, boundary, [&](std::int64_t i) { return y_s[i - y_lo]; },
        [&](std::int64_t r) -> float& { return c_s[r * T + tid]; },
        [&](std::int64_t r) -> V& { return d_s[r * T + tid]; },
        [&](std::int64_t i, const V& m) { m_s[i - a0] = m; });
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
    line_out[j] = spline::evaluate<float, C>(y_s[interval - y_base], y_s[interval + 1 - y_base],
                                             m_s[interval - m_base], m_s[interval + 1 - m_base], tt);
    i += step_i;
    rest += step_rest;
    if (rest >= p32) {
      rest -= p32;
      ++i;
    }
  }
}

template <int C>
void set_shared_limit(std::size_t bytes) {
  SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(upsample_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
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
  const std::int64_t blocks = lines * t.tiles_per_line;
  if (channels == 2)
    upsample_kernel<2><<<static_cast<unsigned>(blocks), kThreads, t.shared_bytes, stream>>>(
        in, out, length, out_length, params.factor, params.factor_denominator, params.boundary,
        params.exact, t);
  else
    upsample_kernel<1><<<static_cast<unsigned>(blocks), kThreads, t.shared_bytes, stream>>>(
        in, out, length, out_length, params.factor, params.factor_denominator, params.boundary,
        params.exact, t);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
