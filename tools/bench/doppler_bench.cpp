// `sonopipe-bench doppler`: the Doppler stages at functional-ultrasound scale (issue 24): a 200-frame
// ensemble of 256 x 256 pixels (Casorati matrix 65,536 x 200, complex64, 105 MB), work counted
// first. Flops (the work the filter must do, not the route's): Gram (FP64, half of S^H S; the
// stage's Zgemm does both halves, twice this) 8 P N (N + 1) / 2; projection (FP32) 16 P N r when
// N >= 64 and r <= N / 4 components are removed at a fixed rank (S V_r and the rank-r update), else
// 8 P N^2 (S Q); the similarity rank adds U = S V (8 P N^2), |U| (~6 P N) and |U|^T |U| (Ssyrk,
// P N (N + 1)); the eigensolver of the N x N Gram matrix is not counted (small and latency-bound:
// its time is in the gap). FP64 at the FP32 ceiling: the H100's FP64 tensor cores (DMMA, which
// cuBLAS's Zgemm uses) match its FP32 vector rate. Bytes (the floor, not the route's traffic): the Casorati matrix read twice
// (Gram, projection) and the output written once; blocks add a gather and a scatter (read + write
// each). doppler reads the ensemble once and writes three float images. GPU time: median of CUDA
// events around run_cuda. Floors: device_ceilings.h.
// --case routes: tools/bench/svd_routes.h. --case chain: run_chain() below.
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sdk/thread_pool.h"
#include "stages/doppler/clutter_filter/clutter_filter.h"
#include "stages/doppler/doppler/doppler.h"
#include "stages/doppler/doppler_conventions.h"
#include "tools/bench/commands.h"
#include "tools/bench/device_ceilings.h"
#include "tools/bench/ensemble_frame.h"
#include "tools/bench/svd_routes.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#endif

