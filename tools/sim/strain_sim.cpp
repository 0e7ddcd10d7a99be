#include "tools/sim/strain_sim.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>

#include "tools/sim/sim_random.h"

namespace sonopipe::sim {
namespace {

// log(cosh(x)) without overflow.
double log_cosh(double x) {
  const double a = std::fabs(x);
  return a + std::log1p(std::exp(-2.0 * a)) - std::numbers::ln2;
}

}  // namespace

double axial_spacing_m(const StrainSimConfig& config) {
  return config.speed_of_sound_m_per_s / (2.0 * config.sampling_frequency_hz);
}

StrainField::StrainField(const StrainSimConfig& config) : config_(config) {
  const double e = config.stiffness_ratio;
  ratio_ = config.dims == 3 ? 5.0 / (3.0 + 2.0 * e) : 2.0 / (1.0 + e);  // Eshelby, incompressible
  centre_z_ = 0.5 * config.axial_samples * axial_spacing_m(config);
  centre_x_ = 0.0;
  centre_y_ = 0.0;
}

double StrainField::half_chord(double x, double y) const {
  const double r = config_.inclusion_radius_m;
  const double off2 = (x - centre_x_) * (x - centre_x_) + (config_.dims == 3 ? (y - centre_y_) * (y - centre_y_) : 0.0);
  return off2 < r * r ? std::sqrt(r * r - off2) : 0.0;
}

bool StrainField::inside_inclusion(double z, double x, double y, double margin_m) const {
  const double dz = z - centre_z_, dx = x - centre_x_, dy = config_.dims == 3 ? y - centre_y_ : 0.0;
  const double r = config_.inclusion_radius_m - margin_m;
  return r > 0 && dz * dz + dx * dx + dy * dy < r * r;
}

double StrainField::axial_strain(int frame, double z, double x, double y) const {
  const double eps = frame * config_.strain_per_frame;
  const double c = half_chord(x, y), w = config_.edge_width_m, t = z - centre_z_;
  const double s = c > 0 ? 0.5 * (std::tanh((t + c) / w) - std::tanh((t - c) / w)) : 0.0;
  return -eps * (1.0 - (1.0 - ratio_) * s);
}

double StrainField::lateral_strain(int frame) const {
  return config_.poisson * frame * config_.strain_per_frame;
}

void StrainField::displacement(int frame, double z, double x, double y, double out[3]) const {
  const double eps = frame * config_.strain_per_frame;
  const double c = half_chord(x, y), w = config_.edge_width_m, t = z - centre_z_;
  // integral_0^t S dt' = (w/2) [log cosh((t + c)/w) - log cosh((t - c)/w)] (zero at t = 0).
  const double smoothed = c > 0 ? 0.5 * w * (log_cosh((t + c) / w) - log_cosh((t - c) / w)) : 0.0;
  out[0] = -eps * (t - (1.0 - ratio_) * smoothed);
  out[1] = config_.poisson * eps * (x - centre_x_);
  out[2] = config_.dims == 3 ? config_.poisson * eps * (y - centre_y_) : 0.0;
  for (int d = 0; d < 3; ++d) out[d] += frame * config_.translation_m[d];
}

StrainSimResult simulate_strain(const StrainSimConfig& config) {
  if (config.dims != 2 && config.dims != 3) throw std::invalid_argument("strain sim: dims must be 2 or 3");
  if (config.frames < 2) throw std::invalid_argument("strain sim: needs at least 2 frames");
  const int na = config.axial_samples, nl = config.lateral_lines;
  const int ne = config.dims == 3 ? config.elevational_planes : 1;
  if (na < 8 || nl < 1 || ne < 1) throw std::invalid_argument("strain sim: frame too small");
  StrainSimResult result;
  result.seed = resolve_seed(config.seed);
  Rng rng(result.seed);
  const StrainField field(config);
  const double dz = axial_spacing_m(config), dx = config.line_pitch_m, dy = config.plane_pitch_m;
  const double x0 = -0.5 * (nl - 1) * dx, y0 = -0.5 * (ne - 1) * dy;

  auto& spec = result.frame_spec;
  spec.dtype = DType::float32;
  spec.unit = "1";
  if (config.dims == 3) spec.axes.push_back({"elevational", ne, dy, "m", y0});
  spec.axes.push_back({"lateral", nl, dx, "m", x0});
  spec.axes.push_back({"axial", na, dz, "m", 0.0});
  const std::size_t elements = static_cast<std::size_t>(na) * nl * ne;

  // PSF: axial Gaussian-windowed cosine, sigma from the -6 dB fractional bandwidth.
  const double sigma_f = config.fractional_bandwidth * config.center_frequency_hz / (2.0 * std::sqrt(2.0 * std::log(2.0)));
  const double sigma_z = config.speed_of_sound_m_per_s / (2.0 * 2.0 * std::numbers::pi * sigma_f);
  const double k_z = 2.0 * std::numbers::pi * config.center_frequency_hz * 2.0 / config.speed_of_sound_m_per_s;
  const double sx = config.beam_sigma_m, sy = config.elevational_beam_sigma_m;
  const int reach_a = static_cast<int>(std::ceil(4.0 * sigma_z / dz));
  const int reach_l = static_cast<int>(std::ceil(3.0 * sx / dx));
  const int reach_e = static_cast<int>(std::ceil(3.0 * sy / dy));

  // Scatterers in the image box grown by the PSF reach and the largest displacement.
  const double max_shift = (config.frames - 1) * (config.strain_per_frame * std::max(na * dz, nl * dx) +
                                                  std::fabs(config.translation_m[0]) + std::fabs(config.translation_m[1]) +
                                                  std::fabs(config.translation_m[2]));
  const double margin_z = 4.0 * sigma_z + max_shift, margin_x = 3.0 * sx + max_shift, margin_y = 3.0 * sy + max_shift;
  const double z_lo = -margin_z, z_hi = na * dz + margin_z;
  const double x_lo = x0 - margin_x, x_hi = x0 + (nl - 1) * dx + margin_x;
  const double y_lo = config.dims == 3 ? y0 - margin_y : 0.0, y_hi = config.dims == 3 ? y0 + (ne - 1) * dy + margin_y : 1e-3;
  const double volume_mm3 = (z_hi - z_lo) * (x_hi - x_lo) * (y_hi - y_lo) * 1e9;
  const std::size_t count = static_cast<std::size_t>(config.scatterers_per_mm3 * volume_mm3);
  std::uniform_real_distribution<double> uz(z_lo, z_hi), ux(x_lo, x_hi), uy(y_lo, y_hi);
  std::normal_distribution<double> normal;
  struct Scatterer { double z, x, y, amplitude; };
  std::vector<Scatterer> scatterers(count);
  for (auto& s : scatterers) s = {uz(rng), ux(rng), config.dims == 3 ? uy(rng) : 0.0, normal(rng)};

  std::vector<double> axial_weights(2 * reach_a + 2), lateral_weights(2 * reach_l + 2), elev_weights(2 * reach_e + 2);
  for (int k = 0; k < config.frames; ++k) {
    std::vector<double> rf(elements, 0.0);
    for (const auto& s : scatterers) {
      double u[3];
      field.displacement(k, s.z, s.x, s.y, u);
      const double z = s.z + u[0], x = s.x + u[1], y = s.y + u[2];
      const int ca = static_cast<int>(std::lround(z / dz)), cl = static_cast<int>(std::lround((x - x0) / dx));
      const int ce = config.dims == 3 ? static_cast<int>(std::lround((y - y0) / dy)) : 0;
      const int a0 = std::max(0, ca - reach_a), a1 = std::min(na - 1, ca + reach_a);
      const int l0 = std::max(0, cl - reach_l), l1 = std::min(nl - 1, cl + reach_l);
      const int e0 = config.dims == 3 ? std::max(0, ce - reach_e) : 0, e1 = config.dims == 3 ? std::min(ne - 1, ce + reach_e) : 0;
      if (a0 > a1 || l0 > l1 || e0 > e1) continue;
      for (int a = a0; a <= a1; ++a) {
        const double t = a * dz - z;
        axial_weights[a - a0] = std::exp(-0.5 * t * t / (sigma_z * sigma_z)) * std::cos(k_z * t);
      }
      for (int l = l0; l <= l1; ++l) {
        const double t = x0 + l * dx - x;
        lateral_weights[l - l0] = std::exp(-0.5 * t * t / (sx * sx));
      }
      for (int e = e0; e <= e1; ++e) {
        const double t = y0 + e * dy - y;
        elev_weights[e - e0] = config.dims == 3 ? std::exp(-0.5 * t * t / (sy * sy)) : 1.0;
      }
      for (int e = e0; e <= e1; ++e)
        for (int l = l0; l <= l1; ++l) {
          const double w = s.amplitude * lateral_weights[l - l0] * elev_weights[e - e0];
          double* row = rf.data() + (static_cast<std::size_t>(e) * nl + l) * na;
          for (int a = a0; a <= a1; ++a) row[a] += w * axial_weights[a - a0];
        }
    }
    double power = 0.0;
    for (double v : rf) power += v * v;
    const double rms = std::sqrt(power / static_cast<double>(elements));
    const double noise = rms * std::pow(10.0, -config.snr_db / 20.0);
    const double scale = rms > 0 ? config.amplitude / (rms * std::sqrt(1.0 + std::pow(10.0, -config.snr_db / 10.0))) : 1.0;
    std::vector<float> frame(elements);
    for (std::size_t i = 0; i < elements; ++i) frame[i] = static_cast<float>((rf[i] + noise * normal(rng)) * scale);
    result.frames.push_back(std::move(frame));

    std::vector<double> uz_truth(elements), ux_truth(elements), ezz(elements);
    for (int e = 0; e < ne; ++e)
      for (int l = 0; l < nl; ++l)
        for (int a = 0; a < na; ++a) {
          const std::size_t i = (static_cast<std::size_t>(e) * nl + l) * na + a;
          double u[3];
          const double z = a * dz, x = x0 + l * dx, y = y0 + e * dy;
          field.displacement(k, z, x, y, u);
          uz_truth[i] = u[0];
          ux_truth[i] = u[1];
          ezz[i] = field.axial_strain(k, z, x, y);
        }
    result.axial_displacement_m.push_back(std::move(uz_truth));
    result.lateral_displacement_m.push_back(std::move(ux_truth));
    result.axial_strain.push_back(std::move(ezz));
  }
  return result;
}

}  // namespace sonopipe::sim
