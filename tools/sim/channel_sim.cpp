#include "tools/sim/channel_sim.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>

#include "sdk/thread_pool.h"
#include "stages/beamform/channel_conventions.h"
#include "tools/sim/sim_random.h"
#include "tools/sim/speckle_sim.h"
#include "tools/sim/sim_constants.h"

namespace sonopipe::sim {

namespace {

void require_channel(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("channel sim: " + message);
}

double element_x(const ChannelSimConfig& config, int element) {
  return (element - (config.elements - 1) / 2.0) * config.pitch_m;
}

// Lateral extent [left, right] of the transmit aperture's elements (their outer edges).
std::pair<double, double> aperture_edges(const ChannelTransmit& transmit, const ChannelSimConfig& config) {
  const int first = transmit.elements > 0 ? transmit.first_element : 0;
  const int count = transmit.elements > 0 ? transmit.elements : config.elements;
  return {element_x(config, first) - config.pitch_m / 2, element_x(config, first + count - 1) + config.pitch_m / 2};
}

}  // namespace

ChannelTransmit ChannelTransmit::plane(double angle_rad) {
  return {.wave = Wave::plane, .angle_rad = angle_rad};
}

ChannelTransmit ChannelTransmit::focused(double x_m, double z_m, int first_element, int elements) {
  return {.wave = Wave::focused, .source_x_m = x_m, .source_z_m = z_m, .first_element = first_element,
          .elements = elements};
}

ChannelTransmit ChannelTransmit::diverging(double x_m, double z_m) {
  return {.wave = Wave::diverging, .source_x_m = x_m, .source_z_m = z_m};
}

double transmit_time_s(const ChannelTransmit& transmit, double x_m, double z_m, double speed_of_sound_m_per_s) {
  const double c = speed_of_sound_m_per_s;
  if (transmit.wave == ChannelTransmit::Wave::plane)
    return (x_m * std::sin(transmit.angle_rad) + z_m * std::cos(transmit.angle_rad)) / c;
  const double source_range = std::hypot(transmit.source_x_m, transmit.source_z_m);
  const double to_source = std::hypot(x_m - transmit.source_x_m, z_m - transmit.source_z_m);
  if (transmit.wave == ChannelTransmit::Wave::diverging) return (to_source - source_range) / c;
  return z_m < transmit.source_z_m ? (source_range - to_source) / c : (source_range + to_source) / c;
}

bool insonified(const ChannelTransmit& transmit, const ChannelSimConfig& config, double x_m, double z_m) {
  if (z_m <= 0.0) return false;
  const auto [left, right] = aperture_edges(transmit, config);
  if (transmit.wave == ChannelTransmit::Wave::plane) {
    const double x_at_array = x_m - z_m * std::tan(transmit.angle_rad);  // back along the ray
    return x_at_array >= left && x_at_array <= right;
  }
  const double xs = transmit.source_x_m, zs = transmit.source_z_m;
  if (transmit.wave == ChannelTransmit::Wave::focused) {
    // Diffraction-limited half width at the focus: lambda z_s / D.
    const double wavelength = config.speed_of_sound_m_per_s / config.center_frequency_hz;
    if (std::abs(x_m - xs) <= wavelength * zs / (right - left)) return true;
    if (z_m == zs) return false;
  }
  // The straight ray through the source and the point meets the array plane at x_at_array.
  const double x_at_array = xs + (x_m - xs) * (-zs) / (z_m - zs);
  return x_at_array >= left && x_at_array <= right;
}

double default_sampling_frequency_hz(const ChannelSimConfig& config) {
  if (config.sampling_frequency_hz != 0.0) return config.sampling_frequency_hz;
  return config.iq ? config.center_frequency_hz : 4.0 * config.center_frequency_hz;
}

std::int64_t samples_covering(const ChannelSimConfig& config, double x_min_m, double x_max_m, double z_max_m) {
  const double c = config.speed_of_sound_m_per_s, fs = default_sampling_frequency_hz(config);
  const double span_s =
      kEnvelopeSpan * SpeckleGenerator::envelope_sigma_s(config.center_frequency_hz, config.fractional_bandwidth);
  const double first_x = element_x(config, 0), last_x = element_x(config, config.elements - 1);
  // The two-way time grows with depth for every wave (the transmit time, before a focus as beyond
  // it, and the receive path): the deepest row bounds it; along that row it is sampled finely.
  constexpr int kRowPoints = 257;
  double latest_echo_s = config.initial_time_s;
  for (const ChannelTransmit& t : config.transmits)
    for (int i = 0; i < kRowPoints; ++i) {
      const double x = x_min_m + (x_max_m - x_min_m) * i / (kRowPoints - 1);
      const double farthest = std::max(std::hypot(x - first_x, z_max_m), std::hypot(x - last_x, z_max_m));
      latest_echo_s = std::max(latest_echo_s, transmit_time_s(t, x, z_max_m, c) + farthest / c + span_s);
    }
  // One sample more than the last echo's own count: the fine row may miss its peak by a hair.
  return static_cast<std::int64_t>(std::ceil((latest_echo_s - config.initial_time_s) * fs)) + 2;
}

ChannelSimResult simulate_channel(const ChannelSimConfig& config, ThreadPool* pool) {
  ChannelSimConfig p = config;
  require_channel(p.elements > 0 && p.pitch_m > 0, "element count and pitch must be positive");
  require_channel(p.center_frequency_hz > 0 && p.speed_of_sound_m_per_s > 0, "f_c and c must be positive");
  require_channel(p.fractional_bandwidth > 0 && p.fractional_bandwidth < 2, "fractional bandwidth must be in (0, 2)");
  require_channel(!p.transmits.empty(), "at least one transmit is needed");
  p.sampling_frequency_hz = default_sampling_frequency_hz(p);
  if (p.iq && p.demodulation_frequency_hz == 0.0) p.demodulation_frequency_hz = p.center_frequency_hz;
  if (!p.iq) p.demodulation_frequency_hz = 0.0;
  const double highest_hz = p.center_frequency_hz * (1.0 + p.fractional_bandwidth / 2.0);
  require_channel(p.iq ? p.sampling_frequency_hz > p.fractional_bandwidth * p.center_frequency_hz
               : p.sampling_frequency_hz > 2.0 * highest_hz,
          "sampling frequency " + std::to_string(p.sampling_frequency_hz) + " Hz is too low for the pulse");
  for (const ChannelTransmit& t : p.transmits) {
    require_channel(t.elements >= 0 && t.first_element >= 0 && t.first_element + t.elements <= p.elements,
            "a transmit aperture lies outside the array");
    if (t.wave == ChannelTransmit::Wave::focused) require_channel(t.source_z_m > 0, "a focus must lie in front of the array");
    if (t.wave == ChannelTransmit::Wave::diverging) require_channel(t.source_z_m < 0, "a virtual source must lie behind the array");
    if (t.wave == ChannelTransmit::Wave::plane) require_channel(std::abs(t.angle_rad) < kPi / 2, "plane-wave angle out of range");
  }

  const double c = p.speed_of_sound_m_per_s, fs = p.sampling_frequency_hz, dt = 1.0 / fs;
  const double sigma_s = SpeckleGenerator::envelope_sigma_s(p.center_frequency_hz, p.fractional_bandwidth);
  const double span_s = kEnvelopeSpan * sigma_s;
  const std::size_t transmits = p.transmits.size(), elements = static_cast<std::size_t>(p.elements);

  ChannelSimResult result;
  result.wavelength_m = c / p.center_frequency_hz;
  for (int e = 0; e < p.elements; ++e) result.element_x_m.push_back(element_x(p, e));

  // Transmit arrival per (transmit, scatterer); NaN where the transmit does not reach it.
  std::vector<double> arrival(transmits * p.scatterers.size());
  double latest_echo_s = p.initial_time_s;
  for (std::size_t t = 0; t < transmits; ++t)
    for (std::size_t s = 0; s < p.scatterers.size(); ++s) {
      const Scatterer& sc = p.scatterers[s];
      const bool reached = insonified(p.transmits[t], p, sc.x_m, sc.z_m);
      arrival[t * p.scatterers.size() + s] =
          reached ? transmit_time_s(p.transmits[t], sc.x_m, sc.z_m, c) : std::numeric_limits<double>::quiet_NaN();
      if (reached) {
        const double farthest = std::max(std::hypot(sc.x_m - result.element_x_m.front(), sc.z_m),
                                         std::hypot(sc.x_m - result.element_x_m.back(), sc.z_m));
        latest_echo_s = std::max(latest_echo_s, arrival[t * p.scatterers.size() + s] + farthest / c + span_s);
      }
    }
  if (p.samples == 0) p.samples = static_cast<std::int64_t>(std::ceil((latest_echo_s - p.initial_time_s) * fs)) + 1;
  require_channel(p.samples > 0, "sample count must be positive");
  const std::size_t samples = static_cast<std::size_t>(p.samples);

  // Echoes, one (transmit, element) line at a time. The Gaussian envelope and the carrier advance by
  // recurrences from sample to sample (two complex products per sample instead of exp and cos).
  std::vector<std::complex<double>> lines(transmits * elements * samples);
  const double omega_c = 2 * kPi * p.center_frequency_hz, omega_d = 2 * kPi * p.demodulation_frequency_hz;
  const double decay_step = std::exp(-dt * dt / (sigma_s * sigma_s));
  auto synthesise = [&](std::size_t begin, std::size_t end) {
    for (std::size_t line = begin; line < end; ++line) {
      const std::size_t t = line / elements, e = line % elements;
      std::complex<double>* out = &lines[line * samples];
      for (std::size_t s = 0; s < p.scatterers.size(); ++s) {
        const double tx = arrival[t * p.scatterers.size() + s];
        if (std::isnan(tx)) continue;
        const Scatterer& sc = p.scatterers[s];
        const double tau = tx + std::hypot(sc.x_m - result.element_x_m[e], sc.z_m) / c;
        const double first = std::ceil((tau - span_s - p.initial_time_s) * fs);
        const double last = std::floor((tau + span_s - p.initial_time_s) * fs);
        if (last < 0 || first >= static_cast<double>(samples)) continue;
        const std::size_t i0 = static_cast<std::size_t>(std::max(first, 0.0));
        const std::size_t i1 = static_cast<std::size_t>(std::min(last, static_cast<double>(samples - 1)));
        const double t0 = p.initial_time_s + static_cast<double>(i0) * dt;
        double u = t0 - tau;  // time from the echo's centre
        double envelope = sc.amplitude * std::exp(-u * u / (2 * sigma_s * sigma_s));
        double ratio = std::exp(-(2 * u * dt + dt * dt) / (2 * sigma_s * sigma_s));  // envelope(n+1)/envelope(n)
        // RF: carrier exp(j omega_c u), real part kept. IQ: analytic echo times exp(-j omega_d t).
        std::complex<double> phase = std::polar(1.0, omega_c * u - omega_d * t0);
        const std::complex<double> phase_step = std::polar(1.0, (omega_c - omega_d) * dt);
        for (std::size_t i = i0; i <= i1; ++i) {
          out[i] += envelope * phase;
          envelope *= ratio;
          ratio *= decay_step;
          phase *= phase_step;
        }
      }
    }
  };
  if (pool) pool->parallel_for(transmits * elements, synthesise);
  else synthesise(0, transmits * elements);

  // Noise at snr_db below the mean signal power (per real sample for RF, per complex sample for IQ).
  if (std::isfinite(p.snr_db)) {
    double power = 0;
    for (const auto& v : lines) power += p.iq ? std::norm(v) : v.real() * v.real();
    power /= static_cast<double>(lines.size());
    const double noise_sd = std::sqrt(power / std::pow(10.0, p.snr_db / 10.0));
    Rng rng(p.seed);
    std::normal_distribution<double> normal(0.0, p.iq ? noise_sd / std::sqrt(2.0) : noise_sd);
    for (auto& v : lines) v += p.iq ? std::complex<double>(normal(rng), normal(rng)) : std::complex<double>(normal(rng), 0);
  }
  if (p.iq) {
    result.iq.resize(lines.size());
    std::transform(lines.begin(), lines.end(), result.iq.begin(),
                   [](std::complex<double> v) { return std::complex<float>(v); });
  } else {
    result.rf.resize(lines.size());
    std::transform(lines.begin(), lines.end(), result.rf.begin(), [](std::complex<double> v) { return float(v.real()); });
  }

  // Frame description (stages/beamform/channel_conventions.h).
  FrameMeta& meta = result.meta;
  meta.stream_id = p.stream_id;
  meta.kind = p.iq ? FrameKind::channel_iq : FrameKind::channel_rf;
  meta.sampling_frequency_hz = fs;
  meta.center_frequency_hz = p.center_frequency_hz;
  meta.demodulation_frequency_hz = p.demodulation_frequency_hz;
  meta.speed_of_sound_m_per_s = c;
  meta.attributes["simulator"] = "channel";
  meta.payload.dtype = p.iq ? DType::complex64 : DType::float32;
  meta.payload.axes = {
      {std::string(channel::transmit_axis), static_cast<std::int64_t>(transmits)},
      {std::string(channel::element_axis), p.elements, p.pitch_m, "m", result.element_x_m.front()},
      {std::string(channel::sample_axis), p.samples, dt, "s", p.initial_time_s},
  };
  auto& vectors = meta.vectors;
  vectors[std::string(channel::element_x_m)] = result.element_x_m;
  vectors[std::string(channel::element_z_m)] = std::vector<double>(elements, 0.0);
  std::vector<double> wavefront, angle, source_x, source_z;
  for (const ChannelTransmit& t : p.transmits) {
    const bool plane = t.wave == ChannelTransmit::Wave::plane;
    wavefront.push_back(plane ? channel::wavefront_plane : channel::wavefront_spherical);
    angle.push_back(plane ? t.angle_rad : 0.0);
    source_x.push_back(plane ? 0.0 : t.source_x_m);
    source_z.push_back(plane ? 0.0 : t.source_z_m);
  }
  vectors[std::string(channel::transmit_wavefront)] = wavefront;
  vectors[std::string(channel::transmit_angle_rad)] = angle;
  vectors[std::string(channel::transmit_source_x_m)] = source_x;
  vectors[std::string(channel::transmit_source_z_m)] = source_z;
  return result;
}

std::vector<Scatterer> speckle_phantom(double x_min_m, double x_max_m, double z_min_m, double z_max_m,
                                       double wavelength_m, double pitch_m, double per_cell,
                                       const std::vector<Cyst>& cysts, std::uint64_t seed) {
  require_channel(x_max_m > x_min_m && z_max_m > z_min_m && wavelength_m > 0 && pitch_m > 0 && per_cell > 0,
          "phantom extent, wavelength, pitch and density must be positive");
  const double cell_area = (wavelength_m / 2) * pitch_m;
  const auto count = static_cast<std::size_t>(std::ceil((x_max_m - x_min_m) * (z_max_m - z_min_m) / cell_area * per_cell));
  Rng rng(seed);
  std::uniform_real_distribution<double> x(x_min_m, x_max_m), z(z_min_m, z_max_m);
  std::normal_distribution<double> amplitude(0.0, 1.0);
  std::vector<Scatterer> scatterers;
  scatterers.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const Scatterer s{x(rng), z(rng), amplitude(rng)};
    const bool in_cyst = std::any_of(cysts.begin(), cysts.end(), [&](const Cyst& cyst) {
      return std::hypot(s.x_m - cyst.x_m, s.z_m - cyst.z_m) < cyst.radius_m;
    });
    if (!in_cyst) scatterers.push_back(s);
  }
  return scatterers;
}

