// The standard NCC on the GPU: peng2019 eq. (1) summed directly.
// - Window energies (and sums for Pearson) are summed directly once per window position, by two
//   small kernels (axial run, then lateral x elevational), each launched once for the reference and
//   the target box together (they are latency-bound at the papers' sizes: launches count), and
//   shared by every (point, shift) that reads the same window: a target window is read by
//   ~S_a / step_a points. No prefix sums.
// - The numerator runs in shared-memory tiles (the 2-D paper's "GPU version 3": both signals on
//   chip): a block takes `points_per_block` consecutive axial points of one lateral/elevational
//   grid position; a thread takes R consecutive axial shifts of one point (R up to 16). The axial
//   loop runs in chunks of R samples: R reference values and R new target values from shared
//   memory feed R x R FMAs with static register indices; target values live in a ring of 2R
//   registers, so the R-1 a chunk shares with the next stay put (no register moves) and a chunk
//   costs 2R shared loads per R^2 FMAs (Hopper issues one shared load per four FMAs per SM). The
//   W_a mod R samples left at the window end run one at a time (a uniform branch each), so no FMA
//   is spent on padding. On the H100 the kernel is instruction-issue bound: every non-FMA
//   instruction costs (ncu, 2-D s41x7: 54% of issued instructions were FMAs with R <= 8, a moving
//   carry and padded chunks; 72% with R = 14 and the ring).
// - R and the points per block come from an issue model with whole waves of blocks per SM
//   (configure_standard), not from a fixed cap: at the papers' sizes a few hundred large blocks
//   left the last wave of SMs half empty.
// - Threads of a warp take consecutive points first: their shared addresses differ by the axial
//   step (odd in the papers' grids, so different banks).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "stages/common/cuda_check.h"
#include "stages/strain/ncc_track/ncc_kernels.cuh"

