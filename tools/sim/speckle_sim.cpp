#include "tools/sim/speckle_sim.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

#include "tools/sim/sim_random.h"
#include "tools/sim/sim_constants.h"

namespace sonopipe::sim {

namespace {

constexpr double kBeamSpan = 3.0;        // beam truncated at +-3 sigma laterally
constexpr double kBeamSigmaPerPitch = 0.5;  // lateral beam sigma / line pitch: neighbours correlate
constexpr double kFwhmPerSigma = 2.3548200450309493;  // 2 sqrt(2 ln 2)
constexpr double kInt16TargetRms = 3000.0;  // counts; speckle peaks (~5 rms) stay below 32767
constexpr double kFloatTargetRms = 1.0;
constexpr double kMaxScatterers = 5e7;

void require_speckle(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("speckle: " + message);
}

}  // namespace

double SpeckleGenerator::envelope_sigma_s(double center_frequency_hz, double fractional_bandwidth) {
  // Envelope exp(-t^2 / 2 sigma_t^2) has spectrum exp(-f^2 / 2 sigma_f^2), sigma_f = 1 / (2 pi sigma_t);
  // its -6 dB (half amplitude) full width is 2 sigma_f sqrt(2 ln 2).
  const double bandwidth_hz = fractional_bandwidth * center_frequency_hz;
  const double sigma_f = bandwidth_hz / (2.0 * std::sqrt(2.0 * std::log(2.0)));
  return 1.0 / (2.0 * kPi * sigma_f);
}

SpeckleGenerator::SpeckleGenerator(const SpeckleParams& params) : params_(params) {
  SpeckleParams& p = params_;
  require_speckle(p.kind == FrameKind::iq || p.kind == FrameKind::rf, "kind must be iq or rf");
  require_speckle(!p.shape.empty() && p.shape.size() <= 3, "shape needs 1 to 3 axes: [plane,] [line,] sample");
  for (std::int64_t size : p.shape) require_speckle(size > 0, "every axis of the shape must be positive");
  if (p.sampling_frequency_hz == 0.0) p.sampling_frequency_hz = p.kind == FrameKind::rf ? 40e6 : 10e6;
  if (p.demodulation_frequency_hz == 0.0 && p.kind == FrameKind::iq) p.demodulation_frequency_hz = p.center_frequency_hz;
  if (p.kind == FrameKind::rf) p.demodulation_frequency_hz = 0.0;
  require_speckle(p.center_frequency_hz > 0 && p.sampling_frequency_hz > 0 && p.speed_of_sound_m_per_s > 0 &&
              p.line_pitch_m > 0 && p.frame_rate_hz > 0 && p.scatterers_per_cell > 0 && p.frames > 0,
          "frequencies, speed of sound, pitch, frame rate, density and frame count must be positive");
  require_speckle(p.fractional_bandwidth > 0 && p.fractional_bandwidth < 2, "fractional bandwidth must be in (0, 2)");
  const double highest_hz = p.center_frequency_hz * (1.0 + p.fractional_bandwidth / 2.0);
  if (p.kind == FrameKind::rf)
    require_speckle(p.sampling_frequency_hz > 2.0 * highest_hz,
            "RF sampling at " + std::to_string(p.sampling_frequency_hz) + " Hz aliases a pulse reaching " +
                std::to_string(highest_hz) + " Hz (-6 dB)");
  else
    require_speckle(p.sampling_frequency_hz > p.fractional_bandwidth * p.center_frequency_hz,
            "IQ sampling frequency must exceed the pulse bandwidth");

  samples_ = p.shape.back();
  if (p.shape.size() >= 2) lines_ = p.shape[p.shape.size() - 2];
  if (p.shape.size() == 3) planes_ = p.shape[0];
  sigma_t_s_ = envelope_sigma_s(p.center_frequency_hz, p.fractional_bandwidth);
  sigma_lateral_m_ = kBeamSigmaPerPitch * p.line_pitch_m;

  // Frame description: depth axis in metres (two-way travel), lines and planes at the pitch.
  meta_.stream_id = p.stream_id;
  meta_.kind = p.kind;
  meta_.sampling_frequency_hz = p.sampling_frequency_hz;
  meta_.center_frequency_hz = p.center_frequency_hz;
  meta_.demodulation_frequency_hz = p.demodulation_frequency_hz;
  meta_.speed_of_sound_m_per_s = p.speed_of_sound_m_per_s;
  meta_.attributes["simulator"] = "speckle";
  const double sample_spacing_m = p.speed_of_sound_m_per_s / (2.0 * p.sampling_frequency_hz);
  if (p.shape.size() == 3) meta_.payload.axes.push_back({"plane", planes_, p.line_pitch_m, "m"});
  if (p.shape.size() >= 2) meta_.payload.axes.push_back({"line", lines_, p.line_pitch_m, "m"});
  meta_.payload.axes.push_back({"sample", samples_, sample_spacing_m, "m"});
  if (p.kind == FrameKind::iq && p.integer_samples) {
    meta_.payload.dtype = DType::int16;
    meta_.payload.axes.push_back({"iq", 2});
  } else if (p.kind == FrameKind::iq) {
    meta_.payload.dtype = DType::complex64;
  } else {
    meta_.payload.dtype = p.integer_samples ? DType::int16 : DType::float32;
  }

  // Scatterer region: the imaged region plus the pulse and beam reach and the largest shift.
  const double max_shift_m = std::abs(axial_shift_m(p.frames - 1));
  const double axial_margin_m = kEnvelopeSpan * sigma_t_s_ * p.speed_of_sound_m_per_s / 2.0 + max_shift_m;
  const double depth_lo = -axial_margin_m, depth_hi = (samples_ - 1) * sample_spacing_m + axial_margin_m;
  const double beam_margin_m = kBeamSpan * sigma_lateral_m_;
  const double lateral_hi = (lines_ - 1) * p.line_pitch_m + beam_margin_m;
  const double elevation_hi = (planes_ - 1) * p.line_pitch_m + beam_margin_m;
  const bool volume = p.shape.size() == 3;
  // Resolution cell: -6 dB pulse length (two-way, so c/2) by -6 dB beam width.
  const double axial_cell_m = kFwhmPerSigma * sigma_t_s_ * p.speed_of_sound_m_per_s / 2.0;
  const double lateral_cell_m = kFwhmPerSigma * sigma_lateral_m_;
  double cells = (depth_hi - depth_lo) / axial_cell_m * (lateral_hi + beam_margin_m) / lateral_cell_m;
  if (volume) cells *= (elevation_hi + beam_margin_m) / lateral_cell_m;
  const double count = std::ceil(cells * p.scatterers_per_cell);
  require_speckle(count <= kMaxScatterers, "needs " + std::to_string(count) + " scatterers, more than the " +
                                       std::to_string(kMaxScatterers) + " this generator allows");

  Rng rng(p.seed);
  std::uniform_real_distribution<double> depth(depth_lo, depth_hi), lateral(-beam_margin_m, lateral_hi),
      elevation(-beam_margin_m, elevation_hi);
  std::normal_distribution<double> amplitude(0.0, 1.0);
  scatterers_.resize(static_cast<std::size_t>(count));
  for (Scatterer& s : scatterers_)
    s = {depth(rng), lateral(rng), volume ? elevation(rng) : 0.0, amplitude(rng)};
  std::sort(scatterers_.begin(), scatterers_.end(),
            [](const Scatterer& a, const Scatterer& b) { return a.lateral_m < b.lateral_m; });

  pool_ = std::make_unique<ThreadPool>();
  // Scale from the noise-free frame 0 so every frame shares one amplitude scale.
  const std::vector<double> clean = echo(0.0);
  double power = 0.0;
  for (double v : clean) power += v * v;
  const std::size_t points = static_cast<std::size_t>(planes_ * lines_ * samples_);
  const double rms = std::sqrt(power / static_cast<double>(points));  // |z| rms for IQ
  const double target = p.integer_samples ? kInt16TargetRms : kFloatTargetRms;
  scale_ = rms > 0 ? target / rms : 1.0;
  noise_sd_ = std::isfinite(p.snr_db) ? target / std::pow(10.0, p.snr_db / 20.0) : 0.0;
}

SpeckleGenerator::~SpeckleGenerator() = default;

double SpeckleGenerator::axial_shift_m(std::size_t index) const {
  return params_.axial_velocity_m_per_s * static_cast<double>(index) / params_.frame_rate_hz;
}

FrameMeta SpeckleGenerator::frame_meta(std::size_t index) const {
  FrameMeta meta = meta_;
  meta.sequence = index;
  meta.acquisition_time_ns =
      params_.start_time_ns + std::llround(static_cast<double>(index) * 1e9 / params_.frame_rate_hz);
  return meta;
}

std::vector<double> SpeckleGenerator::echo(double shift_m) const {
  const SpeckleParams& p = params_;
  const bool iq = p.kind == FrameKind::iq;
  const std::size_t values_per_sample = iq ? 2 : 1;
  const std::size_t line_values = static_cast<std::size_t>(samples_) * values_per_sample;
  std::vector<double> out(static_cast<std::size_t>(planes_ * lines_) * line_values, 0.0);
  const double fs = p.sampling_frequency_hz, c = p.speed_of_sound_m_per_s;
  const double reach_s = kEnvelopeSpan * sigma_t_s_;
  const double beam_reach_m = kBeamSpan * sigma_lateral_m_;
  const double inv_two_sigma_t2 = 1.0 / (2.0 * sigma_t_s_ * sigma_t_s_);
  const double inv_two_sigma_l2 = 1.0 / (2.0 * sigma_lateral_m_ * sigma_lateral_m_);
  const double omega_c = 2.0 * kPi * p.center_frequency_hz, omega_dem = 2.0 * kPi * p.demodulation_frequency_hz;

  const double dt = 1.0 / fs;
  const double ratio_step = std::exp(-2.0 * dt * dt * inv_two_sigma_t2);
  const std::complex<double> step = std::polar(1.0, iq ? (omega_c - omega_dem) * dt : omega_c * dt);

  // The axial pulse of each scatterer is the same on every line it reaches: compute its sample
  // window, starting envelope, envelope ratio and carrier phasor once per scatterer. The samples are
  // then walked by recurrences instead of exp/cos/sin per sample (same values to ~1e-14 over the
  // <= 2 x 4 sigma_t window):
  //   envelope: g_{k+1} = g_k r_k, r_{k+1} = r_k q  (Gaussian: the ratio of neighbours is geometric);
  //   carrier:  phasor_{k+1} = phasor_k step       (the phase advances by a constant per sample).
  // IQ: analytic echo envelope * exp(j w_c (t - delay)), demodulated by exp(-j w_dem t).
  // RF: envelope * cos(w_c (t - delay)), the real part of the same phasor without demodulation.
  struct Pulse {
    std::int64_t k_lo, k_hi;
    double envelope, ratio;
    std::complex<double> phasor;
  };
  std::vector<Pulse> pulses(scatterers_.size());
  pool_->parallel_for(scatterers_.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const double delay_s = 2.0 * (scatterers_[i].depth_m + shift_m) / c;  // two-way travel time
      Pulse& pulse = pulses[i];
      pulse.k_lo = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::ceil((delay_s - reach_s) * fs)));
      pulse.k_hi = std::min<std::int64_t>(samples_ - 1, static_cast<std::int64_t>(std::floor((delay_s + reach_s) * fs)));
      const double d0 = static_cast<double>(pulse.k_lo) * dt - delay_s;
      pulse.envelope = std::exp(-d0 * d0 * inv_two_sigma_t2);
      pulse.ratio = std::exp(-(2.0 * d0 * dt + dt * dt) * inv_two_sigma_t2);
      const double phase0 = iq ? omega_c * d0 - omega_dem * static_cast<double>(pulse.k_lo) * dt : omega_c * d0;
      pulse.phasor = std::polar(1.0, phase0);
    }
  }, 4096);

  pool_->parallel_for(static_cast<std::size_t>(planes_ * lines_), [&](std::size_t begin, std::size_t end) {
    for (std::size_t line_index = begin; line_index < end; ++line_index) {
      const double x = static_cast<double>(line_index % static_cast<std::size_t>(lines_)) * p.line_pitch_m;
      const double y = static_cast<double>(line_index / static_cast<std::size_t>(lines_)) * p.line_pitch_m;
      double* line = out.data() + line_index * line_values;
      auto first = std::lower_bound(scatterers_.begin(), scatterers_.end(), x - beam_reach_m,
                                    [](const Scatterer& s, double v) { return s.lateral_m < v; });
      for (auto s = first; s != scatterers_.end() && s->lateral_m <= x + beam_reach_m; ++s) {
        const double dx = s->lateral_m - x, dy = s->elevation_m - y;
        if (std::abs(dy) > beam_reach_m) continue;
        const Pulse& pulse = pulses[static_cast<std::size_t>(s - scatterers_.begin())];
        double envelope = pulse.envelope * s->amplitude * std::exp(-(dx * dx + dy * dy) * inv_two_sigma_l2);
        double ratio = pulse.ratio;
        std::complex<double> phasor = pulse.phasor;
        for (std::int64_t k = pulse.k_lo; k <= pulse.k_hi; ++k) {
          if (iq) {
            line[2 * k] += envelope * phasor.real();
            line[2 * k + 1] += envelope * phasor.imag();
          } else {
            line[k] += envelope * phasor.real();
          }
          envelope *= ratio;
          ratio *= ratio_step;
          phasor *= step;
        }
      }
    }
  });
  return out;
}

