// sonopiped: the real-time pipeline daemon. Flags override the config file's backend and log level.
// Exit codes: 0 normal stop (after draining), 2 configuration error, 3 backend unavailable,
// 1 any other startup failure or a daemon thread that failed, 4 a second stop signal cut the drain short.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "daemon/backend_choice.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "runtime/plugin_loader.h"
#include "stages/registry.h"
#include "wire/version.h"

int main(int argc, char** argv) {
  using namespace sonopipe;
  block_stop_signals();  // before any thread starts, so only Daemon::run() sees SIGINT/SIGTERM
  wire::route_protobuf_log();

  CLI::App app{"sonopiped: real-time ultrasound pipeline daemon"};
  app.set_version_flag("--version", version_line("sonopiped"));
  std::string config_path, log_level, backend_flag;
  bool list_stages = false, markdown = false, check_config = false;
  std::vector<std::string> plugins;
  app.add_option("--config", config_path, "YAML configuration file (see config/demo.yaml)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (overrides the config)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--backend", backend_flag, "auto|cuda|cpu (overrides the config)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  app.add_flag("--list-stages", list_stages, "print every stage with its parameters and exit");
  app.add_flag("--markdown", markdown, "with --list-stages: print the table as Markdown (docs/stages.md)");
  app.add_option("--plugins", plugins, "with --list-stages: stage plugin libraries to load first");
  app.add_flag("--check-config", check_config, "load and check the config, print a summary and exit");
  CLI11_PARSE(app, argc, argv);

  if (list_stages) {
    StageRegistry stages = builtin_stages();
    for (const std::string& plugin : plugins) {
      try {
        load_stage_plugin(plugin, stages);
      } catch (const PluginError& e) {
        std::cerr << "sonopiped: plugin error: " << e.what() << "\n";
        return 2;
      }
    }
    std::cout << (markdown ? stages.describe_markdown() : stages.describe());
    return 0;
  }
  if (config_path.empty()) {
    std::cerr << "sonopiped: --config is required (or --list-stages)\n";
    return 2;
  }
  DaemonConfig config;
  try {
    config = load_config_file(config_path, builtin_stages());
  } catch (const ConfigError& e) {
    std::cerr << "sonopiped: config error: " << e.what() << "\n";
    return 2;
  }
  if (!log_level.empty()) config.log_level = log_level;
  if (!backend_flag.empty()) parse_backend_choice(backend_flag, config.backend);
  spdlog::set_level(spdlog::level::from_str(config.log_level));

  if (check_config) {
    std::cout << config_path << ": ok, " << config.pipelines.size() << " pipeline(s)\n";
    for (const PipelineConfig& pipeline : config.pipelines) {
      std::cout << "  " << pipeline.name << ":";
      for (const StageConfig& stage : pipeline.stages) std::cout << " " << stage.type;
      std::cout << "\n";
    }
    return 0;
  }

  BackendSelection backend;
  try {
    backend = choose_backend(config.backend, config.device, config.cpu_threads);
    if (backend.backend == Backend::cuda && config.cuda_wait_block && use_blocking_cuda_waits())
      spdlog::info("cuda_wait: block: threads waiting for the device sleep instead of spinning");
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 3;
  }
  try {
    Daemon daemon(std::move(config), std::move(backend));
    return daemon.run();
  } catch (const std::exception& e) {
    spdlog::error("sonopiped: {}", e.what());
    return 1;
  }
  return 0;
}
