#include "runtime/gpu_device.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sonopipe {

GpuProbe probe_gpu(int device_id) {
  GpuProbe probe;
#ifdef SONOPIPE_WITH_CUDA
  cudaError_t status = cudaGetDeviceCount(&probe.device_count);
  if (status != cudaSuccess) {
    probe.reason = std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error so later probes start clean
    return probe;
  }
  if (device_id < 0 || device_id >= probe.device_count) {
    probe.reason = "CUDA device " + std::to_string(device_id) + " requested but " +
                   std::to_string(probe.device_count) + " present";
    return probe;
  }
  cudaDeviceProp props{};
  status = cudaGetDeviceProperties(&props, device_id);
  if (status != cudaSuccess) {
    probe.reason = std::string("cannot query CUDA device: ") + cudaGetErrorString(status);
    return probe;
  }
  probe.available = true;
  probe.name = props.name;
  probe.memory_gib = static_cast<double>(props.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  probe.reason = "CUDA device " + std::to_string(device_id) + " found: " + probe.name + " (sm_" +
                 std::to_string(props.major) + std::to_string(props.minor) + ")";
#else
  (void)device_id;
  probe.reason = "this binary was built without CUDA";
#endif
  return probe;
}

}  // namespace sonopipe
