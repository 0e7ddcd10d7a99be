// The dual-input single-compartment liver model (wang2012 eqs. (1)-(3)) in SI units, as inline
// math shared by the CPU reference and the CUDA kernels.
//
//   C_l(t) = integral_0^t [k_a C_a(s - tau_a) + k_p C_p(s - tau_p)] exp(-k_l (t - s)) ds
//
// Conventions (stated once, here):
// - Samples are uniform, t_i = t_0 + i dt, i < N; model time starts at the first sample.
// - Delayed inputs are linearly interpolated on the sample grid (as numpy.interp): zero before the
//   first sample, the last sample held past the last one (a negative delay looks past the end).
// - `recursive` (default): the exact integral of the piecewise-linear (delayed, weighted) input by
//   the O(N) recursion of Flouri, Lesnic & Sourbron (MRM 76:998, 2016).
// - `fft`: wang2012's discrete convolution dt * sum_{j<=i} u_j exp(-k_l (i-j) dt), zero-padded to
//   L = a power of two >= 2N and evaluated in the Fourier domain with the analytic transform of the
//   truncated exponential (wang2012 section 2.2.3, H(k)); a rectangle rule, so it differs from the
//   exact integral at coarse sampling.
// - Cost = sum over the N samples of (C_l - model)^2 (wang2012 eq. (3)); any non-finite cost or
//   parameter gives +inf so that the simplex simply moves away from it.
#pragma once

#include <cstdint>

#include "stages/common/host_device.h"
#include "stages/perfusion/perfusion_units.h"
#include "stages/perfusion/portable_exp.h"

namespace sonopipe::perfusion {

enum class Convolution : std::uint8_t { recursive, fft };

// Everything the model needs besides the parameters; plain pointers (host or device memory).
struct ModelInputs {
  const double* arterial = nullptr;  // C_a at the N samples
  const double* portal = nullptr;    // C_p at the N samples
  int samples = 0;                   // N
  double dt_s = 0.0;
  // `fft` only: L and cos/sin(2 pi k / L) for k < L (computed once on the host, shared).
  int fft_length = 0;
  int fft_log2_length = 0;
  const double* fft_cos = nullptr;
  const double* fft_sin = nullptr;
};

// A delay as a shift on the sample grid: shift = tau / dt = whole + fraction, fraction in [0, 1).
struct DelayShift {
  int whole;
  double fraction;
};

SONOPIPE_HD inline DelayShift delay_shift(double tau_s, double dt_s, int samples) {
  double shift = tau_s / dt_s;
  // Shifts beyond the record all look alike (all zero / all the last sample): clamp so the index
  // arithmetic stays in int range.
  const double limit = samples + 1.0;
  if (shift > limit) shift = limit;
  if (shift < -limit) shift = -limit;
  const double whole = ::floor(shift);
  return {static_cast<int>(whole), shift - whole};
}

// curve(t_i - tau) by linear interpolation: weight `fraction` on sample i - whole - 1, the rest on
// sample i - whole; zero before the first sample, the last sample held past the end.
SONOPIPE_HD inline double delayed_sample(const double* curve, int samples, DelayShift d, int i) {
  const int right = i - d.whole;
  if (right < 0 || (right == 0 && d.fraction > 0.0)) return 0.0;
  const int left = right - 1;
  const int last = samples - 1;
  const double right_value = curve[right < last ? right : last];
  const double left_value = left < 0 ? 0.0 : curve[left < last ? left : last];
  return d.fraction * left_value + (1.0 - d.fraction) * right_value;
}

// u_i = k_a C_a(t_i - tau_a) + k_p C_p(t_i - tau_p): the input f(t) of wang2012 eq. (2).
struct WeightedInput {
  double k_arterial, k_portal;
  DelayShift arterial_shift, portal_shift;