namespace sonopipe::bench {
namespace {

struct DopplerBenchOptions {
  std::vector<std::string> cases;  // stages, routes, chain; empty: all
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
  double floor_ms(const DeviceCeilings& c) const {
    return std::max(gflop / c.fp32_tflops, megabytes * 1e-3 / c.copy_gb_per_s * 1e3);
  }
};

// The work of ClutterFilterGpu's route (stages/doppler/clutter_filter/clutter_filter.cuh).
Work count(const ClutterFilterParams& p, double pixels, double frames, double block_cover) {
  const double data_mb = pixels * frames * 8 * 1e-6;
  if (p.method == ClutterFilterParams::Method::polynomial) return {8 * pixels * frames * frames * 1e-9, 2 * data_mb};
  const double covered = pixels * block_cover;  // pixels summed over the blocks
  const bool similarity = p.rank_choice == ClutterFilterParams::RankChoice::similarity;
  const double removed = double(p.tissue_rank + p.noise_rank);
  const bool rank_update = !similarity && removed > 0 && frames >= 64 && 4 * removed <= frames;
  Work w;
  const double projection = rank_update ? 16 * covered * frames * removed : 8 * covered * frames * frames;
  w.gflop = (8 * covered * frames * (frames + 1) / 2 + projection) * 1e-9;
  if (similarity)
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

// Tissue `tissue` components 100 .. 30, the rest 1 .. 0.3: tissue 40 dB over the largest blood
// component (sigma_1 / sigma_k+1 = 100), a random unitary B (seed 3).
DesignedCasorati designed(const char* name, std::int64_t pixels, std::int64_t frames, std::int64_t tissue) {
  using ComplexMatrix = Eigen::Matrix<std::complex<double>, Eigen::Dynamic, Eigen::Dynamic>;
  DesignedCasorati c{name, pixels, frames, tissue, {}, {}};
  for (std::int64_t i = 0; i < frames; ++i)
    c.singular.push_back(i < tissue ? 100 - 70.0 * i / std::max<std::int64_t>(1, tissue - 1)
                                    : 1 - 0.7 * (i - tissue) / std::max<std::int64_t>(1, frames - tissue - 1));
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 1);
  ComplexMatrix g(frames, frames);
  for (std::int64_t i = 0; i < frames * frames; ++i) g.data()[i] = {normal(rng), normal(rng)};
  const ComplexMatrix b = Eigen::HouseholderQR<ComplexMatrix>(g).householderQ();
  c.unitary.assign(b.data(), b.data() + frames * frames);
  return c;
}

bool wanted(const DopplerBenchOptions& o, const char* name) {
  return o.cases.empty() || std::find(o.cases.begin(), o.cases.end(), name) != o.cases.end();
}

void run_stage_cases(const DopplerBenchOptions& o, const DeviceCeilings& ceilings) {
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
    const double floor_ms = w.floor_ms(ceilings);
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

#ifdef SONOPIPE_WITH_CUDA
// One stage of the chain, configured for CUDA, with its device outputs, workspace and staging.
struct ChainStage {
  Stage* stage;
  TensorSpec input_spec;
  StagePlan plan;
  std::vector<void*> outputs;
  void* workspace = nullptr;
  void* staging = nullptr;
  ~ChainStage() {
    for (void* p : outputs) cudaFree(p);
    cudaFree(workspace);
    cudaFreeHost(staging);
  }
};

// beamform (ensemble kernel) -> clutter_filter -> doppler on one device-resident channel ensemble,
// configured as DeviceLane::configure() does (the frame's meta for every stage, each input the
// previous stage's first output) and run through the stages' run_cuda on one stream; CUDA events
// between the stages. Median of `repeats` per stage and end to end.
void run_chain(const EnsembleWorkload& w, std::int64_t tissue_rank, std::int64_t box, double goal_ms,
               const DeviceCeilings& ceilings, int repeats) {
  const BenchFrame frame = ensemble_frame(w, false);
  const BeamformParams bp = ensemble_beamform_params(w);
  BeamformStage beamform(bp);
  ClutterFilterParams cp;
  cp.tissue_rank = tissue_rank;
  ClutterFilterStage clutter(cp);
  DopplerParams dp;
  dp.average_lateral = box;
  dp.average_axial = box;
  DopplerStage doppler(dp);
  std::vector<std::unique_ptr<ChainStage>> chain;
  TensorSpec input = frame.meta.payload;
  for (Stage* stage : std::initializer_list<Stage*>{&beamform, &clutter, &doppler}) {
    auto c = std::make_unique<ChainStage>();
    c->stage = stage;
    c->input_spec = input;
    c->plan = stage->configure(frame.meta, input, Backend::cuda);
    for (const StageOutput& o : c->plan.outputs) {
      void* p = nullptr;
      SONOPIPE_CUDA_CHECK(cudaMalloc(&p, o.spec.byte_size()));
      c->outputs.push_back(p);
    }
    if (c->plan.workspace_bytes) SONOPIPE_CUDA_CHECK(cudaMalloc(&c->workspace, c->plan.workspace_bytes));
    if (c->plan.host_staging_bytes) SONOPIPE_CUDA_CHECK(cudaMallocHost(&c->staging, c->plan.host_staging_bytes));
    input = c->plan.outputs[0].spec;
    chain.push_back(std::move(c));
  }
  // Work: the beamformer's terms (16 FP32 flops each, tools/bench/beamform_bench.cpp), the filter's count()
  // and doppler's; bytes stage by stage (each stage reads its input and writes its outputs) and for
  // the chain as one pass (channel data in, the three images out).
  const TensorSpec& ensemble_spec = chain[0]->plan.outputs[0].spec;
  const double pixels = double(ensemble_spec.axes[1].size * ensemble_spec.axes[2].size), frames = double(w.frames);
  const double beamform_gflop =
      count_terms(beamform, frame, bp, ensemble_spec.axes[1].size, ensemble_spec.axes[2].size) * 16 * 1e-9;
  const Work filter = count(cp, pixels, frames, 1.0);
  const double doppler_gflop = pixels * frames * 12 * 1e-9;
  const double in_mb = frame.meta.payload.byte_size() * 1e-6, ensemble_mb = ensemble_spec.byte_size() * 1e-6;
  const double images_mb = 3 * pixels * 4 * 1e-6;
  const double staged_mb = in_mb + ensemble_mb + filter.megabytes + ensemble_mb + images_mb;
  const double gflop = beamform_gflop + filter.gflop + doppler_gflop;
  auto floor_of = [&](double mb) {
    return Work{.gflop = gflop, .megabytes = mb}.floor_ms(ceilings);
  };
  void* device_input = nullptr;
  SONOPIPE_CUDA_CHECK(cudaMalloc(&device_input, frame.meta.payload.byte_size()));
  SONOPIPE_CUDA_CHECK(
      cudaMemcpy(device_input, frame.data.data(), frame.meta.payload.byte_size(), cudaMemcpyHostToDevice));
  cudaStream_t stream;
  SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
  std::vector<cudaEvent_t> events(chain.size() + 1);
  for (cudaEvent_t& e : events) SONOPIPE_CUDA_CHECK(cudaEventCreate(&e));
  std::vector<std::vector<float>> stage_ms(chain.size());
  std::vector<float> total_ms;
  for (int r = 0; r < repeats + 3; ++r) {  // three warm-ups
    const void* in = device_input;
    SONOPIPE_CUDA_CHECK(cudaEventRecord(events[0], stream));
    for (std::size_t i = 0; i < chain.size(); ++i) {
      ChainStage& c = *chain[i];
      const StageIo io{.frame = frame.meta, .input_spec = c.input_spec, .input = in, .outputs = c.outputs,
                       .workspace = c.workspace, .host_staging = c.staging, .stream = stream};
      if (!c.stage->run_cuda(io)) throw std::runtime_error("doppler chain: a stage produced no output");
      SONOPIPE_CUDA_CHECK(cudaEventRecord(events[i + 1], stream));
      in = c.outputs[0];
    }
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(events.back()));
    if (r < 3) continue;
    for (std::size_t i = 0; i < chain.size(); ++i) {
      float ms = 0;
      SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
      stage_ms[i].push_back(ms);
    }
    float ms = 0;
    SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, events.front(), events.back()));
    total_ms.push_back(ms);
  }
  auto median = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return double(v[v.size() / 2]);
  };
  const double total = median(total_ms);
  std::printf("%-10s %10.3f %10.3f %10.3f %10.3f %8.2f %8.1f %8.1f %9.3f %9.3f %7.2f %s\n", w.name,
              median(stage_ms[0]), median(stage_ms[1]), median(stage_ms[2]), total, gflop, staged_mb,
              in_mb + images_mb, floor_of(staged_mb), floor_of(in_mb + images_mb), goal_ms,
              total <= goal_ms ? "met" : "not met");
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  cudaStreamDestroy(stream);
  cudaFree(device_input);
}
#endif

