#include "tools/sim/arfi_sim.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <random>
#include <stdexcept>

#include "sdk/thread_pool.h"
#include "stages/arfi/arfi_conventions.h"
#include "tools/sim/sim_random.h"
#include "tools/sim/sim_constants.h"

namespace sonopipe::sim {
namespace {

using Complex = std::complex<double>;

// In-place iterative radix-2 FFT; sign -1 forward, +1 inverse (unscaled).
void fft(std::vector<Complex>& a, int sign) {
  const std::size_t n = a.size();
  for (std::size_t i = 1, j = 0; i < n; ++i) {
    std::size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (std::size_t len = 2; len <= n; len <<= 1) {
    const double angle = sign * 2 * kPi / static_cast<double>(len);
    const Complex step(std::cos(angle), std::sin(angle));
    for (std::size_t i = 0; i < n; i += len) {
      Complex w(1, 0);
      for (std::size_t k = 0; k < len / 2; ++k) {
        const Complex u = a[i + k], v = a[i + k + len / 2] * w;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
        w *= step;
      }
    }
  }
}

// Gaussian pulse: amplitude spectrum exp(-(f - f_c)^2 / (2 sigma_f^2)) at half amplitude (-6 dB)
// B / 2 from f_c; envelope exp(-t^2 / (2 sigma_t^2)) with sigma_t = 1 / (2 pi sigma_f).
double sigma_f_hz(const ArfiSimConfig& c) {
  return 0.5 * c.fractional_bandwidth * c.center_frequency_hz / std::sqrt(2 * std::log(2.0));
}

// Baseband low-pass applied about f_dem before decimation: flat to 0.35 fs_iq, raised-cosine to
// zero at 0.5 fs_iq (nothing aliases when decimating to fs_iq).
double lowpass(double baseband_hz, double fs_iq) {
  const double f = std::abs(baseband_hz), pass = 0.35 * fs_iq, stop = 0.5 * fs_iq;
  if (f <= pass) return 1;
  if (f >= stop) return 0;
  return 0.5 * (1 + std::cos(kPi * (f - pass) / (stop - pass)));
}

double rise_recovery(const ArfiSimConfig& c, double t) {
  if (t <= 0) return 0;
  const double a = c.rise_time_s, b = c.recovery_time_s;
  auto r = [&](double x) { return (1 - std::exp(-x / a)) * std::exp(-x / b); };
  const double t_peak = a * std::log((a + b) / a);
  return r(t) / r(t_peak);
}

std::size_t next_pow2(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

void validate(const ArfiSimConfig& c) {
  auto require = [](bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(std::string("arfi simulator: ") + what);
  };
  require(c.locations >= 1 && c.tracks >= 1 && c.samples >= 8, "need locations >= 1, tracks >= 1, samples >= 8");
  require(c.iq_sampling_hz > 0 && c.rf_oversampling >= 2, "need iq_sampling_hz > 0 and rf_oversampling >= 2");
  require(c.center_frequency_hz > 0 && c.fractional_bandwidth > 0, "need f_c > 0 and a bandwidth > 0");
  require(c.center_frequency_hz * (1 + c.fractional_bandwidth) < 0.5 * c.iq_sampling_hz * c.rf_oversampling,
          "the pulse band exceeds the fine grid's Nyquist frequency: raise rf_oversampling");
  require(c.demodulation_frequency_hz > 0, "need demodulation_frequency_hz > 0");
  require(c.scatterers_per_cell >= 10, "need >= 10 scatterers per resolution cell (fully developed speckle)");
  require(c.track_prf_hz > 0 && c.rise_time_s > 0 && c.recovery_time_s > 0, "need PRF, rise and recovery times > 0");
  require(c.int16_peak_fraction > 0 && c.int16_peak_fraction <= 1, "int16_peak_fraction must be in (0, 1]");
}

}  // namespace

double arfi_tissue_displacement_um(const ArfiSimConfig& c, double depth_m, double lateral_m, double time_s) {
  if (c.tissue_field) return c.tissue_field(depth_m, lateral_m, time_s);
  const double dz = depth_m - c.focus_depth_m;
  return c.peak_um * std::exp(-dz * dz / (2 * c.depth_sigma_m * c.depth_sigma_m)) *
         std::exp(-lateral_m * lateral_m / (2 * c.lateral_sigma_m * c.lateral_sigma_m)) *
         rise_recovery(c, time_s);
}

ArfiSimResult simulate_arfi(const ArfiSimConfig& c, ThreadPool* pool) {
  validate(c);
  ArfiSimResult out;
  const std::int64_t ensemble = c.tracks + 1, L = c.locations, N = c.samples;
  const double fs_iq = c.iq_sampling_hz, fs_rf = fs_iq * c.rf_oversampling;
  const double sound = c.speed_of_sound_m_per_s;
  const double t_first = 2 * c.start_depth_m / sound;  // two-way time of IQ sample 0
  const double sigma_f = sigma_f_hz(c), sigma_t = 1 / (2 * kPi * sigma_f);
  const double bandwidth_hz = c.fractional_bandwidth * c.center_frequency_hz;
  out.resolution_cell_m = sound / (2 * bandwidth_hz);
  out.scatterers_per_cell = c.scatterers_per_cell;

  // Times: reference 1/PRF before the push, tracks after it.
  out.ensemble_time_s.resize(ensemble);
  out.ensemble_time_s[0] = -1 / c.track_prf_hz;
  for (std::int64_t i = 0; i < c.tracks; ++i) out.ensemble_time_s[i + 1] = c.push_duration_s + i / c.track_prf_hz;
  out.depth_m.resize(N);
  for (std::int64_t i = 0; i < N; ++i) out.depth_m[i] = c.start_depth_m + sound * i / (2 * fs_iq);
  auto lateral_m = [&](std::int64_t l) { return (l - 0.5 * (L - 1)) * c.location_spacing_m; };
  auto drift_um = [&](std::int64_t e) { return c.drift_um_per_s * (out.ensemble_time_s[e] - out.ensemble_time_s[0]); };

  // Truth on the IQ grid.
  out.tissue_um.resize(static_cast<std::size_t>(L * c.tracks * N));
  out.displacement_um.resize(out.tissue_um.size());
  for (std::int64_t l = 0; l < L; ++l)
    for (std::int64_t t = 0; t < c.tracks; ++t)
      for (std::int64_t i = 0; i < N; ++i) {
        const std::size_t at = static_cast<std::size_t>((l * c.tracks + t) * N + i);
        out.tissue_um[at] = arfi_tissue_displacement_um(c, out.depth_m[i], lateral_m(l), out.ensemble_time_s[t + 1]);
        out.displacement_um[at] = out.tissue_um[at] + drift_um(t + 1);
      }

  // Demodulation: f_dem constant, or linear in depth (time) from f_dem to f_dem_end over the line.
  const double t_last = t_first + (N - 1) / fs_iq;
  const double f_dem0 = c.demodulation_frequency_hz;
  const double f_dem1 = c.demodulation_frequency_end_hz > 0 ? c.demodulation_frequency_end_hz : f_dem0;
  auto demod_phase = [&](double t) {  // phi(t) = 2 pi int f_dem, f_dem(t) linear over the line
    const double tc = std::clamp(t, t_first, t_last);
    const double slope = (f_dem1 - f_dem0) / (t_last - t_first);
    return 2 * kPi * (f_dem0 * t + 0.5 * slope * (tc - t_first) * (tc - t_first) + slope * (tc - t_first) * (t - tc));
  };
  const double f_dem_mid = 0.5 * (f_dem0 + f_dem1);

  // Scatterers per location (independent speckle), over the imaged depths plus the pulse length.
  const double margin_m = 6 * sigma_t * sound / 2;
  const double z_lo = c.start_depth_m - margin_m, z_hi = out.depth_m.back() + margin_m;
  const std::int64_t per_location = static_cast<std::int64_t>(std::ceil((z_hi - z_lo) / out.resolution_cell_m * c.scatterers_per_cell));
  std::vector<double> scatterer_z(static_cast<std::size_t>(L * per_location)), scatterer_a(scatterer_z.size());
  for (std::int64_t l = 0; l < L; ++l) {
    std::seed_seq seq{c.seed, static_cast<std::uint64_t>(l), std::uint64_t{1}};
    Rng rng(seq);
    std::uniform_real_distribution<double> where(z_lo, z_hi);
    std::normal_distribution<double> amplitude(0, 1);
    for (std::int64_t k = 0; k < per_location; ++k) {
      scatterer_z[l * per_location + k] = where(rng);
      scatterer_a[l * per_location + k] = amplitude(rng);
    }
  }

  // One line: RF on the fine grid -> one-sided, band-limited spectrum -> demodulate -> decimate.
  const std::int64_t rf_samples = N * c.rf_oversampling;
  const std::int64_t half_span = static_cast<std::int64_t>(std::ceil(5 * sigma_t * fs_rf));
  // Room before sample 0 and after the line for the pulse tails and the band-limit's impulse
  // response, so nothing wraps around the circular FFT into the imaged samples.
  const std::int64_t offset = 2 * half_span + 64;  // rf sample n sits at buffer index n + offset
  const std::size_t fft_size = next_pow2(static_cast<std::size_t>(rf_samples + 2 * offset));
  std::vector<double> mask(fft_size);  // analytic (x2 for f > 0) times the low-pass about f_dem
  for (std::size_t k = 0; k < fft_size; ++k) {
    const double f = (k <= fft_size / 2 ? double(k) : double(k) - double(fft_size)) * fs_rf / double(fft_size);
    mask[k] = f > 0 ? 2 * lowpass(f - f_dem_mid, fs_iq) : (k == 0 ? lowpass(-f_dem_mid, fs_iq) : 0.0);
  }
  std::vector<Complex> iq(static_cast<std::size_t>(L * ensemble * N));
  const double dt = 1 / fs_rf;
  auto simulate_line = [&](std::int64_t line, std::vector<Complex>& buffer) {
    const std::int64_t l = line / ensemble, e = line % ensemble;
    std::fill(buffer.begin(), buffer.end(), Complex(0, 0));
    const double t_e = out.ensemble_time_s[e];
    const double x = lateral_m(l);
    for (std::int64_t k = 0; k < per_location; ++k) {
      const double z = scatterer_z[l * per_location + k];
      const double shift_um = arfi_tissue_displacement_um(c, z, x, t_e) + drift_um(e);
      const double delay = 2 * (z + shift_um * 1e-6) / sound;  // two-way
      const double a = scatterer_a[l * per_location + k];
      const double centre = (delay - t_first) * fs_rf;  // in rf samples
      const std::int64_t n0 = std::max<std::int64_t>(static_cast<std::int64_t>(std::floor(centre)) - half_span, -offset);
      const std::int64_t n1 = std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(centre)) + half_span,
                                                     static_cast<std::int64_t>(fft_size) - offset - 1);
      if (n1 < n0) continue;
      // env(tau) cos(2 pi f_c tau), tau = t_n - delay, by recurrences (exact start values).
      const double tau0 = (n0 - centre) * dt;
      double g = std::exp(-tau0 * tau0 / (2 * sigma_t * sigma_t));
      double ratio = std::exp(-(2 * tau0 * dt + dt * dt) / (2 * sigma_t * sigma_t));
      const double ratio_step = std::exp(-dt * dt / (sigma_t * sigma_t));
      Complex phase = std::polar(1.0, 2 * kPi * c.center_frequency_hz * tau0);
      const Complex rotate = std::polar(1.0, 2 * kPi * c.center_frequency_hz * dt);
      for (std::int64_t n = n0; n <= n1; ++n) {
        buffer[static_cast<std::size_t>(n + offset)] += a * g * phase.real();
        g *= ratio;
        ratio *= ratio_step;
        phase *= rotate;
      }
    }
    fft(buffer, -1);
    for (std::size_t k = 0; k < fft_size; ++k) buffer[k] *= mask[k] / double(fft_size);
    fft(buffer, +1);
    Complex* dst = iq.data() + line * N;
    for (std::int64_t i = 0; i < N; ++i) {
      const std::int64_t n = i * c.rf_oversampling;
      const double t = t_first + n * dt;
      dst[i] = buffer[static_cast<std::size_t>(n + offset)] * std::polar(1.0, -demod_phase(t));
    }
  };
  const std::size_t lines = static_cast<std::size_t>(L * ensemble);
  auto run_lines = [&](std::size_t begin, std::size_t end) {
    std::vector<Complex> buffer(fft_size);
    for (std::size_t line = begin; line < end; ++line) simulate_line(static_cast<std::int64_t>(line), buffer);
  };
  if (pool) pool->parallel_for(lines, run_lines);
  else run_lines(0, lines);