std::vector<std::byte> SpeckleGenerator::frame(std::size_t index) const {
  // Without motion every frame shares one clean echo: synthesise it once.
  const double shift_m = axial_shift_m(index);
  if (!cached_echo_ || cached_shift_m_ != shift_m) {
    cached_echo_ = std::make_unique<std::vector<double>>(echo(shift_m));
    cached_shift_m_ = shift_m;
  }
  std::vector<double> values = *cached_echo_;
  // Noise reproducible per (seed, frame) whatever order frames are generated in.
  std::seed_seq noise_seed{params_.seed, static_cast<std::uint64_t>(index), std::uint64_t{0x6e6f697365}};
  Rng rng(noise_seed);
  const bool iq = params_.kind == FrameKind::iq;
  // Complex noise splits its power over I and Q.
  std::normal_distribution<double> noise(0.0, iq ? noise_sd_ / std::sqrt(2.0) : noise_sd_);
  for (double& v : values) v = v * scale_ + (noise_sd_ > 0 ? noise(rng) : 0.0);

  std::vector<std::byte> payload(meta_.payload.byte_size());
  if (params_.integer_samples) {
    auto* out = reinterpret_cast<std::int16_t*>(payload.data());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double rounded = std::nearbyint(values[i]);
      if (rounded > 32767.0 || rounded < -32768.0) ++clipped_;
      out[i] = static_cast<std::int16_t>(std::clamp(rounded, -32768.0, 32767.0));
    }
  } else {
    auto* out = reinterpret_cast<float*>(payload.data());  // complex64 = interleaved float pairs
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  }
  return payload;
}

}  // namespace sonopipe::sim
