// `sonopipe-bench strain`: the ncc_track methods (standard, Lewis, Luo-Konofagou) on CPU and GPU
// for (a) the 3-D paper's Table 1 configuration, (b) the 2-D paper's configurations and (c) the
// 3-D search-range sweep (Figure 7 / Table A3), next to the papers' figures, with the operation
// and byte counts of each method and the gap to that floor. Times are per frame pair (2-D) or per
// slice of 100 x 100 points (3-D); GPU: median of CUDA-event times around correlate + peaks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sdk/thread_pool.h"
#include "stages/strain/ncc_track/ncc_reference.h"
#include "stages/strain/ncc_track/ncc_track_params.h"
#include "tools/bench/commands.h"
#include "tools/bench/device_ceilings.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include "stages/common/cuda_check.h"
#include "stages/strain/ncc_track/ncc_track.cuh"
#endif

namespace sonopipe::bench {
namespace {

using ncc::Geometry;
using ncc::Method;

struct StrainBenchOptions {
  int repeats = 20;
  bool cpu = true;
  std::string cpu_tables = "abc";  // which tables get CPU columns
  bool cpu_standard_3d = true;  // the slowest CPU runs (seconds each)
  int threads = 0;
  double peak_tflops = 0.0;     // 0: measure an FP32 FMA ceiling on the device
  double peak_gb_per_s = 0.0;   // 0: measure a device-to-device copy
  std::string only;             // "a", "b" or "c" to run one table
};

struct Config {
  std::string label;
  int frame[3];      // axial, lateral, elevational
  int kernel[3];
  int shifts[3];     // counts per axis, centred: [-(n/2), n - 1 - n/2]
  int points[3];
  int step[3];
  double paper_gpu_ms[3];  // standard, luo, lewis (-1: not given)
  double paper_cpu_ms[3];
};

Geometry geometry_of(const Config& c) {
  Geometry g{};
  for (int d = 0; d < 3; ++d) {
    g.frame[d] = c.frame[d];
    g.kernel[d] = c.kernel[d];
    g.search_min[d] = -(c.shifts[d] / 2);
    g.search_max[d] = c.shifts[d] - 1 - c.shifts[d] / 2;
    g.points[d] = c.points[d];
    g.step[d] = c.step[d];
    const int extent = (c.points[d] - 1) * c.step[d] + c.kernel[d];
    g.start[d] = -g.search_min[d] + (c.frame[d] - extent - (c.shifts[d] - 1)) / 2;
  }
  g.fit = ncc::Fit::parabola;
  g.zero_mean = false;
  return g;
}

const char* name_of(Method m) {
  return m == Method::standard ? "standard" : m == Method::lewis ? "lewis" : "luo";
}

// Algorithmic work of each method (flops and the fewest DRAM bytes its intermediates need).
struct Work {
  double gflop;
  double gbytes;
};

Work work_of(const Geometry& g, Method m, const int fft_size[3]) {
  const double points = g.point_count(), shifts = g.shift_count(), window = g.window_count();
  const double frame_bytes = 2.0 * g.frame[0] * g.frame[1] * g.frame[2] * 4.0;
  const double out_bytes = points * (shifts * 4.0 * 2.0 + 16.0);  // maps written + read, outputs
  double ref = 1, tgt = 1;
  for (int d = 0; d < 3; ++d) {
    ref *= g.reference_extent(d) + 1;
    tgt *= g.target_extent(d) + 1;
  }
  const int passes = (g.reference_extent(1) > 1) + (g.reference_extent(2) > 1);
  const double energy_bytes = (ref + tgt) * 8.0 * (1 + 2 * passes) + (ref + tgt) * 8.0;
  switch (m) {
    case Method::standard: {  // eq. (1): numerator 1 FMA per window sample and shift; window
      // energies summed directly once per window position (axial run + lateral x elevational)
      double windows = 1;
      for (int d = 0; d < 3; ++d) windows *= g.target_extent(d) - g.kernel[d] + 1;
      const double sums = 2.0 * windows * (g.kernel[0] + g.kernel[1] * g.kernel[2]) * 2.0;
      return {(2.0 * points * shifts * window + sums) * 1e-9, (frame_bytes + out_bytes + windows * 12.0) * 1e-9};
    }
    case Method::luo: {     // per shift: product + prefix passes in double, 8 look-ups x 3 sums
      const double table_flops = shifts * ref * (1 + 1 + passes);
      const double lookup_flops = points * shifts * (7 * 2 + 6);
      const double table_bytes = shifts * ref * 8.0 * (1 + 2 * passes);
      return {(table_flops + lookup_flops) * 1e-9, (frame_bytes + out_bytes + energy_bytes + table_bytes) * 1e-9};
    }
    default: {              // per point: 2 R2C + 1 C2R of the padded box, spectrum product
      const double n = static_cast<double>(fft_size[0]) * fft_size[1] * fft_size[2];
      const double fft_flops = 3 * 2.5 * n * std::log2(n);
      const double spectrum = (fft_size[0] / 2 + 1.0) * fft_size[1] * fft_size[2];
      const double flops = points * (fft_flops + 6 * spectrum) + points * shifts * 20;
      const double bytes = points * (2 * n * 4 * 2 + 2 * spectrum * 8 * 2 + spectrum * 8 * 2 + n * 4 * 2);
      return {flops * 1e-9, (bytes + frame_bytes + out_bytes + energy_bytes) * 1e-9};
    }
  }
}

std::vector<float> random_frame(const Geometry& g, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<std::size_t>(g.frame[0]) * g.frame[1] * g.frame[2]);
  for (auto& x : v) x = normal(rng);
  return v;
}

double cpu_ms(const Geometry& g, Method m, const std::vector<float>& f, const std::vector<float>& t,
              ThreadPool& pool) {
  ncc::CpuTracker tracker(g, pool.size());
  const auto t0 = std::chrono::steady_clock::now();
  tracker.correlate(m, f.data(), t.data(), pool);
  tracker.find_peaks(pool);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace
}  // namespace sonopipe::bench

namespace sonopipe::bench {
namespace {

#ifdef SONOPIPE_WITH_CUDA
double gpu_ms(cuda::NccTracker& tracker, Method m, const float* f, const float* g, int repeats,
              float* outputs[3], std::uint8_t* flags) {
  cudaStream_t stream;
  SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&start));
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&stop));
  const float spacing[3] = {1.f, 1.f, 1.f};
  std::vector<float> times;
  for (int r = 0; r < repeats + 2; ++r) {  // two warm-ups
    SONOPIPE_CUDA_CHECK(cudaEventRecord(start, stream));
    tracker.correlate(m, f, g, stream);
    tracker.find_peaks(3, spacing, outputs[0], outputs[1], outputs[2], flags, stream);
    SONOPIPE_CUDA_CHECK(cudaEventRecord(stop, stream));
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 2) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

