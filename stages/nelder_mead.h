// Nelder-Mead simplex minimisation exactly as MATLAB's fminsearch (Lagarias et al. 1998) and
// scipy.optimize.fmin, which wang2012 section 2.2.4 follows:
// - initial simplex: x0 plus one vertex per coordinate, that coordinate times 1.05 (0.00025 when
//   it is 0);
// - reflection 1, expansion 2, contraction 0.5, shrink 0.5; expansion accepted when it beats the
//   reflected point; outside contraction accepted when f(xc) <= f(xr), inside when f(xcc) < f(worst);
// - vertices kept sorted by cost with a stable sort (ties keep their previous order);
// - stop when max|f_0 - f_i| <= cost_tolerance AND max|x_i - x_0| <= parameter_tolerance
//   (scipy's test, checked at the top of each iteration), or when the iteration or evaluation
//   budget is spent. Iterations are counted as scipy's `nit` and fminsearch's `iterations`: the
//   initial simplex is iteration 1, so at most max_iterations - 1 updates are made.
// The same code runs on the CPU and inside CUDA kernels (one thread, or a block whose threads all
// take the same path because they see the same costs).
#pragma once

#include "stages/host_device.h"

namespace sonopipe {

struct NelderMeadSettings {
  int max_iterations = 600;           // wang2012: 600
  int max_evaluations = 1000;         // scipy/fminsearch default 200 * n for n = 5
  double cost_tolerance = 1e-8;       // wang2012: 1e-8
  double parameter_tolerance = 1e300; // effectively off (scipy xtol = inf)
};

enum class NelderMeadStop : int { converged = 0, max_evaluations = 1, max_iterations = 2 };

template <int N>
struct NelderMeadResult {
  double x[N];
  double cost;
  int iterations;
  int evaluations;
  NelderMeadStop stop;
};

// cost(const double* x) -> double. x0 has N entries.
template <int N, class Cost>
SONOPIPE_HD NelderMeadResult<N> nelder_mead(Cost& cost, const double* x0,
                                            const NelderMeadSettings& settings) {
  constexpr double rho = 1.0, chi = 2.0, psi = 0.5, sigma = 0.5;
  constexpr double nonzero_delta = 0.05, zero_delta = 0.00025;

  double sim[N + 1][N];
  double fsim[N + 1];
  int order[N + 1];  // order[r] = row of the vertex with rank r (0 = best)
  int evaluations = 0;

  for (int j = 0; j < N; ++j) sim[0][j] = x0[j];
  for (int k = 0; k < N; ++k) {
    for (int j = 0; j < N; ++j) sim[k + 1][j] = x0[j];
    sim[k + 1][k] = x0[k] != 0.0 ? (1.0 + nonzero_delta) * x0[k] : zero_delta;
  }
  for (int k = 0; k <= N; ++k) {
    fsim[k] = cost(sim[k]);
    ++evaluations;
    order[k] = k;
  }

  // Stable insertion sort of `order` by cost (numpy's argsort on <= 16 items is an insertion sort).
  auto sort_vertices = [&]() {
    for (int i = 1; i <= N; ++i) {
      const int row = order[i];
      int r = i - 1;
      while (r >= 0 && fsim[row] < fsim[order[r]]) {
        order[r + 1] = order[r];
        --r;
      }
      order[r + 1] = row;
    }
  };
  sort_vertices();

  int iterations = 1;
  bool converged = false;
  double xbar[N], xr[N], xe[N], xc[N];
  while (evaluations < settings.max_evaluations && iterations < settings.max_iterations) {
    const double* best = sim[order[0]];
    double x_spread = 0.0, f_spread = 0.0;
    bool spread_nan = false;
    for (int r = 1; r <= N; ++r) {
      const double* v = sim[order[r]];
      for (int j = 0; j < N; ++j) {
        const double d = v[j] - best[j];
        const double a = d < 0 ? -d : d;
        if (a != a) spread_nan = true;
        if (a > x_spread) x_spread = a;
      }
      const double df = fsim[order[0]] - fsim[order[r]];
      const double a = df < 0 ? -df : df;
      if (a != a) spread_nan = true;
      if (a > f_spread) f_spread = a;
    }
    if (!spread_nan && x_spread <= settings.parameter_tolerance &&
        f_spread <= settings.cost_tolerance) {
      converged = true;
      break;
    }

    // Centroid of all vertices but the worst, summed in rank order then divided (as numpy does).
    for (int j = 0; j < N; ++j) xbar[j] = sim[order[0]][j];
    for (int r = 1; r < N; ++r)
      for (int j = 0; j < N; ++j) xbar[j] += sim[order[r]][j];
    for (int j = 0; j < N; ++j) xbar[j] /= N;

    double* worst = sim[order[N]];
    double& f_worst = fsim[order[N]];
    for (int j = 0; j < N; ++j) xr[j] = (1 + rho) * xbar[j] - rho * worst[j];
    const double fxr = cost(xr);
    ++evaluations;
    bool shrink = false;
    if (fxr < fsim[order[0]]) {
      for (int j = 0; j < N; ++j) xe[j] = (1 + rho * chi) * xbar[j] - rho * chi * worst[j];
      const double fxe = cost(xe);
      ++evaluations;
      if (fxe < fxr) {
        for (int j = 0; j < N; ++j) worst[j] = xe[j];
        f_worst = fxe;
      } else {
        for (int j = 0; j < N; ++j) worst[j] = xr[j];
        f_worst = fxr;
      }
    } else if (fxr < fsim[order[N - 1]]) {
      for (int j = 0; j < N; ++j) worst[j] = xr[j];
      f_worst = fxr;
    } else if (fxr < f_worst) {
      // Outside contraction.
      for (int j = 0; j < N; ++j) xc[j] = (1 + psi * rho) * xbar[j] - psi * rho * worst[j];
      const double fxc = cost(xc);
      ++evaluations;
      if (fxc <= fxr) {
        for (int j = 0; j < N; ++j) worst[j] = xc[j];
        f_worst = fxc;
      } else {
        shrink = true;
      }
    } else {
      // Inside contraction.
      for (int j = 0; j < N; ++j) xc[j] = (1 - psi) * xbar[j] + psi * worst[j];
      const double fxcc = cost(xc);
      ++evaluations;
      if (fxcc < f_worst) {
        for (int j = 0; j < N; ++j) worst[j] = xc[j];
        f_worst = fxcc;
      } else {
        shrink = true;
      }
    }
    if (shrink) {
      const double* b = sim[order[0]];
      for (int r = 1; r <= N; ++r) {
        double* v = sim[order[r]];
        for (int j = 0; j < N; ++j) v[j] = b[j] + sigma * (v[j] - b[j]);
        fsim[order[r]] = cost(v);
        ++evaluations;
      }
    }
    sort_vertices();
    ++iterations;
  }

  NelderMeadResult<N> result;
  for (int j = 0; j < N; ++j) result.x[j] = sim[order[0]][j];
  result.cost = fsim[order[0]];
  result.iterations = iterations;
  result.evaluations = evaluations;
  result.stop = converged ? NelderMeadStop::converged
                : evaluations >= settings.max_evaluations ? NelderMeadStop::max_evaluations
                                                          : NelderMeadStop::max_iterations;
  return result;
}

}  // namespace sonopipe