namespace sonopipe::cuda::ncc_kernels {
namespace {

using ncc::Geometry;
using ncc::kDims;

constexpr int kMaxR = 16;
// Zero floats after each tile: the last shift group of a row reads up to R-1 samples past it.
constexpr int kPad = kMaxR;

struct Tile {
  int points;        // points per block (axial)
  int f_axial;       // reference samples per tile row: (points - 1) * step + W
  int g_axial;       // target samples per tile row: f_axial + S_a - 1
  int g_lateral;     // W_l + S_l - 1
  int g_elevational; // W_e + S_e - 1
};

Tile tile_for(const Geometry& geo, int points) {
  Tile t;
  t.points = points;
  t.f_axial = (points - 1) * geo.step[0] + geo.kernel[0];
  t.g_axial = t.f_axial + geo.shifts(0) - 1;
  t.g_lateral = geo.kernel[1] + geo.shifts(1) - 1;
  t.g_elevational = geo.kernel[2] + geo.shifts(2) - 1;
  return t;
}

// Both tiles, each followed by kPad zeros.
std::size_t shared_floats(const Geometry& geo, const Tile& t) {
  return static_cast<std::size_t>(t.f_axial) * geo.kernel[1] * geo.kernel[2] + kPad +
         static_cast<std::size_t>(t.g_axial) * t.g_lateral * t.g_elevational + kPad;
}

// Window positions of a box: windows starting at box-local 0..count-1 per dimension.
struct WindowBox {
  int origin[kDims];  // frame coordinates of the first window's first sample
  int count[kDims];   // window positions per dimension
};

WindowBox reference_windows(const Geometry& geo) {
  WindowBox b;
  for (int d = 0; d < kDims; ++d) {
    b.origin[d] = geo.start[d];
    b.count[d] = geo.reference_extent(d) - geo.kernel[d] + 1;
  }
  return b;
}

WindowBox target_windows(const Geometry& geo) {
  WindowBox b;
  for (int d = 0; d < kDims; ++d) {
    b.origin[d] = geo.target_origin(d);
    b.count[d] = geo.target_extent(d) - geo.kernel[d] + 1;
  }
  return b;
}

// Axial runs of a box: one per window start along axial, for every sample position along
// lateral/elevational of the box.
std::size_t run_count(const Geometry& geo, const WindowBox& b) {
  return static_cast<std::size_t>(b.count[0]) * (geo.kernel[1] + b.count[1] - 1) * (geo.kernel[2] + b.count[2] - 1);
}

// The window sums of one box: its frame, its axial-run scratch and its outputs (run1 and sum:
// Pearson only).
struct WindowJob {
  WindowBox box;
  const float* x;
  float* run2;
  float* run1;
  float* energy;
  float* sum;
};
// Reference and target boxes in one launch: blockIdx.y picks one (a select, not an indexed
// parameter array, which would go through local memory).
struct WindowJobs {
  WindowJob reference, target;
};

// Pass 1: axial runs of W_a samples (sums of x^2 and of x). Also zeroes the point flags that the
// standard kernel sets with atomicOr (one launch fewer per frame pair). Indices fit in 32 bits
// (a box holds fewer samples than a frame). Latency-bound at the papers' sizes: the loop is
// unrolled so that the loads are in flight together.
template <bool Pearson>
__global__ void axial_run_kernel(Geometry geo, WindowJobs jobs, unsigned* point_flags) {
  const unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
  if (blockIdx.y == 0 && id < static_cast<unsigned>(geo.point_count())) point_flags[id] = 0u;
  const WindowJob job = blockIdx.y == 0 ? jobs.reference : jobs.target;
  const unsigned count = job.box.count[0];
  const unsigned lines = geo.kernel[1] + job.box.count[1] - 1, planes = geo.kernel[2] + job.box.count[2] - 1;
  if (id >= count * lines * planes) return;
  const unsigned a = id % count, line = id / count;
  const int l = static_cast<int>(line % lines), e = static_cast<int>(line / lines);
  const float* row = job.x + geo.frame_index(job.box.origin[0] + static_cast<int>(a), job.box.origin[1] + l,
                                             job.box.origin[2] + e);
  float s2 = 0.f, s1 = 0.f;
#pragma unroll 8
  for (int k = 0; k < geo.kernel[0]; ++k) {
    const float v = row[k];
    s2 = fmaf(v, v, s2);
    if (Pearson) s1 += v;
  }
  job.run2[id] = s2;
  if (Pearson) job.run1[id] = s1;
}

// Pass 2: W_l x W_e of the axial runs -> window energy (and sum) per window position.
template <bool Pearson>
__global__ void window_sum_kernel(Geometry geo, WindowJobs jobs) {
  const WindowJob job = blockIdx.y == 0 ? jobs.reference : jobs.target;
  const unsigned count = job.box.count[0], lateral = job.box.count[1];
  const unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= count * lateral * job.box.count[2]) return;
  const unsigned lines = geo.kernel[1] + lateral - 1;
  const unsigned a = id % count, window = id / count, l = window % lateral, e = window / lateral;
  float s2 = 0.f, s1 = 0.f;
  for (int we = 0; we < geo.kernel[2]; ++we) {
    const unsigned first = ((e + we) * lines + l) * count + a;
#pragma unroll 4
    for (int wl = 0; wl < geo.kernel[1]; ++wl) {
      s2 += job.run2[first + wl * count];
      if (Pearson) s1 += job.run1[first + wl * count];
    }
  }
  job.energy[id] = s2;
  if (Pearson) job.sum[id] = s1;
}

// Target values of a window row live in a ring of 2R registers: g_row[j] in slot j mod 2R. A
// chunk of R samples starting at a0 (Base = a0 mod 2R, 0 or R) reads R reference and R new target
// values from shared memory and does R x R FMAs (eq. (1) numerator); the R-1 target values it
// shares with the next chunk stay where they are, so a pair of chunks needs no register moves.
template <int R>
constexpr int slot(int j) {
  return j % (2 * R);
}

template <int R, int Base>
__device__ __forceinline__ void axial_chunk(const float* f_row, const float* g_row, int a0,
                                            float (&ring)[2 * R], float (&num)[R]) {
  float fv[R];
#pragma unroll
  for (int q = 0; q < R; ++q) fv[q] = f_row[a0 + q];
#pragma unroll
  for (int k = R - 1; k < 2 * R - 1; ++k) ring[slot<R>(Base + k)] = g_row[a0 + k];
#pragma unroll
  for (int q = 0; q < R; ++q)
#pragma unroll
    for (int r = 0; r < R; ++r)
      num[r] = fmaf(fv[q], ring[slot<R>(Base + q + r)], num[r]);  // peng2019 eq. (1) numerator
}

// The last `left` (< R) samples of a window row, one at a time: R FMAs each, no padding. `left`
// is the same for the whole block, so the branches are uniform.
template <int R, int Base>
__device__ __forceinline__ void axial_tail(const float* f_row, const float* g_row, int a0, int left,
                                           float (&ring)[2 * R], float (&num)[R]) {
#pragma unroll
  for (int q = 0; q < R - 1; ++q) {
    if (q < left) {
      const float fq = f_row[a0 + q];
      ring[slot<R>(Base + R - 1 + q)] = g_row[a0 + R - 1 + q];
#pragma unroll
      for (int r = 0; r < R; ++r)
        num[r] = fmaf(fq, ring[slot<R>(Base + q + r)], num[r]);  // peng2019 eq. (1) numerator
    }
  }
}

// One window row of R shifts: pairs of whole chunks, an odd last chunk, then the tail.
template <int R>
__device__ __forceinline__ void window_row(const float* f_row, const float* g_row, int width, float (&num)[R]) {
  float ring[2 * R];
#pragma unroll
  for (int k = 0; k < R - 1; ++k) ring[k] = g_row[k];
  const int chunks = width / R;
  int a0 = 0;
#pragma unroll 1
  for (int c = 1; c < chunks; c += 2, a0 += 2 * R) {
    axial_chunk<R, 0>(f_row, g_row, a0, ring, num);
    axial_chunk<R, R>(f_row, g_row, a0 + R, ring, num);
  }
  if (chunks % 2) {
    axial_chunk<R, 0>(f_row, g_row, a0, ring, num);
    axial_tail<R, R>(f_row, g_row, a0 + R, width - a0 - R, ring, num);
  } else {
    axial_tail<R, 0>(f_row, g_row, a0, width - a0, ring, num);
  }
}

// One warp copies one tile row: `length` samples from `src`, zero from sample `valid` on (past the
// frame end) and then shared stores: eight loads per lane in flight before the stores (the
// tile load is latency-bound, and small blocks spend a visible part of their time in it).
__device__ __forceinline__ void copy_row(const float* __restrict__ src, float* __restrict__ dst, int length,
                                         int valid, int lane) {
  for (int a0 = 0; a0 < length; a0 += 8 * 32) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int a = a0 + u * 32 + lane;
      v[u] = a < length && a < valid ? src[a] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int a = a0 + u * 32 + lane;
      if (a < length) dst[a] = v[u];
    }
  }
}

