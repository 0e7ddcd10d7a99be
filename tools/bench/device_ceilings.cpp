#include "tools/bench/device_ceilings.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#include "tools/bench/shared_gather.h"
#endif

namespace sonopipe::bench {

namespace {

#ifdef SONOPIPE_WITH_CUDA
// Device-to-device copy bandwidth (bytes read + written) measured here.
double measure_copy_gb_per_s() {
  const std::size_t bytes = std::size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  SONOPIPE_CUDA_CHECK(cudaMalloc(&a, bytes));
  SONOPIPE_CUDA_CHECK(cudaMalloc(&b, bytes));
  SONOPIPE_CUDA_CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t start, stop;
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&start));
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < 7; ++r) {
    SONOPIPE_CUDA_CHECK(cudaEventRecord(start));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    SONOPIPE_CUDA_CHECK(cudaEventRecord(stop));
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (times[3] * 1e-3) * 1e-9;
}
#endif

}  // namespace

DeviceCeilings device_ceilings(double tflops, double gb_per_s) {
  DeviceCeilings c;
  if (tflops > 0) c.fp32_tflops = tflops;
  if (gb_per_s > 0) c.copy_gb_per_s = gb_per_s;
  char line[512];
#ifdef SONOPIPE_WITH_CUDA
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) == cudaSuccess && device_count > 0) {
    cudaDeviceProp prop{};
    SONOPIPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (gb_per_s <= 0) c.copy_gb_per_s = measure_copy_gb_per_s();
    c.shared_gather_gb_per_s = measure_shared_gather_gb_per_s();
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    if (tflops <= 0)  // 128 FP32 lanes per SM on Hopper, 2 flops per FMA
      c.fp32_tflops = prop.multiProcessorCount * 128.0 * 2.0 * clock_khz * 1e3 * 1e-12;
    std::snprintf(line, sizeof line,
                  "device: %s, %d SMs; floors use %.1f TFLOP/s FP32 (SMs x 128 x 2 x boost clock) and %.0f GB/s "
                  "(measured D2D copy); shared-memory gather %.0f GB/s (measured)",
                  prop.name, prop.multiProcessorCount, c.fp32_tflops, c.copy_gb_per_s, c.shared_gather_gb_per_s);
    c.description = line;
    return c;
  }
#endif
  std::snprintf(line, sizeof line, "device: none (CPU columns only); floors use %.1f TFLOP/s and %.0f GB/s",
                c.fp32_tflops, c.copy_gb_per_s);
  c.description = line;
  return c;
}

}  // namespace sonopipe::bench
