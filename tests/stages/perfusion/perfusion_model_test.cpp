// The perfusion forward model (stages/perfusion/perfusion_model.h): portable exp, delayed inputs, the
// `recursive` scheme against closed forms and a fine numerical integral, `fft` against the direct
// O(N^2) discrete sum, and the madym DISCM calibration curve as an independent check.
#include "stages/perfusion/perfusion_model.h"

#include <cmath>
#include <random>

#include "stages/perfusion/perfusion_problem.h"
#include "tests/stages/perfusion/perfusion_test_data.h"
#include "tools/sim/perfusion_sim.h"

using namespace sonopipe;
using namespace sonopipe::perfusion;

namespace {

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// The reference for `fft`: wang2012's discrete convolution summed directly, O(N^2).
std::vector<double> direct_discrete_convolution(const double* p, const FitProblem& problem) {
  const ModelInputs in = problem.view();
  const WeightedInput u = weighted_input(p, in);
  std::vector<double> out(in.samples);
  for (int i = 0; i < in.samples; ++i) {
    long double sum = 0;
    for (int j = 0; j <= i; ++j)
      sum += static_cast<long double>(u(in, j)) * std::exp(-static_cast<long double>(p[k_l]) * (i - j) * in.dt_s);
    out[i] = static_cast<double>(sum * in.dt_s);
  }
  return out;
}

// The exact integral of the piecewise-linear interpolant of u_i against exp(-k (t - s)), by
// composite Simpson on `fine` sub-intervals per sample step (error ~ (dt/fine)^4).
std::vector<double> fine_integral(const double* p, const FitProblem& problem, int fine) {
  const ModelInputs in = problem.view();
  const WeightedInput u = weighted_input(p, in);
  std::vector<double> samples(in.samples), out(in.samples, 0.0);
  for (int i = 0; i < in.samples; ++i) samples[i] = u(in, i);
  const double h = in.dt_s / fine;
  for (int i = 1; i < in.samples; ++i) {
    const double t = i * in.dt_s;
    long double sum = 0;
    for (int j = 0; j < i; ++j) {
      for (int m = 0; m < fine; ++m) {
        auto f = [&](double s) {
          const double w = (s - j * in.dt_s) / in.dt_s;
          const double value = samples[j] + w * (samples[j + 1] - samples[j]);
          return value * std::exp(-p[k_l] * (t - s));
        };
        const double a = j * in.dt_s + m * h;
        sum += (f(a) + 4 * f(a + h / 2) + f(a + h)) * h / 6;
      }
    }
    out[i] = static_cast<double>(sum);
  }
  return out;
}

FitProblem simulated_problem(int samples, double duration_s) {
  sim::PerfusionSimSettings s;
  s.samples = samples;
  s.duration_s = duration_s;
  std::vector<double> t, a, p;
  sim::simulate_inputs(s, t, a, p);
  return FitProblem(t, a, p);
}

std::array<double, 5> si(std::array<double, 5> edge) {
  to_si(edge.data());
  return edge;
}

}  // namespace

TEST_CASE("portable_exp agrees with std::exp to a few ulp and handles the edges", "[perfusion_model]") {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> x(-740.0, 709.0);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double v = i < 1000 ? (i - 500) * 1e-3 : x(rng);
    const double e = std::exp(v);
    if (e < 1e-300) continue;  // subnormal results carry fewer bits
    worst = std::max(worst, std::abs(portable_exp(v) - e) / e);
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 4.5e-16);  // 2 ulp of 2^-52 relative spacing
  CHECK(portable_exp(0.0) == 1.0);
  CHECK(portable_exp(1000.0) == HUGE_VAL);
  CHECK(portable_exp(-1000.0) == 0.0);
  CHECK(std::isnan(portable_exp(NAN)));
}

TEST_CASE("delayed inputs interpolate linearly, are zero before the first sample and hold the last",
          "[perfusion_model]") {
  const std::vector<double> c = {1.0, 3.0, 7.0, 15.0};
  const double dt = 2.0;
  auto at = [&](double tau, int i) { return delayed_sample(c.data(), 4, delay_shift(tau, dt, 4), i); };
  CHECK(at(0.0, 0) == 1.0);
  CHECK(at(0.0, 3) == 15.0);
  CHECK(at(2.0, 0) == 0.0);   // t_0 - 2 s is before the first sample
  CHECK(at(2.0, 1) == 1.0);   // a whole-sample shift is exact
  CHECK(at(1.0, 1) == 2.0);   // half way between 1 and 3
  CHECK(at(1.0, 0) == 0.0);   // numpy.interp(left=0): zero before t_0, no ramp from zero
  CHECK(at(3.0, 3) == 5.0);   // t = 3 s: between samples 1 (3.0) and 2 (7.0)
  CHECK(at(-1.0, 3) == 15.0); // past the last sample: held
  CHECK(at(-2.5, 2) == 15.0);
  CHECK(at(1e9, 3) == 0.0);   // huge delays clamp without overflow
  CHECK(at(-1e9, 0) == 15.0);
}

