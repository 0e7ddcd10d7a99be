// End to end through the real sonopiped: config/arfi.yaml (convert -> upsample -> loupas ->
// motion_filter) on simulated ARFI sets sent losslessly (PUSH -> PULL); the published
// displacement must match the simulator's truth.
#include <fstream>
#include <sstream>

#include "stages/arfi/motion_filter/motion_filter.h"
#include "tests/daemon/daemon_harness.h"
#include "tests/stages/arfi/arfi_chain.h"
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

// Checks one published result against the simulator's truth after the same motion filter (the
// late tracks are not exactly at rest, so the filter shifts the truth a little too).
void check_published(const test::Received& r, std::uint64_t sequence, const sim::ArfiSimResult& set,
                     sim::ArfiSimConfig config, ThreadPool& pool) {
  CHECK(r.topic == "result/arfi/displacement_filtered");
  CHECK(r.header.input_sequence() == sequence);  // lossless and in order
  const TensorSpec spec = wire::tensor_spec_from_result(r.header);
  REQUIRE(spec.dtype == DType::float32);
  REQUIRE(spec.axes.size() == 3);
  REQUIRE(spec.axes[1].size == config.tracks);
  REQUIRE(spec.axes[2].size == (config.samples - 1) * 5 + 1);
  REQUIRE(r.payload.size() == spec.byte_size());
  MotionFilterStage filter(default_params(MotionFilterStage::info().params));
  TensorSpec truth_spec{.dtype = DType::float32,
                        .axes = {{"location", config.locations}, {"track", config.tracks}, {"depth", config.samples}}};
  std::vector<float> truth(set.displacement_um.begin(), set.displacement_um.end());
  auto filtered = test::run_stage_cpu(filter, set.meta, truth_spec, truth.data(), pool);
  std::vector<double> expected(filtered.as<float>(), filtered.as<float>() + truth.size());
  test::ChainResult published;
  published.depths = spec.axes[2].size;
  published.displacement_um.resize(spec.element_count());
  std::memcpy(published.displacement_um.data(), r.payload.data(), r.payload.size());
  const auto c = test::compare_with_truth(published, expected, config, 0.5);
  INFO("sequence " << sequence << " (peak " << config.peak_um << " um, backend " << r.header.backend() << "): bias "
                   << c.bias_um << " um, rms " << c.rms_um << " um, gain " << c.ratio << " over " << c.compared
                   << " samples, seed " << config.seed);
  REQUIRE(c.compared > 200);
  CHECK(std::abs(c.bias_um) < 0.02 * std::abs(config.peak_um));
  CHECK(c.ratio == Approx(1.0).margin(0.03));
  CHECK(c.rms_um < 0.1 * std::abs(config.peak_um));
}

sim::ArfiSimConfig small_set() {
  sim::ArfiSimConfig config;
  config.locations = 6;
  config.tracks = 30;
  config.samples = 240;
  config.focus_depth_m = 0.015;
  config.depth_sigma_m = 0.003;
  config.lateral_sigma_m = 1e-3;
  config.recovery_time_s = 1e-3;
  config.snr_db = 35;
  return config;
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
  sim::ArfiSimConfig config = small_set();
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
    config.seed = seed + s;
    config.peak_um = s == 1 ? -4.0 : 5.0;
    check_published(results[s], s, sets[s], config, pool);
  }
}

TEST_CASE("sonopipe-sim arfi recording replayed losslessly by sonopipe-replay through config/arfi.yaml matches truth", "[daemon][arfi][sim][tools]") {
  test::DaemonHarness daemon(arfi_config_settings());
  daemon.start();
  char dir_template[] = "/tmp/sonopipe-arfi-e2e-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string recording = dir + "/arfi.h5";
  sim::ArfiSimConfig config = small_set();
  config.seed = test::fresh_seed();
  const std::string simulate = "'" + test::binary_path("tools/sim/sonopipe-sim") + "' arfi --out " + recording +
                               " --sets 2 --locations 6 --tracks 30 --samples 240 --focus-m 0.015 --depth-sigma-m 0.003"
                               " --lateral-sigma-m 0.001 --recovery-s 0.001 --snr-db 35 --threads 2 --seed " +
                               std::to_string(config.seed) + " > " + dir + "/sim.log 2>&1";
  REQUIRE(std::system(simulate.c_str()) == 0);
  const std::string replay = "'" + test::binary_path("tools/replay/sonopipe-replay") + "' " + recording +
                             " --endpoint " + daemon.endpoint("ingest") + " --lossless --max > " + dir + "/replay.log 2>&1";
  REQUIRE(std::system(replay.c_str()) == 0);
  const auto results = daemon.receive_results(2, std::chrono::seconds(120));
  INFO(daemon.log());
  REQUIRE(results.size() == 2);
  ThreadPool pool(2);
  for (std::uint64_t s = 0; s < 2; ++s) {
    sim::ArfiSimConfig set_config = config;
    set_config.seed = config.seed + s;  // what the command gives set s (the field is the same)
    check_published(results[s], s, sim::simulate_arfi(set_config, &pool), set_config, pool);
  }
  std::system(("rm -rf " + dir).c_str());
}
