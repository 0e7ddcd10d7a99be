// Stage `perfusion_fit` (stages/perfusion/perfusion_fit/perfusion_fit.h): input checks, the CPU run against the fit
// library, NaN voxels, and [cuda] the CUDA run against the CPU run.
#include "stages/perfusion/perfusion_fit/perfusion_fit.h"

#include <cmath>
#include <random>

#include "sdk/thread_pool.h"
#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"
#include "tests/support/test_support.h"
#include "tools/sim/perfusion_sim.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#endif

using namespace sonopipe;
using namespace sonopipe::perfusion;

namespace {

// A DCE batch of `voxels` noisy simulated curves with its side vectors.
struct Batch {
  FrameMeta frame;
  std::vector<double> tissue;
};

Batch make_batch(std::size_t voxels, int samples, std::uint64_t seed) {
  sim::PerfusionSimSettings s;
  s.samples = samples;
  s.cnr_tissue = 30;
  sim::Rng rng(seed);
  std::vector<double> truths;
  auto sim = sim::simulate_varied(s, voxels, 0.2, rng, truths);
  Batch b;
  b.frame.kind = FrameKind::dce;
  b.frame.payload.dtype = DType::float64;
  b.frame.payload.axes = {{"voxel", static_cast<std::int64_t>(voxels)}, {"time", samples, sim.time_s[1], "s"}};
  b.frame.vectors[PerfusionFitStage::kTimeVector] = sim.time_s;
  b.frame.vectors[PerfusionFitStage::kArterialVector] = sim.arterial;
  b.frame.vectors[PerfusionFitStage::kPortalVector] = sim.portal;
  b.tissue = sim.tissue;
  return b;
}

std::unique_ptr<Stage> make_stage() {
  return PerfusionFitStage::info().create(default_params(PerfusionFitStage::info().params));
}

std::vector<double> run_on_cpu(Stage& stage, const Batch& b, const StagePlan& plan, ThreadPool& pool) {
  std::vector<double> out(plan.outputs[0].spec.element_count(), -1.0);
  std::vector<std::byte> workspace(plan.workspace_bytes);
  void* outputs[] = {out.data()};
  StageIo io{.frame = b.frame, .input_spec = b.frame.payload, .input = b.tissue.data(), .outputs = outputs,
             .workspace = workspace.data(), .pool = &pool};
  REQUIRE(stage.run_cpu(io));
  return out;
}

}  // namespace

TEST_CASE("perfusion_fit declares float64 [voxel, 9] and refuses malformed batches", "[perfusion_fit_stage]") {
  auto stage = make_stage();
  Batch b = make_batch(10, 32, 1);
  const StagePlan plan = stage->configure(b.frame, b.frame.payload, Backend::cpu);
  REQUIRE(plan.outputs.size() == 1);
  CHECK(plan.outputs[0].name == "perfusion_maps");
  CHECK(plan.outputs[0].spec.dtype == DType::float64);
  CHECK(plan.outputs[0].spec.shape_string() == "float64[voxel=10, parameter=9]");

  auto refuses = [&](Batch bad, const std::string& why) {
    CHECK_THROWS_WITH(stage->configure(bad.frame, bad.frame.payload, Backend::cpu), Catch::Contains(why));
  };
  Batch wrong_kind = b;
  wrong_kind.frame.kind = FrameKind::rf;
  refuses(wrong_kind, "expected a dce frame");
  Batch wrong_type = b;
  wrong_type.frame.payload.dtype = DType::float32;
  refuses(wrong_type, "expected float64 [voxel, time]");
  Batch no_portal = b;
  no_portal.frame.vectors.erase(PerfusionFitStage::kPortalVector);
  refuses(no_portal, "no 'portal_input' vector");
  Batch short_time = b;
  short_time.frame.vectors[PerfusionFitStage::kTimeVector].pop_back();
  refuses(short_time, "vector 'time_s' has 31 values, the batch has 32 time points");
  Batch jitter = b;
  jitter.frame.vectors[PerfusionFitStage::kTimeVector][7] += 0.3;
  refuses(jitter, "uniform");
  Batch nan_input = b;
  nan_input.frame.vectors[PerfusionFitStage::kArterialVector][3] = NAN;
  refuses(nan_input, "arterial_input has a NaN");
}

