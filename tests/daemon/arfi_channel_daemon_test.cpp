// ARFI from channel data through the real sonopiped: config/arfi_channel.yaml (beamform ->
// upsample -> loupas -> motion_filter) on simulated channel ensembles of a pushed speckle phantom
// (tools/sim/arfi_channel_sim.h) sent losslessly; the published displacement matches the truth.
#include <cstring>
#include <fstream>
#include <sstream>

#include "tests/daemon/daemon_harness.h"
#include "tests/stages/arfi/arfi_chain.h"
#include "tests/stages/arfi/arfi_channel.h"

using namespace sonopipe;

TEST_CASE("config/arfi_channel.yaml passes --check-config", "[daemon][arfi][beamform]") {
  test::DaemonHarness daemon("pipelines: [{name: demo, stages: [{type: convert}]}]");
  std::string output;
  CHECK(daemon.run_to_exit({"--config", test::source_path("config/arfi_channel.yaml"), "--check-config"}, output) == 0);
  INFO(output);
  CHECK(output.find(": ok, ") != std::string::npos);
}

TEST_CASE("ARFI channel ensembles through sonopiped with config/arfi_channel.yaml: published displacement matches truth",
          "[daemon][arfi][beamform][sim]") {
  test::DaemonHarness daemon(test::pipelines_of(test::source_path("config/arfi_channel.yaml")));
  daemon.start();
  ThreadPool pool(2);
  const std::uint64_t seed = test::fresh_seed();
  const double peaks_um[] = {5.0, -4.0};  // both signs through the daemon
  std::vector<sim::ArfiChannelResult> sets;
  for (std::uint64_t s = 0; s < 2; ++s) {
    sets.push_back(sim::simulate_arfi_channel(test::pushed_phantom(peaks_um[s], seed + s).config, &pool));
    sets.back().meta.sequence = s;
    sets.back().meta.acquisition_time_ns = static_cast<std::int64_t>(s) * 1000000;
    daemon.send(wire::frame_header_from_meta(sets.back().meta).SerializeAsString(), sets.back().data.data(),
                sets.back().data.size() * sizeof(float));
  }
  const auto results = daemon.receive_results(2, std::chrono::seconds(120));
  INFO("seed " << seed << "\n" << daemon.log());
  REQUIRE(results.size() == 2);
  for (std::uint64_t s = 0; s < 2; ++s) {
    const test::Received& r = results[s];
    const test::ChannelArfi c = test::pushed_phantom(peaks_um[s], seed + s);
    CHECK(r.topic == "result/arfi_channel/displacement_filtered");
    CHECK(r.header.input_sequence() == s);  // lossless and in order
    const TensorSpec spec = wire::tensor_spec_from_result(r.header);
    REQUIRE(spec.shape_string() == "float32[location=5, track=20, depth=461]");
    REQUIRE(r.payload.size() == spec.byte_size());
    test::ChainResult published;
    published.depths = spec.axes[2].size;
    published.displacement_um.resize(static_cast<std::size_t>(spec.element_count()));
    std::memcpy(published.displacement_um.data(), r.payload.data(), r.payload.size());
    const auto compared = test::compare_with_truth(published, test::filtered_truth(c, sets[s], pool), c.grid, 0.5);
    INFO("set " << s << " (peak " << peaks_um[s] << " um, backend " << r.header.backend() << "): bias "
                << compared.bias_um << " um, rms " << compared.rms_um << " um, gain " << compared.ratio);
    REQUIRE(compared.compared > 300);
    // The chain test's bounds (tests/stages/arfi/arfi_channel_chain_test.cpp): the daemon runs the same
    // stages on the same data, so it lands where the in-process chain does.
    CHECK(std::abs(compared.bias_um) < 0.03 * std::abs(peaks_um[s]));
    CHECK(compared.ratio == Approx(1.0).margin(0.05));
    CHECK(compared.rms_um < 0.08 * std::abs(peaks_um[s]));
  }
  auto reply = daemon.control("stop");
  REQUIRE(reply);
  CHECK(daemon.wait_exit() == 0);
}
