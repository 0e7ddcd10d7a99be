// `sonopipe-bench doppler`: the Doppler stages at functional-ultrasound scale (issue 24): a 200-frame
// ensemble of 256 x 256 pixels (Casorati matrix 65,536 x 200, complex64, 105 MB), work counted
// first. Flops (the work the filter must do, not the route's): Gram (FP64, half of S^H S; the
// stage's Zgemm does both halves, twice this) 8 P N (N + 1) / 2; projection (FP32) 16 P N r when
// N >= 64 and r <= N / 4, or N <= 32 and r <= N / 2, components are removed at a fixed rank (the
// rank-r update), else 8 P N^2 (S Q); the similarity rank adds U = S V (8 P N^2), |U| (~6 P N) and
// |U|^T |U| (Ssyrk, P N (N + 1)); the eigensolver of the N x N Gram matrix is not counted (small and
// latency-bound: its time is in the gap). FP64 at the FP32 ceiling: the H100's FP64 tensor cores (DMMA, which
// cuBLAS's Zgemm uses) match its FP32 vector rate. Bytes (the floor, not the route's traffic): the Casorati matrix read twice
// (Gram, projection) and the output written once; blocks add a gather and a scatter (read + write
// each). doppler reads the ensemble once and writes three float images. GPU time: median of CUDA
// events around run_cuda. Floors: device_ceilings.h.
// --case routes: tools/bench/svd_routes.h. --case chain: run_chain() below.
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
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
#include "tools/formats/must_reader.h"
#include "tools/sim/flow_sim.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#include "stages/doppler/clutter_filter/small_eigen.cuh"
#endif