std::vector<ChannelTransmit> plane_wave_sequence(int count, double max_angle_rad) {
  require_channel(count > 0, "plane-wave count must be positive");
  std::vector<ChannelTransmit> sequence;
  for (int i = 0; i < count; ++i)
    sequence.push_back(ChannelTransmit::plane(count == 1 ? 0.0 : -max_angle_rad + 2 * max_angle_rad * i / (count - 1)));
  return sequence;
}

std::vector<ChannelTransmit> focused_line_sequence(const ChannelSimConfig& config, int lines, double focus_z_m,
                                                   int aperture_elements) {
  require_channel(lines > 0 && aperture_elements > 0 && aperture_elements <= config.elements && focus_z_m > 0,
          "focused lines need a positive count, an aperture within the array and a focus in front of it");
  std::vector<ChannelTransmit> sequence;
  const double first_x = element_x(config, 0), last_x = element_x(config, config.elements - 1);
  for (int i = 0; i < lines; ++i) {
    const double x = lines == 1 ? 0.0 : first_x + (last_x - first_x) * i / (lines - 1);
    const int centre = static_cast<int>(std::lround(x / config.pitch_m + (config.elements - 1) / 2.0));
    const int first = std::clamp(centre - aperture_elements / 2, 0, config.elements - aperture_elements);
    sequence.push_back(ChannelTransmit::focused(x, focus_z_m, first, aperture_elements));
  }
  return sequence;
}

}  // namespace sonopipe::sim
