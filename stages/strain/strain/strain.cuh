// Kernels of the `strain` stage (stages/strain/strain/strain.h): median pre-filter and least-squares
// differentiator. Conventions: stages/strain/strain/strain_params.h.
#pragma once

#include <cuda_runtime_api.h>

namespace sonopipe::cuda {

struct StrainGrid {
  int points[3];     // [axial, lateral, elevational], 1 when absent
  float spacing[3];  // grid spacing per dimension (same unit as the displacement)
  int median[3];     // median window per dimension, 1 = off
  int rank;          // components per point
  int half_window;   // h of the differentiator
};

// strain [points x rank] from displacement [points x rank]; `smoothed` (same size) receives the
// median-filtered field when a median is set (may be null otherwise).
void strain(const StrainGrid& grid, const float* displacement, float* smoothed, float* strain,
            cudaStream_t stream);

}  // namespace sonopipe::cuda
