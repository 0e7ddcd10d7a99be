#include "stages/perfusion/perfusion_fit/perfusion_fit_gpu.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit.cuh"
#endif

namespace sonopipe::perfusion {

#ifdef SONOPIPE_WITH_CUDA
namespace {

// Device copies of the shared inputs and fft tables, freed with the object.
struct DeviceProblem {
  double* memory = nullptr;
  ModelInputs view;
  explicit DeviceProblem(const FitProblem& problem) {
    const std::size_t n = problem.samples(), length = problem.fft_length();
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&memory), (2 * n + 2 * length) * sizeof(double)));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(memory, problem.arterial().data(), n * sizeof(double), cudaMemcpyHostToDevice));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(memory + n, problem.portal().data(), n * sizeof(double), cudaMemcpyHostToDevice));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(memory + 2 * n, problem.fft_cos().data(), length * sizeof(double), cudaMemcpyHostToDevice));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(memory + 2 * n + length, problem.fft_sin().data(), length * sizeof(double), cudaMemcpyHostToDevice));
    view = problem.view();
    view.arterial = memory;
    view.portal = memory + n;
    view.fft_cos = memory + 2 * n;
    view.fft_sin = memory + 2 * n + length;
  }
  ~DeviceProblem() { cudaFree(memory); }
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;
};

// One in-flight chunk: pinned host staging, device buffers and a stream.
struct ChunkSlot {
  cudaStream_t stream = nullptr;
  double* host_in = nullptr;
  VoxelFit* host_out = nullptr;
  double* device_in = nullptr;
  double* device_time_major = nullptr;
  VoxelFit* device_out = nullptr;
  double* device_scratch = nullptr;
  cudaEvent_t kernel_start = nullptr, kernel_end = nullptr;
  std::size_t first = 0, count = 0;  // voxels of the chunk in flight (count 0: idle)

  ChunkSlot(std::size_t chunk, std::size_t samples, std::size_t scratch_bytes) {
    SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&kernel_start));
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&kernel_end));
    SONOPIPE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_in), chunk * samples * sizeof(double)));
    SONOPIPE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_out), chunk * sizeof(VoxelFit)));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_in), chunk * samples * sizeof(double)));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_time_major), chunk * samples * sizeof(double)));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_out), chunk * sizeof(VoxelFit)));
    if (scratch_bytes) SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device_scratch), scratch_bytes));
  }
  ~ChunkSlot() {
    cudaStreamSynchronize(stream);
    cudaFree(device_scratch);
    cudaFree(device_out);
    cudaFree(device_time_major);
    cudaFree(device_in);
    cudaFreeHost(host_out);
    cudaFreeHost(host_in);
    cudaEventDestroy(kernel_end);
    cudaEventDestroy(kernel_start);
    cudaStreamDestroy(stream);
  }
  ChunkSlot(const ChunkSlot&) = delete;
  ChunkSlot& operator=(const ChunkSlot&) = delete;
};

cuda::PerfusionKernel kernel_of(GpuLayout layout) {
  return layout == GpuLayout::block_per_voxel ? cuda::PerfusionKernel::block_per_voxel
                                              : cuda::PerfusionKernel::thread_per_voxel;
}

