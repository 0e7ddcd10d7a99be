// Settings of the perfusion fit, shared by the CPU path, the CUDA launch, the stage, the offline
// tool, the benchmark and the tests. Start values are in edge units (ml/100g/min, s).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "sdk/params.h"
#include "stages/perfusion/nelder_mead.h"
#include "stages/perfusion/perfusion_model.h"

namespace sonopipe::perfusion {

// wang2012 section 2.4.1: 10, 80, 200 ml/100g/min, 2 s, 3 s.
constexpr std::array<double, kParameterCount> kPaperStart = {10.0, 80.0, 200.0, 2.0, 3.0};

struct FitSettings {
  Convolution convolution = Convolution::recursive;
  NelderMeadSettings optimiser;                          // wang2012: 600 iterations, 1e-8
  std::array<double, kParameterCount> start = kPaperStart;  // edge units
  bool linear_start = false;  // seed each voxel with a linear least-squares fit (beyond the paper)
};

std::string_view convolution_name(Convolution c);      // "recursive", "fft"
Convolution parse_convolution(const std::string& name);  // throws std::invalid_argument

// Parameter declarations of the fit (used by the stage; the tool maps its flags onto the same
// keys): convolution, max_iterations, max_evaluations, cost_tolerance, parameter_tolerance, start,
// initialiser.
std::vector<ParamDecl> fit_param_decls();
FitSettings fit_settings_from(const ParamValues& values);

// One line per questionable choice (e.g. zero start delays leave the simplex almost flat along
// those coordinates: its first steps there are 0.00025 s). Empty when all is well.
std::vector<std::string> start_warnings(const FitSettings& settings);

}  // namespace sonopipe::perfusion
