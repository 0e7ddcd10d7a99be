// Physics of `sonopipe-sim perfusion` (no I/O): the Parker population arterial input, a portal
// input (the arterial input delayed and dispersed), liver tissue curves from known parameters
// (wang2012 eq. (2)) and Gaussian noise at a contrast-to-noise ratio (wang2012 section 2.4.1:
// peak signal / SD at baseline). Times in s, concentrations in mM, rates in ml/100g/min.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "stages/perfusion/perfusion_model.h"
#include "tools/sim/sim_random.h"

namespace sonopipe::sim {

// Parker et al., MRM 56:993 (2006) population AIF (whole blood, mM) at t_min minutes; the
// parameters are the OSIPI reference values (A1 0.809, sigma1 0.0563, T1 0.17046, A2 0.33,
// sigma2 0.132, T2 0.365, alpha 1.05, beta 0.1685, s 38.078, tau 0.483).
double parker_aif_mM(double t_min);

struct PerfusionSimSettings {
  int samples = 128;                  // N_t (wang2012: 32 .. 448)
  double duration_s = 120.0;          // wang2012: 2 min; dt = duration / samples
  double bolus_arrival_s = 10.0;      // the arterial input is Parker(t - arrival), 0 before
  double portal_delay_s = 4.0;        // portal input = arterial delayed by this ...
  double portal_dispersion_s = 8.0;   // ... and convolved with exp(-t / T) / T
  // Truth (edge units): wang2012 section 2.4.1.
  std::array<double, perfusion::kParameterCount> truth = {20.0, 100.0, 400.0, 1.0, 2.0};
  perfusion::Convolution tissue_model = perfusion::Convolution::recursive;  // on the sample grid
  double cnr_arterial = 150.0;        // wang2012; <= 0 or inf: no noise
  double cnr_portal = 100.0;
  double cnr_tissue = 0.0;            // wang2012: 10 .. 100; <= 0 or inf: noise-free
};

struct PerfusionSimulation {
  std::vector<double> time_s;            // [N], t_i = i dt
  std::vector<double> arterial;          // [N] mM (noisy when cnr_arterial is set)
  std::vector<double> portal;            // [N] mM
  std::vector<double> tissue_clean;      // [N] mM, noise-free tissue curve from the truth
  std::vector<double> tissue;            // [voxels, N] mM, tissue_clean + noise per voxel
  double tissue_noise_sd = 0.0;
};

// Noise-free inputs on the grid t_i = i * duration / samples.
void simulate_inputs(const PerfusionSimSettings& s, std::vector<double>& time_s,
                     std::vector<double>& arterial, std::vector<double>& portal);

// `voxels` noisy copies of the tissue curve of the truth; inputs get their own noise.
PerfusionSimulation simulate_perfusion(const PerfusionSimSettings& s, std::size_t voxels, Rng& rng);

// As simulate_perfusion, but each voxel's truth is the settings' truth times a factor drawn
// uniformly from [1 - vary, 1 + vary] per parameter; truths[v * 5 + j] in edge units.
PerfusionSimulation simulate_varied(const PerfusionSimSettings& s, std::size_t voxels, double vary,
                                    Rng& rng, std::vector<double>& truths);

// One noisy tissue curve per voxel from its own truth (truths[v * 5 + j], edge units).
PerfusionSimulation simulate_voxels(const PerfusionSimSettings& s, const std::vector<double>& truths,
                                    Rng& rng);

// A liver slab with perfusion territories (x fastest): normal liver with the settings' truth, a
// round arterial-dominant lesion (k_a 120, k_p 10, k_l 500) and a portal-occluded right quarter
// (k_a 60, k_p 25, k_l 300); delays from the settings.
std::vector<double> territory_truths(const PerfusionSimSettings& s, std::int64_t nx, std::int64_t ny,
                                     std::int64_t nz);

// Adds N(0, (peak / cnr)^2) to every sample, peak = max |curve|; no-op for cnr <= 0 or inf.
// Returns the SD used.
double add_noise_at_cnr(std::vector<double>& curve, double cnr, Rng& rng);

}  // namespace sonopipe::sim
