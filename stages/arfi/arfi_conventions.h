// Conventions of the ARFI chain (convert -> upsample -> loupas|kasai -> motion_filter), stated once
// and used by the CPU references, the CUDA kernels, the tests and the simulator (tools/sim/arfi_sim).
//
// Frame. One ARFI set is ONE frame of kind iq:
//   int16 payload [location, ensemble, sample, iq=2]   (I then Q, as the scanner writes them)
//   after `convert`: complex64 [location, ensemble, sample]
//   ensemble index 0 = the pre-push reference line; indices 1..E-1 = the post-push tracks, in
//   acquisition order. Stage outputs use an axis "track" of size E-1: track t = ensemble t+1.
// Acquisition fields (FrameMeta):
//   sampling_frequency_hz       IQ sampling rate of the payload's sample axis (1/T_s before upsample)
//   demodulation_frequency_hz   f_dem (scalar); when it varies with depth, the vector
//                               "demodulation_frequency_hz" (one value per payload sample, Hz)
//                               overrides it and is interpolated linearly onto upsampled grids
//   center_frequency_hz         f_c of the transmitted tracking pulse (sets the default kernel length)
//   speed_of_sound_m_per_s      c
//   vector "ensemble_time_s"    acquisition time of each ensemble entry (length E, seconds, any
//                               origin; the simulator uses 0 = push start, so the reference is
//                               negative). Absent: entries are taken as equally spaced (index).
// Sample axis: spacing in "s" (sample period) or "m" (axial depth step, = c T_s / 2); spacing 0
//   means 1 / sampling_frequency_hz. `upsample` divides the spacing by its factor (and writes the
//   period in "s" when the input had none), so later stages always know their own T_s.
// IQ convention: IQ(t) = analytic(rf)(t) * exp(-j 2 pi f_dem t), sampled every T_s.
// Displacement sign: positive = away from the transducer (deeper), in micrometres.
//   rosenzweig2011 eq. (2), re-derived for this IQ convention (the printed equation is garbled):
//   R_slow = sum_m z_track[m] conj(z_ref[m])                       (lag one in slow time)
//   R_fast = sum_m sum_{line in ref, track} z[m+1] conj(z[m])      (lag one in depth)
//   f_mean = f_dem + arg(R_fast) / (2 pi T_s)
//   loupas: d = -c arg(R_slow) / (4 pi f_mean);   kasai: d = -c arg(R_slow) / (4 pi f_dem)
//   arg() is atan2, never atan(a/b).
// Kernel (axial window of M samples) for output depth j: samples [j - (M-1)/2, j - (M-1)/2 + M),
//   CLIPPED to the line: at the ends the sums run over the samples that exist (edge policy "clip");
//   R_fast pairs need both m and m+1 inside the clipped window.
// Quality: |R_slow| / sqrt(E_ref E_track) in [0, 1] (energies over the same window). A window with
//   zero energy gives displacement NaN and quality 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "stages/common/host_device.h"

namespace sonopipe::arfi {

inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kMetresToMicrometres = 1e6;

// Axis names of the chain.
inline constexpr const char* kLocationAxis = "location";
inline constexpr const char* kEnsembleAxis = "ensemble";
inline constexpr const char* kSampleAxis = "sample";
inline constexpr const char* kTrackAxis = "track";
inline constexpr const char* kDepthAxis = "depth";
inline constexpr int kReferenceEnsembleIndex = 0;

// Frame side vectors and their meaning (see above).
inline constexpr const char* kDemodulationVector = "demodulation_frequency_hz";
inline constexpr const char* kEnsembleTimeVector = "ensemble_time_s";

// Kernel window for output depth `j` on a line of `length` samples, clipped (edge policy above).
struct Window {
  std::int64_t begin;
  std::int64_t end;  // exclusive
};
SONOPIPE_HD inline Window kernel_window(std::int64_t j, std::int64_t kernel_samples,
                                                 std::int64_t length) {
  std::int64_t begin = j - (kernel_samples - 1) / 2;
  std::int64_t end = begin + kernel_samples;
  if (begin < 0) begin = 0;
  if (end > length) end = length;
  return {begin, end};
}

// The final step of both estimators, from the four window sums (rosenzweig2011 eq. (2) in the
// convention above). Real is float on the GPU, double in the CPU reference.
template <typename Real>
struct EstimateInputs {
  Real slow_re, slow_im;   // R_slow
  Real fast_re, fast_im;   // R_fast
  Real energy_ref, energy_track;
};

template <typename Real>
SONOPIPE_HD inline void finish_estimate(const EstimateInputs<Real>& s, Real f_dem_hz,
                                                 Real sample_period_s, Real speed_of_sound_m_per_s,
                                                 bool use_mean_frequency, Real& displacement_um,
                                                 Real& quality) {
  const Real energy = sqrt(s.energy_ref * s.energy_track);
  if (!(energy > Real(0))) {
    displacement_um = Real(NAN);
    quality = Real(0);
    return;
  }
  Real frequency_hz = f_dem_hz;
  if (use_mean_frequency)  // f_mean = f_dem + arg(R_fast) / (2 pi T_s)
    frequency_hz = f_dem_hz + atan2(s.fast_im, s.fast_re) / (Real(2 * kPi) * sample_period_s);
  // d = -c arg(R_slow) / (4 pi f), metres -> micrometres
  displacement_um = -speed_of_sound_m_per_s * atan2(s.slow_im, s.slow_re) /
                    (Real(4 * kPi) * frequency_hz) * Real(kMetresToMicrometres);
  quality = sqrt(s.slow_re * s.slow_re + s.slow_im * s.slow_im) / energy;
}

// IEEE binary16 from float, round to nearest even (the CPU path of the float16 output option; the
// GPU uses __float2half_rn, which rounds the same way).
inline std::uint16_t float_to_half_bits(float value) {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14 + (112 - exponent) ... lands in [14, 24]
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = ((abs - 0x38000000u) >> 13);
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = (std::uint32_t(h) & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t x;
  if (exponent == 0) {
    if (mantissa == 0) {
      x = sign;
    } else {  // subnormal: value = mantissa * 2^-24
      float v = std::ldexp(static_cast<float>(mantissa), -24);
      std::memcpy(&x, &v, 4);
      x |= sign;
    }
  } else if (exponent == 31) {
    x = sign | 0x7f800000u | (mantissa << 13);
  } else {
    x = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &x, 4);
  return out;
}

}  // namespace sonopipe::arfi
