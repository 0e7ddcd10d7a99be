// `devices` in the config: per pipeline or as the default, `all` or a list; and which devices a
// pipeline then runs on for a given number of visible GPUs (the CPU backend has one lane).
#include "src/backend_choice.h"
#include "src/config.h"

#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

DaemonConfig parse(const std::string& text) { return parse_config(text, "test.yaml", builtin_stages()); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string resolve_error(const DaemonConfig& config, int visible) {
  try {
    resolve_devices(config.pipelines[0], config, Backend::cuda, visible);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("devices: a pipeline's own list wins over the default, which wins over `device`", "[config][devices]") {
  DaemonConfig config = parse(
      "devices: all\n"
      "pipelines:\n"
      "  - {name: a, stages: [{type: convert}]}\n"
      "  - {name: b, devices: [1, 0], stages: [{type: convert}]}\n");
  CHECK(config.devices.all);
  CHECK_FALSE(config.pipelines[0].devices.given());
  CHECK(config.pipelines[1].devices.ids == std::vector<int>{1, 0});
  CHECK(resolve_devices(config.pipelines[0], config, Backend::cuda, 3) == std::vector<int>{0, 1, 2});
  CHECK(resolve_devices(config.pipelines[1], config, Backend::cuda, 3) == std::vector<int>{1, 0});
  // The CPU backend runs every pipeline on its one pool.
  CHECK(resolve_devices(config.pipelines[0], config, Backend::cpu, 0) == std::vector<int>{0});

  DaemonConfig single = parse("device: 2\npipelines: [{name: a, stages: [{type: convert}]}]\n");
  CHECK(resolve_devices(single.pipelines[0], single, Backend::cuda, 4) == std::vector<int>{2});
}

TEST_CASE("devices: mistakes name the line and key", "[config][devices]") {
  CHECK_THAT(error_of("devices: [0, 0]\npipelines: [{name: a, stages: [{type: convert}]}]\n"),
             Catch::Contains("test.yaml:1: devices[1]: device 0 is listed twice"));
  CHECK_THAT(error_of("devices: some\npipelines: [{name: a, stages: [{type: convert}]}]\n"),
             Catch::Contains("devices: expected `all` or a non-empty list of CUDA device ids"));
  CHECK_THAT(error_of("device: 0\ndevices: [1]\npipelines: [{name: a, stages: [{type: convert}]}]\n"),
             Catch::Contains("give either `device` or `devices`, not both"));
  CHECK_THAT(error_of("pipelines:\n  - {name: a, devices: [], stages: [{type: convert}]}\n"),
             Catch::Contains("test.yaml:2: pipelines[0].devices: expected `all` or a non-empty list"));
  CHECK_THAT(error_of("pipelines:\n  - {name: a, devices: [64], stages: [{type: convert}]}\n"),
             Catch::Contains("pipelines[0].devices[0]: expected an integer in [0, 63]"));
}

TEST_CASE("devices: a device that is not visible is an error naming the pipeline", "[config][devices]") {
  DaemonConfig config = parse("pipelines: [{name: strain, devices: [0, 3], stages: [{type: convert}]}]\n");
  CHECK(resolve_error(config, 2) == "pipeline strain: device 3 is not visible (2 CUDA devices)");
  CHECK(resolve_error(config, 4) == "no error");
  DaemonConfig all = parse("devices: all\npipelines: [{name: p, stages: [{type: convert}]}]\n");
  CHECK(resolve_error(all, 0) == "pipeline p: no CUDA device visible");
}
