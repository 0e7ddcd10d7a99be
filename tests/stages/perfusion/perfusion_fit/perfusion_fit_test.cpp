// The voxelwise fit (stages/perfusion/perfusion_fit/perfusion_fitter.h, stages/perfusion/perfusion_fit/perfusion_fit_gpu.h): recovery of known
// parameters, the madym DISCM calibration fit, threading and NaN handling, and [cuda] GPU == CPU.
#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"

#include <cmath>
#include <random>

#include "sdk/thread_pool.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit_gpu.h"
#include "tests/stages/perfusion/perfusion_test_data.h"
#include "tools/sim/perfusion_sim.h"

using namespace sonopipe;
using namespace sonopipe::perfusion;

namespace {

sim::PerfusionSimulation noise_free(int samples, Convolution model, std::size_t voxels) {
  sim::PerfusionSimSettings s;
  s.samples = samples;
  s.tissue_model = model;
  s.cnr_arterial = s.cnr_portal = s.cnr_tissue = 0;  // no noise anywhere
  sim::Rng rng(1);
  return sim::simulate_perfusion(s, voxels, rng);
}

// Curves of random truths (edge units) on the simulator's inputs, with noise of SD `noise_mM`.
std::vector<double> random_curves(const FitProblem& problem, std::size_t voxels, double noise_mM,
                                  std::uint64_t seed, Convolution model) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, noise_mM);
  std::vector<double> tissue;
  for (std::size_t v = 0; v < voxels; ++v) {
    double p[5] = {5 + 40 * u(rng), 30 + 150 * u(rng), 100 + 600 * u(rng), 0.5 + 4 * u(rng),
                   0.5 + 5 * u(rng)};
    to_si(p);
    for (double c : model_curve(p, problem, model)) tissue.push_back(c + noise(rng));
  }
  return tissue;
}

}  // namespace

TEST_CASE("perfusion fit recovers the paper's parameters from noise-free curves", "[perfusion_fit]") {
  ThreadPool pool(2);
  for (Convolution scheme : {Convolution::recursive, Convolution::fft}) {
    for (int samples : {32, 128}) {
      // fft at N_t 32 (dt 3.75 s, delays of 1-2 s inside one step) stalls: the simplex collapses
      // at cost 1.2e-5 with tau_a 0.16 s (a Nelder-Mead property, fminsearch does the same).
      if (scheme == Convolution::fft && samples == 32) continue;
      const auto sim = noise_free(samples, scheme, 1);
      FitProblem problem(sim.time_s, sim.arterial, sim.portal);
      FitSettings settings;
      settings.convolution = scheme;
      VoxelFit fit;
      fit_voxels_cpu(problem, settings, sim.tissue.data(), 1, &fit, pool);
      INFO(convolution_name(scheme) << " N_t " << samples << ": k_a " << fit.parameters[0] << " k_p "
           << fit.parameters[1] << " k_l " << fit.parameters[2] << " tau_a " << fit.parameters[3]
           << " tau_p " << fit.parameters[4] << " iterations " << fit.iterations << " cost " << fit.cost);
      CHECK(fit.skipped == 0);
      CHECK(fit.stop == 0);
      // wang2012 Table 3, CNR infinity: 20.0, 100.0, 400.0. The simplex stops once the costs agree
      // to 1e-8, which leaves the rates within ~1 % of the truth and the delays within ~0.1 s.
      CHECK(fit.parameters[k_a] == Approx(20.0).epsilon(0.02));
      CHECK(fit.parameters[k_p] == Approx(100.0).epsilon(0.01));
      CHECK(fit.parameters[k_l] == Approx(400.0).epsilon(0.01));
      CHECK(fit.parameters[tau_a] == Approx(1.0).margin(0.15));
      CHECK(fit.parameters[tau_p] == Approx(2.0).margin(0.15));
    }
  }
}

