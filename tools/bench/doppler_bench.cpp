// `sonopipe-bench doppler`: the Doppler stages at functional-ultrasound scale (issue 24): a 200-frame
// ensemble of 256 x 256 pixels (Casorati matrix 65,536 x 200, complex64, 105 MB), work counted
// first. FP32 flops: Gram (Cherk, half of S^H S) 8 P N (N + 1) / 2; projection (Cgemm) 8 P N^2; the
// similarity rank adds U = S V (8 P N^2), |U| (~6 P N) and |U|^T |U| (Ssyrk, P N (N + 1)); the
// eigensolver of the N x N Gram matrix (heevj) is not counted (small and latency-bound: its time is
// the gap). Bytes: the Casorati matrix read twice (Gram, projection) and the output written once;
// blocks add a gather and a scatter (read + write each). doppler reads the ensemble once and writes
// three float images. GPU time: median of CUDA events around run_cuda. Floors: device_ceilings.h.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "sdk/thread_pool.h"
#include "stages/doppler/clutter_filter/clutter_filter.h"
#include "stages/doppler/doppler/doppler.h"
#include "stages/doppler/doppler_conventions.h"
#include "tools/bench/commands.h"
#include "tools/bench/device_ceilings.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#endif

namespace sonopipe::bench {
namespace {

struct DopplerBenchOptions {
  int repeats = 20;
  std::int64_t frames = 200, lateral = 256, axial = 256;
  double peak_tflops = 0.0, peak_gb_per_s = 0.0;
};

// An ensemble with a rank-8 "tissue" 40 dB over unit noise (the filter's work does not depend on
// the values; the eigensolver's sweeps do a little).
FrameMeta ensemble(const DopplerBenchOptions& o, std::vector<std::complex<float>>& iq) {
  FrameMeta m;
  m.kind = FrameKind::iq;
  m.center_frequency_hz = 15e6;
  m.speed_of_sound_m_per_s = 1540;
  m.payload.dtype = DType::complex64;
  m.payload.axes = {{doppler::kFrameAxis, o.frames, 1.0 / 5000, "s"}, {"lateral", o.lateral, 1e-4, "m"},
                    {"axial", o.axial, 5e-5, "m"}};
  const std::int64_t pixels = o.lateral * o.axial;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0, 1);
  iq.assign(static_cast<std::size_t>(pixels * o.frames), {});
  for (auto& v : iq) v = {normal(rng), normal(rng)};
  for (int r = 0; r < 8; ++r) {
    std::vector<std::complex<float>> space(pixels), time(o.frames);
    for (auto& v : space) v = {normal(rng), normal(rng)};
    for (std::int64_t n = 0; n < o.frames; ++n) time[n] = std::polar(100.0f / (r + 1), 0.01f * r * n);
    for (std::int64_t n = 0; n < o.frames; ++n)
      for (std::int64_t p = 0; p < pixels; ++p) iq[n * pixels + p] += space[p] * time[n];
  }
  return m;
}

struct Work {
  double gflop = 0, megabytes = 0;
};

Work count(const ClutterFilterParams& p, double pixels, double frames, double block_cover) {
  const double data_mb = pixels * frames * 8 * 1e-6;
  if (p.method == ClutterFilterParams::Method::polynomial) return {8 * pixels * frames * frames * 1e-9, 2 * data_mb};
  const double covered = pixels * block_cover;  // pixels summed over the blocks
  Work w;
  w.gflop = (8 * covered * frames * (frames + 1) / 2 + 8 * covered * frames * frames) * 1e-9;
  if (p.rank_choice == ClutterFilterParams::RankChoice::similarity)
    w.gflop += (8 * covered * frames * frames + 6 * covered * frames + covered * frames * (frames + 1)) * 1e-9;
  w.megabytes = 3 * data_mb * block_cover + (block_cover > 1 ? 4 * data_mb * block_cover : 0.0);
  return w;
}

#ifdef SONOPIPE_WITH_CUDA
// Median GPU ms of `stage` on the device copy of the ensemble.
double time_stage(Stage& stage, const FrameMeta& meta, const void* device_input, int repeats) {
  const StagePlan plan = stage.configure(meta, meta.payload, Backend::cuda);
  std::vector<void*> outputs;
  for (const StageOutput& o : plan.outputs) {
    void* p = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(&p, o.spec.byte_size()));
    outputs.push_back(p);
  }
  void *workspace = nullptr, *staging = nullptr;
  if (plan.workspace_bytes) SONOPIPE_CUDA_CHECK(cudaMalloc(&workspace, plan.workspace_bytes));
  if (plan.host_staging_bytes) SONOPIPE_CUDA_CHECK(cudaMallocHost(&staging, plan.host_staging_bytes));
  cudaStream_t stream;
  SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&start));
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&stop));
  const StageIo io{.frame = meta, .input_spec = meta.payload, .input = device_input, .outputs = outputs,
                   .workspace = workspace, .host_staging = staging, .stream = stream};
  std::vector<float> times;
  for (int r = 0; r < repeats + 3; ++r) {  // three warm-ups
    SONOPIPE_CUDA_CHECK(cudaEventRecord(start, stream));
    stage.run_cuda(io);
    SONOPIPE_CUDA_CHECK(cudaEventRecord(stop, stream));
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 3) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  for (void* p : outputs) cudaFree(p);
  cudaFree(workspace);
  cudaFreeHost(staging);
  return times[times.size() / 2];
}
#endif

