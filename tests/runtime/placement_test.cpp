// Placement: frame by frame in turn for stateless pipelines; streams kept on one device, new ones
// on the least loaded device, and a bounded affinity table for stateful ones.
#include "runtime/placement.h"

#include <map>
#include <random>

#include "tests/support/test_support.h"

using namespace sonopipe;

TEST_CASE("a stateless pipeline takes its devices in turn, frame by frame", "[placement]") {
  Placement placement(3, false);
  for (std::size_t n = 0; n < 30; ++n) REQUIRE(placement.lane_for(static_cast<std::uint32_t>(n % 2)) == n % 3);
  CHECK(placement.streams_on(0) == 0);  // no affinity kept
}

TEST_CASE("a stateful pipeline keeps each stream on one device and spreads new streams evenly", "[placement]") {
  std::mt19937_64 rng(test::fresh_seed());
  Placement placement(2, true);
  std::map<std::uint32_t, std::size_t> lane_of;
  std::uniform_int_distribution<std::uint32_t> stream(0, 7);
  for (int n = 0; n < 2000; ++n) {
    const std::uint32_t s = stream(rng);
    bool placed = false;
    const std::size_t lane = placement.lane_for(s, &placed);
    auto [it, first] = lane_of.emplace(s, lane);
    REQUIRE(placed == first);
    REQUIRE(it->second == lane);  // never moves
  }
  // 8 streams over 2 devices, each new one on the device with fewer: 4 and 4.
  CHECK(placement.streams_on(0) == 4);
  CHECK(placement.streams_on(1) == 4);
}

TEST_CASE("the affinity table forgets the least recently seen stream past its bound", "[placement]") {
  Placement placement(2, true, 64);
  for (std::uint32_t s = 0; s < 100000; ++s) placement.lane_for(s);
  CHECK(placement.streams_on(0) + placement.streams_on(1) == 64);
  CHECK(placement.streams_forgotten() == 100000 - 64);
  // A stream seen again stays where it is; one forgotten long ago is placed afresh.
  bool placed = true;
  placement.lane_for(99999, &placed);
  CHECK_FALSE(placed);
  placement.lane_for(0, &placed);
  CHECK(placed);
}
