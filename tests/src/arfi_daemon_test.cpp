// End to end through the real sonopiped: config/arfi.yaml (convert -> upsample -> loupas ->
// motion_filter) on simulated ARFI sets sent losslessly (PUSH -> PULL); the published
// displacement must match the simulator's truth.
#include <fstream>
#include <sstream>

#include "stages/motion_filter.h"
#include "tests/src/daemon_harness.h"
#include "tests/stages/arfi_chain.h"
#include "tools/sim/arfi_sim.h"

using namespace sonopipe;

namespace {

// config/arfi.yaml without its endpoint blocks (the harness supplies private ipc endpoints).
std::string arfi_config_settings() {
  std::ifstream file(test::source_path("config/arfi.yaml"));
  REQUIRE(file);
  std::stringstream kept;
  bool keep = false;
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("backend:", 0) == 0) keep = true;
    if (keep) kept << line << "\n";
  }
  return kept.str();
}

}  // namespace

TEST_CASE("config/arfi.yaml passes --check-config", "[daemon][arfi]") {
  test::DaemonHarness daemon("pipelines: [{name: demo, stages: [{type: convert}]}]");
  std::string output;
  CHECK(daemon.run_to_exit({"--config", test::source_path("config/arfi.yaml"), "--check-config"}, output) == 0);
  INFO(output);
  CHECK(output.find(": ok, ") != std::string::npos);
}

TEST_CASE("ARFI sets through sonopiped with config/arfi.yaml: published displacement matches truth", "[daemon][arfi][sim]") {
  test::DaemonHarness daemon(arfi_config_settings());
  daemon.start();
  ThreadPool pool(2);
  sim::ArfiSimConfig config;
  config.locations = 6;
  config.tracks = 30;
  config.samples = 240;
  config.focus_depth_m = 0.015;
  config.depth_sigma_m = 0.003;
  config.lateral_sigma_m = 1e-3;
  config.recovery_time_s = 1e-3;
  config.snr_db = 35;
  const std::uint64_t seed = test::fresh_seed();
  constexpr int kSets = 3;
  std::vector<sim::ArfiSimResult> sets;
  for (int s = 0; s < kSets; ++s) {
    config.seed = seed + s;
    config.peak_um = s == 1 ? -4.0 : 5.0;  // both signs through the daemon
    sets.push_back(sim::simulate_arfi(config, &pool));
    sets.back().meta.sequence = s;
    sets.back().meta.acquisition_time_ns = s * 1000000;
    daemon.send(wire::frame_header_from_meta(sets.back().meta).SerializeAsString(), sets.back().payload.data(),
                sets.back().payload.size() * sizeof(std::int16_t));
  }
  const auto results = daemon.receive_results(kSets, std::chrono::seconds(120));
  INFO(daemon.log());
  REQUIRE(results.size() == kSets);
  for (int s = 0; s < kSets; ++s) {
    const auto& r = results[s];
    CHECK(r.topic == "result/arfi/displacement_filtered");
    CHECK(r.header.input_sequence() == static_cast<std::uint64_t>(s));  // lossless and in order
    const TensorSpec spec = wire::tensor_spec_from_result(r.header);
    REQUIRE(spec.dtype == DType::float32);
    REQUIRE(spec.axes.size() == 3);
    REQUIRE(spec.axes[1].size == config.tracks);
    REQUIRE(spec.axes[2].size == (config.samples - 1) * 5 + 1);
    REQUIRE(r.payload.size() == spec.byte_size());

    // Expected: the truth after the same motion filter (the late tracks are not exactly at rest).
    MotionFilterStage filter(default_params(MotionFilterStage::info().params));
    TensorSpec truth_spec{.dtype = DType::float32,
                          .axes = {{"location", config.locations}, {"track", config.tracks}, {"depth", config.samples}}};
    std::vector<float> truth(sets[s].displacement_um.begin(), sets[s].displacement_um.end());
    auto filtered = test::run_stage_cpu(filter, sets[s].meta, truth_spec, truth.data(), pool);
    std::vector<double> expected(filtered.as<float>(), filtered.as<float>() + truth.size());

    test::ChainResult published;
    published.depths = spec.axes[2].size;
    published.displacement_um.resize(spec.element_count());
    std::memcpy(published.displacement_um.data(), r.payload.data(), r.payload.size());
    config.peak_um = s == 1 ? -4.0 : 5.0;
    const auto c = test::compare_with_truth(published, expected, config, 0.5);
    INFO("set " << s << " (peak " << config.peak_um << " um, backend " << r.header.backend() << "): bias " << c.bias_um
                << " um, rms " << c.rms_um << " um, gain " << c.ratio << " over " << c.compared << " samples, seed " << seed);
    REQUIRE(c.compared > 200);
    CHECK(std::abs(c.bias_um) < 0.02 * std::abs(config.peak_um));
    CHECK(c.ratio == Approx(1.0).margin(0.03));
    CHECK(c.rms_um < 0.1 * std::abs(config.peak_um));
  }
}
