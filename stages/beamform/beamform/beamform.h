// Stage `beamform`: delay-and-sum of channel data (per-element RF or IQ, kind channel_rf /
// channel_iq, stages/beamform/channel_conventions.h) onto a linear (x, z) or sector (angle, radius)
// grid, coherently compounded over every transmit (plane-wave compounding, diverging waves,
// synthetic aperture), or one line per (focused) transmit along its source's x. Receive apodisation
// boxcar / Hann / Tukey with an F-number; linear or cubic-spline (stages/common/spline_math.h)
// interpolation of the channel samples; IQ phase restored by exp(+j 2 pi f_dem t). Math and
// conventions: stages/beamform/beamform_conventions.h and das.h.
// Input float32 [transmit, element, sample] (RF, e.g. after `convert`) or complex64 (IQ), or an
// ensemble [frame, transmit, element, sample] (every frame the same transmits; the frame axis keeps
// its spacing, e.g. 1 / PRF in s, into the output): each frame is beamformed on its own, in one launch.
// Output `beamformed`, the input's element type: image [lateral (m), axial (m)] or
// [angle (rad), radius (m)], depth fastest; lines [line, axial (m)]; an ensemble [frame, lateral,
// axial] (`ensemble_axes: frame_first`, the Doppler chain's input) or [location, ensemble, sample]
// (`ensemble_axes: arfi`, the ARFI chain's input, stages/arfi/arfi_conventions.h). IQ output keeps
// the carrier phase (`iq_phase: carrier`) or is brought to baseband at f_dem on the depth's two-way
// time 2 d / c (`iq_phase: baseband`, the ARFI chain's IQ convention; beamform_conventions.h).
#pragma once

#include <vector>

#include "sdk/registry.h"
#include "stages/beamform/beamform/das.h"

namespace sonopipe {

struct BeamformParams {
  enum class Grid { linear, sector };
  enum class Output { image, lines };
  Grid grid = Grid::linear;
  Output output = Output::image;
  double x_min_m = -0.019, x_max_m = 0.019;        // linear grid
  double angle_min_deg = -30, angle_max_deg = 30;   // sector grid (apex at the origin)
  double z_min_m = 0.005, z_max_m = 0.05;           // depth (linear, lines) or radius (sector)
  std::int64_t lateral_pixels = 256, depth_pixels = 1024;
  beamform::Window window = beamform::Window::hann;
  double tukey_alpha = 0.5;
  double f_number = 1.5;                            // 0: whole aperture
  bool cubic = false;
  enum class EnsembleAxes { frame_first, arfi };
  EnsembleAxes ensemble_axes = EnsembleAxes::frame_first;  // output axes of an ensemble input
  bool baseband = false;                            // IQ: multiply by exp(-j 2 pi f_dem 2 d / c)
};

class BeamformStage : public Stage {
 public:
  static StageInfo info();
  using Params = BeamformParams;
  static void declare(ParamSpec<Params>& spec);
  explicit BeamformStage(const Params& params) : params_(params) {}

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  // Pixel position of output index (lateral i, depth j) for transmit-independent grids, and the
  // lateral position of line i (its transmit's source x) for `lines`.
  void pixel_position(std::int64_t i, std::int64_t j, double& x, double& z) const;

  // Output strides in pixels of the frame and lateral axes: [frame, lateral, axial], or the ARFI
  // layout [location, ensemble, sample]; and the baseband phase rate 2 f_dem / c (cycles per metre
  // of depth) with `iq_phase: baseband` on IQ, else 0 (beamform_conventions.h).
  std::int64_t frame_stride() const;
  std::int64_t lateral_stride() const;
  double baseband_cycles_per_m() const;

 private:
  // Geometry of this frame (vectors read per frame) into the host arrays below.
  void read_geometry(const FrameMeta& frame);

  BeamformParams params_;
  std::int64_t frames_ = 1;          // ensemble size (1 without a frame axis)
  std::int64_t transmits_ = 0, elements_ = 0, samples_ = 0, lateral_ = 0, depth_ = 0;
  int channels_ = 1;                 // 1 RF, 2 IQ
  double sample_origin_s_ = 0, sampling_frequency_hz_ = 0, demodulation_frequency_hz_ = 0, inverse_c_ = 0;
  std::vector<beamform::Transmit<double>> transmits_host_;
  std::vector<double> element_x_, element_z_, element_delay_;  // this frame's vectors (storage reused)
  std::vector<double> wavefront_, angle_, source_x_, source_z_, transmit_delay_;
};

}  // namespace sonopipe
