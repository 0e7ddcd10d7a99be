// Voxelwise perfusion fitting of many curves: the CPU backend (double, multi-threaded over voxels)
// and the entry point of the CUDA backend for host arrays (all visible GPUs, voxels chunked to fit
// device memory, copies overlapped with kernels; see perfusion_fit_gpu.h).
#pragma once

#include <cstddef>
#include <functional>

#include "stages/perfusion/perfusion_fit/perfusion_fit_params.h"
#include "stages/perfusion/perfusion_problem.h"
#include "stages/perfusion/perfusion_voxel_fit.h"

namespace sonopipe {
class ThreadPool;
}

namespace sonopipe::perfusion {

// Settings -> the SI, plain-value form the fit loop and the kernels take.
FitConfig make_fit_config(const FitSettings& settings);

// Called now and then with (voxels done, voxels total); may be empty.
using Progress = std::function<void(std::size_t, std::size_t)>;

// Fits `voxels` tissue curves stored voxel-major (tissue[v * N + i]) into out[v], on the pool.
void fit_voxels_cpu(const FitProblem& problem, const FitSettings& settings, const double* tissue,
                    std::size_t voxels, VoxelFit* out, ThreadPool& pool,
                    const Progress& progress = {});

}  // namespace sonopipe::perfusion