namespace sonopipe::bench {
namespace {

struct DopplerBenchOptions {
  std::vector<std::string> cases;  // stages, routes, chain, subspace, slots; empty: all
  int repeats = 20;
  std::int64_t frames = 200, lateral = 256, axial = 256;
  double peak_tflops = 0.0, peak_gb_per_s = 0.0;
};

// An ensemble with a rank-8 "tissue" 40 dB over unit noise (the filter's work does not depend on
// the values; the eigensolver's sweeps do a little; the subspace route's convergence does: k = 20
// lies inside the noise's flat spectrum here, so it falls back to the full solver). gapped: 20
// tissue components with random time courses (near-orthogonal; phase ramps 0.01 rad apart span only
// ~6 dimensions over 200 frames), amplitudes 100 .. 30, all far above the noise (a gap at k = 20).
FrameMeta ensemble(const DopplerBenchOptions& o, std::vector<std::complex<float>>& iq, bool gapped = false) {
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
  const int tissue = gapped ? 20 : 8;
  for (int r = 0; r < tissue; ++r) {
    std::vector<std::complex<float>> space(pixels), time(o.frames);
    for (auto& v : space) v = {normal(rng), normal(rng)};
    const float amplitude = gapped ? 100.0f - 70.0f * r / (tissue - 1) : 100.0f / (r + 1);
    for (std::int64_t n = 0; n < o.frames; ++n)  // gapped: random (near-orthogonal) time courses
      time[n] = gapped ? amplitude * std::complex<float>(normal(rng), normal(rng)) * 0.70710678f
                       : std::polar(amplitude, 0.01f * r * n);
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
  // The rank-r update: cublasLt from 64 frames (r <= N / 4), one kernel up to 32 (r <= N / 2).
  const bool rank_update = !similarity && removed > 0 &&
                           ((frames >= 64 && 4 * removed <= frames) || (frames <= 32 && 2 * removed <= frames));
  Work w;
  const double projection = rank_update ? 16 * covered * frames * removed : 8 * covered * frames * frames;
  w.gflop = (8 * covered * frames * (frames + 1) / 2 + projection) * 1e-9;
  if (similarity)
    w.gflop += (8 * covered * frames * frames + 6 * covered * frames + covered * frames * (frames + 1)) * 1e-9;
  w.megabytes = 3 * data_mb * block_cover + (block_cover > 1 ? 4 * data_mb * block_cover : 0.0);
  return w;
}

#ifdef SONOPIPE_WITH_CUDA
// Median GPU ms of `stage` on the device copy of the ensemble (and the mean, where `mean` is given:
// a route that changes from frame to frame, as auto's subspace retry, shows there).
double time_stage(Stage& stage, const FrameMeta& meta, const void* device_input, int repeats, double* mean = nullptr) {
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
  if (mean) {
    double sum = 0;
    for (float t : times) sum += t;
    *mean = sum / static_cast<double>(times.size());
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

const char* route_name(const ClutterFilterStage& stage) {
  switch (stage.cuda_eigen_route().kind) {
    case EigenRoute::Kind::full: return "full";
    case EigenRoute::Kind::jacobi: return "jacobi";
    case EigenRoute::Kind::subspace: return "subspace";
    case EigenRoute::Kind::dominant: return "dominant";
  }
  return "?";
}

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
  std::printf("%-34s %9s %8s %8s %9s %7s %9s %9s\n", "case", "GPU ms", "GFLOP", "MB", "floor ms", "gap x", "route",
              "fallback");
  struct Case {
    std::string name;
    ClutterFilterParams params;
  };
  std::vector<Case> cases;
  ClutterFilterParams p;
  const ClutterFilterParams::Eigensolver full = ClutterFilterParams::Eigensolver::full;
  p.tissue_rank = 20;
  p.eigensolver = full;
  cases.push_back({"svd k=20 full (before)", p});
  p.eigensolver = ClutterFilterParams::Eigensolver::subspace;
  cases.push_back({"svd k=20 subspace", p});
  p.eigensolver = {};
  p.rank_choice = ClutterFilterParams::RankChoice::similarity;
  p.rank_max = 60;
  cases.push_back({"svd similarity", p});
  p = {};
  p.tissue_rank = 20;
  p.block_lateral = 64;
  p.block_axial = 64;
  p.block_overlap = 0.5;
  p.eigensolver = full;
  cases.push_back({"svd 64x64 blocks 50% full", p});
  p.eigensolver = ClutterFilterParams::Eigensolver::subspace;
  cases.push_back({"svd 64x64 blocks 50% subspace", p});
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
    const char* route = "-";
    double fallback = 0;
#ifdef SONOPIPE_WITH_CUDA
    if (gpu) {
      ms = time_stage(stage, meta, device_input, o.repeats);
      route = route_name(stage);
      fallback = double(stage.subspace_fallbacks()) / (o.repeats + 3);
    }
#endif
    if (c.name == "svd k=20 full (before)") svd_ms = ms;
    std::printf("%-34s %9.3f %8.2f %8.1f %9.3f %7.2f %9s %9.2f\n", c.name.c_str(), ms, w.gflop, w.megabytes, floor_ms,
                ms > 0 ? ms / floor_ms : 0.0, c.params.method == ClutterFilterParams::Method::svd ? route : "-",
                fallback);
  }
#ifdef SONOPIPE_WITH_CUDA
  // The gapped ensemble (20 tissue components far above the noise): the subspace route's block and
  // iteration count against the full solver, with the fraction of runs that fell back.
  if (gpu) {
    std::vector<std::complex<float>> gapped_iq;
    ensemble(o, gapped_iq, true);
    SONOPIPE_CUDA_CHECK(cudaMemcpy(device_input, gapped_iq.data(), meta.payload.byte_size(), cudaMemcpyHostToDevice));
    std::printf("gapped ensemble (20 tissue components 100 .. 30 over unit noise), svd k = 20:\n");
    ClutterFilterParams g;
    g.tissue_rank = 20;
    g.eigensolver = full;
    {
      ClutterFilterStage stage(g);
      std::printf("  %-32s %9.3f ms\n", "full (before)", time_stage(stage, meta, device_input, o.repeats));
    }
    g.eigensolver = ClutterFilterParams::Eigensolver::subspace;
    for (int block : {24, 32})
      for (int iterations : {1, 2, 3, 4}) {
        g.subspace_block = block;
        g.subspace_iterations = iterations;
        ClutterFilterStage stage(g);
        const double ms = time_stage(stage, meta, device_input, o.repeats);
        char label[64];
        std::snprintf(label, sizeof label, "subspace block %d, %d iterations", block, iterations);
        std::printf("  %-32s %9.3f ms  route %-8s fallback %.2f\n", label, ms, route_name(stage),
                    double(stage.subspace_fallbacks()) / (o.repeats + 3));
      }
    SONOPIPE_CUDA_CHECK(cudaMemcpy(device_input, iq.data(), meta.payload.byte_size(), cudaMemcpyHostToDevice));
  }
#endif
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
    std::printf("clutter_filter (svd k=20, full) + doppler: %.3f ms (issue 24: SVD filter <= 2 ms, chain <= 5 ms with the "
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

// The chain cases' clutter filter (the SVD at a fixed tissue rank) and Doppler (a box of R(1)).
ClutterFilterParams chain_clutter_params(std::int64_t tissue_rank, ClutterFilterParams::Eigensolver eigensolver,
                                         bool warm_start = true) {
  ClutterFilterParams params;
  params.tissue_rank = tissue_rank;
  params.eigensolver = eigensolver;
  params.warm_start = warm_start;
  return params;
}

// A stream of related channel ensembles for the Jacobi route's warm start (its sweeps depend on the
// data; the other stages' work does not): ensemble e, frame f, sample x (element, time) =
//   tissue   100 (cos a_e T0(x) + sin a_e T1(x)) exp(i 0.01 f), a_e = 0.05 e: a pattern that drifts
//   blood    sum over 4 components 3 B_ej(x) exp(i w_j f), w_j = 0.4 + 0.5 j rad a frame: fresh
//            speckle each ensemble, the same Doppler shifts
//   noise    standard normal, fresh each ensemble
// Beamforming is linear, so the Casorati matrix is tissue (rank ~1, 40 dB over blood) + blood
// (rank 4) + white noise, its temporal eigenvectors near those of the ensemble before except in the
// noise's subspace (random each time). `count` ensembles, each [frame, element, sample] x (re, im).
std::vector<std::vector<float>> drifting_ensembles(const EnsembleWorkload& w, int count) {
  const std::size_t per_frame = static_cast<std::size_t>(w.elements) * w.samples;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto pattern = [&] {
    std::vector<std::complex<float>> p(per_frame);
    for (auto& v : p) v = {normal(rng), normal(rng)};
    return p;
  };
  const auto t0 = pattern(), t1 = pattern();
  std::vector<std::vector<float>> out;
  for (int e = 0; e < count; ++e) {
    std::vector<std::vector<std::complex<float>>> blood;
    for (int j = 0; j < 4; ++j) blood.push_back(pattern());
    const float a = 0.05f * e;
    std::vector<float> data(static_cast<std::size_t>(w.frames) * per_frame * 2);
    for (int f = 0; f < w.frames; ++f) {
      const std::complex<float> tissue_phase = 100.0f * std::polar(1.0f, 0.01f * f);
      std::complex<float> blood_phase[4];
      for (int j = 0; j < 4; ++j) blood_phase[j] = 3.0f * std::polar(1.0f, (0.4f + 0.5f * j) * f);
      for (std::size_t x = 0; x < per_frame; ++x) {
        std::complex<float> v = tissue_phase * (std::cos(a) * t0[x] + std::sin(a) * t1[x]);
        for (int j = 0; j < 4; ++j) v += blood_phase[j] * blood[j][x];
        v += std::complex<float>(normal(rng), normal(rng));
        data[2 * (f * per_frame + x)] = v.real();
        data[2 * (f * per_frame + x) + 1] = v.imag();
      }
    }
    out.push_back(std::move(data));
  }
  return out;
}

DopplerParams chain_doppler_params(std::int64_t box) {
  DopplerParams params;
  params.average_lateral = box;
  params.average_axial = box;
  return params;
}

// The real recording of the pwi_disk workload: PyMUST's rotating disk (tests/data/pymust-pwi-disk,
// 32 frames of 128 elements, channel RF demodulated by the MUST reader) as one ensemble [frame,
// transmit, element, sample]; none when the file is not there (a source copy without tests/data).
// The source tree: SONOPIPE_SOURCE_DIR, else the working directory.
std::optional<BenchFrame> disk_recording() {
  const char* root = std::getenv("SONOPIPE_SOURCE_DIR");
  const std::string path = std::string(root ? root : ".") + "/tests/data/pymust-pwi-disk/PWI_disk.mat";
  if (!std::filesystem::exists(path)) return std::nullopt;
  formats::ImportOptions options;
  options.ensemble = static_cast<std::size_t>(kPwiDisk.frames);
  auto reader = formats::open_must(path, options);
  const recording::Frame f = reader->read_frame(0);
  BenchFrame frame{f.meta, std::vector<float>(f.payload.size() / sizeof(float)), {}, kPwiDisk.frames};
  std::memcpy(frame.data.data(), f.payload.data(), frame.data.size() * sizeof(float));
  for (int e = 0; e < kPwiDisk.elements; ++e)  // the beamformer's work count only
    frame.element_x_m.push_back((e - (kPwiDisk.elements - 1) / 2.0) * kPwiDisk.pitch_m);
  return frame;
}

// beamform (ensemble kernel) -> clutter_filter -> doppler on one device-resident channel ensemble,
// configured as DeviceLane::configure() does (the frame's meta for every stage, each input the
// previous stage's first output) and run through the stages' run_cuda on one stream; CUDA events
// between the stages. Median of `repeats` per stage and end to end.
// `stream` (drifting_ensembles, copied to the device beforehand): repeat r takes ensemble r of a
// walk back and forth over them, so consecutive frames are always neighbours; else the fixed random
// ensemble every repeat. `recorded` (disk_recording()): that ensemble instead of the random one, on
// the workload's grid.
void run_chain(const EnsembleWorkload& w, std::int64_t tissue_rank, std::int64_t box, double goal_ms,
               const DeviceCeilings& ceilings, int repeats, ClutterFilterParams::Eigensolver eigensolver,
               const std::vector<std::vector<float>>* stream_data = nullptr, bool warm_start = true,
               const BenchFrame* recorded = nullptr) {
  const BenchFrame frame = recorded ? *recorded : ensemble_frame(w, false);
  const BeamformParams bp = ensemble_beamform_params(w);
  BeamformStage beamform(bp);
  const ClutterFilterParams cp = chain_clutter_params(tissue_rank, eigensolver, warm_start);
  ClutterFilterStage clutter(cp);
  DopplerStage doppler(chain_doppler_params(box));
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
  std::vector<void*> device_inputs;
  const std::size_t input_bytes = frame.meta.payload.byte_size();
  for (std::size_t i = 0; i < (stream_data ? stream_data->size() : 1); ++i) {
    void* p = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(&p, input_bytes));
    const std::vector<float>& data = stream_data ? (*stream_data)[i] : frame.data;
    if (data.size() * sizeof(float) != input_bytes) throw std::runtime_error("doppler chain: ensemble size");
    SONOPIPE_CUDA_CHECK(cudaMemcpy(p, data.data(), input_bytes, cudaMemcpyHostToDevice));
    device_inputs.push_back(p);
  }
  const int walk = static_cast<int>(device_inputs.size());
  auto input_of = [&](int r) {  // 0, 1, .., walk - 1, walk - 2, .., 1, 0, 1, ..
    if (walk == 1) return device_inputs[0];
    const int period = 2 * (walk - 1), i = r % period;
    return device_inputs[static_cast<std::size_t>(i < walk ? i : period - i)];
  };
  cudaStream_t stream;
  SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
  std::vector<cudaEvent_t> events(chain.size() + 1);
  for (cudaEvent_t& e : events) SONOPIPE_CUDA_CHECK(cudaEventCreate(&e));
  std::vector<std::vector<float>> stage_ms(chain.size());
  std::vector<float> total_ms;
  for (int r = 0; r < repeats + 3; ++r) {  // three warm-ups
    const void* in = input_of(r);
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
  std::string route = eigensolver == ClutterFilterParams::Eigensolver::automatic
                          ? std::string("auto/") + route_name(clutter)
                          : std::string(route_name(clutter));
  const EigenRoute::Kind kind = clutter.cuda_eigen_route().kind;
  if (kind == EigenRoute::Kind::jacobi || kind == EigenRoute::Kind::dominant) route += warm_start ? "/warm" : "/cold";
  const JacobiStats jacobi = clutter.jacobi_stats();
  const DominantStats dominant = clutter.dominant_stats();
  const double solves = dominant.solves > 0 ? double(dominant.solves) : 1.0;
  std::printf("%-10s %-18s %10.3f %10.3f %10.3f %10.3f %8.2f %8.1f %8.1f %9.3f %9.3f %7.2f %s (subspace tries %.2f, "
              "fallbacks %.2f; %s; jacobi solves %lld, warm %lld, sweeps a solve %.2f; dominant solves %lld, "
              "fallbacks %lld, a solve: squarings %.2f, iterations %.2f, bound squarings %.2f)\n",
              recorded ? "disk_real" : w.name, route.c_str(), median(stage_ms[0]), median(stage_ms[1]),
              median(stage_ms[2]), total, gflop, staged_mb, in_mb + images_mb, floor_of(staged_mb),
              floor_of(in_mb + images_mb), goal_ms, total <= goal_ms ? "met" : "not met",
              double(clutter.subspace_attempts()) / (repeats + 3), double(clutter.subspace_fallbacks()) / (repeats + 3),
              recorded ? "the PyMUST disk recording" : (stream_data ? "drifting ensembles" : "one random ensemble"),
              static_cast<long long>(jacobi.solves), static_cast<long long>(jacobi.warm),
              jacobi.solves ? double(jacobi.sweeps) / jacobi.solves : 0.0, static_cast<long long>(dominant.solves),
              static_cast<long long>(dominant.fallbacks), double(dominant.squarings) / solves,
              double(dominant.iterations) / solves, double(dominant.bound_squarings) / solves);
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  cudaStreamDestroy(stream);
  for (void* p : device_inputs) cudaFree(p);
}

// The chain as the daemon's DeviceLane runs it (runtime/device_lane.cpp): `slots` streams used
// round-robin, each frame's channel data copied from pinned host memory first, the stages' run_cuda
// enqueued back to back (a slot is reused once its previous frame is done), one shared instance of
// each stage; per stage the GPU span between CUDA events (what the daemon reports as compute) and
// the host's enqueue time, and the frame rate.
void run_chain_slots(const EnsembleWorkload& w, std::int64_t tissue_rank, std::int64_t box, int repeats, int slots,
                     ClutterFilterParams::Eigensolver eigensolver) {
  const BenchFrame frame = ensemble_frame(w, false);
  BeamformStage beamform(ensemble_beamform_params(w));
  const ClutterFilterParams cp = chain_clutter_params(tissue_rank, eigensolver);
  ClutterFilterStage clutter(cp);
  DopplerStage doppler(chain_doppler_params(box));
  Stage* stages[] = {&beamform, &clutter, &doppler};
  constexpr int kStages = 3;
  std::vector<TensorSpec> inputs;
  std::vector<StagePlan> plans;
  TensorSpec input = frame.meta.payload;
  for (Stage* stage : stages) {
    inputs.push_back(input);
    plans.push_back(stage->configure(frame.meta, input, Backend::cuda));
    input = plans.back().outputs[0].spec;
  }
  struct Slot {
    cudaStream_t stream;
    void* input = nullptr;
    std::vector<std::vector<void*>> outputs;
    std::vector<void*> workspace, staging;
    cudaEvent_t start, after_h2d, after[kStages];
    bool busy = false;
    double enqueue_ms[kStages] = {};
  };
  const std::size_t in_bytes = frame.meta.payload.byte_size();
  void* pinned = nullptr;
  SONOPIPE_CUDA_CHECK(cudaMallocHost(&pinned, in_bytes));
  std::memcpy(pinned, frame.data.data(), in_bytes);
  std::vector<Slot> ring(static_cast<std::size_t>(slots));
  for (Slot& slot : ring) {
    SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&slot.stream, cudaStreamNonBlocking));
    SONOPIPE_CUDA_CHECK(cudaMalloc(&slot.input, in_bytes));
    for (int i = 0; i < kStages; ++i) {
      std::vector<void*> outs;
      for (const StageOutput& o : plans[i].outputs) {
        void* q = nullptr;
        SONOPIPE_CUDA_CHECK(cudaMalloc(&q, o.spec.byte_size()));
        outs.push_back(q);
      }
      slot.outputs.push_back(outs);
      void *work = nullptr, *stage_staging = nullptr;
      if (plans[i].workspace_bytes) SONOPIPE_CUDA_CHECK(cudaMalloc(&work, plans[i].workspace_bytes));
      if (plans[i].host_staging_bytes) SONOPIPE_CUDA_CHECK(cudaMallocHost(&stage_staging, plans[i].host_staging_bytes));
      slot.workspace.push_back(work);
      slot.staging.push_back(stage_staging);
      SONOPIPE_CUDA_CHECK(cudaEventCreate(&slot.after[i]));
    }
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&slot.start));
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&slot.after_h2d));
  }
  std::vector<std::vector<double>> span(kStages), enqueue(kStages);
  const int frames = repeats * slots + 3 * slots;
  auto collect = [&](Slot& slot, bool keep) {
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(slot.after[kStages - 1]));
    if (keep) {
      cudaEvent_t previous = slot.after_h2d;
      for (int i = 0; i < kStages; ++i) {
        float ms = 0;
        SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, previous, slot.after[i]));
        span[i].push_back(ms);
        enqueue[i].push_back(slot.enqueue_ms[i]);
        previous = slot.after[i];
      }
    }
    slot.busy = false;
  };
  const auto begin = std::chrono::steady_clock::now();
  auto timed_from = begin;
  for (int f = 0; f < frames; ++f) {
    Slot& slot = ring[static_cast<std::size_t>(f % slots)];
    if (slot.busy) collect(slot, f >= 4 * slots);
    if (f == 3 * slots) timed_from = std::chrono::steady_clock::now();
    SONOPIPE_CUDA_CHECK(cudaEventRecord(slot.start, slot.stream));
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(slot.input, pinned, in_bytes, cudaMemcpyHostToDevice, slot.stream));
    SONOPIPE_CUDA_CHECK(cudaEventRecord(slot.after_h2d, slot.stream));
    const void* in = slot.input;
    for (int i = 0; i < kStages; ++i) {
      const StageIo io{.frame = frame.meta, .input_spec = inputs[i], .input = in, .outputs = slot.outputs[i],
                       .workspace = slot.workspace[i], .host_staging = slot.staging[i], .stream = slot.stream};
      const auto before = std::chrono::steady_clock::now();
      if (!stages[i]->run_cuda(io)) throw std::runtime_error("doppler chain: a stage produced no output");
      slot.enqueue_ms[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before).count();
      SONOPIPE_CUDA_CHECK(cudaEventRecord(slot.after[i], slot.stream));
      in = slot.outputs[i][0];
    }
    slot.busy = true;
  }
  for (Slot& slot : ring)
    if (slot.busy) collect(slot, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - timed_from).count();
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? -1.0 : v[v.size() / 2];
  };
  std::printf("%-10s %-8s %d slots: GPU span beamform %.3f, clutter %.3f, doppler %.3f ms; host enqueue %.3f, %.3f, "
              "%.3f ms; %.1f frames/s (H2D of %.1f MB each)\n",
              w.name, eigensolver == ClutterFilterParams::Eigensolver::automatic ? "auto" : route_name(clutter), slots,
              median(span[0]), median(span[1]), median(span[2]), median(enqueue[0]),
              median(enqueue[1]), median(enqueue[2]), (frames - 3 * slots) / seconds, in_bytes * 1e-6);
  for (Slot& slot : ring) {
    cudaStreamDestroy(slot.stream);
    cudaFree(slot.input);
    for (auto& outs : slot.outputs)
      for (void* q : outs) cudaFree(q);
    for (void* q : slot.workspace) cudaFree(q);
    for (void* q : slot.staging) cudaFreeHost(q);
    for (cudaEvent_t e : slot.after) cudaEventDestroy(e);
    cudaEventDestroy(slot.start);
    cudaEventDestroy(slot.after_h2d);
  }
  cudaFreeHost(pinned);
}

