// The ARFI channel-ensemble simulator (tools/sim/arfi_channel_sim.h): the ensemble's axes and frame
// times, frames that differ only through the displacement field, and its config checks. Its
// displacements are checked end to end by tests/stages/arfi/arfi_channel_chain_test.cpp.
#include <cstring>
#include <limits>
#include <stdexcept>

#include "sdk/thread_pool.h"
#include "stages/beamform/channel_conventions.h"
#include "tests/support/test_support.h"
#include "tools/sim/arfi_channel_sim.h"

using namespace sonopipe;

namespace {

sim::ArfiChannelConfig small_config(double peak_um) {
  sim::ArfiChannelConfig c;
  c.arfi.tracks = 4;
  c.arfi.peak_um = peak_um;
  c.arfi.seed = test::fresh_seed();
  c.channel.elements = 16;
  c.channel.iq = true;
  c.channel.samples = 300;
  c.channel.initial_time_s = 10e-6;
  c.channel.snr_db = std::numeric_limits<double>::infinity();  // no noise: frames differ by motion only
  c.z_min_m = 12e-3, c.z_max_m = 18e-3, c.x_min_m = -1e-3, c.x_max_m = 1e-3;
  return c;
}

}  // namespace

TEST_CASE("arfi channel sim: an ensemble [frame, transmit, element, sample] at the ARFI simulator's times",
          "[sim][arfi][beamform]") {
  ThreadPool pool(2);
  const sim::ArfiChannelConfig config = small_config(5.0);
  INFO("seed " << config.arfi.seed);
  const sim::ArfiChannelResult r = sim::simulate_arfi_channel(config, &pool);
  REQUIRE(r.meta.payload.shape_string() == "complex64[frame=5, transmit=1, element=16, sample=300]");
  CHECK(r.meta.kind == FrameKind::channel_iq);
  const std::vector<double>* times = r.meta.vector(std::string(channel::ensemble_time_s));
  REQUIRE(times);
  REQUIRE(times->size() == 5);
  CHECK((*times)[0] == Approx(-1 / config.arfi.track_prf_hz));  // the reference precedes the push
  for (int t = 0; t < 4; ++t)
    CHECK((*times)[t + 1] == Approx(config.arfi.push_duration_s + t / config.arfi.track_prf_hz));
  CHECK(r.meta.payload.axes[0].origin == (*times)[0]);
  CHECK(r.data.size() == 5u * 16 * 300 * 2);
}

TEST_CASE("arfi channel sim: without a push every frame is the same recording; with one the tracks change",
          "[sim][arfi][beamform]") {
  ThreadPool pool(2);
  for (const double peak_um : {0.0, 5.0}) {
    const sim::ArfiChannelConfig config = small_config(peak_um);
    INFO("seed " << config.arfi.seed << ", peak " << peak_um);
    const sim::ArfiChannelResult r = sim::simulate_arfi_channel(config, &pool);
    const std::size_t frame = r.data.size() / 5;
    const bool track_equals_reference = std::memcmp(r.data.data(), r.data.data() + 2 * frame, frame * sizeof(float)) == 0;
    CHECK(track_equals_reference == (peak_um == 0.0));
  }
}

TEST_CASE("arfi channel sim: inconsistent configs are refused", "[sim][arfi][beamform]") {
  sim::ArfiChannelConfig config = small_config(5.0);
  config.arfi.tracks = 0;
  CHECK_THROWS_AS(sim::simulate_arfi_channel(config), std::invalid_argument);
  config = small_config(5.0);
  config.z_max_m = config.z_min_m;
  CHECK_THROWS_AS(sim::simulate_arfi_channel(config), std::invalid_argument);
}
