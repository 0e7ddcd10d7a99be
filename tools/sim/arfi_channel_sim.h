// ARFI acquisitions as channel data (no I/O): the ARFI simulator's tissue displacement field
// (tools/sim/arfi_sim.h, arfi_tissue_displacement_um: Gaussian in depth and across, rise and
// recovery in time) moving the scatterers of a speckle phantom axially, and the channel simulator
// (tools/sim/channel_sim.h, exact two-way delays) rendering every acquisition of the ensemble: the
// reference 1/PRF before the push and the tracks after it, at the ARFI simulator's times. The frame
// is an ensemble [frame, transmit, element, sample] (stages/beamform/channel_conventions.h) whose
// frame times are the vector ensemble_time_s (not uniform: the push lies between the reference and
// the first track, so the frame axis has no spacing). Beamformed with `ensemble_axes: arfi` and
// `iq_phase: baseband` it becomes the ARFI chain's input [location, ensemble, sample]
// (stages/arfi/arfi_conventions.h). Truth: the displacement of each track against the reference at
// any (depth, lateral) from arfi_tissue_displacement_um (the reference precedes the push: 0 there).
#pragma once

#include <cstdint>
#include <vector>

#include "sdk/frame.h"
#include "tools/sim/arfi_sim.h"
#include "tools/sim/channel_sim.h"

namespace sonopipe {
class ThreadPool;
}

namespace sonopipe::sim {

struct ArfiChannelConfig {
  ArfiSimConfig arfi;        // displacement field, tracks, track PRF, push duration, seed (its
                             // IQ sampling, samples and noise fields are not used)
  ChannelSimConfig channel;  // probe, pulse, transmits (every frame the same), sampling, noise;
                             // its scatterers are replaced by the phantom below
  // Speckle region (m) and density (per resolution cell lambda/2 x pitch).
  double x_min_m = -4e-3, x_max_m = 4e-3, z_min_m = 8e-3, z_max_m = 24e-3;
  double scatterers_per_cell = 4;
};

struct ArfiChannelResult {
  FrameMeta meta;                       // channel_rf / channel_iq [frame, transmit, element, sample]
  std::vector<float> data;              // float32 RF or interleaved complex64 IQ, in that layout
  std::vector<double> ensemble_time_s;  // [frame]: reference, then the tracks
};

// Throws std::invalid_argument on an inconsistent config. pool may be null.
ArfiChannelResult simulate_arfi_channel(const ArfiChannelConfig& config, ThreadPool* pool = nullptr);

}  // namespace sonopipe::sim