// The subspace route's convergence on the flow phantom (tools/sim/flow_sim.h, 20 dB SNR): the
// fraction of fresh phantoms (seeds) that fell back, and the time, per block and iteration count.
void run_small_kernel_cases() {
  {
    // The small kernels alone (small_eigen.cuh), median of 50 CUDA-event timings: Jacobi on random
    // Hermitian matrices (n = 16, 32; batch 1 and 49), Cholesky QR of n x b blocks.
    std::mt19937_64 rng(5);
    std::normal_distribution<double> normal(0, 1);
    const int batch_max = 49, n_max = 200, b_max = 32;
    std::vector<double2> host(static_cast<std::size_t>(n_max) * n_max * batch_max);
    for (auto& x : host) x = make_double2(normal(rng), normal(rng));
    double2 *matrices = nullptr, *scratch = nullptr;
    double* values = nullptr;
    int* flags = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(&matrices, host.size() * sizeof(double2)));
    SONOPIPE_CUDA_CHECK(cudaMalloc(&scratch, host.size() * sizeof(double2)));
    SONOPIPE_CUDA_CHECK(cudaMalloc(&values, n_max * batch_max * sizeof(double)));
    SONOPIPE_CUDA_CHECK(cudaMalloc(&flags, batch_max * sizeof(int)));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(matrices, host.data(), host.size() * sizeof(double2), cudaMemcpyHostToDevice));
    cudaEvent_t start, stop;
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&start));
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&stop));
    auto time_it = [&](auto&& launch) {
      std::vector<float> times;
      for (int r = 0; r < 53; ++r) {
        SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(scratch, matrices, host.size() * sizeof(double2), cudaMemcpyDeviceToDevice));
        SONOPIPE_CUDA_CHECK(cudaEventRecord(start));
        launch();
        SONOPIPE_CUDA_CHECK(cudaEventRecord(stop));
        SONOPIPE_CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (r >= 3) times.push_back(ms);
      }
      std::sort(times.begin(), times.end());
      return times[times.size() / 2] * 1e3;
    };
    std::printf("small kernels (us):");
    for (const auto variant : {cuda::JacobiVariant::mixed, cuda::JacobiVariant::mixed_phased,
                               cuda::JacobiVariant::circle, cuda::JacobiVariant::fused,
                               cuda::JacobiVariant::two_phase})
      for (int n : {16, 32})
        for (int batch : {1, batch_max}) {
          const double us = time_it([&] {
            cuda::hermitian_jacobi_batched(scratch, n, n, std::int64_t(n) * n, batch, values, scratch, n,
                                           std::int64_t(n) * n, nullptr, variant);
          });
          std::printf(" jacobi %s n %d batch %d: %.1f;", cuda::jacobi_variant_name(variant), n, batch, us);
        }
    std::printf("\n");
    // The mixed kernel's sweeps and time (n = 32, batch 1) on matrices like the pwi_disk chain's Gram:
    // random IQ (S^H S of 4,096 x 32 unit noise: nearly a multiple of I), one clutter component 40 dB
    // over it, the Gaussian Hermitian above, and a diagonal matrix (no sweep: the launch, load and
    // store alone).
    {
      const int n = 32, pixels = 4096;
      std::vector<std::vector<double2>> grams;
      for (double clutter : {0.0, 100.0}) {
        std::vector<std::complex<double>> x(static_cast<std::size_t>(pixels) * n), a(pixels), b(n);
        for (auto& v : x) v = {normal(rng), normal(rng)};
        for (auto& v : a) v = {normal(rng), normal(rng)};
        for (auto& v : b) v = std::polar(1.0, 0.3 * double(&v - b.data()));  // a slow phase ramp
        for (int f = 0; f < n; ++f)
          for (int p = 0; p < pixels; ++p) x[f * std::size_t(pixels) + p] += clutter * a[p] * b[f];
        std::vector<double2> g(static_cast<std::size_t>(n) * n);
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) {
            std::complex<double> sum = 0;
            for (int p = 0; p < pixels; ++p) sum += std::conj(x[i * std::size_t(pixels) + p]) * x[j * std::size_t(pixels) + p];
            g[i + j * std::size_t(n)] = make_double2(sum.real(), sum.imag());
          }
        grams.push_back(std::move(g));
      }
      grams.emplace_back(host.begin(), host.begin() + n * n);
      std::vector<double2> diagonal(static_cast<std::size_t>(n) * n, make_double2(0, 0));
      for (int i = 0; i < n; ++i) diagonal[i + i * std::size_t(n)] = make_double2(1.0 + i, 0);
      grams.push_back(diagonal);
      const char* names[] = {"gram of noise", "gram, clutter 40 dB", "gaussian", "diagonal"};
      int* sweeps = flags;
      std::printf("jacobi n 32 (us, sweeps):");
      for (std::size_t g = 0; g < grams.size(); ++g) {
        SONOPIPE_CUDA_CHECK(cudaMemcpy(matrices, grams[g].data(), grams[g].size() * sizeof(double2),
                                       cudaMemcpyHostToDevice));
        for (const auto variant :
             {cuda::JacobiVariant::mixed, cuda::JacobiVariant::mixed_phased, cuda::JacobiVariant::circle,
              cuda::JacobiVariant::fused}) {
          const double us = time_it([&] {
            cuda::hermitian_jacobi_batched(scratch, n, n, std::int64_t(n) * n, 1, values, scratch, n,
                                           std::int64_t(n) * n, nullptr, variant, sweeps);
          });
          int done = -1;
          if (variant != cuda::JacobiVariant::fused)
            SONOPIPE_CUDA_CHECK(cudaMemcpy(&done, sweeps, sizeof(int), cudaMemcpyDeviceToHost));
          std::printf(" %s %s %.1f (%d);", names[g], cuda::jacobi_variant_name(variant), us, done);
        }
      }
      std::printf("\n");
      // The warm start's fixed cost (guard, V0^H A V0, V0 copied): circle from V0 = the matrix's own
      // eigenvectors (each call stores them again), the sweeps left to rounding.
      double2* previous = nullptr;
      SONOPIPE_CUDA_CHECK(cudaMalloc(&previous, static_cast<std::size_t>(n) * n * sizeof(double2)));
      std::printf("jacobi n 32 circle warm from its own eigenvectors (us, sweeps):");
      for (std::size_t g = 0; g < grams.size(); ++g) {
        SONOPIPE_CUDA_CHECK(cudaMemcpy(matrices, grams[g].data(), grams[g].size() * sizeof(double2),
                                       cudaMemcpyHostToDevice));
        SONOPIPE_CUDA_CHECK(cudaMemset(previous, 0, static_cast<std::size_t>(n) * n * sizeof(double2)));
        auto warm = [&] {
          cuda::hermitian_jacobi_batched(scratch, n, n, std::int64_t(n) * n, 1, values, scratch, n,
                                         std::int64_t(n) * n, nullptr, cuda::JacobiVariant::circle, sweeps, previous);
        };
        SONOPIPE_CUDA_CHECK(cudaMemcpy(scratch, matrices, grams[g].size() * sizeof(double2), cudaMemcpyDeviceToDevice));
        warm();  // cold (V0 zero): stores the eigenvectors
        const double us = time_it(warm);
        int done = -1;
        SONOPIPE_CUDA_CHECK(cudaMemcpy(&done, sweeps, sizeof(int), cudaMemcpyDeviceToHost));
        std::printf(" %s %.1f (%d);", names[g], us, done);
      }
      std::printf("\n");
      // The dominant route (k = 1 and 4, cold) on the same matrices: time, outcome, work a solve, and
      // its floor at one SM's FP64 rate (one thread block a matrix): each squaring of the padded 32 x
      // 32 matrix is 32^3 complex multiply-adds (8 flops each), an iteration 8 n^2 k (M X) plus the
      // Gram-Schmidt's 16 n k^2, the Rayleigh-Ritz and B = P G P ~8 n^2 k (+ 16 n^2 k).
      unsigned long long* stats = nullptr;
      SONOPIPE_CUDA_CHECK(cudaMalloc(&stats, 5 * sizeof(unsigned long long)));
      int sm_clock_khz = 0, device = 0;
      SONOPIPE_CUDA_CHECK(cudaGetDevice(&device));
      SONOPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, device));
      const double sm_fp64_gflops = 128.0 * sm_clock_khz * 1e-6;  // 64 FP64 FMAs a clock an SM (H100)
      std::printf("dominant n 32, cold (us, converged, squarings + bound squarings, iterations, floor us at one SM's "
                  "FP64 %.0f GFLOP/s):", sm_fp64_gflops);
      for (const auto variant : {cuda::DominantVariant::sequential, cuda::DominantVariant::overlapped})
      for (std::size_t g = 0; g < grams.size(); ++g)
        for (int k : {1, 4}) {
          SONOPIPE_CUDA_CHECK(cudaMemcpy(matrices, grams[g].data(), grams[g].size() * sizeof(double2),
                                         cudaMemcpyHostToDevice));
          SONOPIPE_CUDA_CHECK(cudaMemset(stats, 0, 5 * sizeof(unsigned long long)));
          const double us = time_it([&] {
            cuda::hermitian_dominant_batched(scratch, n, n, std::int64_t(n) * n, 1, k, 1e-6, values, scratch, n,
                                             std::int64_t(n) * n, flags, nullptr, nullptr, stats, nullptr, variant);
          });
          unsigned long long c[5] = {};
          int converged = -1;
          SONOPIPE_CUDA_CHECK(cudaMemcpy(c, stats, sizeof(c), cudaMemcpyDeviceToHost));
          SONOPIPE_CUDA_CHECK(cudaMemcpy(&converged, flags, sizeof(int), cudaMemcpyDeviceToHost));
          const double solves = double(c[0]), squarings = (c[2] + c[4]) / solves, iterations = (c[3] + 1) / solves;
          const double flops = squarings * 8.0 * 32 * 32 * 32 + iterations * (8.0 * n * n * k + 16.0 * n * k * k) +
                               24.0 * n * n * k;
          std::printf(" %s %s k %d: %.1f (%d, %.1f + %.1f, %.1f, %.1f);", cuda::dominant_variant_name(variant),
                      names[g], k, us, converged, c[2] / solves, c[4] / solves, iterations,
                      flops / (sm_fp64_gflops * 1e3));
        }
      std::printf("\n");
      cudaFree(stats);
      cudaFree(previous);
      SONOPIPE_CUDA_CHECK(cudaMemcpy(matrices, host.data(), host.size() * sizeof(double2), cudaMemcpyHostToDevice));
    }
    for (int n : {64, 128, 200})
      for (int b : {16, 32}) {
        const double us =
            time_it([&] { cuda::orthonormalize_columns_batched(scratch, n, b, std::int64_t(n) * b, 1, flags, nullptr); });
        std::printf(" cholesky_qr %d x %d: %.1f;", n, b, us);
      }
    (void)b_max;
    std::printf("\n");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(matrices);
    cudaFree(scratch);
    cudaFree(values);
    cudaFree(flags);
  }
}

