// The two ceilings a benchmark's floor is computed from (METHOD: operations over the arithmetic rate,
// bytes over the memory bandwidth): measured or derived on the device, or the given overrides.
#pragma once

#include <string>

namespace sonopipe::bench {

struct DeviceCeilings {
  double fp32_tflops = 60.0;    // H100 FP32 (non-tensor), datasheet order, when no device answers
  double copy_gb_per_s = 3000.0;
  double shared_gather_gb_per_s = 0.0;  // tools/bench/shared_gather.h; 0 without a device
  std::string description;      // one line saying where the numbers come from
};

// tflops / gb_per_s > 0 override; otherwise FP32 = SMs x 128 lanes x 2 flops x boost clock and the
// bandwidth of a 1 GiB device-to-device copy (bytes read + written) measured now; the shared-memory
// gather rate is always measured (it is no floor of METHOD's, a ceiling of gather kernels).
DeviceCeilings device_ceilings(double tflops, double gb_per_s);

}  // namespace sonopipe::bench