TEST_CASE("perfusion fit of madym's noisy DISCM curve meets madym's own acceptance test",
          "[perfusion_fit]") {
  const auto m = test::read_madym_series();
  FitProblem problem(m.time_s, m.aif, m.pif);
  FitSettings settings;
  settings.start = {12, 48, 100, 6, 6};  // madym's truth as start, as its test_DCE_fit does
  ThreadPool pool(1);
  VoxelFit fit;
  fit_voxels_cpu(problem, settings, m.discm_noise.data(), 1, &fit, pool);
  INFO("k_a " << fit.parameters[0] << " k_p " << fit.parameters[1] << " k_l " << fit.parameters[2]
       << " tau_a " << fit.parameters[3] << " tau_p " << fit.parameters[4] << " SSE " << fit.cost);
  // madym test_DCE_fit.cxx: every DISCM parameter within relative 0.5, SSE < 5e-4.
  const double truth[5] = {12, 48, 100, 6, 6};
  for (int j = 0; j < 5; ++j) CHECK(std::abs(fit.parameters[j] - truth[j]) < 0.5 * truth[j]);
  CHECK(fit.cost < 5e-4);
  // scipy's fit of the same curve with the trapezoid model (discm_scipy_nm_reference.csv) ended at
  // k_a 12.7, k_p 47.3, k_l 99.9: ours must land close, the models differ only in discretisation.
  CHECK(fit.parameters[k_a] == Approx(12.66).epsilon(0.05));
  CHECK(fit.parameters[k_p] == Approx(47.28).epsilon(0.05));
  CHECK(fit.parameters[k_l] == Approx(99.95).epsilon(0.05));
}

TEST_CASE("perfusion fit on many threads equals the single-threaded fit bit for bit",
          "[perfusion_fit]") {
  const auto sim = noise_free(48, Convolution::recursive, 1);
  FitProblem problem(sim.time_s, sim.arterial, sim.portal);
  const std::uint64_t seed = test::fresh_seed();
  const std::size_t voxels = 600;
  const auto tissue = random_curves(problem, voxels, 0.01, seed, Convolution::recursive);
  FitSettings settings;
  std::vector<VoxelFit> one(voxels), many(voxels);
  ThreadPool serial(1), parallel(4);
  std::size_t last_progress = 0;
  fit_voxels_cpu(problem, settings, tissue.data(), voxels, one.data(), serial);
  fit_voxels_cpu(problem, settings, tissue.data(), voxels, many.data(), parallel,
                 [&](std::size_t done, std::size_t total) {
                   CHECK(total == voxels);
                   last_progress = std::max(last_progress, done);
                 });
  CHECK(last_progress == voxels);
  for (std::size_t v = 0; v < voxels; ++v) {
    REQUIRE(one[v].iterations == many[v].iterations);
    for (int j = 0; j < 5; ++j) REQUIRE(one[v].parameters[j] == many[v].parameters[j]);
  }
}

TEST_CASE("perfusion fit skips curves with NaN samples and marks them", "[perfusion_fit]") {
  const auto sim = noise_free(32, Convolution::recursive, 3);
  FitProblem problem(sim.time_s, sim.arterial, sim.portal);
  auto tissue = sim.tissue;
  tissue[32 + 5] = std::nan("");
  std::vector<VoxelFit> fits(3);
  ThreadPool pool(2);
  fit_voxels_cpu(problem, FitSettings{}, tissue.data(), 3, fits.data(), pool);
  CHECK(fits[0].skipped == 0);
  CHECK(fits[1].skipped == 1);
  CHECK(std::isnan(fits[1].parameters[0]));
  CHECK(fits[2].skipped == 0);
  CHECK(fits[2].parameters[k_l] == fits[0].parameters[k_l]);
}

TEST_CASE("perfusion problem rejects bad time axes and inputs with clear messages", "[perfusion_fit]") {
  const std::vector<double> a = {0, 1, 2, 3}, p = {0, 1, 1, 1};
  CHECK_THROWS_WITH(FitProblem(std::vector<double>{0, 1, 2.5, 3}, a, p),
                    Catch::Contains("uniform"));
  CHECK_THROWS_WITH(FitProblem(std::vector<double>{3, 2, 1, 0}, a, p), Catch::Contains("increase"));
  CHECK_THROWS_WITH(FitProblem(std::vector<double>{0, 1, 2}, a, p), Catch::Contains("samples"));
  CHECK_THROWS_WITH(FitProblem(std::vector<double>{0, 1, 2, 3}, a, std::vector<double>{0, NAN, 1, 1}),
                    Catch::Contains("portal input sample 1 is not finite"));
  FitSettings zero_delays;
  zero_delays.start[tau_a] = 0;
  CHECK(start_warnings(zero_delays).size() == 1);
  CHECK(start_warnings(FitSettings{}).empty());
}