void run_subspace_cases(int repeats) {
  ThreadPool pool(std::max(2u, std::thread::hardware_concurrency()));
  for (std::int64_t frames : {64, 128}) {
    std::vector<sim::FlowIqResult> phantoms;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      sim::FlowSimConfig config;
      config.seed = seed;
      config.snr_db = 20;
      config.frames = frames;
      phantoms.push_back(sim::simulate_flow_iq(config, &pool));
    }
    const FrameMeta& meta = phantoms[0].meta;
    void* device_input = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(&device_input, meta.payload.byte_size()));
    std::printf("flow phantom %s, 3 seeds:\n", meta.payload.shape_string().c_str());
    for (std::int64_t tissue : {2, 4, 8}) {
      ClutterFilterParams p;
      p.tissue_rank = tissue;
      p.eigensolver = ClutterFilterParams::Eigensolver::full;
      double full_ms = 0;
      for (const auto& phantom : phantoms) {
        SONOPIPE_CUDA_CHECK(cudaMemcpy(device_input, phantom.iq.data(), meta.payload.byte_size(), cudaMemcpyHostToDevice));
        ClutterFilterStage stage(p);
        full_ms = std::max(full_ms, time_stage(stage, meta, device_input, repeats));
      }
      std::printf("  k = %lld: full %.3f ms;", static_cast<long long>(tissue), full_ms);
      p.eigensolver = ClutterFilterParams::Eigensolver::subspace;
      for (int extra : {4, 12})
        for (int iterations : {1, 2, 4, 6}) {
          p.subspace_block = std::min<std::int64_t>(32, tissue + extra);
          p.subspace_iterations = iterations;
          double ms = 0, fallbacks = 0;
          for (const auto& phantom : phantoms) {
            SONOPIPE_CUDA_CHECK(
                cudaMemcpy(device_input, phantom.iq.data(), meta.payload.byte_size(), cudaMemcpyHostToDevice));
            ClutterFilterStage stage(p);
            ms = std::max(ms, time_stage(stage, meta, device_input, repeats));
            fallbacks += stage.subspace_fallbacks() > 0 ? 1 : 0;
          }
          std::printf(" b%lld/q%d %.3f ms %g/3%s", static_cast<long long>(p.subspace_block), iterations, ms, fallbacks,
                      iterations == 6 ? "\n           " : ";");
        }
      std::printf("\n");
    }
    cudaFree(device_input);
  }
}
#endif

