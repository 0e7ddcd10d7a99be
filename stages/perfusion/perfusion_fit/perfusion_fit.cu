#include "stages/perfusion/perfusion_fit/perfusion_fit.cuh"
#include "stages/common/cuda_check.h"

namespace sonopipe::cuda {
namespace {

using perfusion::Convolution;
using perfusion::FitConfig;
using perfusion::ModelInputs;
using perfusion::VoxelFit;

constexpr int kThreadsPerBlock = 128;
constexpr int kMaxBlockThreads = 256;

// The shared curves (and fft tables) go to shared memory once per block: every voxel reads them
// at data-dependent (delay-dependent) positions.
__device__ ModelInputs stage_inputs_in_shared(const ModelInputs& global, double* shared,
                                              bool with_fft_tables) {
  const int n = global.samples, length = global.fft_length;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    shared[i] = global.arterial[i];
    shared[n + i] = global.portal[i];
  }
  ModelInputs local = global;
  local.arterial = shared;
  local.portal = shared + n;
  if (with_fft_tables) {
    double* tables = shared + 2 * n;
    for (int k = threadIdx.x; k < length; k += blockDim.x) {
      tables[k] = global.fft_cos[k];
      tables[length + k] = global.fft_sin[k];
    }
    local.fft_cos = tables;
    local.fft_sin = tables + length;
  }
  __syncthreads();
  return local;
}

// MinBlocks > 0 caps the registers so that many blocks fit per SM (occupancy vs spills: see
// launch_perfusion_fit and the benchmark's layout table).
template <int MinBlocks>
__global__ void __launch_bounds__(kThreadsPerBlock, MinBlocks)
fit_thread_per_voxel_kernel(ModelInputs inputs, FitConfig config, const double* tissue,
                            int voxel_stride, int voxels, VoxelFit* out, double* scratch) {
  extern __shared__ double shared[];
  const bool fft = config.convolution == Convolution::fft;
  const ModelInputs in = stage_inputs_in_shared(inputs, shared, fft);
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= voxels) return;
  double* voxel_scratch = fft ? scratch + static_cast<std::size_t>(v) * 2 * in.fft_length : nullptr;
  out[v] = perfusion::fit_voxel(in, config, tissue + v, voxel_stride, voxel_scratch);
}

// wang2012's per-block cost: the same butterflies, transfer and tree sum as perfusion::cost_fft,
// spread over the block's threads with a barrier between passes. Every thread returns the cost.
struct BlockFftCost {
  const ModelInputs* in;
  const double* tissue;
  int stride;
  double* re;
  double* im;

  __device__ double operator()(const double* p) const {
    if (!perfusion::parameters_finite(p)) return HUGE_VAL;  // same p in every thread
    const int length = in->fft_length, half = length / 2;
    const perfusion::WeightedInput u = perfusion::weighted_input(p, *in);
    __syncthreads();  // the previous evaluation's readers of im[0] are done
    for (int i = threadIdx.x; i < length; i += blockDim.x) {
      const int n = perfusion::bit_reverse(i, in->fft_log2_length);
      re[i] = n < in->samples ? u(*in, n) : 0.0;
      im[i] = 0.0;
    }
    __syncthreads();
    for (int span = 2; span <= length; span <<= 1) {
      for (int b = threadIdx.x; b < half; b += blockDim.x)
        perfusion::fft_butterfly(re, im, *in, span, b, -1.0);
      __syncthreads();
    }
    const double decay = perfusion::portable_exp(-p[perfusion::k_l] * in->dt_s);
    const double decay_n = perfusion::portable_exp(-p[perfusion::k_l] * in->dt_s * in->samples);
    for (int k = threadIdx.x; k < length; k += blockDim.x)
      perfusion::apply_transfer(re, im, *in, k, decay, decay_n);
    __syncthreads();
    for (int i = threadIdx.x; i < length; i += blockDim.x) {
      const int n = perfusion::bit_reverse(i, in->fft_log2_length);
      if (n > i) {
        double t = re[i]; re[i] = re[n]; re[n] = t;
        t = im[i]; im[i] = im[n]; im[n] = t;
      }
    }
    __syncthreads();
    for (int span = 2; span <= length; span <<= 1) {
      for (int b = threadIdx.x; b < half; b += blockDim.x)
        perfusion::fft_butterfly(re, im, *in, span, b, +1.0);
      __syncthreads();
    }
    for (int i = threadIdx.x; i < half; i += blockDim.x)
      im[i] = perfusion::fft_residual_squared(re, *in, tissue, stride, i);
    __syncthreads();
    for (int s = half / 2; s >= 1; s >>= 1) {
      for (int i = threadIdx.x; i < s; i += blockDim.x) im[i] += im[i + s];
      __syncthreads();
    }
    const double sum = im[0];
    return sum - sum == 0.0 ? sum : HUGE_VAL;
  }
};

