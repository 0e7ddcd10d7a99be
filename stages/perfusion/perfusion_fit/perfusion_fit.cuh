// Kernels of the perfusion fit (stages/perfusion/perfusion_fit/perfusion_fit.h): voxelwise Nelder-Mead on the dual-input
// single-compartment model, in double, with the model and optimiser code shared with the CPU path
// (stages/perfusion/perfusion_model.h, stages/perfusion/nelder_mead.h). Built with --fmad=false so that the kernels and
// the CPU reference round identically: same costs, same simplex paths, same iteration counts.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "stages/perfusion/perfusion_voxel_fit.h"

namespace sonopipe::cuda {

// How voxels map onto the GPU.
// - thread_per_voxel (used by default): one thread runs one voxel's whole search with the O(N)
//   recursion (or the fft scheme in per-thread global scratch). Many voxels per warp, no block
//   synchronisation.
// - block_per_voxel: wang2012's layout; one block per voxel, the cost evaluated across threads
//   (radix-2 block FFT, tree reduction), every thread taking the same simplex path. `fft` only.
// Measured on an H100 (2026-11-22, sonopipe-bench perfusion --suites layouts, 100,000 noisy
// voxels x 48 samples): thread/recursive 0.00090 ms/voxel, block/fft 0.0066, thread/fft 0.041.
// Thread per voxel wins by 7x: the recursion costs ~N dependent steps per evaluation, while the
// block FFT spends 2 log2(L) + log2(L/2) barriers and L log2 L butterflies on 2N zero-padded
// points and leaves most of each block idle at N = 48 (64 threads, one voxel); many independent
// voxels per SM hide the recursion's latency better than one voxel's threads hide the barriers.
// The fft scheme per thread is slow because its 2L-double scratch lives in local memory.
enum class PerfusionKernel { thread_per_voxel, block_per_voxel };

// Device bytes of per-voxel scratch `launch_perfusion_fit` needs for `voxels` voxels
// (thread_per_voxel with fft: 2 L doubles per voxel; otherwise 0).
std::size_t perfusion_fit_scratch_bytes(PerfusionKernel kernel, perfusion::Convolution convolution,
                                        int fft_length, std::size_t voxels);

// Fits `voxels` curves stored time-major: tissue[i * voxel_stride + v] (coalesced per sample).
// `inputs` points to device copies of the curves and fft tables. Results in edge units into out[v].
// min_blocks_per_sm (thread_per_voxel only): 0 lets the compiler choose the registers (140, 3
// blocks of 128 per SM); 6, 8 or 12 cap them (85 / 64 / 40 registers; 40 spills) for occupancy.
void launch_perfusion_fit(const perfusion::ModelInputs& inputs, const perfusion::FitConfig& config,
                          const double* tissue, int voxel_stride, int voxels,
                          perfusion::VoxelFit* out, double* scratch, PerfusionKernel kernel,
                          cudaStream_t stream, int min_blocks_per_sm = 0);

// out[i * voxels + v] = in[v * samples + i]: voxel-major batches (the wire layout) to time-major.
void transpose_to_time_major(const double* in, double* out, int voxels, int samples,
                             cudaStream_t stream);

// out[v * 9 + c]: the stage's row per voxel (stages/perfusion/perfusion_fit/perfusion_fit.h: 5 parameters, cost,
// iterations, evaluations, converged).
void write_fit_rows(const perfusion::VoxelFit* fits, double* out, int voxels, cudaStream_t stream);

}  // namespace sonopipe::cuda
