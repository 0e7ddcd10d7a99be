// The standard NCC on the GPU: peng2019 eq. (1) summed directly.
// - Window energies (and sums for Pearson) are summed directly once per window position, by two
//   small kernels (axial run, then lateral x elevational), and shared by every (point, shift) that
//   reads the same window: a target window is read by ~S_a / step_a points. No prefix sums.
// - The numerator runs in shared-memory tiles (the 2-D paper's "GPU version 3": both signals on
//   chip): a block takes `points_per_block` consecutive axial points of one lateral/elevational
//   grid position; a thread takes R consecutive axial shifts of one point. The axial loop runs in
//   chunks of R samples: R reference values and 2R-1 target values in registers feed R x R FMAs
//   with static register indices; the last R-1 target values carry over to the next chunk, so a
//   chunk costs 2R shared loads per R^2 FMAs (Hopper issues one shared load per four FMAs per SM).
//   Whole chunks run without the window-end test, the partial last chunk with it: on the H100 the
//   kernel is instruction-issue bound (ncu, 2-D 61x11 s11x7: ~54% of issued instructions on the
//   FMA pipe), so every non-FMA instruction in the chunk loop costs.
// - Threads of a warp take consecutive points first: their shared addresses differ by the axial
//   step (odd in the papers' grids, so different banks).
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/ncc_kernels.cuh"