#endif

void print_config_header() {
  std::printf("%-30s %-8s %10s %10s %9s %9s %9s %8s %8s %10s %10s %9s\n", "config", "method", "GPU ms",
              "CPU ms", "GFLOP", "GB", "floor ms", "gap x", "dev MB", "paper GPU", "paper CPU", "vs paper");
}

void run_config(const Config& c, const StrainBenchOptions& options, bool with_cpu, ThreadPool& pool,
                double tflops, double gb_per_s, std::vector<std::string>& summary) {
  const Geometry g = geometry_of(c);
  const auto f = random_frame(g, 1), t = random_frame(g, 2);
  int fft_size[3];
  for (int d = 0; d < 3; ++d) {  // the sizes the GPU path uses (2,3,5,7-smooth); CPU uses powers of 2
    const int m = g.kernel[d] + g.shifts(d) - 1;
    int n = m;
    for (;; ++n) {
      int r = n;
      for (int p : {2, 3, 5, 7})
        while (r % p == 0) r /= p;
      if (r == 1) break;
    }
    fft_size[d] = m > 1 ? n : 1;
  }
#ifdef SONOPIPE_WITH_CUDA
  int device_count = 0;
  const bool gpu = cudaGetDeviceCount(&device_count) == cudaSuccess && device_count > 0;
  std::unique_ptr<cuda::NccTracker> tracker;
  float *d_f = nullptr, *d_g = nullptr, *d_out[3] = {nullptr, nullptr, nullptr};
  std::uint8_t* d_flags = nullptr;
  if (gpu) {
    tracker = std::make_unique<cuda::NccTracker>(g, std::size_t(256) << 20);
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_f), f.size() * 4));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_g), t.size() * 4));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(d_f, f.data(), f.size() * 4, cudaMemcpyHostToDevice));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(d_g, t.data(), t.size() * 4, cudaMemcpyHostToDevice));
    for (auto& o : d_out) SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&o), static_cast<std::size_t>(g.point_count()) * 3 * 4));
    SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_flags), g.point_count()));
  }