void run_chain_cases(const DopplerBenchOptions& o, const DeviceCeilings& ceilings) {
  std::printf("\nchain beamform (ensemble) -> clutter_filter svd -> doppler, device-resident channel IQ, the stages' "
              "run_cuda on one stream (median of %d)\n", o.repeats);
  std::printf("%-10s %10s %10s %10s %10s %8s %8s %8s %9s %9s %7s\n", "workload", "beamform", "clutter", "doppler",
              "chain ms", "GFLOP", "MB stage", "MB one", "floor st", "floor one", "goal");
#ifdef SONOPIPE_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    // pwi_disk: config/doppler.yaml's filter (tissue rank 1, R1 over 5 x 5); goal: faster than mach's
    // beamforming alone (0.328 ms). fus: tissue rank 20, 3 x 3; goal 5 ms (issue 24).
    run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats);
    run_chain(kFus, 20, 3, 5.0, ceilings, o.repeats);
    return;
  }
#endif
  (void)ceilings;
  std::printf("chain: no CUDA device\n");
}

void run_doppler_bench(const DopplerBenchOptions& o) {
  for (const std::string& name : o.cases)
    if (name != "stages" && name != "routes" && name != "chain")
      throw std::runtime_error("doppler bench: no case '" + name + "' (stages, routes, chain)");
  const DeviceCeilings ceilings = device_ceilings(o.peak_tflops, o.peak_gb_per_s);
  std::printf("%s\n", ceilings.description.c_str());
  if (wanted(o, "routes")) {
#ifdef SONOPIPE_WITH_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0)
      run_svd_routes({designed("fus (256 x 256 pixels, 200 frames)", 256 * 256, 200, 20),
                      designed("pwi_disk (251 x 251 pixels, 32 frames)", 251 * 251, 32, 4)},
                     o.repeats);
    else
#endif
      std::printf("routes: no CUDA device\n");
  }
  if (wanted(o, "stages")) run_stage_cases(o, ceilings);
  if (wanted(o, "chain")) run_chain_cases(o, ceilings);
}

}  // namespace

void add_doppler_bench(CLI::App& app) {
  auto options = std::make_shared<DopplerBenchOptions>();
  CLI::App* command = app.add_subcommand("doppler", "clutter_filter and doppler at fUS scale (65,536 x 200 Casorati)");
  command->add_option("--case", options->cases,
                      "cases (repeatable; default all): stages (the stages at fUS scale), routes (the SVD filter's "
                      "library routes, fUS and pwi_disk shapes), chain (beamform + clutter_filter + doppler)");
  command->add_option("--repeats", options->repeats, "GPU repetitions (median)")->capture_default_str();
  command->add_option("--frames", options->frames, "ensemble length")->capture_default_str();
  command->add_option("--lateral", options->lateral, "pixels")->capture_default_str();
  command->add_option("--axial", options->axial, "pixels")->capture_default_str();
  command->add_option("--peak-tflops", options->peak_tflops, "FP32 ceiling for the floor (0: from the device)");
  command->add_option("--peak-gb-s", options->peak_gb_per_s, "memory ceiling for the floor (0: measured copy)");
  command->callback([options] { run_doppler_bench(*options); });
}

}  // namespace sonopipe::bench
