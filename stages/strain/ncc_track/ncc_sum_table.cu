// Sum-tables on the GPU (peng2019 appendix A, eqs. (A2)-(A4)) in double, and the two NCC
// evaluations that read them: Luo-Konofagou (eq. (6) numerator) and the Lewis denominators
// (eqs. (4)-(5)). Double because float32 prefix sums over thousands of samples lose ~1e-5
// relative (see stages/strain/ncc_track/ncc_track_params.h).
#include "stages/common/cuda_check.h"
#include "stages/strain/ncc_track/ncc_kernels.cuh"

namespace sonopipe::cuda::ncc_kernels {
namespace {

using ncc::Geometry;
using ncc::kDims;

struct TableDims {
  int n0, n1, n2;  // extent + 1 per dimension
  __host__ __device__ std::size_t index(int i, int j, int k) const {
    return (static_cast<std::size_t>(k) * n1 + j) * n0 + i;
  }
};

// Pass 1 (axial, eq. (A2) first line): one warp per row (table, k, j); the product is formed on
// the fly and scanned 32 samples at a time with warp shuffles plus a running carry. Rows with
// j == 0 or k == 0 are the table's zero border.
__global__ void axial_scan_kernel(TableSpec spec, Geometry geo, TableDims dims, double* tables) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int rows_per_table = dims.n1 * dims.n2;
  if (warp >= rows_per_table * spec.tables) return;
  const int t = warp / rows_per_table;
  const int row = warp % rows_per_table;
  const int j = row % dims.n1, k = row / dims.n1;
  double* out = tables + static_cast<std::size_t>(t) * rows_per_table * dims.n0 +
                static_cast<std::size_t>(row) * dims.n0;
  if (j == 0 || k == 0) {
    for (int i = lane; i < dims.n0; i += 32) out[i] = 0.0;
    return;
  }
  int offset[kDims] = {0, 0, 0};
  if (spec.cross) geo.shift_coords(spec.first_shift + t, offset);
  const int l = spec.origin[1] + j - 1, e = spec.origin[2] + k - 1;
  const float* a_row = spec.a + geo.frame_index(spec.origin[0], l, e);
  const float* b_row = spec.b ? spec.b + geo.frame_index(spec.origin[0] + offset[0], l + offset[1],
                                                         e + offset[2])
                              : nullptr;
  if (lane == 0) out[0] = 0.0;
  double carry = 0.0;
  for (int base = 0; base < dims.n0 - 1; base += 32) {
    const int i = base + lane;
    double v = 0.0;
    if (i < dims.n0 - 1) v = b_row ? static_cast<double>(a_row[i]) * b_row[i] : a_row[i];
    for (int delta = 1; delta < 32; delta <<= 1) {
      const double up = __shfl_up_sync(0xffffffffu, v, delta);
      if (lane >= delta) v += up;
    }
    if (i < dims.n0 - 1) out[i + 1] = carry + v;
    carry += __shfl_sync(0xffffffffu, v, 31);
  }
}

// Pass 2 (lateral) and 3 (elevational): one thread per line along `dim`, coalesced over axial.
__global__ void line_scan_kernel(TableDims dims, int tables, int dim, double* data) {
  const std::size_t id = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const int other = dim == 1 ? dims.n2 : dims.n1;  // the dimension that is neither axial nor dim
  const std::size_t lines = static_cast<std::size_t>(tables) * other * dims.n0;
  if (id >= lines) return;
  const int i = static_cast<int>(id % dims.n0);
  const int o = static_cast<int>((id / dims.n0) % other);
  const int t = static_cast<int>(id / (static_cast<std::size_t>(dims.n0) * other));
  if (i == 0 || o == 0) return;  // zero border stays zero
  double* table = data + static_cast<std::size_t>(t) * dims.n0 * dims.n1 * dims.n2;
  double running = 0.0;
  const int count = dim == 1 ? dims.n1 : dims.n2;
  for (int c = 1; c < count; ++c) {
    const std::size_t at = dim == 1 ? dims.index(i, c, o) : dims.index(i, o, c);
    running += table[at];
    table[at] = running;
  }
}

__device__ double window_sum(const double* table, TableDims dims, const int lo[kDims],
                             const int size[kDims]) {
  const int a0 = lo[0], a1 = lo[0] + size[0], l0 = lo[1], l1 = lo[1] + size[1];
  const int e0 = lo[2], e1 = lo[2] + size[2];
  // peng2019 eqs. (4)-(6)
  return table[dims.index(a1, l1, e1)] - table[dims.index(a1, l1, e0)] -
         table[dims.index(a1, l0, e1)] - table[dims.index(a0, l1, e1)] +
         table[dims.index(a0, l0, e1)] + table[dims.index(a0, l1, e0)] +
         table[dims.index(a1, l0, e0)] - table[dims.index(a0, l0, e0)];
}

__host__ __device__ TableDims dims_of(const int extent[kDims]) {
  return TableDims{extent[0] + 1, extent[1] + 1, extent[2] + 1};
}

__host__ __device__ TableDims reference_dims(const Geometry& geo) {
  int extent[kDims];
  for (int d = 0; d < kDims; ++d) extent[d] = geo.reference_extent(d);
  return dims_of(extent);
}

__host__ __device__ TableDims target_dims(const Geometry& geo) {
  int extent[kDims];
  for (int d = 0; d < kDims; ++d) extent[d] = geo.target_extent(d);
  return dims_of(extent);
}

// Denominator terms of point p at shift s from the energy tables, and the NCC for a numerator.
__device__ float ncc_from_tables(const Geometry& geo, const EnergyTables& energy, TableDims rd,
                                 TableDims td, const int c[kDims], int s, double numerator,
                                 unsigned* point_flags, int p) {
  int lo_f[kDims], lo_g[kDims], t[kDims];
  geo.shift_coords(s, t);
  for (int d = 0; d < kDims; ++d) {
    lo_f[d] = c[d] * geo.step[d];
    lo_g[d] = lo_f[d] + t[d] - geo.search_min[d];
  }
  const double energy_f = window_sum(energy.f2, rd, lo_f, geo.kernel);  // eq. (4)
  const double energy_g = window_sum(energy.g2, td, lo_g, geo.kernel);  // eq. (5)
  const double sum_f = geo.zero_mean ? window_sum(energy.f1, rd, lo_f, geo.kernel) : 0.0;
  const double sum_g = geo.zero_mean ? window_sum(energy.g1, td, lo_g, geo.kernel) : 0.0;
  const double count = geo.window_count();
  const double floor = geo.energy_floor();
  bool target_empty = false;
  const double value = ncc::ncc_value(numerator, energy_f, energy_g, sum_f, sum_g, geo.zero_mean,
                                      count, floor, &target_empty);
  if (target_empty) atomicOr(point_flags + p, ncc::kFlagNoTargetEnergy);
  if (s == 0 && !ncc::reference_has_energy(energy_f, sum_f, geo.zero_mean, count, floor))
    atomicOr(point_flags + p, ncc::kFlagNoReferenceEnergy);
  return static_cast<float>(value);
}

// Luo-Konofagou: thread per (point, shift of the batch), numerator from that shift's table.
__global__ void luo_ncc_kernel(Geometry geo, const double* cross, int first_shift, int tables,
                               EnergyTables energy, float* maps, unsigned* point_flags) {
  const std::size_t id = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const int points = geo.point_count();
  if (id >= static_cast<std::size_t>(points) * tables) return;
  const int p = static_cast<int>(id % points);  // neighbouring threads: neighbouring points
  const int t = static_cast<int>(id / points);
  const TableDims rd = reference_dims(geo), td = target_dims(geo);
  int c[kDims], lo[kDims];
  geo.point_coords(p, c);
  for (int d = 0; d < kDims; ++d) lo[d] = c[d] * geo.step[d];
  const double* table = cross + static_cast<std::size_t>(t) * rd.n0 * rd.n1 * rd.n2;
  const double numerator = window_sum(table, rd, lo, geo.kernel);  // eq. (6)
  const int s = first_shift + t;
  maps[static_cast<std::size_t>(p) * geo.shift_count() + s] =
      ncc_from_tables(geo, energy, rd, td, c, s, numerator, point_flags, p);
}

// Lewis: thread per (point of the batch, shift); numerator from the inverse FFT.
__global__ void lewis_ncc_kernel(Geometry geo, int p0, int p1, int p2, int first_point, int batch,
                                 const float* correlations, EnergyTables energy, float* maps,
                                 unsigned* point_flags) {
  const std::size_t id = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const int shifts = geo.shift_count();
  if (id >= static_cast<std::size_t>(batch) * shifts) return;
  const int b = static_cast<int>(id / shifts);
  const int s = static_cast<int>(id % shifts);
  const int p = first_point + b;
  if (p >= geo.point_count()) return;
  int c[kDims], t[kDims];
  geo.point_coords(p, c);
  geo.shift_coords(s, t);
  const std::size_t total = static_cast<std::size_t>(p0) * p1 * p2;
  const std::size_t at = (static_cast<std::size_t>(t[2] - geo.search_min[2]) * p1 +
                          (t[1] - geo.search_min[1])) * p0 + (t[0] - geo.search_min[0]);
  const double numerator = correlations[b * total + at];  // eq. (3), already scaled by 1/total
  maps[static_cast<std::size_t>(p) * shifts + s] =
      ncc_from_tables(geo, energy, reference_dims(geo), target_dims(geo), c, s, numerator,
                      point_flags, p);
}

int blocks_for(std::size_t work, int threads) {
  return static_cast<int>((work + threads - 1) / threads);
}

}  // namespace

