// The per-pixel delay-and-sum of the `beamform` stage, written once for the CPU reference (double)
// and the CUDA kernel (float). Conventions: stages/beamform/beamform_conventions.h.
#pragma once

#include <cmath>
#include <cstdint>

#include "stages/beamform/beamform_conventions.h"
#include "stages/common/spline_math.h"

namespace sonopipe::beamform {

// Everything a pixel needs besides the channel samples. Pointers are host memory for the CPU
// reference and device memory for the kernel.
template <typename Real>
struct DasSetup {
  const Transmit<Real>* transmits;
  const Real* element_x_m;
  const Real* element_z_m;
  const Real* element_delay_s;
  int elements;
  std::int64_t samples;
  Real inverse_c;            // 1 / speed of sound
  Real sampling_frequency_hz;
  Real sample_origin_s;      // time of sample 0
  Real demodulation_frequency_hz;  // 0 for RF
  Window window;
  Real tukey_alpha;
  Real f_number;
  bool cubic;                // natural cubic spline (M coefficients given) instead of linear
};

// Channel line of (transmit, element): its samples as stored (C floats each: RF, or I and Q) and, for
// cubic interpolation, the natural spline's second derivatives m (computed by spline_line()).
template <typename Real, int C>
struct Line {
  const float* y;
  const spline::Vec<Real, C>* m;

  SONOPIPE_HD spline::Vec<Real, C> at(std::int64_t i) const {
    spline::Vec<Real, C> v;
    for (int c = 0; c < C; ++c) v.v[c] = Real(y[i * C + c]);
    return v;
  }
};

// The natural cubic spline of a whole line (stages/common/spline_math.h): writes M for every sample.
// `m` doubles as the solver's d scratch (row i's d sits in slot i - 1 and is read before M_i is
// written, one slot ahead); `c` holds the forward sweep's ratios, one Real per sample.
template <typename Real, int C>
SONOPIPE_HD inline void spline_line(const float* y, std::int64_t samples, spline::Vec<Real, C>* m, Real* c) {
  using V = spline::Vec<Real, C>;
  const Line<Real, C> line{y, nullptr};
  auto scratch_c = [c](std::int64_t slot) -> Real& { return c[slot]; };
  spline::solve_window<Real, C>(
      {0, samples}, {0, samples}, samples, spline::Boundary::natural, [&](std::int64_t i) { return line.at(i); },
      spline::ComputedPivots<Real, decltype(scratch_c)>{scratch_c}, [m](std::int64_t r) -> V& { return m[r]; },
      [m](std::int64_t i, const V& value) { m[i] = value; });
}

// Sample of a line at fractional position `position` (in samples). Linear: the line continued by
// zeros on both sides (so the value falls linearly to 0 within one sample outside [0, samples - 1]
// and is continuous in the delay: float and double agree near the ends too); cubic: the natural
// spline over [0, samples - 1], 0 outside it.
template <typename Real, int C>
SONOPIPE_HD inline spline::Vec<Real, C> interpolate(const Line<Real, C>& line, std::int64_t samples, Real position,
                                                    bool cubic) {
  using V = spline::Vec<Real, C>;
  if (cubic) {
    if (!(position >= Real(0)) || position > Real(samples - 1)) return V::zero();
    std::int64_t i = static_cast<std::int64_t>(position);
    if (i >= samples - 1) i = samples - 2;
    const Real t = position - Real(i);
    return spline::evaluate<Real, C>(line.at(i), line.at(i + 1), line.m[i], line.m[i + 1], t);
  }
  if (!(position > Real(-1)) || !(position < Real(samples))) return V::zero();
  const Real below = floor(position);
  const std::int64_t i = static_cast<std::int64_t>(below);
  const Real t = position - below;
  const V y0 = i >= 0 ? line.at(i) : V::zero(), y1 = i + 1 < samples ? line.at(i + 1) : V::zero();
  return y0 * (Real(1) - t) + y1 * t;
}

// Transmits handled together per pass over the elements: their arrival times (and, for IQ, carrier
// phasors) are computed once per pixel and kept in registers, the receive path once per element.
inline constexpr int kTransmitBatch = 8;

// Sum over transmits [t_begin, t_end) and every element for the pixel at (x, z). `line_at(t, e)`
// returns the Line of transmit t, element e. C = 1: RF; C = 2: IQ (re, im), carrier restored as
// exp(j 2 pi f_dem (t_tx + t_rx)) = exp(j 2 pi f_dem t_tx) exp(j 2 pi f_dem t_rx): the transmit
// phasor multiplies each sample, the receive phasor the element's sum over the batch.
template <typename Real, int C, typename LineAt>
SONOPIPE_HD inline spline::Vec<Real, C> das_pixel(const DasSetup<Real>& s, Real x, Real z, int t_begin, int t_end,
                                                  LineAt line_at) {
  using V = spline::Vec<Real, C>;
  V sum = V::zero();
  const Real two_pi_fdem = Real(6.283185307179586476925) * s.demodulation_frequency_hz;
  for (int batch = t_begin; batch < t_end; batch += kTransmitBatch) {
    const int count = t_end - batch < kTransmitBatch ? t_end - batch : kTransmitBatch;
    Real transmit_s[kTransmitBatch];
    Real phasor_re[kTransmitBatch], phasor_im[kTransmitBatch];
    for (int k = 0; k < count; ++k) {
      const Transmit<Real>& transmit = s.transmits[batch + k];
      transmit_s[k] = transmit_time_s(transmit, x, z, s.inverse_c) + transmit.delay_s;
      if constexpr (C == 2) {
        phasor_re[k] = cos(two_pi_fdem * transmit_s[k]);
        phasor_im[k] = sin(two_pi_fdem * transmit_s[k]);
      }
    }
    for (int e = 0; e < s.elements; ++e) {
      const Real dx = x - s.element_x_m[e], dz = z - s.element_z_m[e];
      const Real weight = apodisation(s.window, s.tukey_alpha, s.f_number, dx, z);
      if (weight == Real(0)) continue;
      const Real receive_s = sqrt(dx * dx + dz * dz) * s.inverse_c + s.element_delay_s[e];
      V element_sum = V::zero();
      for (int k = 0; k < count; ++k) {
        const Real position = (transmit_s[k] + receive_s - s.sample_origin_s) * s.sampling_frequency_hz;
        const V value = interpolate<Real, C>(line_at(batch + k, e), s.samples, position, s.cubic);
        if constexpr (C == 2) {
          element_sum.v[0] += value.v[0] * phasor_re[k] - value.v[1] * phasor_im[k];
          element_sum.v[1] += value.v[0] * phasor_im[k] + value.v[1] * phasor_re[k];
        } else {
          element_sum = element_sum + value;
        }
      }
      if constexpr (C == 2) {
        const Real re = cos(two_pi_fdem * receive_s) * weight, im = sin(two_pi_fdem * receive_s) * weight;
        sum.v[0] += element_sum.v[0] * re - element_sum.v[1] * im;
        sum.v[1] += element_sum.v[0] * im + element_sum.v[1] * re;
      } else {
        sum = sum + element_sum * weight;
      }
    }
  }
  return sum;
}

}  // namespace sonopipe::beamform