template <int R, bool ZeroMean>
__global__ void standard_kernel(Geometry geo, Tile tile, const float* f, const float* g,
                                StandardSums sums, float* maps, unsigned* point_flags) {
  extern __shared__ float shared[];
  const int f_count = tile.f_axial * geo.kernel[1] * geo.kernel[2];
  float* f_tile = shared;
  float* g_tile = shared + f_count + kPad;
  const int first_point_a = blockIdx.x * tile.points;
  const int pl = blockIdx.y, pe = blockIdx.z;
  const int oa = geo.start[0] + first_point_a * geo.step[0];
  const int ol = geo.start[1] + pl * geo.step[1];
  const int oe = geo.start[2] + pe * geo.step[2];

  // Load the tiles, one row per warp at a time (copy_row); samples past the frame end
  // (a partial last tile) and the padding read zero.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int f_rows = geo.kernel[1] * geo.kernel[2];
  for (int row = warp; row < f_rows; row += warps) {
    const int l = row % geo.kernel[1], e = row / geo.kernel[1];
    copy_row(f + geo.frame_index(oa, ol + l, oe + e), f_tile + row * tile.f_axial, tile.f_axial,
             geo.frame[0] - oa, lane);
  }
  const int g_rows = tile.g_lateral * tile.g_elevational;
  const int ga = oa + geo.search_min[0];
  for (int row = warp; row < g_rows; row += warps) {
    const int l = row % tile.g_lateral, e = row / tile.g_lateral;
    copy_row(g + geo.frame_index(ga, ol + geo.search_min[1] + l, oe + geo.search_min[2] + e),
             g_tile + row * tile.g_axial, tile.g_axial, geo.frame[0] - ga, lane);
  }
  if (threadIdx.x < kPad) {
    f_tile[f_count + threadIdx.x] = 0.f;
    g_tile[g_rows * tile.g_axial + threadIdx.x] = 0.f;
  }
  __syncthreads();

  const int s_a = geo.shifts(0), s_l = geo.shifts(1), s_e = geo.shifts(2);
  const int groups = (s_a + R - 1) / R;
  const int work = groups * tile.points * s_l * s_e;
  const float count = static_cast<float>(geo.window_count());
  const float floor = static_cast<float>(geo.energy_floor());
  for (int w = threadIdx.x; w < work; w += blockDim.x) {
    const int tp = w % tile.points;  // points fastest: see the bank note at the top
    int rest = w / tile.points;
    const int group = rest % groups;
    rest /= groups;
    const int sl = rest % s_l, se = rest / s_l;
    const int pa = first_point_a + tp;
    if (pa >= geo.points[0]) continue;
    const int sa0 = group * R;
    float num[R];
#pragma unroll
    for (int r = 0; r < R; ++r) num[r] = 0.f;
    for (int e = 0; e < geo.kernel[2]; ++e) {
      for (int l = 0; l < geo.kernel[1]; ++l) {
        const float* f_row = f_tile + (e * geo.kernel[1] + l) * tile.f_axial + tp * geo.step[0];
        const float* g_row = g_tile + ((e + se) * tile.g_lateral + (l + sl)) * tile.g_axial +
                             tp * geo.step[0] + sa0;
        window_row<R>(f_row, g_row, geo.kernel[0], num);
      }
    }
    const int p = (pe * geo.points[1] + pl) * geo.points[0] + pa;
    // Window energies (and sums) summed directly by the passes above.
    const std::size_t fi = (static_cast<std::size_t>(pe * geo.step[2]) * sums.reference_count[1] +
                            pl * geo.step[1]) * sums.reference_count[0] + pa * geo.step[0];
    const float energy_f = sums.reference_energy[fi];
    const float sum_f = ZeroMean ? sums.reference_sum[fi] : 0.f;
    float* map = maps + static_cast<std::size_t>(p) * geo.shift_count();
    bool any_empty = false;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int sa = sa0 + r;
      if (sa >= s_a) break;
      const std::size_t gi =
          (static_cast<std::size_t>(pe * geo.step[2] + se) * sums.target_count[1] + pl * geo.step[1] + sl) *
              sums.target_count[0] + pa * geo.step[0] + sa;
      const float sum_g = ZeroMean ? sums.target_sum[gi] : 0.f;
      bool empty = false;
      map[(se * s_l + sl) * s_a + sa] = ncc::ncc_value(num[r], energy_f, sums.target_energy[gi], sum_f, sum_g,
                                                       ZeroMean, count, floor, &empty);
      any_empty = any_empty || empty;
    }
    if (any_empty) atomicOr(point_flags + p, ncc::kFlagNoTargetEnergy);
    if (group == 0 && sl == 0 && se == 0 &&
        !ncc::reference_has_energy(energy_f, sum_f, ZeroMean, count, floor))
      atomicOr(point_flags + p, ncc::kFlagNoReferenceEnergy);
  }
}