  // Noise at snr_db below the mean signal power, then int16.
  double power = 0;
  for (const Complex& v : iq) power += std::norm(v);
  power /= static_cast<double>(iq.size());
  const double noise_power = std::isfinite(c.snr_db) ? power / std::pow(10.0, c.snr_db / 10) : 0.0;
  const double noise_sigma = std::sqrt(noise_power / 2);  // per component
  if (noise_sigma > 0) {
    for (std::size_t line = 0; line < lines; ++line) {
      std::seed_seq seq{c.seed, static_cast<std::uint64_t>(line), std::uint64_t{2}};
      Rng rng(seq);
      std::normal_distribution<double> noise(0, noise_sigma);
      for (std::int64_t i = 0; i < N; ++i) {
        Complex& v = iq[line * N + i];
        const double re = noise(rng), im = noise(rng);
        v += Complex(re, im);
      }
    }
  }
  double peak = 0;
  for (const Complex& v : iq) peak = std::max({peak, std::abs(v.real()), std::abs(v.imag())});
  const double scale = peak > 0 ? c.int16_peak_fraction * 32767 / peak : 1.0;
  out.noise_rms_counts = noise_sigma * scale;
  out.payload.resize(iq.size() * 2);
  for (std::size_t i = 0; i < iq.size(); ++i) {
    out.payload[2 * i] = static_cast<std::int16_t>(std::lround(std::clamp(iq[i].real() * scale, -32768.0, 32767.0)));
    out.payload[2 * i + 1] = static_cast<std::int16_t>(std::lround(std::clamp(iq[i].imag() * scale, -32768.0, 32767.0)));
  }

