#include "daemon/backend_choice.h"

#include <fstream>
#include <thread>

#include "runtime/gpu_device.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sonopipe {
namespace {

std::string cpu_description(int cpu_threads) {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  int threads = cpu_threads > 0 ? cpu_threads : static_cast<int>(std::thread::hardware_concurrency());
  return model + ", " + std::to_string(threads) + " threads";
}

}  // namespace

BackendSelection choose_backend(BackendChoice requested, int device_id, int cpu_threads) {
  BackendSelection selection;
  if (requested == BackendChoice::cpu) {
    selection.reason = "cpu requested";
    selection.device_name = cpu_description(cpu_threads);
    return selection;
  }
  GpuProbe probe = probe_gpu(device_id);
  if (probe.available) {
    selection.backend = Backend::cuda;
    selection.reason = (requested == BackendChoice::cuda ? "cuda requested; " : "auto; ") + probe.reason;
    selection.device_name = probe.name;
    return selection;
  }
  if (requested == BackendChoice::cuda)
    throw std::runtime_error("backend cuda requested but unavailable: " + probe.reason);
  selection.reason = "auto; " + probe.reason;
  selection.device_name = cpu_description(cpu_threads);
  return selection;
}

bool use_blocking_cuda_waits() {
#ifdef SONOPIPE_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) return false;
  for (int d = 0; d < devices; ++d)
    if (cudaSetDevice(d) != cudaSuccess || cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess)
      throw std::runtime_error("cuda_wait: block: device " + std::to_string(d) + " refused blocking waits");
  cudaSetDevice(0);
  return devices > 0;
#else
  return false;
#endif
}

std::vector<int> resolve_devices(const PipelineConfig& pipeline, const DaemonConfig& config, Backend backend,
                                 int visible_devices) {
  if (backend == Backend::cpu) return {0};
  const DeviceSelection& selection = pipeline.devices.given() ? pipeline.devices : config.devices;
  std::vector<int> devices = selection.ids;
  if (selection.all)
    for (int d = 0; d < visible_devices; ++d) devices.push_back(d);
  if (!selection.given()) devices = {config.device};
  for (int d : devices)
    if (d >= visible_devices)
      throw std::runtime_error("pipeline " + pipeline.name + ": device " + std::to_string(d) +
                               " is not visible (" + std::to_string(visible_devices) + " CUDA devices)");
  if (devices.empty()) throw std::runtime_error("pipeline " + pipeline.name + ": no CUDA device visible");
  return devices;
}

}  // namespace sonopipe
