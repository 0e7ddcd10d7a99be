// Test helper: the pushed speckle phantom as channel ensembles (tools/sim/arfi_channel_sim.h), the
// beamform parameters that turn it into the ARFI chain's input, and the truth through the motion
// filter, shared by the chain test (tests/stages/arfi/arfi_channel_chain_test.cpp) and the daemon test
// (tests/daemon/arfi_channel_daemon_test.cpp, config/arfi_channel.yaml uses the same grid).
#pragma once

#include <vector>

#include "sdk/thread_pool.h"
#include "stages/arfi/motion_filter/motion_filter.h"
#include "stages/beamform/beamform/beamform.h"
#include "tests/stages/common/stage_runner.h"
#include "tools/sim/arfi_channel_sim.h"

namespace sonopipe::test {

struct ChannelArfi {
  sim::ArfiChannelConfig config;
  BeamformParams beamform;
  sim::ArfiSimConfig grid;  // the beamformed grid in the ARFI simulator's terms (for compare_with_truth)
};

// 5 locations 0.4 mm apart, 20 tracks at 7 kHz, a push at 16 mm (sigma 3 mm deep, 2 mm across:
// wider than the ~0.5 mm lateral point-spread function of one plane wave at F# 1.5, so the image
// does not smear the field much), 64 elements, IQ channel data at 2 f_c, one 0-degree plane wave,
// 30 dB SNR; beamformed onto z 12-20 mm every 87 um (the ARFI simulator's 8.9 MHz IQ sampling,
// upsampled x5 by the chain).
inline ChannelArfi pushed_phantom(double peak_um, std::uint64_t seed) {
  ChannelArfi c;
  sim::ArfiSimConfig& a = c.config.arfi;
  a.locations = 5;
  a.location_spacing_m = 0.4e-3;
  a.tracks = 20;
  a.focus_depth_m = 0.016;
  a.depth_sigma_m = 0.003;
  a.lateral_sigma_m = 2e-3;
  a.recovery_time_s = 1e-3;
  a.peak_um = peak_um;
  a.seed = seed;
  sim::ChannelSimConfig& ch = c.config.channel;
  ch.elements = 64;
  ch.iq = true;
  ch.sampling_frequency_hz = 2 * ch.center_frequency_hz;
  ch.initial_time_s = 8e-6;
  ch.samples = 400;  // 8 us .. 46 us: echoes of 8-24 mm with the aperture's slant
  ch.snr_db = 30;
  ch.seed = seed;
  c.config.x_min_m = -4e-3, c.config.x_max_m = 4e-3, c.config.z_min_m = 10e-3, c.config.z_max_m = 22e-3;
  BeamformParams& b = c.beamform;
  b.ensemble_axes = BeamformParams::EnsembleAxes::arfi;
  b.baseband = true;
  b.x_min_m = -0.5 * double(a.locations - 1) * a.location_spacing_m;
  b.x_max_m = -b.x_min_m;
  b.lateral_pixels = a.locations;
  b.z_min_m = 12e-3, b.z_max_m = 20e-3;
  b.depth_pixels = 93;
  b.f_number = 1.5;
  c.grid = a;
  c.grid.samples = b.depth_pixels;
  c.grid.start_depth_m = b.z_min_m;
  return c;
}

// Truth on the beamformed grid [location, track, sample], through the default motion filter (the
// late tracks are not exactly at rest, so the filter moves the truth a little too).
inline std::vector<double> filtered_truth(const ChannelArfi& c, const sim::ArfiChannelResult& channel, ThreadPool& pool) {
  const sim::ArfiSimConfig& g = c.grid;
  std::vector<float> truth(static_cast<std::size_t>(g.locations * g.tracks * g.samples));
  const double dz = (c.beamform.z_max_m - c.beamform.z_min_m) / double(g.samples - 1);
  for (std::int64_t l = 0; l < g.locations; ++l)
    for (std::int64_t t = 0; t < g.tracks; ++t)
      for (std::int64_t i = 0; i < g.samples; ++i)
        truth[static_cast<std::size_t>((l * g.tracks + t) * g.samples + i)] = float(sim::arfi_tissue_displacement_um(
            g, g.start_depth_m + dz * double(i), c.beamform.x_min_m + g.location_spacing_m * double(l),
            channel.ensemble_time_s[static_cast<std::size_t>(t + 1)]));
  TensorSpec spec{.dtype = DType::float32, .axes = {{"location", g.locations}, {"track", g.tracks}, {"depth", g.samples}}};
  MotionFilterStage filter(MotionFilterStage::Params{});
  const auto filtered = run_stage_cpu(filter, channel.meta, spec, truth.data(), pool);
  return {filtered.as<float>(), filtered.as<float>() + truth.size()};
}

}  // namespace sonopipe::test
