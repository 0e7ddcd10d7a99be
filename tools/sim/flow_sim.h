// Flow phantom for the ultrafast Doppler chain (stages/doppler/doppler_conventions.h), no I/O: a
// straight tube with a parabolic (Poiseuille) velocity profile crossing the image at an angle,
// inside tissue speckle that moves slowly as a whole (the clutter). Ground truth: the axial velocity
// and the lumen / tissue masks on the pixel grid. Two renderings of the same scatterers:
//  - simulate_flow_iq: beamformed IQ ensembles [frame, lateral, axial] for stage-level tests. Model
//    (an approximation, stated): every scatterer contributes a separable Gaussian point-spread
//    function times the carrier phase of the beamformer's convention,
//      a exp(-(x - x_s)^2 / (2 s_x^2) - (z - z_s)^2 / (2 s_z^2)) exp(+j 2 k_c (z - z_s)),
//    s_z = c s_t / 2 from the channel simulator's two-way pulse envelope s_t, s_x = psf_lateral_m;
//    no aperture effects (the slow-time phase is exactly -2 k_c dz_s).
//  - simulate_flow_channel: channel ensembles [frame, transmit, element, sample] from the channel
//    simulator (tools/sim/channel_sim.h) at every frame's scatterer positions, for the whole chain.
// Geometry: the tube axis passes through (tube_x_m, tube_z_m) with direction (cos a, sin a), a =
// tube_angle_rad; positive peak_velocity_m_per_s flows along +direction, so with a > 0 the flow goes
// deeper (positive axial velocity, away from the probe). Blood scatterers leaving the tube segment
// (length tube_length_m, centred on the image) re-enter at its other end: the segment reaches far
// outside the image so the wrap is never seen.
#pragma once

#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "sdk/frame.h"
#include "tools/sim/channel_sim.h"

namespace sonopipe {
class ThreadPool;
}

namespace sonopipe::sim {

struct FlowSimConfig {
  // Acquisition.
  double center_frequency_hz = 5e6;
  double fractional_bandwidth = 0.6;
  double speed_of_sound_m_per_s = 1540;
  double prf_hz = 5000;                     // one frame per 1 / PRF
  std::int64_t frames = 64;
  // Image (beamformed grid) and the speckle region (the grid widened by a margin).
  double x_min_m = -5e-3, x_max_m = 5e-3, z_min_m = 10e-3, z_max_m = 20e-3;
  std::int64_t lateral_pixels = 64, axial_pixels = 128;
  double psf_lateral_m = 0.25e-3;           // s_x of the IQ rendering
  // Tube and flow.
  double tube_x_m = 0, tube_z_m = 15e-3, tube_radius_m = 1.5e-3;
  double tube_angle_rad = 0.5235987755982988;  // 30 degrees
  double peak_velocity_m_per_s = 0.3;       // on the axis, along the tube
  double tube_length_m = 0;                 // 0: four times the image diagonal
  // Tissue: rigid motion of the speckle (the clutter), m/s.
  double tissue_velocity_x_m_per_s = 0, tissue_velocity_z_m_per_s = 5e-3;
  // Scatterers per resolution cell (lambda/2 x 0.3 mm) and the blood echo level below tissue.
  double tissue_per_cell = 2, blood_per_cell = 2;
  double blood_to_tissue_db = -40;
  // White complex noise, snr_db below the mean blood power in the lumen (IQ rendering).
  double snr_db = std::numeric_limits<double>::infinity();
  std::uint64_t seed = 1;
  std::uint32_t stream_id = 1;
};

struct FlowScatterer {
  double x_m, z_m, amplitude;
  bool blood;
  double along_m, across_m;  // blood: position in tube coordinates at t = 0
};

struct FlowPhantom {
  std::vector<FlowScatterer> scatterers;    // positions at t = 0
  double tube_length_m = 0;
  // Scatterer positions at time t (seconds after frame 0).
  std::vector<Scatterer> at(const FlowSimConfig& config, double t_s) const;
};
FlowPhantom flow_phantom(const FlowSimConfig& config);

// Blood velocity at (x, z): along the tube, parabolic in the distance r from its axis (0 outside).
double flow_speed_m_per_s(const FlowSimConfig& config, double x_m, double z_m);
// Distance from the tube axis.
double distance_from_axis_m(const FlowSimConfig& config, double x_m, double z_m);

struct FlowTruth {
  // [lateral, axial] on the IQ grid: axial velocity (m/s, + = deeper), the lumen mask (r < R), and
  // the tissue mask (r > R + margin, a PSF away from the wall: clutter rejection is measured there).
  std::vector<double> axial_velocity_m_per_s;
  std::vector<std::uint8_t> lumen, tissue;
  double peak_axial_velocity_m_per_s = 0;    // |v_peak sin a|
  double nyquist_velocity_m_per_s = 0;       // c PRF / (4 f_c)
};

struct FlowIqResult {
  FrameMeta meta;                            // kind iq, complex64 [frame, lateral, axial]
  std::vector<std::complex<float>> iq;       // tissue + blood + noise
  std::vector<std::complex<float>> tissue, blood, noise;  // the parts, same layout
  FlowTruth truth;
  double x_step_m = 0, z_step_m = 0;
  double blood_power = 0;                    // mean |blood|^2 in the lumen
};
FlowIqResult simulate_flow_iq(const FlowSimConfig& config, ThreadPool* pool = nullptr);

// Channel ensembles: `channel` sets the probe, pulse, transmits and sampling (its scatterers,
// f_c/bandwidth/c and stream id are taken from `config`; samples = 0: enough for the whole speckle
// region, so every phantom gives the same shape). Frame kind channel_rf/iq, [frame, transmit, element,
// sample], vector ensemble_time_s.
struct FlowChannelResult {
  FrameMeta meta;
  std::vector<float> rf;
  std::vector<std::complex<float>> iq;
  const void* data() const { return rf.empty() ? static_cast<const void*>(iq.data()) : rf.data(); }
  std::size_t bytes() const { return rf.size() * sizeof(float) + iq.size() * sizeof(std::complex<float>); }
};
FlowChannelResult simulate_flow_channel(const FlowSimConfig& config, ChannelSimConfig channel, ThreadPool* pool = nullptr);

// The truth on an arbitrary grid (for the channel chain's beamform grid).
FlowTruth flow_truth(const FlowSimConfig& config, double x_min_m, double x_step_m, std::int64_t lateral,
                     double z_min_m, double z_step_m, std::int64_t axial, double wall_margin_m);

}  // namespace sonopipe::sim
