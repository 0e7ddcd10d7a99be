// The flow phantom's channel ensembles (tools/sim/flow_sim.h): every phantom of a recording gives the
// same frame shape, and the frames carry the stream id of the config.
#include "tools/sim/flow_sim.h"

#include <set>

#include "stages/beamform/channel_conventions.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

// A sparse phantom on a short ensemble: its deepest scatterer lies anywhere in the last millimetres,
// so a sample count fitted to the scatterers differs from seed to seed.
sim::FlowSimConfig sparse_flow(std::uint64_t seed) {
  sim::FlowSimConfig c;
  c.frames = 2;
  c.tissue_per_cell = 0.01;
  c.blood_per_cell = 0.01;
  c.seed = seed;
  c.stream_id = 9;
  return c;
}

}  // namespace

TEST_CASE("flow channel ensembles of different phantoms have one sample count and the config's stream id") {
  const std::uint64_t seed = test::fresh_seed();
  sim::ChannelSimConfig channel;
  channel.iq = true;
  std::set<std::int64_t> sample_counts;
  for (std::uint64_t k = 0; k < 4; ++k) {
    const sim::FlowChannelResult r = sim::simulate_flow_channel(sparse_flow(seed + k), channel);
    INFO("phantom seed " << seed + k);
    REQUIRE(r.meta.payload.axes.size() == 4);
    CHECK(r.meta.payload.axes[0].name == "frame");
    CHECK(r.meta.payload.axes.back().name == channel::sample_axis);
    CHECK(r.meta.stream_id == 9);
    sample_counts.insert(r.meta.payload.axes.back().size);
  }
  CHECK(sample_counts.size() == 1);
}

TEST_CASE("flow channel ensembles hold the echoes of the deepest corner of the speckle region") {
  // The fixed count is long enough: a scatterer at the region's deepest corner (image edge + the
  // 1 mm speckle margin) still has its whole pulse inside the line.
  sim::FlowSimConfig c = sparse_flow(test::fresh_seed());
  sim::ChannelSimConfig channel;
  channel.iq = true;
  const sim::FlowChannelResult flow = sim::simulate_flow_channel(c, channel);
  channel.center_frequency_hz = c.center_frequency_hz;
  channel.fractional_bandwidth = c.fractional_bandwidth;
  channel.speed_of_sound_m_per_s = c.speed_of_sound_m_per_s;
  channel.scatterers = {{c.x_max_m + 1e-3, c.z_max_m + 1e-3, 1.0}};
  const sim::ChannelSimResult corner = sim::simulate_channel(channel);  // samples = 0: fitted to it
  CHECK(flow.meta.payload.axes.back().size >= corner.meta.payload.axes.back().size);
  CHECK(flow.meta.payload.axes.back().size <= corner.meta.payload.axes.back().size + 2);
}