TEST_CASE("the linear least-squares start lands near the truth and the fit from it reaches the bottom",
          "[perfusion_fit]") {
  sim::PerfusionSimSettings s;
  s.samples = 128;
  s.cnr_arterial = s.cnr_portal = s.cnr_tissue = 0;
  sim::Rng rng(test::fresh_seed());
  std::vector<double> truths;
  const std::size_t voxels = 200;
  const auto sim = sim::simulate_varied(s, voxels, 0.3, rng, truths);
  FitProblem problem(sim.time_s, sim.arterial, sim.portal);
  // The start alone: rates within 30 % of the truth on noise-free data for most voxels (trapezoid
  // integrals and a 1 s delay grid limit it; measured: ~77 % within 15 %).
  const ModelInputs in = problem.view();
  std::size_t near = 0;
  for (std::size_t v = 0; v < voxels; ++v) {
    double start[5] = {0, 0, 0, 0, 0};
    REQUIRE(linear_start(in, sim.tissue.data() + v * 128, 1, LinearStartGrid{}, start));
    to_edge_units(start);
    bool ok = true;
    for (int j = 0; j < 3; ++j) ok &= std::abs(start[j] - truths[v * 5 + j]) <= 0.3 * truths[v * 5 + j];
    near += ok;
  }
  INFO(near << " of " << voxels << " starts within 30 %");
  CHECK(near >= voxels * 8 / 10);
  // The full fit: from the fixed wang2012 start 15-33 % of such voxels stall (perfusion_tool_test);
  // from the linear start at most 5 % may.
  ThreadPool pool(2);
  FitSettings settings;
  settings.linear_start = true;
  std::vector<VoxelFit> fits(voxels);
  fit_voxels_cpu(problem, settings, sim.tissue.data(), voxels, fits.data(), pool);
  std::size_t bottom = 0;
  for (const auto& f : fits) bottom += f.cost < 1e-7;
  INFO(bottom << " of " << voxels << " reached cost < 1e-7");
  CHECK(bottom >= voxels * 95 / 100);
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("perfusion fit on CUDA equals the CPU reference (parameters and iteration counts)",
          "[perfusion_fit][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  const std::uint64_t seed = test::fresh_seed();
  ThreadPool pool(0);
  for (Convolution scheme : {Convolution::recursive, Convolution::fft}) {
    for (auto [samples, linear_start] : {std::pair{48, false}, std::pair{128, false}, std::pair{128, true}}) {
      const auto sim = noise_free(samples, scheme, 1);
      FitProblem problem(sim.time_s, sim.arterial, sim.portal);
      const std::size_t voxels = scheme == Convolution::fft ? 700 : 3000;
      const auto tissue = random_curves(problem, voxels, 0.02, seed + samples, scheme);
      FitSettings settings;
      settings.convolution = scheme;
      settings.linear_start = linear_start;  // `initialiser: linear`: the start is found on the GPU too
      std::vector<VoxelFit> cpu(voxels);
      fit_voxels_cpu(problem, settings, tissue.data(), voxels, cpu.data(), pool);
      // (layout, register cap): the default kernel and a register-capped (spilling) build.
      std::vector<std::pair<GpuLayout, int>> layouts = {{GpuLayout::thread_per_voxel, 0},
                                                        {GpuLayout::thread_per_voxel, 12}};
      if (scheme == Convolution::fft) layouts.push_back({GpuLayout::block_per_voxel, 0});
      for (auto [layout, min_blocks] : layouts) {
        std::vector<VoxelFit> gpu(voxels);
        GpuOptions options;
        options.layout = layout;
        options.min_blocks_per_sm = min_blocks;
        options.chunk_voxels = 1000;  // several chunks: exercises the two-stream pipeline
        fit_voxels_gpu(problem, settings, tissue.data(), voxels, gpu.data(), options);
        double worst = 0;
        int count_mismatches = 0;
        for (std::size_t v = 0; v < voxels; ++v) {
          if (gpu[v].iterations != cpu[v].iterations || gpu[v].evaluations != cpu[v].evaluations)
            ++count_mismatches;
          for (int j = 0; j < 5; ++j)
            worst = std::max(worst, std::abs(gpu[v].parameters[j] - cpu[v].parameters[j]) /
                                        std::max(1.0, std::abs(cpu[v].parameters[j])));
        }
        INFO(convolution_name(scheme) << " N_t " << samples << " linear start " << linear_start
             << " layout " << static_cast<int>(layout)
             << " min blocks " << min_blocks
             << ": worst relative parameter difference " << worst << ", count mismatches "
             << count_mismatches);
        // Same code, no FMA, portable exp: bit-identical is expected; 1e-6 is the brief's bound
        // (wang2012 Table 4 reports 1e-7 .. 1e-5 between its GPU and CPU codes).
        CHECK(worst <= 1e-6);
        CHECK(count_mismatches == 0);
      }
    }
  }
}
#endif