std::size_t table_elements(const int extent[kDims]) {
  return static_cast<std::size_t>(extent[0] + 1) * (extent[1] + 1) * (extent[2] + 1);
}

void build_tables(const TableSpec& spec, const Geometry& geometry, double* tables,
                  cudaStream_t stream) {
  const TableDims dims = dims_of(spec.extent);
  const std::size_t rows = static_cast<std::size_t>(spec.tables) * dims.n1 * dims.n2;
  constexpr int kThreads = 256;
  axial_scan_kernel<<<blocks_for(rows * 32, kThreads), kThreads, 0, stream>>>(spec, geometry, dims, tables);
  SONOPIPE_CUDA_CHECK_LAUNCH();
  if (dims.n1 > 2) {
    const std::size_t lines = static_cast<std::size_t>(spec.tables) * dims.n2 * dims.n0;
    line_scan_kernel<<<blocks_for(lines, kThreads), kThreads, 0, stream>>>(dims, spec.tables, 1, tables);
    SONOPIPE_CUDA_CHECK_LAUNCH();
  }
  if (dims.n2 > 2) {
    const std::size_t lines = static_cast<std::size_t>(spec.tables) * dims.n1 * dims.n0;
    line_scan_kernel<<<blocks_for(lines, kThreads), kThreads, 0, stream>>>(dims, spec.tables, 2, tables);
    SONOPIPE_CUDA_CHECK_LAUNCH();
  }
}

void luo_ncc(const Geometry& geometry, const double* cross, int first_shift, int tables,
             const EnergyTables& energy, float* maps, unsigned* point_flags, cudaStream_t stream) {
  const std::size_t work = static_cast<std::size_t>(geometry.point_count()) * tables;
  luo_ncc_kernel<<<blocks_for(work, 256), 256, 0, stream>>>(geometry, cross, first_shift, tables,
                                                            energy, maps, point_flags);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void lewis_ncc(const Geometry& geometry, const int fft_size[kDims], int first_point, int batch,
               const float* correlations, const EnergyTables& energy, float* maps,
               unsigned* point_flags, cudaStream_t stream) {
  const std::size_t work = static_cast<std::size_t>(batch) * geometry.shift_count();
  lewis_ncc_kernel<<<blocks_for(work, 256), 256, 0, stream>>>(
      geometry, fft_size[0], fft_size[1], fft_size[2], first_point, batch, correlations, energy,
      maps, point_flags);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda::ncc_kernels