TEST_CASE("perfusion_fit on the CPU writes the fit library's results and NaN rows for NaN voxels",
          "[perfusion_fit_stage]") {
  auto stage = make_stage();
  const std::uint64_t seed = test::fresh_seed();
  Batch b = make_batch(300, 48, seed);
  b.tissue[17 * 48 + 20] = NAN;
  const StagePlan plan = stage->configure(b.frame, b.frame.payload, Backend::cpu);
  ThreadPool pool(2);
  const auto out = run_on_cpu(*stage, b, plan, pool);
  FitProblem problem(b.frame.vectors.at("time_s"), b.frame.vectors.at("arterial_input"),
                     b.frame.vectors.at("portal_input"));
  std::vector<VoxelFit> fits(300);
  fit_voxels_cpu(problem, FitSettings{}, b.tissue.data(), 300, fits.data(), pool);
  for (std::size_t v = 0; v < 300; ++v) {
    const double* row = out.data() + v * 9;
    if (v == 17) {
      CHECK(std::isnan(row[0]));
      CHECK(row[6] == 0);
      CHECK(row[8] == 0);
      continue;
    }
    for (int j = 0; j < 5; ++j) REQUIRE(row[j] == fits[v].parameters[j]);  // same code, same bits
    REQUIRE(row[5] == fits[v].cost);
    REQUIRE(row[6] == fits[v].iterations);
    REQUIRE(row[7] == fits[v].evaluations);
    REQUIRE(row[8] == (fits[v].stop == 0 ? 1.0 : 0.0));
  }
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("perfusion_fit on CUDA equals the CPU run", "[perfusion_fit_stage][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  auto stage = make_stage();
  const std::uint64_t seed = test::fresh_seed();
  const std::size_t voxels = 5000;
  Batch b = make_batch(voxels, 48, seed);
  b.tissue[99 * 48] = NAN;
  ThreadPool pool(0);
  const StagePlan cpu_plan = stage->configure(b.frame, b.frame.payload, Backend::cpu);
  const auto expected = run_on_cpu(*stage, b, cpu_plan, pool);
  const StagePlan plan = stage->configure(b.frame, b.frame.payload, Backend::cuda);
  const std::size_t out_bytes = plan.outputs[0].spec.byte_size();
  double *d_in = nullptr, *d_out = nullptr;
  void* d_work = nullptr;
  void* staging = nullptr;
  cudaStream_t stream = nullptr;
  SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
  SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_in), b.tissue.size() * sizeof(double)));
  SONOPIPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_out), out_bytes));
  SONOPIPE_CUDA_CHECK(cudaMalloc(&d_work, plan.workspace_bytes));
  SONOPIPE_CUDA_CHECK(cudaMallocHost(&staging, plan.host_staging_bytes));
  SONOPIPE_CUDA_CHECK(cudaMemset(d_out, 0xff, out_bytes));  // NaN poison: every row must be written
  SONOPIPE_CUDA_CHECK(cudaMemcpy(d_in, b.tissue.data(), b.tissue.size() * sizeof(double), cudaMemcpyHostToDevice));
  void* outputs[] = {d_out};
  StageIo io{.frame = b.frame, .input_spec = b.frame.payload, .input = d_in, .outputs = outputs,
             .workspace = d_work, .host_staging = staging, .stream = stream};
  REQUIRE(stage->run_cuda(io));
  std::vector<double> got(expected.size());
  SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(got.data(), d_out, out_bytes, cudaMemcpyDeviceToHost, stream));
  SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_work);
  cudaFreeHost(staging);
  cudaStreamDestroy(stream);
  // Same code without FMA and with a portable exp on both sides: identical bits expected.
  std::size_t differing = 0;
  for (std::size_t k = 0; k < got.size(); ++k)
    if (!(got[k] == expected[k] || (std::isnan(got[k]) && std::isnan(expected[k])))) ++differing;
  CHECK(differing == 0);
  CHECK(std::isnan(got[99 * 9]));
}
#endif
