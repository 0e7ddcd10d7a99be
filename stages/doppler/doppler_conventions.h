// Conventions of the ultrafast Doppler chain (beamform ensembles -> clutter_filter -> doppler),
// stated once and used by the CPU references, the CUDA kernels, the tests, the simulator
// (tools/sim/flow_sim) and docs/doppler.md.
//
// Ensemble. One Doppler ensemble is ONE frame: the beamformed IQ of N consecutive acquisitions
//   complex64 [frame, lateral, axial]   (or [frame, angle, radius] on a sector grid)
//   frame index n = 0..N-1 in acquisition order (slow time); the last axis (depth) varies fastest.
//   Casorati matrix (clutter_filter): S[p, n] = x[n, p], p = lateral * axial_size + axial (pixels x
//   frames). In memory the ensemble is column-major S (leading dimension P), as cuBLAS reads it.
// Slow time (pulse repetition frequency PRF = 1 / T between consecutive frames), in this order:
//   1. frame vector "ensemble_time_s" with N values (seconds, any origin; the same name as the ARFI
//      chain's): T = (t[N-1] - t[0]) / (N - 1); the spacing must be uniform to 1e-3 relative
//      (the lag-one estimator assumes it), else the frame is refused;
//   2. the `frame` axis spacing when its unit is "s";
//   otherwise the stage refuses the input at configure (it cannot know the PRF).
// IQ convention: beamformed IQ as the beamform stage writes it (stages/beamform/beamform_conventions.h):
//   the carrier phase is restored, so a scatterer at depth z_s seen at pixel depth z has phase
//   2 k_c (z - z_s), k_c = 2 pi f_c / c. A scatterer moving away from the probe (z_s growing) turns
//   the slow-time phase NEGATIVE.
// Velocity sign: positive = away from the transducer (deeper), the ARFI chain's displacement sign
//   (stages/arfi/arfi_conventions.h), in m/s. Kasai's lag-one autocorrelator (kasai1985):
//     R1 = sum_{n=0}^{N-2} x[n+1] conj(x[n])     (optionally summed over a box of pixels)
//     v  = -c PRF arg(R1) / (4 pi f_c)           arg() is atan2
//   f_c = center_frequency_hz of the frame (demodulation_frequency_hz when the frame has no f_c).
//   Nyquist velocity v_N = c PRF / (4 f_c): estimates lie in [-v_N, v_N) and alias beyond.
// Power Doppler: P = (1/N) sum_n |x[n]|^2 (linear, the square of the IQ unit); in dB
//   10 log10(P) with P = 0 written as kPowerFloorDb. The velocity of a pixel with R1 = 0, or whose
//   power lies more than power_threshold_db below the frame's largest power, is NaN (no estimate).
#pragma once

#include <cmath>
#include <cstdint>

#include "stages/common/host_device.h"

namespace sonopipe::doppler {

inline constexpr double kPi = 3.14159265358979323846;

// Axis names of an ensemble (the beamform stage's output with a leading frame axis).
inline constexpr const char* kFrameAxis = "frame";
// Frame side vector: acquisition time of each frame of the ensemble (seconds).
inline constexpr const char* kEnsembleTimeVector = "ensemble_time_s";
// Uniform slow-time spacing required of ensemble_time_s (relative deviation of any step from T).
inline constexpr double kUniformSpacingTolerance = 1e-3;
// dB written for zero power.
inline constexpr double kPowerFloorDb = -300.0;
// Result header attribute of the mean_bmode stage's output: the number of frames averaged.
inline constexpr const char* kMeanOfFramesAttribute = "mean_of_frames";
// Result header attribute of the doppler stage's velocity output (and its others): v_N in m/s.
inline constexpr const char* kNyquistAttribute = "nyquist_velocity_m_per_s";

// v_N = c PRF / (4 f_c)
inline double nyquist_velocity_m_per_s(double speed_of_sound_m_per_s, double prf_hz, double center_frequency_hz) {
  return speed_of_sound_m_per_s * prf_hz / (4 * center_frequency_hz);
}

// The factor that turns arg(R1) (radians) into velocity (m/s): v = -c PRF / (4 pi f_c) arg(R1).
inline double velocity_per_radian(double speed_of_sound_m_per_s, double prf_hz, double center_frequency_hz) {
  return -speed_of_sound_m_per_s * prf_hz / (4 * kPi * center_frequency_hz);
}

// Kasai's estimate from the lag-one sum (Real is float on the GPU, double in the CPU reference).
// A pixel without estimate (R1 = 0 or below the power threshold) gets NaN.
template <typename Real>
SONOPIPE_HD inline Real kasai_velocity(Real r1_re, Real r1_im, Real velocity_per_rad, bool above_threshold) {
  if (!above_threshold || (r1_re == Real(0) && r1_im == Real(0))) return Real(NAN);
  return velocity_per_rad * atan2(r1_im, r1_re);
}

template <typename Real>
SONOPIPE_HD inline Real power_db(Real power) {
  return power > Real(0) ? Real(10) * log10(power) : Real(kPowerFloorDb);
}

}  // namespace sonopipe::doppler