#ifdef SONOPIPE_WITH_CUDA
// eigensolver auto against full and subspace, frame after frame on one configured stage (the
// retry state carries over): fUS 65,536 x 200 at k = 20 with a gap at k and without (the bench's
// rank-8 ensemble: k inside the noise), and the flow phantom (128 frames, 64 x 128, 20 dB SNR; k = 2:
// converges, k = 4: no gap). Mean and median per frame, subspace attempts and fallbacks.
void run_auto_cases(const DopplerBenchOptions& o, const DeviceCeilings& ceilings) {
  std::printf("\nauto's route frame after frame (%d frames after 3 warm-ups, one configured stage)\n", o.repeats);
  std::printf("%-40s %-9s %9s %9s %9s %9s %9s %7s\n", "data", "asked", "route", "mean ms", "median ms", "attempts",
              "fallback", "floor");
  struct Data {
    std::string name;
    FrameMeta meta;
    std::vector<std::complex<float>> iq;
    std::int64_t tissue;
  };
  std::vector<Data> data;
  {
    Data flat{"fUS 65,536 x 200, k = 20, flat (rank 8)", {}, {}, 20};
    flat.meta = ensemble(o, flat.iq);
    data.push_back(std::move(flat));
    Data gapped{"fUS 65,536 x 200, k = 20, gap at k", {}, {}, 20};
    gapped.meta = ensemble(o, gapped.iq, true);
    data.push_back(std::move(gapped));
    ThreadPool pool(std::max(2u, std::thread::hardware_concurrency()));
    sim::FlowSimConfig config;
    config.seed = 1;
    config.snr_db = 20;
    config.frames = 128;
    sim::FlowIqResult phantom = sim::simulate_flow_iq(config, &pool);
    for (std::int64_t k : {2, 4})
      data.push_back({"flow phantom 8,192 x 128, k = " + std::to_string(k), phantom.meta, phantom.iq, k});
  }
  for (const Data& d : data) {
    void* device_input = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(&device_input, d.meta.payload.byte_size()));
    SONOPIPE_CUDA_CHECK(cudaMemcpy(device_input, d.iq.data(), d.meta.payload.byte_size(), cudaMemcpyHostToDevice));
    const double pixels = double(d.meta.payload.axes[1].size * d.meta.payload.axes[2].size);
    const double frames = double(d.meta.payload.axes[0].size);
    for (const auto& [eigensolver, asked] : {std::pair{ClutterFilterParams::Eigensolver::full, "full"},
                                             std::pair{ClutterFilterParams::Eigensolver::subspace, "subspace"},
                                             std::pair{ClutterFilterParams::Eigensolver::automatic, "auto"}}) {
      ClutterFilterParams p;
      p.tissue_rank = d.tissue;
      p.eigensolver = eigensolver;
      ClutterFilterStage stage(p);
      double mean = 0;
      const double median = time_stage(stage, d.meta, device_input, o.repeats, &mean);
      const double floor_ms = count(p, pixels, frames, 1.0).floor_ms(ceilings);
      std::printf("%-40s %-9s %9s %9.3f %9.3f %9lld %9lld %7.3f\n", d.name.c_str(), asked, route_name(stage), mean,
                  median, static_cast<long long>(stage.subspace_attempts()),
                  static_cast<long long>(stage.subspace_fallbacks()), floor_ms);
    }
    cudaFree(device_input);
  }
}
#endif

