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

std::vector<ParamDecl> fit_param_decls() {
  return {
      {.key = "convolution", .type = ParamType::choice, .default_value = "recursive",
       .choices = {"recursive", "fft"},
       .doc = "recursive: exact integral of the piecewise-linear input; fft: wang2012's discrete "
              "convolution in the Fourier domain"},
      {.key = "max_iterations", .type = ParamType::integer, .default_value = "600", .min = 1,
       .max = 1e6, .doc = "Nelder-Mead iteration limit (wang2012: 600; counted as scipy's nit)"},
      {.key = "max_evaluations", .type = ParamType::integer, .default_value = "1000", .min = 6,
       .max = 1e7, .doc = "cost evaluation limit (fminsearch/scipy default 200 x 5)"},
      {.key = "cost_tolerance", .type = ParamType::real, .default_value = "1e-8", .min = 0,
       .unit = "concentration^2",
       .doc = "stop when max - min of the simplex costs <= this (wang2012: 1e-8)"},
      {.key = "parameter_tolerance", .type = ParamType::real, .default_value = "1e300", .min = 0,
       .unit = "1/s and s",
       .doc = "also require max |x_i - x_0| <= this, in SI units (default off, as scipy xtol=inf)"},
      {.key = "start", .type = ParamType::real_list, .default_value = "[10, 80, 200, 2, 3]",
       .unit = "ml/100g/min x3, s x2",
       .doc = "start point k_a, k_p, k_l, tau_a, tau_p (wang2012: 10, 80, 200, 2, 3)"},
      {.key = "initialiser", .type = ParamType::choice, .default_value = "fixed",
       .choices = {"fixed", "linear"},
       .doc = "fixed: every voxel starts at `start` (wang2012); linear: per-voxel linear "
              "least-squares start over a 0.5..6.5 s delay grid (`start` when it fails)"},
  };
}

FitSettings fit_settings_from(const ParamValues& values) {
  FitSettings s;
  s.convolution = parse_convolution(values.text("convolution"));
  s.optimiser.max_iterations = static_cast<int>(values.integer("max_iterations"));
  s.optimiser.max_evaluations = static_cast<int>(values.integer("max_evaluations"));
  s.optimiser.cost_tolerance = values.real("cost_tolerance");
  s.optimiser.parameter_tolerance = values.real("parameter_tolerance");
  const auto& start = values.reals("start");
  if (start.size() != kParameterCount)
    throw ParamError("start", "5 values: k_a, k_p, k_l (ml/100g/min), tau_a, tau_p (s)", 0);
  for (int i = 0; i < kParameterCount; ++i) s.start[i] = start[i];
  s.linear_start = values.text("initialiser") == "linear";
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
