#include "tools/sim/flow_sim.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>

#include "sdk/thread_pool.h"
#include "stages/doppler/doppler_conventions.h"
#include "tools/sim/sim_random.h"
#include "tools/sim/speckle_sim.h"
#include "tools/sim/sim_constants.h"

namespace sonopipe::sim {

namespace {

constexpr double kSpeckleMargin_m = 1e-3;  // speckle beyond the image edges (PSF tails reach in)
constexpr double kPsfSpan = 4.0;           // the Gaussian PSF is cut at 4 sigma (3e-4 of its peak)
constexpr double kCellLateral_m = 0.3e-3;  // resolution cell: lambda / 2 axially x 0.3 mm laterally

void require_flow(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("flow sim: " + message);
}

void validate(const FlowSimConfig& c) {
  require_flow(c.center_frequency_hz > 0 && c.speed_of_sound_m_per_s > 0 && c.prf_hz > 0, "f_c, c and PRF must be > 0");
  require_flow(c.frames >= 2, "an ensemble needs at least 2 frames");
  require_flow(c.x_max_m > c.x_min_m && c.z_max_m > c.z_min_m && c.z_min_m > 0, "the image must lie in front of the probe");
  require_flow(c.lateral_pixels >= 2 && c.axial_pixels >= 2, "at least 2 x 2 pixels");
  require_flow(c.tube_radius_m > 0 && c.psf_lateral_m > 0, "tube radius and PSF width must be > 0");
  require_flow(c.tissue_per_cell >= 0 && c.blood_per_cell > 0, "scatterer densities must be >= 0 (blood > 0)");
}

struct Frame2 {
  double dx, dz, nx, nz;  // tube direction d and normal n
};
Frame2 tube_frame(const FlowSimConfig& c) {
  const double dx = std::cos(c.tube_angle_rad), dz = std::sin(c.tube_angle_rad);
  return {dx, dz, -dz, dx};
}

double tube_length(const FlowSimConfig& c) {
  return c.tube_length_m > 0 ? c.tube_length_m : 4 * std::hypot(c.x_max_m - c.x_min_m, c.z_max_m - c.z_min_m);
}

double parabolic(const FlowSimConfig& c, double across_m) {
  const double u = across_m / c.tube_radius_m;
  return std::abs(u) < 1 ? c.peak_velocity_m_per_s * (1 - u * u) : 0.0;
}

double axial_sigma_m(const FlowSimConfig& c) {
  return c.speed_of_sound_m_per_s * SpeckleGenerator::envelope_sigma_s(c.center_frequency_hz, c.fractional_bandwidth) / 2;
}

bool in_region(const FlowSimConfig& c, double x, double z, double margin) {
  return x >= c.x_min_m - margin && x <= c.x_max_m + margin && z >= c.z_min_m - margin && z <= c.z_max_m + margin;
}

}  // namespace

double distance_from_axis_m(const FlowSimConfig& c, double x_m, double z_m) {
  const Frame2 f = tube_frame(c);
  return std::abs((x_m - c.tube_x_m) * f.nx + (z_m - c.tube_z_m) * f.nz);
}

double flow_speed_m_per_s(const FlowSimConfig& c, double x_m, double z_m) {
  return parabolic(c, distance_from_axis_m(c, x_m, z_m));
}

FlowPhantom flow_phantom(const FlowSimConfig& c) {
  validate(c);
  FlowPhantom phantom;
  phantom.tube_length_m = tube_length(c);
  const Frame2 f = tube_frame(c);
  const double wavelength = c.speed_of_sound_m_per_s / c.center_frequency_hz;
  const double cell = wavelength / 2 * kCellLateral_m;
  Rng rng(c.seed);
  std::normal_distribution<double> amplitude(0.0, 1.0);
  // Tissue: uniform over the widened image, none inside the lumen.
  const double x0 = c.x_min_m - kSpeckleMargin_m, x1 = c.x_max_m + kSpeckleMargin_m;
  const double z0 = c.z_min_m - kSpeckleMargin_m, z1 = c.z_max_m + kSpeckleMargin_m;
  std::uniform_real_distribution<double> x(x0, x1), z(z0, z1);
  const auto tissue = static_cast<std::size_t>(std::ceil((x1 - x0) * (z1 - z0) / cell * c.tissue_per_cell));
  for (std::size_t i = 0; i < tissue; ++i) {
    const double sx = x(rng), sz = z(rng), a = amplitude(rng);
    if (distance_from_axis_m(c, sx, sz) < c.tube_radius_m) continue;
    phantom.scatterers.push_back({sx, sz, a, false, 0, 0});
  }
  // Blood: uniform over the tube segment, 10^(dB/20) weaker.
  const double length = phantom.tube_length_m, gain = std::pow(10.0, c.blood_to_tissue_db / 20);
  std::uniform_real_distribution<double> along(-length / 2, length / 2), across(-c.tube_radius_m, c.tube_radius_m);
  const auto blood = static_cast<std::size_t>(std::ceil(length * 2 * c.tube_radius_m / cell * c.blood_per_cell));
  for (std::size_t i = 0; i < blood; ++i) {
    const double s = along(rng), r = across(rng), a = gain * amplitude(rng);
    phantom.scatterers.push_back({c.tube_x_m + s * f.dx + r * f.nx, c.tube_z_m + s * f.dz + r * f.nz, a, true, s, r});
  }
  return phantom;
}

std::vector<Scatterer> FlowPhantom::at(const FlowSimConfig& c, double t_s) const {
  const Frame2 f = tube_frame(c);
  std::vector<Scatterer> out;
  out.reserve(scatterers.size());
  for (const FlowScatterer& s : scatterers) {
    if (!s.blood) {
      out.push_back({s.x_m + c.tissue_velocity_x_m_per_s * t_s, s.z_m + c.tissue_velocity_z_m_per_s * t_s, s.amplitude});
      continue;
    }
    // Along the tube, wrapped into [-L/2, L/2).
    double along = s.along_m + parabolic(c, s.across_m) * t_s + tube_length_m / 2;
    along = along - tube_length_m * std::floor(along / tube_length_m) - tube_length_m / 2;
    out.push_back({c.tube_x_m + along * f.dx + s.across_m * f.nx, c.tube_z_m + along * f.dz + s.across_m * f.nz,
                   s.amplitude});
  }
  return out;
}

FlowTruth flow_truth(const FlowSimConfig& c, double x_min_m, double x_step_m, std::int64_t lateral, double z_min_m,
                     double z_step_m, std::int64_t axial, double wall_margin_m) {
  FlowTruth t;
  const std::size_t pixels = static_cast<std::size_t>(lateral * axial);
  t.axial_velocity_m_per_s.resize(pixels);
  t.lumen.resize(pixels);
  t.tissue.resize(pixels);
  const double sin_a = std::sin(c.tube_angle_rad);
  for (std::int64_t i = 0; i < lateral; ++i)
    for (std::int64_t j = 0; j < axial; ++j) {
      const double x = x_min_m + static_cast<double>(i) * x_step_m, z = z_min_m + static_cast<double>(j) * z_step_m;
      const double r = distance_from_axis_m(c, x, z);
      const std::size_t p = static_cast<std::size_t>(i * axial + j);
      t.lumen[p] = r < c.tube_radius_m;
      t.tissue[p] = r > c.tube_radius_m + wall_margin_m;
      t.axial_velocity_m_per_s[p] = t.lumen[p] ? parabolic(c, r) * sin_a : c.tissue_velocity_z_m_per_s;
    }
  t.peak_axial_velocity_m_per_s = std::abs(c.peak_velocity_m_per_s * sin_a);
  t.nyquist_velocity_m_per_s = doppler::nyquist_velocity_m_per_s(c.speed_of_sound_m_per_s, c.prf_hz, c.center_frequency_hz);
  return t;
}

FlowIqResult simulate_flow_iq(const FlowSimConfig& c, ThreadPool* pool) {
  const FlowPhantom phantom = flow_phantom(c);
  FlowIqResult result;
  const std::int64_t lateral = c.lateral_pixels, axial = c.axial_pixels, frames = c.frames;
  const std::int64_t pixels = lateral * axial;
  result.x_step_m = (c.x_max_m - c.x_min_m) / static_cast<double>(lateral - 1);
  result.z_step_m = (c.z_max_m - c.z_min_m) / static_cast<double>(axial - 1);
  const double dx = result.x_step_m, dz = result.z_step_m;
  const double sigma_x = c.psf_lateral_m, sigma_z = axial_sigma_m(c);
  const double two_k = 2 * 2 * kPi * c.center_frequency_hz / c.speed_of_sound_m_per_s;
  result.tissue.assign(static_cast<std::size_t>(frames * pixels), {});
  result.blood.assign(result.tissue.size(), {});

  auto render = [&](std::size_t begin, std::size_t end) {
    std::vector<double> lateral_weight;
    std::vector<std::complex<double>> axial_weight;
    for (std::size_t n = begin; n < end; ++n) {
      const std::vector<Scatterer> positions = phantom.at(c, static_cast<double>(n) / c.prf_hz);
      for (std::size_t s = 0; s < positions.size(); ++s) {
        const Scatterer& sc = positions[s];
        if (!in_region(c, sc.x_m, sc.z_m, kSpeckleMargin_m)) continue;
        const auto i0 = std::max<std::int64_t>(0, std::int64_t(std::ceil((sc.x_m - kPsfSpan * sigma_x - c.x_min_m) / dx)));
        const auto i1 = std::min<std::int64_t>(lateral - 1, std::int64_t(std::floor((sc.x_m + kPsfSpan * sigma_x - c.x_min_m) / dx)));
        const auto j0 = std::max<std::int64_t>(0, std::int64_t(std::ceil((sc.z_m - kPsfSpan * sigma_z - c.z_min_m) / dz)));
        const auto j1 = std::min<std::int64_t>(axial - 1, std::int64_t(std::floor((sc.z_m + kPsfSpan * sigma_z - c.z_min_m) / dz)));
        if (i0 > i1 || j0 > j1) continue;
        lateral_weight.resize(static_cast<std::size_t>(i1 - i0 + 1));
        axial_weight.resize(static_cast<std::size_t>(j1 - j0 + 1));
        for (std::int64_t i = i0; i <= i1; ++i) {
          const double u = (c.x_min_m + static_cast<double>(i) * dx - sc.x_m) / sigma_x;
          lateral_weight[i - i0] = sc.amplitude * std::exp(-u * u / 2);
        }
        for (std::int64_t j = j0; j <= j1; ++j) {
          const double offset = c.z_min_m + static_cast<double>(j) * dz - sc.z_m;  // z - z_s
          const double u = offset / sigma_z;
          axial_weight[j - j0] = std::polar(std::exp(-u * u / 2), two_k * offset);
        }
        const bool blood = phantom.scatterers[s].blood;
        std::complex<float>* out = (blood ? result.blood : result.tissue).data() + n * pixels;
        for (std::int64_t i = i0; i <= i1; ++i)
          for (std::int64_t j = j0; j <= j1; ++j)
            out[i * axial + j] += std::complex<float>(lateral_weight[i - i0] * axial_weight[j - j0]);
      }
    }
  };
  if (pool) pool->parallel_for(static_cast<std::size_t>(frames), render);
  else render(0, static_cast<std::size_t>(frames));

  result.truth = flow_truth(c, c.x_min_m, dx, lateral, c.z_min_m, dz, axial, 2 * sigma_x);
  double blood_power = 0;
  std::size_t lumen_samples = 0;
  for (std::int64_t n = 0; n < frames; ++n)
    for (std::int64_t p = 0; p < pixels; ++p)
      if (result.truth.lumen[p]) {
        blood_power += std::norm(std::complex<double>(result.blood[n * pixels + p]));
        ++lumen_samples;
      }
  result.blood_power = lumen_samples ? blood_power / static_cast<double>(lumen_samples) : 0.0;
  result.noise.assign(result.tissue.size(), {});
  if (std::isfinite(c.snr_db)) {
    const double sd = std::sqrt(result.blood_power / std::pow(10.0, c.snr_db / 10) / 2);
    Rng rng(c.seed ^ 0x9e3779b97f4a7c15ull);
    std::normal_distribution<double> normal(0.0, sd);
    for (auto& v : result.noise) v = std::complex<float>(float(normal(rng)), float(normal(rng)));
  }
  result.iq.resize(result.tissue.size());
  for (std::size_t i = 0; i < result.iq.size(); ++i) result.iq[i] = result.tissue[i] + result.blood[i] + result.noise[i];

  FrameMeta& m = result.meta;
  m.stream_id = c.stream_id;
  m.kind = FrameKind::iq;
  m.center_frequency_hz = c.center_frequency_hz;
  m.demodulation_frequency_hz = c.center_frequency_hz;
  m.sampling_frequency_hz = c.speed_of_sound_m_per_s / (2 * dz);
  m.speed_of_sound_m_per_s = c.speed_of_sound_m_per_s;
  m.attributes["simulator"] = "flow";
  m.payload.dtype = DType::complex64;
  m.payload.axes = {{doppler::kFrameAxis, frames, 1 / c.prf_hz, "s", 0.0},
                    {"lateral", lateral, dx, "m", c.x_min_m},
                    {"axial", axial, dz, "m", c.z_min_m}};
  std::vector<double> times(static_cast<std::size_t>(frames));
  for (std::int64_t n = 0; n < frames; ++n) times[n] = static_cast<double>(n) / c.prf_hz;
  m.vectors[doppler::kEnsembleTimeVector] = times;
  return result;
}

FlowChannelResult simulate_flow_channel(const FlowSimConfig& c, ChannelSimConfig channel, ThreadPool* pool) {
  const FlowPhantom phantom = flow_phantom(c);
  channel.center_frequency_hz = c.center_frequency_hz;
  channel.fractional_bandwidth = c.fractional_bandwidth;
  channel.speed_of_sound_m_per_s = c.speed_of_sound_m_per_s;
  channel.stream_id = c.stream_id;
  // The length from the speckle region, not from where this phantom's deepest scatterer happens to
  // be: every ensemble of a recording (each its own phantom) has the same shape.
  if (channel.samples == 0)
    channel.samples = samples_covering(channel, c.x_min_m - kSpeckleMargin_m, c.x_max_m + kSpeckleMargin_m,
                                       c.z_max_m + kSpeckleMargin_m);
  FlowChannelResult result;
  for (std::int64_t n = 0; n < c.frames; ++n) {
    channel.scatterers.clear();
    for (const Scatterer& s : phantom.at(c, static_cast<double>(n) / c.prf_hz))
      if (in_region(c, s.x_m, s.z_m, kSpeckleMargin_m)) channel.scatterers.push_back(s);
    channel.seed += 1;  // fresh noise per frame
    ChannelSimResult frame = simulate_channel(channel, pool);
    result.rf.insert(result.rf.end(), frame.rf.begin(), frame.rf.end());
    result.iq.insert(result.iq.end(), frame.iq.begin(), frame.iq.end());
    if (n == 0) result.meta = frame.meta;
  }
  FrameMeta& m = result.meta;
  m.attributes["simulator"] = "flow";
  m.payload.axes.insert(m.payload.axes.begin(), Axis{doppler::kFrameAxis, c.frames, 1 / c.prf_hz, "s", 0.0});
  std::vector<double> times(static_cast<std::size_t>(c.frames));
  for (std::int64_t n = 0; n < c.frames; ++n) times[n] = static_cast<double>(n) / c.prf_hz;
  m.vectors[doppler::kEnsembleTimeVector] = times;
  return result;
}

}  // namespace sonopipe::sim