void run_chain_cases(const DopplerBenchOptions& o, const DeviceCeilings& ceilings) {
  std::printf("\nchain beamform (ensemble) -> clutter_filter svd -> doppler, device-resident channel IQ, the stages' "
              "run_cuda on one stream (median of %d)\n", o.repeats);
  std::printf("%-10s %-18s %10s %10s %10s %10s %8s %8s %8s %9s %9s %7s\n", "workload", "route", "beamform", "clutter",
              "doppler", "chain ms", "GFLOP", "MB stage", "MB one", "floor st", "floor one", "goal");
#ifdef SONOPIPE_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    // pwi_disk: config/doppler.yaml's filter (tissue rank 1, R1 over 5 x 5); goal: faster than mach's
    // beamforming alone (0.328 ms). fus: tissue rank 20, 3 x 3; goal 5 ms (issue 24).
    const auto full = ClutterFilterParams::Eigensolver::full, automatic = ClutterFilterParams::Eigensolver::automatic;
    const auto jacobi = ClutterFilterParams::Eigensolver::jacobi, subspace = ClutterFilterParams::Eigensolver::subspace;
    const auto dominant = ClutterFilterParams::Eigensolver::dominant;
    // A stream of related ensembles (the warm start's sweeps depend on the data): 8, walked back
    // and forth; cold (warm_start false) and warm alternating, twice. auto is the dominant route
    // here (tissue rank 1); jacobi is asked for (with the small Gram and rank-update kernels).
    const auto ensembles = drifting_ensembles(kPwiDisk, 8);
    for (int round = 0; round < 2; ++round) {
      run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, full, &ensembles);
      run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, automatic, &ensembles, false);
      run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, automatic, &ensembles, true);
      run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, jacobi, &ensembles, false);
      run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, jacobi, &ensembles, true);
    }
    run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, automatic, nullptr, false);  // the random ensemble (before)
    run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, automatic, nullptr, true);   // warm on itself: a floor
    // The real workload: the PyMUST disk recording beamformed by our beamformer on the pwi_disk grid
    // (its Gram spectrum has no clear gap at rank 1: 1, 0.985, 0.887, ..).
    if (const std::optional<BenchFrame> disk = disk_recording()) {
      for (int round = 0; round < 2; ++round) {
        run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, full, nullptr, true, &*disk);
        run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, dominant, nullptr, false, &*disk);
        run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, dominant, nullptr, true, &*disk);
        run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, jacobi, nullptr, false, &*disk);
        run_chain(kPwiDisk, 1, 5, 0.33, ceilings, o.repeats, jacobi, nullptr, true, &*disk);
      }
      run_chain(kPwiDisk, 4, 5, 0.33, ceilings, o.repeats, dominant, nullptr, true, &*disk);  // rank 4
    } else {
      std::printf("disk_real: tests/data/pymust-pwi-disk/PWI_disk.mat not found (SONOPIPE_SOURCE_DIR)\n");
    }
    run_chain(kFus, 20, 3, 5.0, ceilings, o.repeats, full);
    run_chain(kFus, 20, 3, 5.0, ceilings, o.repeats, subspace);
    run_chain(kFus, 20, 3, 5.0, ceilings, o.repeats, automatic);  // subspace with retry (random data: falls back)
    return;
  }
