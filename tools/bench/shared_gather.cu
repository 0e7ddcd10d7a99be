#include "tools/bench/shared_gather.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "stages/common/cuda_check.h"

namespace sonopipe::bench {

namespace {

constexpr int kEntries = 1024;   // float4 entries in the tile (16 KiB)
constexpr int kThreads = 256;
constexpr int kSteps = 4096;     // reads per thread
constexpr int kChains = 4;       // independent reads in flight per thread

// Each thread reads kSteps entries at addresses that depend on what it read before (so nothing can
// be hoisted or merged), lanes of a warp on consecutive entries (no bank conflicts: the best case),
// and adds them up: a few instructions per 16-byte read, so the load path, not issue, is the limit.
__global__ void __launch_bounds__(kThreads) shared_gather(float* sink, int steps) {
  __shared__ float4 tile[kEntries];
  for (int k = threadIdx.x; k < kEntries; k += kThreads) tile[k] = make_float4(0.0f, 1.0f, 2.0f, 0.0f);
  __syncthreads();
  unsigned index[kChains];
  float sum[kChains];
  for (int c = 0; c < kChains; ++c) index[c] = threadIdx.x + c * 64, sum[c] = 0.0f;
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      const float4 v = tile[index[c] & (kEntries - 1)];
      sum[c] += v.x + v.y + v.z;
      index[c] += 32 + __float_as_uint(v.w);  // data-dependent (adds 0), lanes stay consecutive
    }
  }
  float total = 0.0f;
  for (int c = 0; c < kChains; ++c) total += sum[c];
  if (total == -1.0f) sink[threadIdx.x] = total;  // never true; keeps the reads alive
}

}  // namespace

double measure_shared_gather_gb_per_s() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 0.0;
  cudaDeviceProp prop{};
  SONOPIPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int blocks = prop.multiProcessorCount * (prop.maxThreadsPerMultiProcessor / kThreads);
  float* sink = nullptr;
  SONOPIPE_CUDA_CHECK(cudaMalloc(&sink, kThreads * sizeof(float)));
  cudaEvent_t start, stop;
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&start));
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < 8; ++r) {  // the first is a warm-up
    SONOPIPE_CUDA_CHECK(cudaEventRecord(start));
    shared_gather<<<blocks, kThreads>>>(sink, kSteps);
    SONOPIPE_CUDA_CHECK_LAUNCH();
    SONOPIPE_CUDA_CHECK(cudaEventRecord(stop));
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r > 0) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(sink);
  const double bytes = double(blocks) * kThreads * kSteps * kChains * sizeof(float4);
  return bytes / (times[times.size() / 2] * 1e-3) * 1e-9;
}

}  // namespace sonopipe::bench