namespace sonopipe::cuda::ncc_kernels {
namespace {

using ncc::Geometry;
using ncc::kDims;

constexpr int kMaxR = 8;

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

// Both tiles plus zero padding past the end for the last chunk's over-read (3 R floats).
std::size_t shared_floats(const Geometry& geo, const Tile& t) {
  return static_cast<std::size_t>(t.f_axial) * geo.kernel[1] * geo.kernel[2] + 3 * kMaxR +
         static_cast<std::size_t>(t.g_axial) * t.g_lateral * t.g_elevational + 3 * kMaxR;
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

// Pass 1: axial runs of W_a samples for every window start along axial, for every sample
// position along lateral/elevational of the box (sums of x^2 and of x).
__global__ void axial_run_kernel(Geometry geo, WindowBox box, const float* x, float* run2, float* run1) {
  const int lines = geo.kernel[1] + box.count[1] - 1, planes = geo.kernel[2] + box.count[2] - 1;
  const std::size_t id = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (id >= static_cast<std::size_t>(box.count[0]) * lines * planes) return;
  const int a = static_cast<int>(id % box.count[0]);
  const int l = static_cast<int>((id / box.count[0]) % lines);
  const int e = static_cast<int>(id / (static_cast<std::size_t>(box.count[0]) * lines));
  const float* row = x + geo.frame_index(box.origin[0] + a, box.origin[1] + l, box.origin[2] + e);
  float s2 = 0.f, s1 = 0.f;
  for (int k = 0; k < geo.kernel[0]; ++k) {
    s2 = fmaf(row[k], row[k], s2);
    s1 += row[k];
  }
  run2[id] = s2;
  if (run1) run1[id] = s1;
}

// Pass 2: W_l x W_e of the axial runs -> window energy (and sum) per window position.
__global__ void window_sum_kernel(Geometry geo, WindowBox box, const float* run2, const float* run1,
                                  float* energy, float* sum) {
  const int lines = geo.kernel[1] + box.count[1] - 1;
  const std::size_t id = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (id >= static_cast<std::size_t>(box.count[0]) * box.count[1] * box.count[2]) return;
  const int a = static_cast<int>(id % box.count[0]);
  const int l = static_cast<int>((id / box.count[0]) % box.count[1]);
  const int e = static_cast<int>(id / (static_cast<std::size_t>(box.count[0]) * box.count[1]));
  float s2 = 0.f, s1 = 0.f;
  for (int we = 0; we < geo.kernel[2]; ++we)
    for (int wl = 0; wl < geo.kernel[1]; ++wl) {
      const std::size_t at = (static_cast<std::size_t>(e + we) * lines + (l + wl)) * box.count[0] + a;
      s2 += run2[at];
      if (run1) s1 += run1[at];
    }
  energy[id] = s2;
  if (sum) sum[id] = s1;
}

// R samples of one window row: R reference and R new target values from shared memory, R x R
// FMAs (eq. (1) numerator); the last R-1 target values carry over to the next chunk. Tail: the
// chunk passes the window end (reference values there read as zero).
template <int R, bool Tail>
__device__ __forceinline__ void axial_chunk(const float* f_row, const float* g_row, int a0, int width,
                                            float (&gv)[2 * R - 1], float (&num)[R]) {
  float fv[R];
#pragma unroll
  for (int q = 0; q < R; ++q) fv[q] = !Tail || a0 + q < width ? f_row[a0 + q] : 0.f;
#pragma unroll
  for (int k = R - 1; k < 2 * R - 1; ++k) gv[k] = g_row[a0 + k];
#pragma unroll
  for (int q = 0; q < R; ++q)
#pragma unroll
    for (int r = 0; r < R; ++r) num[r] = fmaf(fv[q], gv[q + r], num[r]);  // peng2019 eq. (1) numerator
#pragma unroll
  for (int k = 0; k < R - 1; ++k) gv[k] = gv[k + R];
}

template <int R, bool ZeroMean>
__global__ void standard_kernel(Geometry geo, Tile tile, const float* f, const float* g,
                                StandardSums sums, float* maps, unsigned* point_flags) {
  extern __shared__ float shared[];
  const int f_count = tile.f_axial * geo.kernel[1] * geo.kernel[2];
  float* f_tile = shared;
  float* g_tile = shared + f_count + 3 * kMaxR;
  const int first_point_a = blockIdx.x * tile.points;
  const int pl = blockIdx.y, pe = blockIdx.z;
  const int oa = geo.start[0] + first_point_a * geo.step[0];
  const int ol = geo.start[1] + pl * geo.step[1];
  const int oe = geo.start[2] + pe * geo.step[2];

  // Load the tiles; samples past the frame end (a partial last tile) and the padding read zero.
  for (int i = threadIdx.x; i < f_count + 3 * kMaxR; i += blockDim.x) {
    float v = 0.f;
    if (i < f_count) {
      const int a = i % tile.f_axial, l = (i / tile.f_axial) % geo.kernel[1];
      const int e = i / (tile.f_axial * geo.kernel[1]);
      if (oa + a < geo.frame[0]) v = f[geo.frame_index(oa + a, ol + l, oe + e)];
    }
    f_tile[i] = v;
  }
  const int g_count = tile.g_axial * tile.g_lateral * tile.g_elevational;
  for (int i = threadIdx.x; i < g_count + 3 * kMaxR; i += blockDim.x) {
    float v = 0.f;
    if (i < g_count) {
      const int a = i % tile.g_axial, l = (i / tile.g_axial) % tile.g_lateral;
      const int e = i / (tile.g_axial * tile.g_lateral);
      const int fa = oa + geo.search_min[0] + a;
      if (fa < geo.frame[0])
        v = g[geo.frame_index(fa, ol + geo.search_min[1] + l, oe + geo.search_min[2] + e)];
    }
    g_tile[i] = v;
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
        float gv[2 * R - 1];  // g_row[a0 .. a0 + 2R - 2]
#pragma unroll
        for (int k = 0; k < R - 1; ++k) gv[k] = g_row[k];
        // Whole chunks without the window-end test (the kernel is instruction-issue bound: every
        // non-FMA instruction in this loop costs), then the partial last chunk with it.
        const int whole = geo.kernel[0] / R * R;
        int a0 = 0;
#pragma unroll 2
        for (; a0 < whole; a0 += R) axial_chunk<R, false>(f_row, g_row, a0, geo.kernel[0], gv, num);
        if (a0 < geo.kernel[0]) axial_chunk<R, true>(f_row, g_row, a0, geo.kernel[0], gv, num);
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

template <int R>
void allow_shared(std::size_t bytes) {
  SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(standard_kernel<R, true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(standard_kernel<R, false>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

void window_sums(const Geometry& geo, const WindowBox& box, const float* x, float* run2, float* run1,
                 float* energy, float* sum, cudaStream_t stream) {
  const std::size_t runs = static_cast<std::size_t>(box.count[0]) * (geo.kernel[1] + box.count[1] - 1) *
                           (geo.kernel[2] + box.count[2] - 1);
  axial_run_kernel<<<static_cast<int>((runs + 255) / 256), 256, 0, stream>>>(geo, box, x, run2, run1);
  SONOPIPE_CUDA_CHECK_LAUNCH();
  const std::size_t windows = static_cast<std::size_t>(box.count[0]) * box.count[1] * box.count[2];
  window_sum_kernel<<<static_cast<int>((windows + 255) / 256), 256, 0, stream>>>(geo, box, run2, run1, energy, sum);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::size_t standard_sums_floats(const Geometry& geo, StandardSums& layout) {
  const WindowBox rb = reference_windows(geo), tb = target_windows(geo);
  std::size_t reference = 1, target = 1, runs = 0;
  for (int d = 0; d < kDims; ++d) {
    layout.reference_count[d] = rb.count[d];
    layout.target_count[d] = tb.count[d];
    reference *= rb.count[d];
    target *= tb.count[d];
  }
  for (const WindowBox* b : {&rb, &tb})
    runs = std::max(runs, static_cast<std::size_t>(b->count[0]) * (geo.kernel[1] + b->count[1] - 1) *
                              (geo.kernel[2] + b->count[2] - 1));
  layout.reference_elements = reference;
  layout.target_elements = target;
  layout.run_elements = runs;
  return 2 * (reference + target + runs);  // energies and sums
}

bool configure_standard(const Geometry& geo, StandardLaunch& launch) {
  // R: the cheapest by (padded shifts) x (padded window) x max(1/4, shared loads per FMA = 2/R)
  // (ties: larger R). Measured on the H100 (2026-11-22, R forced per run): the model's choice was
  // the fastest or within the ~3% run-to-run spread for the four 2-D cases (s31x7: R = 8 0.188 ms
  // vs R = 7 0.204 ms; s41x7: R = 7 0.221 ms vs R = 8 0.246 ms).
  int best_r = 8;
  double best_cost = 1e300;
  for (int r : {8, 7, 6, 5, 4}) {
    const double padded_shifts = (geo.shifts(0) + r - 1) / r * r;
    const double padded_window = (geo.kernel[0] + r - 1) / r * r;
    const double cost = padded_shifts * padded_window * std::max(0.25, 2.0 / r);
    if (cost < best_cost) {
      best_cost = cost;
      best_r = r;
    }
  }
  int device = 0, max_shared = 0;
  SONOPIPE_CUDA_CHECK(cudaGetDevice(&device));
  SONOPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // Half the opt-in limit so two blocks fit per SM; at most 16 points per block, as even as the
  // point count allows (a partial last tile idles threads).
  const std::size_t budget = static_cast<std::size_t>(max_shared) / 2;
  int points = std::min(geo.points[0], 16);
  while (points > 1 && shared_floats(geo, tile_for(geo, points)) * sizeof(float) > budget) --points;
  const int tiles = (geo.points[0] + points - 1) / points;
  points = (geo.points[0] + tiles - 1) / tiles;
  const std::size_t bytes = shared_floats(geo, tile_for(geo, points)) * sizeof(float);
  if (bytes > static_cast<std::size_t>(max_shared)) return false;
  const int groups = (geo.shifts(0) + best_r - 1) / best_r;
  const int work = groups * points * geo.shifts(1) * geo.shifts(2);
  launch.points_per_block = points;
  launch.shifts_per_thread = best_r;
  launch.threads = std::min(1024, std::max(64, (work + 31) / 32 * 32));
  launch.shared_bytes = bytes;
  switch (best_r) {
    case 8: allow_shared<8>(bytes); break;
    case 7: allow_shared<7>(bytes); break;
    case 6: allow_shared<6>(bytes); break;
    case 5: allow_shared<5>(bytes); break;
    default: allow_shared<4>(bytes); break;
  }
  return true;
}

void standard_ncc(const Geometry& geometry, const StandardLaunch& launch, const float* f,
                  const float* g, const StandardSums& sums, float* maps, unsigned* point_flags,
                  cudaStream_t stream) {
  const bool pearson = geometry.zero_mean;
  window_sums(geometry, reference_windows(geometry), f, sums.run2, pearson ? sums.run1 : nullptr,
              sums.reference_energy, pearson ? sums.reference_sum : nullptr, stream);
  window_sums(geometry, target_windows(geometry), g, sums.run2, pearson ? sums.run1 : nullptr,
              sums.target_energy, pearson ? sums.target_sum : nullptr, stream);
  switch (launch.shifts_per_thread) {
    case 8: launch_r<8>(geometry, launch, f, g, sums, maps, point_flags, stream); break;
    case 7: launch_r<7>(geometry, launch, f, g, sums, maps, point_flags, stream); break;
    case 6: launch_r<6>(geometry, launch, f, g, sums, maps, point_flags, stream); break;
    case 5: launch_r<5>(geometry, launch, f, g, sums, maps, point_flags, stream); break;
    default: launch_r<4>(geometry, launch, f, g, sums, maps, point_flags, stream); break;
  }
}

}  // namespace sonopipe::cuda::ncc_kernels