void run_doppler_bench(const DopplerBenchOptions& o) {
  const DeviceCeilings ceilings = device_ceilings(o.peak_tflops, o.peak_gb_per_s);
  std::printf("%s\n", ceilings.description.c_str());
  std::vector<std::complex<float>> iq;
  const FrameMeta meta = ensemble(o, iq);
  const double pixels = double(o.lateral * o.axial), frames = double(o.frames);
  std::printf("ensemble %s (%.0f MB); Casorati %.0f x %.0f\n", meta.payload.shape_string().c_str(),
              meta.payload.byte_size() * 1e-6, pixels, frames);
  std::printf("%-34s %9s %8s %8s %9s %7s\n", "case", "GPU ms", "GFLOP", "MB", "floor ms", "gap x");
  struct Case {
    std::string name;
    ClutterFilterParams params;
  };
  std::vector<Case> cases;
  ClutterFilterParams p;
  p.tissue_rank = 20;
  cases.push_back({"clutter_filter svd k=20", p});
  p.rank_choice = ClutterFilterParams::RankChoice::similarity;
  p.rank_max = 60;
  cases.push_back({"clutter_filter svd similarity", p});
  p = {};
  p.tissue_rank = 20;
  p.block_lateral = 64;
  p.block_axial = 64;
  p.block_overlap = 0.5;
  cases.push_back({"clutter_filter svd 64x64 blocks 50%", p});
  p = {};
  p.method = ClutterFilterParams::Method::polynomial;
  p.polynomial_order = 4;
  cases.push_back({"clutter_filter polynomial order 4", p});
#ifdef SONOPIPE_WITH_CUDA
  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  void* device_input = nullptr;
  if (gpu) {
    SONOPIPE_CUDA_CHECK(cudaMalloc(&device_input, meta.payload.byte_size()));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(device_input, iq.data(), meta.payload.byte_size(), cudaMemcpyHostToDevice));
  }
#else
  const bool gpu = false;
#endif
  double svd_ms = -1;
  for (const Case& c : cases) {
    ClutterFilterStage stage(c.params);
    stage.configure(meta, meta.payload, Backend::cpu);
    double cover = 0;
    for (const ClutterBlock& b : stage.blocks()) cover += double(b.pixels());
    cover /= pixels;
    const Work w = count(c.params, pixels, frames, cover);
    const double floor_ms = std::max(w.gflop / ceilings.fp32_tflops, w.megabytes * 1e-3 / ceilings.copy_gb_per_s * 1e3);
    double ms = -1;
#ifdef SONOPIPE_WITH_CUDA
    if (gpu) ms = time_stage(stage, meta, device_input, o.repeats);
#endif
    if (svd_ms < 0) svd_ms = ms;
    std::printf("%-34s %9.3f %8.2f %8.1f %9.3f %7.2f\n", c.name.c_str(), ms, w.gflop, w.megabytes, floor_ms,
                ms > 0 ? ms / floor_ms : 0.0);
  }
  DopplerParams d;
  d.average_lateral = 3;
  d.average_axial = 3;
  DopplerStage doppler(d);
  const double doppler_mb = (meta.payload.byte_size() + 3 * pixels * 4 + pixels * 8 * 2) * 1e-6;
  const double doppler_gflop = pixels * frames * 12 * 1e-9;  // |x|^2 and x conj(x_prev): 3 + 8 flops (+1)
  const double doppler_floor = std::max(doppler_gflop / ceilings.fp32_tflops, doppler_mb * 1e-3 / ceilings.copy_gb_per_s * 1e3);
  double doppler_ms = -1;
#ifdef SONOPIPE_WITH_CUDA
  if (gpu) doppler_ms = time_stage(doppler, meta, device_input, o.repeats);
  cudaFree(device_input);
#endif
  std::printf("%-34s %9.3f %8.2f %8.1f %9.3f %7.2f\n", "doppler box 3x3", doppler_ms, doppler_gflop, doppler_mb,
              doppler_floor, doppler_ms > 0 ? doppler_ms / doppler_floor : 0.0);
  if (svd_ms > 0)
    std::printf("clutter_filter (svd k=20) + doppler: %.3f ms (issue 24: SVD filter <= 2 ms, chain <= 5 ms with the "
                "beamformer)\n", svd_ms + doppler_ms);
  if (!gpu) std::printf("no CUDA device: counts and floors only\n");
}

}  // namespace

void add_doppler_bench(CLI::App& app) {
  auto options = std::make_shared<DopplerBenchOptions>();
  CLI::App* command = app.add_subcommand("doppler", "clutter_filter and doppler at fUS scale (65,536 x 200 Casorati)");
  command->add_option("--repeats", options->repeats, "GPU repetitions (median)")->capture_default_str();
  command->add_option("--frames", options->frames, "ensemble length")->capture_default_str();
  command->add_option("--lateral", options->lateral, "pixels")->capture_default_str();
  command->add_option("--axial", options->axial, "pixels")->capture_default_str();
  command->add_option("--peak-tflops", options->peak_tflops, "FP32 ceiling for the floor (0: from the device)");
  command->add_option("--peak-gb-s", options->peak_gb_per_s, "memory ceiling for the floor (0: measured copy)");
  command->callback([options] { run_doppler_bench(*options); });
}

}  // namespace sonopipe::bench
