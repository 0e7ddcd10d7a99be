// The shared part of a perfusion fit: sample grid, both input curves and the `fft` tables, built
// and validated once on the host and viewed by the CPU path and the kernels as ModelInputs.
#pragma once

#include <stdexcept>
#include <vector>

#include "stages/perfusion/perfusion_model.h"

namespace sonopipe::perfusion {

// A bad time axis or input curve; the message says which and why.
struct InputError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Relative tolerance on the uniformity of sample times (|t_i - t_0 - i dt| <= this * dt).
constexpr double kUniformTimeTolerance = 1e-6;

class FitProblem {
 public:
  FitProblem() = default;
  // time_s: N >= 3 uniform, increasing sample times; arterial/portal: N finite values each.
  FitProblem(const std::vector<double>& time_s, std::vector<double> arterial,
             std::vector<double> portal);
  // Uniform grid from the spacing alone.
  FitProblem(double dt_s, std::vector<double> arterial, std::vector<double> portal);

  ModelInputs view() const;  // host pointers
  int samples() const { return static_cast<int>(arterial_.size()); }
  double dt_s() const { return dt_s_; }
  const std::vector<double>& arterial() const { return arterial_; }
  const std::vector<double>& portal() const { return portal_; }
  int fft_length() const { return fft_length_; }
  int fft_log2_length() const { return fft_log2_length_; }
  const std::vector<double>& fft_cos() const { return fft_cos_; }
  const std::vector<double>& fft_sin() const { return fft_sin_; }

 private:
  void build();
  double dt_s_ = 0.0;
  std::vector<double> arterial_, portal_;
  int fft_length_ = 0, fft_log2_length_ = 0;
  std::vector<double> fft_cos_, fft_sin_;
};

// dt from sample times; throws InputError when fewer than 3, not increasing or not uniform.
double uniform_spacing_s(const std::vector<double>& time_s);

// The model curve for SI parameters p (tests, simulator, tool residuals).
std::vector<double> model_curve(const double* p_si, const FitProblem& problem, Convolution scheme);

// Cost for SI parameters against one tissue curve (contiguous, N samples).
double model_cost(const double* p_si, const FitProblem& problem, Convolution scheme,
                  const double* tissue);

}  // namespace sonopipe::perfusion