TEST_CASE("recursive model equals the closed form for a linear input", "[perfusion_model]") {
  // u(t) = k_a * t (arterial = t, no portal, no delay): integral = k_a (t/k - (1 - e^{-kt})/k^2).
  for (double k_l_per_s : {0.05, 1e-3 / 2.0, 2.0}) {  // includes the small-x series branch
    const int n = 50;
    const double dt = 1.5;
    std::vector<double> ramp(n), zero(n, 0.0);
    for (int i = 0; i < n; ++i) ramp[i] = i * dt;
    FitProblem problem(dt, ramp, zero);
    const double p[5] = {0.3, 0.0, k_l_per_s, 0.0, 0.0};
    const auto curve = model_curve(p, problem, Convolution::recursive);
    for (int i = 0; i < n; ++i) {
      const double t = i * dt, k = k_l_per_s;
      const double exact = 0.3 * (t / k + std::expm1(-k * t) / (k * k));
      INFO("k_l " << k << " i " << i);
      // Exact up to rounding: relative 1e-12 of the curve's scale.
      CHECK(std::abs(curve[i] - exact) <= 1e-12 * std::max(1.0, std::abs(exact)));
    }
  }
}

TEST_CASE("recursive model equals a fine numerical integral of the piecewise-linear input",
          "[perfusion_model]") {
  FitProblem problem = simulated_problem(48, 120.0);  // dt 2.5 s
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int c = 0; c < 4; ++c) {
    // Random truths, delays off the grid; one case with k_l small enough for the series branch.
    auto p = si({5 + 40 * u(rng), 20 + 150 * u(rng), c == 0 ? 0.02 : 50 + 500 * u(rng),
                 6 * u(rng), 6 * u(rng)});
    const auto recursive = model_curve(p.data(), problem, Convolution::recursive);
    const auto fine = fine_integral(p.data(), problem, 64);
    double worst = 0;
    for (std::size_t i = 0; i < fine.size(); ++i) worst = std::max(worst, std::abs(recursive[i] - fine[i]));
    INFO("case " << c << " k_l " << p[k_l] << " /s: max |recursive - fine| " << worst);
    // Simpson's error with 64 sub-steps of 0.04 s on exp(-k t), k <= 0.1 /s: << 1e-10 of the peak.
    CHECK(worst <= 1e-10 * max_abs(fine));
  }
}

TEST_CASE("fft model equals the direct discrete convolution sum to 1e-12", "[perfusion_model]") {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int samples : {32, 48, 128, 448}) {
    FitProblem problem = simulated_problem(samples, 120.0);
    CHECK(problem.fft_length() >= 2 * samples);
    auto p = si({5 + 40 * u(rng), 20 + 150 * u(rng), 50 + 500 * u(rng), 6 * u(rng), 6 * u(rng)});
    const auto fft = model_curve(p.data(), problem, Convolution::fft);
    const auto direct = direct_discrete_convolution(p.data(), problem);
    double worst = 0;
    for (int i = 0; i < samples; ++i) worst = std::max(worst, std::abs(fft[i] - direct[i]));
    INFO("N " << samples << ": max |fft - direct| " << worst << " peak " << max_abs(direct));
    // Transform round-off grows like log2(L) eps: 1e-12 of the peak leaves a wide margin.
    CHECK(worst <= 1e-12 * max_abs(direct));
  }
}

TEST_CASE("fft (rectangle rule) and recursive (exact) differ at coarse sampling as expected",
          "[perfusion_model]") {
  // The rectangle rule weights u_i by a whole dt, so its error is O(dt): with the simulator's
  // sharp Parker first pass it is ~29 % of the peak at dt = 5 s and ~1.4 % at dt = 0.25 s
  // (issue 5 quotes about 7 % for its inputs). The test pins the O(dt) behaviour, not the figure.
  auto p = si({20, 100, 400, 1, 2});
  auto gap = [&](int samples, double duration) {
    FitProblem problem = simulated_problem(samples, duration);
    const auto a = model_curve(p.data(), problem, Convolution::recursive);
    const auto b = model_curve(p.data(), problem, Convolution::fft);
    double worst = 0;
    for (int i = 0; i < samples; ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst / max_abs(a);
  };
  const double coarse = gap(24, 120.0), fine = gap(480, 120.0);
  INFO("relative gap at 5 s: " << coarse << ", at 0.25 s: " << fine);
  CHECK(coarse > 0.05);
  CHECK(fine < 0.03);
  CHECK(coarse > 10 * fine);
}

TEST_CASE("recursive model reproduces madym's DISCM calibration curve", "[perfusion_model]") {
  const auto m = test::read_madym_series();
  FitProblem problem(m.time_s, m.aif, m.pif);
  // madym: F_p 0.6 /min, f_a 0.2, k_2 1 /min, tau_a 0.1 min; the portal input is delayed by
  // tau_a + tau_v = 0.1 min too (README caveat) => k_a 12, k_p 48, k_l 100 ml/100g/min, 6 s, 6 s.
  auto p = si({12, 48, 100, 6, 6});
  const auto curve = model_curve(p.data(), problem, Convolution::recursive);
  double worst = 0;
  for (std::size_t i = 0; i < curve.size(); ++i) worst = std::max(worst, std::abs(curve[i] - m.discm[i]));
  INFO("max |recursive - madym DISCM| = " << worst << " mM, peak " << max_abs(m.discm));
  // madym discretises differently at this 5 s sampling (a trapezoid recursion on the same
  // interpolated inputs is 3.5e-3 mM off, ours 3.2e-3 mM, 0.4 % of the peak): an independent
  // check of the model's shape and units, not of rounding: a portal delay of 0 instead of 6 s is
  // 0.096 mM off, rates taken per second instead of per minute 4.4 mM.
  CHECK(worst < 5e-3);
}
