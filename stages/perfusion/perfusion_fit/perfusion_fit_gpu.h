// The CUDA backend of the perfusion fit for voxel arrays in host memory (offline tool, benchmark,
// tests): voxels split over all visible GPUs (or the chosen ones), each GPU working through its
// share in chunks sized to its free memory, two streams per GPU so that one chunk's copies overlap
// the other's kernel. Throws std::runtime_error when built without CUDA or no GPU is present.
#pragma once

#include <vector>

#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"

namespace sonopipe::perfusion {

enum class GpuLayout { thread_per_voxel, block_per_voxel };  // see stages/perfusion/perfusion_fit/perfusion_fit.cuh

// Where the time went (filled when GpuOptions::stats is set): kernel time summed over chunks and
// GPUs (device events), and the wall time of the whole call.
struct GpuStats {
  double kernel_ms = 0;
  double wall_ms = 0;
  std::size_t chunks = 0;
};

struct GpuOptions {
  std::vector<int> devices;            // empty: every visible GPU
  GpuLayout layout = GpuLayout::thread_per_voxel;
  std::size_t chunk_voxels = 0;        // 0: from free device memory, at most kMaxChunkVoxels
  int min_blocks_per_sm = 0;           // thread_per_voxel register cap (stages/perfusion/perfusion_fit/perfusion_fit.cuh)
  GpuStats* stats = nullptr;
};

// Chunks of at most this many voxels: small enough that the two streams' kernels overlap each
// other's tails and the pinned staging stays cheap to allocate, large enough to fill the GPU.
constexpr std::size_t kMaxChunkVoxels = 65536;

int visible_gpu_count();  // 0 without CUDA or devices

// Same contract as fit_voxels_cpu (voxel-major input, results in edge units).
void fit_voxels_gpu(const FitProblem& problem, const FitSettings& settings, const double* tissue,
                    std::size_t voxels, VoxelFit* out, const GpuOptions& options,
                    const Progress& progress = {});

}  // namespace sonopipe::perfusion