#endif
  (void)ceilings;
  std::printf("chain: no CUDA device\n");
}

void run_doppler_bench(const DopplerBenchOptions& o) {
  for (const std::string& name : o.cases)
    if (name != "stages" && name != "routes" && name != "routes32" && name != "chain" && name != "subspace" &&
        name != "slots" && name != "kernels" && name != "auto")
      throw std::runtime_error("doppler bench: no case '" + name +
                               "' (stages, routes, routes32, chain, subspace, slots, kernels, auto)");
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
  if (std::find(o.cases.begin(), o.cases.end(), "routes32") != o.cases.end()) {  // asked for by name only
#ifdef SONOPIPE_WITH_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0)
      run_svd_routes({designed("pwi_disk (251 x 251 pixels, 32 frames)", 251 * 251, 32, 4)}, o.repeats);
    else
#endif
      std::printf("routes32: no CUDA device\n");
  }
  if (wanted(o, "stages")) run_stage_cases(o, ceilings);
  if (wanted(o, "chain")) run_chain_cases(o, ceilings);
#ifdef SONOPIPE_WITH_CUDA
  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (gpu && wanted(o, "slots")) {
    std::printf("\nthe chain as the daemon's lane runs it (slots round-robin, H2D first, median of %d per slot)\n",
                o.repeats);
    const auto full = ClutterFilterParams::Eigensolver::full, automatic = ClutterFilterParams::Eigensolver::automatic;
    for (int slots : {1, 3}) {
      run_chain_slots(kPwiDisk, 1, 5, o.repeats, slots, full);
      run_chain_slots(kPwiDisk, 1, 5, o.repeats, slots, automatic);
    }
  }
  if (gpu && wanted(o, "subspace")) {
    std::printf("\nsubspace route on the flow phantom (block b = k + 4, 8, 12 up to 32; q iterations; max of 3 seeds' "
                "medians; fallbacks = seeds that fell back)\n");
    run_subspace_cases(std::max(5, o.repeats / 4));
  }
  if (gpu && wanted(o, "kernels")) run_small_kernel_cases();
  if (gpu && wanted(o, "auto")) run_auto_cases(o, ceilings);
#endif
}

}  // namespace

