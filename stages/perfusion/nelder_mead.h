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

#include "stages/common/host_device.h"

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

// The search as a state machine that asks for one cost at a time: point() is the next vertex to
// evaluate, accept(cost) advances. Written this way so that a GPU warp whose threads are at
// different steps (reflection, expansion, contraction, shrink) still evaluates its costs at one
// call site, together, instead of one branch after another; the sequence of points and costs is
// exactly that of the usual loop (nelder_mead() below), so results do not depend on the caller.
template <int N>
class NelderMeadSearch {
 public:
  SONOPIPE_HD NelderMeadSearch(const double* x0, const NelderMeadSettings& settings)
      : settings_(settings) {
    for (int j = 0; j < N; ++j) sim_[0][j] = x0[j];
    for (int k = 0; k < N; ++k) {
      for (int j = 0; j < N; ++j) sim_[k + 1][j] = x0[j];
      sim_[k + 1][k] = x0[k] != 0.0 ? (1.0 + kNonzeroDelta) * x0[k] : kZeroDelta;
    }
    for (int k = 0; k <= N; ++k) order_[k] = k;
    step_ = Step::initial;
    index_ = 0;
    point_ = sim_[0];
  }

  SONOPIPE_HD bool done() const { return step_ == Step::done; }
  SONOPIPE_HD const double* point() const { return point_; }

  SONOPIPE_HD void accept(double f) {
    ++evaluations_;
    switch (step_) {
      case Step::initial:
        fsim_[index_] = f;
        if (++index_ <= N) {
          point_ = sim_[index_];
          return;
        }
        sort_vertices();
        next_iteration();
        return;
      case Step::reflect: {
        fxr_ = f;
        if (fxr_ < fsim_[order_[0]]) {
          for (int j = 0; j < N; ++j) xe_[j] = (1 + kRho * kChi) * xbar_[j] - kRho * kChi * worst()[j];
          step_ = Step::expand;
          point_ = xe_;
        } else if (fxr_ < fsim_[order_[N - 1]]) {
          replace_worst(xr_, fxr_);
          end_iteration();
        } else if (fxr_ < fsim_[order_[N]]) {
          for (int j = 0; j < N; ++j) xc_[j] = (1 + kPsi * kRho) * xbar_[j] - kPsi * kRho * worst()[j];
          step_ = Step::contract_outside;
          point_ = xc_;
        } else {
          for (int j = 0; j < N; ++j) xc_[j] = (1 - kPsi) * xbar_[j] + kPsi * worst()[j];
          step_ = Step::contract_inside;
          point_ = xc_;
        }
        return;
      }
      case Step::expand:
        if (f < fxr_) replace_worst(xe_, f);
        else replace_worst(xr_, fxr_);
        end_iteration();
        return;
      case Step::contract_outside:
        if (f <= fxr_) {
          replace_worst(xc_, f);
          end_iteration();
        } else {
          start_shrink();
        }
        return;
      case Step::contract_inside:
        if (f < fsim_[order_[N]]) {
          replace_worst(xc_, f);
          end_iteration();
        } else {
          start_shrink();
        }
        return;
      case Step::shrink:
        fsim_[order_[index_]] = f;
        if (++index_ <= N) {
          shrink_vertex(index_);
          return;
        }
        end_iteration();
        return;
      case Step::done:
        return;
    }
  }

  SONOPIPE_HD NelderMeadResult<N> result() const {
    NelderMeadResult<N> r;
    for (int j = 0; j < N; ++j) r.x[j] = sim_[order_[0]][j];
    r.cost = fsim_[order_[0]];
    r.iterations = iterations_;
    r.evaluations = evaluations_;
    r.stop = converged_ ? NelderMeadStop::converged
             : evaluations_ >= settings_.max_evaluations ? NelderMeadStop::max_evaluations
                                                         : NelderMeadStop::max_iterations;
    return r;
  }

 private:
  static constexpr double kRho = 1.0, kChi = 2.0, kPsi = 0.5, kSigma = 0.5;
  static constexpr double kNonzeroDelta = 0.05, kZeroDelta = 0.00025;
  enum class Step : int { initial, reflect, expand, contract_outside, contract_inside, shrink, done };

