#include "tools/sim/perfusion_sim.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "stages/perfusion/perfusion_problem.h"

namespace sonopipe::sim {

double parker_aif_mM(double t_min) {
  // Parker 2006 eq. (1): two Gaussians plus an exponential modulated by a sigmoid.
  constexpr double a1 = 0.809, sigma1 = 0.0563, t1 = 0.17046;
  constexpr double a2 = 0.33, sigma2 = 0.132, t2 = 0.365;
  constexpr double alpha = 1.05, beta = 0.1685, s = 38.078, tau = 0.483;
  const double root_2pi = std::sqrt(2.0 * std::numbers::pi);
  const double g1 = a1 / (sigma1 * root_2pi) * std::exp(-(t_min - t1) * (t_min - t1) / (2 * sigma1 * sigma1));
  const double g2 = a2 / (sigma2 * root_2pi) * std::exp(-(t_min - t2) * (t_min - t2) / (2 * sigma2 * sigma2));
  return g1 + g2 + alpha * std::exp(-beta * t_min) / (1.0 + std::exp(-s * (t_min - tau)));
}

void simulate_inputs(const PerfusionSimSettings& s, std::vector<double>& time_s,
                     std::vector<double>& arterial, std::vector<double>& portal) {
  const int n = s.samples;
  const double dt = s.duration_s / n;
  // The portal input is the arterial one through a delayed single compartment (unit gain):
  // computed on a fine grid with the exact recursion, so it is the continuous-time convolution
  // to within the fine grid's interpolation error, then sampled.
  constexpr int kFine = 50;
  const int fine_n = n * kFine;
  const double fine_dt = dt / kFine;
  std::vector<double> fine_arterial(fine_n);
  for (int i = 0; i < fine_n; ++i) {
    const double t = i * fine_dt - s.bolus_arrival_s;
    fine_arterial[i] = t < 0 ? 0.0 : parker_aif_mM(t / 60.0);
  }
  perfusion::FitProblem fine(fine_dt, fine_arterial, std::vector<double>(fine_n, 0.0));
  double p[perfusion::kParameterCount] = {1.0 / s.portal_dispersion_s, 0.0,
                                          1.0 / s.portal_dispersion_s, s.portal_delay_s, 0.0};
  const std::vector<double> fine_portal = perfusion::model_curve(p, fine, perfusion::Convolution::recursive);
  time_s.resize(n);
  arterial.resize(n);
  portal.resize(n);
  for (int i = 0; i < n; ++i) {
    time_s[i] = i * dt;
    arterial[i] = fine_arterial[static_cast<std::size_t>(i) * kFine];
    portal[i] = fine_portal[static_cast<std::size_t>(i) * kFine];
  }
}

double add_noise_at_cnr(std::vector<double>& curve, double cnr, Rng& rng) {
  if (!(cnr > 0) || std::isinf(cnr)) return 0.0;
  double peak = 0.0;
  for (double v : curve) peak = std::max(peak, std::abs(v));
  const double sd = peak / cnr;
  std::normal_distribution<double> noise(0.0, sd);
  for (double& v : curve) v += noise(rng);
  return sd;
}

PerfusionSimulation simulate_perfusion(const PerfusionSimSettings& s, std::size_t voxels, Rng& rng) {
  PerfusionSimulation sim;
  std::vector<double> arterial, portal;
  simulate_inputs(s, sim.time_s, arterial, portal);
  // The truth curve comes from the noise-free inputs; the fit sees noisy ones (wang2012 2.4.1).
  perfusion::FitProblem clean(sim.time_s, arterial, portal);
  double p[perfusion::kParameterCount];
  for (int j = 0; j < perfusion::kParameterCount; ++j) p[j] = s.truth[j];
  perfusion::to_si(p);
  sim.tissue_clean = perfusion::model_curve(p, clean, s.tissue_model);
  sim.arterial = arterial;
  sim.portal = portal;
  add_noise_at_cnr(sim.arterial, s.cnr_arterial, rng);
  add_noise_at_cnr(sim.portal, s.cnr_portal, rng);
  const std::size_t n = sim.tissue_clean.size();
  sim.tissue.resize(voxels * n);
  std::vector<double> curve;
  for (std::size_t v = 0; v < voxels; ++v) {
    curve = sim.tissue_clean;
    sim.tissue_noise_sd = add_noise_at_cnr(curve, s.cnr_tissue, rng);
    std::copy(curve.begin(), curve.end(), sim.tissue.begin() + static_cast<std::ptrdiff_t>(v * n));
  }
  return sim;
}

PerfusionSimulation simulate_voxels(const PerfusionSimSettings& s, const std::vector<double>& truths,
                                    Rng& rng) {
  PerfusionSimulation sim;
  std::vector<double> arterial, portal;
  simulate_inputs(s, sim.time_s, arterial, portal);
  perfusion::FitProblem clean(sim.time_s, arterial, portal);
  const std::size_t n = sim.time_s.size();
  const std::size_t voxels = truths.size() / perfusion::kParameterCount;
  sim.tissue.resize(voxels * n);
  for (std::size_t v = 0; v < voxels; ++v) {
    double p[perfusion::kParameterCount];
    for (int j = 0; j < perfusion::kParameterCount; ++j) p[j] = truths[v * perfusion::kParameterCount + j];
    perfusion::to_si(p);
    std::vector<double> curve = perfusion::model_curve(p, clean, s.tissue_model);
    if (v == 0) sim.tissue_clean = curve;
    sim.tissue_noise_sd = add_noise_at_cnr(curve, s.cnr_tissue, rng);
    std::copy(curve.begin(), curve.end(), sim.tissue.begin() + static_cast<std::ptrdiff_t>(v * n));
  }
  sim.arterial = arterial;
  sim.portal = portal;
  add_noise_at_cnr(sim.arterial, s.cnr_arterial, rng);
  add_noise_at_cnr(sim.portal, s.cnr_portal, rng);
  return sim;
}

PerfusionSimulation simulate_varied(const PerfusionSimSettings& s, std::size_t voxels, double vary,
                                    Rng& rng, std::vector<double>& truths) {
  std::uniform_real_distribution<double> factor(1.0 - vary, 1.0 + vary);
  truths.resize(voxels * perfusion::kParameterCount);
  for (std::size_t v = 0; v < voxels; ++v)
    for (int j = 0; j < perfusion::kParameterCount; ++j)
      truths[v * perfusion::kParameterCount + j] = s.truth[j] * factor(rng);
  return simulate_voxels(s, truths, rng);
}

std::vector<double> territory_truths(const PerfusionSimSettings& s, std::int64_t nx, std::int64_t ny,
                                     std::int64_t nz) {
  // Normal liver takes the settings' truth (portal-dominated, wang2012). A round arterial-dominant
  // lesion (hypervascular tumour) sits left of centre; the right quarter is a segment whose portal
  // supply is occluded and partly compensated by the hepatic artery.
  const std::array<double, perfusion::kParameterCount> lesion = {120.0, 10.0, 500.0, s.truth[3], s.truth[4]};
  const std::array<double, perfusion::kParameterCount> occluded = {60.0, 25.0, 300.0, s.truth[3], s.truth[4]};
  std::vector<double> truths(static_cast<std::size_t>(nx * ny * nz) * perfusion::kParameterCount);
  const double cx = 0.38 * nx, cy = 0.5 * ny, radius = 0.18 * std::min(nx, ny);
  for (std::int64_t z = 0; z < nz; ++z)
    for (std::int64_t y = 0; y < ny; ++y)
      for (std::int64_t x = 0; x < nx; ++x) {
        const std::size_t v = static_cast<std::size_t>((z * ny + y) * nx + x);  // NIfTI order, x fastest
        const double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
        const auto* truth = s.truth.data();
        if (dx * dx + dy * dy <= radius * radius) truth = lesion.data();
        else if (x >= nx - nx / 4) truth = occluded.data();
        std::copy(truth, truth + perfusion::kParameterCount, truths.begin() + v * perfusion::kParameterCount);
      }
  return truths;
}

}  // namespace sonopipe::sim
