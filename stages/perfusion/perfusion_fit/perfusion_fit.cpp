#include "stages/perfusion/perfusion_fit/perfusion_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "sdk/thread_pool.h"
#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"
#include "stages/perfusion/perfusion_problem.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit.cuh"
#endif

namespace sonopipe {

using namespace perfusion;

StageInfo PerfusionFitStage::info() {
  return {
      .name = "perfusion_fit",
      .doc = "DCE batch [voxel, time] + time_s/arterial_input/portal_input vectors -> float64 "
             "[voxel, 9]: k_a, k_p, k_l (ml/100g/min), tau_a, tau_p (s), cost, iterations, "
             "evaluations, converged (wang2012 dual-input single-compartment, Nelder-Mead)",
      .params = fit_param_decls(),
      .create = [](const ParamValues& p) { return std::make_unique<PerfusionFitStage>(p); },
  };
}

PerfusionFitStage::PerfusionFitStage(const ParamValues& params)
    : settings_(fit_settings_from(params)), config_(make_fit_config(settings_)) {}

StagePlan PerfusionFitStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  if (frame.kind != FrameKind::dce)
    throw StageError("perfusion_fit: expected a dce frame, got " + std::string(frame_kind_name(frame.kind)));
  if (input.dtype != DType::float64 || input.axes.size() != 2 || input.axes[1].name != "time")
    throw StageError("perfusion_fit: expected float64 [voxel, time], got " + input.shape_string());
  voxels_ = static_cast<std::size_t>(input.axes[0].size);
  samples_ = static_cast<int>(input.axes[1].size);
  for (const char* name : {kTimeVector, kArterialVector, kPortalVector}) {
    const std::vector<double>* v = frame.vector(name);
    if (!v)
      throw StageError(std::string("perfusion_fit: the frame has no '") + name + "' vector (need " +
                       kTimeVector + ", " + kArterialVector + ", " + kPortalVector + ")");
    if (v->size() != static_cast<std::size_t>(samples_))
      throw StageError(std::string("perfusion_fit: vector '") + name + "' has " + std::to_string(v->size()) +
                       " values, the batch has " + std::to_string(samples_) + " time points");
  }
  checked_dt_s(frame);
  if (settings_.optimiser.max_iterations > 0 && voxels_ > static_cast<std::size_t>(1) << 30)
    throw StageError("perfusion_fit: more than 2^30 voxels in one batch");
  // The fft tables depend on N_t only: build them once here (a throwaway problem owns the maths).
  const FitProblem tables(1.0, std::vector<double>(samples_, 0.0), std::vector<double>(samples_, 0.0));
  fft_length_ = tables.fft_length();
  fft_log2_length_ = tables.fft_log2_length();
  fft_cos_ = tables.fft_cos();
  fft_sin_ = tables.fft_sin();
  backend_ = backend;

  TensorSpec out;
  out.dtype = DType::float64;
  out.axes = {input.axes[0], {"parameter", kColumns}};
  StagePlan plan{.outputs = {{"perfusion_maps", out}}};
  const std::size_t curve_bytes = (2 * static_cast<std::size_t>(samples_) + 2 * fft_length_) * sizeof(double);
  if (backend == Backend::cuda) {
#ifdef SONOPIPE_WITH_CUDA
    const auto kernel = cuda::PerfusionKernel::thread_per_voxel;
    plan.host_staging_bytes = curve_bytes;
    plan.workspace_bytes = curve_bytes + voxels_ * samples_ * sizeof(double) + voxels_ * sizeof(VoxelFit) +
                           cuda::perfusion_fit_scratch_bytes(kernel, settings_.convolution, fft_length_, voxels_);
#endif
  } else {
    cpu_chunks_ = std::min<std::size_t>(std::max<std::size_t>(voxels_, 1), 256);
    const std::size_t scratch = settings_.convolution == Convolution::fft ? 2 * static_cast<std::size_t>(fft_length_) : 0;
    plan.workspace_bytes = curve_bytes + cpu_chunks_ * scratch * sizeof(double);
  }
  return plan;
}

double PerfusionFitStage::checked_dt_s(const FrameMeta& frame) const {
  try {
    const double dt = uniform_spacing_s(*frame.vector(kTimeVector));
    for (const char* name : {kArterialVector, kPortalVector})
      for (double v : *frame.vector(name))
        if (!std::isfinite(v)) throw InputError(std::string(name) + " has a NaN or infinite value");
    return dt;
  } catch (const InputError& e) {
    throw StageError(std::string("perfusion_fit: ") + e.what());
  }
}