#endif
  double best_gpu = 1e30;
  const char* best_name = "-";
  const Method order[3] = {Method::standard, Method::luo, Method::lewis};  // the paper's order
  for (int i = 0; i < 3; ++i) {
    const Method m = order[i];
    const Work w = work_of(g, m, fft_size);
    const double floor_ms = std::max(w.gflop / tflops, w.gbytes / gb_per_s * 1e3);  // GFLOP / TFLOP/s = ms
    double gpu_time = -1, device_mb = -1;
#ifdef SONOPIPE_WITH_CUDA
    if (gpu) {
      gpu_time = gpu_ms(*tracker, m, d_f, d_g, options.repeats, d_out, d_flags);
      device_mb = tracker->device_bytes(m) / 1048576.0;
      if (gpu_time < best_gpu) {
        best_gpu = gpu_time;
        best_name = name_of(m);
      }
    }
#endif
    double cpu_time = -1;
    const bool slow = m == Method::standard && g.frame[2] > 1 && !options.cpu_standard_3d;
    if (with_cpu && !slow) cpu_time = cpu_ms(g, m, f, t, pool);
    char line[320];
    auto num = [](double v, const char* fmt) {
      char b[32];
      if (v < 0) std::snprintf(b, sizeof b, "%s", "-");
      else std::snprintf(b, sizeof b, fmt, v);
      return std::string(b);
    };
    const double paper_gpu = c.paper_gpu_ms[i], paper_cpu = c.paper_cpu_ms[i];
    std::snprintf(line, sizeof line, "%-30s %-8s %10s %10s %9.3f %9.4f %9.4f %8s %8s %10s %10s %9s",
                  c.label.c_str(), name_of(m), num(gpu_time, "%.4f").c_str(), num(cpu_time, "%.1f").c_str(),
                  w.gflop, w.gbytes, floor_ms, num(gpu_time > 0 ? gpu_time / floor_ms : -1, "%.1f").c_str(),
                  num(device_mb, "%.1f").c_str(), num(paper_gpu, "%.1f").c_str(), num(paper_cpu, "%.1f").c_str(),
                  num(gpu_time > 0 && paper_gpu > 0 ? paper_gpu / gpu_time : -1, "%.0fx").c_str());
    std::cout << line << std::endl;
  }
  char s[200];
  if (best_gpu < 1e29)
    std::snprintf(s, sizeof s, "%-30s fastest GPU method %-8s %.4f ms", c.label.c_str(), best_name, best_gpu);
  else
    std::snprintf(s, sizeof s, "%-30s no GPU", c.label.c_str());
  summary.push_back(s);
#ifdef SONOPIPE_WITH_CUDA
  if (gpu) {
    cudaFree(d_f);
    cudaFree(d_g);
    for (auto* o : d_out) cudaFree(o);
    cudaFree(d_flags);
  }
#endif
}

