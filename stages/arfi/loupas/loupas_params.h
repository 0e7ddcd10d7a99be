// Parameters of the `loupas` and `kasai` stages, shared by the CPU reference, the CUDA launch and
// the tests. Conventions (signs, units, window edges): stages/arfi/arfi_conventions.h.
#pragma once

#include <cstdint>

namespace sonopipe {

enum class Estimator { loupas, kasai };  // kasai: f_mean replaced by f_dem

struct LoupasParams {
  Estimator estimator = Estimator::loupas;
  std::int64_t kernel_samples = 0;   // M; 0 = from kernel_wavelengths at configure
  double kernel_wavelengths = 1.5;   // default axial kernel, in wavelengths of f_c
  std::int64_t output_step = 1;      // decimation: output depth o is input sample o * step
  bool output_half = false;          // float16 outputs instead of float32
};

// What one launch needs besides pointers (resolved at configure / per frame).
struct LoupasShape {
  std::int64_t locations = 0, ensemble = 0, samples = 0;  // input [location, ensemble, sample]
  std::int64_t depths = 0;                                // output depths = ceil(samples / step)
  std::int64_t kernel_samples = 0;                        // M actually used
  std::int64_t output_step = 1;
  double sample_period_s = 0;                             // T_s of the input sample axis
  double speed_of_sound_m_per_s = 1540;
  bool use_mean_frequency = true;                         // loupas true, kasai false
  bool output_half = false;
};

}  // namespace sonopipe