void add_doppler_bench(CLI::App& app) {
  auto options = std::make_shared<DopplerBenchOptions>();
  CLI::App* command = app.add_subcommand("doppler", "clutter_filter and doppler at fUS scale (65,536 x 200 Casorati)");
  command->add_option("--case", options->cases,
                      "cases (repeatable; default all): stages (the stages at fUS scale), routes (the SVD filter's "
                      "library routes, fUS and pwi_disk shapes; routes32: the pwi_disk shape only, by name), chain (beamform + clutter_filter + doppler), "
                      "slots (the pwi_disk chain as the daemon's lane runs it), subspace (the subspace route's "
                      "block and iterations on the flow phantom), kernels (small_eigen.cuh's kernels alone), auto (eigensolver auto "
                      "frame after frame against full and subspace, fUS and the flow phantom)");
  command->add_option("--repeats", options->repeats, "GPU repetitions (median)")->capture_default_str();
  command->add_option("--frames", options->frames, "ensemble length")->capture_default_str();
  command->add_option("--lateral", options->lateral, "pixels")->capture_default_str();
  command->add_option("--axial", options->axial, "pixels")->capture_default_str();
  command->add_option("--peak-tflops", options->peak_tflops, "FP32 ceiling for the floor (0: from the device)");
  command->add_option("--peak-gb-s", options->peak_gb_per_s, "memory ceiling for the floor (0: measured copy)");
  command->callback([options] { run_doppler_bench(*options); });
}

}  // namespace sonopipe::bench