template <int R>
void launch_r(const Geometry& geo, const StandardLaunch& launch, const float* f, const float* g,
              const StandardSums& sums, float* maps, unsigned* point_flags, cudaStream_t stream) {
  const Tile tile = tile_for(geo, launch.points_per_block);
  const dim3 grid((geo.points[0] + tile.points - 1) / tile.points, geo.points[1], geo.points[2]);
  if (geo.zero_mean)
    standard_kernel<R, true><<<grid, launch.threads, launch.shared_bytes, stream>>>(geo, tile, f, g, sums, maps, point_flags);
  else
    standard_kernel<R, false><<<grid, launch.threads, launch.shared_bytes, stream>>>(geo, tile, f, g, sums, maps, point_flags);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

// Sets the shared-memory limit of both kernels of one R; returns the most threads per block
// they launch with (their register use decides).
template <int R>
int prepare_r(std::size_t bytes) {
  int threads = 1024;
  for (auto kernel : {standard_kernel<R, true>, standard_kernel<R, false>}) {
    SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes)));
    cudaFuncAttributes attributes{};
    SONOPIPE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
    threads = std::min(threads, attributes.maxThreadsPerBlock);
  }
  return threads;
}

// Calls body(std::integral_constant<int, R>{}) for the runtime R in [kMinR, kMaxR].
constexpr int kMinR = 4;
template <typename Body>
void with_r(int r, Body&& body) {
  switch (r) {
    case 4: body(std::integral_constant<int, 4>{}); break;
    case 5: body(std::integral_constant<int, 5>{}); break;
    case 6: body(std::integral_constant<int, 6>{}); break;
    case 7: body(std::integral_constant<int, 7>{}); break;
    case 8: body(std::integral_constant<int, 8>{}); break;
    case 9: body(std::integral_constant<int, 9>{}); break;
    case 10: body(std::integral_constant<int, 10>{}); break;
    case 11: body(std::integral_constant<int, 11>{}); break;
    case 12: body(std::integral_constant<int, 12>{}); break;
    case 13: body(std::integral_constant<int, 13>{}); break;
    case 14: body(std::integral_constant<int, 14>{}); break;
    case 15: body(std::integral_constant<int, 15>{}); break;
    default: body(std::integral_constant<int, 16>{}); break;
  }
}

