// One voxel's fit: Nelder-Mead on the model cost, results in edge units. Inline math shared by
// the CPU path (one call per voxel on a pool thread) and the thread-per-voxel CUDA kernel.
#pragma once

#include <cstdint>

#include "stages/perfusion/nelder_mead.h"
#include "stages/perfusion/perfusion_linear_start.h"
#include "stages/perfusion/perfusion_model.h"

namespace sonopipe::perfusion {

// Result of one voxel, identical layout on host and device.
struct VoxelFit {
  double parameters[kParameterCount];  // edge units: k_a, k_p, k_l ml/100g/min; tau_a, tau_p s
  double cost;                         // sum of squared residuals (concentration^2)
  std::int32_t iterations;             // as scipy's nit / fminsearch's iterations
  std::int32_t evaluations;
  std::int32_t stop;                   // NelderMeadStop: 0 converged, 1 evaluations, 2 iterations
  std::int32_t skipped;                // 1: the curve had a non-finite sample, not fitted (NaNs)
};

// What the fit needs besides the data, in SI units, plain values (copied to kernels by value).
struct FitConfig {
  NelderMeadSettings optimiser;
  double start_si[kParameterCount];
  Convolution convolution;
  bool linear_start;        // seed each voxel by perfusion_linear_start.h (start_si: fallback)
  LinearStartGrid linear_grid;
};

// The inputs are held by value: in a kernel they then stay in registers instead of being re-read
// through a pointer to local memory at every sample.
struct RecursiveCost {
  ModelInputs in;
  const double* tissue;
  int stride;
  SONOPIPE_HD double operator()(const double* p) const {
    return cost_recursive(p, in, tissue, stride);
  }
};

struct FftCost {
  ModelInputs in;
  const double* tissue;
  int stride;
  double* scratch;  // 2 L doubles
  SONOPIPE_HD double operator()(const double* p) const {
    return cost_fft(p, in, tissue, stride, scratch);
  }
};

SONOPIPE_HD inline VoxelFit skipped_voxel() {
  VoxelFit fit;
  for (int j = 0; j < kParameterCount; ++j) fit.parameters[j] = HUGE_VAL - HUGE_VAL;  // NaN
  fit.cost = HUGE_VAL - HUGE_VAL;
  fit.iterations = 0;
  fit.evaluations = 0;
  fit.stop = 0;
  fit.skipped = 1;
  return fit;
}

SONOPIPE_HD inline VoxelFit finish_voxel(const NelderMeadResult<kParameterCount>& r) {
  VoxelFit fit;
  for (int j = 0; j < kParameterCount; ++j) fit.parameters[j] = r.x[j];
  to_edge_units(fit.parameters);
  fit.cost = r.cost;
  fit.iterations = r.iterations;
  fit.evaluations = r.evaluations;
  fit.stop = static_cast<std::int32_t>(r.stop);
  fit.skipped = 0;
  return fit;
}

SONOPIPE_HD inline bool tissue_finite(const double* tissue, int stride, int samples) {
  for (int i = 0; i < samples; ++i) {
    const double v = tissue[i * stride];
    if (!(v - v == 0.0)) return false;
  }
  return true;
}

// Nelder-Mead's start for one voxel: the configured start, or the linear least-squares seed.
SONOPIPE_HD inline void voxel_start(const ModelInputs& in, const FitConfig& config, const double* tissue,
                                    int stride, double start[kParameterCount]) {
  for (int j = 0; j < kParameterCount; ++j) start[j] = config.start_si[j];
  if (config.linear_start) linear_start(in, tissue, stride, config.linear_grid, start);
}

// Fits tissue[i * stride], i < N. fft_scratch: 2 L doubles (unused by `recursive`).
SONOPIPE_HD inline VoxelFit fit_voxel(const ModelInputs& in, const FitConfig& config,
                                      const double* tissue, int stride, double* fft_scratch) {
  if (!tissue_finite(tissue, stride, in.samples)) return skipped_voxel();
  double start[kParameterCount];
  voxel_start(in, config, tissue, stride, start);
  if (config.convolution == Convolution::recursive) {
    RecursiveCost cost{in, tissue, stride};
    return finish_voxel(nelder_mead<kParameterCount>(cost, start, config.optimiser));
  }
  FftCost cost{in, tissue, stride, fft_scratch};
  return finish_voxel(nelder_mead<kParameterCount>(cost, start, config.optimiser));
}

}  // namespace sonopipe::perfusion
