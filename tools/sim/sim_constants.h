// Constants shared by the simulators (tools/sim/*_sim.cpp and their commands).
#pragma once

#include <numbers>

namespace sonopipe::sim {

inline constexpr double kPi = std::numbers::pi;
inline constexpr double kDegree = kPi / 180.0;
// Gaussian pulses are cut at +-4 sigma (amplitude 3e-4 of the peak).
inline constexpr double kEnvelopeSpan = 4.0;

}  // namespace sonopipe::sim