  SONOPIPE_HD double* worst() { return sim_[order_[N]]; }

  SONOPIPE_HD void replace_worst(const double* x, double f) {
    double* w = worst();
    for (int j = 0; j < N; ++j) w[j] = x[j];
    fsim_[order_[N]] = f;
  }

  // Stable insertion sort of order_ by cost (numpy's argsort on <= 16 items is an insertion sort).
  SONOPIPE_HD void sort_vertices() {
    for (int i = 1; i <= N; ++i) {
      const int row = order_[i];
      int r = i - 1;
      while (r >= 0 && fsim_[row] < fsim_[order_[r]]) {
        order_[r + 1] = order_[r];
        --r;
      }
      order_[r + 1] = row;
    }
  }

  SONOPIPE_HD void start_shrink() {
    step_ = Step::shrink;
    index_ = 1;
    shrink_vertex(1);
  }

  SONOPIPE_HD void shrink_vertex(int rank) {
    const double* b = sim_[order_[0]];
    double* v = sim_[order_[rank]];
    for (int j = 0; j < N; ++j) v[j] = b[j] + kSigma * (v[j] - b[j]);
    point_ = v;
  }

  SONOPIPE_HD void end_iteration() {
    sort_vertices();
    ++iterations_;
    next_iteration();
  }

  // Top of scipy's loop: limits, the convergence test, then the reflected point.
  SONOPIPE_HD void next_iteration() {
    if (!(evaluations_ < settings_.max_evaluations && iterations_ < settings_.max_iterations)) {
      step_ = Step::done;
      return;
    }
    const double* best = sim_[order_[0]];
    double x_spread = 0.0, f_spread = 0.0;
    bool spread_nan = false;
    for (int r = 1; r <= N; ++r) {
      const double* v = sim_[order_[r]];
      for (int j = 0; j < N; ++j) {
        const double d = v[j] - best[j];
        const double a = d < 0 ? -d : d;
        if (a != a) spread_nan = true;
        if (a > x_spread) x_spread = a;
      }
      const double df = fsim_[order_[0]] - fsim_[order_[r]];
      const double a = df < 0 ? -df : df;
      if (a != a) spread_nan = true;
      if (a > f_spread) f_spread = a;
    }
    if (!spread_nan && x_spread <= settings_.parameter_tolerance &&
        f_spread <= settings_.cost_tolerance) {
      converged_ = true;
      step_ = Step::done;
      return;
    }
    // Centroid of all vertices but the worst, summed in rank order then divided (as numpy does).
    for (int j = 0; j < N; ++j) xbar_[j] = sim_[order_[0]][j];
    for (int r = 1; r < N; ++r)
      for (int j = 0; j < N; ++j) xbar_[j] += sim_[order_[r]][j];
    for (int j = 0; j < N; ++j) xbar_[j] /= N;
    for (int j = 0; j < N; ++j) xr_[j] = (1 + kRho) * xbar_[j] - kRho * worst()[j];
    step_ = Step::reflect;
    point_ = xr_;
  }

  NelderMeadSettings settings_;
  double sim_[N + 1][N];
  double fsim_[N + 1];
  int order_[N + 1];  // order_[r] = row of the vertex with rank r (0 = best)
  double xbar_[N], xr_[N], xe_[N], xc_[N];
  double fxr_ = 0.0;
  const double* point_;
  Step step_;
  int index_ = 0;
  int evaluations_ = 0;
  int iterations_ = 1;  // the initial simplex is iteration 1 (scipy's nit)
  bool converged_ = false;
};

// cost(const double* x) -> double. x0 has N entries.
template <int N, class Cost>
SONOPIPE_HD NelderMeadResult<N> nelder_mead(Cost& cost, const double* x0,
                                            const NelderMeadSettings& settings) {
  NelderMeadSearch<N> search(x0, settings);
  while (!search.done()) search.accept(cost(search.point()));
  return search.result();
}

}  // namespace sonopipe
