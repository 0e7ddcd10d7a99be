// Picks the compute backend: auto = CUDA when this binary has it and a device answers, else the
// CPU. The reason is logged and reported by `status`.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "sdk/backend.h"
#include "daemon/config.h"

namespace sonopipe {

struct BackendSelection {
  Backend backend = Backend::cpu;
  std::string reason;       // one line, e.g. "no usable CUDA device: no CUDA-capable device is detected"
  std::string device_name;  // GPU name, or CPU model and thread count
};

// Throws std::runtime_error when CUDA is demanded but cannot be used.
BackendSelection choose_backend(BackendChoice requested, int device_id, int cpu_threads);

// `cuda_wait: block`: threads of this process that wait for a device (a lane's completion thread in
// cudaEventSynchronize) sleep until it is done instead of spinning on a CPU
// (cudaDeviceScheduleBlockingSync on every visible device). Returns whether it was applied (false
// without CUDA or devices). Throws std::runtime_error when a device refuses it.
bool use_blocking_cuda_waits();

// The devices one pipeline runs on: its own `devices`, else the config's `devices`, else the
// config's single `device`; `all` = 0 .. visible_devices-1. The CPU backend has one lane ({0}).
// Throws std::runtime_error naming the pipeline when a listed device is not visible.
std::vector<int> resolve_devices(const PipelineConfig& pipeline, const DaemonConfig& config, Backend backend,
                                 int visible_devices);

}  // namespace sonopipe