void window_sums(const Geometry& geo, const StandardSums& sums, const float* f, const float* g,
                 unsigned* point_flags, cudaStream_t stream) {
  const bool pearson = geo.zero_mean;
  const WindowBox rb = reference_windows(geo), tb = target_windows(geo);
  const std::size_t reference_runs = run_count(geo, rb);
  WindowJobs jobs;
  jobs.reference = {rb, f, sums.run2, pearson ? sums.run1 : nullptr, sums.reference_energy,
                    pearson ? sums.reference_sum : nullptr};
  jobs.target = {tb, g, sums.run2 + reference_runs, pearson ? sums.run1 + reference_runs : nullptr,
                 sums.target_energy, pearson ? sums.target_sum : nullptr};
  const std::size_t runs = std::max({reference_runs, run_count(geo, tb),
                                     static_cast<std::size_t>(geo.point_count())});
  const dim3 run_grid(static_cast<unsigned>((runs + 255) / 256), 2);
  if (pearson)
    axial_run_kernel<true><<<run_grid, 256, 0, stream>>>(geo, jobs, point_flags);
  else
    axial_run_kernel<false><<<run_grid, 256, 0, stream>>>(geo, jobs, point_flags);
  SONOPIPE_CUDA_CHECK_LAUNCH();
  const std::size_t windows = std::max(sums.reference_elements, sums.target_elements);
  const dim3 window_grid(static_cast<unsigned>((windows + 255) / 256), 2);
  if (pearson)
    window_sum_kernel<true><<<window_grid, 256, 0, stream>>>(geo, jobs);
  else
    window_sum_kernel<false><<<window_grid, 256, 0, stream>>>(geo, jobs);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

// Issued warp instructions per FMA for R shifts per thread: per window sample a thread issues R
// FMAs, 2 shared loads and ~3.4 other instructions (row setup, tail, tile load, epilogue; ncu,
// H100, 2-D s41x7 R = 14: 92.5 M issued, 66.7 M FMA-pipe, 10.1 M shared loads). Hopper issues one
// warp instruction per scheduler per clock, which FMAs alone could fill (the kernel is issue
// bound), and one shared load per 4 FMAs per SM.
double issued_per_fma(int r) {
  return std::max(1.0 + (2.0 + 3.4) / r, 4.0 * 2.0 / r);
}

// The launch the model below finds cheapest, or bytes == 0 when no tile fits.
struct Choice {
  int r = 0, points = 0;
  std::size_t bytes = 0;
  double cost = 1e300;
};

// Blocks with fewer warps of work than this ran slower than the issue model says (H100, 2-D
// s11x7: 1 warp per block 0.116 ms per pair vs 4 warps 0.075 ms): latency (tile load, barrier) is
// then hidden by too few warps. Used where the geometry allows it.
constexpr int kMinWarpsPerBlock = 4;

// R (shifts per thread) and points per block by the issue model: every block issues
// warps x (R W FMAs x issued_per_fma) plus ~6 instructions per 32 tile floats it loads, and an SM
// runs ceil(blocks / SMs) blocks (ties: larger R, more points). Points per block are made as
// even as the point count allows (a partial last tile idles threads).
Choice choose_launch(const Geometry& geo, int sms, std::size_t budget_bytes) {
  const int most_points = std::min(geo.points[0], 16);
  auto cheapest = [&](int min_warps) {
    Choice best;
    for (int r = kMaxR; r >= kMinR; --r) {
      const int groups = (geo.shifts(0) + r - 1) / r;
      const double item = static_cast<double>(r) * geo.window_count() * issued_per_fma(r);
      for (int wanted = most_points; wanted >= 1; --wanted) {
        const int tiles = (geo.points[0] + wanted - 1) / wanted;
        const int points = (geo.points[0] + tiles - 1) / tiles;
        const std::size_t bytes = shared_floats(geo, tile_for(geo, points)) * sizeof(float);
        const int warps = (groups * points * geo.shifts(1) * geo.shifts(2) + 31) / 32;
        if (bytes > budget_bytes || warps < min_warps) continue;
        const double blocks = static_cast<double>(tiles) * geo.points[1] * geo.points[2];
        const double cost = std::ceil(blocks / sms) * (warps * item + bytes / sizeof(float) * 6.0 / 32.0);
        if (cost < best.cost * (1 - 1e-9)) best = {r, points, bytes, cost};
      }
    }
    return best;
  };
  const Choice preferred = cheapest(kMinWarpsPerBlock);
  // Small geometries (or a tight shared-memory budget) may allow no such block: any that fits.
  return preferred.bytes > 0 ? preferred : cheapest(1);
}

}  // namespace

