// The ensemble beamforming workloads of `sonopipe-bench beamform` (cases pwi_disk_ensemble,
// pwi_disk_compound, fus_ensemble), of `sonopipe-bench doppler --case chain` (tools/bench/
// ensemble_frame.h) and of tools/bench/mach_driver.cu, which times mach's kernel on the same data: one definition of each shape, geometry and random data, so both benchmarks see the
// same work. Plain C++ (no sonopipe types), so the driver compiles with nvcc alone.
//
// pwi_disk: the shape of mach's own benchmark (its BENCHMARKS.md: PyMUST's rotating-disk Doppler
// set PWI_disk.mat): IQ, 128 elements (0.298 mm pitch) x 334 samples x 32 frames of one 0-degree
// plane wave each -> 251 x 251 pixels (x -12.5..12.5 mm, z 10..35 mm, 0.1 mm), F-number 1.0, Tukey
// 0.5, linear interpolation; the recording's own acquisition (its `param`): f_c 5 MHz, f_s 6.6667 MHz
// (4/3 f_c), t0 9.95 us, c 1480 m/s, PRF 10 kHz. The samples are random (the work does not depend on
// them).
// fus: a functional-ultrasound ensemble: 200 frames of one plane wave, 128 elements (0.3 mm) x
// 1024 IQ samples -> 256 x 256 pixels (x -19..19 mm, z 5..45 mm), F-number 1.5, Hann.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sonopipe::bench {

struct EnsembleWorkload {
  const char* name;
  int elements;
  double pitch_m;
  int samples;
  int frames;
  double center_frequency_hz, sampling_frequency_hz, first_sample_s, speed_of_sound_m_per_s, prf_hz;
  int lateral_pixels, depth_pixels;
  double x_min_m, x_max_m, z_min_m, z_max_m;
  double f_number;
  double tukey_alpha;  // the apodisation as a Tukey window (1 = Hann)

  double element_x_m(int e) const { return (e - 0.5 * (elements - 1)) * pitch_m; }
  double pixel_x_m(int i) const { return x_min_m + (x_max_m - x_min_m) * i / (lateral_pixels - 1); }
  double pixel_z_m(int j) const { return z_min_m + (z_max_m - z_min_m) * j / (depth_pixels - 1); }
};

inline constexpr EnsembleWorkload kPwiDisk{"pwi_disk", 128, 0.298e-3, 334, 32, 5e6, 5e6 * 4 / 3, 9.95e-6, 1480.0, 10e3,
                                           251, 251, -12.5e-3, 12.5e-3, 10e-3, 35e-3, 1.0, 0.5};
inline constexpr EnsembleWorkload kFus{"fus", 128, 0.3e-3, 1024, 200, 5.208e6, 2 * 5.208e6, 5e-6, 1540.0, 1e3,
                                       256, 256, -19e-3, 19e-3, 5e-3, 45e-3, 1.5, 1.0};

// The ensemble's IQ samples, [frame, element, sample] x (re, im), standard normal, seed 1.
inline std::vector<float> ensemble_samples(const EnsembleWorkload& w) {
  std::vector<float> data(static_cast<std::size_t>(w.frames) * w.elements * w.samples * 2);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : data) v = normal(rng);
  return data;
}

}  // namespace sonopipe::bench