  SONOPIPE_HD double operator()(const ModelInputs& in, int i) const {
    return k_arterial * delayed_sample(in.arterial, in.samples, arterial_shift, i) +
           k_portal * delayed_sample(in.portal, in.samples, portal_shift, i);
  }
};

SONOPIPE_HD inline bool parameters_finite(const double* p) {
  for (int j = 0; j < kParameterCount; ++j)
    if (!(p[j] - p[j] == 0.0)) return false;  // false for NaN and +-inf
  return true;
}

SONOPIPE_HD inline WeightedInput weighted_input(const double* p, const ModelInputs& in) {
  return {p[k_a], p[k_p], delay_shift(p[tau_a], in.dt_s, in.samples),
          delay_shift(p[tau_p], in.dt_s, in.samples)};
}

// Coefficients of one recursion step for x = k_l dt: E = exp(-x), a = (1 - E) / x and
// b = (x - 1 + E) / x^2 (Flouri 2016: E0 = 1 - E, E1 = x - E0), by series for small |x| where the
// closed forms cancel.
struct RecursionStep {
  double decay, a, b;
};

SONOPIPE_HD inline RecursionStep recursion_step(double k_l_per_s, double dt_s) {
  const double x = k_l_per_s * dt_s;
  RecursionStep s;
  s.decay = portable_exp(-x);
  if (x < 1e-2 && x > -1e-2) {
    // a = sum_n (-x)^n / (n+1)!, b = sum_n (-x)^n / (n+2)!; truncation < 1e-17 for |x| < 0.01.
    s.a = 1.0 + x * (-1.0 / 2 + x * (1.0 / 6 + x * (-1.0 / 24 + x * (1.0 / 120 + x * (-1.0 / 720)))));
    s.b = 1.0 / 2 + x * (-1.0 / 6 + x * (1.0 / 24 + x * (-1.0 / 120 + x * (1.0 / 720 + x * (-1.0 / 5040)))));
  } else {
    const double e0 = 1.0 - s.decay;
    s.a = e0 / x;
    s.b = (x - e0) / (x * x);
  }
  return s;
}

// The `recursive` model: sink(i, C_l(t_i)) for i < N. p in SI units.
// Flouri 2016: F_i = E F_{i-1} + u_{i-1} E0 + (u_i - u_{i-1}) E1 / x, integral = F_i / k_l, written
// here directly for the integral I_i = F_i / k_l so that k_l -> 0 needs no division by k_l.
template <class Sink>
SONOPIPE_HD void recursive_model(const double* p, const ModelInputs& in, Sink&& sink) {
  const WeightedInput u = weighted_input(p, in);
  const RecursionStep step = recursion_step(p[k_l], in.dt_s);
  const double dt = in.dt_s;
  double integral = 0.0;
  double u_previous = u(in, 0);
  sink(0, integral);
  for (int i = 1; i < in.samples; ++i) {
    const double u_now = u(in, i);
    integral = step.decay * integral + dt * (step.a * u_previous + step.b * (u_now - u_previous));
    sink(i, integral);
    u_previous = u_now;
  }
}

// Cost of the `recursive` model against tissue samples tissue[i * stride] (wang2012 eq. (3)),
// summed in sample order.
SONOPIPE_HD inline double cost_recursive(const double* p, const ModelInputs& in,
                                         const double* tissue, int stride) {
  if (!parameters_finite(p)) return HUGE_VAL;
  double sum = 0.0;
  recursive_model(p, in, [&](int i, double model) {
    const double r = tissue[i * stride] - model;
    sum += r * r;
  });
  return sum - sum == 0.0 ? sum : HUGE_VAL;
}

// ---- `fft`: radix-2 transforms whose every butterfly is one call of fft_butterfly(), so that a
// ---- sequential loop (CPU) and a block of threads (CUDA) compute bit-identical values.

SONOPIPE_HD inline int bit_reverse(int i, int bits) {
  int r = 0;
  for (int b = 0; b < bits; ++b) {
    r = (r << 1) | (i & 1);
    i >>= 1;
  }
  return r;
}

// Butterfly `b` (< L/2) of the stage with span `length` (2, 4, ..., L) on (re, im) in bit-reversed
// order; sign = -1 forward, +1 inverse.
SONOPIPE_HD inline void fft_butterfly(double* re, double* im, const ModelInputs& in, int length,
                                      int b, double sign) {
  const int half = length >> 1;
  const int j = b % half;
  const int top = (b / half) * length + j;
  const int bottom = top + half;
  const int t = j * (in.fft_length / length);
  const double wr = in.fft_cos[t], wi = sign * in.fft_sin[t];
  const double xr = re[bottom] * wr - im[bottom] * wi;
  const double xi = re[bottom] * wi + im[bottom] * wr;
  re[bottom] = re[top] - xr;
  im[bottom] = im[top] - xi;
  re[top] = re[top] + xr;
  im[top] = im[top] + xi;
}

// Frequency bin k times H(k) = sum_{n<N} (E W^k)^n = (1 - E^N W^{kN}) / (1 - E W^k),
// W = exp(-2 pi i / L): wang2012's analytic transform of h(iT) = exp(-k_l i T) zero-padded (there
// for L = 2N, where W^{kN} = (-1)^k).
SONOPIPE_HD inline void apply_transfer(double* re, double* im, const ModelInputs& in, int k,
                                       double decay, double decay_n) {
  const int kn = static_cast<int>((static_cast<long long>(k) * in.samples) % in.fft_length);
  const double num_r = 1.0 - decay_n * in.fft_cos[kn];
  const double num_i = decay_n * in.fft_sin[kn];
  const double den_r = 1.0 - decay * in.fft_cos[k];
  const double den_i = decay * in.fft_sin[k];
  const double den = den_r * den_r + den_i * den_i;
  const double h_r = (num_r * den_r + num_i * den_i) / den;
  const double h_i = (num_i * den_r - num_r * den_i) / den;
  const double xr = re[k] * h_r - im[k] * h_i;
  const double xi = re[k] * h_i + im[k] * h_r;
  re[k] = xr;
  im[k] = xi;
}

// Squared residual of sample i for the tree sum (zero beyond N).
SONOPIPE_HD inline double fft_residual_squared(const double* model_re, const ModelInputs& in,
                                               const double* tissue, int stride, int i) {
  if (i >= in.samples) return 0.0;
  const double scale = in.dt_s / in.fft_length;  // inverse transform 1/L times the rectangle dt
  const double r = tissue[i * stride] - model_re[i] * scale;
  return r * r;
}

// The `fft` model into model[i], i < N; scratch holds 2 L doubles (re, im). p in SI units.
SONOPIPE_HD inline void fft_model_transform(const double* p, const ModelInputs& in, double* re,
                                            double* im) {
  const WeightedInput u = weighted_input(p, in);
  const int length = in.fft_length;
  for (int i = 0; i < length; ++i) {
    const int n = bit_reverse(i, in.fft_log2_length);
    re[i] = n < in.samples ? u(in, n) : 0.0;
    im[i] = 0.0;
  }
  for (int span = 2; span <= length; span <<= 1)
    for (int b = 0; b < length / 2; ++b) fft_butterfly(re, im, in, span, b, -1.0);
  const double decay = portable_exp(-p[k_l] * in.dt_s);
  const double decay_n = portable_exp(-p[k_l] * in.dt_s * in.samples);
  for (int k = 0; k < length; ++k) apply_transfer(re, im, in, k, decay, decay_n);
  // Inverse: bit-reverse permutation in place, then the same butterflies with conjugate twiddles.
  for (int i = 0; i < length; ++i) {
    const int n = bit_reverse(i, in.fft_log2_length);
    if (n > i) {
      double t = re[i]; re[i] = re[n]; re[n] = t;
      t = im[i]; im[i] = im[n]; im[n] = t;
    }
  }
  for (int span = 2; span <= length; span <<= 1)
    for (int b = 0; b < length / 2; ++b) fft_butterfly(re, im, in, span, b, +1.0);
}

// Cost of the `fft` model; the squared residuals are summed as a binary tree over L/2 entries,
// the order a block reduction uses. scratch: 2 L doubles.
SONOPIPE_HD inline double cost_fft(const double* p, const ModelInputs& in, const double* tissue,
                                   int stride, double* scratch) {
  if (!parameters_finite(p)) return HUGE_VAL;
  double* re = scratch;
  double* im = scratch + in.fft_length;
  fft_model_transform(p, in, re, im);
  const int half = in.fft_length / 2;  // >= N
  for (int i = 0; i < half; ++i) im[i] = fft_residual_squared(re, in, tissue, stride, i);
  for (int s = half / 2; s >= 1; s >>= 1)
    for (int i = 0; i < s; ++i) im[i] += im[i + s];
  const double sum = im[0];
  return sum - sum == 0.0 ? sum : HUGE_VAL;
}

}  // namespace sonopipe::perfusion
