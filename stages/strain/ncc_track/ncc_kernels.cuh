// Launch functions of the ncc_track kernels (internal to the ncc_*.cu of this folder): each takes device
// pointers, sizes and a stream. Conventions: stages/strain/ncc_track/ncc_track_params.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "stages/strain/ncc_track/ncc_track_params.h"

namespace sonopipe::cuda::ncc_kernels {

// A batch of exclusive 3-D sum-tables (peng2019 appendix A) over a box of `extent` samples whose
// origin in frame coordinates is `origin`. Table t sums a(m) * b(m + offset_t) (b == nullptr: a(m)
// alone; b == a with zero offset: energies). offset_t is shift (first_shift + t) of the geometry
// when `cross` is true, else zero. Layout per table: (extent+1) per dimension, axial fastest.
struct TableSpec {
  const float* a;
  const float* b;
  int origin[ncc::kDims];
  int extent[ncc::kDims];
  bool cross;
  int first_shift;
  int tables;
};
std::size_t table_elements(const int extent[ncc::kDims]);
void build_tables(const TableSpec& spec, const ncc::Geometry& geometry, double* tables,
                  cudaStream_t stream);

// Energy tables used by lewis and luo, and for the Pearson form the plain sums (else nullptr).
struct EnergyTables {
  const double* f2;
  const double* f1;
  const double* g2;
  const double* g1;
};

// luo: maps[p, s] for s in [first_shift, first_shift + tables) from the cross tables.
void luo_ncc(const ncc::Geometry& geometry, const double* cross, int first_shift, int tables,
             const EnergyTables& energy, float* maps, unsigned* point_flags, cudaStream_t stream);

// lewis: numerator spectra sizes; gather windows, multiply spectra, NCC from the correlations.
void lewis_gather(const ncc::Geometry& geometry, const int fft_size[ncc::kDims], int first_point,
                  int batch, const float* f, const float* g, float* windows, float* regions,
                  cudaStream_t stream);
void lewis_cross_spectrum(const float2* window_spectra, float2* region_spectra, std::size_t count,
                          float scale, cudaStream_t stream);
void lewis_ncc(const ncc::Geometry& geometry, const int fft_size[ncc::kDims], int first_point,
               int batch, const float* correlations, const EnergyTables& energy, float* maps,
               unsigned* point_flags, cudaStream_t stream);

// standard: eq. (1) summed directly in shared-memory tiles, window energies (and sums) summed
// directly once per window position; standard_ncc zeroes point_flags itself. Returns false when
// the tile does not fit in shared memory (caller reports). configure_standard picks the tile once.
struct StandardLaunch {
  int points_per_block;
  int shifts_per_thread;
  int threads;
  std::size_t shared_bytes;
};
// Device scratch of the direct window sums: energies (and plain sums for Pearson) of every
// reference window position and every target window position, plus the axial-run buffers of
// both boxes (reference runs first).
struct StandardSums {
  float* reference_energy;
  float* reference_sum;
  float* target_energy;
  float* target_sum;
  float* run2;
  float* run1;
  int reference_count[ncc::kDims];  // window positions per dimension
  int target_count[ncc::kDims];
  std::size_t reference_elements, target_elements, run_elements;
};
// Fills the counts of `layout` and returns the floats the scratch needs in all.
std::size_t standard_sums_floats(const ncc::Geometry& geometry, StandardSums& layout);
bool configure_standard(const ncc::Geometry& geometry, StandardLaunch& launch);
void standard_ncc(const ncc::Geometry& geometry, const StandardLaunch& launch, const float* f,
                  const float* g, const StandardSums& sums, float* maps, unsigned* point_flags,
                  cudaStream_t stream);

// Peak search and refinement: one warp per point. point_flags: per point, the energy flags
// (kFlagNoReferenceEnergy, kFlagNoTargetEnergy) the NCC kernels set with atomicOr (zeroed before
// them: by the caller for lewis and luo, by standard_ncc's first kernel for standard).
void find_peaks(const ncc::Geometry& geometry, const float* maps, const unsigned* point_flags,
                int rank, const float spacing[ncc::kDims],
                float* displacement, float* displacement_samples, float* correlation,
                std::uint8_t* flags, cudaStream_t stream);

// Frame normalisation: sum of squares into *sum (zeroed here), then out = in * rsqrt(mean).
void normalise(const float* in, float* out, std::size_t count, double* sum, cudaStream_t stream);

}  // namespace sonopipe::cuda::ncc_kernels
