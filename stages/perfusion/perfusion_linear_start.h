// Optional start point for the simplex (beyond wang2012, which starts every voxel at the same
// fixed point): for fixed delays the model is linear after integration,
//   C_l(t) = k_a int_0^t C_a(s - tau_a) ds + k_p int_0^t C_p(s - tau_p) ds - k_l int_0^t C_l ds,
// so (k_a, k_p, k_l) follow from a 3x3 linear least-squares fit using the measured C_l (trapezoid
// integrals; the linearised fit of Murase 2007 / Cao 2006). This is done on a small grid of
// delays and the best positive solution starts Nelder-Mead. The integrals of noisy data make the
// linear estimate biased (wang2012 section 1), which is why it only seeds the nonlinear fit.
// Cost: one pass over the samples per grid point (49 points by default, about the work of 49
// cost evaluations). Shared by the CPU path and the kernels.
#pragma once

#include "stages/perfusion/perfusion_model.h"

namespace sonopipe::perfusion {

struct LinearStartGrid {
  double tau_first_s = 0.5;  // not 0: a zero start leaves the simplex flat in that coordinate
  double tau_step_s = 1.0;
  int tau_count = 7;         // 0.5 .. 6.5 s for both delays
};

// Writes the best start (SI) into start_si and returns true; leaves start_si untouched and returns
// false when no grid point gives positive, finite rates.
SONOPIPE_HD inline bool linear_start(const ModelInputs& in, const double* tissue, int stride,
                                     const LinearStartGrid& grid, double* start_si) {
  const double dt = in.dt_s;
  double best_residual = HUGE_VAL;
  bool found = false;
  for (int ia = 0; ia < grid.tau_count; ++ia) {
    const double tau_a_s = grid.tau_first_s + ia * grid.tau_step_s;
    const DelayShift da = delay_shift(tau_a_s, dt, in.samples);
    for (int ip = 0; ip < grid.tau_count; ++ip) {
      const double tau_p_s = grid.tau_first_s + ip * grid.tau_step_s;
      const DelayShift dp = delay_shift(tau_p_s, dt, in.samples);
      // Regressors r = (A, P, -I) and target c = C_l, accumulated as normal equations.
      double g[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, b[3] = {0, 0, 0}, cc = 0;
      double integral_a = 0, integral_p = 0, integral_l = 0;
      double a_prev = delayed_sample(in.arterial, in.samples, da, 0);
      double p_prev = delayed_sample(in.portal, in.samples, dp, 0);
      double l_prev = tissue[0];
      for (int i = 1; i < in.samples; ++i) {
        const double a = delayed_sample(in.arterial, in.samples, da, i);
        const double p = delayed_sample(in.portal, in.samples, dp, i);
        const double c = tissue[i * stride];
        integral_a += 0.5 * dt * (a_prev + a);
        integral_p += 0.5 * dt * (p_prev + p);
        integral_l += 0.5 * dt * (l_prev + c);
        a_prev = a;
        p_prev = p;
        l_prev = c;
        const double r[3] = {integral_a, integral_p, -integral_l};
        for (int x = 0; x < 3; ++x) {
          for (int y = 0; y < 3; ++y) g[x][y] += r[x] * r[y];
          b[x] += r[x] * c;
        }
        cc += c * c;
      }
      // Cramer's rule on the symmetric 3x3 system.
      const double det = g[0][0] * (g[1][1] * g[2][2] - g[1][2] * g[2][1]) -
                         g[0][1] * (g[1][0] * g[2][2] - g[1][2] * g[2][0]) +
                         g[0][2] * (g[1][0] * g[2][1] - g[1][1] * g[2][0]);
      if (!(det != 0.0) || !(det - det == 0.0)) continue;
      double k[3];
      for (int x = 0; x < 3; ++x) {
        double m[3][3];
        for (int row = 0; row < 3; ++row)
          for (int col = 0; col < 3; ++col) m[row][col] = col == x ? b[row] : g[row][col];
        const double dx = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                          m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                          m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
        k[x] = dx / det;
      }
      if (!(k[0] > 0 && k[1] > 0 && k[2] > 0)) continue;
      const double residual = cc - (k[0] * b[0] + k[1] * b[1] + k[2] * b[2]);
      if (residual < best_residual) {
        best_residual = residual;
        start_si[perfusion::k_a] = k[0];
        start_si[perfusion::k_p] = k[1];
        start_si[perfusion::k_l] = k[2];
        start_si[perfusion::tau_a] = tau_a_s;
        start_si[perfusion::tau_p] = tau_p_s;
        found = true;
      }
    }
  }
  return found;
}

}  // namespace sonopipe::perfusion
