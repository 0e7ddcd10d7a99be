// Generic speckle frames: random point scatterers (Gaussian amplitudes, uniform positions, a given
// number per resolution cell) convolved with a Gaussian-enveloped pulse axially and a Gaussian
// beam laterally, as IQ (analytic baseband, demodulated at f_dem) or RF, int16 or floating point.
// The scatterer field is fixed; frame i sees it shifted axially by velocity * i / frame_rate (the
// truth written beside the frames) plus fresh white noise at the given SNR.
//
// Shape, outermost first: [sample], [line, sample] or [plane, line, sample]; int16 IQ adds a last
// axis "iq" of size 2 (I, Q interleaved), floating IQ is complex64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <memory>

#include "sdk/frame.h"
#include "sdk/thread_pool.h"

namespace sonopipe::sim {

struct SpeckleParams {
  FrameKind kind = FrameKind::iq;              // iq or rf
  bool integer_samples = true;                 // int16 (scanner counts) or float32/complex64
  std::vector<std::int64_t> shape = {64, 1024};  // [plane,] [line,] sample
  double sampling_frequency_hz = 0.0;          // 0: 40 MHz for RF, 10 MHz for IQ
  double center_frequency_hz = 5.0e6;
  double fractional_bandwidth = 0.6;           // -6 dB bandwidth / centre frequency
  double demodulation_frequency_hz = 0.0;      // IQ only; 0: the centre frequency
  double speed_of_sound_m_per_s = 1540.0;
  double line_pitch_m = 2.0e-4;                // between lines and between planes
  double scatterers_per_cell = 10.0;           // per resolution cell (axial x lateral [x elevational])
  double axial_velocity_m_per_s = 0.0;         // positive: away from the transducer
  double frame_rate_hz = 100.0;
  double snr_db = 40.0;                        // signal rms / noise sd; infinity: no noise
  std::size_t frames = 1;                      // frames to be generated (sizes the scatterer region)
  std::uint32_t stream_id = 0;
  std::int64_t start_time_ns = 0;              // acquisition time of frame 0
  std::uint64_t seed = 1;
};

class SpeckleGenerator {
 public:
  explicit SpeckleGenerator(const SpeckleParams& params);  // throws std::invalid_argument
  ~SpeckleGenerator();

  const SpeckleParams& params() const { return params_; }
  FrameMeta frame_meta(std::size_t index) const;   // header of frame `index` (time, sequence)
  std::vector<std::byte> frame(std::size_t index) const;  // payload, reproducible from (seed, index)
  double axial_shift_m(std::size_t index) const;   // truth: scatterer displacement of frame `index`
  double counts_per_unit() const { return scale_; }  // amplitude scale applied before quantisation
  std::size_t scatterer_count() const { return scatterers_.size(); }
  std::size_t clipped_samples() const { return clipped_; }  // int16 saturations so far

  // Pulse envelope standard deviation in seconds, from the -6 dB fractional bandwidth.
  static double envelope_sigma_s(double center_frequency_hz, double fractional_bandwidth);

 private:
  struct Scatterer {
    double depth_m, lateral_m, elevation_m, amplitude;
  };
  // Noise-free echo of every line as interleaved (re, im) for IQ or real values for RF, in
  // scatterer amplitude units, for an axial shift of the whole field.
  std::vector<double> echo(double shift_m) const;

  SpeckleParams params_;
  FrameMeta meta_;
  std::int64_t planes_ = 1, lines_ = 1, samples_ = 0;
  double sigma_t_s_ = 0, sigma_lateral_m_ = 0;
  std::vector<Scatterer> scatterers_;  // sorted by lateral position
  double scale_ = 1.0;
  double noise_sd_ = 0.0;              // in output units
  mutable std::size_t clipped_ = 0;
  std::unique_ptr<ThreadPool> pool_;   // lines are synthesised in parallel
  mutable std::unique_ptr<std::vector<double>> cached_echo_;  // clean echo of the last shift
  mutable double cached_shift_m_ = 0.0;
};

}  // namespace sonopipe::sim
