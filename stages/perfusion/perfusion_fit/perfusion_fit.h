// Stage `perfusion_fit`: voxelwise dual-input single-compartment liver perfusion (wang2012) on a
// DCE batch, CPU (threads over voxels) or CUDA (one thread per voxel), in double.
//
// Input: a frame of kind dce, payload float64 [voxel, time] (concentrations, mM), with the side
// vectors (FrameMeta::vectors, FrameHeader.vectors on the wire), each N_t long:
//   time_s          sample times in s, uniform (the model's time origin is the first sample)
//   arterial_input  C_a at those times (mM)
//   portal_input    C_p at those times (mM)
// Output `perfusion_maps`: float64 [voxel, parameter = 9], per voxel the columns
//   0 k_a, 1 k_p, 2 k_l (ml/100g/min), 3 tau_a, 4 tau_p (s), 5 cost (sum of squared residuals,
//   mM^2), 6 iterations, 7 cost evaluations, 8 converged (1: the cost tolerance stopped the
//   search; 0: an iteration/evaluation limit did). A voxel whose curve holds a NaN or infinity is
//   not fitted: NaN parameters and cost, 0 iterations.
// The model, schemes and optimiser are described in stages/perfusion/perfusion_model.h and nelder_mead.h;
// parameters in perfusion_fit_params.h (convolution, max_iterations, max_evaluations,
// cost_tolerance, parameter_tolerance, start).
#pragma once

#include <vector>

#include "sdk/registry.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit_params.h"
#include "stages/perfusion/perfusion_voxel_fit.h"

namespace sonopipe {

class PerfusionFitStage : public Stage {
 public:
  static constexpr const char* kTimeVector = "time_s";
  static constexpr const char* kArterialVector = "arterial_input";
  static constexpr const char* kPortalVector = "portal_input";
  static constexpr int kColumns = 9;

  static StageInfo info();
  explicit PerfusionFitStage(const ParamValues& params);

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  // One output row from a voxel's fit (CPU path; the CUDA path has the same in its kernel).
  static void write_row(const perfusion::VoxelFit& fit, double* row);

 private:
  // The frame's curves and spacing, checked (throws StageError on a bad time axis or input).
  double checked_dt_s(const FrameMeta& frame) const;
  perfusion::ModelInputs inputs_view(double* arterial, double* portal, double* fft_cos,
                                     double* fft_sin, double dt_s) const;

  perfusion::FitSettings settings_;
  perfusion::FitConfig config_;
  std::size_t voxels_ = 0;
  int samples_ = 0;
  int fft_length_ = 0, fft_log2_length_ = 0;
  std::vector<double> fft_cos_, fft_sin_;  // built in configure for this N_t
  std::size_t cpu_chunks_ = 0;             // CPU: voxel chunks, each with its own fft scratch
  Backend backend_ = Backend::cpu;
};

}  // namespace sonopipe