ModelInputs PerfusionFitStage::inputs_view(double* arterial, double* portal, double* fft_cos,
                                           double* fft_sin, double dt_s) const {
  ModelInputs in;
  in.arterial = arterial;
  in.portal = portal;
  in.samples = samples_;
  in.dt_s = dt_s;
  in.fft_length = fft_length_;
  in.fft_log2_length = fft_log2_length_;
  in.fft_cos = fft_cos;
  in.fft_sin = fft_sin;
  return in;
}

void PerfusionFitStage::write_row(const VoxelFit& fit, double* row) {
  for (int j = 0; j < kParameterCount; ++j) row[j] = fit.parameters[j];
  row[5] = fit.cost;
  row[6] = fit.iterations;
  row[7] = fit.evaluations;
  row[8] = fit.stop == 0 && !fit.skipped ? 1.0 : 0.0;
}

bool PerfusionFitStage::run_cpu(const StageIo& io) {
  const double dt = checked_dt_s(io.frame);
  // Workspace: arterial, portal, cos, sin, then one fft scratch per chunk.
  double* w = static_cast<double*>(io.workspace);
  const std::size_t n = samples_, length = fft_length_;
  std::memcpy(w, io.frame.vector(kArterialVector)->data(), n * sizeof(double));
  std::memcpy(w + n, io.frame.vector(kPortalVector)->data(), n * sizeof(double));
  std::memcpy(w + 2 * n, fft_cos_.data(), length * sizeof(double));
  std::memcpy(w + 2 * n + length, fft_sin_.data(), length * sizeof(double));
  const ModelInputs in = inputs_view(w, w + n, w + 2 * n, w + 2 * n + length, dt);
  double* scratch = w + 2 * n + 2 * length;
  const std::size_t scratch_per_chunk = settings_.convolution == Convolution::fft ? 2 * length : 0;
  const auto* tissue = static_cast<const double*>(io.input);
  auto* out = static_cast<double*>(io.outputs[0]);
  const std::size_t chunk = (voxels_ + cpu_chunks_ - 1) / cpu_chunks_;
  io.pool->parallel_for(cpu_chunks_, [&](std::size_t first, std::size_t end) {
    for (std::size_t c = first; c < end; ++c) {
      double* own_scratch = scratch + c * scratch_per_chunk;
      for (std::size_t v = c * chunk; v < std::min(voxels_, (c + 1) * chunk); ++v)
        write_row(fit_voxel(in, config_, tissue + v * n, 1, own_scratch), out + v * kColumns);
    }
  });
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool PerfusionFitStage::run_cuda(const StageIo& io) {
  const double dt = checked_dt_s(io.frame);
  const std::size_t n = samples_, length = fft_length_;
  // Staging (pinned) -> workspace: the frame's input curves and the fft tables.
  double* staging = static_cast<double*>(io.host_staging);
  std::memcpy(staging, io.frame.vector(kArterialVector)->data(), n * sizeof(double));
  std::memcpy(staging + n, io.frame.vector(kPortalVector)->data(), n * sizeof(double));
  std::memcpy(staging + 2 * n, fft_cos_.data(), length * sizeof(double));
  std::memcpy(staging + 2 * n + length, fft_sin_.data(), length * sizeof(double));
  double* w = static_cast<double*>(io.workspace);
  const std::size_t curve_doubles = 2 * n + 2 * length;
  SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(w, staging, curve_doubles * sizeof(double), cudaMemcpyHostToDevice, io.stream));
  const ModelInputs in = inputs_view(w, w + n, w + 2 * n, w + 2 * n + length, dt);
  double* time_major = w + curve_doubles;
  auto* fits = reinterpret_cast<VoxelFit*>(time_major + voxels_ * n);
  double* scratch = reinterpret_cast<double*>(fits + voxels_);
  const int voxels = static_cast<int>(voxels_);
  cuda::transpose_to_time_major(static_cast<const double*>(io.input), time_major, voxels, samples_, io.stream);
  cuda::launch_perfusion_fit(in, config_, time_major, voxels, voxels, fits, scratch,
                             cuda::PerfusionKernel::thread_per_voxel, io.stream);
  cuda::write_fit_rows(fits, static_cast<double*>(io.outputs[0]), voxels, io.stream);
  return true;
}
#else
bool PerfusionFitStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
