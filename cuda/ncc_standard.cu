// The standard NCC on the GPU: peng2019 eq. (1) summed directly, with the reference windows and
// target regions of a tile of neighbouring points in shared memory (the 2-D paper's "GPU version
// 3", both signals on chip). A block takes `points_per_block` consecutive axial points of one
// lateral/elevational grid position; a thread takes R consecutive axial shifts of one point and
// keeps a sliding register window of the target samples, so each shared load feeds R products.
#include <algorithm>

#include "cuda/cuda_check.h"
#include "cuda/ncc_kernels.cuh"

namespace sonopipe::cuda::ncc_kernels {
namespace {

using ncc::Geometry;
using ncc::kDims;

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

std::size_t shared_floats(const Geometry& geo, const Tile& t, int shifts_per_thread) {
  return static_cast<std::size_t>(t.f_axial) * geo.kernel[1] * geo.kernel[2] +
         static_cast<std::size_t>(t.g_axial) * t.g_lateral * t.g_elevational + shifts_per_thread;
}

template <int R, bool ZeroMean>
__global__ void standard_kernel(Geometry geo, Tile tile, const float* f, const float* g, float* maps,
                                unsigned* point_flags) {
  extern __shared__ float shared[];
  float* f_tile = shared;
  float* g_tile = shared + static_cast<std::size_t>(tile.f_axial) * geo.kernel[1] * geo.kernel[2];
  const int first_point_a = blockIdx.x * tile.points;
  const int pl = blockIdx.y, pe = blockIdx.z;
  const int oa = geo.start[0] + first_point_a * geo.step[0];
  const int ol = geo.start[1] + pl * geo.step[1];
  const int oe = geo.start[2] + pe * geo.step[2];

  // Load the tile; samples past the frame end (a partial last tile) read as zero.
  const int f_count = tile.f_axial * geo.kernel[1] * geo.kernel[2];
  for (int i = threadIdx.x; i < f_count; i += blockDim.x) {
    const int a = i % tile.f_axial, l = (i / tile.f_axial) % geo.kernel[1];
    const int e = i / (tile.f_axial * geo.kernel[1]);
    f_tile[i] = oa + a < geo.frame[0] ? f[geo.frame_index(oa + a, ol + l, oe + e)] : 0.f;
  }
  const int g_count = tile.g_axial * tile.g_lateral * tile.g_elevational;
  for (int i = threadIdx.x; i < g_count + R; i += blockDim.x) {
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
    const int group = w % groups;
    int rest = w / groups;
    const int tp = rest % tile.points;
    rest /= tile.points;
    const int sl = rest % s_l, se = rest / s_l;
    const int pa = first_point_a + tp;
    if (pa >= geo.points[0]) continue;
    const int sa0 = group * R;
    float num[R], energy_g[R], sum_g[R];
#pragma unroll
    for (int r = 0; r < R; ++r) num[r] = energy_g[r] = sum_g[r] = 0.f;
    float energy_f = 0.f, sum_f = 0.f;
    for (int e = 0; e < geo.kernel[2]; ++e) {
      for (int l = 0; l < geo.kernel[1]; ++l) {
        const float* f_row = f_tile + (e * geo.kernel[1] + l) * tile.f_axial + tp * geo.step[0];
        const float* g_row = g_tile + ((e + se) * tile.g_lateral + (l + sl)) * tile.g_axial +
                             tp * geo.step[0] + sa0;
        float window[R];
#pragma unroll
        for (int r = 0; r < R - 1; ++r) window[r] = g_row[r];
        for (int a = 0; a < geo.kernel[0]; ++a) {
          window[R - 1] = g_row[a + R - 1];
          const float fv = f_row[a];
          energy_f = fmaf(fv, fv, energy_f);
          if (ZeroMean) sum_f += fv;
#pragma unroll
          for (int r = 0; r < R; ++r) {
            num[r] = fmaf(fv, window[r], num[r]);                // eq. (1) numerator
            energy_g[r] = fmaf(window[r], window[r], energy_g[r]);  // eq. (1) target energy
            if (ZeroMean) sum_g[r] += window[r];
          }
#pragma unroll
          for (int r = 0; r < R - 1; ++r) window[r] = window[r + 1];
        }
      }
    }
    const int p = (pe * geo.points[1] + pl) * geo.points[0] + pa;
    float* map = maps + static_cast<std::size_t>(p) * geo.shift_count();
    bool any_empty = false;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int sa = sa0 + r;
      if (sa >= s_a) break;
      bool empty = false;
      map[(se * s_l + sl) * s_a + sa] =
          ncc::ncc_value(num[r], energy_f, energy_g[r], sum_f, sum_g[r], ZeroMean, count, floor, &empty);
      any_empty = any_empty || empty;
    }
    if (any_empty) atomicOr(point_flags + p, ncc::kFlagNoTargetEnergy);
    if (w % groups == 0 && sl == 0 && se == 0 &&
        !ncc::reference_has_energy(energy_f, sum_f, ZeroMean, count, floor))
      atomicOr(point_flags + p, ncc::kFlagNoReferenceEnergy);
  }
}

template <int R>
void launch_r(const Geometry& geo, const StandardLaunch& launch, const float* f, const float* g,
              float* maps, unsigned* point_flags, cudaStream_t stream) {
  const Tile tile = tile_for(geo, launch.points_per_block);
  const dim3 grid((geo.points[0] + tile.points - 1) / tile.points, geo.points[1], geo.points[2]);
  if (geo.zero_mean)
    standard_kernel<R, true><<<grid, launch.threads, launch.shared_bytes, stream>>>(geo, tile, f, g, maps, point_flags);
  else
    standard_kernel<R, false><<<grid, launch.threads, launch.shared_bytes, stream>>>(geo, tile, f, g, maps, point_flags);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

template <int R>
void allow_shared(std::size_t bytes) {
  SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(standard_kernel<R, true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(standard_kernel<R, false>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

bool configure_standard(const Geometry& geo, StandardLaunch& launch) {
  // R: the candidate that wastes the fewest axial shifts in the last group (ties: larger R).
  int best_r = 8, best_waste = 1 << 30;
  for (int r : {8, 6, 4}) {
    const int waste = ((geo.shifts(0) + r - 1) / r) * r - geo.shifts(0);
    if (waste < best_waste) {
      best_waste = waste;
      best_r = r;
    }
  }
  int device = 0, max_shared = 0;
  SONOPIPE_CUDA_CHECK(cudaGetDevice(&device));
  SONOPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // Half the opt-in limit so two blocks fit per SM; 16 points at most per block.
  const std::size_t budget = static_cast<std::size_t>(max_shared) / 2;
  int points = std::min(geo.points[0], 16);
  while (points > 1 && shared_floats(geo, tile_for(geo, points), best_r) * sizeof(float) > budget) --points;
  const std::size_t bytes = shared_floats(geo, tile_for(geo, points), best_r) * sizeof(float);
  if (bytes > static_cast<std::size_t>(max_shared)) return false;
  const int groups = (geo.shifts(0) + best_r - 1) / best_r;
  const int work = groups * points * geo.shifts(1) * geo.shifts(2);
  launch.points_per_block = points;
  launch.shifts_per_thread = best_r;
  launch.threads = std::min(1024, std::max(64, (work + 31) / 32 * 32));
  launch.shared_bytes = bytes;
  if (best_r == 8) allow_shared<8>(bytes);
  if (best_r == 6) allow_shared<6>(bytes);
  if (best_r == 4) allow_shared<4>(bytes);
  return true;
}

void standard_ncc(const Geometry& geometry, const StandardLaunch& launch, const float* f,
                  const float* g, float* maps, unsigned* point_flags, cudaStream_t stream) {
  switch (launch.shifts_per_thread) {
    case 8: launch_r<8>(geometry, launch, f, g, maps, point_flags, stream); break;
    case 6: launch_r<6>(geometry, launch, f, g, maps, point_flags, stream); break;
    default: launch_r<4>(geometry, launch, f, g, maps, point_flags, stream); break;
  }
}

}  // namespace sonopipe::cuda::ncc_kernels
