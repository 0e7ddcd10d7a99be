// Delay-and-sum math of the `beamform` stage, shared by the CPU reference (double) and the CUDA
// kernels (float): one source for the transmit delay model, the receive apodisation and the
// sample-position rule. The frame fields follow stages/beamform/channel_conventions.h (USTB's).
//
// For pixel p = (x, z), transmit t and element e (position (x_e, z_e)):
//   tau = t_tx(p, t) + |p - e| / c                                   two-way time on USTB's clock
//   t_tx: plane wave at angle a            (x sin a + z cos a) / c
//         focused, source s with z_s > 0   (|s| - |p - s|) / c before the focus (z < z_s),
//                                          (|s| + |p - s|) / c beyond it
//         diverging, source s with z_s < 0 (|p - s| - |s|) / c
//   sample position  (tau + transmit_delay_t + element_delay_e - sample_origin) * f_s
//     (the recorded sample time of that echo; element delays are lens/cable delays the echo picked
//      up after arriving, so they are added to the geometric time)
//   RF:  value = interpolated channel sample
//   IQ:  value = interpolated baseband sample * exp(+j 2 pi f_dem tau_s), tau_s = t_tx + delay_t +
//        |p - e| / c + element_delay_e the recorded time of the echo (the data were demodulated by
//        exp(-j 2 pi f_dem t) on that clock; this restores the carrier phase)
//   pixel = sum over transmits and elements of w_e(p) * value, w the receive apodisation:
//     aperture half-width h = z / (2 F#) (F# = 0: the whole array, h = infinity); r = |x_e - x| / h;
//     boxcar 1 for r <= 1; Hann 0.5 (1 + cos(pi r)) for r <= 1; Tukey(alpha) 1 for r <= 1 - alpha,
//     0.5 (1 + cos(pi (r - 1 + alpha) / alpha)) for 1 - alpha < r <= 1; 0 beyond.
// IQ output phase: `carrier` (the sum above: the carrier phase restored, a scatterer at depth d_s
//   seen at depth d has phase 2 pi f_c 2 (d - d_s) / c) or `baseband`: the sum times
//   exp(-j 2 pi f_dem 2 d / c), d the pixel's depth (linear grid, lines) or radius (sector): the
//   beamformed line demodulated on its own two-way time t = 2 d / c, as the ARFI chain's IQ is
//   (stages/arfi/arfi_conventions.h: IQ(t) = analytic(rf)(t) exp(-j 2 pi f_dem t)).
// Ensembles: every frame of [frame, transmit, element, sample] is beamformed with the same delays
//   and weights (the geometry is the ensemble's); frame n of the output is the sum over frame n's
//   transmits. The GPU computes each pixel's delays, weights and phasors once for all frames.
// Samples outside the recorded line are 0: linear interpolation runs through them (within one
// sample outside the line the value falls linearly to 0, so a pixel's sum is continuous in its
// delays); cubic interpolation is the natural spline over the line and 0 outside it.
#pragma once

#include <cmath>

#include "stages/common/host_device.h"

namespace sonopipe::beamform {

enum class Wave : int { plane = 0, focused = 1, diverging = 2 };
enum class Window : int { boxcar = 0, hann = 1, tukey = 2 };

template <typename Real>
struct Transmit {
  Wave wave;
  Real angle_rad;     // plane
  Real source_x_m;    // focused / diverging
  Real source_z_m;
  Real delay_s;       // UFF wave.delay, added to every sample time of the transmit
};

// Transmit arrival time at (x, z) (see the top of this file).
template <typename Real>
SONOPIPE_HD inline Real transmit_time_s(const Transmit<Real>& t, Real x, Real z, Real inverse_c) {
  if (t.wave == Wave::plane) return (x * sin(t.angle_rad) + z * cos(t.angle_rad)) * inverse_c;
  const Real source_range = sqrt(t.source_x_m * t.source_x_m + t.source_z_m * t.source_z_m);
  const Real dx = x - t.source_x_m, dz = z - t.source_z_m;
  const Real to_source = sqrt(dx * dx + dz * dz);
  if (t.wave == Wave::diverging) return (to_source - source_range) * inverse_c;
  return (z < t.source_z_m ? source_range - to_source : source_range + to_source) * inverse_c;
}

// cos(pi v) for the windows (v in [0, 1]). On the GPU, float: the hardware cosine (CUDA's __cosf,
// absolute error under 1e-6 on [0, pi]; a weight error that small is far under the 1e-3 of the
// output the CPU/GPU comparison allows) instead of cosf's range reduction.
template <typename Real>
SONOPIPE_HD inline Real cos_pi(Real v) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(Real) == sizeof(float)) return __cosf(3.14159265358979f * v);
#endif
  return cos(Real(3.14159265358979323846) * v);
}

// The three windows are Tukey windows with taper fraction a: boxcar a = 0, Hann a = 1, Tukey alpha.
template <typename Real>
SONOPIPE_HD inline Real window_taper(Window window, Real tukey_alpha) {
  switch (window) {
    case Window::boxcar: return Real(0);
    case Window::hann: return Real(1);
    case Window::tukey: return tukey_alpha;
  }
  return Real(0);
}

// Tukey window with taper a at the normalised lateral distance r, given 1 / a (any value for a = 0).
template <typename Real>
SONOPIPE_HD inline Real tukey_window(Real taper, Real inverse_taper, Real r) {
  if (r > Real(1)) return Real(0);
  if (r <= Real(1) - taper) return Real(1);
  return Real(0.5) * (Real(1) + cos_pi((r - Real(1) + taper) * inverse_taper));
}

// Receive window at the normalised lateral distance r = |x_e - x| / h (top of this file).
template <typename Real>
SONOPIPE_HD inline Real window_at(Window window, Real tukey_alpha, Real r) {
  // 1 / taper: only Tukey's needs a division (boxcar never reaches the cosine, Hann's is 1).
  return tukey_window(window_taper(window, tukey_alpha), window == Window::tukey ? Real(1) / tukey_alpha : Real(1), r);
}

// Baseband output: the cycles of exp(-j 2 pi f_dem 2 d / c) at depth (or radius) d, before the sign.
template <typename Real>
SONOPIPE_HD inline Real baseband_cycles(Real demodulation_frequency_hz, Real depth_m, Real inverse_c) {
  return Real(2) * demodulation_frequency_hz * depth_m * inverse_c;
}

// Receive apodisation weight of an element at lateral distance |dx| for a pixel at depth z.
template <typename Real>
SONOPIPE_HD inline Real apodisation(Window window, Real tukey_alpha, Real f_number, Real dx, Real z) {
  if (f_number <= Real(0)) return Real(1);
  const Real half_width = z / (Real(2) * f_number);
  if (half_width <= Real(0)) return Real(0);
  return window_at(window, tukey_alpha, fabs(dx) / half_width);
}

}  // namespace sonopipe::beamform
