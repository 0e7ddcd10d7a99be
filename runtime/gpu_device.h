// Whether a usable CUDA device is present, and why not when it is not. Safe to call in a build
// without CUDA and on machines without a driver.
#pragma once

#include <string>

namespace sonopipe {

struct GpuProbe {
  bool available = false;
  int device_count = 0;
  std::string name;      // of the probed device
  std::string reason;    // one line: why the device can or cannot be used
  double memory_gib = 0;
};

GpuProbe probe_gpu(int device_id = 0);

}  // namespace sonopipe
