// The C library's live parameters (sp_control_get / sp_control_set) against a real sonopiped: a
// plain C program (client_control_program.c, linked to the library alone) sets and reads the scale
// of `convert`, and every refusal carries the daemon's reason. Here: it exits 0, the daemon holds the
// value it set, and the next result carries the generation and the new scale.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/daemon/daemon_harness.h"

namespace sonopipe::test {

TEST_CASE("a C program changes a live parameter through libsonopipe-client", "[client][live]") {
  DaemonHarness daemon("backend: cpu\npipelines:\n  - {name: demo, stages: [{type: convert, params: {scale: 1}}]}\n");
  daemon.start();
  const std::string output = (std::filesystem::path(daemon.config_path()).parent_path() / "control.out").string();
  const int status = std::system((binary_path("tests/client_control_program") + " '" + daemon.endpoint("control") +
                                  "' > '" + output + "' 2>&1").c_str());
  std::ifstream file(output);
  std::stringstream printed;
  printed << file.rdbuf();
  INFO(printed.str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(printed.str().find("client_control_program: ok") != std::string::npos);
  auto reply = daemon.control("get", "demo.convert.scale");
  REQUIRE(reply);
  REQUIRE(reply->ok());
  CHECK(reply->parameters(0).value() == "4");
  CHECK(reply->parameters(0).generation() == 1);

  std::mt19937_64 rng(fresh_seed());
  const auto samples = random_samples(2 * 8 * 2, rng);
  daemon.send(iq_header(0, 2, 8).SerializeAsString(), samples.data(), samples.size() * 2);
  auto results = daemon.receive_results(1);
  REQUIRE(results.size() == 1);
  CHECK(results[0].header.param_generation() == 1);
  std::vector<float> values(samples.size());
  REQUIRE(results[0].payload.size() == values.size() * sizeof(float));
  std::memcpy(values.data(), results[0].payload.data(), results[0].payload.size());
  for (std::size_t i = 0; i < values.size(); ++i) CHECK(values[i] == 4.0f * static_cast<float>(samples[i]));
}

}  // namespace sonopipe::test
