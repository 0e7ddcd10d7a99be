#include "stages/perfusion/perfusion_problem.h"

#include <cmath>
#include <numbers>
#include <string>

namespace sonopipe::perfusion {
namespace {

void check_curve(const std::vector<double>& curve, std::size_t samples, const char* name) {
  if (curve.size() != samples)
    throw InputError(std::string(name) + " input has " + std::to_string(curve.size()) +
                     " samples, the time axis has " + std::to_string(samples));
  for (std::size_t i = 0; i < curve.size(); ++i)
    if (!std::isfinite(curve[i]))
      throw InputError(std::string(name) + " input sample " + std::to_string(i) + " is not finite");
}

}  // namespace

double uniform_spacing_s(const std::vector<double>& time_s) {
  if (time_s.size() < 3)
    throw InputError("time axis: need at least 3 samples, got " + std::to_string(time_s.size()));
  for (double t : time_s)
    if (!std::isfinite(t)) throw InputError("time axis: a sample time is not finite");
  const std::size_t n = time_s.size();
  const double dt = (time_s[n - 1] - time_s[0]) / static_cast<double>(n - 1);
  if (!(dt > 0)) throw InputError("time axis: sample times must increase");
  for (std::size_t i = 0; i < n; ++i) {
    const double expected = time_s[0] + static_cast<double>(i) * dt;
    if (std::abs(time_s[i] - expected) > kUniformTimeTolerance * dt)
      throw InputError("time axis: samples must be uniform; t[" + std::to_string(i) + "] = " +
                       std::to_string(time_s[i]) + " s, expected " + std::to_string(expected) +
                       " s for dt = " + std::to_string(dt) + " s");
  }
  return dt;
}

FitProblem::FitProblem(const std::vector<double>& time_s, std::vector<double> arterial,
                       std::vector<double> portal)
    : dt_s_(uniform_spacing_s(time_s)), arterial_(std::move(arterial)), portal_(std::move(portal)) {
  check_curve(arterial_, time_s.size(), "arterial");
  check_curve(portal_, time_s.size(), "portal");
  build();
}

FitProblem::FitProblem(double dt_s, std::vector<double> arterial, std::vector<double> portal)
    : dt_s_(dt_s), arterial_(std::move(arterial)), portal_(std::move(portal)) {
  if (!(dt_s_ > 0) || !std::isfinite(dt_s_))
    throw InputError("time axis: spacing must be positive, got " + std::to_string(dt_s_));
  if (arterial_.size() < 3) throw InputError("time axis: need at least 3 samples");
  check_curve(arterial_, arterial_.size(), "arterial");
  check_curve(portal_, arterial_.size(), "portal");
  build();
}

void FitProblem::build() {
  // L: a power of two >= 2N, so the circular convolution of the transform equals the linear one
  // for the first N samples (wang2012 pads to 2N for the same reason).
  fft_length_ = 1;
  fft_log2_length_ = 0;
  while (fft_length_ < 2 * samples()) {
    fft_length_ <<= 1;
    ++fft_log2_length_;
  }
  fft_cos_.resize(fft_length_);
  fft_sin_.resize(fft_length_);
  for (int k = 0; k < fft_length_; ++k) {
    const double angle = 2.0 * std::numbers::pi * k / fft_length_;
    fft_cos_[k] = std::cos(angle);
    fft_sin_[k] = std::sin(angle);
  }
}

ModelInputs FitProblem::view() const {
  ModelInputs in;
  in.arterial = arterial_.data();
  in.portal = portal_.data();
  in.samples = samples();
  in.dt_s = dt_s_;
  in.fft_length = fft_length_;
  in.fft_log2_length = fft_log2_length_;
  in.fft_cos = fft_cos_.data();
  in.fft_sin = fft_sin_.data();
  return in;
}

std::vector<double> model_curve(const double* p_si, const FitProblem& problem, Convolution scheme) {
  const ModelInputs in = problem.view();
  std::vector<double> curve(in.samples);
  if (scheme == Convolution::recursive) {
    recursive_model(p_si, in, [&](int i, double v) { curve[i] = v; });
  } else {
    std::vector<double> scratch(2 * in.fft_length);
    fft_model_transform(p_si, in, scratch.data(), scratch.data() + in.fft_length);
    const double scale = in.dt_s / in.fft_length;
    for (int i = 0; i < in.samples; ++i) curve[i] = scratch[i] * scale;
  }
  return curve;
}

double model_cost(const double* p_si, const FitProblem& problem, Convolution scheme,
                  const double* tissue) {
  const ModelInputs in = problem.view();
  if (scheme == Convolution::recursive) return cost_recursive(p_si, in, tissue, 1);
  std::vector<double> scratch(2 * in.fft_length);
  return cost_fft(p_si, in, tissue, 1, scratch.data());
}

}  // namespace sonopipe::perfusion