std::size_t standard_sums_floats(const Geometry& geo, StandardSums& layout) {
  const WindowBox rb = reference_windows(geo), tb = target_windows(geo);
  std::size_t reference = 1, target = 1;
  for (int d = 0; d < kDims; ++d) {
    layout.reference_count[d] = rb.count[d];
    layout.target_count[d] = tb.count[d];
    reference *= rb.count[d];
    target *= tb.count[d];
  }
  layout.reference_elements = reference;
  layout.target_elements = target;
  layout.run_elements = run_count(geo, rb) + run_count(geo, tb);  // both boxes at once
  return 2 * (reference + target + layout.run_elements);  // energies and sums
}

bool configure_standard(const Geometry& geo, StandardLaunch& launch) {
  int device = 0, max_shared = 0, sms = 0;
  SONOPIPE_CUDA_CHECK(cudaGetDevice(&device));
  SONOPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  SONOPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Half the opt-in limit so two blocks fit per SM.
  const Choice choice = choose_launch(geo, sms, static_cast<std::size_t>(max_shared) / 2);
  if (choice.bytes == 0) return false;
  int max_threads = 0;
  with_r(choice.r, [&](auto rc) { max_threads = prepare_r<decltype(rc)::value>(choice.bytes); });
  const int groups = (geo.shifts(0) + choice.r - 1) / choice.r;
  const int work = groups * choice.points * geo.shifts(1) * geo.shifts(2);
  launch.points_per_block = choice.points;
  launch.shifts_per_thread = choice.r;
  launch.threads = std::min(max_threads / 32 * 32, std::max(64, (work + 31) / 32 * 32));
  launch.shared_bytes = choice.bytes;
  return true;
}

void standard_ncc(const Geometry& geometry, const StandardLaunch& launch, const float* f,
                  const float* g, const StandardSums& sums, float* maps, unsigned* point_flags,
                  cudaStream_t stream) {
  window_sums(geometry, sums, f, g, point_flags, stream);  // zeroes point_flags too
  with_r(launch.shifts_per_thread, [&](auto rc) {
    launch_r<decltype(rc)::value>(geometry, launch, f, g, sums, maps, point_flags, stream);
  });
}

}  // namespace sonopipe::cuda::ncc_kernels
