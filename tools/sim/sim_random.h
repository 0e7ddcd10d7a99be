// Random numbers for the simulators: one seeded engine type so every simulator is reproducible
// from the seed it records in the file.
#pragma once

#include <cstdint>
#include <random>

namespace sonopipe::sim {

using Rng = std::mt19937_64;

// Seed 0 means "pick one from the clock"; the chosen seed is returned so it can be recorded.
std::uint64_t resolve_seed(std::uint64_t seed);

}  // namespace sonopipe::sim