  // f_mean: power-weighted mean of the echo spectrum as it leaves the low-pass.
  {
    double weighted = 0, total = 0;
    const double f_max = fs_rf / 2, df = f_max / 20000;
    for (double f = df / 2; f < f_max; f += df) {
      const double g = std::exp(-(f - c.center_frequency_hz) * (f - c.center_frequency_hz) / (2 * sigma_f * sigma_f)) +
                       std::exp(-(f + c.center_frequency_hz) * (f + c.center_frequency_hz) / (2 * sigma_f * sigma_f));
      const double p = g * g * std::pow(lowpass(f - f_dem_mid, fs_iq), 2);
      weighted += f * p;
      total += p;
    }
    out.mean_frequency_hz = weighted / total;
  }

  // Frame metadata.
  FrameMeta& m = out.meta;
  m.stream_id = c.stream_id;
  m.kind = FrameKind::iq;
  m.payload.dtype = DType::int16;
  m.payload.axes = {
      Axis{.name = arfi::kLocationAxis, .size = L, .spacing = c.location_spacing_m, .unit = "m", .origin = lateral_m(0)},
      Axis{.name = arfi::kEnsembleAxis, .size = ensemble},
      Axis{.name = arfi::kSampleAxis, .size = N, .spacing = 1 / fs_iq, .unit = "s", .origin = t_first},
      Axis{.name = "iq", .size = 2}};
  m.sampling_frequency_hz = fs_iq;
  m.center_frequency_hz = c.center_frequency_hz;
  m.demodulation_frequency_hz = f_dem0;
  m.speed_of_sound_m_per_s = sound;
  m.vectors[arfi::kEnsembleTimeVector] = out.ensemble_time_s;
  if (f_dem1 != f_dem0) {
    std::vector<double> per_sample(N);
    for (std::int64_t i = 0; i < N; ++i) per_sample[i] = f_dem0 + (f_dem1 - f_dem0) * i / double(N - 1);
    m.vectors[arfi::kDemodulationVector] = per_sample;
  }
  m.attributes["simulator"] = "arfi";
  m.attributes["seed"] = std::to_string(c.seed);
  return out;
}

}  // namespace sonopipe::sim
