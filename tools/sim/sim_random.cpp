#include "tools/sim/sim_random.h"

#include <chrono>

namespace sonopipe::sim {

std::uint64_t resolve_seed(std::uint64_t seed) {
  if (seed != 0) return seed;
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) %
             1000000007ull + 1;
}

}  // namespace sonopipe::sim