__global__ void fit_block_per_voxel_kernel(ModelInputs inputs, FitConfig config,
                                           const double* tissue, int voxel_stride, int voxels,
                                           VoxelFit* out) {
  extern __shared__ double shared[];
  const ModelInputs in = stage_inputs_in_shared(inputs, shared, true);
  double* re = shared + 2 * in.samples + 2 * in.fft_length;
  double* im = re + in.fft_length;
  for (int v = blockIdx.x; v < voxels; v += gridDim.x) {
    const double* curve = tissue + v;
    // Uniform across the block: every thread reads the whole curve.
    if (!perfusion::tissue_finite(curve, voxel_stride, in.samples)) {
      if (threadIdx.x == 0) out[v] = perfusion::skipped_voxel();
      continue;
    }
    double start[perfusion::kParameterCount];  // every thread computes the same start
    perfusion::voxel_start(in, config, curve, voxel_stride, start);
    BlockFftCost cost{&in, curve, voxel_stride, re, im};
    const auto r = nelder_mead<perfusion::kParameterCount>(cost, start, config.optimiser);
    if (threadIdx.x == 0) out[v] = perfusion::finish_voxel(r);
  }
}

__global__ void transpose_kernel(const double* in, double* out, int voxels, int samples) {
  __shared__ double tile[32][33];
  const int v0 = blockIdx.x * 32, i0 = blockIdx.y * 32;
  for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    const int v = v0 + dy, i = i0 + threadIdx.x;
    if (v < voxels && i < samples) tile[dy][threadIdx.x] = in[static_cast<std::size_t>(v) * samples + i];
  }
  __syncthreads();
  for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {
    const int i = i0 + dy, v = v0 + threadIdx.x;
    if (v < voxels && i < samples) out[static_cast<std::size_t>(i) * voxels + v] = tile[threadIdx.x][dy];
  }
}

__global__ void write_fit_rows_kernel(const VoxelFit* fits, double* out, int voxels) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= voxels) return;
  const VoxelFit& f = fits[v];
  double* row = out + static_cast<std::size_t>(v) * 9;
  for (int j = 0; j < perfusion::kParameterCount; ++j) row[j] = f.parameters[j];
  row[5] = f.cost;
  row[6] = f.iterations;
  row[7] = f.evaluations;
  row[8] = f.stop == 0 && !f.skipped ? 1.0 : 0.0;
}

}  // namespace

void write_fit_rows(const VoxelFit* fits, double* out, int voxels, cudaStream_t stream) {
  if (voxels <= 0) return;
  write_fit_rows_kernel<<<(voxels + 255) / 256, 256, 0, stream>>>(fits, out, voxels);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

std::size_t perfusion_fit_scratch_bytes(PerfusionKernel kernel, Convolution convolution,
                                        int fft_length, std::size_t voxels) {
  if (kernel == PerfusionKernel::thread_per_voxel && convolution == Convolution::fft)
    return voxels * 2 * static_cast<std::size_t>(fft_length) * sizeof(double);
  return 0;
}

void launch_perfusion_fit(const ModelInputs& inputs, const FitConfig& config, const double* tissue,
                          int voxel_stride, int voxels, VoxelFit* out, double* scratch,
                          PerfusionKernel kernel, cudaStream_t stream, int min_blocks_per_sm) {
  if (voxels <= 0) return;
  if (kernel == PerfusionKernel::block_per_voxel) {
    if (config.convolution != Convolution::fft)
      throw CudaError("perfusion block_per_voxel kernel implements the fft scheme only");
    const int threads = std::min(kMaxBlockThreads, inputs.fft_length / 2);
    const std::size_t shared =
        (2 * static_cast<std::size_t>(inputs.samples) + 4 * static_cast<std::size_t>(inputs.fft_length)) * sizeof(double);
    const int blocks = std::min(voxels, 1 << 20);
    fit_block_per_voxel_kernel<<<blocks, threads, shared, stream>>>(inputs, config, tissue,
                                                                   voxel_stride, voxels, out);
    SONOPIPE_CUDA_CHECK_LAUNCH();
    return;
  }
  const bool fft = config.convolution == Convolution::fft;
  const std::size_t shared = (2 * static_cast<std::size_t>(inputs.samples) +
                              (fft ? 2 * static_cast<std::size_t>(inputs.fft_length) : 0)) * sizeof(double);
  const int blocks = (voxels + kThreadsPerBlock - 1) / kThreadsPerBlock;
  switch (min_blocks_per_sm) {
    case 6:
      fit_thread_per_voxel_kernel<6><<<blocks, kThreadsPerBlock, shared, stream>>>(
          inputs, config, tissue, voxel_stride, voxels, out, scratch);
      break;
    case 8:
      fit_thread_per_voxel_kernel<8><<<blocks, kThreadsPerBlock, shared, stream>>>(
          inputs, config, tissue, voxel_stride, voxels, out, scratch);
      break;
    case 12:
      fit_thread_per_voxel_kernel<12><<<blocks, kThreadsPerBlock, shared, stream>>>(
          inputs, config, tissue, voxel_stride, voxels, out, scratch);
      break;
    default:
      fit_thread_per_voxel_kernel<1><<<blocks, kThreadsPerBlock, shared, stream>>>(
          inputs, config, tissue, voxel_stride, voxels, out, scratch);
  }
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void transpose_to_time_major(const double* in, double* out, int voxels, int samples,
                             cudaStream_t stream) {
  if (voxels <= 0 || samples <= 0) return;
  const dim3 block(32, 8);
  const dim3 grid((voxels + 31) / 32, (samples + 31) / 32);
  transpose_kernel<<<grid, block, 0, stream>>>(in, out, voxels, samples);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
