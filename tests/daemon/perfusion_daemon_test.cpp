// The perfusion chain through the real sonopiped binary: DCE batches in over ZeroMQ, the
// perfusion_fit stage, parameter maps out (see daemon_harness.h).
#include <cmath>
#include <cstring>

#include "sdk/thread_pool.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit.h"
#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"
#include "tests/daemon/daemon_harness.h"
#include "tools/sim/perfusion_sim.h"

using namespace sonopipe;
using namespace std::chrono_literals;

namespace {

// backend auto: the CPU here and in CI, CUDA on the device machine; both give the same bits.
const char* kPerfusionPipeline = R"(
backend: auto
cpu_threads: 2
slots: 2
queue_depth: 8
non_finite: pass
pipelines:
  - name: perfusion
    match: {kinds: [dce]}
    stages:
      - {type: perfusion_fit, params: {convolution: recursive, start: [10, 80, 200, 2, 3]}}
)";

struct Batch {
  FrameMeta meta;
  std::vector<double> tissue;
};

Batch make_batch(std::uint64_t sequence, std::size_t voxels, int samples, std::uint64_t seed) {
  sim::PerfusionSimSettings s;
  s.samples = samples;
  s.duration_s = samples * 2.37;  // wang2012's patient sampling
  s.cnr_tissue = 40;
  sim::Rng rng(seed);
  std::vector<double> truths;
  auto sim = sim::simulate_varied(s, voxels, 0.2, rng, truths);
  Batch b;
  b.meta.sequence = sequence;
  b.meta.acquisition_time_ns = 1000 + static_cast<std::int64_t>(sequence);
  b.meta.kind = FrameKind::dce;
  b.meta.payload.dtype = DType::float64;
  b.meta.payload.axes = {{"voxel", static_cast<std::int64_t>(voxels)}, {"time", samples, sim.time_s[1], "s"}};
  b.meta.vectors[PerfusionFitStage::kTimeVector] = sim.time_s;
  b.meta.vectors[PerfusionFitStage::kArterialVector] = sim.arterial;
  b.meta.vectors[PerfusionFitStage::kPortalVector] = sim.portal;
  b.tissue = std::move(sim.tissue);
  return b;
}

void send(test::DaemonHarness& daemon, const Batch& b) {
  daemon.send(wire::frame_header_from_meta(b.meta).SerializeAsString(), b.tissue.data(),
              b.tissue.size() * sizeof(double));
}

}  // namespace

TEST_CASE("sonopiped fits DCE batches with perfusion_fit and publishes the parameter maps",
          "[daemon][perfusion]") {
  test::DaemonHarness daemon(kPerfusionPipeline);
  daemon.start();
  const std::uint64_t seed = test::fresh_seed();
  constexpr std::size_t kVoxels = 150;
  constexpr int kSamples = 48;
  std::vector<Batch> batches;
  for (std::uint64_t n = 0; n < 3; ++n) batches.push_back(make_batch(n, kVoxels, kSamples, seed + n));
  batches[1].tissue[5 * kSamples + 9] = std::nan("");  // one bad voxel: a NaN row, not a lost batch
  for (const auto& b : batches) send(daemon, b);
  // A batch without its portal input is refused by the stage, counted, and the next one flows.
  Batch broken = make_batch(3, 10, kSamples, seed);
  broken.meta.vectors.erase(PerfusionFitStage::kPortalVector);
  send(daemon, broken);
  Batch after = make_batch(4, 20, kSamples, seed + 9);
  send(daemon, after);
  batches.push_back(after);

  auto results = daemon.receive_results(4, 60s);
  REQUIRE(results.size() == 4);
  ThreadPool pool(2);
  for (std::size_t k = 0; k < results.size(); ++k) {
    const auto& r = results[k];
    const Batch& b = batches[k];
    INFO("result " << k << " (input sequence " << r.header.input_sequence() << ")");
    CHECK(r.topic == "result/perfusion/perfusion_maps");
    CHECK(r.header.input_sequence() == b.meta.sequence);
    REQUIRE(r.header.element_type() == v1::ELEMENT_TYPE_FLOAT64);
    REQUIRE(r.header.axes_size() == 2);
    const std::size_t voxels = b.tissue.size() / kSamples;
    CHECK(r.header.axes(0).size() == voxels);
    CHECK(r.header.axes(1).name() == "parameter");
    REQUIRE(r.payload.size() == voxels * 9 * sizeof(double));
    std::vector<double> rows(voxels * 9);
    std::memcpy(rows.data(), r.payload.data(), r.payload.size());
    // The daemon's result equals the fit library's, bit for bit (same code on CPU and CUDA).
    perfusion::FitProblem problem(b.meta.vectors.at("time_s"), b.meta.vectors.at("arterial_input"),
                                  b.meta.vectors.at("portal_input"));
    std::vector<perfusion::VoxelFit> fits(voxels);
    perfusion::fit_voxels_cpu(problem, perfusion::FitSettings{}, b.tissue.data(), voxels, fits.data(), pool);
    for (std::size_t v = 0; v < voxels; ++v) {
      if (k == 1 && v == 5) {
        CHECK(std::isnan(rows[v * 9]));
        CHECK(rows[v * 9 + 6] == 0);
        continue;
      }
      for (int j = 0; j < 5; ++j) REQUIRE(rows[v * 9 + j] == fits[v].parameters[j]);
      REQUIRE(rows[v * 9 + 6] == fits[v].iterations);
    }
  }
  // A subscriber can see a result before the completion thread counts it, so wait for both counts.
  v1::Status status = daemon.wait_for_status(
      [](const v1::Status& s) { return s.frames_received() == 5 && s.results_published() >= 4; });
  CHECK(status.results_published() == 4);
  CHECK(daemon.log().find("no 'portal_input' vector") != std::string::npos);
  auto reply = daemon.control("stop");
  REQUIRE(reply);
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("config/perfusion.yaml passes --check-config and lists perfusion_fit", "[daemon][perfusion]") {
  test::DaemonHarness daemon("pipelines: [{name: p, stages: [{type: perfusion_fit}]}]");
  std::string output;
  CHECK(daemon.run_to_exit({"--config", test::source_path("config/perfusion.yaml"), "--check-config"}, output) == 0);
  CHECK(output.find(": ok, ") != std::string::npos);
  CHECK(daemon.run_to_exit({"--list-stages"}, output) == 0);
  CHECK(output.find("perfusion_fit") != std::string::npos);
  CHECK(output.find("cost_tolerance") != std::string::npos);
  const std::string bad = daemon.config_path() + ".bad.yaml";
  std::ofstream(bad) << "pipelines: [{name: p, stages: [{type: perfusion_fit, params: {convolution: spline}}]}]\n";
  CHECK(daemon.run_to_exit({"--config", bad, "--check-config"}, output) == 2);
  CHECK(output.find("convolution") != std::string::npos);
}