void run_strain_bench(const StrainBenchOptions& options) {
  ThreadPool pool(options.threads);
  const DeviceCeilings ceilings = device_ceilings(options.peak_tflops, options.peak_gb_per_s);
  const double tflops = ceilings.fp32_tflops, gb_per_s = ceilings.copy_gb_per_s;
  std::printf("%s\n", ceilings.description.c_str());
  std::printf("CPU: %d threads, double-precision reference (the papers: single-threaded C)\n", pool.size());
  std::vector<std::string> summary;
  char table = 'a';
  auto cpu_for = [&](char t) { return options.cpu && options.cpu_tables.find(t) != std::string::npos; };
  // (a) 3-D paper Table 1: kernel 69x9x3 (axial x lateral x elevational), search 18x5x3,
  // one slice of 100 x 100 points on 1024 x 128 x N (N = 8 planes here). Paper (TITAN X):
  // standard 278.1, Luo-Konofagou 159.9, Lewis 225.2 ms; CPU 5760 / 168.5 / 2120 ms.
  if (options.only.empty() || options.only == "a") {
    std::printf("\n(a) 3-D Table 1: kernel 69x9x3, search 18x5x3, 100x100 points, 1024x128x8 volume\n");
    print_config_header();
    run_config({"3d table1 69x9x3 s18x5x3", {1024, 128, 8}, {69, 9, 3}, {18, 5, 3}, {100, 100, 1}, {9, 1, 1},
                {278.1, 159.9, 225.2}, {5760.0, 168.5, 2120.0}},
               options, cpu_for(table), pool, tflops, gb_per_s, summary);
  }
  // (b) 2-D paper: frame 2078 x 150, ROI 1024 x 128, 100 x 100 points, kernel 61 x 11; the paper
  // gives its times only as plots (Figs. 5-6, GPU differences "< 5 ms"): no numbers beside.
  table = 'b';
  if (options.only.empty() || options.only == "b") {
    std::printf("\n(b) 2-D paper: frame 2078x150, 100x100 points in a 1024x128 ROI, kernel 61x11\n");
    print_config_header();
    for (int axial : {11, 21, 31, 41})
      run_config({"2d 61x11 s" + std::to_string(axial) + "x7", {2078, 150, 1}, {61, 11, 1}, {axial, 7, 1},
                  {100, 100, 1}, {9, 1, 1}, {-1, -1, -1}, {-1, -1, -1}},
                 options, cpu_for(table), pool, tflops, gb_per_s, summary);
  }
  // (c) 3-D search-range sweep (Figure 7; ranges of Table A3), kernel 69x9x3; the paper gives plots.
  table = 'c';
  if (options.only.empty() || options.only == "c") {
    std::printf("\n(c) 3-D search-range sweep (Fig. 7 / Table A3), kernel 69x9x3, 100x100 points\n");
    print_config_header();
    for (int lateral : {5, 7})
      for (int axial : {10, 15, 20, 25})
        run_config({"3d s" + std::to_string(axial) + "x" + std::to_string(lateral) + "x3", {1024, 128, 8},
                    {69, 9, 3}, {axial, lateral, 3}, {100, 100, 1}, {9, 1, 1}, {-1, -1, -1}, {-1, -1, -1}},
                   options, cpu_for(table), pool, tflops, gb_per_s, summary);
  }
  std::printf("\nsummary (goals on the H100: <= 1.5 ms per 3-D slice, <= 0.2 ms per 2-D frame pair)\n");
  for (const auto& s : summary) std::printf("%s\n", s.c_str());
}

}  // namespace

void add_strain_bench(CLI::App& app) {
  auto options = std::make_shared<StrainBenchOptions>();
  CLI::App* command = app.add_subcommand("strain", "ncc_track methods (standard, lewis, luo) vs the peng2019 papers");
  command->add_option("--repeats", options->repeats, "GPU repetitions per method (median)")->capture_default_str();
  command->add_option("--cpu", options->cpu, "also time the CPU reference")->capture_default_str();
  command->add_option("--cpu-tables", options->cpu_tables, "tables with CPU columns (e.g. ab)")
      ->capture_default_str();
  command->add_option("--cpu-standard-3d", options->cpu_standard_3d,
                      "also time the CPU standard method in 3-D (seconds per run)")->capture_default_str();
  command->add_option("--threads", options->threads, "CPU threads (0: all)")->capture_default_str();
  command->add_option("--peak-tflops", options->peak_tflops, "FP32 ceiling for the floor (0: from the device)")
      ->capture_default_str();
  command->add_option("--peak-gb-s", options->peak_gb_per_s, "memory ceiling for the floor (0: measured copy)")
      ->capture_default_str();
  command->add_option("--only", options->only, "run one table: a, b or c")->check(CLI::IsMember({"a", "b", "c"}));
  command->callback([options] { run_strain_bench(*options); });
}

}  // namespace sonopipe::bench