void fit_on_device(int device, const FitProblem& problem, const FitConfig& config,
                   const double* tissue, std::size_t first, std::size_t count, VoxelFit* out,
                   const GpuOptions& options, const std::function<void(std::size_t, double)>& chunk_done) {
  SONOPIPE_CUDA_CHECK(cudaSetDevice(device));
  const std::size_t samples = problem.samples();
  const cuda::PerfusionKernel kernel = kernel_of(options.layout);
  const std::size_t scratch_per_voxel =
      cuda::perfusion_fit_scratch_bytes(kernel, config.convolution, problem.fft_length(), 1);
  std::size_t chunk = options.chunk_voxels;
  if (chunk == 0) {
    // Two slots, each with two curve buffers, results and scratch, in at most half the free memory.
    std::size_t free_bytes = 0, total_bytes = 0;
    SONOPIPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t per_voxel = 2 * samples * sizeof(double) + sizeof(VoxelFit) + scratch_per_voxel;
    chunk = std::clamp<std::size_t>(free_bytes / 4 / per_voxel, 1024, kMaxChunkVoxels);
  }
  chunk = std::max<std::size_t>(1, std::min(chunk, count));
  DeviceProblem device_problem(problem);
  ChunkSlot slots[2] = {ChunkSlot(chunk, samples, scratch_per_voxel * chunk),
                        ChunkSlot(chunk, samples, scratch_per_voxel * chunk)};
  auto collect = [&](ChunkSlot& slot) {
    if (slot.count == 0) return;
    SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(slot.stream));
    std::memcpy(out + slot.first, slot.host_out, slot.count * sizeof(VoxelFit));
    float kernel_ms = 0;
    SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&kernel_ms, slot.kernel_start, slot.kernel_end));
    chunk_done(slot.count, kernel_ms);
    slot.count = 0;
  };
  std::size_t next = first, index = 0;
  const std::size_t end = first + count;
  while (next < end) {
    ChunkSlot& slot = slots[index++ % 2];
    collect(slot);  // its previous chunk: done by now or soon, while the other slot computes
    slot.first = next;
    slot.count = std::min(chunk, end - next);
    next += slot.count;
    std::memcpy(slot.host_in, tissue + slot.first * samples, slot.count * samples * sizeof(double));
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(slot.device_in, slot.host_in, slot.count * samples * sizeof(double),
                                        cudaMemcpyHostToDevice, slot.stream));
    cuda::transpose_to_time_major(slot.device_in, slot.device_time_major, static_cast<int>(slot.count),
                                  static_cast<int>(samples), slot.stream);
    SONOPIPE_CUDA_CHECK(cudaEventRecord(slot.kernel_start, slot.stream));
    cuda::launch_perfusion_fit(device_problem.view, config, slot.device_time_major,
                               static_cast<int>(slot.count), static_cast<int>(slot.count),
                               slot.device_out, slot.device_scratch, kernel, slot.stream,
                               options.min_blocks_per_sm);
    SONOPIPE_CUDA_CHECK(cudaEventRecord(slot.kernel_end, slot.stream));
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(slot.host_out, slot.device_out, slot.count * sizeof(VoxelFit),
                                        cudaMemcpyDeviceToHost, slot.stream));
  }
  collect(slots[index % 2]);
  collect(slots[(index + 1) % 2]);
}

}  // namespace

int visible_gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

void fit_voxels_gpu(const FitProblem& problem, const FitSettings& settings, const double* tissue,
                    std::size_t voxels, VoxelFit* out, const GpuOptions& options,
                    const Progress& progress) {
  if (options.layout == GpuLayout::block_per_voxel && settings.convolution != Convolution::fft)
    throw std::invalid_argument("the block_per_voxel GPU layout implements the fft scheme only");
  std::vector<int> devices = options.devices;
  const int available = visible_gpu_count();
  if (devices.empty())
    for (int d = 0; d < available; ++d) devices.push_back(d);
  if (devices.empty()) throw std::runtime_error("CUDA backend: no GPU visible");
  for (int d : devices)
    if (d < 0 || d >= available)
      throw std::invalid_argument("CUDA backend: device " + std::to_string(d) + " does not exist (" +
                                  std::to_string(available) + " visible)");
  if (voxels == 0) return;
  const auto start = std::chrono::steady_clock::now();
  const FitConfig config = make_fit_config(settings);
  std::atomic<std::size_t> done{0};
  std::mutex progress_mutex;
  double kernel_ms = 0;
  std::size_t chunks = 0;
  auto chunk_done = [&](std::size_t n, double chunk_kernel_ms) {
    const std::size_t now = done.fetch_add(n) + n;
    std::lock_guard lock(progress_mutex);
    kernel_ms += chunk_kernel_ms;
    ++chunks;
    if (progress) progress(now, voxels);
  };
  // Contiguous, equal shares: the voxels of a liver cost about the same each.
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(devices.size());
  const std::size_t share = (voxels + devices.size() - 1) / devices.size();
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const std::size_t first = std::min(voxels, k * share);
    const std::size_t count = std::min(voxels, first + share) - first;
    if (count == 0) continue;
    workers.emplace_back([&, k, first, count] {
      try {
        fit_on_device(devices[k], problem, config, tissue, first, count, out, options, chunk_done);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (options.stats) {
    options.stats->kernel_ms = kernel_ms;
    options.stats->chunks = chunks;
    options.stats->wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
}

#else

int visible_gpu_count() { return 0; }

void fit_voxels_gpu(const FitProblem&, const FitSettings&, const double*, std::size_t, VoxelFit*,
                    const GpuOptions&, const Progress&) {
  throw std::runtime_error("CUDA backend: this build has no CUDA (configure with nvcc present)");
}

#endif

}  // namespace sonopipe::perfusion
