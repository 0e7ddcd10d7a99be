// Picks the compute backend: auto = CUDA when this binary has it and a device answers, else the
// CPU. The reason is logged and reported by `status`.
#pragma once

#include <stdexcept>
#include <string>

#include "pipeline/backend.h"
#include "src/config.h"

namespace sonopipe {

struct BackendSelection {
  Backend backend = Backend::cpu;
  std::string reason;       // one line, e.g. "no usable CUDA device: no CUDA-capable device is detected"
  std::string device_name;  // GPU name, or CPU model and thread count
};

// Throws std::runtime_error when CUDA is demanded but cannot be used.
BackendSelection choose_backend(BackendChoice requested, int device_id, int cpu_threads);

}  // namespace sonopipe
