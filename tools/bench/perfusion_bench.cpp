// sonopipe-bench perfusion: wang2012's Table 2 grid (ms per voxel, GPU and CPU), the whole-liver
// case (626,400 voxels x 48 samples), the GPU layout comparison, and the Table 3 accuracy study,
// each printed beside the paper's figures.
//
// Work and floor: one cost evaluation of the recursive scheme is ~22 double operations per sample
// (two interpolated delayed inputs, the weighted sum, the recursion step, the squared residual),
// and a fit makes `evaluations` of them; the curves are read once (N_t x 8 bytes per voxel), so
// the fit is arithmetic-bound by orders of magnitude. The table prints the achieved rate of those
// counted operations. The kernels are built without FMA (bit-identical to the CPU), so the H100's
// ceiling for them is one FP64 add or multiply per lane per clock: 132 SMs x 64 FP64 lanes x
// 1.98 GHz = 16.7 T op/s (datasheet-derived, not measured).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "sdk/thread_pool.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit_gpu.h"
#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"
#include "tools/bench/commands.h"
#include "tools/sim/perfusion_sim.h"

namespace sonopipe::bench {
namespace {

using namespace sonopipe::perfusion;
using Clock = std::chrono::steady_clock;

constexpr double kOpsPerSample = 22.0;
constexpr double kFp64OpsPerSecondH100 = 16.7e12;

struct Options {
  std::string suites = "table2,liver,layouts,table3";
  std::string convolution = "recursive";
  int cpu_threads = 2;              // the CPU goal is stated for two cores
  std::size_t cpu_sample = 400;     // voxels fitted on the CPU per row (extrapolated)
  std::size_t max_voxels = 100000;  // largest N_v of the Table 2 grid
  int table3_curves = 1000;         // wang2012: 1000 noisy curves per CNR
  std::uint64_t seed = 20120907;
  std::string initialiser = "fixed";
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// wang2012 Table 2 (Tesla C2050, Xeon X5650 2.67 GHz): GPU ms/voxel for N_v = 1, 10, 50, 100,
// 1000, 5000, 10000 and CPU ms/voxel, per N_t.
struct PaperRow {
  int samples;
  double gpu[7];
  double cpu;
};
constexpr PaperRow kPaperTable2[] = {
    {32, {25.49, 2.59, 0.57, 0.39, 0.32, 0.31, 0.30}, 10.36},
    {64, {27.60, 2.84, 1.16, 1.03, 0.65, 0.61, 0.61}, 19.76},
    {128, {32.06, 3.22, 2.17, 1.97, 1.40, 1.32, 1.31}, 39.11},
    {256, {41.85, 4.19, 3.31, 3.30, 2.96, 2.95, 2.94}, 82.48},
    {320, {47.78, 4.82, 3.80, 3.81, 3.41, 3.38, 3.39}, 99.98},
    {448, {60.92, 6.10, 4.84, 4.83, 4.34, 4.31, 4.31}, 136.71},
};
constexpr std::size_t kPaperVoxels[] = {1, 10, 50, 100, 1000, 5000, 10000};

// The paper's Table 2 workload: one noise-free curve (truth 20, 100, 400, 1 s, 2 s) replicated.
struct Workload {
  FitProblem problem;
  std::vector<double> tissue;  // [voxels, N]
};

Workload replicated_workload(int samples, std::size_t voxels, Convolution scheme) {
  sim::PerfusionSimSettings s;
  s.samples = samples;
  s.tissue_model = scheme;
  s.cnr_arterial = s.cnr_portal = s.cnr_tissue = 0;
  sim::Rng rng(1);
  auto sim = sim::simulate_perfusion(s, 1, rng);
  Workload w{FitProblem(sim.time_s, sim.arterial, sim.portal), {}};
  w.tissue.resize(voxels * samples);
  for (std::size_t v = 0; v < voxels; ++v)
    std::copy(sim.tissue.begin(), sim.tissue.end(), w.tissue.begin() + v * samples);
  return w;
}

// A liver-like workload: noisy curves (CNR 20) so that voxels take different simplex paths.
Workload noisy_workload(int samples, double duration_s, std::size_t voxels, Convolution scheme,
                        std::uint64_t seed) {
  sim::PerfusionSimSettings s;
  s.samples = samples;
  s.duration_s = duration_s;
  s.tissue_model = scheme;
  s.cnr_tissue = 20;
  sim::Rng rng(seed);
  auto sim = sim::simulate_perfusion(s, voxels, rng);
  return {FitProblem(sim.time_s, sim.arterial, sim.portal), std::move(sim.tissue)};
}

struct Timing {
  double seconds = 0;
  double mean_iterations = 0;
  double evaluations = 0;  // total
  int converged_percent = 0;
};

Timing summarise(double seconds, const std::vector<VoxelFit>& fits) {
  Timing t;
  t.seconds = seconds;
  double iterations = 0, evaluations = 0, converged = 0;
  for (const auto& f : fits) {
    iterations += f.iterations;
    evaluations += f.evaluations;
    converged += f.stop == 0;
  }
  t.mean_iterations = iterations / std::max<std::size_t>(1, fits.size());
  t.evaluations = evaluations;
  t.converged_percent = static_cast<int>(std::lround(100.0 * converged / std::max<std::size_t>(1, fits.size())));
  return t;
}

Timing time_gpu(const Workload& w, std::size_t voxels, const FitSettings& settings,
                const GpuOptions& options) {
  std::vector<VoxelFit> fits(voxels);
  const auto start = Clock::now();
  fit_voxels_gpu(w.problem, settings, w.tissue.data(), voxels, fits.data(), options);
  return summarise(seconds_since(start), fits);
}

Timing time_cpu(const Workload& w, std::size_t voxels, const FitSettings& settings, ThreadPool& pool) {
  std::vector<VoxelFit> fits(voxels);
  const auto start = Clock::now();
  fit_voxels_cpu(w.problem, settings, w.tissue.data(), voxels, fits.data(), pool);
  return summarise(seconds_since(start), fits);
}

double achieved_ops(const Timing& t, int samples) {
  return t.evaluations * samples * kOpsPerSample / t.seconds;
}

void run_table2(const Options& o, const FitSettings& settings, ThreadPool& pool, bool gpu) {
  std::printf("\n== wang2012 Table 2: ms per voxel (paper: Tesla C2050 GPU / Xeon X5650 1 core; "
              "here: %s, CPU %d threads), %s ==\n",
              gpu ? "all visible GPUs" : "no GPU", o.cpu_threads,
              std::string(convolution_name(settings.convolution)).c_str());
  std::printf("%5s %8s %12s %12s %10s %10s\n", "N_t", "N_v", "GPU ms/vox", "paper GPU", "GPU iters",
              "GPU Gop/s");
  std::vector<std::size_t> grid(std::begin(kPaperVoxels), std::end(kPaperVoxels));
  if (o.max_voxels >= 100000) grid.push_back(100000);
  for (const auto& row : kPaperTable2) {
    const Workload w = replicated_workload(row.samples, grid.back(), settings.convolution);
    if (gpu) {
      time_gpu(w, 1, settings, {});  // warm-up: context, module load
      for (std::size_t k = 0; k < grid.size(); ++k) {
        const Timing t = time_gpu(w, grid[k], settings, {});
        char paper[32] = "-";
        if (k < 7) std::snprintf(paper, sizeof paper, "%.2f", row.gpu[k]);
        std::printf("%5d %8zu %12.5f %12s %10.1f %10.1f\n", row.samples, grid[k],
                    1e3 * t.seconds / grid[k], paper, t.mean_iterations,
                    achieved_ops(t, row.samples) / 1e9);
      }
    }
    const std::size_t sample = std::max<std::size_t>(20, o.cpu_sample * 128 / row.samples);
    const Timing c = time_cpu(w, sample, settings, pool);
    std::printf("%5d %8s CPU %.4f ms/voxel (%d threads, %zu voxels sampled), paper CPU %.2f, "
                "ratio paper/ours %.0fx\n",
                row.samples, "", 1e3 * c.seconds / sample, o.cpu_threads, sample, row.cpu,
                row.cpu / (1e3 * c.seconds / sample));
  }
}

void run_liver(const Options& o, const FitSettings& settings, ThreadPool& pool, bool gpu) {
  const std::size_t voxels = 626400;
  const int samples = 48;
  std::printf("\n== whole liver: %zu voxels x %d samples (dt 2.37 s, CNR 20 noisy curves), %s ==\n",
              voxels, samples, std::string(convolution_name(settings.convolution)).c_str());
  const Workload w = noisy_workload(samples, samples * 2.37, voxels, settings.convolution, o.seed);
  if (gpu) {
    time_gpu(w, 1000, settings, {});  // warm-up
    const int gpus = visible_gpu_count();
    // Register cap and chunk size variants on one GPU; the first row is the default setting.
    struct Variant {
      const char* name;
      int min_blocks_per_sm;
      std::size_t chunk_voxels;
    };
    const Variant variants[] = {{"default regs, chunks of 65536", 0, 0},
                                {"85 regs (6 blocks of 128 per SM)", 6, 0},
                                {"64 regs (8 blocks of 128 per SM)", 8, 0},
                                {"40 regs (12 blocks of 128 per SM)", 12, 0},
                                {"64 regs, chunks of 262144", 8, 262144},
                                {"64 regs, chunks of 16384", 8, 16384}};
    std::printf("%-36s %9s %11s %8s %8s %9s\n", "1 GPU variant (thread per voxel)", "wall s", "kernel ms", "chunks",
                "iters", "T op/s");
    Timing best;
    best.seconds = 1e30;
    for (const auto& v : variants) {
      GpuStats stats;
      GpuOptions one;
      one.devices = {0};
      one.min_blocks_per_sm = v.min_blocks_per_sm;
      one.chunk_voxels = v.chunk_voxels;
      one.stats = &stats;
      const Timing t = time_gpu(w, voxels, settings, one);
      std::printf("%-36s %9.3f %11.1f %8zu %8.1f %9.2f\n", v.name, t.seconds, stats.kernel_ms, stats.chunks,
                  t.mean_iterations, achieved_ops(t, samples) / 1e12);
      if (t.seconds < best.seconds) best = t;
    }
    std::printf("1 GPU best: %.3f s (%.5f ms/voxel, converged %d %%, %.0f %% of the %.0f T op/s FP64 "
                "rate)   paper: 2.31-2.73 min on 1 C2050; goal <= 0.5 s\n",
                best.seconds, 1e3 * best.seconds / voxels, best.converged_percent,
                100 * achieved_ops(best, samples) / kFp64OpsPerSecondH100, kFp64OpsPerSecondH100 / 1e12);
    std::printf("floor (counted ops / FP64 rate): %.3f s; curves in + results out over PCIe: %.0f MB\n",
                best.evaluations * samples * kOpsPerSample / kFp64OpsPerSecondH100,
                voxels * (samples * 8.0 + sizeof(VoxelFit)) / 1e6);
    if (gpus > 1) {
      const Timing ta = time_gpu(w, voxels, settings, {});
      std::printf("%d GPUs:   %.3f s   paper: 0.83-0.98 min on 3 C2050\n", gpus, ta.seconds);
    }
  }
  const std::size_t sample = std::min<std::size_t>(voxels, o.cpu_sample * 5);
  const Timing c = time_cpu(w, sample, settings, pool);
  const double per_voxel_ms = 1e3 * c.seconds / sample;
  std::printf("CPU (%d threads): %.4f ms/voxel over %zu sampled voxels -> whole liver %.1f s "
              "(%.2f min)   paper: 10.74 ms/voxel, 103-117 min; goal <= 0.2 ms/voxel on 2 cores\n",
              o.cpu_threads, per_voxel_ms, sample, per_voxel_ms * voxels / 1e3,
              per_voxel_ms * voxels / 6e4);
}

void run_layouts(const Options& o, bool gpu) {
  if (!gpu) return;
  std::printf("\n== GPU layouts: thread per voxel (recursion or per-thread fft) vs block per voxel "
              "(wang2012, block fft) ==\n");
  std::printf("%5s %8s %-28s %12s %10s\n", "N_t", "N_v", "layout / scheme", "ms/voxel", "iters");
  struct Variant {
    const char* name;
    GpuLayout layout;
    Convolution scheme;
  };
  const Variant variants[] = {{"thread/voxel recursive", GpuLayout::thread_per_voxel, Convolution::recursive},
                              {"thread/voxel fft", GpuLayout::thread_per_voxel, Convolution::fft},
                              {"block/voxel fft (paper)", GpuLayout::block_per_voxel, Convolution::fft}};
  for (int samples : {48, 128}) {
    const std::size_t voxels = samples == 48 ? 100000 : 20000;
    for (const auto& v : variants) {
      const Workload w = noisy_workload(samples, samples == 48 ? samples * 2.37 : 120.0, voxels, v.scheme, o.seed);
      FitSettings settings;
      settings.convolution = v.scheme;
      GpuOptions options;
      options.layout = v.layout;
      options.devices = {0};
      time_gpu(w, 256, settings, options);  // warm-up
      const Timing t = time_gpu(w, voxels, settings, options);
      std::printf("%5d %8zu %-28s %12.6f %10.1f\n", samples, voxels, v.name, 1e3 * t.seconds / voxels,
                  t.mean_iterations);
    }
  }
}

// wang2012 Table 3 (GPU column; C-CPU and Matlab identical): k_l, k_a, k_p mean and SD.
struct PaperAccuracy {
  int cnr;
  double kl, kl_sd, ka, ka_sd, kp, kp_sd;
};
constexpr PaperAccuracy kPaperTable3[] = {
    {100, 400.1, 7.1, 19.6, 1.3, 100.4, 1.6},  {90, 399.7, 13.2, 19.5, 1.8, 99.2, 3.0},
    {80, 398.3, 19.1, 19.5, 2.5, 100.0, 4.6},  {70, 398.2, 25.7, 19.1, 2.9, 100.4, 6.5},
    {60, 399.1, 29.4, 19.4, 3.5, 100.3, 7.5},  {50, 398.9, 32.6, 19.2, 3.9, 99.1, 8.3},
    {40, 398.9, 40.7, 19.3, 4.3, 99.9, 10.6},  {30, 400.0, 49.2, 19.2, 5.0, 101.0, 12.3},
    {20, 401.9, 54.4, 19.3, 5.2, 101.3, 13.7}, {10, 398.4, 59.3, 19.4, 5.5, 99.7, 15.6},
};

void run_table3(const Options& o, const FitSettings& settings, ThreadPool& pool) {
  std::printf("\n== wang2012 Table 3: %d noisy curves per CNR, N_t 128, inputs at CNR 150 / 100, "
              "truth k_a 20, k_p 100, k_l 400 ml/100g/min, tau 1 s / 2 s; %s, %s ==\n",
              o.table3_curves, std::string(convolution_name(settings.convolution)).c_str(),
              settings.linear_start ? "linear least-squares start per voxel" : "start 10/80/200/2/3");
  std::printf("%4s | %-15s %-15s | %-15s %-15s | %-15s %-15s | %7s\n", "CNR", "k_l ours", "k_l paper",
              "k_a ours", "k_a paper", "k_p ours", "k_p paper", "conv %");
  const FitConfig config = make_fit_config(settings);
  for (const auto& paper : kPaperTable3) {
    const int n = o.table3_curves;
    std::vector<VoxelFit> fits(n);
    pool.parallel_for(n, [&](std::size_t begin, std::size_t end) {
      for (std::size_t k = begin; k < end; ++k) {
        sim::PerfusionSimSettings s;
        s.samples = 128;
        s.tissue_model = settings.convolution;
        s.cnr_tissue = paper.cnr;
        sim::Rng rng(o.seed + 7919 * paper.cnr + k);  // independent noise per curve, reproducible
        const auto sim = sim::simulate_perfusion(s, 1, rng);
        FitProblem problem(sim.time_s, sim.arterial, sim.portal);
        std::vector<double> scratch(2 * problem.fft_length());
        fits[k] = fit_voxel(problem.view(), config, sim.tissue.data(), 1, scratch.data());
      }
    });
    auto stats = [&](int j) {
      double mean = 0, sq = 0;
      for (const auto& f : fits) mean += f.parameters[j];
      mean /= n;
      for (const auto& f : fits) sq += (f.parameters[j] - mean) * (f.parameters[j] - mean);
      return std::pair{mean, std::sqrt(sq / (n - 1))};
    };
    auto [kl, kl_sd] = stats(k_l);
    auto [ka, ka_sd] = stats(k_a);
    auto [kp, kp_sd] = stats(k_p);
    int converged = 0;
    for (const auto& f : fits) converged += f.stop == 0;
    std::printf("%4d | %6.1f +- %-5.1f %6.1f +- %-5.1f | %6.1f +- %-5.1f %6.1f +- %-5.1f | %6.1f +- %-5.1f "
                "%6.1f +- %-5.1f | %6.1f\n",
                paper.cnr, kl, kl_sd, paper.kl, paper.kl_sd, ka, ka_sd, paper.ka, paper.ka_sd, kp, kp_sd,
                paper.kp, paper.kp_sd, 100.0 * converged / n);
  }
}

void run(const Options& o) {
  FitSettings settings;
  settings.convolution = parse_convolution(o.convolution);
  settings.linear_start = o.initialiser == "linear";
  ThreadPool pool(o.cpu_threads);
  const bool gpu = visible_gpu_count() > 0;
  if (!gpu) std::printf("(no GPU visible: CPU rows only)\n");
  auto wants = [&](const char* suite) { return o.suites.find(suite) != std::string::npos; };
  if (wants("table2")) run_table2(o, settings, pool, gpu);
  if (wants("liver")) run_liver(o, settings, pool, gpu);
  if (wants("layouts")) run_layouts(o, gpu);
  if (wants("table3")) {
    ThreadPool all(0);
    run_table3(o, settings, all);
  }
}

}  // namespace

void add_perfusion_bench(CLI::App& app) {
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("perfusion", "wang2012 Tables 2 and 3, whole liver, GPU layouts");
  cmd->add_option("--suites", options->suites, "comma list of table2, liver, layouts, table3")
      ->capture_default_str();
  cmd->add_option("--convolution", options->convolution, "recursive or fft")->capture_default_str();
  cmd->add_option("--cpu-threads", options->cpu_threads, "threads of the CPU backend")->capture_default_str();
  cmd->add_option("--cpu-sample", options->cpu_sample, "CPU voxels per row (times are extrapolated)")
      ->capture_default_str();
  cmd->add_option("--max-voxels", options->max_voxels, "largest N_v of the Table 2 grid")->capture_default_str();
  cmd->add_option("--table3-curves", options->table3_curves, "noisy curves per CNR")->capture_default_str();
  cmd->add_option("--seed", options->seed, "noise seed")->capture_default_str();
  cmd->add_option("--initialiser", options->initialiser, "fixed (wang2012) or linear (per-voxel LLS start)")
      ->capture_default_str();
  cmd->callback([options] { run(*options); });
}

}  // namespace sonopipe::bench
