// The ensemble workloads of tools/bench/ensemble_workloads.h as sonopipe frames and beamform
// parameters, and the beamformer's work count (terms): one definition shared by `sonopipe-bench beamform` (its ensemble cases) and
// `sonopipe-bench doppler --case chain`.
#pragma once

#include <cstdint>
#include <vector>

#include "stages/beamform/beamform/beamform.h"
#include "tools/bench/ensemble_workloads.h"
#include "tools/sim/channel_sim.h"

namespace sonopipe::bench {

struct BenchFrame {
  FrameMeta meta;
  std::vector<float> data;
  std::vector<double> element_x_m;
  std::int64_t frames = 1;
};

// The workload's geometry from the channel simulator (no scatterers) and its random samples, as an
// ensemble [frame, transmit = 1, element, sample] or as one frame of `frames` transmits.
inline BenchFrame ensemble_frame(const EnsembleWorkload& w, bool compound) {
  sim::ChannelSimConfig config;
  config.iq = true;
  config.elements = w.elements;
  config.pitch_m = w.pitch_m;
  config.center_frequency_hz = w.center_frequency_hz;
  config.sampling_frequency_hz = w.sampling_frequency_hz;
  config.speed_of_sound_m_per_s = w.speed_of_sound_m_per_s;
  config.initial_time_s = w.first_sample_s;
  config.samples = w.samples;
  config.transmits.assign(compound ? w.frames : 1, sim::ChannelTransmit::plane(0.0));
  sim::ChannelSimResult geometry = sim::simulate_channel(config);
  BenchFrame frame{geometry.meta, ensemble_samples(w), geometry.element_x_m, compound ? 1 : w.frames};
  if (!compound)
    frame.meta.payload.axes.insert(frame.meta.payload.axes.begin(), Axis{"frame", w.frames, 1.0 / w.prf_hz, "s", 0.0});
  return frame;
}

// The workload's grid, F-number and apodisation.
inline BeamformParams ensemble_beamform_params(const EnsembleWorkload& w) {
  BeamformParams p;
  p.x_min_m = w.x_min_m, p.x_max_m = w.x_max_m, p.z_min_m = w.z_min_m, p.z_max_m = w.z_max_m;
  p.lateral_pixels = w.lateral_pixels, p.depth_pixels = w.depth_pixels;
  p.f_number = w.f_number;
  p.window = w.tukey_alpha == 1.0 ? beamform::Window::hann : beamform::Window::tukey;
  p.tukey_alpha = w.tukey_alpha;
  return p;
}

// Triples (pixel, transmit, element) whose receive weight is not zero, times the frames.
inline double count_terms(BeamformStage& stage, const BenchFrame& frame, const BeamformParams& p, std::int64_t lateral,
                          std::int64_t depth) {
  const std::int64_t transmits = frame.meta.payload.axes[frame.meta.payload.axes.size() - 3].size;
  const std::vector<double>& xe = frame.element_x_m;
  double terms = 0;
  for (std::int64_t i = 0; i < lateral; ++i)
    for (std::int64_t j = 0; j < depth; ++j) {
      double x, z;
      stage.pixel_position(i, j, x, z);
      int inside = 0;
      for (double e : xe) inside += beamform::apodisation(p.window, p.tukey_alpha, p.f_number, x - e, z) != 0.0;
      terms += double(inside) * double(p.output == BeamformParams::Output::lines ? 1 : transmits);
    }
  return terms * double(frame.frames);
}

}  // namespace sonopipe::bench
