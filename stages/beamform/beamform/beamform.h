// Stage `beamform`: delay-and-sum of channel data (per-element RF or IQ, kind channel_rf /
// channel_iq, stages/beamform/channel_conventions.h) onto a linear (x, z) or sector (angle, radius)
// grid, coherently compounded over every transmit (plane-wave compounding, diverging waves,
// synthetic aperture), or one line per (focused) transmit along its source's x. Receive apodisation
// boxcar / Hann / Tukey with an F-number; linear or cubic-spline (stages/common/spline_math.h)
// interpolation of the channel samples; IQ phase restored by exp(+j 2 pi f_dem t). Math and
// conventions: stages/beamform/beamform_conventions.h and das.h.
// Input float32 [transmit, element, sample] (RF, e.g. after `convert`) or complex64 (IQ).
// Output `beamformed`, the input's element type: image [lateral (m), axial (m)] or
// [angle (rad), radius (m)], depth fastest; lines [line, axial (m)].
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
};

class BeamformStage : public Stage {
 public:
  static StageInfo info();
  explicit BeamformStage(const ParamValues& params);
  explicit BeamformStage(const BeamformParams& params) : params_(params) {}

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  // Pixel position of output index (lateral i, depth j) for transmit-independent grids, and the
  // lateral position of line i (its transmit's source x) for `lines`.
  void pixel_position(std::int64_t i, std::int64_t j, double& x, double& z) const;

 private:
  // Geometry of this frame (vectors read per frame) into the host arrays below.
  void read_geometry(const FrameMeta& frame);

  BeamformParams params_;
  std::int64_t transmits_ = 0, elements_ = 0, samples_ = 0, lateral_ = 0, depth_ = 0;
  int channels_ = 1;                 // 1 RF, 2 IQ
  double sample_origin_s_ = 0, sampling_frequency_hz_ = 0, demodulation_frequency_hz_ = 0, inverse_c_ = 0;
  std::vector<beamform::Transmit<double>> transmits_host_;
  std::vector<double> element_x_, element_z_, element_delay_;  // this frame's vectors (storage reused)
  std::vector<double> wavefront_, angle_, source_x_, source_z_, transmit_delay_;
};

}  // namespace sonopipe
