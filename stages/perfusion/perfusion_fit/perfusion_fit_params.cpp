#include "stages/perfusion/perfusion_fit/perfusion_fit_params.h"

#include <stdexcept>

namespace sonopipe::perfusion {

std::string_view convolution_name(Convolution c) {
  return c == Convolution::fft ? "fft" : "recursive";
}

Convolution parse_convolution(const std::string& name) {
  if (name == "recursive") return Convolution::recursive;
  if (name == "fft") return Convolution::fft;
  throw std::invalid_argument("convolution: expected recursive or fft, got '" + name + "'");
}

void declare_fit_params(ParamSpec<FitParams>& spec) {
  spec.choice(&FitParams::convolution, "convolution",
              {{"recursive", Convolution::recursive}, {"fft", Convolution::fft}},
              {.doc = "recursive: exact integral of the piecewise-linear input; fft: wang2012's discrete "
                      "convolution in the Fourier domain"});
  spec.param(&FitParams::max_iterations, "max_iterations",
             {.min = 1, .max = 1e6, .doc = "Nelder-Mead iteration limit (wang2012: 600; counted as scipy's nit)"});
  spec.param(&FitParams::max_evaluations, "max_evaluations",
             {.min = 6, .max = 1e7, .doc = "cost evaluation limit (fminsearch/scipy default 200 x 5)"});
  spec.param(&FitParams::cost_tolerance, "cost_tolerance",
             {.min = 0, .unit = "concentration^2",
              .doc = "stop when max - min of the simplex costs <= this (wang2012: 1e-8)"});
  spec.param(&FitParams::parameter_tolerance, "parameter_tolerance",
             {.min = 0, .unit = "1/s and s",
              .doc = "also require max |x_i - x_0| <= this, in SI units (default off, as scipy xtol=inf)"});
  spec.param(&FitParams::start, "start",
             {.unit = "ml/100g/min x3, s x2",
              .doc = "start point k_a, k_p, k_l, tau_a, tau_p (wang2012: 10, 80, 200, 2, 3)"});
  spec.choice(&FitParams::linear_start, "initialiser", {{"fixed", false}, {"linear", true}},
              {.doc = "fixed: every voxel starts at `start` (wang2012); linear: per-voxel linear "
                      "least-squares start over a 0.5..6.5 s delay grid (`start` when it fails)"});
  spec.rule([](const FitParams& params) {
    if (params.start.size() != kParameterCount)
      throw ParamError("start", "5 values: k_a, k_p, k_l (ml/100g/min), tau_a, tau_p (s)", 0);
  });
}

FitSettings fit_settings_from(const FitParams& params) {
  FitSettings s;
  s.convolution = params.convolution;
  s.optimiser.max_iterations = params.max_iterations;
  s.optimiser.max_evaluations = params.max_evaluations;
  s.optimiser.cost_tolerance = params.cost_tolerance;
  s.optimiser.parameter_tolerance = params.parameter_tolerance;
  if (params.start.size() != kParameterCount)
    throw ParamError("start", "5 values: k_a, k_p, k_l (ml/100g/min), tau_a, tau_p (s)", 0);
  for (int i = 0; i < kParameterCount; ++i) s.start[i] = params.start[i];
  s.linear_start = params.linear_start;
  return s;
}

std::vector<std::string> start_warnings(const FitSettings& settings) {
  std::vector<std::string> warnings;
  for (int i = 0; i < kParameterCount; ++i) {
    if (settings.start[i] == 0.0 && !settings.linear_start)
      warnings.push_back(std::string("start value of ") + kParameterNames[i] +
                         " is 0: the initial simplex steps it by only 0.00025 (fminsearch rule), "
                         "so the search barely explores it; start delays at a plausible non-zero "
                         "value (wang2012: 2 s and 3 s)");
  }
  return warnings;
}

}  // namespace sonopipe::perfusion
