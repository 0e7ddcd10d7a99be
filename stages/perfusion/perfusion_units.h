// Units of the perfusion chain, converted in this one place.
//
// At the edges (config, tools, stage outputs, reports) rates are in ml/100g/min and delays in s,
// as wang2012 reports them (tissue density 1 g/ml is implied: k = 400 ml/100g/min is 4 /min).
// Inside the model and the optimiser everything is SI: rates in 1/s, delays and times in s.
// Parameter order everywhere: k_a, k_p, k_l, tau_a, tau_p.
#pragma once

#include <array>

#include "stages/common/host_device.h"

namespace sonopipe::perfusion {

constexpr int kParameterCount = 5;
enum ParameterIndex : int { k_a = 0, k_p = 1, k_l = 2, tau_a = 3, tau_p = 4 };

// Names and edge units, for maps, logs and tables.
constexpr std::array<const char*, kParameterCount> kParameterNames = {"k_a", "k_p", "k_l", "tau_a",
                                                                      "tau_p"};
constexpr std::array<const char*, kParameterCount> kParameterUnits = {
    "ml/100g/min", "ml/100g/min", "ml/100g/min", "s", "s"};

// 1 ml/100g/min = 0.01 /min = 0.01 / 60 /s.
constexpr double kPerSecondPerMlPer100gPerMin = 0.01 / 60.0;

// Edge units -> SI, in place (rates only; delays are already in s).
SONOPIPE_HD inline void to_si(double* parameters) {
  for (int i = k_a; i <= k_l; ++i) parameters[i] *= kPerSecondPerMlPer100gPerMin;
}

// SI -> edge units, in place.
SONOPIPE_HD inline void to_edge_units(double* parameters) {
  for (int i = k_a; i <= k_l; ++i) parameters[i] /= kPerSecondPerMlPer100gPerMin;
}

}  // namespace sonopipe::perfusion
