#include "tools/sim/arfi_channel_sim.h"

#include <cstring>
#include <stdexcept>

#include "stages/beamform/channel_conventions.h"

namespace sonopipe::sim {

ArfiChannelResult simulate_arfi_channel(const ArfiChannelConfig& config, ThreadPool* pool) {
  const ArfiSimConfig& arfi = config.arfi;
  if (arfi.tracks < 1 || !(arfi.track_prf_hz > 0))
    throw std::invalid_argument("arfi channel sim: need tracks >= 1 and track_prf_hz > 0");
  if (!(config.x_max_m > config.x_min_m) || !(config.z_max_m > config.z_min_m) || !(config.z_min_m > 0))
    throw std::invalid_argument("arfi channel sim: empty or non-positive speckle region");
  ArfiChannelResult out;
  const std::int64_t frames = arfi.tracks + 1;
  // The ARFI simulator's times: the reference 1/PRF before the push, track i at push + i / PRF.
  out.ensemble_time_s.resize(static_cast<std::size_t>(frames));
  out.ensemble_time_s[0] = -1 / arfi.track_prf_hz;
  for (std::int64_t i = 0; i < arfi.tracks; ++i)
    out.ensemble_time_s[i + 1] = arfi.push_duration_s + static_cast<double>(i) / arfi.track_prf_hz;

  const double wavelength_m = config.channel.speed_of_sound_m_per_s / config.channel.center_frequency_hz;
  const std::vector<Scatterer> at_rest =
      speckle_phantom(config.x_min_m, config.x_max_m, config.z_min_m, config.z_max_m, wavelength_m,
                      config.channel.pitch_m, config.scatterers_per_cell, {}, arfi.seed);
  std::size_t frame_floats = 0;
  for (std::int64_t f = 0; f < frames; ++f) {
    ChannelSimConfig channel = config.channel;
    channel.seed = config.channel.seed + static_cast<std::uint64_t>(f);  // independent noise per frame
    channel.scatterers = at_rest;
    const double time_s = out.ensemble_time_s[static_cast<std::size_t>(f)];
    for (Scatterer& s : channel.scatterers)  // axial displacement, + = away from the probe
      s.z_m += arfi_tissue_displacement_um(arfi, s.z_m, s.x_m, time_s) * 1e-6;
    const ChannelSimResult frame = simulate_channel(channel, pool);
    const std::size_t floats = frame.bytes() / sizeof(float);
    if (f == 0) {
      out.meta = frame.meta;
      frame_floats = floats;
      out.data.resize(frame_floats * static_cast<std::size_t>(frames));
    }
    std::memcpy(out.data.data() + static_cast<std::size_t>(f) * frame_floats, frame.data(), frame_floats * sizeof(float));
  }
  out.meta.payload.axes.insert(out.meta.payload.axes.begin(),
                               Axis{std::string(channel::frame_axis), frames, 0.0, "s", out.ensemble_time_s[0]});
  out.meta.vectors[std::string(channel::ensemble_time_s)] = out.ensemble_time_s;
  return out;
}

}  // namespace sonopipe::sim
