// Stage plugins (`plugins:` in the config, `sonopiped --list-stages --plugins`): a plugin's stages are
// used like built-in ones, and every way a plugin can be unusable is a config error naming the file,
// the line and the library, never a crash. The plugins are built by tests/runtime/tests.cmake.
#include <array>
#include <complex>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sys/wait.h>

#include "runtime/pipeline_def.h"
#include "sdk/thread_pool.h"
#include "daemon/config.h"
#include "tests/stages/common/stage_runner.h"
#include "tests/support/test_support.h"
#include "stages/registry.h"

using namespace sonopipe;

namespace {

std::string plugin(const std::string& name) { return test::binary_path("tests/plugins/lib" + name + ".so"); }

std::string config_with_plugin(const std::string& path, const std::string& stage = "convert") {
  return "log_level: warn\n"
         "plugins: [\"" + path + "\"]\n"
         "pipelines: [{name: demo, stages: [{type: " + stage + "}]}]\n";
}

std::string error_of(const std::string& text, const std::string& source = "test.yaml") {
  try {
    parse_config(text, source, builtin_stages());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

struct Command {
  int exit_code;
  std::string output;
};

Command run(const std::string& command) {
  Command result{};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe)) result.output += buffer.data();
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

TEST_CASE("a plugin's stage is declared, validated and run like a built-in stage", "[plugin][config]") {
  const DaemonConfig config = parse_config(
      "plugins: [\"" + plugin("log_envelope") + "\"]\n"
      "pipelines: [{name: bmode, stages: [{type: log_envelope, params: {reference: 2.0, floor_db: -40}}]}]\n",
      "test.yaml", builtin_stages());
  REQUIRE(config.registry);
  REQUIRE(config.registry->find("log_envelope"));
  CHECK(config.registry->find("convert"));  // the built-ins stay
  CHECK(config.plugins == std::vector<std::string>{plugin("log_envelope")});
  CHECK(error_of(config_with_plugin(plugin("log_envelope"), "log_envelope")) == "no error");
  // Parameters are checked against the plugin's declarations.
  CHECK_THAT(error_of("plugins: [\"" + plugin("log_envelope") + "\"]\n"
                      "pipelines: [{name: b, stages: [{type: log_envelope, params: {floor_db: 3}}]}]\n"),
             Catch::Contains("test.yaml:2: pipelines[0].stages[0].params.floor_db: expected a number in"));

  // Run it: out = max(20 log10(|z| / reference), floor) on fresh random IQ, written here independently.
  std::vector<PipelineStage> stages = build_stages(config.pipelines[0], *config.registry);
  REQUIRE(stages.size() == 1);
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::complex<float>> iq(4096);
  for (auto& z : iq) z = {normal(rng), normal(rng)};
  iq[7] = 0.0f;  // zero magnitude -> the floor
  FrameMeta frame;
  frame.payload = {.dtype = DType::complex64, .axes = {{"line", 64}, {"sample", 64}}};
  ThreadPool pool(2);
  const test::StageRun result = test::run_stage_cpu(*stages[0].stage, frame, frame.payload, iq.data(), pool);
  REQUIRE(result.plan.outputs.size() == 1);
  CHECK(result.plan.outputs[0].spec.dtype == DType::float32);
  CHECK(result.plan.outputs[0].spec.unit == "dB");
  for (std::size_t i = 0; i < iq.size(); ++i) {
    const double expected = std::max(-40.0, 20.0 * std::log10(std::abs(std::complex<double>(iq[i])) / 2.0));
    // float32 output of a double computation: half an ulp of values up to ~40 dB.
    REQUIRE(result.as<float>()[i] == Approx(expected).margin(1e-5));
  }
}

TEST_CASE("a relative plugin path is resolved against the config file's folder", "[plugin][config]") {
  const std::string folder = test::binary_path("tests/plugins");
  const DaemonConfig config = parse_config(config_with_plugin("liblog_envelope.so", "log_envelope"),
                                           folder + "/daemon.yaml", builtin_stages());
  CHECK(config.plugins == std::vector<std::string>{folder + "/liblog_envelope.so"});
}

TEST_CASE("an unusable plugin is a config error with file:line and the library's path", "[plugin][config]") {
  const std::string prefix = "test.yaml:2: plugins[0]: expected a loadable sonopipe stage plugin: ";
  struct Case {
    const char* name;
    const char* reason;
  };
  // The mismatching plugin says it was built for the daemon's ABI version + 1 (plugins/abi_mismatch.cpp).
  const std::string abi_mismatch = "built for stage ABI version " + std::to_string(SONOPIPE_STAGE_ABI_VERSION + 1) +
                                   ", this sonopiped has " + std::to_string(SONOPIPE_STAGE_ABI_VERSION);
  for (const Case& c : {Case{"abi_mismatch", abi_mismatch.c_str()},
                        Case{"no_entry_point", "not a sonopipe stage plugin: no symbol sonopipe_plugin_abi_version"},
                        Case{"throwing", "registering its stages threw: licence server unreachable"},
                        Case{"duplicate_name", "stage 'convert' is already registered"}}) {
    INFO(c.name);
    CHECK_THAT(error_of(config_with_plugin(plugin(c.name))),
               Catch::StartsWith(prefix + plugin(c.name) + ": " + c.reason));
  }
  CHECK_THAT(error_of(config_with_plugin("/nonexistent/libnothing.so")),
             Catch::StartsWith(prefix + "/nonexistent/libnothing.so: cannot load the library: "));
  CHECK_THAT(error_of("plugins: libx.so\npipelines: [{name: d, stages: [{type: convert}]}]\n"),
             Catch::StartsWith("test.yaml:1: plugins: expected a non-empty list of shared libraries"));
  // Without the plugin its stage is unknown.
  CHECK_THAT(error_of("pipelines: [{name: d, stages: [{type: log_envelope}]}]\n"),
             Catch::Contains("pipelines[0].stages[0].type: unknown stage 'log_envelope'"));
}

TEST_CASE("sonopiped lists plugin stages and exits 2 on a bad plugin", "[plugin][daemon]") {
  const std::string daemon = test::binary_path("daemon/sonopiped");
  const Command listed = run(daemon + " --list-stages --plugins " + plugin("log_envelope"));
  CHECK(listed.exit_code == 0);
  CHECK_THAT(listed.output, Catch::Contains("log_envelope — B-mode log compression"));
  CHECK_THAT(listed.output, Catch::Contains("floor_db (real, default -60"));
  CHECK_THAT(listed.output, Catch::Contains("convert — "));

  const Command refused = run(daemon + " --list-stages --plugins " + plugin("abi_mismatch"));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains(plugin("abi_mismatch") + ": built for stage ABI version " +
                                            std::to_string(SONOPIPE_STAGE_ABI_VERSION + 1)));

  const std::string path = test::binary_path("tests/plugins/throwing.yaml");
  std::ofstream(path) << config_with_plugin(plugin("throwing"));
  const Command config_error = run(daemon + " --check-config --config " + path);
  CHECK(config_error.exit_code == 2);
  CHECK_THAT(config_error.output, Catch::Contains(path + ":2: plugins[0]: expected a loadable sonopipe stage plugin: " +
                                                  plugin("throwing") + ": registering its stages threw"));
}
