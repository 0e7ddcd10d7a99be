// Physics of `sonopipe-sim strain` (no I/O): RF speckle frames of a phantom under increasing
// axial compression, with a stiff circular (2-D) / spherical (3-D) inclusion, and the true
// displacement and strain. Tests link it (library sonopipe_sim).
//
// Frames: float32, C order [lateral, axial] (2-D) or [elevational, lateral, axial] (3-D), axial
// fastest, the layout ncc_track expects (stages/strain/ncc_track/ncc_track_params.h). Axis names "elevational",
// "lateral", "axial"; spacing in metres; axial origin 0 (depth), lateral/elevational centred.
//
// Model (a smooth analytic approximation, not a finite-element solution):
// - frame k is compressed by k * strain_per_frame (frame 0 is the reference).
// - axial strain e_zz = -eps_k [1 - (1 - ratio) S], ratio = strain inside / outside the inclusion
//   from Eshelby's uniform interior strain for an incompressible matrix: 2 / (1 + E) for a circle
//   (plane strain), 5 / (3 + 2 E) for a sphere, E = stiffness_ratio (5 -> 0.333 / 0.385).
//   S is the inclusion indicator smoothed along depth: S = (tanh((t + c)/w) - tanh((t - c)/w)) / 2,
//   t = depth - centre depth, c = half chord of the inclusion at that lateral (and elevational) offset.
// - axial displacement u_z = integral of e_zz over depth from the inclusion's centre depth (so the
//   centre depth does not move): closed form through log cosh. Positive = deeper.
// - lateral (and elevational) expansion u_x = +poisson * eps_k * (x - centre), inclusion ignored.
// - plus k * translation_m (rigid motion; 0 by default), for sub-sample shift tests.
// - RF = sum over random scatterers (Gaussian amplitudes) moved by u of a separable PSF:
//   Gaussian-windowed cosine at f0 axially (fractional -6 dB bandwidth), Gaussian beam laterally
//   and elevationally; then white Gaussian noise at the given SNR (per frame, vs the signal rms).
#pragma once

#include <cstdint>
#include <vector>

#include "sdk/tensor.h"

namespace sonopipe::sim {

struct StrainSimConfig {
  int dims = 2;                        // 2 or 3
  int axial_samples = 2078;            // 2-D paper: 2078 samples x 150 lines
  int lateral_lines = 150;
  int elevational_planes = 1;          // 3-D: 1024 x 128 x N
  int frames = 3;                      // frame 0 + (frames - 1) compressed frames
  double sampling_frequency_hz = 40e6;
  double center_frequency_hz = 5e6;
  double fractional_bandwidth = 0.6;
  double speed_of_sound_m_per_s = 1540.0;
  double line_pitch_m = 40e-3 / 150;   // 150 lines over 40 mm
  double plane_pitch_m = 0.214e-3;     // the 3-D paper's plane spacing
  double beam_sigma_m = 0.35e-3;       // lateral PSF (Gaussian sigma)
  double elevational_beam_sigma_m = 0.4e-3;
  double scatterers_per_mm3 = 100.0;   // 2-D: per mm^2 (the slab is 1 mm thick)
  double strain_per_frame = 0.01;      // compression per frame (positive number)
  double inclusion_radius_m = 5e-3;    // 2-D paper: 5 mm
  double stiffness_ratio = 5.0;        // inclusion / background Young's modulus
  double edge_width_m = 0.3e-3;        // smoothing of the inclusion edge along depth
  double poisson = 0.5;                // lateral expansion per unit axial compression
  double translation_m[3] = {0.0, 0.0, 0.0};  // rigid shift per frame [axial, lateral, elev.]
  double snr_db = 30.0;
  double amplitude = 1.0;              // rms of the output frames (simulators give ~1e-22)
  std::uint64_t seed = 0;              // 0: from the clock (the used seed is returned)
};

// The analytic field of a configuration (frame-0 coordinates, metres).
class StrainField {
 public:
  explicit StrainField(const StrainSimConfig& config);
  double strain_ratio() const { return ratio_; }  // inclusion / background axial strain
  // Displacement of frame k relative to frame 0 at frame-0 position (z depth, x lateral, y elev.).
  void displacement(int frame, double z, double x, double y, double out_zxy[3]) const;
  double axial_strain(int frame, double z, double x, double y) const;
  double lateral_strain(int frame) const;
  double centre_depth() const { return centre_z_; }
  double centre_lateral() const { return centre_x_; }
  double centre_elevational() const { return centre_y_; }
  bool inside_inclusion(double z, double x, double y, double margin_m = 0.0) const;

 private:
  double half_chord(double x, double y) const;
  StrainSimConfig config_;
  double ratio_;
  double centre_z_, centre_x_, centre_y_;
};

struct StrainSimResult {
  std::uint64_t seed = 0;
  TensorSpec frame_spec;                     // float32 frame axes with spacing
  std::vector<std::vector<float>> frames;    // frames x elements
  // Truth per frame on the RF sample grid (frame-0 positions), same layout as a frame:
  std::vector<std::vector<double>> axial_displacement_m, lateral_displacement_m, axial_strain;
};

StrainSimResult simulate_strain(const StrainSimConfig& config);

// Axial sample spacing c / (2 fs) in metres.
double axial_spacing_m(const StrainSimConfig& config);

}  // namespace sonopipe::sim
